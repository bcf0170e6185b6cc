"""The questions the notebooks ask, answered from one trace.

Each function takes a :class:`~helpers.reader.trace.Trace` and returns plain data
(dataclasses, lists, dicts): no printing, no plotting, no torch. Screens
(plots, widgets, the command line) read these facts; the facts know nothing
about screens.
"""

from __future__ import annotations

import bisect
import math
import operator
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from itertools import compress, filterfalse
from typing import Any

from . import hardware, kernel_kinds as kk
from ..reader import vector
from .kernel_names import decode
from .memory import MemoryPeak, memory_peaks
from ..reader.trace import (ANNOTATION, COUNTER_RANGE, CPU_GROUPS, CPU_OP, DRIVER, GPU_WORK, MEMCPY, MEMSET, RUNTIME,
                            Trace, _gc_paused, covered, lane_spans)
from ..reader.spans import clipped

#: GPU time over self CPU time at or above which a run is GPU-bound
GPU_BOUND_RATIO = 0.5
#: the verdicts on the CPU/GPU balance
GPU_BOUND, CPU_BOUND, IN_COLLECTIVES = "GPU-bound", "CPU-bound", "inside collectives"
#: collective time at or above this share of the GPU's busy time: the rank mostly waits for other ranks or the
#: network, so neither side of its own balance sets the pace (no CPU- or GPU-bound verdict: diagnose the folder)
COLLECTIVE_SHARE = 0.5

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_FX_HASH = re.compile(r"CompiledFxGraph\s+(\S+)")
COMPILE_MARKERS = (
    "TorchDynamo Cache Lookup",
    "Torch-Compiled Region",
    "Pregraph bytecode",
    "AOTDispatcher Runtime Wrapper Prologue",
    "## Call CompiledFxGraph",
)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


# --- steps -----------------------------------------------------------------


@dataclass
class Step:
    name: str
    number: int
    start_us: float
    dur_us: float


def steps(trace: Trace) -> list[Step]:
    """The profiler's ``ProfilerStep#N`` spans on the CPU, in order."""
    out = []
    for i in trace.indices(prefix="ProfilerStep#"):
        m = _STEP.match(trace.name_of(i))
        if m and not trace.is_gpu(i):
            try:
                number = int(m.group(1))
            except ValueError:  # more digits than int() takes: not a step the profiler wrote
                continue
            out.append(Step(trace.name_of(i), number, trace.ts[i], trace.dur[i]))
    out.sort(key=lambda s: s.start_us)
    return out


def median_step_us(trace: Trace) -> float:
    """The median recorded step's duration (0 without steps)."""
    return _median([s.dur_us for s in steps(trace)])


def main_thread(trace: Trace) -> int:
    """The CPU lane that holds the profiler steps (or the busiest CPU lane); -1 when there is none."""
    st = [i for i in trace.indices(prefix="ProfilerStep#") if not trace.is_gpu(i)]
    if st:
        return trace.lane[st[0]]
    counts: dict[int, int] = {}
    for i in range(len(trace)):
        ln = trace.lanes[trace.lane[i]]
        if not ln.is_gpu and not ln.is_profiler:
            counts[ln.index] = counts.get(ln.index, 0) + 1
    return max(counts, key=counts.get) if counts else -1


# --- CPU time against GPU time ------------------------------------------------


@dataclass
class Balance:
    """What the two totals at the bottom of the profiler table say."""

    self_cpu_us: float  # the table's "Self CPU time total"
    # The table's "Self CUDA time total" (kernels, copies, fills) less the collectives: a GPU waiting
    # in NCCL for another rank is not computing, so that time must not make a run "GPU-bound".
    # Without collectives (any single-GPU run) it is the table's total.
    device_us: float
    ratio: float | None  # device / self CPU
    verdict: str | None  # GPU_BOUND, CPU_BOUND, IN_COLLECTIVES (mostly inside collectives), or None: no GPU work
    window_us: float  # from the first recorded step (or event) to the last event's end
    gpu_busy_us: float  # time in the window with at least one kernel, copy or fill running (collectives too)
    gpu_busy_share: float | None
    gpu_idle_share: float | None
    threshold: float = GPU_BOUND_RATIO
    collective_us: float = 0.0  # GPU time in collectives (NCCL/RCCL): communication, left out of device_us
    collective_exposed_us: float = 0.0  # in the window, collective time with no other GPU work running


def self_cpu_us(trace: Trace) -> float:
    """Self CPU time summed over ops, annotations and runtime calls.

    Nested events' self times add up to the time their outermost events
    cover, so this is the covered time on each CPU thread, summed.
    """
    return vector.covered_us(trace, trace.on_gpu(CPU_GROUPS, gpu=False))


def gpu_work(trace: Trace) -> list[int]:
    """Indices of kernels, copies and fills, ascending."""
    return trace.on_gpu(GPU_WORK)


def _gpu_busy_spans(trace: Trace) -> list[tuple[float, float]]:
    """The merged spans in which some kernel, copy or fill ran (asked for by several facts: kept)."""
    spans = trace.memo.get("gpu busy spans")
    if spans is None:
        spans = trace.memo["gpu busy spans"] = vector.spans(trace, gpu_work(trace))
    return spans


def window(trace: Trace) -> tuple[float, float]:
    """The recorded window: first step (or first event) to the last event's end."""
    st = steps(trace)
    lo = st[0].start_us if st else min(trace.ts)
    return lo, vector.max_end(trace)


