"""A training step's matrix multiplies, one row per call: which op launched it, in forward or in backward, its time.

:func:`helpers.facts.kernels` groups GPU work by kernel name; a training step
needs the other view: each ``aten::addmm`` or ``aten::mm`` call that launched
GEMM kernels (one call can launch two: a GEMM and its split-K reduction), the
phase it ran in, and the forward op it belongs to. Autograd gives a forward
op and the backward node it recorded the same sequence number
(:meth:`helpers.reader.trace.Trace.sequence_of`), so a backward GEMM is paired with
the forward GEMM of the same layer; a forward op run *inside* a backward node
is a recomputation (activation checkpointing).

Everything here reads the trace only (no torch): kernels are GEMMs by
:mod:`helpers.facts.kernel_kinds`, never by one name.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

from . import kernel_kinds as kk, gpu_work, kind_of, steps
from ..reader.trace import ANNOTATION, Trace
from .kernels import innermost_op

BACKWARD_NODE = "autograd::engine::evaluate_function: "

FORWARD, BACKWARD, RECOMPUTE = "forward", "backward", "recomputed in backward"


@dataclass
class GemmCall:
    """One op call that launched GEMM kernels, in one recorded step."""

    step: str
    position: int  # its place among the step's GEMM calls, in launch order (0 first)
    phase: str  # FORWARD, BACKWARD, RECOMPUTE, or the innermost record_function label (optimizer...)
    op: str  # the innermost ATen op around the launch: "aten::addmm", "aten::mm"
    node: str | None  # the backward node around it ("AddmmBackward0"), None in forward
    sequence: int | None  # autograd's sequence number: the op's own in forward, its node's in backward
    forward_position: int | None  # for forward GEMMs their rank among the step's forward GEMMs; in backward the
    # rank of the forward GEMM with the same sequence number (the layer it belongs to); None when not paired
    kernels: list[str] = field(default_factory=list)  # GEMM-kind kernel names, in launch order
    gpu_us: float = 0.0  # their GPU time


def _context(trace: Trace, op: int) -> tuple[str | None, int | None, str | None]:
    """The backward node around ``op`` (its name and sequence number) and the innermost label, if any."""
    node = node_seq = label = None
    for p in [op] + trace.ancestors(op):
        name = trace.name_of(p)
        if node is None and name.startswith(BACKWARD_NODE):
            node = name[len(BACKWARD_NODE):]
            seq = trace.sequence_of(p)
            node_seq = seq[0] if seq else None
        if label is None and trace.group_of(p) == ANNOTATION and not name.startswith("ProfilerStep#"):
            label = name
    return node, node_seq, label


def gemm_calls(trace: Trace) -> list[GemmCall]:
    """Every op call that launched GEMM-kind kernels inside the recorded steps, in launch order per step."""
    st = steps(trace)
    starts = [s.start_us for s in st]
    by_op: dict[int, GemmCall] = {}
    when: dict[int, tuple[int, float]] = {}  # call key -> (step index, the op's start): launch order
    for j in gpu_work(trace):
        if kind_of(trace, j) != kk.GEMM:
            continue
        i = trace.launch_of(j)
        if i < 0:
            continue
        k = bisect.bisect_right(starts, trace.ts[i]) - 1
        if k < 0 or trace.ts[i] > st[k].start_us + st[k].dur_us:
            continue
        op = innermost_op(trace, i)
        op = op if op >= 0 else None
        key = op if op is not None else -1 - i
        call = by_op.get(key)
        if call is None:
            node, node_seq, label = _context(trace, op) if op is not None else (None, None, None)
            own = trace.sequence_of(op) if op is not None else None
            if node is None:
                phase, seq = (FORWARD if label in ("forward", None) else label), (own[0] if own else None)
            elif own is not None:
                # Inside a backward node, only an op that records autograd history has a sequence number of its
                # own: a forward op run again, which is what activation checkpointing does.
                phase, seq = RECOMPUTE, own[0]
            else:
                phase, seq = BACKWARD, node_seq
            call = by_op[key] = GemmCall(st[k].name, 0, phase, trace.name_of(op) if op is not None else "-", node,
                                         seq, None)
            when[key] = (k, trace.ts[op] if op is not None else trace.ts[i])
        call.kernels.append(trace.name_of(j))
        call.gpu_us += trace.dur[j]
    calls = [by_op[key] for key in sorted(by_op, key=when.__getitem__)]
    per_step: dict[str, list[GemmCall]] = {}
    for c in calls:
        per_step.setdefault(c.step, []).append(c)
    for group in per_step.values():
        fwd = {}
        for n, c in enumerate(group):
            c.position = n
            if c.phase == FORWARD:
                c.forward_position = len(fwd)
                if c.sequence is not None:
                    fwd[c.sequence] = c.forward_position
        for c in group:
            if c.phase == BACKWARD and c.sequence is not None:
                c.forward_position = fwd.get(c.sequence)
    return calls


def kernels_per_step(trace: Trace) -> list[tuple[str, int]]:
    """For each recorded step, how many GEMM-kind kernels it ran (launched inside it)."""
    counts = {s.name: 0 for s in steps(trace)}
    for c in gemm_calls(trace):
        counts[c.step] += len(c.kernels)
    return list(counts.items())


@dataclass
class GemmRow:
    """One GEMM call's place in the step, with its time over the recorded steps (median, min, max)."""

    position: int
    phase: str
    op: str
    node: str | None
    forward_position: int | None
    kernels: list[str]
    median_us: float
    min_us: float
    max_us: float
    steps: int


def typical_step(trace: Trace) -> list[GemmRow]:
    """The step's GEMM calls by position, each with its time over the steps that have the same call there.

    A position counts when every recorded step holds a call there with the
    same phase and op (the steps of a steady loop do); the first step's
    calls give the kernels' names.
    """
    per_step: dict[str, list[GemmCall]] = {}
    for c in gemm_calls(trace):
        per_step.setdefault(c.step, []).append(c)
    groups = list(per_step.values())
    if not groups:
        return []
    rows = []
    for n, first in enumerate(groups[0]):
        same = [g[n] for g in groups if len(g) > n and g[n].phase == first.phase and g[n].op == first.op]
        if len(same) != len(groups):
            continue
        t = [c.gpu_us for c in same]
        rows.append(GemmRow(n, first.phase, first.op, first.node, first.forward_position, list(first.kernels),
                            statistics.median(t), min(t), max(t), len(t)))
    return rows
