"""Each op call's recorded shapes (Input Dims, Input type, Concrete Inputs).

With ``record_shapes=True`` each CPU op carries them; the reader keeps them as
undecoded JSON text in its one pass (``Trace.shapes``), and the roofline
(:mod:`helpers.facts.roofline`) and the rules that look at one op's shapes
decode them here, only for the ops they ask about. A trace the reader did not
build (no ``shapes``) is read again from its file: msgspec decodes only the
events that hold shapes; without it the json module does the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..reader.event_fields import SEP
from ..reader.trace import Trace, TraceError
from ..reader.source import open_text

NO_SHAPES = "not sized: the trace has no Input Dims (record with record_shapes=True)"


@dataclass(frozen=True)
class Shapes:
    """One op call's Input Dims, Input type and Concrete Inputs, as the trace holds them."""

    dims: Any
    types: Any
    concrete: Any


class _Recorded:
    """An op's three args as found in the file: undecoded JSON text (msgspec) or values (json module).

    Most ops never launch a kernel: their shapes are decoded only when asked for.
    """

    __slots__ = ("parts", "raw", "text")

    def __init__(self, parts: tuple, raw: bool, text: bytes | None = None) -> None:
        # text: the three as the reader keeps them (Trace.shapes), joined by SEP, split only when decoded
        self.parts, self.raw, self.text = parts, raw, text

    @property
    def key(self) -> Any:
        """Equal for equal shapes (the JSON text itself, or its values re-encoded)."""
        if self.text is not None:
            return self.text
        if self.raw:
            return SEP.join(map(bytes, self.parts))
        return json.dumps(self.parts, separators=(",", ":"))

    def shapes(self) -> Shapes:
        if self.raw:
            decode = msgspec.json.decode if msgspec is not None else json.loads
            parts = self.parts if self.text is None else self.text.split(SEP)
            return Shapes(*(decode(p) if len(p) else None for p in parts))
        return Shapes(*self.parts)


try:
    import msgspec

    class _OpArgs(msgspec.Struct, gc=False):
        dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
        types: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")
        concrete: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Concrete Inputs")

    class _OpEvent(msgspec.Struct, gc=False):
        cat: Any = None
        name: Any = None
        tid: Any = None
        ts: Any = None
        args: _OpArgs = msgspec.field(default_factory=_OpArgs)  # of the other keys, nothing is kept

    class _DocEvents(msgspec.Struct, gc=False):
        traceEvents: list[msgspec.Raw] = []  # each event's text, unparsed: most have no shapes

    _decode_doc = msgspec.json.Decoder(_DocEvents).decode
    _decode_list = msgspec.json.Decoder(list[msgspec.Raw]).decode
    _decode_op = msgspec.json.Decoder(_OpEvent).decode

except ImportError:  # pragma: no cover - the json module's path below does the same
    msgspec = None  # type: ignore[assignment]


_OP_CATS = ("cpu_op", "operator")  # Kineto's spellings of an ATen op's category
_NOT_WS = re.compile(rb"[^ \t\r\n]")


_Found = list[tuple[Any, Any, Any, "_Recorded"]]  # (name, tid, ts, shapes) of CPU ops


def _scan(text: bytes | bytearray, keep: Callable[[Any, Any], bool]) -> tuple[int, _Found]:
    """How many CPU ops have Input Dims in the trace's text, and (name, tid, ts, shapes) of those
    ``keep(name, ts)`` wants."""
    out = []
    seen = 0
    if msgspec is not None:
        try:
            # Each event as unparsed text first (a view of ``text``), then only those that hold shapes decoded,
            # and of those only the ops that launched kernels kept (copied out, so the text can go).
            first = _NOT_WS.search(text)  # not text.lstrip(): that would copy the whole text
            events = _decode_list(text) if first and first.group() == b"[" else _decode_doc(text).traceEvents
            for raw in events:
                if b'"Input Dims"' in bytes(raw):
                    e = _decode_op(raw)
                    if len(e.args.dims) and isinstance(e.cat, str) and e.cat.lower() in _OP_CATS:
                        seen += 1
                        if keep(e.name, e.ts):
                            a = e.args
                            out.append((e.name, e.tid, e.ts, _Recorded((bytes(a.dims), bytes(a.types),
                                                                        bytes(a.concrete)), True)))
            return seen, out
        except (msgspec.DecodeError, ValueError, RecursionError):
            out, seen = [], 0  # what msgspec refuses (args that are not an object...), the json module decides
    doc = json.loads(text)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc if isinstance(doc, list) else []
    for e in events:
        if not isinstance(e, dict) or not isinstance(e.get("cat"), str):
            continue
        a = e.get("args")
        if e["cat"].lower() in _OP_CATS and isinstance(a, dict) and "Input Dims" in a:
            seen += 1
            if keep(e.get("name"), e.get("ts")):
                out.append((e.get("name"), e.get("tid"), e.get("ts"),
                            _Recorded((a["Input Dims"], a.get("Input type"), a.get("Concrete Inputs")), False)))
    return seen, out


