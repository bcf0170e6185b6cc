"""A profiler trace, held column by column, and the questions the facts ask of it.

No torch, no pandas, and numpy only if it is there (:mod:`helpers.reader.vector`):
this works on any machine and on any trace file, however it was made.
:func:`read_trace` streams the file (:mod:`helpers.reader.source` for the
bytes, :mod:`helpers.reader.json_events` for the JSON, :mod:`helpers.reader.columns`
for the columns; :mod:`helpers.reader.parts` for a large file read by several
processes at once) into a :class:`Trace`:
one ``array`` per field, names interned, so a trace of hundreds of megabytes
costs less memory than its own text (``benchmarks/bench_reader.py`` measures
it). :class:`Trace` answers the questions: which events, nested in which, which
launch call started which kernel.

:func:`read_trace` raises :class:`TraceError` with a message that says what is
wrong for anything that is not a readable trace.
"""

from __future__ import annotations

import gc
import os
from array import array
from dataclasses import dataclass
from itertools import compress, repeat
from pathlib import Path
from typing import Any, Callable, Iterable

from .categories import (ANNOTATION, COUNTER_RANGE, CPU_GROUPS, CPU_OP, DRIVER, GPU_ANNOTATION, GPU_GROUPS, GPU_WORK,
                         KERNEL, MEMCPY, MEMSET, OTHER, OVERHEAD, PYTHON, RUNTIME, SYNC, category_group)
from .spans import covered, gc_paused, lane_spans
from . import bounds as trace_bounds, parts as trace_parts, vector
from .columns import ColumnBuilder, Columns, MemoryColumns
from .event_fields import PARSER, RangeArgs
from .json_events import Document
from .source import TraceError, open_text

_gc_paused = gc_paused  # the name facts.py imports

__all__ = ["TraceError", "Trace", "Event", "Lane", "MemoryColumns", "read_trace", "PARSER", "lane_spans", "covered",
           "category_group", "CPU_OP", "ANNOTATION", "RUNTIME", "DRIVER", "KERNEL", "MEMCPY", "MEMSET",
           "GPU_ANNOTATION", "PYTHON", "OVERHEAD", "SYNC", "COUNTER_RANGE", "OTHER", "GPU_GROUPS", "GPU_WORK",
           "CPU_GROUPS"]


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


def _lane(c: Columns, li: int) -> Lane:
    key = c.lane_keys[li]
    gpu = c.lane_gpu[li]
    profiler = not gpu and not c.lane_cpu[li]
    if gpu:
        name = f"GPU {key[0]} stream {key[1]}"
    elif profiler:
        name = "profiler overhead"
    else:
        name = c.lane_names.get(key) or ""
    return Lane(li, key[0], key[1], name, gpu, profiler)


