"""A trace's JSON, streamed: the top-level fields, then its events a batch at a time.

:func:`read_document` walks the document's top level itself (any whitespace,
any key order, a bare list of events too), decodes every top-level value but
``traceEvents`` whole, and cuts the event list into batches of about
:data:`CHUNK` bytes at event boundaries, so a trace of hundreds of megabytes is
never held whole. A stretch with no boundary in it (one huge event) is held by
doubling, so its cost stays in proportion to its size; whitespace, between
events or around the document, is skipped as it comes, never held.

Each batch is decoded by msgspec when it is installed, into :class:`RawEvent`
structs that keep only the fields the reader uses; of ``args`` it keeps only
the keys in :data:`ARG_FIELDS` and skips the rest (input shapes, call stacks)
unparsed, at C speed. Whatever msgspec refuses, for any reason, is decoded
again by the ``json`` module, whose verdict stands: so the same files are
accepted and refused, with the same messages, whether msgspec is there or not.
Without msgspec, the ``json`` module decodes every batch.
"""

from __future__ import annotations

import json
import math
import re
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterator, Union

from .source import TraceError

CHUNK = 1 << 16  # bytes of event text decoded at a time
STRETCH = 1 << 20  # whitespace after an event, held: past this much, the rest is skipped as it comes, not held
EVENT_CUT = re.compile(rb"\}\s*,\s*\{")  # between two events (or, rarely, inside one: the decoder tells)
_STRUCTURE = re.compile(rb'["\[\]{}]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SCALAR = re.compile(rb"[^\s,\]}]*")
_WS = b" \t\r\n"
_NOT_WS = re.compile(rb"[^ \t\r\n]")
_BYTE = re.compile(r"\(byte (\d+)\)")

#: The args keys the reader keeps: what the facts read (launch resources, bytes,
#: links), what the memory events carry, and the two that link a backward op to
#: its forward op. Every other key is skipped unparsed.
ARG_FIELDS = {
    "correlation": "correlation",
    "external_id": "External id",
    "registers_per_thread": "registers per thread",
    "shared_memory": "shared memory",
    "block": "block",
    "grid": "grid",
    "blocks_per_sm": "blocks per SM",
    "warps_per_sm": "warps per SM",
    "occupancy": "est. achieved occupancy %",
    "bytes": "bytes",
    "size": "size",
    "device": "device",
    "stream": "stream",
    "context": "context",
    "name": "name",
    "device_id": "Device Id",
    "device_type": "Device Type",
    "alloc_bytes": "Bytes",
    "total_allocated": "Total Allocated",
    "total_reserved": "Total Reserved",
    "sequence": "Sequence number",
    "fwd_thread": "Fwd thread id",
}
_ARG_ITEMS = tuple(ARG_FIELDS.items())
LIMIT = 1e300  # larger timestamps and durations are not finite numbers of microseconds
CORR_LIMIT = 1 << 63  # correlation ids from there on do not fit the column: read as none


class _Unset:
    """A field the JSON did not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


try:
    import msgspec

    UNSET: Any = msgspec.UNSET
    _UnsetType: Any = msgspec.UnsetType
except ImportError:  # pragma: no cover - the fallback test loads this module without msgspec
    msgspec = None  # type: ignore[assignment]
    UNSET = _Unset()
    _UnsetType = _Unset


class PlainArgs:
    """The kept args of one event, as the json module's path builds them."""

    __slots__ = tuple(ARG_FIELDS)

    def __init__(self, d: dict | None = None) -> None:
        for attr, key in _ARG_ITEMS:
            setattr(self, attr, d.get(key, UNSET) if d else UNSET)


class PlainEvent:
    """One event as the json module's path builds it: the same attributes as :class:`RawEvent`, unchecked."""

    __slots__ = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "args")

    def __init__(self, d: dict) -> None:
        self.ph = d.get("ph", UNSET)
        self.name = d.get("name", UNSET)
        self.cat = d.get("cat", "")
        self.pid = d.get("pid")
        self.tid = d.get("tid")
        self.ts = d.get("ts", UNSET)
        self.dur = d.get("dur", 0)
        a = d.get("args", UNSET)
        self.args = _NO_ARGS if a is UNSET or a is None else PlainArgs(a) if a.__class__ is dict else a


