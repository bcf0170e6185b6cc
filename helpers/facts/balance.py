"""The CPU/GPU balance: which side sets the pace (CPU-bound, GPU-bound or inside collectives)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import compress, filterfalse
from . import kernel_kinds as kk
from ..reader import vector
from ..reader.trace import Trace, covered
from ..reader.spans import clipped
from .kernels import kinds_of
from .steps import _gpu_busy_spans, gpu_work, self_cpu_us, window


#: GPU time over self CPU time at or above which a run is GPU-bound
GPU_BOUND_RATIO = 0.5


#: the verdicts on the CPU/GPU balance
GPU_BOUND, CPU_BOUND, IN_COLLECTIVES = "GPU-bound", "CPU-bound", "inside collectives"


#: collective time at or above this share of the GPU's busy time: the rank mostly waits for other ranks or the
#: network, so neither side of its own balance sets the pace (no CPU- or GPU-bound verdict: diagnose the folder)
COLLECTIVE_SHARE = 0.5


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


def collective_work(trace: Trace, work: list[int] | None = None) -> list[int]:
    """Indices of the GPU work that is communication between GPUs (kind ``collective``).

    Classified by name as the kernels table does (the first event of each
    name decides), so the two always agree.
    """
    work = gpu_work(trace) if work is None else work
    name_ids = list(map(trace.name_id.__getitem__, work))
    first = dict(zip(reversed(name_ids), reversed(work)))  # name -> its first event: the earlier ones win
    names = {ni for ni, kind in zip(first, kinds_of(trace, list(first.values()))) if kind == kk.COLLECTIVE}
    return list(compress(work, map(names.__contains__, name_ids))) if names else []


def balance(trace: Trace) -> Balance:
    """Self CPU against device time, and the verdict with its numbers.

    Time in collectives is not counted as device time: a rank that waits in
    NCCL for the others is not GPU-bound (see :mod:`helpers.facts.collectives`).
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
