"""Read a Kineto (PyTorch profiler) Chrome trace into columns.

No torch, no numpy, no pandas: this module works on any machine and on any
trace file, however it was made. Events are kept column by column (one
``array`` per field, names interned) instead of one Python object per event,
and a large file is read, un-gzipped and parsed a little at a time, so a trace
of hundreds of megabytes costs about as much memory as its own text, or less
(``benchmarks/bench_reader.py`` measures it against Holistic Trace Analysis).

Use :func:`read_trace`; it raises :class:`TraceError` with a message that says
what is wrong for anything that is not a readable trace.
"""

from __future__ import annotations

import bisect
import gc
import json
import os
import re
import zlib
from array import array
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress, repeat
from operator import add, ge
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

try:  # orjson parses several times faster than the standard library.
    import orjson as _orjson

    _loads: Callable[[bytes], Any] = _orjson.loads
    _JSONError: tuple[type[Exception], ...] = (_orjson.JSONDecodeError, ValueError)
    PARSER = "orjson"
except ImportError:  # pragma: no cover - exercised by the fallback test

    def _no_constant(word: str) -> Any:
        raise ValueError(f"{word} is not JSON")  # as orjson: NaN and Infinity are not numbers

    def _loads(data: bytes) -> Any:
        return json.loads(data, parse_constant=_no_constant)

    _JSONError = (ValueError,)
    PARSER = "json"

__all__ = ["TraceError", "Trace", "Event", "Lane", "read_trace", "PARSER"]


class TraceError(ValueError):
    """The input is not a readable profiler trace; the message says why."""


# --- categories -----------------------------------------------------------
# Kineto has spelled its categories differently over the years (and ROCm
# reuses the CUDA ones). Everything below works on these groups.
CPU_OP = "cpu_op"
ANNOTATION = "annotation"
RUNTIME = "runtime"
DRIVER = "driver"
KERNEL = "kernel"
MEMCPY = "memcpy"
MEMSET = "memset"
GPU_ANNOTATION = "gpu_annotation"
PYTHON = "python"
OVERHEAD = "overhead"
SYNC = "sync"
OTHER = "other"

_GROUP_OF_CAT = {
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "user_annotation": ANNOTATION,
    "cuda_runtime": RUNTIME,
    "runtime": RUNTIME,
    "cuda_driver": DRIVER,
    "driver": DRIVER,
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
    "gpu_user_annotation": GPU_ANNOTATION,
    "python_function": PYTHON,
    "overhead": OVERHEAD,
    "cuda_sync": SYNC,
    "cuda_profiler_range": KERNEL,
}

#: groups whose events run on a GPU (they put a lane on the GPU side)
GPU_GROUPS = frozenset({KERNEL, MEMCPY, MEMSET, GPU_ANNOTATION, SYNC})
#: groups that are device work proper (busy time, "Self CUDA")
GPU_WORK = frozenset({KERNEL, MEMCPY, MEMSET})
#: groups that the profiler table counts as CPU time
CPU_GROUPS = frozenset({CPU_OP, ANNOTATION, RUNTIME, DRIVER})


def category_group(cat: str) -> str:
    """The group (``kernel``, ``runtime``, ...) of a raw Kineto category."""
    return _GROUP_OF_CAT.get(cat.lower(), OTHER)


@dataclass(frozen=True)
class Lane:
    """One row of the timeline: a CPU thread, a GPU stream, or the profiler's own."""

    index: int
    pid: Any
    tid: Any
    name: str
    is_gpu: bool
    is_profiler: bool = False  # e.g. Kineto's "Activity Buffer Request" row (pid -1)

    @property
    def label(self) -> str:
        return self.name or f"{self.pid}/{self.tid}"


@dataclass(frozen=True)
class Event:
    """One timed event, read out of the trace's columns."""

    index: int
    name: str
    cat: str
    group: str
    start: float  # microseconds since the trace's first event
    dur: float  # microseconds
    lane: Lane
    correlation: int | None
    args: dict

    @property
    def end(self) -> float:
        return self.start + self.dur

    @property
    def is_gpu(self) -> bool:
        return self.lane.is_gpu


# --- reading the file -------------------------------------------------------
#
# A large trace is never held whole: its text is read (and un-gzipped) a
# block at a time, and its events are parsed in batches of about 128 KB of
# text, split at event boundaries: small batches stay in the CPU's caches, and
# their objects are freed before the next batch is made.
#
# Most of a trace's bytes are the ``args`` of CPU ops (input shapes, types,
# call stacks) that no fact reads, so every flat ``"args": {...}`` object of
# a large trace is cut out before parsing, kept as raw bytes, and parsed only
# for the events that need it: GPU work (its registers, grid, bytes) and any
# event whose args hold a correlation id (so the args nobody reads are not
# checked for being valid JSON either). Anything unusual (an args object that
# is not flat, a brace inside a string) falls back to parsing the text as it is.

