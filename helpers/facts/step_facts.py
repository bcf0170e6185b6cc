"""What a training step's trace shows: waits for the GPU, the input pipeline, copies, the optimizer, backward, GEMM arithmetic.

Volume two's questions, answered from one :class:`~helpers.reader.trace.Trace` like
:mod:`helpers.facts` answers volume one's: plain data, no torch, no screens.
Each function reads only what the trace holds; where a reading rests on a
documented behaviour, the docstring says which and links it.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field

from . import kernel_kinds as kk, KernelStat, gpu_time_under, gpu_work, kernels, steps
from ..reader.spans import lane_spans
from ..reader.trace import ANNOTATION, CPU_GROUPS, CPU_OP, DRIVER, MEMCPY, RUNTIME, Trace

#: CUDA's rules for when a copy call returns (cudaMemcpyAsync to pageable host memory waits for the copy)
SYNC_BEHAVIOUR = "https://docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html"


# --- where in the trace ------------------------------------------------------------------


class _Steps:
    """The recorded steps' windows, to say which step a moment falls in."""

    def __init__(self, trace: Trace) -> None:
        self.steps = steps(trace)
        self.starts = [s.start_us for s in self.steps]

    def __bool__(self) -> bool:
        return bool(self.steps)

    def at(self, ts: float):
        """The step whose window holds ``ts``, or None."""
        k = bisect.bisect_right(self.starts, ts) - 1
        if k >= 0 and self.steps[k].contains(ts):
            return self.steps[k]
        return None


def _ops_around(trace: Trace, i: int) -> list[int]:
    """The ATen ops around event ``i`` on its thread, innermost first."""
    return [p for p in trace.ancestors(i) if trace.group_of(p) == CPU_OP]


def _annotation_around(trace: Trace, i: int) -> str | None:
    """The innermost ``record_function`` label around event ``i`` on its thread (profiler steps aside)."""
    for p in trace.ancestors(i):
        if trace.group_of(p) == ANNOTATION and not trace.name_of(p).startswith("ProfilerStep#"):
            return trace.name_of(p)
    return None


class _Busy:
    """When the GPU was running something (any kernel, copy or fill, on any stream)."""

    def __init__(self, trace: Trace) -> None:
        self.spans = lane_spans(trace, gpu_work(trace))
        self.ends = [e for _, e in self.spans]

    def idle_after(self, t: float) -> float | None:
        """From ``t`` to the start of the GPU's next work; 0 if it is busy at ``t``; None if it never works again."""
        k = bisect.bisect_right(self.ends, t)
        if k >= len(self.spans):
            return None
        start = self.spans[k][0]
        return max(0.0, start - t)

    def busy_in(self, lo: float, hi: float) -> float:
        """Microseconds of [lo, hi] with the GPU running something."""
        k = bisect.bisect_right(self.ends, lo)
        total = 0.0
        for s, e in self.spans[k:]:
            if s >= hi:
                break
            total += max(0.0, min(e, hi) - max(s, lo))
        return total


# --- waits for the GPU -------------------------------------------------------------------

#: ATen ops that make the CPU wait for the GPU, and the line of Python that usually calls them.
#: The outermost of these around a wait names its cause (aten::item calls _local_scalar_dense;
#: aten::is_nonzero calls aten::item; .cpu() is aten::to -> _to_copy -> copy_).
SYNC_CAUSES = {
    "aten::is_nonzero": "`if tensor:` or bool(tensor), where Python needs the tensor's value",
    "aten::nonzero": "a boolean mask (x[mask]) or nonzero(), whose output size only the GPU knows",
    "aten::masked_select": "masked_select, whose output size only the GPU knows",
    "aten::_local_scalar_dense": ".item() (or float(t), int(t)): a Python number from a GPU tensor",
    "aten::_to_copy": "a copy between CPU and GPU: .cpu(), .cuda(), .to(...), .numpy(), .tolist(), or "
                      "torch.tensor(data, device=...) from Python data",
    "aten::copy_": "a copy between CPU and GPU with copy_",
}


def _is_to_host(copy: str) -> bool:
    return "DtoH" in copy or "Device -> Pageable" in copy or "Device -> Pinned" in copy or "Device -> Host" in copy


