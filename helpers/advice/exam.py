"""Notebook 17's exam: traces the series never showed, and the answer key, computed by ``diagnose``.

The exam's traces live in ``traces/exam/<gpu>/``, recorded on a real GPU by a
maintainer's tool; their names (``exam-1.json`` ... and a folder of ranks)
and manifest entries are neutral on purpose, so that neither the notebook nor
the folder says which is which. The exam always reads the recorded ones, live
on a GPU too: the answers are ``diagnose``'s on a fixed trace, so they are
graded exactly, with no timing spread.

Per trace the learner answers two questions. The *bound*: for one trace, the
CPU/GPU balance's verdict (:func:`helpers.facts.balance`); for a folder of
ranks, the rank the others wait for (the straggler finding). The *first fix*:
one of :data:`FIXES`, the same list for every trace, chosen by diagnose's
first finding (:data:`FIX_OF_RULE`; for a GPU-bound trace, by what the
roofline says holds the kernels' time). Imports neither torch nor widgets.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .. import ROOT, exam_notebook, facts
from . import diagnose, distributed, rulebook
from .rulebook import RuleId
from ..facts import roofline
from ..facts.ranks import Ranks, read_ranks
from .findings import CAUSES_OF_IDLE, GPU_SIDE, Finding, Severity
from ..reader.trace import Trace, read_trace

EXAM = ROOT / "traces" / "exam"
#: the set the golden files and the instructor's guide describe
DEFAULT_SET = "nvidia-h200"
#: which exam set: the reference set's variable, when traces/exam has a folder of that name
SET_VAR = "PROFILING_REFERENCE"
#: the notebook whose questions are the exam (its answers are scored apart from the lessons')
NOTEBOOK = exam_notebook()  # as helpers.lesson.journal.EXAM: one home, the lesson module's name

#: the bound of one trace: the balance's verdicts as the lessons word them
BOUND_CHOICES = [rulebook.VERDICTS[RuleId.CPU_BOUND], rulebook.VERDICTS[RuleId.GPU_BOUND]]
_VERDICT_CHOICE = {facts.CPU_BOUND: BOUND_CHOICES[0], facts.GPU_BOUND: BOUND_CHOICES[1]}
#: the bound of a folder of ranks, beside "rank N": no rank sets the pace
NO_STRAGGLER = "neither: the ranks keep pace with each other"

LAUNCHES = "fewer, larger launches (batch the work, CUDA graphs)"
FUSE = "fuse the memory-bound kernels (torch.compile, a fused op)"
NEAR_PEAK = "nothing cheap: the kernels already run at half the GPU's peak or more"
PRECISION = "lower-precision matmuls (TF32 or 16-bit)"
WORKERS = "prepare the batches in DataLoader workers"
SYNCS = "remove the lines that make the CPU wait for the GPU"
SHAPES = "keep the shapes fixed, or mark them dynamic"
TEMPORARY = "avoid the huge temporary (work in chunks, or an op that never builds it)"
RANKS = "speed up the rank the others wait for"
#: the first-fix choices, in the order every trace shows them
FIXES = [LAUNCHES, FUSE, NEAR_PEAK, PRECISION, WORKERS, SYNCS, SHAPES, TEMPORARY, RANKS]
#: diagnose's first finding -> the first thing to fix (gpu-bound goes by the roofline: :data:`FIX_OF_SHAPE`)
FIX_OF_RULE = {
    RuleId.CPU_BOUND: LAUNCHES, RuleId.TINY_KERNELS: LAUNCHES, RuleId.COMPILE_TAX: LAUNCHES,
    RuleId.INPUT_BOUND: WORKERS,
    RuleId.HIDDEN_SYNC: SYNCS,
    RuleId.RECOMPILES: SHAPES,
    RuleId.FP32_GEMM: PRECISION,
    RuleId.MEMORY_SPIKE: TEMPORARY,
    RuleId.STRAGGLER: RANKS,
}
#: a GPU-bound first finding: what the roofline says holds most of the kernel time -> the fix
FIX_OF_SHAPE = {roofline.MEMORY_BOUND: FUSE, roofline.COMPUTE_BOUND: NEAR_PEAK}


class ExamError(LookupError):
    """No exam set here, a broken one, or a trace whose first finding no fix choice answers."""


def folder() -> Path:
    """The exam set: ``traces/exam/<PROFILING_REFERENCE>`` when there is one, else the H200 set, else the first."""
    sets = sorted(d for d in EXAM.iterdir() if (d / "manifest.json").is_file()) if EXAM.is_dir() else []
    if not sets:
        raise ExamError(f"No exam traces under {EXAM}: check out the repository's traces/ folder "
                        "(git checkout -- traces/exam).")
    want = os.environ.get(SET_VAR)
    for name in (want, DEFAULT_SET):
        found = next((d for d in sets if d.name == name), None)
        if found is not None:
            return found
    return sets[0]


@dataclass(frozen=True)
class Item:
    """One exam trace: its number in the notebook, its neutral name, and its file (or folder of ranks)."""

    number: int
    name: str
    path: Path

    @property
    def ranks(self) -> bool:
        return self.path.is_dir()

    @property
    def qids(self) -> tuple[str, str]:
        """The two questions' ids: the bound, then the first fix."""
        return f"{NOTEBOOK}.trace-{self.number}-bound", f"{NOTEBOOK}.trace-{self.number}-fix"


