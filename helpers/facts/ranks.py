"""A folder of rank traces, one per rank of a distributed job, read together and compared side by side.

``python -m helpers summarize DIR`` and ``diagnose DIR`` come here: :func:`read_ranks`
reads each rank's trace (one at a time), puts the ranks on one clock when the
traces allow it, matches their collectives and names the straggler, with
:mod:`helpers.facts.collectives` (where the definitions are); :func:`ranks_text`
is the folder's summary as the command line prints it.

Imports neither torch nor pandas.
"""

from __future__ import annotations

import errno
import os
import stat
import statistics
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from .collectives import (COMMUNICATION_BOUND_SHARE, NOISE_PER_COLLECTIVE_US, Collective, Match, RankRow, Straggler,
                          clock_origin_us, find_straggler, match, rank_facts, rank_of, world_size_of)
from .steps import window
from .text import short, us
from ..reader.trace import Trace, TraceError, read_trace


# --- a folder of rank traces -------------------------------------------------------------


@dataclass
class Ranks:
    """Every rank of a folder, side by side."""

    folder: str
    ranks: list[RankRow]  # by rank
    world_size: int | None
    backend: str | None
    clock: str | None  # how events were put on one clock, or None: no shared clock
    matched: list[Match]
    unmatched: dict[int, int]  # rank -> collectives with no partner on some rank
    straggler: Straggler
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    set_aside: list[tuple[str, str]] = field(default_factory=list)  # (file, what was left out of it and why)

    @property
    def end_spread_us(self) -> float | None:
        """Median, over matched collectives, of the gap between the first and last rank's end.

        Ranks leave a collective at nearly the same moment, so a small value
        says the clocks and the matching agree; a large one says to doubt both.
        """
        if not self.matched or self.clock is None:
            return None
        return statistics.median(max(m.ends_us) - min(m.ends_us) for m in self.matched)

    def to_json(self) -> dict[str, Any]:
        """The command line's ``summarize DIR --json`` object."""
        def rnd(v: Any) -> Any:
            return round(v, 3) if isinstance(v, float) else v

        rows = [{k: rnd(v) for k, v in asdict(r).items()} for r in self.ranks]
        return {
            "folder": self.folder,
            "world_size": self.world_size,
            "backend": self.backend,
            "clock": self.clock,
            "ranks": rows,
            "straggler": self.straggler.rank,
            "straggler_reason": self.straggler.reason,
            "matched_collectives": len(self.matched),
            "unmatched_collectives": {str(k): v for k, v in self.unmatched.items()},
            "matched_end_spread_us": rnd(self.end_spread_us),
            "matched": [{"op": m.op, "start_us": [rnd(x) for x in m.starts_us], "dur_us": [rnd(x) for x in m.durs_us]}
                        for m in self.matched],
            "skipped": [{"path": p, "reason": why} for p, why in self.skipped],
            **({"set_aside": [{"path": p, "reason": why} for p, why in self.set_aside]} if self.set_aside else {}),
        }