def collective_work(trace: Trace, work: list[int] | None = None) -> list[int]:
    """Indices of the GPU work that is communication between GPUs (kind ``collective``).

    Classified by name as the kernels table does (the first event of each
    name decides), so the two always agree.
    """
    work = gpu_work(trace) if work is None else work
    name_ids = list(map(trace.name_id.__getitem__, work))
    first = dict(zip(reversed(name_ids), reversed(work)))  # name -> its first event: the earlier ones win
    names = {ni for ni, j in first.items() if kind_of(trace, j) == kk.COLLECTIVE}
    return list(compress(work, map(names.__contains__, name_ids))) if names else []


def balance(trace: Trace) -> Balance:
    """Self CPU against device time, and the verdict with its numbers.

    Time in collectives is not counted as device time: a rank that waits in
    NCCL for the others is not GPU-bound (see :mod:`helpers.advice.distributed`).
    """
    cpu = self_cpu_us(trace)
    work = gpu_work(trace)
    coll = collective_work(trace, work)
    coll_us = sum(trace.dur[i] for i in coll)
    dev = sum(trace.dur[i] for i in work) - coll_us
    lo, hi = window(trace)
    win = max(hi - lo, 0.0)
    if not work:
        return Balance(cpu, 0.0, None, None, win, 0.0, None, None)
    busy = covered(_gpu_busy_spans(trace), lo, hi)
    exposed = 0.0
    if coll:
        in_coll = set(coll)
        coll_spans = clipped(vector.spans(trace, coll), lo, hi)
        other = clipped(vector.spans(trace, list(filterfalse(in_coll.__contains__, work))), lo, hi)
        exposed = sum(e - s for s, e in coll_spans) - vector.intersection_us(coll_spans, other)
    ratio = dev / cpu if cpu > 0 else math.inf
    verdict = GPU_BOUND if ratio >= GPU_BOUND_RATIO else CPU_BOUND
    if coll and busy > 0 and coll_us >= COLLECTIVE_SHARE * busy:
        verdict = IN_COLLECTIVES
    share = busy / win if win > 0 else None
    return Balance(cpu, dev, ratio, verdict, win, busy, share, None if share is None else 1 - share,
                   collective_us=coll_us, collective_exposed_us=exposed)


# --- kernels ------------------------------------------------------------------


@dataclass
class Resources:
    """What CUPTI reports about how a kernel was launched."""

    registers_per_thread: int | None = None
    shared_memory: int | None = None  # bytes per block
    block: list | None = None
    grid: list | None = None
    blocks_per_sm: float | None = None
    warps_per_sm: float | None = None
    est_achieved_occupancy_pct: float | None = None

    @property
    def threads_per_block(self) -> int | None:
        return math.prod(self.block) if self.block else None


def _number(v: Any) -> Any:
    """A count or a size from a kernel's args; None for anything that is not a number."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _dims(v: Any) -> Any:
    """A grid or a block from a kernel's args: a list of numbers, or None."""
    return v if isinstance(v, list) and all(_number(x) is not None for x in v) else None


def _resources(args: dict) -> Resources:
    return Resources(
        _number(args.get("registers per thread")),
        _number(args.get("shared memory")),
        _dims(args.get("block")),
        _dims(args.get("grid")),
        _number(args.get("blocks per SM")),
        _number(args.get("warps per SM")),
        _number(args.get("est. achieved occupancy %")),
    )


@dataclass
class KernelStat:
    name: str
    kind: str
    count: int
    total_us: float
    median_us: float
    mean_us: float
    min_us: float
    max_us: float
    launched_by: dict[str, int]  # runtime/driver call -> count
    resources: Resources


def launching_op(trace: Trace, j: int) -> str | None:
    """The innermost ATen op around the call that launched GPU work ``j``."""
    i = trace.launch_of(j)
    for p in trace.ancestors(i) if i >= 0 else []:
        if trace.group_of(p) == CPU_OP:
            return trace.name_of(p)
    return None


_KIND_CACHE: dict[tuple, str] = {}  # (name, group, op) -> kind: classify runs regexes, names repeat


def _classify(name: str, group: str, op: str | None = None) -> str:
    key = (name, group, op)
    kind = _KIND_CACHE.get(key)
    if kind is None:
        if len(_KIND_CACHE) > 100_000:
            _KIND_CACHE.clear()
        kind = _KIND_CACHE[key] = kk.classify(name, group, op)
    return kind


def kind_of(trace: Trace, j: int) -> str:
    """What GPU event ``j`` is (see :mod:`helpers.facts.kernel_kinds`)."""
    name, group = trace.name_of(j), trace.group_of(j)
    kind = _classify(name, group)
    if kind == kk.OTHER:
        kind = _classify(name, group, launching_op(trace, j))
    return kind


def kernels(trace: Trace) -> list[KernelStat]:
    """GPU work grouped by name, most total time first."""
    out = []
    for ni, idx in _work_by_name(trace).items():
        durs = list(map(trace.dur.__getitem__, idx))
        by_id = Counter(map(trace.name_id.__getitem__, filter((-1).__ne__, trace.launchers(idx))))
        launched = Counter({trace.name_table[k]: v for k, v in by_id.items()})
        out.append(KernelStat(
            name=trace.name_table[ni],
            kind=kind_of(trace, idx[0]),
            count=len(idx),
            total_us=sum(durs),
            median_us=_median(durs),
            mean_us=sum(durs) / len(durs),
            min_us=min(durs),
            max_us=max(durs),
            launched_by=dict(launched),
            resources=_resources(trace.args.get(idx[0], {})),
        ))
    out.sort(key=lambda k: -k.total_us)
    return out