_CHUNK = 1 << 17  # bytes of JSON text parsed at a time
_SMALL = 8 << 20  # below this, parse the document in one go
_BLOCK = 1 << 18  # bytes read (or un-gzipped) at a time
_SPLIT = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_ARGS = re.compile(rb'"args"\s*:\s*(\{[^{}]*\})')
_GZIP_MAGIC = b"\x1f\x8b"
_STAND_INS: list[bytes] = []  # b'"args":0', b'"args":1', ... : where each cut-out args object was
_PARSE_ERRORS = (*_JSONError, RecursionError)


class _Stash(list):
    """Cut-out args objects from text that holds backslashes (escapes)."""


class _Misaligned(Exception):
    """The cut-out args did not line up with the events: read the file again without cutting."""


def _blocks(path: Path, f: Any) -> Iterator[bytes]:
    """The JSON text of an open trace file, un-gzipped, about _BLOCK bytes at a time."""
    try:
        first = f.read(_BLOCK)
        if first[:2] != _GZIP_MAGIC:
            if path.suffix == ".gz":
                raise TraceError(f"{path}: the name ends in .gz but the file is not gzip-compressed")
            block = first
            while block:
                yield block
                block = f.read(_BLOCK)
            return
        d = zlib.decompressobj(31)
        pending = first
        while True:
            if d.eof:  # the end of one gzip member: another may follow
                rest = d.unused_data
                while len(rest) < 2:
                    more = f.read(_BLOCK)
                    if not more:
                        break
                    rest += more
                if not rest.strip(b"\0"):
                    if not f.read(_BLOCK).strip(b"\0"):
                        return
                    raise zlib.error("data after the end of the gzip stream")
                if rest[:2] != _GZIP_MAGIC:
                    raise zlib.error("data after the end of the gzip stream")
                d = zlib.decompressobj(31)
                pending = rest
            if not pending:
                pending = f.read(_BLOCK)
                if not pending:
                    tail = d.flush()
                    if tail:
                        yield tail
                    if not d.eof:
                        raise EOFError("the compressed stream ends before its end marker")
                    return
            out = d.decompress(pending, _BLOCK)
            pending = d.unconsumed_tail
            if out:
                yield out
    except (zlib.error, EOFError) as e:
        raise TraceError(f"{path}: gzip data is damaged or cut short ({e})") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None


