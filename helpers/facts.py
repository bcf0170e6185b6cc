"""The questions the notebooks ask, answered from one trace.

Each function takes a :class:`~helpers.trace.Trace` and returns plain data
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
from typing import Any

from . import kernel_kinds as kk
from .trace import (ANNOTATION, CPU_GROUPS, CPU_OP, DRIVER, GPU_WORK, MEMCPY, MEMSET, RUNTIME,
                    Trace, _gc_paused, covered, lane_spans)

#: GPU time over self CPU time at or above which a run is compute-bound
COMPUTE_BOUND_RATIO = 0.5

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


# --- CPU time against GPU time ------------------------------------------------


@dataclass
class Balance:
    """What the two totals at the bottom of the profiler table say."""

    self_cpu_us: float  # the table's "Self CPU time total"
    device_us: float  # the table's "Self CUDA time total": kernels, copies, fills
    ratio: float | None  # device / self CPU
    verdict: str | None  # "overhead-bound", "compute-bound", or None without GPU work
    window_us: float  # from the first recorded step (or event) to the last event's end
    gpu_busy_us: float  # time in the window with at least one kernel, copy or fill running
    gpu_busy_share: float | None
    gpu_idle_share: float | None
    threshold: float = COMPUTE_BOUND_RATIO


def self_cpu_us(trace: Trace) -> float:
    """Self CPU time summed over ops, annotations and runtime calls.

    Nested events' self times add up to the time their outermost events
    cover, so this is the covered time on each CPU thread, summed.
    """
    per_lane: dict[int, list[int]] = defaultdict(list)
    lane = trace.lane
    on_gpu = [ln.is_gpu for ln in trace.lanes]
    for i in trace.indices(CPU_GROUPS):
        if not on_gpu[lane[i]]:
            per_lane[lane[i]].append(i)
    return sum(e - s for idx in per_lane.values() for s, e in lane_spans(trace, idx))


def gpu_work(trace: Trace) -> list[int]:
    """Indices of kernels, copies and fills."""
    return [i for i in trace.indices(GPU_WORK) if trace.is_gpu(i)]


def window(trace: Trace) -> tuple[float, float]:
    """The recorded window: first step (or first event) to the last event's end."""
    st = steps(trace)
    lo = st[0].start_us if st else min(trace.ts)
    hi = max(map(operator.add, trace.ts, trace.dur))
    return lo, hi


def balance(trace: Trace) -> Balance:
    """Self CPU against device time, and the verdict with its numbers."""
    cpu = self_cpu_us(trace)
    work = gpu_work(trace)
    dev = sum(trace.dur[i] for i in work)
    lo, hi = window(trace)
    win = max(hi - lo, 0.0)
    if not work:
        return Balance(cpu, 0.0, None, None, win, 0.0, None, None)
    busy = covered(lane_spans(trace, work), lo, hi)
    ratio = dev / cpu if cpu > 0 else math.inf
    verdict = "compute-bound" if ratio >= COMPUTE_BOUND_RATIO else "overhead-bound"
    share = busy / win if win > 0 else None
    return Balance(cpu, dev, ratio, verdict, win, busy, share, None if share is None else 1 - share)


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
    """What GPU event ``j`` is (see :mod:`helpers.kernel_kinds`)."""
    name, group = trace.name_of(j), trace.group_of(j)
    kind = _classify(name, group)
    if kind == kk.OTHER:
        kind = _classify(name, group, launching_op(trace, j))
    return kind