def _work_by_name(trace: Trace) -> dict[int, list[int]]:
    """GPU work by name code, each list ascending (kept: the kernels and their kinds both ask)."""
    by_name = trace.memo.get("work by name")
    if by_name is None:
        by_name = trace.memo["work by name"] = vector.by_code(trace, gpu_work(trace), "name_id")
    return by_name


@dataclass
class KindStat:
    kind: str
    count: int
    total_us: float
    median_us: float
    names: list[str]


def kernels_by_kind(trace: Trace, stats: list[KernelStat] | None = None) -> list[KindStat]:
    """GPU work grouped by kind (GEMM, elementwise, copy...), in :data:`KINDS` order."""
    stats = kernels(trace) if stats is None else stats
    durs: dict[str, list[float]] = defaultdict(list)
    names: dict[str, list[str]] = defaultdict(list)
    dur_by_name: dict[str, list[float]] = defaultdict(list)
    for ni, idx in _work_by_name(trace).items():
        dur_by_name[trace.name_table[ni]].extend(map(trace.dur.__getitem__, idx))
    for k in stats:
        durs[k.kind].extend(dur_by_name[k.name])
        names[k.kind].append(k.name)
    return [KindStat(kind, len(durs[kind]), sum(durs[kind]), _median(durs[kind]), names[kind])
            for kind in kk.KINDS if durs.get(kind)]


def durations(trace: Trace, kind: str | None = None, name: str | None = None) -> list[float]:
    """Durations (us) of GPU work of this kind or name, in time order."""
    idx = sorted(gpu_work(trace), key=trace.ts.__getitem__)
    if name is not None:
        idx = [j for j in idx if trace.name_of(j) == name]
    if kind is not None:
        idx = [j for j in idx if kind_of(trace, j) == kind]
    return [trace.dur[j] for j in idx]


def copies(trace: Trace) -> list[dict]:
    """Memory copies and fills by name: count and bytes moved."""
    acc: dict[str, dict] = {}
    value = trace.args.value
    for j in trace.on_gpu((MEMCPY, MEMSET)):
        name = trace.name_of(j)
        b = value(j, "bytes")
        row = acc.get(name)
        if row is None:
            row = acc[name] = {"name": name, "kind": kk.classify(name, trace.group_of(j)),
                               "count": 0, "bytes": 0, "total_us": 0.0, "sizes": Counter()}
        row["count"] += 1
        row["total_us"] += trace.dur[j]
        if isinstance(b, int):
            row["bytes"] += b
            row["sizes"][b] += 1
    out = list(acc.values())
    for r in out:
        r["sizes"] = dict(r["sizes"])
    return sorted(out, key=lambda r: -r["total_us"])


# --- runtime and driver calls ---------------------------------------------------


@dataclass
class CallStat:
    name: str
    count: int
    total_us: float
    launches_gpu_work: int  # how many of them started a kernel, copy or fill


def runtime_calls(trace: Trace) -> list[CallStat]:
    """CUDA (or HIP) runtime and driver calls by name, most frequent first."""
    calls = trace.on_gpu((RUNTIME, DRIVER), gpu=False)
    name_ids = list(map(trace.name_id.__getitem__, calls))
    counts = Counter(name_ids)
    launched = Counter(compress(name_ids, trace.launched(calls)))
    totals = dict.fromkeys(counts, 0.0)
    for ni, d in zip(name_ids, map(trace.dur.__getitem__, calls)):
        totals[ni] += d
    return sorted((CallStat(trace.name_table[ni], c, totals[ni], launched[ni]) for ni, c in counts.items()),
                  key=lambda c: (-c.count, c.name))


@dataclass
class Launch:
    call: str
    call_start_us: float
    work: str
    kind: str
    work_start_us: float
    latency_us: float  # from the start of the launch call to the start of the GPU work


def launches(trace: Trace) -> list[Launch]:
    """Each piece of GPU work with the call that launched it, in time order."""
    out = []
    for j in gpu_work(trace):
        i = trace.launch_of(j)
        if i < 0:
            continue
        out.append(Launch(trace.name_of(i), trace.ts[i], trace.name_of(j), kind_of(trace, j),
                          trace.ts[j], trace.ts[j] - trace.ts[i]))
    out.sort(key=lambda x: x.work_start_us)
    return out


@dataclass
class Latency:
    count: int
    min_us: float
    median_us: float
    max_us: float


def launch_latency(trace: Trace, found: list[Launch] | None = None) -> Latency | None:
    """How long GPU work waited between its launch call and its start."""
    if found is not None:
        lat = [x.latency_us for x in found]
    else:  # as launches() gives them, without building a Launch for each
        work = gpu_work(trace)
        by = trace.launchers(work)
        keep = list(map((-1).__ne__, by))
        ts = trace.ts.__getitem__
        lat = list(map(operator.sub, map(ts, compress(work, keep)), map(ts, compress(by, keep))))
    if not lat:
        return None
    return Latency(len(lat), min(lat), _median(lat), max(lat))


# --- annotations and steps ------------------------------------------------------


@dataclass
class Gap:
    step: str | None
    annotation: str
    start_us: float
    gap_us: float  # from entering the annotation to its first ATen op
    first_op: str