@dataclass
class Sync:
    """One place in a recorded step where the CPU waited for the GPU."""

    step: str | None
    start_us: float  # the first call's start
    dur_us: float  # the time in the calls below (the copy it waited for, and the wait)
    calls: list[str]  # runtime or driver calls at this place, in order: e.g. cudaMemcpyAsync, cudaStreamSynchronize
    op: str | None  # the innermost ATen op around it (None: a synchronize called outside any op)
    cause_op: str | None  # the outermost op of SYNC_CAUSES around it: the one that names the Python line
    cause: str | None  # the Python that usually calls that op, in words
    annotation: str | None  # the innermost record_function label around it
    copy: str | None  # the copy it waited for ("Memcpy DtoH (Device -> Pinned)"), if any
    copy_bytes: int | None
    gpu_idle_after_us: float | None  # from the end of the wait to the GPU's next work (None: no more GPU work)
    lane: str

    @property
    def explicit(self) -> bool:
        """A device-wide synchronize with no op around it: what ``torch.cuda.synchronize()`` calls, written on purpose."""
        return self.op is None and any("DeviceSynchronize" in c or "CtxSynchronize" in c for c in self.calls)


class _Prior:
    """The latest end of the GPU work launched before a given time (every launch call with GPU work, in order)."""

    def __init__(self, trace: Trace) -> None:
        pairs = sorted((trace.ts[i], max(trace.end_of(j) for j in work))
                       for i in trace.indices((RUNTIME, DRIVER)) if not trace.is_gpu(i)
                       for work in [trace.gpu_work_of(i)] if work)
        self.starts = [a for a, _ in pairs]
        self.reach: list[float] = []
        top = float("-inf")
        for _, e in pairs:
            top = max(top, e)
            self.reach.append(top)

    def end_before(self, ts: float) -> float:
        k = bisect.bisect_left(self.starts, ts)
        return self.reach[k - 1] if k else float("-inf")


def _waits(trace: Trace, i: int, name: str, prior: "_Prior | None" = None) -> tuple[bool, int | None]:
    """Whether runtime or driver call ``i`` waits for the GPU, and the copy it launched (or None).

    By CUDA's rules (:data:`SYNC_BEHAVIOUR`): ``cudaMemcpy`` (not Async) to or
    from the host returns once the copy is done (to pageable memory) or staged
    (from it); ``cudaMemcpyAsync`` waits only where pageable memory is on one
    side: a copy to it returns once done; a copy from it "might be synchronous",
    so it counts as a wait only where the trace shows one, the GPU work launched
    before it still running when the call began and ended by the time it
    returned (``prior``). Between pinned
    memory and the device it only launches.
    """
    if kk.is_synchronize(name):
        return True, None
    if "emcpy" not in name:
        return False, None
    work = [j for j in trace.gpu_work_of(i) if trace.group_of(j) == MEMCPY]
    if not work:
        return False, None
    j = work[0]
    copy = trace.name_of(j)
    with_host = _is_to_host(copy) or _host_memory(copy) is not None
    if "Async" not in name:
        return with_host, j
    if not (with_host and "Pageable" in copy):
        return False, j
    if not _is_to_host(copy) and prior is not None:
        reach = prior.end_before(trace.ts[i])
        if reach > trace.end_of(i) + 1e-3:
            return False, j  # from pageable memory, returned while earlier GPU work still ran: it did not wait for it
        if reach <= trace.ts[i]:
            # the GPU had finished all earlier work before the call began: nothing to wait for (a synchronize call
            # after it, torch's for a blocking copy, is a wait of its own)
            return False, j
    return True, j


