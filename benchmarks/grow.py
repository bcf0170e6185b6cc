"""Grow a real trace to any size, keeping its layout byte for byte.

The events of the source are repeated as text: each copy is the source's own
text with its timestamps shifted past the previous copy's and its
correlation, flow and External ids shifted past the previous copy's. Only
those numbers change; the whitespace, indentation, key order and number
formats stay the source's, so a trace that ``torch.profiler`` wrote grows into
one laid out as torch lays it out (a leading newline, ``"schemaVersion"`` and
``"deviceProperties"`` first, one event over several indented lines,
``"traceName"`` after the list). The metadata events (``ph`` "M") are written
once, after the copies, where torch writes them.

The result stays a recording of as many steps as the source had, each longer:
a larger model profiled with the same schedule, not thousands of steps. The
copies are shared out among the source's ``ProfilerStep#N`` spans, each
written once (in the source's own text, its ``ts`` and ``dur`` changed) over
its share; the copies keep none of their own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = re.compile(rb"\}(\s*),(\s*)\{")
_TS = re.compile(rb'("ts"\s*:\s*)(\d+)(?:\.(\d+))?')
_IDS = re.compile(rb'("(?:correlation|External id|id)"\s*:\s*)(\d+)')
_STEP = re.compile(rb'"name"\s*:\s*"ProfilerStep#(\d+)"')
_DUR = re.compile(rb'("dur"\s*:\s*)(\d+)(?:\.(\d+))?')


def _split(text: bytes) -> tuple[bytes, list[bytes], bytes, bytes]:
    """Head (up to the list's first event), the events' texts, the separator between them, and the tail."""
    m = _EVENTS.search(text)
    if m is None:
        raise ValueError("no traceEvents list")
    s = text.decode()
    n_events = len(json.loads(s)["traceEvents"])
    open_at = len(text[:m.end() - 1].decode())  # the list's '[', in characters
    _, close_at = json.JSONDecoder().raw_decode(s, open_at)
    end = text.rindex(b"}", 0, len(s[:close_at].encode())) + 1  # the last event's '}'
    start = text.index(b"{", m.end())
    pieces, pos = [], start
    cuts = [c for c in _CUT.finditer(text, start, end)]
    for c in cuts:
        pieces.append(text[pos:c.start() + 1])
        pos = c.end() - 1
    pieces.append(text[pos:end])
    if len(pieces) != n_events:
        raise ValueError(f"the events did not split cleanly ({len(pieces)} pieces for {n_events} events)")
    sep = cuts[0].group(0)[1:-1] if cuts else b",\n"
    return text[:start], pieces, sep, text[end:]


def _shift_ts(by_ns: int):
    """Add ``by_ns`` to a timestamp in microseconds, written with as many decimals as before."""
    def sub(m: re.Match) -> bytes:
        frac = m.group(3) or b""
        scale = 10 ** len(frac)
        q, r = divmod(int(m.group(2) + frac) + by_ns * scale // 1000, scale)
        return m.group(1) + (b"%d.%0*d" % (q, len(frac), r) if frac else b"%d" % q)
    return sub


def _set_number(pattern: re.Pattern, text: bytes, us: float) -> bytes:
    """``text`` with the number that ``pattern`` finds set to ``us`` microseconds, with as many decimals as before."""
    def sub(m: re.Match) -> bytes:
        frac = m.group(3) or b""
        q, r = divmod(round(us * 10 ** len(frac)), 10 ** len(frac))
        return m.group(1) + (b"%d.%0*d" % (q, len(frac), r) if frac else b"%d" % q)
    return pattern.sub(sub, text, count=1)


def grow(source: Path, target: Path, size: int) -> int:
    """Write ``target``: ``source``'s events repeated until the file is about ``size`` bytes. Returns the copies."""
    text = source.read_bytes()
    head, pieces, sep, tail = _split(text)
    events = json.loads(text)["traceEvents"]
    meta = [p for p, e in zip(pieces, events) if e.get("ph") == "M"]
    is_step = [str(e.get("name", "")).startswith("ProfilerStep#") for e in events]
    steps = [(p, e) for p, e, s in zip(pieces, events, is_step) if s and e.get("cat") == "user_annotation"]
    rest = [p for p, e, s in zip(pieces, events, is_step) if e.get("ph") != "M" and not s]
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    period_us = int(max(e["ts"] + e.get("dur", 0) for e in timed) - t0) + 1000
    ids = [int(m.group(2)) for p in rest for m in _IDS.finditer(p)]
    id_shift = 10 ** len(str(max(ids, default=0) + 1))
    one = len(sep.join(rest))
    copies = max(1, round((size - len(head) - len(tail)) / (one + len(sep))))
    # copy r belongs to step r * len(steps) // copies
    first_copy = [k * copies // max(len(steps), 1) for k in range(len(steps))] + [copies]
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    with open(part, "wb") as f:
        f.write(head)
        block = sep.join(rest)
        wrote = False
        for r in range(copies):
            out = []
            for k, (piece, _) in enumerate(steps):
                if first_copy[k] == r:  # this step's span, once, over its share of the copies
                    lo, hi = first_copy[k], first_copy[k + 1]
                    piece = _set_number(_TS, piece, t0 + lo * period_us)
                    out.append(_set_number(_DUR, piece, (hi - lo) * period_us - 500))
            if r:
                shifted = _TS.sub(_shift_ts(r * period_us * 1000), block)
                out.append(_IDS.sub(lambda m: m.group(1) + b"%d" % (int(m.group(2)) + r * id_shift), shifted))
            else:
                out.append(block)
            f.write((sep if wrote else b"") + sep.join(out))
            wrote = True
        for p in meta:
            f.write(sep + p)
        f.write(tail)
    part.replace(target)
    return copies