class _Text:
    """The part of a trace's text not parsed yet, topped up from its blocks as needed."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self.blocks = blocks
        self.data = b""
        self.base = 0  # offset in the file of data[0]
        self.eof = False

    def fill(self, pos: int, want: int) -> int:
        """Drop what lies before ``pos``; hold at least ``want`` bytes from there. Returns the new ``pos`` (0)."""
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

    def rest(self, pos: int) -> int:
        """Drop what lies before ``pos`` and hold everything after it."""
        return self.fill(pos, 1 << 62)


def _open_text(path: Path) -> tuple[_Text, Callable[[], None]]:
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    try:
        f = open(path, "rb")
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None
    blocks = _blocks(path, f)

    def close() -> None:
        blocks.close()
        f.close()

    return _Text(blocks), close


def _a(value: Any) -> str:
    """'an int', 'a str': the JSON type of a value, with its article."""
    name = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value),
                                                                                             type(value).__name__)
    return ("an " if name[0] in "aeiou" else "a ") + name


def _json_error(path: Path, data: bytes, err: Exception, offset: int = 0, base: int = 0) -> TraceError:
    pos = getattr(err, "pos", None)
    where = f" at byte {base + offset + pos}" if isinstance(pos, int) else ""
    msg = str(getattr(err, "msg", err))
    if "after document" in msg or "Extra data" in msg:  # orjson's and the json module's words
        why = f"the file is not valid JSON: something follows the trace{where}"
    elif isinstance(pos, int) and offset + pos >= len(data.rstrip()) - 1:
        why = "the JSON ends too early: the trace was probably cut short while it was written"
    else:
        why = f"the file is not valid JSON{where}"
    return TraceError(f"{path}: {why}")


def _iter_event_batches(path: Path, text: _Text, cut: bool = True) -> tuple[dict, Iterator[tuple[list, list | None]]]:
    """The trace's top-level fields and its events, a batch at a time.

    Each batch comes with the raw args cut out of it (``None`` when nothing was cut).
    """
    text.fill(0, _SMALL + 1)
    if not text.eof:
        head = text.data.lstrip()[:1]
        if head and head not in b"[{":  # not JSON: no need to read all of it to say so
            raise TraceError(f"{path}: the file is not valid JSON at byte {len(text.data) - len(text.data.lstrip())}")
        chunked = _chunked(path, text, cut)
        if chunked is not None:
            return chunked
        text.rest(0)
    data = text.data
    if not data.strip():
        raise TraceError(f"{path}: the file is empty")
    try:
        doc = _loads(data)
    except _JSONError as e:
        raise _json_error(path, data, e) from None
    except RecursionError:
        raise TraceError(f"{path}: the JSON is nested too deeply to be a trace") from None
    text.data = b""
    return _split_document(path, doc)


def _split_document(path: Path, doc: Any) -> tuple[dict, Iterator[tuple[list, None]]]:
    if isinstance(doc, list):  # the Chrome format also allows a bare array
        return {}, iter([(doc, None)])
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: the JSON holds {_a(doc)}, not a trace (expected an object with traceEvents)")
    events = doc.pop("traceEvents", None)
    if events is None:
        raise TraceError(f"{path}: JSON without a 'traceEvents' list: not a profiler trace")
    if not isinstance(events, list):
        raise TraceError(f"{path}: 'traceEvents' is {_a(events)}, not a list")
    return doc, iter([(events, None)])


def _chunked(path: Path, text: _Text, cut: bool) -> tuple[dict, Iterator[tuple[list, list | None]]] | None:
    """Parse a large trace a batch at a time; None if its layout is unusual."""
    data = text.data
    first = len(data) - len(data.lstrip())
    if data[first:first + 1] == b"[":  # a bare list of events, as the Chrome format allows
        header: dict = {}
        start, bare = first + 1, True
    else:
        m = _EVENTS_KEY.search(data)
        if m is None:
            return None
        head = data[: m.start()].rstrip()
        if not head.startswith(b"{"):
            return None
        head = head[:-1] if head.endswith(b",") else head
        try:
            header = _loads(head + b"}") if head != b"{" else {}
        except _PARSE_ERRORS:
            return None  # "traceEvents" was not a top-level key; parse it whole
        if not isinstance(header, dict):
            return None
        start, bare = m.end(), False

    def batches() -> Iterator[tuple[list, list | None]]:
        pos = start
        while True:
            if len(text.data) - pos < 2 * _CHUNK:  # read on, a few blocks at once: less copying
                pos = text.fill(pos, 2 * _CHUNK + 4 * _BLOCK)
            data = text.data
            n = len(data)
            while pos < n and data[pos] in b" \t\r\n":
                pos += 1
            if pos >= n:
                if not text.eof:
                    continue
                raise TraceError(f"{path}: the JSON ends too early: the trace was probably cut short while it was written")
            if data[pos] == 0x5D:  # ']': the list is over
                pos = text.rest(pos)
                _read_tail(path, text, pos + 1, header, bare)
                return
            batch, stash, pos = _next_batch(path, text, pos, cut)
            yield batch, stash

    return header, batches()


def _parse_events(text: bytes, cut: bool) -> tuple[list, list | None] | None:
    """The events in ``text`` (a run of comma-separated events), or None if it is not valid JSON.

    With ``cut``, flat args objects are first replaced by ``"args":K`` and
    returned as raw bytes (the K-th of the list).
    """
    if cut:
        parts = _ARGS.split(text)
        n = len(parts) // 2
        if n:
            stash = parts[1::2]
            if len(_STAND_INS) < n:
                _STAND_INS.extend(b'"args":%d' % k for k in range(len(_STAND_INS), n))
            parts[1::2] = _STAND_INS[:n]
            try:
                batch = _loads(b"[" + b"".join(parts) + b"]")
            except _PARSE_ERRORS:
                pass  # e.g. a brace inside a string in the args: parse the text as it is
            else:
                if isinstance(batch, list):
                    if b"\\" in text:  # a key may be spelled with escapes: "correl\u0061tion"
                        stash = _Stash(stash)
                    return batch, stash
            del parts, stash
    try:
        batch = _loads(b"[" + text + b"]")
    except _PARSE_ERRORS:
        return None
    return (batch, None) if isinstance(batch, list) else None


def _next_batch(path: Path, text: _Text, pos: int, cut: bool) -> tuple[list, list | None, int]:
    """Parse events from ``pos`` up to a split point about _CHUNK bytes on."""
    tries = 0
    start = pos + _CHUNK
    while tries <= 64:
        data = text.data
        for m in _SPLIT.finditer(data, min(start, len(data))):
            end = m.start() + 1  # just past the closing brace
            got = _parse_events(data[pos:end], cut)
            if got is None:
                tries += 1
                if tries > 64:
                    break
                continue  # the split fell inside an event's args; try the next
            return got[0], got[1], m.end() - 1  # at the next event's '{'
        if text.eof:
            break
        # No split point that works in what is held: read on, and look again from near its end.
        start = max(start, len(data) - 64) - pos
        pos = text.fill(pos, len(data) - pos + _CHUNK)
    # The last events: the list closes at one of the last ']'.
    pos = text.rest(pos)
    data = text.data
    stop = len(data)
    for _ in range(64):
        stop = data.rfind(b"]", pos, stop)
        if stop < 0:
            break
        got = _parse_events(data[pos:stop], cut)
        if got is None:
            continue
        return got[0], got[1], stop
    try:
        _loads(b"[" + data[pos:])
    except _JSONError as e:
        raise _json_error(path, data, e, pos - 1, text.base) from None
    except RecursionError:
        raise TraceError(f"{path}: the JSON is nested too deeply to be a trace") from None
    raise TraceError(f"{path}: the file is not valid JSON near byte {text.base + pos}")


def _read_tail(path: Path, text: _Text, pos: int, header: dict, bare: bool = False) -> None:
    """What follows the list of events: the trace's other top-level fields, then the end."""
    data = text.data
    tail = data[pos:].strip()
    if bare:
        if tail:
            raise TraceError(f"{path}: the file is not valid JSON: something follows the list of events")
    elif tail.startswith(b","):
        try:
            rest = _loads(b"{" + tail[1:])
        except _JSONError as e:
            raise _json_error(path, data, e, pos, text.base) from None
        except RecursionError:
            raise TraceError(f"{path}: the JSON is nested too deeply to be a trace") from None
        if isinstance(rest, dict):
            header.update(rest)
    elif not tail:
        raise TraceError(f"{path}: the JSON ends too early: the trace was probably cut short while it was written")
    elif tail != b"}":
        raise TraceError(f"{path}: the file is not valid JSON: something follows the trace")


