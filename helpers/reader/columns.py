"""Batches of decoded events turned into columns: one ``array`` per field, names interned.

:class:`ColumnBuilder` checks every event (an event the facts could not use
is a :class:`~helpers.reader.source.TraceError` naming it) and keeps, per timed
event, a name code, a category code, start, duration, lane code and
correlation id; of the args, only those of GPU work (registers, grid, bytes...)
and of the profiler's own events, and of CPU ops the two that link a backward
op to its forward op (``Sequence number``, ``Fwd thread id``), in columns of
their own. The profiler's ``[memory]`` instant events go to columns of their
own too (:class:`MemoryColumns`), apart from the timed events, whose nesting
assumes complete events. Batches that msgspec type-checked and that hold only
complete events (``ph`` "X", with flows and instants around them) take a path
that works a column at a time; anything else goes event by event. Both give
the same columns.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_not
from pathlib import Path
from typing import Any

from . import vector
from .categories import COUNTER_RANGE, CPU_OP, GPU_GROUPS, OVERHEAD, category_group
from .event_fields import (ARG_CLASSES, ARG_FIELDS, CORR_LIMIT, LIMIT, SEP, UNSET, PlainArgs, PlainEvent, RangeArgs,
                           RawEvent, args_dict, msgspec, shape_text)
from .json_decode import _a

from .source import TraceError

_KEEP_ARGS = GPU_GROUPS | {OVERHEAD}  # groups whose args are kept (the facts read them)
_EVENT_CLASSES = (RawEvent, PlainEvent)
_NOT_COMPLETE = frozenset({"B", "E", "M"})  # phases that the column-at-a-time path leaves to the event loop
_INSTANT = frozenset({"i", "I"})  # "I" is the Chrome format's older spelling
MEMORY_EVENT = "[memory]"  # Kineto's name for an allocation or a free (profile_memory=True)
_INT64 = 1 << 63  # what the memory and sequence columns hold: signed 64-bit integers

_ph = attrgetter("ph")
_name = attrgetter("name")
_cat = attrgetter("cat")
_pid = attrgetter("pid")
_tid = attrgetter("tid")
_ts = attrgetter("ts")
_dur = attrgetter("dur")
_seq = attrgetter("args.sequence")
_ATTR = {key: attr for attr, key in ARG_FIELDS.items()}  # JSON key -> the attribute that holds it
_fields = attrgetter("name", "cat", "pid", "tid", "ts", "dur", "args")
_sequence = attrgetter("sequence")
_dims = attrgetter("dims")
_RAW = msgspec.Raw if msgspec is not None else None
_correlation = attrgetter("correlation")


def _codes(values: Any, index: dict, new: Any) -> list:
    """Each value's code in ``index``; ``new(value)`` adds the values not in it yet (and returns its code)."""
    codes = list(map(index.get, values))
    if None in codes:
        for k, code in enumerate(codes):
            if code is None:
                v = values[k]
                code = index.get(v)
                codes[k] = code if code is not None else new(v)
    return codes


