"""Occupancy: how many warps a kernel's launch lets each SM hold, from its registers, shared memory and block size."""

from __future__ import annotations

from dataclasses import dataclass
from . import hardware
from ..reader.trace import Trace
from .kernels import KernelStat, kernels


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


# --- what the notebooks' reveals read ----------------------------------------------------

def occupancy(kernel: KernelStat, device: dict) -> Occupancy | None:
    """Theoretical occupancy of a kernel from its recorded resources and the trace's device properties."""
    r = kernel.resources
    if not (r.registers_per_thread and r.threads_per_block):
        return None
    return theoretical_occupancy(r.registers_per_thread, r.shared_memory or 0, r.threads_per_block, device)


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
