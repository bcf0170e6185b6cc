"""Memory, read from the profiler's ``[memory]`` events: the allocator's timeline and its peaks, per device.

With ``profile_memory=True``, Kineto writes one instant event named
``[memory]`` for every allocation and every free the profiler sees, with the
allocator's totals just after it in its args (``Total Allocated``, ``Total
Reserved``, ``Bytes``, ``Device Type``, ``Device Id``). The reader keeps them
in ``trace.memory`` (:class:`~helpers.reader.columns.MemoryColumns`); these
functions read them, and nothing else: no torch, and no number that the
events do not hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from ..reader.categories import ANNOTATION, CPU_OP
from ..reader.trace import Trace

CUDA = 1  # c10::DeviceType::CUDA (ROCm's devices report it too)
CPU = 0
#: c10's DeviceType numbers, as ``Device Type`` holds them, for the ones a trace is likely to hold
#: (6: HIP, which ROCm builds of torch report for some allocations; torch.device("hip") names it so)
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuseone"}


@dataclass(frozen=True)
class MemorySample:
    """The allocator's state just after one allocation (``bytes`` > 0) or free (``bytes`` < 0)."""

    ts_us: float  # microseconds since the trace's first timed event
    allocated: int  # bytes allocated on the device after this event ("Total Allocated")
    reserved: int  # bytes the caching allocator holds from the driver ("Total Reserved")
    bytes: int


def device_label(device_type: int, device_id: int) -> str:
    """``cuda:0``, ``cpu``: how torch names the device of a memory event."""
    kind = DEVICE_TYPES.get(device_type, f"device type {device_type}")
    return kind if device_type == CPU or device_id < 0 else f"{kind}:{device_id}"


def has_memory(trace: Trace) -> bool:
    """Whether the trace holds any ``[memory]`` event the reader could use."""
    return len(trace.memory) > 0


def _rows(trace: Trace, device_type: int | None, device_id: int | None) -> list[int]:
    """Positions of the memory samples of one device (or every device), in time order, file order among ties."""
    m = trace.memory
    rows = [k for k in range(len(m)) if (device_type is None or m.device_type[k] == device_type)
            and (device_id is None or m.device_id[k] == device_id)]
    rows.sort(key=m.ts.__getitem__)
    return rows


def memory_timeline(trace: Trace, device_type: int = CUDA, device_id: int | None = None) -> list[MemorySample]:
    """Every memory sample of one kind of device (default CUDA), in time order.

    ``device_id`` None keeps every device of that kind: on a trace of several
    GPUs, ask for one at a time, since each sample's totals are its own device's.
    """
    m = trace.memory
    return [MemorySample(m.ts[k], m.allocated[k], m.reserved[k], m.bytes[k])
            for k in _rows(trace, device_type, device_id)]


@dataclass
class MemoryPeak:
    """The highest allocator totals one device's memory events show, and when."""

    device: str  # "cuda:0", "cpu"
    device_type: int
    device_id: int
    events: int  # its [memory] events
    allocated_before: int  # bytes allocated before its first recorded event (already there when recording began)
    peak_allocated: int
    peak_allocated_us: float  # when the peak was reached, microseconds since the trace's first timed event
    peak_allocated_step: str | None  # the ProfilerStep#N around that moment
    peak_allocated_in: str | None  # the innermost record_function label around that moment (any CPU thread)
    peak_reserved: int
    peak_reserved_us: float


def _around(trace: Trace, ts: float) -> tuple[str | None, str | None]:
    """The profiler step and the innermost user annotation (on any CPU thread) whose span holds ``ts``."""
    step = label = None
    shortest = float("inf")
    for i in trace.indices((ANNOTATION,)):
        if trace.is_gpu(i) or not trace.ts[i] <= ts <= trace.ts[i] + trace.dur[i]:
            continue
        name = trace.name_of(i)
        if name.startswith("ProfilerStep#"):
            step = name
        elif trace.dur[i] < shortest:
            shortest, label = trace.dur[i], name
    return step, label