class ShapeTable(Mapping):
    """CPU op event index -> its shape text (event_fields.shape_text), for the ops recorded with shapes.

    Two arrays (the events, ascending as the reader meets them, and each one's text number) and each distinct
    text once: a model's ops repeat their shapes layer after layer and step after step. A dict of tens of
    thousands of entries costs about 100 bytes each; this, 12 (and a worker pickles it in a few copies).
    """

    __slots__ = ("events", "ids", "texts", "_number")

    def __init__(self) -> None:
        self.events = array("q")
        self.ids = array("l")
        self.texts: list[bytes] = []
        self._number: dict[bytes, int] = {}

    def _new(self, text: bytes) -> int:
        """A text not held yet: its number."""
        k = self._number[text] = len(self.texts)
        self.texts.append(text)
        return k

    def add(self, event: int, text: bytes) -> None:
        """Event ``event`` (above every event held) has the shapes ``text``."""
        k = self._number.get(text)
        self.events.append(event)
        self.ids.append(self._new(text) if k is None else k)

    def add_many(self, events: list[int], texts: list[bytes]) -> None:
        """:meth:`add` for each pair, in one go (events ascending, above every event held)."""
        self.events.fromlist(events)
        self.ids.fromlist(_codes(texts, self._number, self._new))

    def __getitem__(self, event: int) -> bytes:
        events = self.events
        k = bisect_left(events, event)
        if k < len(events) and events[k] == event:
            return self.texts[self.ids[k]]
        raise KeyError(event)

    def __contains__(self, event: object) -> bool:
        events = self.events
        k = bisect_left(events, event)  # type: ignore[arg-type]
        return k < len(events) and events[k] == event

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[int]:
        return iter(self.events)

    def numbers(self, events: list[int]) -> list[int]:
        """Each event's text number (an index into ``texts``), -1 where it has no shapes: many at once."""
        return vector.looked_up(self.events, self.ids, events)

    def pairs(self) -> Iterator[tuple[int, bytes]]:
        """(event, text) for every op held, in event order, without a lookup each."""
        return zip(self.events, map(self.texts.__getitem__, self.ids))

    def extend(self, other: "ShapeTable", shift: int) -> None:
        """``other``'s ops, their event indices ``shift`` higher (all above those held): a worker's part joined."""
        if len(self._number) != len(self.texts):  # unpickled: the texts' numbers are not sent
            self._number.update((t, k) for k, t in enumerate(self.texts))
        renum = _codes(other.texts, self._number, self._new)
        self.events.extend(array("q", map(shift.__add__, other.events)))
        self.ids.extend(array("l", map(renum.__getitem__, other.ids)))

    def kept(self, new: list[int], keep: list[bool]) -> "ShapeTable":
        """The ops whose events ``keep`` keeps, renumbered by ``new`` (the reader's events set aside)."""
        out = ShapeTable()
        out.texts, out._number = self.texts, self._number
        for e, k in zip(self.events, self.ids):
            if keep[e]:
                out.events.append(new[e])
                out.ids.append(k)
        return out

    def __getstate__(self) -> tuple:
        return self.events, self.ids, self.texts

    def __setstate__(self, state: tuple) -> None:
        self.events, self.ids, self.texts = state
        self._number = {}


class ArgsTable(Mapping):
    """Event index -> its kept args, as a dict with the JSON's keys.

    Held as decoded (a msgspec struct, or the json module's path's object),
    which takes a fraction of a dict's memory; each is turned into a dict when
    asked for.
    """

    __slots__ = ("raw",)

    def __init__(self) -> None:
        self.raw: dict[int, Any] = {}

    def __getitem__(self, i: int) -> dict:
        return args_dict(self.raw[i])

    def get(self, i: int, default: Any = None) -> Any:
        a = self.raw.get(i)
        return default if a is None else args_dict(a)

    def value(self, i: int, key: str, default: Any = None) -> Any:
        """One kept arg of event ``i`` (its JSON key), without making the dict."""
        a = self.raw.get(i)
        if a is None:
            return default
        v = getattr(a, _ATTR[key])
        return default if v is UNSET or (key == "correlation" and v == -1 and a.__class__ is not PlainArgs) else v

    def __contains__(self, i: object) -> bool:
        return i in self.raw

    def __iter__(self) -> Iterator[int]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __repr__(self) -> str:
        return f"<ArgsTable: args of {len(self.raw)} events>"


@dataclass
class MemoryColumns:
    """The profiler's ``[memory]`` events (``profile_memory=True``): one row per allocation or free, file order.

    Each row is the allocator's state just after the event, as Kineto wrote it
    in the event's args. A ``[memory]`` event that lacks one of these numbers
    (or holds something else than an integer there) is left out.
    """

    ts: array = field(default_factory=lambda: array("d"))  # microseconds, as in the file
    allocated: array = field(default_factory=lambda: array("q"))  # "Total Allocated" after it, bytes
    reserved: array = field(default_factory=lambda: array("q"))  # "Total Reserved" after it, bytes
    bytes: array = field(default_factory=lambda: array("q"))  # "Bytes": allocated (+) or freed (-)
    device_type: array = field(default_factory=lambda: array("q"))  # "Device Type": c10's DeviceType, 1 CUDA, 0 CPU
    device_id: array = field(default_factory=lambda: array("q"))  # "Device Id" (-1 for the CPU)

    def __len__(self) -> int:
        return len(self.ts)

    def append(self, ts: float, values: tuple[int, int, int, int, int]) -> None:
        self.ts.append(ts)
        for column, v in zip((self.allocated, self.reserved, self.bytes, self.device_type, self.device_id), values):
            column.append(v)