class Trace:
    """A profiler trace, held column by column.

    ``len(trace)`` timed events, each with a name, category, start and
    duration (microseconds since the first event), a lane (CPU thread or GPU
    stream), a correlation id linking a launch call to the GPU work it
    started, and, for GPU work, its args (registers, grid, bytes...).

    Beside them: ``memory``, the profiler's ``[memory]`` events (their times
    on the same clock, so a sample may fall before the first timed event),
    and, for CPU ops that have one, autograd's sequence number
    (:meth:`sequence_of`).
    """

    def __init__(self, path: Path, columns: Columns | None = None, meta: dict | None = None) -> None:
        c = columns or Columns()
        self.path = path
        self.meta: dict = meta if meta is not None else {}
        self.name_table: list[str] = c.names  # name code -> name
        self.cat_table: list[str] = c.cats  # category code -> category
        self.cat_groups: list[str] = c.cat_groups  # category code -> group
        self.name_id: array = c.name_id  # per event: its name's code
        self.cat_id: array = c.cat_id  # per event: its category's code
        self.ts: array = c.ts  # per event: start, microseconds since the first event
        self.dur: array = c.dur
        self.lane: array = c.lane  # per event: its lane's index in ``lanes``
        self.lane_cats: set[tuple[int, int]] = c.lane_cats  # (lane, category code) pairs that occur
        self.corr: array = c.corr  # per event: correlation id, or -1
        self.args = c.args  # GPU work and the profiler's events: their kept args (a Mapping of dicts)
        self.memory: MemoryColumns = c.memory  # the [memory] events, in file order
        self.seq_event: array = c.seq_event  # CPU ops with a sequence number: their indices, ascending
        #: CPU ops recorded with their shapes: event index -> their Input Dims, Input type and Concrete Inputs as JSON
        #: texts joined by NUL (reader.event_fields.shape_text); empty without record_shapes
        self.shapes = c.shapes  # a columns.ShapeTable
        self.seq_number: array = c.seq_number  # ... their "Sequence number"
        self.seq_fwd_thread: array = c.seq_fwd_thread  # ... their "Fwd thread id" (-1: none)
        self._seq: dict[int, int] | None = None  # event index -> position in the seq columns, once asked
        self.lanes: list[Lane] = [_lane(c, li) for li in range(len(c.lane_keys))]
        self._lane_gpu = [ln.is_gpu for ln in self.lanes]
        self.t0 = 0.0  # raw timestamp of the first event, microseconds
        if len(self.ts):
            self.t0 = t0 = min(self.ts)
            if t0:
                self.ts = vector.shifted(self.ts, t0)
                if len(self.memory):
                    self.memory.ts = vector.shifted(self.memory.ts, t0)
        self._parent: array | None = None
        self._order: array | None = None  # the CPU events in the order nesting visits them
        self._children: dict[int, list[int]] | None = None
        self._asked = 0  # parents found one at a time, before the whole nesting is worth making
        self._by_corr: dict | None = None  # set once launch calls and GPU work are linked
        self._launchers: tuple[dict[int, int], dict[int, int]] = ({}, {})  # correlation -> first, second launch call
        self._work: tuple[dict[int, int], dict[int, list[int]]] = ({}, {})  # correlation -> GPU work: the first; all, if several
        self._by_cat: list[array] | None = None  # per category: its events' indices
        self._by_name: list[array] | None = None  # per name: its events' indices
        self._queries: dict[tuple, array] = {}  # what indices() found, by its arguments
        #: what the facts derived once and ask again (the trace never changes after reading)
        self.memo: dict[Any, Any] = {}
        #: events left out because no clock gives their duration (helpers.reader.bounds), or None
        self.set_aside: trace_bounds.SetAside | None = None
        #: read by several processes (helpers.reader.parts): how many, and the workers' peak memory
        self.read_by: dict[str, int] = {"processes": 1, "worker_peak_bytes": 0}

    # -- basic access --
    def __len__(self) -> int:
        return len(self.ts)

    def __getitem__(self, i: int) -> Event:
        c = self.cat_id[i]
        corr = self.corr[i]
        return Event(
            index=i,
            name=self.name_table[self.name_id[i]],
            cat=self.cat_table[c],
            group=self.cat_groups[c],
            start=self.ts[i],
            dur=self.dur[i],
            lane=self.lanes[self.lane[i]],
            correlation=corr if corr >= 0 else None,
            args=self.args.get(i, {}),
        )

    def __repr__(self) -> str:
        return f"<Trace {self.path.name}: {len(self)} events, {len(self.lanes)} lanes, {self.device_name or 'no GPU'}>"

    def sequence_of(self, i: int) -> tuple[int, int] | None:
        """Event ``i``'s autograd "Sequence number" and "Fwd thread id" (-1 if absent), or None.

        A forward op and the backward node autograd recorded for it carry the
        same sequence number. On a backward op, "Fwd thread id" is the
        profiler's number for the thread that ran the forward op, not the OS
        thread id the lanes show (the H200 traces: 1 on backward ops, 0 on forward ops).
        """
        if self._seq is None:
            self._seq = {i: k for k, i in enumerate(self.seq_event)}
        k = self._seq.get(i)
        return None if k is None else (self.seq_number[k], self.seq_fwd_thread[k])

    def counters(self, i: int) -> dict[str, int | float]:
        """The hardware counters that CUPTI's range profiler recorded on event ``i`` (a counter range), or {}."""
        a = self.args.raw.get(i)
        return a.counters if a.__class__ is RangeArgs else {}

    def group_of(self, i: int) -> str:
        return self.cat_groups[self.cat_id[i]]

    def name_of(self, i: int) -> str:
        return self.name_table[self.name_id[i]]

    def end_of(self, i: int) -> float:
        return self.ts[i] + self.dur[i]

    def is_gpu(self, i: int) -> bool:
        return self._lane_gpu[self.lane[i]]

    def with_category(self, cat: str) -> list[int]:
        """Indices of the events whose category is exactly ``cat`` (the trace's own word), ascending."""
        by = self._index()
        return sorted(i for c, name in enumerate(self.cat_table) if name == cat for i in by[c])

    def _index(self) -> list[array]:
        if self._by_cat is None:
            self._by_cat = _positions(self.cat_id, len(self.cat_table))
        return self._by_cat

    def _name_index(self) -> list[array]:
        if self._by_name is None:
            self._by_name = _positions(self.name_id, len(self.name_table))
        return self._by_name

    def indices(self, groups: Iterable[str] | None = None, name: str | None = None,
                prefix: str | None = None, contains: str | None = None) -> list[int]:
        """Indices of events in these groups and/or with this name (exact, prefix or part), ascending."""
        return self.indices_array(groups, name, prefix, contains).tolist()  # a new list each time: callers change it

    def indices_array(self, groups: Iterable[str] | None = None, name: str | None = None,
                      prefix: str | None = None, contains: str | None = None) -> array:
        """:meth:`indices` as the ``array`` it keeps (8 bytes an event, not a list's 36): not to be changed."""
        key = (None if groups is None else frozenset(groups), name, prefix, contains)
        found = self._queries.get(key)
        if found is None:  # the facts ask the same questions again and again
            found = self._queries[key] = self._find(key[0], name, prefix, contains)
        return found

    def _find(self, groups: frozenset | None, name: str | None, prefix: str | None,
              contains: str | None) -> array:
        want_cats = None
        if groups is not None:
            want_cats = {ci for ci, g in enumerate(self.cat_groups) if g in groups}
        want_names = None
        if name is not None:
            want_names = {ni for ni, n in enumerate(self.name_table) if n == name}
        elif prefix is not None:
            want_names = {ni for ni, n in enumerate(self.name_table) if n.startswith(prefix)}
        elif contains is not None:
            want_names = {ni for ni, n in enumerate(self.name_table) if contains in n}
        if want_names is not None:
            if not want_names:
                return array("l")
            if self._by_name is None and len(self._queries) < 8:
                # A few names: one pass over the column beats building the index of every name.
                idx = array("l", compress(range(len(self.name_id)), map(want_names.__contains__, self.name_id)))
            else:
                by = self._name_index()
                idx = array("l", _merged([by[ni] for ni in want_names]))
            if want_cats is not None:
                cat = self.cat_id
                idx = array("l", [i for i in idx if cat[i] in want_cats])
            return idx
        if want_cats is not None:
            if self._by_cat is None and vector.fast(len(self.ts)):  # one pass in C beats building every category's index
                return vector.select(self, [ci in want_cats for ci in range(len(self.cat_groups))],
                                     [True] * len(self.lanes))
            by = self._index()
            return array("l", _merged([by[ci] for ci in want_cats]))
        return array("l", range(len(self.ts)))

    def on_gpu(self, groups: Iterable[str], gpu: bool = True) -> list[int]:
        """Indices of events in these groups on GPU lanes (``gpu=False``: on the other lanes), ascending."""
        return self.on_gpu_array(groups, gpu).tolist()

    def on_gpu_array(self, groups: Iterable[str], gpu: bool = True) -> array:
        """:meth:`on_gpu` as the ``array`` it keeps (8 bytes an event, not a list's 36): not to be changed."""
        key = ("gpu" if gpu else "not gpu", frozenset(groups))
        found = self._queries.get(key)
        if found is None:
            cat_flags = [g in key[1] for g in self.cat_groups]
            lane_gpu = self._lane_gpu
            if any(cat_flags[ci] and lane_gpu[li] != gpu for li, ci in self.lane_cats):  # some to leave out
                lane_flags = lane_gpu if gpu else [not g for g in lane_gpu]
            else:
                lane_flags = [True] * len(lane_gpu)
            found = self._queries[key] = vector.select(self, cat_flags, lane_flags)
        return found

    def by_lane(self, idx: list[int]) -> dict[int, list[int]]:
        """These events split by lane (each list in the order of ``idx``), lanes in the order of their codes."""
        return vector.by_code(self, idx, "lane")

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
        with gc_paused():
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
            if self._asked < ASKED_ALONE and vector.fast(len(self.ts)):  # a few questions: no need to nest every event
                self._asked += 1
                return self._parent_alone(i)
            self._nest()
        return self._parent[i]

    def _parent_alone(self, i: int) -> int:
        """What :meth:`_nest_lanes` makes ``i``'s parent, found for ``i`` alone.

        The nesting visits a lane's events by start (longer first, then file
        order) and pops the open events that end before the new one ends
        (less 1 ns); the parent is what is left on top. That is the last event
        visited before ``i`` that ends no earlier than ``i`` does, less 1 ns:
        any later one it would be popped by ends later still, so it would be
        the answer instead, and any later one still open above it ends
        earlier, so it is popped when ``i`` comes.
        """
        li = self.lane[i]
        if self._lane_gpu[li] or self.lanes[li].is_profiler:
            return -1
        return vector.nest_parent(self, li, i)

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
        self._launchers = _first_two(self.on_gpu((RUNTIME, DRIVER), gpu=False), self.corr)
        first, more = _first_two(self.on_gpu(GPU_WORK), self.corr, every=True)
        self._work = (first, more)
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

    def launchers(self, work: list[int]) -> list[int]:
        """For each piece of GPU work in ``work``, the CPU-side call that started it, or -1 (:meth:`launch_of`, at once)."""
        if self._by_corr is None:
            self._link()
        first = self._launchers[0]  # a launch call is on a CPU lane: never the GPU work itself
        return list(map(first.get, map(self.corr.__getitem__, work), repeat(-1)))

    def launched(self, calls: list[int]) -> list[bool]:
        """For each launch call in ``calls``, whether it started any GPU work (:meth:`gpu_work_of`, at once)."""
        if self._by_corr is None:
            self._link()
        return list(map(self._work[0].__contains__, map(self.corr.__getitem__, calls)))

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


