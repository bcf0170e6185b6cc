"""The profiler's table (``prof.key_averages().table()``), rebuilt from a trace file.

A trace read back from disk has no ``key_averages``: this module computes the
same rows from the events, as notebook 02 teaches them. Per event name:
*# of Calls*; *Self CPU* (each event's time minus the time of the events
nested in it) and *CPU total*; *Self CUDA*: for GPU work (kernels, copies,
fills) its durations, for an op or a label the GPU work launched directly
under it (a launch call itself shows none, as in torch's table); *CUDA
total*: the GPU work launched anywhere under it. GPU work gets rows of its
own, apart from a CPU event of the same name; ``ProfilerStep#N`` rows merge
into ``ProfilerStep*``, as torch's table does; a label's span on the GPU
lane (``gpu_user_annotation``) has no row. On the reference traces the rows
agree with the table torch printed when it recorded them (``tests/test_exam.py``). The footer's totals are
:func:`helpers.facts.balance`'s: the time the CPU events cover on each thread,
and every piece of GPU work's time. No torch: it reads the trace only.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import facts
from ..reader.categories import ANNOTATION, CPU_GROUPS, CPU_OP
from .text import short, us
from ..reader.trace import Trace


@dataclass
class Row:
    """One name's line of the table."""

    name: str
    calls: int = 0
    self_cpu_us: float = 0.0
    cpu_total_us: float = 0.0
    self_cuda_us: float = 0.0
    cuda_total_us: float = 0.0


@dataclass
class Table:
    rows: list[Row]
    self_cpu_total_us: float
    self_cuda_total_us: float


SORT_KEYS = {"cpu_total": "cpu_total_us", "self_cpu": "self_cpu_us", "cuda_total": "cuda_total_us",
             "self_cuda": "self_cuda_us"}


def _name(trace: Trace, i: int) -> str:
    n = trace.name_of(i)
    return "ProfilerStep*" if n.startswith("ProfilerStep#") else n


def table(trace: Trace) -> Table:
    """Every row, in no particular order (:func:`text` sorts), and the two totals of the footer."""
    memo = trace.memo.get("profile_table")
    if memo is not None:
        return memo
    rows: dict[str, Row] = {}
    cpu = trace.on_gpu(CPU_GROUPS, gpu=False)
    under: dict[int, float] = {}  # CPU event -> GPU time launched by anything under it
    own: dict[int, float] = {}  # CPU event -> GPU time launched directly under it (its Self CUDA)
    for i in cpu:
        work = trace.gpu_work_of(i)
        if not work:
            continue
        t = sum(trace.dur[j] for j in work)
        # As torch's table: the launch call itself shows no CUDA time; the op (or label) around it owns the work
        around = [p for p in trace.ancestors(i) if trace.group_of(p) in (CPU_OP, ANNOTATION)]
        for p in around:
            under[p] = under.get(p, 0.0) + t
        if around:
            own[around[0]] = own.get(around[0], 0.0) + t
    for i in cpu:
        r = rows.setdefault(_name(trace, i), Row(_name(trace, i)))
        r.calls += 1
        r.cpu_total_us += trace.dur[i]
        r.self_cpu_us += trace.dur[i] - sum(trace.dur[c] for c in trace.children(i))
        r.self_cuda_us += own.get(i, 0.0)
        r.cuda_total_us += under.get(i, 0.0)
    gpu: dict[str, Row] = {}  # GPU work by name: rows of their own, apart from a CPU event of the same name
    for j in facts.gpu_work(trace):
        r = gpu.setdefault(_name(trace, j), Row(_name(trace, j)))
        r.calls += 1
        r.self_cuda_us += trace.dur[j]
        r.cuda_total_us += trace.dur[j]
    # the footer as facts.balance reads it: the time the CPU events cover on each thread, and all GPU work's time
    out = Table(list(rows.values()) + list(gpu.values()), facts.self_cpu_us(trace),
                sum(r.self_cuda_us for r in gpu.values()))
    trace.memo["profile_table"] = out
    return out


def _pct(x: float, whole: float) -> str:
    return f"{100 * x / whole:.2f}%" if whole > 0 else "-"


def text(trace: Trace, sort_by: str = "cpu_total", top: int = 12, width: int = 55) -> str:
    """The table as torch prints it: the ``top`` rows by ``sort_by`` (cpu_total, self_cpu, cuda_total, self_cuda),
    then Self CPU time total and Self CUDA time total."""
    if sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by={sort_by!r}: use one of {', '.join(SORT_KEYS)}")
    tb = table(trace)
    key = SORT_KEYS[sort_by]
    rows = sorted((r for r in tb.rows if getattr(r, key) > 0), key=lambda r: -getattr(r, key))[:top]
    cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA", "Self CUDA %",
            "CUDA total", "CUDA time avg", "# of Calls"]
    w = [max(len(c), 11) for c in cols]
    rule = "-" * width + "  " + "  ".join("-" * x for x in w)
    lines = [rule, f"{'Name':>{width}}  " + "  ".join(f"{c:>{x}}" for c, x in zip(cols, w)), rule]
    for r in rows:
        cells = [_pct(r.self_cpu_us, tb.self_cpu_total_us), us(r.self_cpu_us), _pct(r.cpu_total_us,
                 tb.self_cpu_total_us), us(r.cpu_total_us), us(r.cpu_total_us / r.calls), us(r.self_cuda_us),
                 _pct(r.self_cuda_us, tb.self_cuda_total_us), us(r.cuda_total_us), us(r.cuda_total_us / r.calls),
                 str(r.calls)]
        lines.append(f"{short(r.name, width):>{width}}  " + "  ".join(f"{c:>{x}}" for c, x in zip(cells, w)))
    lines += [rule, f"Self CPU time total: {us(tb.self_cpu_total_us)}",
              f"Self CUDA time total: {us(tb.self_cuda_total_us)}"]
    return "\n".join(lines)


_NOISE = ("void ", "at::native::", "(anonymous namespace)::", "c10::", "std::", "at::")


def display_name(name: str) -> str:
    """A kernel's name with ``void`` and common namespaces dropped (``at::native::``, ``c10::``, ``std::``): shorter,
    with the words that say what it does (``MulFunctor``, ``sgemm``) sooner."""
    for n in _NOISE:
        name = name.replace(n, "")
    return name