_NO_ARGS_PLAIN = PlainArgs()


class RangeArgs(PlainArgs):
    """A CUPTI range-profiler event's args: the kept ones, and its counters (every other finite number).

    The range profiler writes one event per kernel it replayed, with the
    hardware counters it collected as args (``smsp__...sum``: names the user
    chose, so no fixed list of keys can keep them).
    """

    __slots__ = ("counters",)

    def __init__(self, base: Any, args: dict) -> None:
        for attr in ARG_FIELDS:
            setattr(self, attr, getattr(base, attr))
        if self.correlation is UNSET:  # as msgspec's Args holds it: the column-at-a-time path reads an int
            self.correlation = -1
        self.counters: dict[str, int | float] = {
            k: v for k, v in args.items()
            if (v.__class__ is int or (v.__class__ is float and math.isfinite(v))) and k not in _KEPT_KEYS}


_KEPT_KEYS = frozenset(ARG_FIELDS.values())

if msgspec is not None:
    from typing import Annotated

    # msgspec checks these types and ranges in C; whatever fails them goes to the json module's
    # path, which says what is wrong (or, for a correlation id that fits no column, reads none).
    _Correlation = Annotated[int, msgspec.Meta(ge=0, le=CORR_LIMIT - 1)]
    _Start = Annotated[float, msgspec.Meta(gt=-LIMIT, lt=LIMIT)]
    _Duration = Annotated[float, msgspec.Meta(ge=0, lt=LIMIT)]
    Args = msgspec.defstruct(
        "Args", [("correlation", _Correlation, msgspec.field(default=-1, name="correlation"))]
        + [(attr, Any, msgspec.field(default=UNSET, name=key)) for attr, key in _ARG_ITEMS if attr != "correlation"],
        gc=False, omit_defaults=True, module=__name__)

    class RawEvent(msgspec.Struct, gc=False):
        """One event as msgspec decodes it: the reader's fields, their JSON types and ranges checked."""

        ph: str
        name: Union[str, _UnsetType] = UNSET
        cat: str = ""
        pid: Any = None
        tid: Any = None
        ts: Union[_Start, _UnsetType] = UNSET
        dur: _Duration = 0.0
        args: Args = msgspec.field(default_factory=Args)  # type: ignore[valid-type]

    class _RawArgs(msgspec.Struct, gc=False):
        """An event's args as undecoded JSON (read for the range profiler's counters)."""

        args: msgspec.Raw = msgspec.Raw()

    _NO_ARGS: Any = Args()
    _decode_events = msgspec.json.Decoder(list[RawEvent]).decode
    _decode_raw_args = msgspec.json.Decoder(list[_RawArgs]).decode
    _decode_value = msgspec.json.Decoder().decode
    _FAST_ERRORS: tuple = (msgspec.DecodeError, RecursionError)
    PARSER = "msgspec"
else:  # pragma: no cover
    Args = PlainArgs
    RawEvent = PlainEvent  # type: ignore[misc]
    _NO_ARGS = _NO_ARGS_PLAIN
    PARSER = "json"

ARG_CLASSES = (Args, PlainArgs, RangeArgs)
get_correlation = attrgetter("args.correlation")


def args_dict(a: Any) -> dict:
    """The kept args of an event as a dict with the JSON's own keys (absent keys left out)."""
    if a.__class__ is Args and msgspec is not None:
        return msgspec.to_builtins(a)  # the same dict, built in C
    out = {}
    for attr, key in _ARG_ITEMS:
        v = getattr(a, attr)
        if v is not UNSET:
            out[key] = v
    if a.__class__ is RangeArgs and out.get("correlation") == -1:  # -1 stands for none, as in Args
        del out["correlation"]
    return out