ASKED_ALONE = 256  # parents found one by one (with numpy) before every event is nested at once


def _first_two(idx: list[int], corr: array, every: bool = False) -> tuple[dict, dict]:
    """For the events ``idx`` (ascending) that have a correlation id: id -> the first of them with it, and
    id -> the second (``every``: id -> all of them, for the ids that several have)."""
    ids = list(map(corr.__getitem__, idx))
    has = list(map((-1).__lt__, ids))
    if not all(has):
        idx, ids = list(compress(idx, has)), list(compress(ids, has))
    first = dict(zip(reversed(ids), reversed(idx)))  # the earliest event wins: it is written last
    more: dict[int, Any] = {}
    if len(first) < len(ids):  # a few ids shared: found in Python
        seen: dict[int, list[int]] = {}
        for c, i in zip(ids, idx):
            seen.setdefault(c, []).append(i)
        more = {c: (x if every else x[1]) for c, x in seen.items() if len(x) > 1}
    return first, more


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
    """For each code 0..n-1, the event indices whose ``column`` holds it, ascending."""
    if vector.fast(len(column)):
        return vector.positions(column, n)
    by: list[list[int]] = [[] for _ in range(n)]
    append = [x.append for x in by]
    for i, c in enumerate(column):
        append[c](i)
    return [array("l", x) for x in by]


