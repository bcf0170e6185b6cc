"""Where each notebook's time went, from the stopwatch's phases (``python -m helpers preflight --breakdown``).

A notebook's time is its kernel's start, then its cells. The cells' time is
split into the phases the helpers wrote down (:mod:`helpers.runs.stopwatch`)
at the top level of the notebook's kernel: importing torch, starting CUDA,
each profiled run (cold ones in a fresh process), the timed comparisons, the
two-process runs, reading traces. What is left ("the rest") is everything the
phases do not cover: importing the helpers, the lessons' reading and drawing,
the widgets. A cold run's fresh process is split again by its own phases.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..runs.stopwatch import read

#: the table's columns: a phase kind, or kinds summed, and the column's head
COLUMNS = (
    ("kernel", ("kernel start",)),
    ("torch", ("import torch",)),
    ("CUDA", ("CUDA start-up",)),
    ("cold", ("cold run (fresh process)",)),
    ("warm", ("warm run on the CUDA", "warm run on the GPU")),
    ("CPU", ("warm run on the CPU", "cold run on the CPU")),
    ("timed", ("timed comparison", "idle-GPU probe")),
    ("ranks", ("two-process run",)),
    ("read", ("read trace",)),
)
#: the columns whose runs are counted in brackets
COUNTED = ("cold", "warm", "CPU", "timed", "ranks")
#: a fresh process's phases, in the order they happen
FRESH = ("fresh process start-up", "import torch", "build", "warm-up calls", "unprofiled timing", "profiled steps",
         "table and export")


@dataclass
class Breakdown:
    """One notebook's seconds by column, its compile time, and its fresh processes' phases summed."""

    notebook: str
    total: float
    columns: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    compile: float = 0.0  # warm-up calls of compiled runs: where torch.compile compiles
    fresh: dict[str, float] = field(default_factory=dict)

    @property
    def rest(self) -> float:
        return max(0.0, self.total - sum(self.columns.values()))


def of_notebook(notebook: str, total: float, kernel_start: float, log: str | Path) -> Breakdown:
    """The breakdown of one notebook run, from its stopwatch file."""
    rows = read(log)
    b = Breakdown(notebook, total, {"kernel": kernel_start}, {})
    fresh_pids = {r["pid"] for r in rows if r["kind"] == FRESH[0]}  # a fresh process's first phase says it is one
    kernel_pid = next((r["pid"] for r in sorted(rows, key=lambda r: r["start"]) if r["pid"] not in fresh_pids), None)
    kind_to_column = {k: col for col, kinds in COLUMNS for k in kinds}
    fresh: dict[str, float] = defaultdict(float)
    for r in rows:
        mine = r["pid"] == kernel_pid
        if mine and r["depth"] == 0 and r["kind"] in kind_to_column:
            col = kind_to_column[r["kind"]]
            b.columns[col] = b.columns.get(col, 0.0) + r["seconds"]
            b.counts[col] = b.counts.get(col, 0) + 1
        if r["kind"] == "warm-up calls" and "_compile" in r["what"]:
            b.compile += r["seconds"]
        if r["pid"] in fresh_pids and r["kind"] in FRESH:
            fresh[r["kind"]] += r["seconds"]
    b.fresh = dict(fresh)
    return b


def table(rows: list[Breakdown]) -> str:
    """Seconds per notebook and column (runs counted in brackets), then the fresh processes' phases."""
    heads = [c for c, _ in COLUMNS] + ["rest", "total", "compile*"]
    w = max([len(r.notebook) for r in rows] + [8])

    def cell(v: float, n: int = 0) -> str:  # seconds, then the count (or room for one): 11 characters
        return f"{v:7.1f}" + (f" ({n})" if n else "").ljust(4)[:4] if n < 10 else f"{v:7.1f}({n})"

    lines = [f"{'notebook':<{w}}" + "".join(f"{h:>7}    " for h in heads)]
    for r in rows:
        lines.append(f"{r.notebook:<{w}}"
                     + "".join(cell(r.columns.get(c, 0.0), r.counts.get(c, 0) if c in COUNTED else 0)
                               for c, _ in COLUMNS)
                     + cell(r.rest) + cell(r.total) + cell(r.compile))
    sums = {c: sum(r.columns.get(c, 0.0) for r in rows) for c, _ in COLUMNS}
    lines.append(f"{'total':<{w}}" + "".join(cell(sums[c]) for c, _ in COLUMNS)
                 + cell(sum(r.rest for r in rows)) + cell(sum(r.total for r in rows))
                 + cell(sum(r.compile for r in rows)))
    lines.append("(n): runs or timings; compile*: the warm-up calls of compiled runs, inside 'warm'")
    fresh = defaultdict(float)
    for r in rows:
        for k, v in r.fresh.items():
            fresh[k] += v
    if fresh:
        n = sum(r.counts.get("cold", 0) for r in rows)
        lines.append(f"the {n} cold runs' fresh processes, summed: "
                     + "; ".join(f"{k} {fresh[k]:.1f} s" for k in FRESH if k in fresh))
    return "\n".join(ln.rstrip() for ln in lines)