# --- building the columns ---------------------------------------------------


def _bad(path: Path, i: int, what: str) -> TraceError:
    return TraceError(f"{path}: event #{i} {what}")


_LIMIT = 1e300  # larger timestamps and durations are not finite numbers of microseconds
_CORR_LIMIT = 1 << 63  # correlation ids from there on do not fit the column: read as none
_KEEP_ARGS = GPU_GROUPS | {OVERHEAD}  # groups whose args are kept (the facts read them)


def _raw_args(path: Path, i: int, name: str, raw: bytes) -> dict:
    try:
        return _loads(raw)
    except _PARSE_ERRORS:
        raise _bad(path, i, f"({name!r}) has 'args' that are not valid JSON") from None


class _Builder:
    """Turns batches of event objects into a trace's columns, interning names, categories and lanes."""

    def __init__(self, trace: "Trace") -> None:
        self.t = trace
        self.name_ix: dict[str, int] = {}
        self.cat_ix: dict[str, int] = {}
        self.lane_ix: dict[tuple, int] = {}
        self.lane_keys: list[tuple] = []
        self.lane_gpu: list[bool] = []
        self.lane_cpu: list[bool] = []  # has events that are not the profiler's overhead
        self.lane_names: dict[tuple, str] = {}
        self.open_b: dict[tuple, list[tuple[int, dict]]] = {}
        self.keep_cat: list[bool] = []  # per category: are its args kept
        self.gpu_cat: list[bool] = []
        self.cpu_cat: list[bool] = []  # neither GPU nor the profiler's overhead
        self.i = -1  # index of the last event read, timed or not
        self.n = 0  # timed events so far

    def _new_cat(self, cat: str) -> int:
        t = self.t
        ci = self.cat_ix[cat] = len(t.cats)
        t.cats.append(cat)
        g = category_group(cat)
        t.cat_groups.append(g)
        self.keep_cat.append(g in _KEEP_ARGS)
        self.gpu_cat.append(g in GPU_GROUPS)
        self.cpu_cat.append(g not in GPU_GROUPS and g != OVERHEAD)
        return ci

    def _new_lane(self, key: tuple) -> int:
        li = self.lane_ix[key] = len(self.lane_keys)
        self.lane_keys.append(key)
        self.lane_gpu.append(False)
        self.lane_cpu.append(False)
        return li

    def _store(self, ni: list, ci: list, ts: list, dur: list, li: list, corr: list) -> None:
        t = self.t
        t.name.extend(ni)
        t.cat.extend(ci)
        t.ts.extend(ts)
        t.dur.extend(dur)
        t.lane.extend(li)
        t.corr.extend(corr)

    def add(self, batch: list, stash: list | None) -> None:
        """Read one batch of events; ``stash`` holds the args objects cut out of it."""
        path = self.t.path
        name_ix, cat_ix, lane_ix = self.name_ix, self.cat_ix, self.lane_ix
        lane_gpu, lane_cpu, lane_names, open_b = self.lane_gpu, self.lane_cpu, self.lane_names, self.open_b
        names = self.t.names
        keep_args = self.t.args
        keep_cat, gpu_cat, cpu_cat = self.keep_cat, self.gpu_cat, self.cpu_cat
        limit, corr_limit = _LIMIT, _CORR_LIMIT
        i, n = self.i, self.n
        k = 0  # the next cut-out args object
        escapes = stash.__class__ is _Stash
        c_name: list[int] = []
        c_cat: list[int] = []
        c_ts: list[float] = []
        c_dur: list[float] = []
        c_lane: list[int] = []
        c_corr: list[int] = []
        last_pid = last_tid = last_li = None  # the lane of the previous event, as a shortcut
        for e in batch:
            i += 1
            if e.__class__ is not dict:
                raise _bad(path, i, f"is {_a(e)}, not an object")
            args = e.get("args")
            if args.__class__ is int and stash is not None:
                if args != k:
                    raise _Misaligned
                args = stash[k]
                k += 1
            ph = e.get("ph")
            if ph == "X":
                pass
            elif ph == "B" or ph == "E":
                if args.__class__ is bytes:
                    e["args"] = args  # for the "E" that closes it
            elif ph == "M":
                if e.get("name") == "thread_name":
                    if args.__class__ is bytes:
                        args = _raw_args(path, i, "thread_name", args)
                    if isinstance(args, dict) and isinstance(args.get("name"), str):
                        key = (e.get("pid"), e.get("tid"))
                        if type(key[0]) not in (list, dict) and type(key[1]) not in (list, dict):
                            lane_names[key] = args["name"]
                continue
            elif isinstance(ph, str):
                continue  # instants, flows, counters: not needed here
            else:
                raise _bad(path, i, "has no 'ph' (event type) string")
            name = e.get("name")
            ts = e.get("ts")
            if name.__class__ is not str:
                if ph != "E":  # an end event takes its name from the begin event
                    raise _bad(path, i, f"has a name of type {type(name).__name__}; expected a string")
                name = "end"
            c = ts.__class__
            if (c is not float and c is not int) or not -limit < ts < limit:
                raise _bad(path, i, f"({name!r}) has a 'ts' of {ts!r}; expected a number of microseconds")
            pid = e.get("pid")
            tid = e.get("tid")
            if pid == last_pid and tid == last_tid and last_li is not None:
                li = last_li
            else:
                if type(pid) in (list, dict) or type(tid) in (list, dict):
                    raise _bad(path, i, f"({name!r}) has a pid or tid that is not a number or string")
                li = lane_ix.get((pid, tid))
            if ph == "X":
                dur = e.get("dur", 0)
                c = dur.__class__
                if (c is not float and c is not int) or not 0 <= dur < limit:
                    raise _bad(path, i, f"({name!r}) has a 'dur' of {dur!r}; expected a non-negative number")
            elif ph == "B":
                open_b.setdefault((pid, tid), []).append((i, e))
                continue
            else:  # "E" closes the latest "B" on its thread
                stack = open_b.get((pid, tid))
                if not stack:
                    continue
                _, e = stack.pop()
                name, dur, ts = e["name"], ts - e["ts"], e["ts"]
                if dur < 0:
                    raise _bad(path, i, f"({name!r}) ends before it begins")
                args = e.get("args")
            cat = e.get("cat", "")
            ci = cat_ix.get(cat) if cat.__class__ is str else None
            if ci is None:
                if type(cat) is not str:
                    raise _bad(path, i, f"({name!r}) has a 'cat' of type {type(cat).__name__}; expected a string")
                ci = self._new_cat(cat)
            ni = name_ix.get(name)
            if ni is None:
                ni = name_ix[name] = len(names)
                names.append(name)
            if li is None:
                li = self._new_lane((pid, tid))
            last_pid, last_tid, last_li = pid, tid, li
            if gpu_cat[ci]:
                lane_gpu[li] = True
            elif cpu_cat[ci]:
                lane_cpu[li] = True
            corr = -1
            if args is not None:
                c = args.__class__
                if c is bytes:  # cut out before parsing: parse it if it is needed
                    if keep_cat[ci] or b"correlation" in args or (escapes and b"\\u" in args):
                        args = _raw_args(path, i, name, args)
                    else:
                        args = None
                elif c is not dict:
                    raise _bad(path, i, f"({name!r}) has 'args' of type {type(args).__name__}; expected an object")
                if args is not None:
                    c = args.get("correlation")
                    if c.__class__ is int and 0 <= c < corr_limit:
                        corr = c
                    if keep_cat[ci]:
                        keep_args[n] = args
            n += 1
            c_name.append(ni)
            c_cat.append(ci)
            c_ts.append(ts)
            c_dur.append(dur)
            c_lane.append(li)
            c_corr.append(corr)
        if stash is not None and k != len(stash):
            raise _Misaligned
        self._store(c_name, c_cat, c_ts, c_dur, c_lane, c_corr)
        self.i, self.n = i, n

    def finish(self) -> None:
        t = self.t
        if self.i < 0:
            raise TraceError(f"{t.path}: the trace holds no events")
        if not self.n:
            raise TraceError(f"{t.path}: the trace holds no timed events (only metadata, instants or flows)")
        for li, key in enumerate(self.lane_keys):
            name = self.lane_names.get(key) or ""
            gpu = self.lane_gpu[li]
            profiler = not gpu and not self.lane_cpu[li]
            if gpu:
                name = f"GPU {key[0]} stream {key[1]}"
            elif profiler:
                name = "profiler overhead"
            t.lanes.append(Lane(li, key[0], key[1], name, gpu, profiler))
        t.t0 = t0 = min(t.ts)
        if t0:
            ts = t.ts
            step = 1 << 16
            t.ts = array("d")
            for lo in range(0, len(ts), step):
                t.ts.extend([x - t0 for x in ts[lo:lo + step]])