def hidden_syncs(trace: Trace) -> list[Sync]:
    """Every place inside the recorded steps where the CPU waited for the GPU, in time order.

    A wait is a synchronize call (``cudaStreamSynchronize``,
    ``cudaDeviceSynchronize``, ``cudaEventSynchronize`` and their driver or
    HIP twins) or a copy call that returns only once a device-to-host copy is
    done (see :data:`SYNC_BEHAVIOUR`). Calls under the same innermost op are
    one place (``.item()`` copies the value, then synchronizes). The
    profiler's own closing synchronize lies after the last step and is left
    out; on a trace without profiler steps, the last synchronize is left out
    when no op or label is around it.
    """
    st = _Steps(trace)
    busy = _Busy(trace)
    sites: dict[int, dict] = {}
    calls = sorted((i for i in trace.indices((RUNTIME, DRIVER)) if not trace.is_gpu(i)), key=trace.ts.__getitem__)
    copies: dict[int, tuple[int, int]] = {}  # site -> (copy launch call, its device-to-host copy) not waiting by itself
    prior = _Prior(trace)
    for i in calls:
        name = trace.name_of(i)
        waits, copy = _waits(trace, i, name, prior)
        if not waits and copy is None:
            continue
        ops = _ops_around(trace, i)
        key = ops[0] if ops else i
        if not waits:
            copies[key] = (i, copy)
            continue
        if st and st.at(trace.ts[i]) is None:
            continue
        site = sites.get(key)
        if site is None:
            site = sites[key] = {"calls": [], "ops": ops, "copy": None}
        site["calls"].append(i)
        if copy is not None:
            site["copy"] = copy
    if not st and sites:  # no steps to place the waits in: the profiler's closing synchronize is the last one
        last = max(sites, key=lambda k: trace.ts[sites[k]["calls"][-1]])
        s = sites[last]
        if not s["ops"] and _annotation_around(trace, s["calls"][-1]) is None:
            del sites[last]
    out = []
    for key, site in sites.items():
        calls_here = site["calls"]
        launch = copies.get(key)
        if launch is not None and trace.ts[launch[0]] <= trace.ts[calls_here[0]]:
            calls_here = [launch[0]] + calls_here
            site["copy"] = site["copy"] if site["copy"] is not None else launch[1]
        ops = site["ops"]
        names = [trace.name_of(p) for p in ops]
        cause_op = next((n for n in reversed(names) if n in SYNC_CAUSES), None)
        first = calls_here[0]
        end = max(trace.end_of(c) for c in calls_here)
        step = st.at(trace.ts[first])
        j = site["copy"]
        size = trace.args.get(j, {}).get("bytes") if j is not None else None
        out.append(Sync(
            step=step.name if step else None,
            start_us=trace.ts[first],
            dur_us=sum(trace.dur[c] for c in calls_here),
            calls=[trace.name_of(c) for c in calls_here],
            op=names[0] if names else None,
            cause_op=cause_op,
            cause=SYNC_CAUSES.get(cause_op) if cause_op else None,
            annotation=_annotation_around(trace, first),
            copy=trace.name_of(j) if j is not None else None,
            copy_bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
            gpu_idle_after_us=busy.idle_after(end),
            lane=trace.lanes[trace.lane[first]].label,
        ))
    out.sort(key=lambda s: s.start_us)
    return out


# --- the input pipeline ------------------------------------------------------------------

LOADER_PREFIX = "enumerate(DataLoader)#"  # the span torch.utils.data writes around each batch's __next__


@dataclass
class LoaderSpan:
    """One ``enumerate(DataLoader)#...__next__`` span: the CPU waiting for a batch."""

    step: str | None
    name: str
    start_us: float
    dur_us: float
    step_share: float | None  # of its step's length
    gpu_idle_us: float | None  # time in it with no GPU work running (None: no GPU work in the trace)

    @property
    def gpu_idle_share(self) -> float | None:
        if self.gpu_idle_us is None or self.dur_us <= 0:
            return None
        return self.gpu_idle_us / self.dur_us


def dataloader_spans(trace: Trace) -> list[LoaderSpan]:
    """The DataLoader's ``__next__`` spans on the CPU, in time order, with their share of the step and the GPU's idle time."""
    st = _Steps(trace)
    has_gpu = bool(gpu_work(trace))
    busy = _Busy(trace) if has_gpu else None
    out = []
    for i in sorted(trace.indices((ANNOTATION,), prefix=LOADER_PREFIX), key=trace.ts.__getitem__):
        if trace.is_gpu(i):
            continue
        lo, d = trace.ts[i], trace.dur[i]
        step = st.at(lo)
        share = d / step.dur_us if step and step.dur_us > 0 else None
        idle = d - busy.busy_in(lo, lo + d) if busy else None
        out.append(LoaderSpan(step.name if step else None, trace.name_of(i), lo, d, share, idle))
    return out


def dataloader_share(trace: Trace) -> float:
    """The DataLoader's spans as a share of the recorded steps, averaged over the steps (0 without steps)."""
    return sum(s.step_share or 0.0 for s in dataloader_spans(trace)) / max(len(steps(trace)), 1)


@dataclass
class HostCopies:
    """Host-to-device copies of one kind of host memory."""

    memory: str  # "pageable", "pinned", or "host" where the name does not say
    name: str  # the copy's name in the trace
    count: int
    bytes: int | None  # None when the trace records no size for them
    total_us: float
    gb_per_s: float | None  # bytes over GPU time of the copies with a size, 10^9 bytes per second


def _host_memory(copy: str) -> str | None:
    """The host memory a copy to the device came from, by Kineto's names; None for other copies."""
    if "Pageable -> Device" in copy:
        return "pageable"
    if "Pinned -> Device" in copy:
        return "pinned"
    if "HtoD" in copy or "Host -> Device" in copy:
        return "host"
    return None


