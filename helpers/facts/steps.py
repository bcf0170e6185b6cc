"""Steps and the trace's time line: the profiler's steps, the main thread, the GPU work and its window, the gaps between labels."""

from __future__ import annotations

import bisect
import re
import statistics
from dataclasses import dataclass
from ..reader import vector
from ..reader.spans import covered
from ..reader.trace import ANNOTATION, CPU_GROUPS, CPU_OP, GPU_WORK, Trace


_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


# --- steps -----------------------------------------------------------------

@dataclass
class Step:
    name: str
    number: int
    start_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    def contains(self, t_us: float) -> bool:
        """Whether a time falls inside this step, half-open, ``[start, end)``: a time on the line between two
        steps belongs to the later one, never to both."""
        return self.start_us <= t_us < self.end_us


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


def gpu_busy_per_step(trace: Trace) -> list[tuple[str, float, float]]:
    """Per recorded step: (name, GPU busy time inside it, its length), in µs."""
    busy = _gpu_busy_spans(trace)
    return [(s.name, covered(busy, s.start_us, s.end_us), s.dur_us) for s in steps(trace)]


def window(trace: Trace) -> tuple[float, float]:
    """The recorded window: first step (or first event) to the end of the last recorded activity.

    Two kinds of span do not end it: the profiler's own session span (category ``Trace``, "PyTorch Profiler
    (0)"), which outlasts the activity by the profiler's stop (tens of microseconds) and, in a trace that a
    tool filtered (HTA's sampled ranks), by whatever was filtered out; and the step spans, which the loop's
    Python ends (a step annotation on another process ran 13 s past everything else in one external trace).
    """
    memo = trace.memo.get("window")
    if memo is not None:
        return memo
    st = steps(trace)
    lo = st[0].start_us if st else min(trace.ts)
    hi = vector.max_end(trace)
    frame = set(trace.indices(prefix="ProfilerStep#"))
    frame.update(trace.with_category("Trace"))
    if frame:
        ends = [trace.ts[i] + trace.dur[i] for i in frame]
        if max(ends) >= hi:  # a frame span ends it: the last end of anything else, if anything else ends after lo
            rest = vector.max_end(trace, leave_out=frame)
            if rest is not None and rest > lo:
                hi = rest
    trace.memo["window"] = (lo, hi)
    return lo, hi


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
    # lane -> op starts, ascending, and the ops (among ops that start together, the first in the file)
    ops_by_lane = vector.starts_on_lanes(trace, trace.indices_array((CPU_OP,)), lanes)
    out = []
    for a in wanted:
        name = trace.name_of(a)
        start, end = ts[a], ts[a] + trace.dur[a]
        starts, ops = ops_by_lane.get(trace.lane[a], ([], []))
        k = bisect.bisect_left(starts, start)
        if k >= len(ops) or starts[k] > end:
            continue
        first = int(ops[k])
        s = bisect.bisect_right(st_starts, start) - 1
        step = st[s].name if s >= 0 and start <= st[s].start_us + st[s].dur_us else None
        out.append(Gap(step, name, start, trace.ts[first] - start, trace.name_of(first)))
    out.sort(key=lambda g: g.start_us)
    return out