class Trace:
    """A profiler trace, held column by column.

    ``len(trace)`` timed events, each with a name, category, start and
    duration (microseconds since the first event), a lane (CPU thread or GPU
    stream), a correlation id linking a launch call to the GPU work it
    started, and, for GPU work, its args (registers, grid, bytes...).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta: dict = {}
        self.names: list[str] = []
        self.cats: list[str] = []
        self.cat_groups: list[str] = []
        self.lanes: list[Lane] = []
        self.name = array("l")
        self.cat = array("l")
        self.ts = array("d")
        self.dur = array("d")
        self.lane = array("l")
        self.corr = array("q")
        self.args: dict[int, dict] = {}
        self.t0 = 0.0  # raw timestamp of the first event, microseconds
        self._parent: array | None = None
        self._order: array | None = None  # the CPU events in the order nesting visits them
        self._children: dict[int, list[int]] | None = None
        self._by_corr: dict | None = None  # set once launch calls and GPU work are linked
        self._launchers: tuple[dict[int, int], dict[int, int]] = ({}, {})  # correlation -> first, second launch call
        self._work: tuple[dict[int, int], dict[int, list[int]]] = ({}, {})  # correlation -> GPU work: the first; all, if several
        self._by_cat: list[array] | None = None  # per category: its events' indices
        self._by_name: list[array] | None = None  # per name: its events' indices

    # -- construction --
    def _build(self, batches: Iterable[tuple[list, list | None]]) -> None:
        b = _Builder(self)
        for batch, stash in batches:
            b.add(batch, stash)
            del batch, stash
        b.finish()

    # -- basic access --
    def __len__(self) -> int:
        return len(self.ts)

    def __getitem__(self, i: int) -> Event:
        c = self.cat[i]
        corr = self.corr[i]
        return Event(
            index=i,
            name=self.names[self.name[i]],
            cat=self.cats[c],
            group=self.cat_groups[c],
            start=self.ts[i],
            dur=self.dur[i],
            lane=self.lanes[self.lane[i]],
            correlation=corr if corr >= 0 else None,
            args=self.args.get(i, {}),
        )

    def __repr__(self) -> str:
        return f"<Trace {self.path.name}: {len(self)} events, {len(self.lanes)} lanes, {self.device_name or 'no GPU'}>"

    def group_of(self, i: int) -> str:
        return self.cat_groups[self.cat[i]]

    def name_of(self, i: int) -> str:
        return self.names[self.name[i]]

    def end_of(self, i: int) -> float:
        return self.ts[i] + self.dur[i]

    def is_gpu(self, i: int) -> bool:
        return self.lanes[self.lane[i]].is_gpu

    def _index(self) -> list[array]:
        if self._by_cat is None:
            self._by_cat = _positions(self.cat, len(self.cats))
        return self._by_cat

    def _name_index(self) -> list[array]:
        if self._by_name is None:
            self._by_name = _positions(self.name, len(self.names))
        return self._by_name

    def indices(self, groups: Iterable[str] | None = None, name: str | None = None,
                prefix: str | None = None, contains: str | None = None) -> list[int]:
        """Indices of events in these groups and/or with this name (exact, prefix or part)."""
        want_cats = None
        if groups is not None:
            gs = set(groups)
            want_cats = {ci for ci, g in enumerate(self.cat_groups) if g in gs}
        want_names = None
        if name is not None:
            want_names = {ni for ni, n in enumerate(self.names) if n == name}
        elif prefix is not None:
            want_names = {ni for ni, n in enumerate(self.names) if n.startswith(prefix)}
        elif contains is not None:
            want_names = {ni for ni, n in enumerate(self.names) if contains in n}
        if want_names is not None:
            if not want_names:
                return []
            by = self._name_index()
            idx = _merged([by[ni] for ni in want_names])
            if want_cats is not None:
                cat = self.cat
                idx = [i for i in idx if cat[i] in want_cats]
            return idx
        if want_cats is not None:
            by = self._index()
            return _merged([by[ci] for ci in want_cats])
        return list(range(len(self.ts)))

    def events(self, groups: Iterable[str] | None = None, name: str | None = None,
               prefix: str | None = None, contains: str | None = None) -> list[Event]:
        """Events in these groups and/or with this name, in time order."""
        idx = self.indices(groups, name, prefix, contains)
        idx.sort(key=self.ts.__getitem__)
        return [self[i] for i in idx]

    # -- what the trace says about itself --
    @property
    def devices(self) -> list[dict]:
        props = self.meta.get("deviceProperties")
        return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []

    @property
    def device_name(self) -> str | None:
        for p in self.devices:
            if isinstance(p.get("name"), str):
                return p["name"]
        return None

    @property
    def has_gpu(self) -> bool:
        return any(lane.is_gpu for lane in self.lanes)

    @property
    def base_time_ns(self) -> int | None:
        base = self.meta.get("baseTimeNanoseconds")
        return base if isinstance(base, int) else None

    # -- nesting on CPU threads --
    def _nest(self) -> None:
        with _gc_paused():
            self._nest_lanes()

    def _nest_lanes(self) -> None:
        n = len(self.ts)
        parent = array("l", [-1]) * n
        order = array("l")  # the CPU events in the order visited
        ts, dur, lane = self.ts, self.dur, self.lane
        on_cpu = [not (ln.is_gpu or ln.is_profiler) for ln in self.lanes]
        per_lane: dict[int, list[int]] = {}
        for i, li in enumerate(lane):
            if on_cpu[li]:
                x = per_lane.get(li)
                if x is None:
                    per_lane[li] = [i]
                else:
                    x.append(i)
        for li in sorted(per_lane):
            idx = per_lane[li]
            # In time order; outer events first when two start together: longer first.
            visit = sorted(zip([ts[i] for i in idx], [-dur[i] for i in idx], idx))
            stack: list[int] = []
            ends: list[float] = []
            pop_s, pop_e, push_s, push_e = stack.pop, ends.pop, stack.append, ends.append
            for start, minus_dur, i in visit:
                end = start - minus_dur
                # 1 ns of slack: the exported times are rounded to the microsecond's thousandth
                lim = end - 1e-3
                while ends and ends[-1] < lim:
                    pop_s()
                    pop_e()
                if stack:
                    parent[i] = stack[-1]
                push_s(i)
                push_e(end)
            order.extend([v[2] for v in visit])
        self._parent, self._order = parent, order

    def parent(self, i: int) -> int:
        """Index of the event that encloses ``i`` on its CPU thread, or -1."""
        if self._parent is None:
            self._nest()
        return self._parent[i]

    def children(self, i: int) -> list[int]:
        """Events directly inside ``i`` on its CPU thread, in time order."""
        if self._children is None:
            if self._parent is None:
                self._nest()
            children: dict[int, list[int]] = {}
            parent = self._parent
            for j in self._order:
                p = parent[j]
                if p >= 0:
                    x = children.get(p)
                    if x is None:
                        children[p] = [j]
                    else:
                        x.append(j)
            self._children = children
        return self._children.get(i, [])

    def ancestors(self, i: int) -> list[int]:
        """From the direct parent up to the outermost event."""
        out = []
        p = self.parent(i)
        while p >= 0:
            out.append(p)
            p = self.parent(p)
        return out

    def descendants(self, i: int) -> list[int]:
        out: list[int] = []
        todo = list(reversed(self.children(i)))
        while todo:
            j = todo.pop()
            out.append(j)
            todo.extend(reversed(self.children(j)))
        return out


    # -- launch call <-> GPU work --
    def _link(self) -> None:
        # correlation -> the first launch call (runtime or driver, on a CPU lane) and the
        # first piece of GPU work (kernel, copy, fill) with it; the rare others aside
        launcher: dict[int, int] = {}
        launcher2: dict[int, int] = {}
        work: dict[int, int] = {}
        more_work: dict[int, list[int]] = {}
        gpu_lane = [ln.is_gpu for ln in self.lanes]
        launch_cat = [g in (RUNTIME, DRIVER) for g in self.cat_groups]
        work_cat = [g in GPU_WORK for g in self.cat_groups]
        cat, lane, corr = self.cat, self.lane, self.corr
        with _gc_paused():
            for i in compress(range(len(corr)), map(ge, corr, repeat(0))):
                c = corr[i]
                if gpu_lane[lane[i]]:
                    if work_cat[cat[i]]:
                        if c not in work:
                            work[c] = i
                        elif c in more_work:
                            more_work[c].append(i)
                        else:
                            more_work[c] = [work[c], i]
                elif launch_cat[cat[i]]:
                    if c not in launcher:
                        launcher[c] = i
                    elif c not in launcher2:
                        launcher2[c] = i
        self._launchers = (launcher, launcher2)
        self._work = (work, more_work)
        self._by_corr = {}  # linked

    def gpu_work_of(self, i: int) -> list[int]:
        """The kernels, copies and fills that launch call ``i`` started."""
        if self._by_corr is None:
            self._link()
        c = self.corr[i]
        if c < 0:
            return []
        work, more = self._work
        j = work.get(c)
        if j is None:
            return []
        if c in more:
            return [x for x in more[c] if x != i]
        return [j] if j != i else []

    def launch_of(self, j: int) -> int:
        """The CPU-side call that started GPU work ``j``, or -1."""
        if self._by_corr is None:
            self._link()
        c = self.corr[j]
        if c < 0:
            return -1
        first, second = self._launchers
        i = first.get(c, -1)
        if i != j:
            return i
        return second.get(c, -1)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cycle collection while many small objects are made that live on (it would walk them again and again)."""
    collect = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collect:
            gc.enable()