def _when(t_us: float) -> str:
    return datetime.fromtimestamp(t_us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _is_json_name(p: Path) -> bool:
    return p.name.endswith((".json", ".json.gz"))


def _not_a_trace_file(p: Path) -> str | None:
    """Why the folder entry ``p`` is no trace file to read, without opening it; None for a regular ``*.json(.gz)``."""
    try:
        st = os.stat(p)  # through a symbolic link, to what it points at
    except OSError as e:
        if not p.is_symlink():
            return f"cannot be read ({e.strerror or e})"
        if e.errno == errno.ELOOP:
            return "a symbolic link that loops"
        try:
            target = os.readlink(p)
        except OSError:
            target = "?"
        return f"a symbolic link to {target}, which does not exist"
    if stat.S_ISDIR(st.st_mode):
        return "a folder: folders inside the folder are not read (give that folder itself)"
    if not stat.S_ISREG(st.st_mode):
        kind = ("a named pipe" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
        return f"{kind}, not a regular file: in a folder only trace files are read"
    if not _is_json_name(p):
        return "not named *.json or *.json.gz"
    return None


@dataclass
class _Rank:
    """What is kept of one rank's trace once it is read: the trace itself is let go."""

    rank: int
    path: Path
    world_size: int | None
    backend: str | None
    has_base: bool
    origin_us: float | None  # clock_origin_us
    window: tuple[float, float] | None  # the trace's own times
    row: RankRow
    collectives: list[Collective]  # on the trace's own clock until read_ranks shifts them


def _load(t: Trace, rank: int) -> _Rank:
    info = t.meta.get("distributedInfo")
    backend = info.get("backend") if isinstance(info, dict) and isinstance(info.get("backend"), str) else None
    row, coll = rank_facts(t, rank)
    return _Rank(rank, t.path, world_size_of(t), backend, t.base_time_ns is not None, clock_origin_us(t),
                 window(t) if len(t) else None, row, coll)


def read_ranks(folder: str | Path, each: Callable[[Trace, int], None] | None = None) -> Ranks:
    """Read every rank trace in ``folder`` and compare the ranks.

    Every other entry (files not named ``*.json`` or ``*.json.gz``, JSON
    files that are not traces or name no rank, folders, named pipes, broken
    symbolic links) is skipped, each with its reason in ``Ranks.skipped``;
    traces with events set aside say so in ``Ranks.set_aside``. Raises
    :class:`TraceError`, with one line, for a folder with no rank trace left,
    and for traces that cannot be one job's: two with the same rank,
    different world sizes, a rank beyond the world size, or recordings that
    do not overlap in time. One trace is held in memory at a time; ``each``, if given, is called with it and its
    rank while it is (so that a caller can read more from each trace without reading the file again).
    """
    if isinstance(folder, str) and not folder:
        raise TraceError("no folder named: the path given is empty")
    folder = Path(folder)
    if not folder.is_dir():
        raise TraceError(f"{folder}: no such folder" if not folder.exists() else f"{folder}: not a folder")
    try:
        entries = sorted(folder.iterdir())
    except OSError as e:
        raise TraceError(f"{folder}: cannot be read ({e.strerror or e})") from None
    if not entries:
        raise TraceError(f"{folder}: the folder is empty: no rank traces to read")
    skipped: list[tuple[str, str]] = []
    set_aside: list[tuple[str, str]] = []
    loaded: list[_Rank] = []
    for p in entries:
        why = _not_a_trace_file(p)
        if why is not None:
            skipped.append((p.name, why))
            continue
        try:
            t = read_trace(p)
        except TraceError as e:
            skipped.append((p.name, str(e).replace(f"{p}: ", "")))
            continue
        r = rank_of(t)
        if r is None:
            skipped.append((p.name, "no rank: neither distributedInfo.rank nor 'rank<N>' in the file's name"))
            continue
        if t.set_aside is not None:
            set_aside.append((p.name, t.set_aside.line()))
        loaded.append(_load(t, r))
        if each is not None:
            each(t, r)
        del t
    if not loaded:
        why = "; ".join(f"{name}: {reason}" for name, reason in skipped[:3])
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        raise TraceError(f"{folder}: no rank trace in the folder ({why}{more})")
    _check_one_job(folder, loaded)
    loaded.sort(key=lambda x: x.rank)
    origins = [x.origin_us for x in loaded]
    clock = None
    if all(o is not None for o in origins):
        clock = ("baseTimeNanoseconds" if all(x.has_base for x in loaded) else
                 "wall-clock timestamps" if not any(x.has_base for x in loaded) else
                 "baseTimeNanoseconds and wall-clock timestamps")
        _check_overlap(folder, loaded)
        zero = min(x.origin_us for x in loaded if x.origin_us is not None)
        for x in loaded:
            shift = x.origin_us - zero if x.origin_us is not None else 0.0
            x.row.start_us += shift
            for c in x.collectives:
                c.start_us += shift
    rows = [x.row for x in loaded]
    matched, unmatched = (match([x.collectives for x in loaded]) if clock and len(rows) > 1
                          else ([], [0] * len(rows)))
    st = find_straggler([r.rank for r in rows], matched)
    if clock is None and len(rows) > 1:
        st.reason = ("the traces share no clock (a trace has neither baseTimeNanoseconds nor wall-clock "
                     "timestamps): collectives cannot be matched across ranks, so the comparison is per rank only")
    if len(rows) > 1 and matched:
        for k, row in enumerate(rows):
            row.wait_us = st.wait_us[k]
            row.last_arrivals = st.last_arrivals[k] if st.last_arrivals else None
            row.median_late_us = st.median_late_us[k] if st.median_late_us else None
    world = next((x.world_size for x in loaded if x.world_size), None)
    backend = next((x.backend for x in loaded if x.backend), None)
    return Ranks(str(folder), rows, world, backend, clock, matched,
                 {row.rank: u for row, u in zip(rows, unmatched)}, st, skipped, set_aside)


def _check_one_job(folder: Path, loaded: list[_Rank]) -> None:
    seen: dict[int, Path] = {}
    for x in loaded:
        if x.rank in seen:
            raise TraceError(f"{folder}: two traces claim rank {x.rank} ({seen[x.rank].name} and {x.path.name}): "
                             "not one job's ranks")
        seen[x.rank] = x.path
    sizes = sorted({(x.world_size, x.path.name) for x in loaded if x.world_size is not None})
    if len({w for w, _ in sizes}) > 1:
        (w1, f1), (w2, f2) = sizes[0], sizes[-1]
        raise TraceError(f"{folder}: ranks from different jobs: {f1} has a world size of {w1}, {f2} of {w2}")
    for x in loaded:
        if x.world_size is not None and x.rank >= x.world_size:
            raise TraceError(f"{folder}: {x.path.name} is rank {x.rank}, beyond its world size of {x.world_size}")


def _check_overlap(folder: Path, loaded: list[_Rank]) -> None:
    spans = [(x.origin_us + x.window[0], x.origin_us + x.window[1], x.rank) for x in loaded
             if x.window is not None and x.origin_us is not None]
    if len(spans) < 2:
        return
    a = min(spans, key=lambda s: s[1])  # the recording that ends first
    b = max(spans, key=lambda s: s[0])  # the one that starts last
    if b[0] > a[1]:
        raise TraceError(f"{folder}: the recordings do not overlap in time (rank {a[2]} ends at {_when(a[1])}, "
                         f"rank {b[2]} starts at {_when(b[0])}): ranks from different jobs or runs")


# --- as text ------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def ranks_text(r: Ranks, top: int = 10) -> str:
    """The folder's summary, as the command line prints it."""
    world = f" of a world of {r.world_size}" if r.world_size else ""
    backend = f" ({r.backend})" if r.backend else ""
    clock = (f"one clock for all ranks ({r.clock})" if r.clock else
             "no shared clock (a trace gives neither baseTimeNanoseconds nor wall-clock timestamps): "
             "ranks compared row by row only")
    out = [f"folder: {r.folder}", f"ranks: {len(r.ranks)}{world}{backend}; {clock}"]
    out.append("")
    out.append(f"  {'rank':>4}  {'GPU busy':>10}  {'idle':>6}  {'compute':>10}  {'collectives':>11}  "
               f"{'overlap':>7}  {'exposed':>10}  verdict")
    for x in r.ranks:
        out.append(f"  {x.rank:>4}  {us(x.gpu_busy_us):>10}  {_pct(x.idle_pct):>6}  {us(x.compute_us):>10}  "
                   f"{us(x.collective_us):>11}  {_pct(x.overlap_pct):>7}  {us(x.exposed_us):>10}  "
                   f"{x.verdict or 'no GPU work'}")
    out.append("")
    out.append("  compute: GPU work other than collectives; overlap: share of collective time with compute running;")
    out.append(f"  exposed: collective time with no compute; communication-bound when exposed >= "
               f"{COMMUNICATION_BOUND_SHARE:.0%} of GPU busy")
    if len(r.ranks) < 2:
        out.append("")
        out.append("one rank only: nothing to compare across ranks")
        return "\n".join(out)
    out.append("")
    unmatched = ", ".join(f"rank {k}: {v}" for k, v in r.unmatched.items() if v)
    spread = f"; they end within {us(r.end_spread_us)} of each other (median)" if r.end_spread_us is not None else ""
    out.append(f"matched collectives: {len(r.matched)} found on every rank"
               + (f" (left unmatched: {unmatched})" if unmatched else "") + spread)
    if r.matched:
        for x in r.ranks:
            arrival = ""
            if x.last_arrivals is not None:
                arrival = (f"; entered last in {x.last_arrivals} of {len(r.matched)} (by > {NOISE_PER_COLLECTIVE_US:g} us); over all "
                           f"{len(r.matched)}, a median of {us(x.median_late_us)} after the first rank")
            out.append(f"  rank {x.rank}: waited {us(x.wait_us)} inside them (time beyond the quickest rank's; "
                       f"overlapping waits counted once){arrival}")
    who = f"rank {r.straggler.rank}" if r.straggler.rank is not None else "none"
    out.append(f"straggler: {who} ({r.straggler.reason})")
    if r.matched and top:
        out.append("")
        shown = r.matched[:top]
        out.append(f"matched collectives, in time order ({len(shown)} of {len(r.matched)}): start and duration per rank")
        for m in shown:
            cells = "  ".join(f"r{x.rank} {us(s):>9} +{us(d):>9}" for x, s, d in zip(r.ranks, m.starts_us, m.durs_us))
            out.append(f"  {short(m.op, 14):<14} {cells}")
    return "\n".join(out)