def annotation_gaps(trace: Trace, label: str | None = None) -> list[Gap]:
    """For each user annotation (``record_function``): the wait before its first op.

    A long gap in the first recorded step is one-time set-up (cuBLAS handle,
    workspace, lazy module loading) that warm-up removes.
    """
    wanted = []
    for a in trace.on_gpu((ANNOTATION,), gpu=False):
        name = trace.name_of(a)
        if not (name.startswith("ProfilerStep#") or (label and name != label)):
            wanted.append(a)
    if not wanted:
        return []
    st = steps(trace)
    st_starts = [s.start_us for s in st]
    ts = trace.ts
    lanes = {trace.lane[a] for a in wanted}
    ops_by_lane: dict[int, tuple[list[float], list[int]]] = {}  # lane -> op starts, ascending, and the ops
    for li, idx in trace.by_lane(trace.indices((CPU_OP,))).items():
        if li in lanes:
            idx, starts = vector.by_start(trace, idx)  # among ops that start together, the first in the file
            ops_by_lane[li] = (starts, idx)
    out = []
    for a in wanted:
        name = trace.name_of(a)
        start, end = ts[a], ts[a] + trace.dur[a]
        starts, ops = ops_by_lane.get(trace.lane[a], ([], []))
        k = bisect.bisect_left(starts, start)
        if k >= len(ops) or starts[k] > end:
            continue
        first = ops[k]
        s = bisect.bisect_right(st_starts, start) - 1
        step = st[s].name if s >= 0 and start <= st[s].start_us + st[s].dur_us else None
        out.append(Gap(step, name, start, trace.ts[first] - start, trace.name_of(first)))
    out.sort(key=lambda g: g.start_us)
    return out


# --- what the profiler itself adds -------------------------------------------------


@dataclass
class Artifacts:
    buffer_requests: list[dict]  # Activity Buffer Request: start, dur, on the GPU side or not
    closing_sync: dict | None  # the last synchronize: name, start, dur, GPU busy inside it


def artifacts(trace: Trace) -> Artifacts:
    """The profiler's own footprints: buffer requests and the flush at the end."""
    bufs = [{"name": trace.name_of(i), "start_us": trace.ts[i], "dur_us": trace.dur[i],
             "gpu_side": trace.is_gpu(i), "lane": trace.lanes[trace.lane[i]].label}
            for i in trace.indices(contains="Buffer Request")]
    bufs.sort(key=lambda b: b["start_us"])
    sync_name = [kk.is_synchronize(n) for n in trace.name_table]
    calls = trace.indices((RUNTIME, DRIVER))
    syncs = list(compress(calls, map(sync_name.__getitem__, map(trace.name_id.__getitem__, calls))))
    closing = None
    if syncs:
        i = max(syncs, key=trace.ts.__getitem__)
        s, e = trace.ts[i], trace.ts[i] + trace.dur[i]
        busy = covered(_gpu_busy_spans(trace), s, e)
        closing = {"name": trace.name_of(i), "start_us": s, "dur_us": trace.dur[i], "gpu_busy_us": busy,
                   "idle_share": 1 - busy / trace.dur[i] if trace.dur[i] > 0 else None}
    return Artifacts(bufs, closing)


# --- counter ranges --------------------------------------------------------------


@dataclass
class CounterRanges:
    """CUPTI's range-profiler events: one per kernel it replayed to read hardware counters.

    A range's span is the window in which the counters were collected, the
    same for every range of a run, not the kernel's time: ranges are never
    counted as GPU work. Their counters are summed over the ranges.
    """

    count: int
    kernels: int  # distinct range names (the kernels measured)
    median_us: float  # a range's span (the collection window)
    lanes: list[str]
    counters: dict[str, int | float]  # counter -> its total over the ranges, by name


def counter_ranges(trace: Trace) -> CounterRanges | None:
    """The range profiler's ranges and their counters, or None when the trace has none."""
    idx = trace.indices((COUNTER_RANGE,))
    if not idx:
        return None
    totals: dict[str, int | float] = {}
    for i in idx:  # file order: float totals come out the same on every path
        for k, v in trace.counters(i).items():
            totals[k] = totals.get(k, 0) + v
    lanes = sorted({trace.lane[i] for i in idx})
    return CounterRanges(len(idx), len({trace.name_id[i] for i in idx}), _median([trace.dur[i] for i in idx]),
                         [trace.lanes[li].label for li in lanes], dict(sorted(totals.items())))


# --- the dispatch chain ---------------------------------------------------------


@dataclass
class Node:
    """One event in a dispatch chain, with what it called and what ran on the GPU."""

    name: str
    group: str
    start_us: float
    dur_us: float
    children: list["Node"] = field(default_factory=list)
    gpu: list[dict] = field(default_factory=list)  # kernels/copies this call launched

    def walk(self, depth: int = 0):
        yield depth, self
        for c in self.children:
            yield from c.walk(depth + 1)

    def names(self) -> list[str]:
        return [n.name for _, n in self.walk()]


def _node(trace: Trace, i: int) -> Node:
    n = Node(trace.name_of(i), trace.group_of(i), trace.ts[i], trace.dur[i])
    for j in trace.gpu_work_of(i):
        n.gpu.append({"name": trace.name_of(j), "kind": kind_of(trace, j), "start_us": trace.ts[j],
                      "dur_us": trace.dur[j], "latency_us": trace.ts[j] - trace.ts[i]})
    n.children = [_node(trace, c) for c in trace.children(i)
                  if trace.group_of(c) in CPU_GROUPS]
    return n


def dispatch_chain(trace: Trace, annotation: str | None = None, occurrence: int = 0,
                   include_step: bool = True) -> Node | None:
    """The tree of calls under one annotation, down to the GPU work they launched.

    ``annotation`` is a ``record_function`` label (default: the first user
    annotation that is not a profiler step); ``occurrence`` picks which call of
    it (0 is the first recorded). With ``include_step`` the enclosing
    ``ProfilerStep#N`` is the root.
    """
    cands = [a for a in trace.indices((ANNOTATION,)) if not trace.is_gpu(a)
             and not trace.name_of(a).startswith("ProfilerStep#")
             and (annotation is None or trace.name_of(a) == annotation)]
    if not cands:
        return None
    cands.sort(key=trace.ts.__getitem__)
    if occurrence >= len(cands):
        return None
    a = cands[occurrence]
    node = _node(trace, a)
    if include_step:
        for p in trace.ancestors(a):
            if trace.name_of(p).startswith("ProfilerStep#"):
                root = Node(trace.name_of(p), trace.group_of(p), trace.ts[p], trace.dur[p], [node])
                return root
    return node