def _merged(runs: list[array]) -> list[int]:
    """One ascending list from ascending runs of indices."""
    if len(runs) == 1:
        return runs[0].tolist()
    out: list[int] = []
    for r in runs:
        out.extend(r)
    out.sort()
    return out


def _positions(column: array, n: int) -> list[array]:
    """For each code 0..n-1, the event indices whose ``column`` holds it."""
    by: list[list[int]] = [[] for _ in range(n)]
    for i, c in enumerate(column):
        by[c].append(i)
    return [array("l", x) for x in by]


def read_trace(path: str | os.PathLike) -> Trace:
    """Read a Chrome trace written by the PyTorch profiler (``.json`` or ``.json.gz``).

    Raises :class:`TraceError` for a missing, empty, truncated or foreign file.
    """
    path = Path(path)
    collect = gc.isenabled()
    gc.disable()  # the parser makes millions of objects that die young: no cycles to look for
    try:
        try:
            return _read(path, cut=True)
        except _Misaligned:
            return _read(path, cut=False)
    finally:
        if collect:
            gc.enable()


def _read(path: Path, cut: bool) -> Trace:
    text, close = _open_text(path)
    try:
        header, batches = _iter_event_batches(path, text, cut)
        trace = Trace(path)
        trace._build(batches)
    finally:
        close()
    trace.meta = header
    return trace


def lane_spans(trace: Trace, idx: Iterable[int]) -> list[tuple[float, float]]:
    """Merged [start, end) intervals covered by these events."""
    ts, dur = trace.ts, trace.dur
    idx = idx if isinstance(idx, (list, array)) else list(idx)
    out: list[tuple[float, float]] = []
    with _gc_paused():
        starts = list(map(ts.__getitem__, idx))
        spans = sorted(zip(starts, map(add, starts, map(dur.__getitem__, idx))))
        if not spans:
            return out
        lo, hi = spans[0]
        for s, e in spans:
            if s <= hi:
                if e > hi:
                    hi = e
            else:
                out.append((lo, hi))
                lo, hi = s, e
        out.append((lo, hi))
    return out


def covered(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Microseconds of ``spans`` (merged, sorted) inside [lo, hi]."""
    total = 0.0
    k = bisect.bisect_left(spans, (lo, lo)) - 1
    for s, e in spans[max(k, 0):]:
        if s >= hi:
            break
        total += max(0.0, min(e, hi) - max(s, lo))
    return total