_NUMBER = re.compile(r"(\d+)$")


def items(where: Path | None = None) -> list[Item]:
    """The set's traces in the notebook's order (the number in each name), from its manifest."""
    where = where or folder()
    try:
        manifest = json.loads((where / "manifest.json").read_text())
    except (OSError, ValueError) as e:  # UnicodeDecodeError is a ValueError
        raise ExamError(f"{where / 'manifest.json'} cannot be read as JSON ({e})") from None
    entries = manifest.get("traces") if isinstance(manifest, dict) else None
    if not isinstance(entries, dict):
        raise ExamError(f"{where / 'manifest.json'} is not an exam manifest (no object of traces)")
    out = []
    for name, entry in entries.items():
        m = _NUMBER.search(name)
        rel = entry.get("trace") or entry.get("folder") if isinstance(entry, dict) else None
        if m is None or not rel:
            raise ExamError(f"{where / 'manifest.json'}: entry {name!r} names no number or no trace")
        path = where / rel
        if not path.exists():
            raise ExamError(f"{path}: listed in the exam's manifest, but missing")
        out.append(Item(int(m.group(1)), name, path))
    return sorted(out, key=lambda x: x.number)


def item(number: int, where: Path | None = None) -> Item:
    """Trace ``number`` of the exam (1, 2, ...)."""
    found = next((x for x in items(where) if x.number == number), None)
    if found is None:
        raise ExamError(f"the exam has no trace {number} (it has {', '.join(str(x.number) for x in items(where))})")
    return found


@dataclass
class Loaded:
    """An exam trace, read: one trace, or a folder's ranks with each rank's trace."""

    item: Item
    trace: Trace | None = None
    ranks: Ranks | None = None
    rank_traces: list[Trace] | None = None


def load(it: Item) -> Loaded:
    if it.ranks:
        files = sorted(it.path.glob("rank*.json"))
        return Loaded(it, ranks=read_ranks(it.path), rank_traces=[read_trace(p) for p in files])
    return Loaded(it, trace=read_trace(it.path))


def bound_choices(x: Loaded) -> list[str]:
    """The bound question's choices: the two verdicts, or each rank and "neither" for a folder."""
    if x.ranks is not None:
        return [f"rank {r.rank}" for r in x.ranks.ranks] + [NO_STRAGGLER]
    return list(BOUND_CHOICES)


@dataclass
class Key:
    """The answer key for one exam trace, and what it rests on."""

    item: Item
    bound: str  # one of bound_choices()
    fix: str  # one of FIXES
    findings: list[Finding]  # diagnose's, ranked
    shape: roofline.Dominant | None  # for a GPU-bound first finding: what holds the kernel time
    balance: facts.Balance | None  # one trace's CPU/GPU balance (None for a folder)
    gpu: str | None = None  # the trace's GPU, as it names it

    @property
    def first(self) -> Finding:
        return self.findings[0]


def fix_for(first: Finding, shape: roofline.Dominant | None = None) -> str:
    """The fix choice that answers diagnose's first finding (``shape``: the roofline's verdict, for gpu-bound)."""
    if first.rule == RuleId.GPU_BOUND:
        fix = FIX_OF_SHAPE.get(shape.bound) if shape is not None else None
        if fix is None:
            raise ExamError("a GPU-bound first finding whose kernels the roofline does not call memory- or "
                            f"compute-bound ({shape.bound if shape else 'not sized'}): no fix choice answers it")
        return fix
    if first.rule not in FIX_OF_RULE:
        raise ExamError(f"no fix choice answers the rule {first.rule!r} (helpers/advice/exam.py FIX_OF_RULE)")
    return FIX_OF_RULE[first.rule]


