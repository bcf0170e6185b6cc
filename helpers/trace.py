"""Read a Kineto (PyTorch profiler) Chrome trace into columns.

No torch, no numpy, no pandas: this module works on any machine and on any
trace file, however it was made. Events are kept column by column (one
``array`` per field, names interned) instead of one Python object per event,
and the JSON is parsed a few megabytes at a time, so a trace of hundreds of
megabytes costs little more memory than its own text.

Use :func:`read_trace`; it raises :class:`TraceError` with a message that says
what is wrong for anything that is not a readable trace.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import re
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

try:  # orjson parses several times faster than the standard library.
    import orjson as _orjson

    _loads: Callable[[bytes], Any] = _orjson.loads
    _JSONError: tuple[type[Exception], ...] = (_orjson.JSONDecodeError, ValueError)
    PARSER = "orjson"
except ImportError:  # pragma: no cover - exercised by the fallback test
    _loads = json.loads
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

_CHUNK = 4 << 20  # bytes of JSON parsed at a time
_SMALL = 8 << 20  # below this, parse the document in one go
_SPLIT = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror or e})") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{path}: gzip data is damaged or cut short ({e})") from None
    elif path.suffix == ".gz":
        raise TraceError(f"{path}: the name ends in .gz but the file is not gzip-compressed")
    if not data.strip():
        raise TraceError(f"{path}: the file is empty")
    return data


def _json_error(path: Path, data: bytes, err: Exception, offset: int = 0) -> TraceError:
    pos = getattr(err, "pos", None)
    where = f" at byte {offset + pos}" if isinstance(pos, int) else ""
    if isinstance(pos, int) and offset + pos >= len(data.rstrip()) - 1:
        why = "the JSON ends too early: the trace was probably cut short while it was written"
    else:
        why = f"the file is not valid JSON{where}"
    return TraceError(f"{path}: {why}")


def _iter_event_batches(path: Path, data: bytes) -> tuple[dict, Iterator[list]]:
    """The trace's top-level fields and its events, a batch at a time."""
    if len(data) > _SMALL:
        chunked = _chunked(path, data)
        if chunked is not None:
            return chunked
    try:
        doc = _loads(data)
    except _JSONError as e:
        raise _json_error(path, data, e) from None
    return _split_document(path, doc)


def _split_document(path: Path, doc: Any) -> tuple[dict, Iterator[list]]:
    if isinstance(doc, list):  # the Chrome format also allows a bare array
        return {}, iter([doc])
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: the JSON holds a {type(doc).__name__}, not a trace (expected an object with traceEvents)")
    events = doc.pop("traceEvents", None)
    if events is None:
        raise TraceError(f"{path}: JSON without a 'traceEvents' list: not a profiler trace")
    if not isinstance(events, list):
        raise TraceError(f"{path}: 'traceEvents' is a {type(events).__name__}, not a list")
    return doc, iter([events])


def _chunked(path: Path, data: bytes) -> tuple[dict, Iterator[list]] | None:
    """Parse a large trace a few MB at a time; None if its layout is unusual."""
    m = _EVENTS_KEY.search(data)
    if m is None:
        return None
    head = data[: m.start()].rstrip()
    if not head.startswith(b"{"):
        return None
    head = head[:-1] if head.endswith(b",") else head
    try:
        header = _loads(head + b"}") if head != b"{" else {}
    except _JSONError:
        return None  # "traceEvents" was not a top-level key; parse it whole
    if not isinstance(header, dict):
        return None

    def batches() -> Iterator[list]:
        pos = m.end()
        n = len(data)
        while True:
            while pos < n and data[pos] in b" \t\r\n":
                pos += 1
            if pos >= n:
                raise TraceError(f"{path}: the JSON ends too early: the trace was probably cut short while it was written")
            if data[pos] == 0x5D:  # ']': the list is over
                _read_tail(path, data, pos + 1, header)
                return
            batch, pos = _next_batch(path, data, pos)
            yield batch

    return header, batches()


def _next_batch(path: Path, data: bytes, pos: int) -> tuple[list, int]:
    """Parse events from ``pos`` up to a split point about _CHUNK bytes on."""
    tries = 0
    for m in _SPLIT.finditer(data, min(pos + _CHUNK, len(data))):
        end = m.start() + 1  # just past the closing brace
        try:
            batch = _loads(b"[" + data[pos:end] + b"]")
        except _JSONError:
            tries += 1
            if tries > 64:
                break
            continue  # the split fell inside an event's args; try the next
        return batch, m.end() - 1  # at the next event's '{'
    # The last events: the list closes at one of the last ']'.
    stop = len(data)
    for _ in range(64):
        stop = data.rfind(b"]", pos, stop)
        if stop < 0:
            break
        try:
            batch = _loads(b"[" + data[pos:stop] + b"]")
        except _JSONError:
            continue
        return batch, stop
    try:
        _loads(b"[" + data[pos:])
    except _JSONError as e:
        raise _json_error(path, data, e, pos - 1) from None
    raise TraceError(f"{path}: the file is not valid JSON near byte {pos}")


