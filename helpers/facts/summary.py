"""Everything at once (:func:`summarize`, what ``python -m helpers summarize`` prints), and what the profiler itself adds."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import compress
from typing import Any
from . import kernel_kinds as kk
from .kernel_names import decode
from .memory import MemoryPeak, memory_peaks
from ..reader.trace import COUNTER_RANGE, DRIVER, RUNTIME, Trace, _gc_paused, covered
from .balance import Balance, balance
from .compiled import Compiled, compiled
from .kernels import CopyStat, KernelStat, KindStat, copies, kernels, kernels_by_kind
from .launches import CallStat, Latency, launch_latency, runtime_calls
from .steps import Gap, Step, _gpu_busy_spans, _median, annotation_gaps, steps


# --- what the profiler itself adds -------------------------------------------------

@dataclass(frozen=True)
class BufferRequest:
    """One of CUPTI's Activity Buffer Requests: the profiler getting a buffer for GPU activity records."""

    name: str
    start_us: float
    dur_us: float
    gpu_side: bool  # on a GPU lane, not a CPU thread's
    lane: str


@dataclass(frozen=True)
class ClosingSync:
    """The trace's last synchronize (the profiler's own, before it stops) and what the GPU did during it."""

    name: str
    start_us: float
    dur_us: float
    gpu_busy_us: float  # GPU work inside the synchronize's span
    idle_share: float | None  # the share of the span the GPU was idle; None for a span of no length


@dataclass
class Artifacts:
    buffer_requests: list[BufferRequest]  # in the order they start
    closing_sync: ClosingSync | None


def artifacts(trace: Trace) -> Artifacts:
    """The profiler's own footprints: buffer requests and the flush at the end."""
    bufs = [BufferRequest(trace.name_of(i), trace.ts[i], trace.dur[i], trace.is_gpu(i),
                          trace.lanes[trace.lane[i]].label)
            for i in trace.indices(contains="Buffer Request")]
    bufs.sort(key=lambda b: b.start_us)
    sync_name = [kk.is_synchronize(n) for n in trace.name_table]
    calls = trace.indices((RUNTIME, DRIVER))
    syncs = list(compress(calls, map(sync_name.__getitem__, map(trace.name_id.__getitem__, calls))))
    closing = None
    if syncs:
        i = max(syncs, key=trace.ts.__getitem__)
        s, e = trace.ts[i], trace.ts[i] + trace.dur[i]
        busy = covered(_gpu_busy_spans(trace), s, e)
        closing = ClosingSync(trace.name_of(i), s, trace.dur[i], busy,
                              1 - busy / trace.dur[i] if trace.dur[i] > 0 else None)
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
    copies: list[CopyStat]
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
            "memcpy": [{"name": c.name, "count": c.count, "bytes": c.bytes if c.sizes else None}
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