def h2d_copies(trace: Trace) -> list[HostCopies]:
    """Host-to-device copies split by the host memory they came from (pageable first): count, bytes, time, GB/s.

    Kineto names each copy by its source, ``Memcpy HtoD (Pageable -> Device)``
    or ``(Pinned -> Device)``; a copy from pageable memory goes through a
    staging buffer and cannot overlap the GPU's work (:data:`SYNC_BEHAVIOUR`).
    """
    acc: dict[str, dict] = {}
    for j in gpu_work(trace):
        if trace.group_of(j) != MEMCPY:
            continue
        name = trace.name_of(j)
        memory = _host_memory(name)
        if memory is None:
            continue
        row = acc.setdefault(name, {"memory": memory, "count": 0, "bytes": 0, "sized_us": 0.0, "total_us": 0.0,
                                    "sized": 0})
        row["count"] += 1
        row["total_us"] += trace.dur[j]
        b = trace.args.get(j, {}).get("bytes")
        if isinstance(b, int) and not isinstance(b, bool) and b >= 0:
            row["bytes"] += b
            row["sized_us"] += trace.dur[j]
            row["sized"] += 1
    order = {"pageable": 0, "host": 1, "pinned": 2}
    out = [HostCopies(r["memory"], name, r["count"], r["bytes"] if r["sized"] else None, r["total_us"],
                      r["bytes"] / r["sized_us"] / 1e3 if r["sized"] and r["sized_us"] > 0 else None)
           for name, r in acc.items()]
    return sorted(out, key=lambda c: (order[c.memory], -c.total_us))


# --- the optimizer -----------------------------------------------------------------------

_OPT_STEP = re.compile(r"^Optimizer\.step#(\w+)\.step$")  # the span torch.optim writes around every step()
FUSED, FOREACH, LOOP = "fused", "foreach", "loop"
ADAMW_DOCS = "https://docs.pytorch.org/docs/stable/generated/torch.optim.AdamW.html"


@dataclass
class OptimizerCall:
    """One optimizer step on the CPU, and the GPU work it launched."""

    step: str | None
    name: str  # the span: the annotation asked for, or Optimizer.step#AdamW.step
    optimizer: str | None  # the class, from torch.optim's Optimizer.step#<class>.step span
    start_us: float
    cpu_us: float
    launches: int  # pieces of GPU work (kernels, copies, fills) it launched
    gpu_us: float
    implementation: str | None  # "fused", "foreach", "loop" (one op per parameter), None without ATen ops
    ops: dict[str, int] = field(default_factory=dict)  # the ATen ops under it, by name


def _implementation(ops: Counter) -> str | None:
    if any(n.startswith("aten::_fused_") for n in ops):  # aten::_fused_adamw_, _fused_adam_, _fused_sgd_
        return FUSED
    if any(n.startswith("aten::_foreach_") for n in ops):
        return FOREACH
    return LOOP if ops else None


def optimizer_work(trace: Trace, annotation: str | None = "optimizer") -> list[OptimizerCall]:
    """Each call of ``annotation`` (None: torch.optim's own ``Optimizer.step#...`` spans): launches, GPU time, implementation.

    The implementation is read from the ops: ``aten::_fused_adamw_`` (or
    another ``aten::_fused_*``) is the fused one, ``aten::_foreach_*`` the
    foreach one, and per-parameter ops only the for-loop one (see
    :data:`ADAMW_DOCS` for AdamW's ``foreach`` and ``fused`` flags).
    """
    st = _Steps(trace)
    if annotation is None:
        spans = [i for i in trace.indices(CPU_GROUPS, prefix="Optimizer.step#") if _OPT_STEP.match(trace.name_of(i))]
    else:
        spans = trace.indices((ANNOTATION,), name=annotation)
    out = []
    for a in sorted((i for i in spans if not trace.is_gpu(i)), key=trace.ts.__getitem__):
        inside = trace.descendants(a)
        names = [trace.name_of(d) for d in [a] + inside]
        ops = Counter(n for d, n in zip([a] + inside, names) if trace.group_of(d) == CPU_OP and n.startswith("aten::"))
        cls = next((m.group(1) for n in names if (m := _OPT_STEP.match(n))), None)
        step = st.at(trace.ts[a])
        out.append(OptimizerCall(step.name if step else None, trace.name_of(a), cls, trace.ts[a], trace.dur[a],
                                 sum(len(trace.gpu_work_of(d)) for d in [a] + inside), gpu_time_under(trace, a),
                                 _implementation(ops), dict(ops.most_common())))
    return out


# --- backward ----------------------------------------------------------------------------

BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
_NODE = re.compile(r"Backward\d*$|^autograd::|AccumulateGrad$")  # autograd's own ops: not forward ops


