"""Per step, per op and per call: the figures the notebooks' reveals read."""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass
from . import kernel_kinds as kk
from ..reader.trace import ANNOTATION, CPU_GROUPS, CPU_OP, DRIVER, GPU_WORK, RUNTIME, Trace, covered, lane_spans
from .kernels import KernelStat, innermost_op, kernels, kind_of
from .steps import _median, gpu_work, self_cpu_us, steps
from .summary import artifacts


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


def launches_under(trace: Trace, op: str) -> int:
    """How many pieces of GPU work events named ``op`` (and what they called) launched."""
    return sum(len(trace.gpu_work_of(d)) for i in trace.indices(CPU_GROUPS, name=op) if not trace.is_gpu(i)
               for d in [i] + trace.descendants(i))


def occupancy_queries_by_step(trace: Trace) -> list[tuple[str, dict[str, int]]]:
    """For each recorded step, the occupancy queries made inside it, by name."""
    return [(s.name, {n: c for n, c in calls_in(trace, s.start_us, s.end_us).items()
                      if kk.is_occupancy_query(n)}) for s in steps(trace)]


def ops_around(trace: Trace, is_call) -> set[str]:
    """The innermost ATen ops around the runtime or driver calls whose name passes ``is_call``."""
    return {op for i in trace.indices((RUNTIME, DRIVER)) if not trace.is_gpu(i) and is_call(trace.name_of(i))
            for p in [innermost_op(trace, i)] if p >= 0 for op in [trace.name_of(p)]}


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
    return self_cpu_us(trace) - (sync.dur_us if sync else 0.0)