def read_trace(path: str | os.PathLike, parser: str | None = None,
               meanwhile: Callable[[], Any] | None = None) -> Trace:
    """Read a Chrome trace written by the PyTorch profiler (``.json`` or ``.json.gz``).

    ``parser`` ("msgspec" or "json") is for tests; by default the fastest one installed.
    ``meanwhile``: work the caller needs done next (its imports, say), run while forked workers finish reading a
    large file, if any do (:mod:`helpers.reader.parts`); it may not run at all.
    Raises :class:`TraceError` for a missing, empty, truncated or foreign file.
    """
    if isinstance(path, str) and not path:  # Path("") is ".", the folder this runs in: say what is wrong instead
        raise TraceError("no trace named: the path given is empty (give a .json or .json.gz file)")
    path = Path(path)
    blocks, close, source = open_text(path)
    parser = parser or PARSER
    collect = gc.isenabled()
    gc.disable()  # millions of objects that die young: no cycles to look for among them
    split = None
    try:
        b = ColumnBuilder(path)
        n = trace_parts.processes(path, source.text_size)
        if n > 1:
            split = trace_parts.Split(path, parser, b, n, source, meanwhile)
        doc = Document(path, blocks, parser, part=split)
        for batch, checked in doc.batches():
            b.add(batch, checked, doc.whole_args)
            del batch
        columns = b.finish()
        aside = trace_bounds.set_aside(columns, path)
    finally:
        if split is not None:
            split.close()
        close()
        if collect:
            gc.enable()
    trace = Trace(path, columns, doc.header)
    trace.set_aside = aside
    if split is not None and split.joined:
        trace.read_by = {"processes": split.joined + 1, "worker_peak_bytes": split.worker_peak_bytes}
    return trace