def _int64(v: Any) -> bool:
    return v.__class__ is int and -_INT64 <= v < _INT64  # a bool's class is bool: not counted


def memory_sample(e: Any) -> tuple[float, tuple[int, int, int, int, int]] | None:
    """A ``[memory]`` event's time and numbers (allocated, reserved, bytes, device type, device id), or None."""
    ts = e.ts
    t = ts.__class__
    if (t is not float and t is not int) or not -LIMIT < ts < LIMIT:
        return None
    a = e.args
    if a.__class__ not in ARG_CLASSES:
        return None
    values = (a.total_allocated, a.total_reserved, a.alloc_bytes, a.device_type, a.device_id)
    if not all(map(_int64, values)):
        return None
    return ts, values


@dataclass
class Columns:
    """What a trace's events come to: the columns and the tables their codes index."""

    names: list[str] = field(default_factory=list)  # name code -> name
    cats: list[str] = field(default_factory=list)  # category code -> category
    cat_groups: list[str] = field(default_factory=list)  # category code -> group
    lane_keys: list[tuple] = field(default_factory=list)  # lane code -> (pid, tid)
    lane_names: dict[tuple, str] = field(default_factory=dict)  # (pid, tid) -> its thread_name
    lane_gpu: list[bool] = field(default_factory=list)  # lane code -> has GPU events
    lane_cpu: list[bool] = field(default_factory=list)  # lane code -> has events that are not the profiler's
    lane_cats: set[tuple[int, int]] = field(default_factory=set)  # (lane code, category code) of every event
    name_id: array = field(default_factory=lambda: array("l"))
    cat_id: array = field(default_factory=lambda: array("l"))
    ts: array = field(default_factory=lambda: array("d"))  # microseconds, as in the file
    dur: array = field(default_factory=lambda: array("d"))
    lane: array = field(default_factory=lambda: array("l"))
    corr: array = field(default_factory=lambda: array("q"))  # -1: none
    args: ArgsTable = field(default_factory=ArgsTable)  # event index -> its kept args
    memory: MemoryColumns = field(default_factory=MemoryColumns)
    # CPU ops with a "Sequence number" (autograd's link from a backward op to its forward op), ascending:
    seq_event: array = field(default_factory=lambda: array("l"))  # the op's event index
    seq_number: array = field(default_factory=lambda: array("q"))  # its "Sequence number"
    seq_fwd_thread: array = field(default_factory=lambda: array("q"))  # its "Fwd thread id", or -1
    # CPU ops recorded with their shapes (record_shapes=True): event index -> event_fields.shape_text
    shapes: ShapeTable = field(default_factory=ShapeTable)


class _NoName(Exception):
    """A complete event without a name: the event loop words the error."""


QUOTE = 60  # characters of a name or value quoted in an error: a C++ kernel name runs to thousands


def quoted(v: Any) -> str:
    """``v`` as Python writes it (a name in quotes, escaped), cut to about :data:`QUOTE` characters."""
    if v.__class__ is str and len(v) > QUOTE:
        return repr(v[:QUOTE]) + f"... ({len(v):,} characters)"
    text = repr(v)
    return text if len(text) <= QUOTE + 20 else text[:QUOTE] + "..."


def _bad(path: Path, i: int, what: str, name: Any = None) -> TraceError:
    """Event ``i`` is unusable: what is wrong first, then the event's name, shortened."""
    return TraceError(f"{path}: event #{i} {what}" + ("" if name is None else f" (its name: {quoted(name)})"))