def memory_peaks(trace: Trace) -> list[MemoryPeak]:
    """Per device with memory events: peak allocated and peak reserved bytes, and when (GPUs first).

    The peaks are the largest totals the events hold: the allocator's state
    after each allocation the profiler recorded, so an allocation made while
    it was not recording is not among them.
    """
    m = trace.memory
    if not len(m):
        return []
    out = []
    keys = sorted(set(zip(m.device_type, m.device_id)), key=lambda k: (k[0] == CPU, k))
    for device_type, device_id in keys:
        rows = _rows(trace, device_type, device_id)
        first = rows[0]
        # max() keeps the first of equal values: the moment the peak was first reached
        top = max(rows, key=m.allocated.__getitem__)
        top_reserved = max(rows, key=m.reserved.__getitem__)
        step, label = _around(trace, m.ts[top])
        out.append(MemoryPeak(device_label(device_type, device_id), device_type, device_id, len(rows),
                              m.allocated[first] - m.bytes[first], m.allocated[top], m.ts[top], step, label,
                              m.reserved[top_reserved], m.ts[top_reserved]))
    return out


@dataclass(frozen=True)
class Allocation:
    """One allocation the memory events hold, the op running when it was made, and its size against the peak."""

    ts_us: float
    bytes: int
    device: str
    op: str | None  # the innermost op around it ("aten::empty (in aten::sub)" when that op is a factory), or None
    op_index: int  # that op's event (its caller's, for a factory); -1 when no op holds it
    step: str | None
    share_of_peak: float  # its bytes over the device's peak allocated


_FACTORIES = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::zeros", "aten::zeros_like",
              "aten::ones", "aten::ones_like", "aten::full", "aten::full_like", "aten::new_empty",
              "aten::new_empty_strided", "aten::new_zeros", "aten::resize_")


def op_at(trace: Trace, ts: float) -> tuple[int, str | None]:
    """The innermost ATen op running at ``ts`` and its name: the shortest op that holds it, on any CPU thread (the
    memory events do not keep their thread). A factory (``aten::empty``) is named with the op that called it,
    ``aten::empty (in aten::sub)``, and the index is the caller's."""
    holding = [i for i in trace.indices((CPU_OP,)) if not trace.is_gpu(i)
               and trace.ts[i] <= ts <= trace.ts[i] + trace.dur[i]]
    if not holding:
        return -1, None
    inner = min(holding, key=trace.dur.__getitem__)
    name = trace.name_of(inner)
    if name in _FACTORIES:
        caller = next((p for p in trace.ancestors(inner) if trace.group_of(p) == CPU_OP
                       and trace.name_of(p) not in _FACTORIES), -1)
        if caller >= 0:
            return caller, f"{name} (in {trace.name_of(caller)})"
    return inner, name


def large_allocations(trace: Trace, min_share: float, min_bytes: int = 0) -> list[Allocation]:
    """Allocations on a GPU (any device but the CPU) of at least ``min_share`` of that device's peak allocated
    memory and at least ``min_bytes``, in time order, each with the op that made it."""
    m = trace.memory
    out = []
    for pk in memory_peaks(trace):
        if pk.device_type == CPU or pk.peak_allocated <= 0:
            continue
        for k in _rows(trace, pk.device_type, pk.device_id):
            b = m.bytes[k]
            if b > 0 and b >= min_bytes and b >= min_share * pk.peak_allocated:
                step, _label = _around(trace, m.ts[k])
                i, op = op_at(trace, m.ts[k])
                out.append(Allocation(m.ts[k], b, pk.device, op, i, step, b / pk.peak_allocated))
    return sorted(out, key=lambda a: a.ts_us)


def allocated_by_step(trace: Trace, device_type: int = CUDA, device_id: int | None = None) -> list[tuple[str, int, int]]:
    """For each profiler step: (step, allocated bytes at its start, peak allocated inside it), from the events.

    The start is the last sample before the step (or, for the first, the
    bytes allocated before its first sample); a step with no sample is left out.
    """
    samples = memory_timeline(trace, device_type, device_id)
    if not samples:
        return []
    spans = sorted((trace.ts[i], trace.ts[i] + trace.dur[i], trace.name_of(i))
                   for i in trace.indices((ANNOTATION,), prefix="ProfilerStep#") if not trace.is_gpu(i))
    out = []
    k = 0
    before = samples[0].allocated - samples[0].bytes
    for lo, hi, name in spans:
        while k < len(samples) and samples[k].ts_us < lo:
            before = samples[k].allocated
            k += 1
        j = k
        while j < len(samples) and samples[j].ts_us <= hi:
            j += 1
        if j > k:
            out.append((name, before, max(s.allocated for s in samples[k:j])))
    return out
