"""A trace's JSON, streamed: the top-level fields, then its events a batch at a time.

:func:`read_document` walks the document's top level itself (any whitespace,
any key order, a bare list of events too), decodes every top-level value but
``traceEvents`` whole, and cuts the event list into batches of about
:data:`CHUNK` bytes at event boundaries, so a trace of hundreds of megabytes is
never held whole. A stretch with no boundary in it (one huge event) is held by
doubling, so its cost stays in proportion to its size; whitespace, between
events or around the document, is skipped as it comes, never held.

Each batch is decoded by :mod:`.json_decode` (msgspec first, the ``json``
module as the judge) into the events :mod:`.event_fields` describes.
"""

from __future__ import annotations

import re
from itertools import chain
from pathlib import Path
from typing import Any, Iterator

from .event_fields import PARSER
from .json_decode import _a, _cut_short, _Ends, _Split, decode_events, decode_events_to_end, decode_value, whole_args
from .source import TraceError

CHUNK = 1 << 16  # bytes of event text decoded at a time
STRETCH = 1 << 20  # whitespace after an event, held: past this much, the rest is skipped as it comes, not held
EVENT_CUT = re.compile(rb"\}\s*,\s*\{")  # between two events (or, rarely, inside one: the decoder tells)
_STRUCTURE = re.compile(rb'["\[\]{}]')
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SCALAR = re.compile(rb"[^\s,\]}]*")
_WS = b" \t\r\n"
_NOT_WS = re.compile(rb"[^ \t\r\n]")


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