def ops_per_call(trace: Trace, annotation: str) -> float | None:
    """ATen ops (all levels) under one call of ``annotation``, averaged over its calls."""
    counts = []
    for a in trace.indices((ANNOTATION,), name=annotation):
        if trace.is_gpu(a):
            continue
        counts.append(sum(1 for d in trace.descendants(a) if trace.group_of(d) == CPU_OP))
    return sum(counts) / len(counts) if counts else None


# --- torch.compile --------------------------------------------------------------


@dataclass
class Compiled:
    regions: dict[str, int]  # "Torch-Compiled Region: 0/0" -> count
    graph_hashes: dict[str, int]  # CompiledFxGraph hash -> count
    markers: dict[str, int]  # each compile marker -> count

    @property
    def any(self) -> bool:
        return bool(self.regions or self.graph_hashes)


def compiled(trace: Trace) -> Compiled:
    """What torch.compile leaves on the CPU lane."""
    regions: Counter = Counter()
    hashes: Counter = Counter()
    markers: Counter = Counter()
    found: Counter = Counter()
    wanted = {ni for ni, name in enumerate(trace.name_table) if any(m in name for m in COMPILE_MARKERS)}
    if wanted:
        for i in range(len(trace)):
            if trace.name_id[i] in wanted and not trace.is_gpu(i):
                found[trace.name_id[i]] += 1
    for ni, n in found.items():
        name = trace.name_table[ni]
        for m in COMPILE_MARKERS:
            if m in name:
                markers[m.strip("# ")] += n
        if name.startswith("Torch-Compiled Region"):
            regions[name] += n
        h = _FX_HASH.search(name)
        if h:
            hashes[h.group(1).strip("#")] += n
    return Compiled(dict(regions), dict(hashes), dict(markers))


#: The spans torch.compile writes on the CPU while it compiles a frame. In torch 2.13's source (torch/_dynamo/
#: utils.py, convert_frame.py), ``ChromiumEventLogger.log_event_start`` records a profiler event named after each
#: compile event, the outermost being ``dynamo`` (``_compile``'s ``chromium_event_timed("dynamo")``) and, inside
#: it, ``entire_frame_compile`` (the phase of ``dynamo_timed("_compile.compile_inner")``); ``dynamo_timed`` also
#: wraps every timed phase in ``<key> (dynamo_timed)`` (``_compile.compile_inner (dynamo_timed)``, ``backend_
#: compile``, Inductor's ...), through ``compile_time_record_function``. torch 2.11 (the exam traces) writes all
#: three. Earlier 2.x releases wrote the ``(dynamo_timed)`` spans only (``torch.profiler.record_function(f"{key}
#: (dynamo_timed)")`` in public copies of utils.py), with other keys (``_compile.<locals>.compile_inner``), so the
#: suffix is matched whatever the key. Nested spans are not counted twice: their union is.
COMPILE_SPANS = ("dynamo", "entire_frame_compile")
COMPILE_SPAN_SUFFIX = " (dynamo_timed)"


@dataclass
class CompileTime:
    """The time torch.compile spent compiling inside the recorded window, from its own spans."""

    compiles: int  # separate stretches of compiling (outermost spans, nested ones merged into them)
    us: float  # wall time they cover inside the window
    window_us: float
    names: list[str]  # the outermost spans' names, most frequent first

    @property
    def share(self) -> float | None:
        return self.us / self.window_us if self.window_us > 0 else None


def compile_time(trace: Trace) -> CompileTime:
    """How long torch.compile compiled inside the recorded window: the union of its compile spans
    (:data:`COMPILE_SPANS`, and any ``... (dynamo_timed)``) on every CPU thread, clipped to the window."""
    lo, hi = window(trace)
    wanted = {ni for ni, name in enumerate(trace.name_table)
              if name in COMPILE_SPANS or name.endswith(COMPILE_SPAN_SUFFIX)}
    idx = [i for i in range(len(trace)) if trace.name_id[i] in wanted and not trace.is_gpu(i)] if wanted else []
    spans = lane_spans(trace, idx)  # merged across threads: wall time during which something compiled
    outer: Counter = Counter()
    for s, e in spans:  # the longest span starting at a merged stretch's start names it
        first = max((i for i in idx if trace.ts[i] == s), key=trace.dur.__getitem__)
        outer[trace.name_of(first)] += 1
    inside = [(max(s, lo), min(e, hi)) for s, e in spans if e > lo and s < hi]
    return CompileTime(len(inside), sum(e - s for s, e in inside), hi - lo, [n for n, _ in outer.most_common()])


# --- occupancy --------------------------------------------------------------------


@dataclass
class Occupancy:
    """How many blocks of one kernel fit on one SM at once, or why that cannot be said."""

    blocks_per_sm: int | None
    warps_per_sm: int | None
    max_warps_per_sm: int | None
    occupancy: float | None  # warps resident / warps possible
    limited_by: str | None  # "registers", "shared memory", "threads", "blocks", or several joined by "and"
    limits: dict[str, int | None]  # the blocks each resource allows; None: that resource sets no limit
    architecture: str | None = None  # "sm_90"
    unknown: str | None = None  # why there is no answer ("unknown architecture sm_120: ..."); None when there is