def answer_key(x: Loaded) -> Key:
    """Diagnose's answer for one exam trace: its bound and the first thing to fix."""
    if x.ranks is not None:
        found = distributed.diagnose_ranks(x.ranks)
        st = x.ranks.straggler
        bound = f"rank {st.rank}" if st.rank is not None else NO_STRAGGLER
        if not found:
            raise ExamError(f"{x.item.name}: diagnose finds nothing to fix in this folder")
        return Key(x.item, bound, fix_for(found[0]), found, None, None)
    t = x.trace
    found = diagnose.diagnose(t)
    b = facts.balance(t)
    if b.verdict not in _VERDICT_CHOICE:
        raise ExamError(f"{x.item.name}: the balance gives no CPU- or GPU-bound verdict ({b.verdict})")
    if not found:
        raise ExamError(f"{x.item.name}: diagnose finds nothing to fix in this trace")
    shape = roofline.dominant(roofline.roofline(t)) if found[0].rule == RuleId.GPU_BOUND else None
    return Key(x.item, _VERDICT_CHOICE[b.verdict], fix_for(found[0], shape), found, shape, b, t.device_name)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def why(k: Key) -> str:
    """Why diagnose puts its first finding first, and what that makes the first fix: plain text, from the findings."""
    f = k.first
    rules = [x.rule for x in k.findings]
    others = [x for x in k.findings[1:] if x.severity == Severity.ISSUE]
    out = []
    if f.rule == RuleId.HIDDEN_SYNC and RuleId.GPU_BOUND in rules:  # first: it reconciles the two answers
        out.append("GPU-bound and a CPU-side fix do not contradict each other: the GPU's kernels set the pace over the "
                   "step, yet after each wait the GPU idles until the CPU launches again, and that idle time is what "
                   "removing the waits wins back (the GPU-bound note names no fix).")
    if f.gain is not None and f.severity == Severity.ISSUE:
        rest = ("; the other issues' fixes: " + ", ".join(
            x.rule + (f" ({x.gain.how_much()})" if x.gain is not None else "") for x in others)
            if others else "; every other finding is a note")
        out.append(f"It accounts for {f.amount}, and {f.gain.words()} ({f.gain.basis}){rest}: the fix that should "
                   "gain the most comes first (a gain that is a hypothesis, by its low end).")
    elif f.share is not None:
        most = all(x.share is None or x.share < f.share for x in k.findings[1:])
        out.append(f"It accounts for {f.amount}" + ("; every other finding is a note." if not others else
                   "; the trace cannot size what its fix gains, so diagnose ranks it by its share (as if its fix "
                   "halved that time: a place in the order, never printed), and it holds more of the window than any "
                   "other finding." if most else
                   "; the trace cannot size what its fix gains, so diagnose ranks it by its share (as if its fix "
                   "halved that time: a place in the order, never printed), which puts it before the others.")
                   + (" It costs memory as well as that GPU time; how much of the time a fix would save (an op that "
                      "never builds the temporary) the project has not measured, so no speedup is given."
                      if f.rule == RuleId.MEMORY_SPIKE else ""))
    elif not others:
        out.append("It has no share of the window and no speedup to give: what it costs is memory (a smaller batch, "
                   "or an out-of-memory error), not time. It is the only issue here: the other findings are notes, "
                   "and issues rank before notes." if f.rule == RuleId.MEMORY_SPIKE else
                   "It gives no share of the window, but it is the only issue here: the other findings are notes, "
                   "and issues rank before notes.")
    remainder = next((x for x in k.findings if x.rule in (RuleId.CPU_BOUND, RuleId.TINY_KERNELS) and x is not f), None)
    if f.rule in CAUSES_OF_IDLE and remainder is not None and remainder.share is not None:
        out.append(f"The GPU also waits for the CPU where no cause is named (the finding '{remainder.title}', "
                   f"{remainder.amount}). The two findings share no time, and the fix for the first should gain more: "
                   "fewer or larger launches would not remove what it found.")
    if f.rule in (RuleId.CPU_BOUND, RuleId.TINY_KERNELS):
        out.append("No cause the trace names (the DataLoader, waits for the GPU, compiling, the optimizer) explains "
                   "the GPU's wait for the CPU, so the CPU's own work between launches is what to act on"
                   + next((f" ({e})." for e in f.evidence if " kernels, median " in e), "."))
    if f.rule == RuleId.GPU_BOUND and k.shape is not None:
        if k.shape.bound == roofline.MEMORY_BOUND:
            out.append(f"The verdict alone does not say what to change; the roofline does: the kernels move bytes "
                       f"at a median {k.shape.of_roof:.0%} of the memory roof, so only moving fewer bytes (fusing "
                       "them) shortens them much.")
        elif k.shape.bound == roofline.COMPUTE_BOUND:
            out.append(f"The verdict alone does not say what to change; the roofline does: the kernels run at a "
                       f"median {k.shape.of_roof:.0%} of the {' and '.join(k.shape.roofs)} peak, so no cheap change "
                       f"buys much (at most {1 / k.shape.of_roof:.2g}x with the same arithmetic in the same precision).")
    if f.rule in GPU_SIDE and RuleId.GPU_BOUND in rules:  # the GPU sets the pace
        pk = roofline.peaks(k.gpu)
        roofs = pk.compute_tflops if pk else {}
        faster = (f" ({k.gpu}'s datasheet, dense figures (half the 'with sparsity' ones it prints for tensor "
                  f"cores): {roofs[roofline.ROOF_TF32]:g} TFLOP/s on TF32 tensor cores, {roofs[roofline.ROOF_16]:g} "
                  f"in 16 bits, against {roofs[roofline.ROOF_FP32]:g} on the FP32 CUDA cores)" if f.rule == RuleId.FP32_GEMM and {roofline.ROOF_TF32, roofline.ROOF_16, roofline.ROOF_FP32}
                  <= set(roofs) else "")
        out.append(f"The GPU sets the pace here (GPU-bound), so faster GPU work shortens the step{faster}.")
    if f.rule == RuleId.STRAGGLER:
        out.append("The other rank's collectives last longer by about the late rank's delay: that wait is the time "
                   "to win back, on the late rank.")
    return " ".join(out)