@dataclass
class BackwardOp:
    """One node autograd ran in backward, and the forward op that recorded it."""

    name: str  # the node: "AddmmBackward0", "torch::autograd::AccumulateGrad"
    step: str | None
    start_us: float
    dur_us: float
    lane: str  # the thread it ran on (on CUDA, autograd's own thread)
    sequence: int | None  # autograd's sequence number, shared with the forward op
    forward_op: str | None  # the forward op with the same sequence number (the latest to start before it)
    forward_lane: str | None
    launches: int
    gpu_us: float  # GPU time it launched


def backward_ops(trace: Trace) -> list[BackwardOp]:
    """The ``autograd::engine::evaluate_function: ...`` ops in time order, each linked to its forward op.

    Kineto gives a forward op and the backward node autograd made of it the
    same ``Sequence number``. Several forward ops can share one (a composite
    op such as ``aten::linear`` and the ``aten::t`` inside it; only the op
    that recorded the node differs), so the match is the one that started
    last before the backward op: the innermost. ``AccumulateGrad`` has no
    sequence number, so no forward op.
    """
    st = _Steps(trace)
    forward: dict[int, list[int]] = {}
    for k, i in enumerate(trace.seq_event):
        if not _NODE.search(trace.name_of(i)):
            forward.setdefault(trace.seq_number[k], []).append(i)
    for v in forward.values():
        v.sort(key=trace.ts.__getitem__)
    out = []
    for i in sorted(trace.indices((CPU_OP,), prefix=BACKWARD_PREFIX), key=trace.ts.__getitem__):
        if trace.is_gpu(i):
            continue
        seq = trace.sequence_of(i)
        fwd = None
        if seq is not None:
            cands = forward.get(seq[0], [])
            k = bisect.bisect_left([trace.ts[j] for j in cands], trace.ts[i]) - 1
            fwd = cands[k] if k >= 0 else None
        step = st.at(trace.ts[i])
        work = [j for d in [i] + trace.descendants(i) for j in trace.gpu_work_of(d)]
        out.append(BackwardOp(
            name=trace.name_of(i)[len(BACKWARD_PREFIX):],
            step=step.name if step else None,
            start_us=trace.ts[i],
            dur_us=trace.dur[i],
            lane=trace.lanes[trace.lane[i]].label,
            sequence=seq[0] if seq else None,
            forward_op=trace.name_of(fwd) if fwd is not None else None,
            forward_lane=trace.lanes[trace.lane[fwd]].label if fwd is not None else None,
            launches=len(work),
            gpu_us=sum(trace.dur[j] for j in work),
        ))
    return out


# --- GEMM arithmetic ---------------------------------------------------------------------


@dataclass
class GemmMath:
    """GEMM kernels grouped by the arithmetic their names say they use."""

    math: str | None  # one of kernel_kinds' FP32_SIMT, TF32, HALF, EIGHT_BIT, TENSOR_CORES; None: not in the name
    count: int
    total_us: float
    share: float  # of all GEMM-kind GPU time
    names: list[str]  # most time first


def gemm_precision(trace: Trace, stats: list[KernelStat] | None = None) -> list[GemmMath]:
    """GEMM-kind GPU work split by :func:`helpers.facts.kernel_kinds.gemm_math`, most time first.

    ``stats``: :func:`helpers.facts.kernels` of the trace, when already computed.
    """
    stats = kernels(trace) if stats is None else stats
    acc: dict[str | None, list[KernelStat]] = {}
    for k in stats:
        if k.kind == kk.GEMM:
            acc.setdefault(kk.gemm_math(k.name), []).append(k)
    total = sum(k.total_us for ks in acc.values() for k in ks)
    out = []
    for math, ks in acc.items():
        ks.sort(key=lambda k: -k.total_us)
        t = sum(k.total_us for k in ks)
        out.append(GemmMath(math, sum(k.count for k in ks), t, t / total if total > 0 else 0.0, [k.name for k in ks]))
    return sorted(out, key=lambda g: -g.total_us)


def compute_capability(trace: Trace) -> tuple[int, int] | None:
    """The first device's compute capability from ``deviceProperties``, or None when the trace has none."""
    for d in trace.devices:
        major, minor = d.get("computeMajor"), d.get("computeMinor")
        if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (major, minor)):
            return major, minor
    return None


def is_nvidia(trace: Trace) -> bool:
    """Whether the trace's GPU is NVIDIA's: its name says so (an AMD GPU reports a compute capability too)."""
    return any("nvidia" in str(d.get("name", "")).lower() for d in trace.devices)
