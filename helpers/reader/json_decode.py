"""One batch of a trace's JSON decoded into events: msgspec first, the ``json`` module when msgspec refuses.

Each batch is decoded by msgspec when it is installed, into
:class:`~.event_fields.RawEvent` structs (:mod:`.event_fields` says which
fields and args keys are kept), at C speed. Whatever msgspec refuses, for any
reason, is decoded again by the ``json`` module, whose verdict stands: so the
same files are accepted and refused, with the same messages, whether msgspec
is there or not. Without msgspec, the ``json`` module decodes every batch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .event_fields import PlainEvent, RawEvent, msgspec
from .source import TraceError

_BYTE = re.compile(r"\(byte (\d+)\)")

if msgspec is not None:

    class _RawArgs(msgspec.Struct, gc=False):
        """An event's args as undecoded JSON (read for the range profiler's counters)."""

        args: msgspec.Raw = msgspec.Raw()

    _decode_events = msgspec.json.Decoder(list[RawEvent]).decode
    _decode_raw_args = msgspec.json.Decoder(list[_RawArgs]).decode
    _decode_value = msgspec.json.Decoder().decode
    _FAST_ERRORS: tuple = (msgspec.DecodeError, RecursionError)


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


def _a(value: Any) -> str:
    """'an int', 'a str': the JSON type of a value, with its article."""
    name = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value),
                                                                                             type(value).__name__)
    return ("an " if name[0] in "aeiou" else "a ") + name