def whole_args(text: bytes, positions: list[int]) -> list[Any]:
    """The whole args of the events at ``positions`` in ``text`` (a JSON list of events): each a dict, or None.

    Read for the range profiler's counters, which no fixed list of keys keeps;
    only for the few batches that hold such events. msgspec and the json module
    give the same values (a number msgspec does not take, 1e999, is read by the
    json module, as on the json module's path).
    """
    if msgspec is not None:
        try:
            raw = _decode_raw_args(text)
            out = []
            for k in positions:
                r = raw[k].args
                try:
                    out.append(_decode_value(r) if r else None)
                except _FAST_ERRORS:
                    out.append(_JSON.decode(bytes(r).decode("utf-8", "surrogatepass")))
            return [a if a.__class__ is dict else None for a in out]
        except (msgspec.DecodeError, IndexError, ValueError, RecursionError):
            pass  # what msgspec refuses, the json module reads: the same values
    events = _JSON.decode(text.decode("utf-8", "surrogatepass"))
    out = [events[k].get("args") if events[k].__class__ is dict else None for k in positions]
    return [a if a.__class__ is dict else None for a in out]


# --- the json module: the judge ----------------------------------------------------------


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")  # NaN and Infinity are not JSON numbers


_JSON = json.JSONDecoder(parse_constant=_no_constant)


class _Split(Exception):
    """The text ended inside an event: the cut was not between two events."""


class _Ends(Exception):
    """The list of events ends inside the text (something else follows it there)."""


def _text(path: Path, buf: bytes, at: int) -> str:
    try:
        return buf.decode("utf-8", "surrogatepass")  # as json.loads decodes bytes
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: the file is not valid UTF-8 text at byte {at + e.start}") from None


def _byte(s: str, pos: int) -> int:
    return len(s[:pos].encode("utf-8", "surrogatepass"))


def _json_error(path: Path, s: str, e: ValueError, at: int) -> TraceError:
    """What is wrong with the JSON, in words, with its place in the file."""
    pos = getattr(e, "pos", None)
    if not isinstance(pos, int):  # NaN, Infinity: raised by _no_constant
        return TraceError(f"{path}: the file is not valid JSON ({e})")
    where = at + _byte(s, pos)
    before = s[:pos].rstrip()
    if s[pos:pos + 1] in ("]", "}") and before.endswith(","):
        where = at + _byte(s, len(before) - 1)
        return TraceError(f"{path}: the file is not valid JSON: a comma with nothing after it (a trailing comma) "
                          f"at byte {where}")
    return TraceError(f"{path}: the file is not valid JSON at byte {where}")


def _deep(path: Path) -> TraceError:
    return TraceError(f"{path}: the JSON is nested too deeply to be a trace")


def _json_events(path: Path, buf: bytes, at: int) -> list:
    """The events in ``buf`` (events with commas between them) by the json module."""
    s = _text(path, b"[" + buf + b"]", at - 1)
    try:
        events = _JSON.decode(s)
    except RecursionError:
        raise _deep(path) from None
    except json.JSONDecodeError as e:
        if e.pos >= len(s) - 1 or e.msg.startswith("Unterminated string"):
            raise _Split from None
        if e.msg == "Extra data":
            raise _Ends from None
        raise _json_error(path, s, e, at - 1) from None
    except ValueError as e:
        raise _json_error(path, s, e, at - 1) from None
    return [PlainEvent(e) if e.__class__ is dict else e for e in events]


def _json_events_to_end(path: Path, buf: bytes, at: int) -> tuple[list, int]:
    """The events in ``buf`` up to the ']' that ends the list, and where that ']' ends."""
    s = _text(path, b"[" + buf, at - 1)
    try:
        events, end = _JSON.raw_decode(s)
    except RecursionError:
        raise _deep(path) from None
    except json.JSONDecodeError as e:
        if e.pos >= len(s.rstrip()) or e.msg.startswith("Unterminated string"):
            raise _cut_short(path) from None
        raise _json_error(path, s, e, at - 1) from None
    except ValueError as e:
        raise _json_error(path, s, e, at - 1) from None
    return [PlainEvent(e) if e.__class__ is dict else e for e in events], _byte(s, end) - 1


def _json_value(path: Path, buf: bytes, at: int) -> Any:
    s = _text(path, buf, at)
    try:
        return _JSON.decode(s)
    except RecursionError:
        raise _deep(path) from None
    except json.JSONDecodeError as e:
        if e.pos >= len(s.rstrip()) or e.msg.startswith("Unterminated string"):
            raise _cut_short(path) from None
        raise _json_error(path, s, e, at) from None
    except ValueError as e:
        raise _json_error(path, s, e, at) from None


