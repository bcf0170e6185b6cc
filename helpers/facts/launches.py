"""Runtime and driver calls, kernel launches and their latency, and the dispatch chain from an op down to its kernels."""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress
from ..reader.trace import ANNOTATION, CPU_GROUPS, CPU_OP, DRIVER, RUNTIME, Trace
from .kernels import kind_of
from .steps import _median, gpu_work


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


# --- the dispatch chain ---------------------------------------------------------

@dataclass
class GpuItem:
    """A kernel, copy or fill that a call in a dispatch chain launched."""

    name: str
    kind: str  # helpers.facts.kernel_kinds: GEMM, ELEMENTWISE, COPY...
    start_us: float
    dur_us: float
    latency_us: float  # from the start of the call that launched it to its own start


@dataclass
class Node:
    """One event in a dispatch chain, with what it called and what ran on the GPU."""

    name: str
    group: str
    start_us: float
    dur_us: float
    children: list["Node"] = field(default_factory=list)
    gpu: list[GpuItem] = field(default_factory=list)  # kernels/copies this call launched

    def walk(self, depth: int = 0):
        yield depth, self
        for c in self.children:
            yield from c.walk(depth + 1)

    def names(self) -> list[str]:
        return [n.name for _, n in self.walk()]


def _node(trace: Trace, i: int) -> Node:
    n = Node(trace.name_of(i), trace.group_of(i), trace.ts[i], trace.dur[i])
    for j in trace.gpu_work_of(i):
        n.gpu.append(GpuItem(trace.name_of(j), kind_of(trace, j), trace.ts[j], trace.dur[j], trace.ts[j] - trace.ts[i]))
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
