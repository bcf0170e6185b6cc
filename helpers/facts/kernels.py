"""Kernels and copies: what ran on the GPU, by name and by kind, with the resources each asked for."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from . import kernel_kinds as kk
from ..reader import vector
from ..reader.trace import CPU_OP, MEMCPY, MEMSET, Trace
from .steps import _median, gpu_work


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


def innermost_ops(trace: Trace, launches: list[int]) -> dict[int, int]:
    """Each launch call's innermost ATen op (-1: none), as :meth:`Trace.parent` nests events (the same order and
    slack), found for the ATen ops and these calls alone: the roofline and the kernels' kinds need no
    other event's parent, and nesting them all costs more than either."""
    if getattr(trace, "_parent", None) is not None:  # nested already: ask it
        return {i: innermost_op(trace, i) for i in launches}
    ops = trace.on_gpu_array((CPU_OP,), gpu=False)
    if vector.fast(len(ops) + len(launches)):
        return vector.enclosing(trace, ops, launches)
    ops = ops.tolist()
    lanes = {trace.lane[i] for i in launches}
    ops = [i for i in ops if trace.lane[i] in lanes]
    wanted = set(launches)
    per: dict[int, list[int]] = {}
    for i in ops + launches:
        per.setdefault(trace.lane[i], []).append(i)
    ts, dur = trace.ts, trace.dur
    out: dict[int, int] = {}
    for idx in per.values():
        stack: list[int] = []
        ends: list[float] = []
        for start, minus_dur, i in sorted(zip([ts[i] for i in idx], [-dur[i] for i in idx], idx)):
            end = start - minus_dur
            lim = end - 1e-3  # (Trace._nest_lanes' slack)
            while ends and ends[-1] < lim:
                stack.pop()
                ends.pop()
            if i in wanted:
                out[i] = next((k for k in reversed(stack) if k not in wanted), -1)
            stack.append(i)
            ends.append(end)
    return out


def innermost_op(trace: Trace, i: int) -> int:
    """The innermost ATen op around event ``i`` on its CPU thread, or -1."""
    p = trace.parent(i)
    while p >= 0 and trace.group_of(p) != CPU_OP:
        p = trace.parent(p)
    return p


def launching_op(trace: Trace, j: int) -> str | None:
    """The innermost ATen op around the call that launched GPU work ``j``."""
    i = trace.launch_of(j)
    p = innermost_op(trace, i) if i >= 0 else -1
    return trace.name_of(p) if p >= 0 else None


_KIND_CACHE: dict[tuple, str] = {}  # (name, group, op) -> kind: classify runs regexes, names repeat


def _classify(name: str, group: str, op: str | None = None) -> str:
    key = (name, group, op)
    kind = _KIND_CACHE.get(key)
    if kind is None:
        if len(_KIND_CACHE) > 100_000:
            _KIND_CACHE.clear()
        kind = _KIND_CACHE[key] = kk.classify(name, group, op)
    return kind


def kinds_of(trace: Trace, works: list[int]) -> list[str]:
    """:func:`kind_of` of each piece of GPU work in ``works``, the launching ops of those whose name does not say
    found at once (:func:`innermost_ops`), not by nesting every CPU event."""
    kinds = [_classify(trace.name_of(j), trace.group_of(j)) for j in works]
    known = trace.memo.setdefault("kind by its op", {})  # event -> kind, for the work its op classifies
    other = []
    for k, kind in enumerate(kinds):
        if kind == kk.OTHER:
            found = known.get(works[k])
            if found is None:
                other.append(k)
            else:  # (an earlier call found it: the kernels table, then the collectives, ask of the same events)
                kinds[k] = found
    if other:
        launchers = trace.launchers([works[k] for k in other])
        inner = innermost_ops(trace, sorted({i for i in launchers if i >= 0}))
        for k, i in zip(other, launchers):
            op = inner.get(i, -1) if i >= 0 else -1
            j = works[k]
            kinds[k] = known[j] = _classify(trace.name_of(j), trace.group_of(j),
                                            trace.name_of(op) if op >= 0 else None)
    return kinds


def kind_of(trace: Trace, j: int) -> str:
    """What GPU event ``j`` is (see :mod:`helpers.facts.kernel_kinds`)."""
    name, group = trace.name_of(j), trace.group_of(j)
    kind = _classify(name, group)
    if kind == kk.OTHER:
        known = trace.memo.get("kind by its op")
        found = known.get(j) if known is not None else None  # (kinds_of found it with the others)
        kind = found if found is not None else _classify(name, group, launching_op(trace, j))
    return kind


def kernels(trace: Trace) -> list[KernelStat]:
    """GPU work grouped by name, most total time first."""
    out = []
    groups = _work_by_name(trace)
    kinds = kinds_of(trace, [idx[0] for idx in groups.values()])
    for (ni, idx), kind in zip(groups.items(), kinds):
        durs = list(map(trace.dur.__getitem__, idx))
        by_id = Counter(map(trace.name_id.__getitem__, filter((-1).__ne__, trace.launchers(idx))))
        launched = Counter({trace.name_table[k]: v for k, v in by_id.items()})
        out.append(KernelStat(
            name=trace.name_table[ni],
            kind=kind,
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


@dataclass
class CopyStat:
    """One name of copy or fill on the GPU: how often, how many bytes, how long."""

    name: str
    kind: str  # helpers.facts.kernel_kinds: COPY, FILL...
    count: int = 0
    bytes: int = 0  # summed over the calls that record a size
    total_us: float = 0.0
    sizes: dict[int, int] = field(default_factory=dict)  # bytes per call -> calls of that size; {} when none recorded


def copies(trace: Trace) -> list[CopyStat]:
    """Memory copies and fills by name: count and bytes moved, the longest in all first."""
    acc: dict[str, CopyStat] = {}
    value = trace.args.value
    for j in trace.on_gpu((MEMCPY, MEMSET)):
        name = trace.name_of(j)
        b = value(j, "bytes")
        row = acc.get(name)
        if row is None:
            row = acc[name] = CopyStat(name, kk.classify(name, trace.group_of(j)))
        row.count += 1
        row.total_us += trace.dur[j]
        if isinstance(b, int):
            row.bytes += b
            row.sizes[b] = row.sizes.get(b, 0) + 1
    return sorted(acc.values(), key=lambda r: -r.total_us)