def _float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class ShapesRead:
    """What a second reading of the trace's file found for the ops asked about, or why it found nothing."""

    #: (op name, start in the trace's clock) -> [(thread id, its shapes)]; empty when ``missing`` says why
    records: dict[tuple[str, float], list[tuple[Any, _Recorded]]]
    missing: str | None = None  # "not sized: ...": why no op's shapes could be read; None when the file was read
    by_op: dict[int, _Recorded] | None = None  # op event -> its shapes, when the reader held them (Trace.shapes)
    table: Any = None  # the reader's own table (Trace.shapes, a ShapeTable), when it held them in one

    def of(self, trace: Trace, op: int) -> _Recorded | None:
        """The shapes of op event ``op``: held by the reader, or found again by name, start and thread."""
        if self.table is not None:
            text = self.table.get(op)
            return None if text is None else _Recorded((), True, text)
        if self.by_op is not None:
            return self.by_op.get(op)
        recs = self.records.get((trace.name_of(op), trace.ts[op]))
        if not recs:
            return None
        if len(recs) > 1:
            tid = trace.lanes[trace.lane[op]].tid
            recs = [f for f in recs if f[0] == tid] or recs
        return recs[0][1]

    def numbers(self, ops: list[int]) -> list[int] | None:
        """Each op's shapes as a number, equal for equal shapes, -1 where it has none; None where the reader held
        no table of them (then :meth:`of` answers op by op)."""
        return self.table.numbers(ops) if self.table is not None else None


@dataclass(frozen=True)
class OpShapes:
    """Op events' recorded shapes, by op event, or why there are none."""

    by_op: dict[int, Shapes]
    missing: str | None = None  # "not sized: ...": why no op's shapes could be read; None when the file was read


def read_shapes(trace: Trace, wanted: set[tuple[str, float]] | None, ops: Any = None) -> ShapesRead:
    """The recorded shapes of the ``wanted`` ops ((op name, start in the trace's clock)), or why there are none.

    A trace the reader built holds them (``Trace.shapes``); with ``ops`` (the
    op events themselves) only those are looked up there. Any other trace's
    file is read again for them. ``wanted`` may be None when ``ops`` is given: it is then made from them, and
    only where it is needed (a trace the reader built needs none: thousands of names and starts not made).
    """
    held = getattr(trace, "shapes", None)
    if held is not None:  # kept by the reader in its one pass: nothing to read again
        if not held:
            return ShapesRead({}, NO_SHAPES)
        if ops is not None:
            if hasattr(held, "numbers"):  # the reader's ShapeTable: asked as it is, not copied op by op
                return ShapesRead({}, table=held)
            return ShapesRead({}, by_op={i: _Recorded((), True, held[i]) for i in ops if i in held})
    if wanted is None:
        wanted = {(trace.name_of(op), trace.ts[op]) for op in ops}
    if held is not None:
        got: dict[tuple[str, float], list[tuple[Any, _Recorded]]] = {}
        names = {name for name, _ in wanted}
        for i, text in (held.pairs() if hasattr(held, "pairs") else held.items()):
            name = trace.name_of(i)
            if name in names and (name, trace.ts[i]) in wanted:
                got.setdefault((name, trace.ts[i]), []).append((trace.lanes[trace.lane[i]].tid,
                                                                _Recorded((), True, text)))
        return ShapesRead(got)
    t0 = trace.t0

    names = {name for name, _ in wanted}

    def keep(name: Any, ts: Any) -> bool:
        if name not in names:  # most ops launch nothing: no number to convert for them
            return False
        t = _float(ts)
        return t is not None and (name, t - t0) in wanted

    try:
        blocks, close, _ = open_text(trace.path)
        text = bytearray()  # grown in place: joining a list of blocks would hold the text twice at its peak
        try:
            for block in blocks:
                text += block
        finally:
            close()
        if not _NOT_WS.search(text):  # a pipe (`summarize <(zcat ...)`) is empty the second time
            return ShapesRead({}, "not sized: the trace came through a pipe, which cannot be read a second time for "
                                  "the ops' shapes: give the file itself")
        seen, found = _scan(text, keep)
    except (OSError, TraceError, ValueError, RecursionError) as e:
        return ShapesRead({}, f"not sized: the trace's file could not be read again for its op shapes ({e})")
    if not seen:
        return ShapesRead({}, NO_SHAPES)
    result: dict[tuple[str, float], list[tuple[Any, _Recorded]]] = {}
    for name, tid, ts, rec in found:
        result.setdefault((name, _float(ts) - t0), []).append((tid, rec))
    return ShapesRead(result)


def op_shapes(trace: Trace, ops: list[int]) -> OpShapes:
    """Each of these op events' recorded shapes (Input Dims, Input type, Concrete Inputs), read again from the
    trace's file; or why there are none (no shapes recorded, a pipe, an unreadable file)."""
    read = read_shapes(trace, None, ops=ops)
    if read.missing:
        return OpShapes({}, read.missing)
    out: dict[int, Shapes] = {}
    for op in ops:
        rec = read.of(trace, op)
        if rec is not None:
            out[op] = rec.shapes()
    return OpShapes(out)