def kernels(trace: Trace) -> list[KernelStat]:
    """GPU work grouped by name, most total time first."""
    by_name: dict[int, list[int]] = defaultdict(list)
    for j in gpu_work(trace):
        by_name[trace.name[j]].append(j)
    out = []
    for ni, idx in by_name.items():
        durs = [trace.dur[j] for j in idx]
        launched = Counter(trace.name_of(i) for i in (trace.launch_of(j) for j in idx) if i >= 0)
        out.append(KernelStat(
            name=trace.names[ni],
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
    idx_by_name = defaultdict(list)
    for j in gpu_work(trace):
        idx_by_name[trace.name_of(j)].append(trace.dur[j])
    for k in stats:
        durs[k.kind].extend(idx_by_name[k.name])
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
    for j in gpu_work(trace):
        if trace.group_of(j) not in (MEMCPY, MEMSET):
            continue
        name = trace.name_of(j)
        a = trace.args.get(j, {})
        b = a.get("bytes")
        row = acc.setdefault(name, {"name": name, "kind": kk.classify(name, trace.group_of(j)),
                                    "count": 0, "bytes": 0, "total_us": 0.0, "sizes": Counter()})
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
    acc: dict[str, list] = {}
    for i in trace.indices((RUNTIME, DRIVER)):
        if trace.is_gpu(i):
            continue
        row = acc.setdefault(trace.name_of(i), [0, 0.0, 0])
        row[0] += 1
        row[1] += trace.dur[i]
        if trace.gpu_work_of(i):
            row[2] += 1
    return sorted((CallStat(n, c, t, g) for n, (c, t, g) in acc.items()), key=lambda c: (-c.count, c.name))


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
    lat = [x.latency_us for x in (launches(trace) if found is None else found)]
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
    st = steps(trace)
    st_starts = [s.start_us for s in st]
    ops_by_lane: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for i in trace.indices((CPU_OP,)):
        ops_by_lane[trace.lane[i]].append((trace.ts[i], i))
    for v in ops_by_lane.values():
        v.sort()
    out = []
    for a in trace.indices((ANNOTATION,)):
        name = trace.name_of(a)
        if name.startswith("ProfilerStep#") or trace.is_gpu(a) or (label and name != label):
            continue
        start, end = trace.ts[a], trace.ts[a] + trace.dur[a]
        ops = ops_by_lane.get(trace.lane[a], [])
        k = bisect.bisect_left(ops, (start, -1))
        if k >= len(ops) or ops[k][0] > end:
            continue
        first = ops[k][1]
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
    sync_name = [kk.is_synchronize(n) for n in trace.names]
    syncs = [i for i in trace.indices((RUNTIME, DRIVER)) if sync_name[trace.name[i]]]
    closing = None
    if syncs:
        i = max(syncs, key=lambda i: trace.ts[i])
        s, e = trace.ts[i], trace.ts[i] + trace.dur[i]
        busy = covered(lane_spans(trace, gpu_work(trace)), s, e)
        closing = {"name": trace.name_of(i), "start_us": s, "dur_us": trace.dur[i], "gpu_busy_us": busy,
                   "idle_share": 1 - busy / trace.dur[i] if trace.dur[i] > 0 else None}
    return Artifacts(bufs, closing)


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
    wanted = {ni for ni, name in enumerate(trace.names) if any(m in name for m in COMPILE_MARKERS)}
    if wanted:
        for i in range(len(trace)):
            if trace.name[i] in wanted and not trace.is_gpu(i):
                found[trace.name[i]] += 1
    for ni, n in found.items():
        name = trace.names[ni]
        for m in COMPILE_MARKERS:
            if m in name:
                markers[m.strip("# ")] += n
        if name.startswith("Torch-Compiled Region"):
            regions[name] += n
        h = _FX_HASH.search(name)
        if h:
            hashes[h.group(1).strip("#")] += n
    return Compiled(dict(regions), dict(hashes), dict(markers))


# --- occupancy --------------------------------------------------------------------


@dataclass
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # warps resident / warps possible
    limited_by: str  # "registers", "shared memory", "threads", "blocks", or several joined by "and"
    limits: dict[str, float]


def theoretical_occupancy(registers_per_thread: int, shared_memory: int, threads_per_block: int,
                          device: dict) -> Occupancy | None:
    """How many blocks of a kernel fit on one SM, from the trace's ``deviceProperties``.

    Follows the CUDA occupancy calculator: registers are allocated per warp in
    units of 256, each block reserves 1 KiB of shared memory on sm_80 and newer.
    """
    try:
        regs_sm = int(device["regsPerMultiprocessor"])
        threads_sm = int(device.get("maxThreadsPerMultiprocessor") or device["maxThreadsPerMultiProcessor"])
        smem_sm = int(device["sharedMemPerMultiprocessor"])
        major = int(device.get("computeMajor", 8))
        warp = int(device.get("warpSize", 32))
        max_blocks = int(device.get("maxBlocksPerMultiProcessor") or (16 if major < 8 else 32))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    if threads_per_block <= 0 or warp <= 0 or max_blocks <= 0:
        return None
    warps_block = -(-threads_per_block // warp)
    max_warps = threads_sm // warp
    limits: dict[str, float] = {"threads": max_warps // warps_block, "blocks": max_blocks}
    if registers_per_thread:
        regs_warp = -(-registers_per_thread * warp // 256) * 256
        limits["registers"] = regs_sm // (regs_warp * warps_block)
    else:
        limits["registers"] = math.inf
    reserved = 1024 if major >= 8 else 0
    limits["shared memory"] = smem_sm // (shared_memory + reserved) if shared_memory else math.inf
    blocks = int(min(limits.values()))
    limiting = " and ".join(k for k in ("registers", "shared memory", "threads", "blocks") if limits[k] == blocks)
    warps = blocks * warps_block
    return Occupancy(blocks, warps, max_warps, warps / max_warps if max_warps else 0.0, limiting,
                     {k: (v if v != math.inf else None) for k, v in limits.items()})


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

    @property
    def verdict(self) -> str | None:
        return self.balance.verdict

    def to_json(self) -> dict[str, Any]:
        """The command line's ``--json`` object."""
        return {
            "path": self.path,
            "parser": self.parser,
            "events": self.events,
            "device": self.device,
            "steps": [{"name": s.name, "dur_us": round(s.dur_us, 3)} for s in self.steps],
            "kernels": [{"name": k.name, "kind": k.kind, "count": k.count, "total_us": round(k.total_us, 3),
                         "median_us": round(k.median_us, 3), "launched_by": k.launched_by,
                         "resources": {key: v for key, v in asdict(k.resources).items() if v is not None}}
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
        }


@_gc_paused()  # many small objects that live on: no point in looking for cycles among them
def summarize(trace: Trace) -> Summary:
    """Every fact this module knows, for one trace."""
    from .trace import PARSER

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


def per_call_us(trace: Trace, annotation: str) -> float | None:
    """Average wall time of one call of a ``record_function`` annotation on the CPU."""
    d = [trace.dur[i] for i in trace.indices((ANNOTATION,), name=annotation) if not trace.is_gpu(i)]
    return sum(d) / len(d) if d else None


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