def _read_tail(path: Path, data: bytes, pos: int, header: dict) -> None:
    tail = data[pos:].strip()
    if tail.startswith(b","):
        try:
            rest = _loads(b"{" + tail[1:])
        except _JSONError as e:
            raise _json_error(path, data, e, pos) from None
        if isinstance(rest, dict):
            header.update(rest)
    elif tail != b"}":
        raise TraceError(f"{path}: the JSON ends too early: the trace was probably cut short while it was written")


# --- building the columns ---------------------------------------------------


def _bad(path: Path, i: int, what: str) -> TraceError:
    return TraceError(f"{path}: event #{i} {what}")


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


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
        self._children: dict[int, list[int]] | None = None
        self._by_corr: dict[int, list[int]] | None = None

    # -- construction --
    def _build(self, batches: Iterable[list]) -> None:
        path = self.path
        name_ix: dict[str, int] = {}
        cat_ix: dict[str, int] = {}
        lane_ix: dict[tuple, int] = {}
        lane_keys: list[tuple] = []
        lane_gpu: list[bool] = []
        lane_cpu: list[bool] = []  # has events that are not the profiler's overhead
        lane_names: dict[tuple, str] = {}
        open_b: dict[tuple, list[tuple[int, Any]]] = {}
        names, cats = self.names, self.cats
        a_name, a_cat, a_ts, a_dur, a_lane, a_corr = self.name, self.cat, self.ts, self.dur, self.lane, self.corr
        keep_args = self.args
        groups = self.cat_groups
        i = -1
        for batch in batches:
            for e in batch:
                i += 1
                if not isinstance(e, dict):
                    raise _bad(path, i, f"is a {type(e).__name__}, not an object")
                ph = e.get("ph")
                if ph == "X" or ph == "B" or ph == "E":
                    pass
                elif ph == "M":
                    a = e.get("args")
                    if isinstance(a, dict) and isinstance(a.get("name"), str) and e.get("name") == "thread_name":
                        lane_names[(e.get("pid"), e.get("tid"))] = a["name"]
                    continue
                elif isinstance(ph, str):
                    continue  # instants, flows, counters: not needed here
                else:
                    raise _bad(path, i, "has no 'ph' (event type) string")
                name = e.get("name")
                ts = e.get("ts")
                if not isinstance(name, str):
                    raise _bad(path, i, f"has a name of type {type(name).__name__}; expected a string")
                if not _num(ts):
                    raise _bad(path, i, f"({name!r}) has a 'ts' of {ts!r}; expected a number of microseconds")
                pid = e.get("pid")
                tid = e.get("tid")
                if isinstance(pid, (list, dict)) or isinstance(tid, (list, dict)):
                    raise _bad(path, i, f"({name!r}) has a pid or tid that is not a number or string")
                key = (pid, tid)
                if ph == "X":
                    dur = e.get("dur", 0)
                    if not _num(dur) or dur < 0:
                        raise _bad(path, i, f"({name!r}) has a 'dur' of {dur!r}; expected a non-negative number")
                elif ph == "B":
                    open_b.setdefault(key, []).append((i, e))
                    continue
                else:  # "E" closes the latest "B" on its thread
                    stack = open_b.get(key)
                    if not stack:
                        continue
                    _, b = stack.pop()
                    e, dur = b, ts - b["ts"]
                    name, ts = b["name"], b["ts"]
                cat = e.get("cat", "")
                if not isinstance(cat, str):
                    raise _bad(path, i, f"({name!r}) has a 'cat' of type {type(cat).__name__}; expected a string")
                ci = cat_ix.get(cat)
                if ci is None:
                    ci = cat_ix[cat] = len(cats)
                    cats.append(cat)
                    groups.append(category_group(cat))
                group = groups[ci]
                ni = name_ix.get(name)
                if ni is None:
                    ni = name_ix[name] = len(names)
                    names.append(name)
                li = lane_ix.get(key)
                if li is None:
                    li = lane_ix[key] = len(lane_keys)
                    lane_keys.append(key)
                    lane_gpu.append(False)
                    lane_cpu.append(False)
                if group in GPU_GROUPS:
                    lane_gpu[li] = True
                elif group != OVERHEAD:
                    lane_cpu[li] = True
                args = e.get("args")
                corr = -1
                if args is not None:
                    if not isinstance(args, dict):
                        raise _bad(path, i, f"({name!r}) has 'args' of type {type(args).__name__}; expected an object")
                    c = args.get("correlation")
                    if isinstance(c, int) and not isinstance(c, bool):
                        corr = c
                    if group in GPU_GROUPS or group == OVERHEAD:
                        keep_args[len(a_ts)] = args
                a_name.append(ni)
                a_cat.append(ci)
                a_ts.append(ts)
                a_dur.append(dur)
                a_lane.append(li)
                a_corr.append(corr)
        if i < 0:
            raise TraceError(f"{path}: the trace holds no events")
        if not a_ts:
            raise TraceError(f"{path}: the trace holds no timed events (only metadata)")
        for li, key in enumerate(lane_keys):
            name = lane_names.get(key) or ""
            profiler = not lane_gpu[li] and not lane_cpu[li]
            if lane_gpu[li]:
                name = f"GPU {key[0]} stream {key[1]}"
            elif profiler:
                name = "profiler overhead"
            self.lanes.append(Lane(li, key[0], key[1], name, lane_gpu[li], profiler))
        self.t0 = t0 = min(a_ts)
        self.ts = array("d", [t - t0 for t in a_ts])

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
        if want_names is not None and not want_names:
            return []
        cat, nm = self.cat, self.name
        return [
            i for i in range(len(self.ts))
            if (want_cats is None or cat[i] in want_cats) and (want_names is None or nm[i] in want_names)
        ]

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
        n = len(self.ts)
        parent = array("l", [-1]) * n
        children: dict[int, list[int]] = {}
        ts, dur, lane = self.ts, self.dur, self.lane
        on_cpu = [not (ln.is_gpu or ln.is_profiler) for ln in self.lanes]
        cpu = [i for i in range(n) if on_cpu[lane[i]]]
        # Outer events first when two start together: longer first.
        cpu.sort(key=lambda i: (lane[i], ts[i], -dur[i]))
        stack: list[int] = []
        cur_lane = -1
        for i in cpu:
            if lane[i] != cur_lane:
                stack.clear()
                cur_lane = lane[i]
            start = ts[i]
            end = start + dur[i]
            # 1 ns of slack: the exported times are rounded to the microsecond's thousandth
            while stack and ts[stack[-1]] + dur[stack[-1]] < end - 1e-3:
                stack.pop()
            if stack:
                p = stack[-1]
                parent[i] = p
                children.setdefault(p, []).append(i)
            stack.append(i)
        self._parent, self._children = parent, children

    def parent(self, i: int) -> int:
        """Index of the event that encloses ``i`` on its CPU thread, or -1."""
        if self._parent is None:
            self._nest()
        return self._parent[i]

    def children(self, i: int) -> list[int]:
        """Events directly inside ``i`` on its CPU thread, in time order."""
        if self._children is None:
            self._nest()
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
        by: dict[int, list[int]] = {}
        corr = self.corr
        for i in range(len(corr)):
            c = corr[i]
            if c >= 0:
                by.setdefault(c, []).append(i)
        self._by_corr = by

    def gpu_work_of(self, i: int) -> list[int]:
        """The kernels, copies and fills that launch call ``i`` started."""
        if self._by_corr is None:
            self._link()
        c = self.corr[i]
        if c < 0:
            return []
        return [j for j in self._by_corr.get(c, ()) if j != i and self.is_gpu(j) and self.group_of(j) in GPU_WORK]

    def launch_of(self, j: int) -> int:
        """The CPU-side call that started GPU work ``j``, or -1."""
        if self._by_corr is None:
            self._link()
        c = self.corr[j]
        if c < 0:
            return -1
        for i in self._by_corr.get(c, ()):
            if i != j and not self.is_gpu(i) and self.group_of(i) in (RUNTIME, DRIVER):
                return i
        return -1


def read_trace(path: str | os.PathLike) -> Trace:
    """Read a Chrome trace written by the PyTorch profiler (``.json`` or ``.json.gz``).

    Raises :class:`TraceError` for a missing, empty, truncated or foreign file.
    """
    path = Path(path)
    data = _read_bytes(path)
    header, batches = _iter_event_batches(path, data)
    trace = Trace(path)
    trace._build(batches)
    del data
    trace.meta = header
    return trace


def lane_spans(trace: Trace, idx: Iterable[int]) -> list[tuple[float, float]]:
    """Merged [start, end) intervals covered by these events."""
    spans = sorted((trace.ts[i], trace.ts[i] + trace.dur[i]) for i in idx)
    out: list[tuple[float, float]] = []
    for s, e in spans:
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
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