class ColumnBuilder:
    """Turns batches of events into :class:`Columns`, interning names, categories and lanes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.c = Columns()
        self.name_ix: dict[str, int] = {}
        self.cat_ix: dict[str, int] = {}
        self.lane_ix: dict[tuple, int] = {}
        self.open_b: dict[tuple, list[tuple[int, Any]]] = {}
        self.keep_cat: list[bool] = []  # per category: are its args kept
        self.gpu_cat: list[bool] = []
        self.cpu_cat: list[bool] = []  # neither GPU nor the profiler's overhead
        self.seq_cat: list[bool] = []  # CPU ops: their sequence numbers are kept
        self.range_cat: list[bool] = []  # CUPTI's range profiler: counters to read from the batch's text
        self.any_range = False  # a category of range-profiler events was seen
        #: the last batch's range-profiler events: (event index, position in the batch)
        self.ranges: list[tuple[int, int]] = []
        self.i = -1  # index of the last event read, timed or not
        self.n = 0  # timed events so far
        self.lone_ends = 0  # "E" events with no "B" before them on their thread

    def _new_cat(self, cat: str) -> int:
        c = self.c
        ci = self.cat_ix[cat] = len(c.cats)
        c.cats.append(cat)
        g = category_group(cat)
        c.cat_groups.append(g)
        self.keep_cat.append(g in _KEEP_ARGS)
        self.gpu_cat.append(g in GPU_GROUPS)
        self.cpu_cat.append(g not in GPU_GROUPS and g != OVERHEAD)
        self.seq_cat.append(g == CPU_OP)
        self.range_cat.append(g == COUNTER_RANGE)
        self.any_range = self.any_range or g == COUNTER_RANGE
        return ci

    def _new_lane(self, key: tuple) -> int:
        c = self.c
        li = self.lane_ix[key] = len(c.lane_keys)
        c.lane_keys.append(key)
        c.lane_gpu.append(False)
        c.lane_cpu.append(False)
        return li

    def add(self, batch: list, checked: bool, whole_args: Any = None) -> None:
        """Read one batch of events; ``checked``: msgspec decoded it, so its fields have their JSON types.

        ``whole_args(positions)``: the whole args of the batch's events at those
        positions (:meth:`helpers.reader.json_events.Document.whole_args`), asked only
        for range-profiler events, whose counters are kept apart.
        """
        self.ranges = []
        if checked:
            phs = list(map(_ph, batch))
            kinds = set(phs)
            if not kinds & _NOT_COMPLETE:
                xs = batch if len(kinds) == 1 and "X" in kinds else list(compress(batch, map("X".__eq__, phs)))
                if self._add_complete(xs, phs if xs is not batch else None):
                    if not kinds.isdisjoint(_INSTANT):
                        self._add_memory(compress(batch, map(_INSTANT.__contains__, phs)))
                    self.i += len(batch)
                    self._add_counters(whole_args)
                    return
        self._add_each(batch)
        self._add_counters(whole_args)

    def _add_counters(self, whole_args: Any) -> None:
        """The counters of the batch's range-profiler events, with their kept args (:class:`RangeArgs`)."""
        if not self.ranges or whole_args is None:
            return
        raw = self.c.args.raw
        for (n, _), a in zip(self.ranges, whole_args([k for _, k in self.ranges])):
            if a is not None:
                raw[n] = RangeArgs(raw[n], a)

    def _add_memory(self, instants: Any) -> None:
        """The ``[memory]`` events among these instant events."""
        memory = self.c.memory
        for e in instants:
            if e.name == MEMORY_EVENT:
                sample = memory_sample(e)
                if sample is not None:
                    memory.append(*sample)

    def _add_sequence(self, index: int, args: Any) -> None:
        """A CPU op's "Sequence number" and "Fwd thread id", where it has an integer one."""
        s = args.sequence
        if _int64(s):
            c = self.c
            f = args.fwd_thread
            c.seq_event.append(index)
            c.seq_number.append(s)
            c.seq_fwd_thread.append(f if _int64(f) else -1)

    def _add_complete(self, xs: list, phs: list | None) -> bool:
        """Type-checked complete events, a column at a time; False if an event needs a closer look.

        ``phs``: the batch's phases when ``xs`` is not the whole batch (to find an event's place in it).
        """
        if not xs:
            return True
        # every field at once, then one tuple per field: fewer passes over the events than a field at a time
        names, cats, pids, tids, tss, durs, argss = zip(*map(_fields, xs))
        try:  # msgspec checked the types and ranges: only a missing 'ts' or an unhashable pid is left to find
            ts = array("d", tss)  # UNSET (no 'ts') raises TypeError
            keys = list(zip(pids, tids))
            lanes = list(map(self.lane_ix.get, keys))  # a list or an object as pid raises TypeError
        except TypeError:
            return False
        c = self.c
        n0 = self.n
        try:
            name_ids = _codes(names, self.name_ix, self._new_name)
        except _NoName:  # the event loop says which event (the read fails: what was interned does not matter)
            return False
        cat_ids = _codes(cats, self.cat_ix, self._new_cat)
        if None in lanes:
            lanes = _codes(keys, self.lane_ix, self._new_lane)
        gpu_cat, cpu_cat, lane_gpu, lane_cpu = self.gpu_cat, self.cpu_cat, c.lane_gpu, c.lane_cpu
        pairs = set(zip(lanes, cat_ids))
        c.lane_cats |= pairs
        for li, ci in pairs:
            if gpu_cat[ci]:
                lane_gpu[li] = True
            elif cpu_cat[ci]:
                lane_cpu[li] = True
        keep = list(map(self.keep_cat.__getitem__, cat_ids))
        if any(keep):
            c.args.raw.update(zip(compress(range(n0, n0 + len(xs)), keep), compress(argss, keep)))
        if self.any_range:  # traces of the range profiler only
            range_cat = self.range_cat
            found = [k for k, ci in enumerate(cat_ids) if range_cat[ci]]
            if found:
                place = list(range(len(xs))) if phs is None else list(compress(range(len(phs)), map("X".__eq__, phs)))
                self.ranges = [(n0 + k, place[k]) for k in found]
        # Few events carry a sequence number (CPU ops recorded with autograd on): found in C, then checked.
        seqs = list(map(_sequence, argss))
        found = list(compress(range(len(xs)), map(is_not, seqs, repeat(UNSET))))
        if found:
            seq_cat = self.seq_cat
            seq_event, seq_number, seq_fwd = c.seq_event.append, c.seq_number.append, c.seq_fwd_thread.append
            for k in found:
                s = seqs[k]
                if seq_cat[cat_ids[k]] and s.__class__ is int and -_INT64 <= s < _INT64:
                    f = argss[k].fwd_thread
                    seq_event(n0 + k)
                    seq_number(s)
                    seq_fwd(f if f.__class__ is int and -_INT64 <= f < _INT64 else -1)
        dims = list(map(_dims, argss))  # empty Raw (falsy) where an event has no Input Dims
        if any(dims):
            seq_cat = self.seq_cat
            # CPU ops only: their shapes are what the roofline reads
            ks = [k for k in compress(range(len(xs)), dims) if seq_cat[cat_ids[k]]]
            if ks:
                picked = list(map(argss.__getitem__, ks))
                if picked[0].dims.__class__ is _RAW:  # (a batch is decoded whole by msgspec or by json)
                    join = SEP.join  # (shape_text's msgspec path, inline: tens of thousands of calls saved)
                    texts = [join((a.dims, a.types, a.concrete)) for a in picked]
                else:
                    texts = list(map(shape_text, picked))
                c.shapes.add_many([n0 + k for k in ks], texts)
        c.name_id.fromlist(name_ids)
        c.cat_id.fromlist(cat_ids)
        c.ts.extend(ts)
        c.dur.extend(array("d", durs))
        c.lane.fromlist(lanes)
        c.corr.extend(array("q", map(_correlation, argss)))  # -1 where there is none
        self.n += len(xs)
        return True

    def _new_name(self, name: str) -> int:
        if name is UNSET:
            raise _NoName
        names = self.c.names
        ni = self.name_ix[name] = len(names)
        names.append(name)
        return ni

    def _add_each(self, batch: list) -> None:
        """Any batch, event by event, with every check.

        The reader's hot loop, kept as one function on purpose (the one helper
        over 80 lines): it runs once per event, and splitting it would add a
        function call and re-bound locals to every event of the loop that
        benchmarks/bench_reader.py times.
        """
        path, c = self.path, self.c
        name_ix, cat_ix, lane_ix = self.name_ix, self.cat_ix, self.lane_ix
        lane_gpu, lane_cpu, lane_names, open_b = c.lane_gpu, c.lane_cpu, c.lane_names, self.open_b
        keep_args, shapes = c.args.raw, c.shapes
        keep_cat, gpu_cat, cpu_cat, seq_cat = self.keep_cat, self.gpu_cat, self.cpu_cat, self.seq_cat
        range_cat, ranges = self.range_cat, self.ranges
        limit, corr_limit = LIMIT, CORR_LIMIT
        i, n = self.i, self.n
        first = i + 1  # the index of the batch's first event
        c_name: list[int] = []
        c_cat: list[int] = []
        c_ts: list[float] = []
        c_dur: list[float] = []
        c_lane: list[int] = []
        c_corr: list[int] = []
        for e in batch:
            i += 1
            if e.__class__ not in _EVENT_CLASSES:
                raise _bad(path, i, f"is {_a(e)}, not an object")
            args = e.args
            ph = e.ph
            if ph == "X" or ph == "B" or ph == "E":
                pass
            elif ph == "M":
                if e.name == "thread_name":
                    if args.__class__ in ARG_CLASSES and isinstance(args.name, str):
                        key = (e.pid, e.tid)
                        if type(key[0]) not in (list, dict) and type(key[1]) not in (list, dict):
                            lane_names[key] = args.name
                continue
            elif ph == "i" or ph == "I":
                if e.name == MEMORY_EVENT:
                    sample = memory_sample(e)
                    if sample is not None:
                        c.memory.append(*sample)
                continue
            elif isinstance(ph, str):
                continue  # flows, counters, other instants: not needed here
            else:
                raise _bad(path, i, "has no 'ph' (event type) string")
            name = e.name
            ts = e.ts
            if name.__class__ is not str:
                if ph != "E":  # an end event takes its name from the begin event
                    got = "no name" if name is UNSET else f"a name of type {type(name).__name__}"
                    raise _bad(path, i, f"has {got}; expected a string")
                name = "end"
            t = ts.__class__
            if (t is not float and t is not int) or not -limit < ts < limit:
                shown = "no 'ts'" if ts is UNSET else f"a 'ts' of {quoted(ts)}"
                raise _bad(path, i, f"has {shown}; expected a number of microseconds", name)
            pid = e.pid
            tid = e.tid
            if type(pid) in (list, dict) or type(tid) in (list, dict):
                raise _bad(path, i, "has a pid or tid that is not a number or string", name)
            li = lane_ix.get((pid, tid))
            if ph == "X":
                dur = e.dur
                t = dur.__class__
                if (t is not float and t is not int) or not 0 <= dur < limit:
                    raise _bad(path, i, f"has a 'dur' of {quoted(dur)}; expected a non-negative number", name)
                cat = e.cat
            elif ph == "B":
                open_b.setdefault((pid, tid), []).append((i, e))
                continue
            else:  # "E" closes the latest "B" on its thread
                stack = open_b.get((pid, tid))
                if not stack:
                    self.lone_ends += 1
                    continue
                _, b = stack.pop()
                name, dur, ts = b.name, ts - b.ts, b.ts
                if dur < 0:
                    raise _bad(path, i, "ends before it begins", name)
                args = b.args
                cat = b.cat
            ci = cat_ix.get(cat) if cat.__class__ is str else None
            if ci is None:
                if type(cat) is not str:
                    raise _bad(path, i, f"has a 'cat' of type {type(cat).__name__}; expected a string", name)
                ci = self._new_cat(cat)
            ni = name_ix.get(name)
            if ni is None:
                ni = self._new_name(name)
            if li is None:
                li = self._new_lane((pid, tid))
            if gpu_cat[ci]:
                lane_gpu[li] = True
            elif cpu_cat[ci]:
                lane_cpu[li] = True
            if args.__class__ not in ARG_CLASSES:
                raise _bad(path, i, f"has 'args' of type {type(args).__name__}; expected an object", name)
            corr = args.correlation
            if corr.__class__ is not int or not 0 <= corr < corr_limit:
                corr = -1
            if keep_cat[ci]:
                keep_args[n] = args
                if range_cat[ci] and ph == "X":  # its counters: read from the batch's text, afterwards
                    ranges.append((n, i - first))
            if seq_cat[ci]:
                if args.sequence is not UNSET:
                    self._add_sequence(n, args)
                d = args.dims if args.__class__ is not RangeArgs else None  # (a range event's args hold no shapes)
                if d or d == []:
                    shapes.add(n, shape_text(args))
            n += 1
            c_name.append(ni)
            c_cat.append(ci)
            c_ts.append(ts)
            c_dur.append(dur)
            c_lane.append(li)
            c_corr.append(corr)
        c.lane_cats.update(zip(c_lane, c_cat))
        c.name_id.fromlist(c_name)
        c.cat_id.fromlist(c_cat)
        c.ts.fromlist(c_ts)
        c.dur.fromlist(c_dur)
        c.lane.fromlist(c_lane)
        c.corr.fromlist(c_corr)
        self.i, self.n = i, n

    def paired(self) -> bool:
        """Whether begin/end events ("B", "E") were read: a part of the list cannot be read apart from them."""
        return bool(self.open_b or self.lone_ends)

    def merge(self, part: Columns, read: int) -> None:
        """The columns of the events that follow, read apart (:mod:`helpers.reader.parts`); ``read``: events in them, timed or not.

        Codes are given as if this builder had read those events itself: the
        tables come out the same, in the same order.
        """
        c, n0 = self.c, self.n
        names = [self.name_ix.get(x) for x in part.names]
        names = [self._new_name(x) if k is None else k for x, k in zip(part.names, names)]
        cats = [self.cat_ix.get(x) for x in part.cats]
        cats = [self._new_cat(x) if k is None else k for x, k in zip(part.cats, cats)]
        lanes = []
        for k, key in enumerate(part.lane_keys):
            li = self.lane_ix.get(key)
            if li is None:
                li = self._new_lane(key)
            c.lane_gpu[li] = c.lane_gpu[li] or part.lane_gpu[k]
            c.lane_cpu[li] = c.lane_cpu[li] or part.lane_cpu[k]
            lanes.append(li)
        c.lane_cats.update((lanes[li], cats[ci]) for li, ci in part.lane_cats)
        c.lane_names.update(part.lane_names)
        c.name_id.extend(vector.remap(part.name_id, names))
        c.cat_id.extend(vector.remap(part.cat_id, cats))
        c.lane.extend(vector.remap(part.lane, lanes))
        c.ts.extend(part.ts)
        c.dur.extend(part.dur)
        c.corr.extend(part.corr)
        c.args.raw.update(zip(map(n0.__add__, part.args.raw), part.args.raw.values()))
        c.shapes.extend(part.shapes, n0)
        m, pm = c.memory, part.memory
        for column in ("ts", "allocated", "reserved", "bytes", "device_type", "device_id"):
            getattr(m, column).extend(getattr(pm, column))
        c.seq_event.extend(array("l", map(n0.__add__, part.seq_event)))
        c.seq_number.extend(part.seq_number)
        c.seq_fwd_thread.extend(part.seq_fwd_thread)
        self.i += read
        self.n += len(part.ts)

    def finish(self) -> Columns:
        """The columns, once every batch is in; TraceError if no event can be shown."""
        if self.i < 0:
            raise TraceError(f"{self.path}: the trace holds no events")
        if not self.n:
            raise TraceError(f"{self.path}: the trace holds no timed events (only metadata, instants or flows)")
        return self.c