def _no_occupancy(reason: str, arch: str | None = None) -> Occupancy:
    return Occupancy(None, None, None, None, None, {}, arch, reason)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def theoretical_occupancy(registers_per_thread: int | None, shared_memory: int, threads_per_block: int,
                          device: dict) -> Occupancy:
    """How many blocks of a kernel fit on one SM, by the CUDA occupancy calculator's rules.

    ``device`` is the trace's ``deviceProperties`` entry; what Kineto leaves
    out (blocks per SM, reserved shared memory, granularities) comes from
    :mod:`helpers.facts.hardware`'s table. A GPU whose architecture the table lacks
    gets an :class:`Occupancy` whose ``unknown`` says so, with no numbers.
    """
    try:
        arch = hardware.device_architecture(device)
    except hardware.UnknownArchitecture as e:
        return _no_occupancy(str(e))
    try:  # a trace's JSON may hold floats, or worse
        regs, smem, threads = int(registers_per_thread or 0), int(shared_memory or 0), int(threads_per_block or 0)
    except (TypeError, ValueError, OverflowError):
        regs = smem = threads = -1
    if threads <= 0 or regs < 0 or smem < 0:
        return _no_occupancy(f"no usable block size, registers or shared memory ({threads_per_block!r} threads, "
                             f"{registers_per_thread!r} registers, {shared_memory!r} bytes)", arch.name)
    if arch.max_warps_per_sm < 1:
        return _no_occupancy(f"the trace's deviceProperties give {arch.max_threads_per_sm} threads per SM, "
                             f"less than one warp of {arch.warp_size}", arch.name)
    for used, allowed, what in ((threads, arch.max_threads_per_block, "threads per block"),
                                (regs, arch.max_registers_per_thread, "registers per thread"),
                                (smem, arch.shared_memory_per_block, "bytes of shared memory per block")):
        if used > allowed:
            return _no_occupancy(f"{used} {what} is more than {arch.name} allows ({allowed}): "
                                 "no such kernel can launch there", arch.name)
    warps_block = -(-threads // arch.warp_size)
    limits: dict[str, int | None] = {"registers": None}
    if regs:
        per_warp = _round_up(regs * arch.warp_size, arch.register_allocation_unit)
        warps = arch.registers_per_sm // per_warp
        limits["registers"] = (warps - warps % arch.warp_allocation_granularity) // warps_block
    per_block = _round_up(smem + arch.reserved_shared_memory_per_block, arch.shared_memory_granularity)
    limits["shared memory"] = arch.shared_memory_per_sm // per_block if per_block else None
    limits["threads"] = arch.max_warps_per_sm // warps_block
    limits["blocks"] = arch.max_blocks_per_sm
    blocks = min(v for v in limits.values() if v is not None)
    limiting = " and ".join(k for k, v in limits.items() if v == blocks)
    warps = blocks * warps_block
    return Occupancy(blocks, warps, arch.max_warps_per_sm, warps / arch.max_warps_per_sm, limiting, limits,
                     arch.name)


# --- everything at once --------------------------------------------------------------


@dataclass
class Summary:
    path: str
    parser: str
    events: int
    device: str | None
    steps: list[Step]
    balance: Balance
    kinds: list[KindStat]
    kernels: list[KernelStat]
    copies: list[dict]
    calls: list[CallStat]
    latency: Latency | None
    gaps: list[Gap]
    artifacts: Artifacts
    compiled: Compiled
    memory: list[MemoryPeak] = field(default_factory=list)  # per device, from the [memory] events; [] without them
    counter_ranges: CounterRanges | None = None  # CUPTI's range profiler: counters, never GPU time
    set_aside: Any = None  # helpers.reader.bounds.SetAside: events left out, their durations no clock gives

    @property
    def verdict(self) -> str | None:
        return self.balance.verdict

    def to_json(self) -> dict[str, Any]:
        """The command line's ``--json`` object."""
        out = {
            "path": self.path,
            "parser": self.parser,
            "events": self.events,
            "device": self.device,
            "steps": [{"name": s.name, "dur_us": round(s.dur_us, 3)} for s in self.steps],
            "kernels": [{"name": k.name, "kind": k.kind, "count": k.count, "total_us": round(k.total_us, 3),
                         "median_us": round(k.median_us, 3), "launched_by": k.launched_by,
                         "resources": {key: v for key, v in asdict(k.resources).items() if v is not None},
                         # what the name says (helpers.facts.kernel_names): library, tensor cores, types, tile
                         "name_says": decode(k.name).to_json()}
                        for k in self.kernels],
            "kinds": [{"kind": k.kind, "count": k.count, "total_us": round(k.total_us, 3),
                       "median_us": round(k.median_us, 3)} for k in self.kinds],
            # bytes: null when the trace records no size for them (ROCm puts it on the runtime call only)
            "memcpy": [{"name": c["name"], "count": c["count"], "bytes": c["bytes"] if c["sizes"] else None}
                       for c in self.copies],
            "runtime_calls": {c.name: c.count for c in self.calls},
            "verdict": self.balance.verdict,
            # null, not Infinity, where a float is not finite (GPU work and no CPU time): strict JSON
            "balance": {k: (round(v, 4) if math.isfinite(v) else None) if isinstance(v, float) else v
                        for k, v in asdict(self.balance).items()},
            "launch_latency_us": asdict(self.latency) if self.latency else None,
            "annotation_gaps": [asdict(g) for g in self.gaps[:50]],
            "artifacts": asdict(self.artifacts),
            "compiled": asdict(self.compiled),
            "memory": [{"device": m.device, "events": m.events, "peak_allocated_bytes": m.peak_allocated,
                        "peak_allocated_us": round(m.peak_allocated_us, 3), "peak_allocated_step": m.peak_allocated_step,
                        "peak_allocated_in": m.peak_allocated_in, "peak_reserved_bytes": m.peak_reserved,
                        "peak_reserved_us": round(m.peak_reserved_us, 3), "allocated_before_bytes": m.allocated_before}
                       for m in self.memory],
        }
        # only where the trace has them: other traces' output is unchanged
        if self.counter_ranges is not None:
            out["counter_ranges"] = asdict(self.counter_ranges)
        if self.set_aside is not None:
            out["set_aside"] = self.set_aside.to_json()
        return out


@_gc_paused()  # many small objects that live on: no point in looking for cycles among them
def summarize(trace: Trace) -> Summary:
    """Every fact this module knows, for one trace."""
    from ..reader.trace import PARSER

    ks = kernels(trace)
    return Summary(
        path=str(trace.path),
        parser=PARSER,
        events=len(trace),
        device=trace.device_name,
        steps=steps(trace),
        balance=balance(trace),
        kinds=kernels_by_kind(trace, ks),
        kernels=ks,
        copies=copies(trace),
        calls=runtime_calls(trace),
        latency=launch_latency(trace),
        gaps=annotation_gaps(trace),
        artifacts=artifacts(trace),
        compiled=compiled(trace),
        memory=memory_peaks(trace),
        counter_ranges=counter_ranges(trace),
        set_aside=trace.set_aside,
    )


# --- per step and per op ---------------------------------------------------------------


def gpu_work_per_step(trace: Trace) -> list[tuple[str, dict[str, int]]]:
    """For each recorded step: the GPU work its CPU side launched, counted by kind."""
    st = steps(trace)
    starts = [s.start_us for s in st]
    out: list[tuple[str, Counter]] = [(s.name, Counter()) for s in st]
    for j in gpu_work(trace):
        i = trace.launch_of(j)
        if i < 0:
            continue
        k = bisect.bisect_right(starts, trace.ts[i]) - 1
        if k >= 0 and trace.ts[i] <= st[k].start_us + st[k].dur_us:
            out[k][1][kind_of(trace, j)] += 1
    return [(name, {kind: c[kind] for kind in kk.KINDS if c.get(kind)}) for name, c in out]


@dataclass
class OpTime:
    name: str
    calls: int
    self_us: float  # time inside the op, minus the time of what it called
    total_us: float  # time inside the op, everything it called included


def op_times(trace: Trace, name: str) -> OpTime:
    """The profiler table's row for one name: calls, Self CPU and CPU total, from the trace."""
    calls = self_t = total = 0.0
    for i in trace.indices(CPU_GROUPS, name=name):
        if trace.is_gpu(i):
            continue
        calls += 1
        total += trace.dur[i]
        self_t += trace.dur[i] - sum(trace.dur[c] for c in trace.children(i))
    return OpTime(name, int(calls), self_t, total)


def label_spans(trace: Trace, annotation: str) -> list[float]:
    """Wall time of every call of a ``record_function`` annotation on the CPU, in trace order (µs)."""
    found = [i for i in trace.indices((ANNOTATION,), name=annotation) if not trace.is_gpu(i)]
    return [trace.dur[i] for i in sorted(found, key=lambda i: trace.ts[i])]


def steady_spans(trace: Trace, annotation: str) -> list[float]:
    """The calls after the first recorded one: the first carries one-time costs (notebook 03), the rest do not."""
    d = label_spans(trace, annotation)
    return d[1:] if len(d) > 1 else d


def per_call_us(trace: Trace, annotation: str) -> float | None:
    """Wall time of one call of a ``record_function`` annotation on the CPU: the median of the steady calls.

    Never a mean over every call: the first recorded call's one-time excess
    would dominate it (notebook 03 shows that excess).
    """
    d = steady_spans(trace, annotation)
    return _median(d) if d else None


def gpu_time_per_call(trace: Trace, annotation: str) -> float | None:
    """GPU time (kernels, copies, fills) launched from inside one call, averaged over calls."""
    calls = [i for i in trace.indices((ANNOTATION,), name=annotation) if not trace.is_gpu(i)]
    if not calls:
        return None
    return sum(gpu_time_under(trace, a) for a in calls) / len(calls)


def gpu_time_under(trace: Trace, i: int) -> float:
    """GPU time (kernels, copies, fills) launched by CPU event ``i`` and everything it called."""
    return sum(trace.dur[j] for d in [i] + trace.descendants(i) for j in trace.gpu_work_of(d))


def calls_in(trace: Trace, lo: float, hi: float) -> dict[str, int]:
    """Runtime and driver calls that started between ``lo`` and ``hi`` (us), by name, most first."""
    c = Counter(trace.name_of(i) for i in trace.indices((RUNTIME, DRIVER))
                if lo <= trace.ts[i] <= hi and not trace.is_gpu(i))
    return dict(c.most_common())


def settle_index(values: list[float], tolerance: float = 1.5) -> int:
    """The first position from which every value stays within ``tolerance`` x the median."""
    med = _median(values)
    k = len(values)
    while k > 0 and values[k - 1] <= tolerance * med:
        k -= 1
    return k


# --- what the notebooks' reveals read ----------------------------------------------------


def work_per_call(trace: Trace) -> dict[str, int]:
    """GPU work launched in the last recorded step, by kind: one call once things have settled."""
    per_step = gpu_work_per_step(trace)
    return per_step[-1][1] if per_step else {}


def top_kernel(trace: Trace, kind: str) -> KernelStat | None:
    """The kernel of this kind with the most GPU time, or None."""
    return next((k for k in kernels(trace) if k.kind == kind), None)


def occupancy(kernel: KernelStat, device: dict) -> Occupancy | None:
    """Theoretical occupancy of a kernel from its recorded resources and the trace's device properties."""
    r = kernel.resources
    if not (r.registers_per_thread and r.threads_per_block):
        return None
    return theoretical_occupancy(r.registers_per_thread, r.shared_memory or 0, r.threads_per_block, device)


def _innermost_op(trace: Trace, i: int) -> str | None:
    return next((trace.name_of(p) for p in trace.ancestors(i) if trace.group_of(p) == CPU_OP), None)


def launches_under(trace: Trace, op: str) -> int:
    """How many pieces of GPU work events named ``op`` (and what they called) launched."""
    return sum(len(trace.gpu_work_of(d)) for i in trace.indices(CPU_GROUPS, name=op) if not trace.is_gpu(i)
               for d in [i] + trace.descendants(i))


def occupancy_queries_by_step(trace: Trace) -> list[tuple[str, dict[str, int]]]:
    """For each recorded step, the occupancy queries made inside it, by name."""
    return [(s.name, {n: c for n, c in calls_in(trace, s.start_us, s.start_us + s.dur_us).items()
                      if kk.is_occupancy_query(n)}) for s in steps(trace)]


def ops_around(trace: Trace, is_call) -> set[str]:
    """The innermost ATen ops around the runtime or driver calls whose name passes ``is_call``."""
    return {op for i in trace.indices((RUNTIME, DRIVER)) if not trace.is_gpu(i) and is_call(trace.name_of(i))
            for op in [_innermost_op(trace, i)] if op}


@dataclass
class EstimateSplit:
    """Kineto's occupancy estimates split by shared memory: kernels above a limit, and the others."""

    above: int  # kernels using more shared memory per block than the limit
    above_zero: int  # ... of which the estimate is 0
    within: int  # kernels at or under the limit whose grid gives every SM at least one block
    within_nonzero: int  # ... of which the estimate is above 0


def estimate_by_shared_memory(trace: Trace, limit: int) -> EstimateSplit:
    """How Kineto's ``est. achieved occupancy %`` splits at a shared-memory limit, over distinct kernels."""
    above = above_zero = within = within_nonzero = 0
    for k in kernels(trace):
        r = k.resources
        if r.est_achieved_occupancy_pct is None or r.shared_memory is None:
            continue
        if r.shared_memory > limit:
            above += 1
            above_zero += r.est_achieved_occupancy_pct == 0
        elif (r.blocks_per_sm or 0) >= 1:
            within += 1
            within_nonzero += r.est_achieved_occupancy_pct > 0
    return EstimateSplit(above, above_zero, within, within_nonzero)


_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")


def compiled_region_counts(names) -> dict[str, int]:
    """``Torch-Compiled Region: F/N`` names among ``names``, counted (a profiler's event names, or a trace's)."""
    return dict(Counter(n for n in names if _REGION.match(n)))


def recompiles(regions: dict[str, int]) -> list[str]:
    """The regions whose compile count (the N of F/N) is above 0: a frame compiled again."""
    return sorted(r for r in regions if (m := _REGION.match(r)) and int(m.group(2)) > 0)


def gpu_time_by_top_op(trace: Trace, annotation: str) -> dict[str, float]:
    """GPU time launched by each op directly under ``annotation``, by op name, averaged over its calls."""
    calls = [a for a in trace.indices((ANNOTATION,), name=annotation) if not trace.is_gpu(a)]
    out: dict[str, float] = defaultdict(float)
    for a in calls:
        for c in trace.children(a):
            if trace.group_of(c) == CPU_OP:
                out[trace.name_of(c)] += gpu_time_under(trace, c)
    return {op: t / len(calls) for op, t in out.items() if t > 0}


def child_ops(trace: Trace, op: str) -> list[str]:
    """The ops the first recorded call of ``op`` made directly, in order."""
    first = sorted((i for i in trace.indices((CPU_OP,), name=op) if not trace.is_gpu(i)), key=trace.ts.__getitem__)
    if not first:
        return []
    return [trace.name_of(c) for c in sorted(trace.children(first[0]), key=trace.ts.__getitem__)
            if trace.group_of(c) == CPU_OP]


@dataclass
class GpuTwin:
    """A ``record_function`` label on the GPU lane: the span from its first to its last piece of GPU work."""

    spans: int  # how many GPU-side spans of the label
    span_us: float  # their summed length, idle gaps included
    work_us: float  # GPU work inside them


def gpu_twin(trace: Trace, label: str) -> GpuTwin | None:
    """The GPU-side copy of a ``record_function`` label, the table's second row of the same name.

    Kineto writes it on the GPU stream (category ``gpu_user_annotation``);
    its length covers the idle time between the label's kernels, which is
    why its "Self CUDA" can exceed the GPU time of the kernels themselves.
    """
    idx = [i for i in trace.indices(name=label) if trace.is_gpu(i) and trace.group_of(i) not in GPU_WORK]
    if not idx:
        return None
    spans = lane_spans(trace, idx)
    work = lane_spans(trace, gpu_work(trace))
    inside = sum(covered(work, s, e) for s, e in spans)
    return GpuTwin(len(idx), sum(trace.dur[i] for i in idx), inside)


def self_cpu_without_closing_sync(trace: Trace) -> float:
    """Self CPU time with the profiler's final synchronize taken out: the CPU's own work, not its waiting."""
    sync = artifacts(trace).closing_sync
    return self_cpu_us(trace) - (sync["dur_us"] if sync else 0.0)