def _cut_short(path: Path) -> TraceError:
    return TraceError(f"{path}: the JSON ends too early: the trace was probably cut short while it was written")


# --- msgspec first, the json module when msgspec refuses ------------------------------------


def decode_events(path: Path, buf: bytes, at: int, parser: str) -> tuple[list, bool]:
    """The events in ``buf``; True when msgspec decoded (and type-checked) them.

    Raises _Split when ``buf`` ends inside an event, _Ends when the list ends
    inside it, TraceError when it is not JSON.
    """
    if parser == "msgspec":
        try:
            return _decode_events(b"[" + buf + b"]"), True
        except _FAST_ERRORS as e:
            if e.__class__ is msgspec.DecodeError:  # not a ValidationError: a fault in the JSON text itself
                msg = str(e)
                m = _BYTE.search(msg)
                if msg == "Input data was truncated" or (m and int(m.group(1)) >= len(buf)):
                    raise _Split from None  # it ends inside an event (as it is meant to, now and then)
                if msg.startswith("JSON is malformed: trailing characters"):
                    raise _Ends from None
    return _json_events(path, buf, at), False


def decode_events_to_end(path: Path, buf: bytes, at: int, parser: str) -> tuple[list, bool, int]:
    """The last events: those in ``buf`` up to the ']' that closes the list, and the offset in ``buf`` past it."""
    if parser == "msgspec":
        whole = b"[" + buf
        try:
            return _decode_events(whole), True, len(buf)
        except msgspec.ValidationError:
            pass
        except _FAST_ERRORS as e:
            m = _BYTE.search(str(e))
            if m and str(e).startswith("JSON is malformed: trailing characters"):
                end = whole.rfind(b"]", 0, int(m.group(1)))  # the list's ']': only whitespace follows it
                try:
                    return _decode_events(whole[:end + 1]), True, end
                except _FAST_ERRORS:
                    pass
    events, end = _json_events_to_end(path, buf, at)
    return events, False, end


def decode_value(path: Path, buf: bytes, at: int, parser: str) -> Any:
    """One JSON value (a top-level field of the trace)."""
    if parser == "msgspec":
        try:
            return _decode_value(buf)
        except _FAST_ERRORS:
            pass
    return _json_value(path, buf, at)


# --- the text, and its top level ------------------------------------------------------------


class _Text:
    """The part of the text not read yet, topped up from its blocks as needed."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self.blocks = blocks
        self.data = b""
        self.base = 0  # offset in the text of data[0]
        self.eof = False

    def hold(self, pos: int, want: int) -> int:
        """Drop what lies before ``pos``; hold ``want`` bytes from there, or all that is left. Returns the new ``pos``."""
        parts = [self.data[pos:] if pos else self.data]
        have = len(parts[0])
        while have < want and not self.eof:
            b = next(self.blocks, None)
            if b is None:
                self.eof = True
                break
            parts.append(b)
            have += len(b)
        self.base += pos
        self.data = parts[0] if len(parts) == 1 else b"".join(parts)
        return 0

    def restart(self, blocks: Iterator[bytes], at: int) -> int:
        """Go on from offset ``at`` of the text, read from ``blocks`` (which start there). Returns the new ``pos``."""
        self.blocks, self.data, self.base, self.eof = blocks, b"", at, False
        return 0

    def go_on(self, blocks: Iterator[bytes]) -> None:
        """The text does not end where it was cut: after what is left of it, ``blocks`` follow."""
        self.blocks, self.eof = chain(self.blocks, blocks), False

    def skip_ws(self, pos: int) -> int:
        """``pos`` moved past whitespace; at ``len(data)`` only at the end of the text.

        A run of whitespace is found at C speed and dropped a block at a
        time, so gigabytes of it cost time in proportion and no memory.
        """
        while True:
            data = self.data
            n = len(data)
            if pos < n and data[pos] not in _WS:  # nearly always: at most a space or a newline to skip
                return pos
            if not pos and n > 4096 and not data.translate(None, _WS):  # a block of nothing else: 10x a regex
                m = None
            else:
                m = _NOT_WS.search(data, pos)
            if m is not None:
                return m.start()
            if self.eof:
                return n
            pos = self.hold(n, 1)

    def value_end(self, pos: int) -> tuple[int, int]:
        """Where the JSON value at ``pos`` ends, found without decoding it: (pos, end), after topping up."""
        want = 1 << 12
        while True:
            end = _value_end(self.data, pos)
            if end is not None:
                return pos, end
            if self.eof:
                return pos, len(self.data)
            want = max(want, 2 * (len(self.data) - pos))
            pos = self.hold(pos, want)


def _value_end(data: bytes, pos: int) -> int | None:
    """The end of the value that starts at ``pos``, or None if ``data`` ends first. Validates nothing."""
    c = data[pos]
    if c == 0x22:  # '"'
        m = _STRING_REST.match(data, pos + 1)
        return m.end() if m else None
    if c != 0x5B and c != 0x7B:  # a number, true, false, null (or not JSON: the decoder says so)
        end = _SCALAR.match(data, pos).end()
        return end if end < len(data) else None
    depth = 0
    i = pos
    while True:
        m = _STRUCTURE.search(data, i)
        if m is None:
            return None
        j = m.start()
        ch = data[j]
        if ch == 0x22:
            s = _STRING_REST.match(data, j + 1)
            if s is None:
                return None
            i = s.end()
            continue
        depth += 1 if ch == 0x5B or ch == 0x7B else -1
        i = j + 1
        if depth == 0:
            return i


def _a(value: Any) -> str:
    """'an int', 'a str': the JSON type of a value, with its article."""
    name = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value),
                                                                                             type(value).__name__)
    return ("an " if name[0] in "aeiou" else "a ") + name


class Document:
    """A trace's JSON, read once from start to end: :meth:`batches`, then :attr:`header`.

    ``header`` holds the top-level fields other than ``traceEvents``, those
    after the event list included, once :meth:`batches` has run out.
    """

    def __init__(self, path: Path, blocks: Iterator[bytes], parser: str = PARSER, part: Any = None) -> None:
        self.path = path
        self.text = _Text(blocks)
        self.parser = parser
        self.header: dict = {}
        #: read in parts (helpers.reader.parts): the text given ends at ``part.end``, where, between two
        #: events, ``part.reached(offset)`` says how to go on
        self.part = part
        #: the text of the batch last given out: the events in it, and where its list ends (None: it goes on)
        self.last: tuple[bytes, int | None] = (b"", None)

    def whole_args(self, positions: list[int]) -> list[Any]:
        """The whole args of the events at ``positions`` in the batch last given out (see :func:`whole_args`)."""
        buf, end = self.last
        return whole_args(b"[" + buf + b"]" if end is None else b"[" + buf[:end], positions)

    def _at(self, pos: int) -> int:
        return self.text.base + pos

    def _bad(self, pos: int) -> TraceError:
        return TraceError(f"{self.path}: the file is not valid JSON at byte {self._at(pos)}")

    def batches(self) -> Iterator[tuple[list, bool]]:
        """The events, a batch at a time, each with True when msgspec type-checked it."""
        text, path = self.text, self.path
        pos = text.skip_ws(text.hold(0, 1))
        if pos >= len(text.data):
            raise TraceError(f"{path}: the file is empty")
        first = text.data[pos]
        if first == 0x5B:  # '[': a bare list of events, as the Chrome format allows
            pos = self._whole((yield from self._events(pos + 1)))
            pos = text.skip_ws(pos)
            if pos < len(text.data):
                raise TraceError(f"{path}: the file is not valid JSON: something follows the list of events")
            return
        if first != 0x7B:
            if first in b'-0123456789"tfn':  # a JSON value, but not a trace: decode it to say what it is
                pos, end = text.value_end(pos)
                v = decode_value(path, text.data[pos:end], self._at(pos), self.parser)
                raise TraceError(f"{path}: the JSON holds {_a(v)}, not a trace (expected an object with traceEvents)")
            raise self._bad(pos)
        found = False
        pos += 1
        while True:
            pos = text.skip_ws(pos)
            data = text.data
            if pos >= len(data):
                raise _cut_short(path)
            if data[pos] == 0x7D and not self.header and not found:  # '{}'
                pos += 1
                break
            if data[pos] != 0x22:
                raise self._json_error_at(pos)
            pos, end = text.value_end(pos)
            key = decode_value(path, text.data[pos:end], self._at(pos), self.parser)
            pos = text.skip_ws(end)
            if text.data[pos:pos + 1] != b":":
                raise self._json_error_at(pos)
            pos = text.skip_ws(pos + 1)
            if pos >= len(text.data):
                raise _cut_short(path)
            if key == "traceEvents" and text.data[pos] == 0x5B:
                if found:
                    raise TraceError(f"{path}: the trace has two 'traceEvents' lists")
                found = True
                pos = self._whole((yield from self._events(pos + 1)))
            else:
                pos, end = text.value_end(pos)
                value = decode_value(path, text.data[pos:end], self._at(pos), self.parser)
                if key == "traceEvents":
                    raise TraceError(f"{path}: 'traceEvents' is {_a(value)}, not a list")
                self.header[key] = value
                pos = end
            pos = text.skip_ws(pos)
            c = text.data[pos:pos + 1]
            if c == b",":
                pos += 1
            elif c == b"}":
                pos += 1
                break
            elif not c:
                raise _cut_short(path)
            else:
                raise self._json_error_at(pos)
        pos = text.skip_ws(pos)
        if pos < len(text.data):
            raise TraceError(f"{path}: the file is not valid JSON: something follows the trace "
                             f"at byte {self._at(pos)}")
        if not found:
            raise TraceError(f"{path}: JSON without a 'traceEvents' list: not a profiler trace")

    def _whole(self, end: int) -> int:
        """Past the list of events: a cut that the list did not reach is taken back (the text read on as one)."""
        if self.part is not None:
            self.text.go_on(self.part.abandon())
            self.part = None
        return end

    def _json_error_at(self, pos: int) -> TraceError:
        """The json module's words for a fault found at ``pos`` in the top level."""
        data = self.text.data
        before = data[:pos].rstrip()
        if data[pos:pos + 1] in (b"}", b"]") and before.endswith(b","):
            return TraceError(f"{self.path}: the file is not valid JSON: a comma with nothing after it "
                              f"(a trailing comma) at byte {self._at(len(before) - 1)}")
        return self._bad(pos)

    def events_from(self, at: int) -> Iterator[tuple[list, bool]]:
        """The events from offset ``at`` of the text (where an event starts) up to the part's end or the list's."""
        self.text.base = at
        return self._events(0)

    def _part_end(self, pos: int) -> tuple[list, bool] | None:
        """At the end of a part: its last events (and whether msgspec checked them), if they end there.

        None when the cut was not between two events, or the list ended
        before it: the caller reads on as if the text had not been cut.
        """
        text = self.text
        tail = text.data[pos:].rstrip(_WS)
        if not tail.endswith(b","):
            return None
        try:
            events, checked = decode_events(self.path, tail[:-1], self._at(pos), self.parser)
        except (_Split, _Ends):
            return None
        self.last = (tail[:-1], None)
        return events, checked

    def _stretch(self, pos: int, tried: int) -> int:
        """Where the text held ends in :data:`STRETCH` bytes of whitespace (one comma allowed) after a '}', the
        offset of that '}' in ``data``; else -1. ``tried``: a '}' that was no event's end (as an offset in the text)."""
        data = self.text.data
        j = data.rfind(b"}", pos)
        if j < 0 or len(data) - j < STRETCH or self._at(j) == tried:
            return -1
        k = _NOT_WS.search(data, j + 1)
        if k is not None and (data[k.start()] != 0x2C or _NOT_WS.search(data, k.start() + 1) is not None):
            return -1
        return j

    def _past_stretch(self, pos: int, j: int) -> Iterator[tuple[list, bool]]:
        """The events from ``pos`` to the '}' at ``j``, then past the whitespace after it without holding it.

        Returns (offset, True) past the list's ']' where the list ended;
        (offset, False) where its next value starts; None when the '}' did
        not end an event (it was in a string): the caller holds on. Whatever
        follows is judged as the json module would judge it, in the same words.
        """
        text, path, parser = self.text, self.path, self.parser
        buf, at = text.data[pos:j + 1], self._at(pos)
        try:
            events, checked = decode_events(path, buf, at, parser)
        except (_Split, _Ends):  # the list may end before the '}' (the document's own): to its ']', if so
            try:
                events, checked, end = decode_events_to_end(path, buf, at, parser)
            except TraceError:
                return None  # the '}' ended no event (it was in a string): hold on, as without a stretch
            self.last = (buf, end)
            yield events, checked
            return pos + end, True
        self.last = (buf, None)
        yield events, checked
        pos = text.skip_ws(j + 1)
        c = text.data[pos:pos + 1]
        if c == b",":
            comma = self._at(pos)
            pos = text.skip_ws(pos + 1)
            if text.data[pos:pos + 1] == b"]":
                raise TraceError(f"{path}: the file is not valid JSON: a comma with nothing after it "
                                 f"(a trailing comma) at byte {comma}")
            return pos, False  # the next event (or the end of the text: the loop says it was cut short)
        if c == b"]":
            return pos + 1, True
        if not c:
            raise _cut_short(path)
        raise self._bad(pos)

    def _events(self, pos: int) -> Iterator[tuple[list, bool]]:
        """The list of events from ``pos`` (just past its '['); returns the offset past its ']'.

        Read in parts, it returns None where a part's text ends between two
        events and the rest is read elsewhere.
        """
        text, path, parser = self.text, self.path, self.parser
        pos = text.skip_ws(pos)
        if text.data[pos:pos + 1] == b"]":
            return pos + 1
        if self.part is not None and self.part.end is None and not self.part.begin(text, self._at(pos)):
            self.part = None  # not worth cutting
        want = CHUNK
        seek = pos + want  # where to look for the next cut between two events
        tried = -1  # the '}' (an offset in the text) last taken for the end of an event before a stretch
        while True:
            if len(text.data) - pos < want + CHUNK and not text.eof:  # read on, a few blocks at once
                seek -= pos
                pos = text.hold(pos, want + 4 * CHUNK)
            data = text.data
            m = EVENT_CUT.search(data, min(seek, len(data)))
            if m is None:
                if not text.eof:
                    j = self._stretch(pos, tried) if self.part is None else -1
                    if j >= 0:  # a megabyte of whitespace after a '}': the events before it, then past it
                        tried = self._at(j)
                        past = yield from self._past_stretch(pos, j)
                        if past is not None:
                            pos, ended = past
                            if ended:
                                return pos
                            want = CHUNK
                            seek = pos + want
                            continue
                        data = text.data
                    seek = max(seek, len(data) - 64)
                    # twice as much text each time, not a block more: a long stretch without a cut (one
                    # huge event, a run of whitespace) is read in linear time, not re-joined block by block
                    want = 2 * (len(data) - pos) + CHUNK
                    continue
                part = self.part
                if part is not None and self._at(len(data)) == part.end:
                    last = self._part_end(pos)
                    if last is not None:
                        yield last  # into the columns before what the workers read
                    how = part.reached(self._at(len(data)), last is not None)
                    if how.stop:  # this process reads only this part
                        return None
                    self.part = None
                    if how.list_end is not None:  # the rest of the list was read elsewhere: on past its ']'
                        return text.restart(how.blocks, how.list_end)
                    if last is not None:  # read on here, from the first part the workers could not read
                        pos = text.restart(how.blocks, how.at)
                    else:
                        text.go_on(how.blocks)
                    seek = pos + want
                    continue
                buf = data[pos:]
                events, checked, end = decode_events_to_end(path, buf, self._at(pos), parser)
                self.last = (buf, end)
                yield events, checked
                return pos + end
            end = m.start() + 1
            buf = data[pos:end]
            try:
                events, checked = decode_events(path, buf, self._at(pos), parser)
            except _Split:  # the cut fell inside an event: look twice as far (no endless retries)
                want = 2 * (end - pos)
                seek = pos + want
                continue
            except _Ends:  # the cut was past the list's end, in what follows it
                buf = data[pos:]
                events, checked, end = decode_events_to_end(path, buf, self._at(pos), parser)
                self.last = (buf, end)
                yield events, checked
                return pos + end
            self.last = (buf, None)
            yield events, checked
            pos = m.end() - 1
            want = CHUNK
            seek = pos + want
