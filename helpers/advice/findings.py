"""What a finding is, and how findings are ranked: shared by the single-trace rules (:mod:`helpers.advice.diagnose`) and
the rules for a folder of ranks (:mod:`helpers.advice.distributed`), which import it; it imports neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import Word, facts
from . import rulebook
from .ledger import Gain, Ledger, Side, Speedup
from .rulebook import RuleId
from ..facts.budget import Budget, budget
from ..facts.text import us as us_text
from ..reader.spans import Spans, difference, intersection, merged, total
from ..reader.trace import Trace


class Severity(Word):
    """What kind of finding it is."""

    ISSUE = "issue"  # something costs time that could be won back
    NOTE = "note"  # something to know while reading the trace; not a problem in itself


#: where an issue cannot size its gain, it is ranked as if its fix made the time it accounts for this much faster
UNSIZED_AS = 2.0
#: an issue that cannot say what its fix gains, and accounts for less than this share of the window, is a note
NOTE_BELOW = 0.05
#: an issue whose fix should make the step less than this many times faster is a note
NOTE_BELOW_GAIN = 1.05
#: a GPU-bound run whose GPU still idles this share of the window gets a word on it
IDLE_NOTE = 0.25
#: the rules that name a cause of the GPU's wait for the CPU (helpers.advice.cpu_rules claims their time before the
#: remainder, cpu-bound or tiny-kernels)
CAUSES_OF_IDLE = (RuleId.INPUT_BOUND, RuleId.HIDDEN_SYNC, RuleId.COMPILE_TAX, RuleId.RECOMPILES, RuleId.COLD_START,
                  RuleId.LONG_CALL, RuleId.UNFUSED_OPTIMIZER)
#: the rules about the GPU's own work: they matter once the GPU sets the pace
GPU_SIDE = (RuleId.FP32_GEMM, RuleId.KERNEL_VARIANCE, RuleId.ADDMM_BIAS_COPY)


@dataclass(frozen=True)
class Part:
    """One cause among a finding's (a group of waits for the GPU, say), and what removing it alone should bring."""

    cause: str  # the op or call that waits ("aten::_local_scalar_dense": .item())
    annotation: str | None  # the record_function block it sits in, if any
    gain: Gain  # removing this cause alone, the others left as they are

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "annotation": self.annotation, "expected_speedup": _num(self.gain.speedup),
                "expected_speedup_range": [_num(self.gain.low), _num(self.gain.high)]}


def _num(x: float | None) -> float | None:
    return round(x, 3) if x is not None and math.isfinite(x) else None


@dataclass
class Finding:
    rule: RuleId
    title: str
    severity: Severity
    evidence: list[str]
    next: str
    notebook: str = ""  # where the series teaches it: the cheat sheet's row for the rule (helpers/advice/rulebook.py)
    share: float | None = None  # the share of ``base`` this finding accounts for; None: it cannot say
    of: str = ""  # what that time is: "GPU idle", "the DataLoader's __next__", ...
    base: str = ""  # what the share is of: "the recorded steps", "the recorded window"
    gain: Gain | None = None  # what fixing it should bring (issues; None: the finding cannot say)
    parts: list[Part] = field(default_factory=list)  # its causes one by one, where a fix may remove only some
    #: a note about what this trace cannot tell (a window with no gap between two pieces of GPU work): after the
    #: notes that say something of it, whatever its share
    says_little: bool = False
    #: a note that frames how to read the rest (too little recorded to judge): first among the notes
    leads: bool = False

    def __post_init__(self) -> None:
        # a rule id or severity given as its word ("cpu-bound") is taken, and a misspelt one fails here
        self.rule, self.severity = RuleId(self.rule), Severity(self.severity)
        if not self.notebook:
            self.notebook = rulebook.notebook_of(self.rule)

    def size(self, spent_us: float, whole_us: float, of: str, base: str) -> "Finding":
        """This finding, accounting for ``spent_us`` of ``whole_us`` (``of`` says what that time is, ``base`` what
        the whole is); unchanged when the whole is empty."""
        if whole_us > 0:
            self.share, self.of, self.base = min(max(spent_us / whole_us, 0.0), 1.0), of, base
        return self

    @property
    def amount(self) -> str:
        """'62% of the recorded window: the GPU idle', or '' when the finding cannot size itself."""
        if self.share is None:
            return ""
        # (a "0%" reads as none at all, a "100%" beside other shares as more than the whole)
        pct = ("under 1%" if 0 < self.share < 0.005 else "over 99%" if 0.995 <= self.share < 1 else
               f"{self.share:.0%}")
        return f"{pct} of {self.base}" + (f": {self.of}" if self.of else "")

    @property
    def expected_speedup(self) -> float | None:
        return self.gain.speedup if self.gain else None

    def text(self) -> str:
        lines = [f"[{self.severity}] {self.title}  ({self.rule}; notebook {self.notebook})"]
        if self.amount:
            lines.append(f"    accounts for {self.amount}")
        if self.gain is not None:
            lines.append(f"    {self.gain.words()}: {self.gain.basis}")
        lines += [f"    - {e}" for e in self.evidence]
        lines.append(f"    try: {self.next}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The finding as ``diagnose --json`` prints it (strict JSON: a speedup without bound is null)."""
        g = self.gain

        def num(x: float) -> float | None:
            return round(x, 3) if x is not None and math.isfinite(x) else None

        return {"rule": self.rule, "title": self.title, "severity": self.severity, "evidence": list(self.evidence),
                "next": self.next, "notebook": self.notebook, "share": None if self.share is None else round(
                    self.share, 4), "of": self.of, "base": self.base,
                "expected_speedup": num(g.speedup) if g else None,
                "expected_speedup_range": [num(g.low), num(g.high)] if g else None,
                "basis": g.basis if g else None,
                "expected_speedup_of": g.of if g else None,  # "the step", or "the recording" for a one-time cost
                "parts": [p.to_json() for p in self.parts]}


@dataclass
class Context:
    """Facts computed once and shared by the rules, and the ledger of the time they claim."""

    trace: Trace
    summary: facts.Summary
    cache: dict[str, Any] = field(default_factory=dict)  # what more than one rule reads, computed once
    budget: Budget = field(init=False)
    ledger: Ledger = field(init=False)

    def __post_init__(self) -> None:
        self.budget = budget(self.trace)
        self.ledger = Ledger(self.budget)

    def once(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    @property
    def base_us(self) -> float:
        """The time shares are of: the recorded window, from the first step to the last event's end.

        Not the steps' CPU-side total: when the CPU runs ahead, GPU work runs on past the last step's end.
        """
        return self.summary.balance.window_us

    @property
    def base(self) -> str:
        return "the recorded window"

    def sized(self, f: "Finding", spent_us: float | None, of: str) -> "Finding":
        """``f`` with the share of the base that ``spent_us`` is (None: the finding cannot size itself)."""
        return f if spent_us is None else f.size(spent_us, self.base_us, of, self.base)

    def _one_iteration(self) -> bool:
        """One recorded step holding one iteration of the loop, as far as the trace tells: a step whose DataLoader
        hands out several batches holds several iterations (a loop recorded as one step)."""
        if len(self.summary.steps) != 1:
            return False
        from ..facts import step_facts

        return len(step_facts.dataloader_spans(self.trace)) <= 1

    def waited_us(self, wait: Spans) -> float:
        """The CPU's waits in ``wait`` that overlap the GPU's busy time, less its collectives and what an earlier
        finding's fix removes whole (see :meth:`claimed`)."""
        return total(difference(intersection(merged(wait), self.budget.busy),
                                merged(list(self.budget.collectives) + list(self.ledger.removed))))

    def claimed(self, f: "Finding", of: str, basis: str = "", *, cpu: Spans | None = None,
                cpu_speedup: Speedup | None = None, gpu: Spans | None = None, gpu_speedup: Speedup | None = None,
                cpu_at_most_us: float | None = None, gain_of: str = "the step",
                wait: Spans | None = None, floor_cut_us: float = 0.0,
                removes: Spans | None = None, uploads: bool = False) -> "Finding | None":
        """``f`` sized by the time it claims on the ledger (``cpu``: GPU idle time waiting for the CPU; ``gpu``:
        GPU busy time), with the gain its fix should bring (an issue's; ``wait``: the CPU's waits for the GPU the fix
        removes too, where the GPU was busy, less those inside what an earlier fix removes; ``removes``: the CPU's
        work this fix takes away whole); None when it claims nothing a rule before it has not (the time is explained
        already)."""
        got_cpu = self.ledger.claim(Side.CPU, cpu, cpu_at_most_us) if cpu else []
        got_gpu = self.ledger.claim(Side.GPU, gpu) if gpu else []
        us = total(got_cpu) + total(got_gpu)
        # the waits that overlap the GPU's busy time (their idle part is in got_cpu already), not its collectives (a
        # wait for a collective is a wait for the other ranks, which no sync removed would shorten), nor those inside
        # CPU work an earlier finding's fix takes away (the DataLoader's: its fix takes its waits along)
        waited = self.waited_us(wait) if wait else 0.0
        if removes:
            self.ledger.removed = merged(list(self.ledger.removed) + list(removes))
        if us <= 0 and waited <= 0:
            return None
        f.size(us, self.budget.window_us, of, self.base)
        if waited > 0 and self.budget.cpu_paced:  # the share counts GPU idle time; the gain counts these too
            basis += (f"; as recorded the CPU sets the pace, and it also waited {us_text(waited)} while the GPU ran other work "
                      "than the copies it waited for: the high end takes that time out of the step too, which it "
                      + ("leaves only if the copies to the GPU need not block (from pinned memory with "
                         "non_blocking=True) rather than wait for the queue ahead of them" if uploads else
                         "leaves only if the values can be read later rather than waited for")
                      + " (the trace cannot show whether they can; the share counts only the GPU's idle time)"
                      + ("; with one recorded step, whether the CPU could then run ahead into the next step this "
                         "trace cannot show: a longer recording would" if self._one_iteration() else ""))
        if f.severity == Severity.ISSUE and (cpu_speedup or gpu_speedup):
            f.gain = self.ledger.gain(basis, of=gain_of, cpu_us=total(got_cpu), cpu=cpu_speedup, gpu_us=total(got_gpu),
                                      gpu=gpu_speedup, wait_us=waited if self.budget.cpu_paced else 0.0,
                                      floor_cut_us=floor_cut_us, uploads=uploads)
        return f


Rule = Callable[[Context], "Finding | None"]


def rank(found: list[Finding]) -> list[Finding]:
    """Findings in the order to look at them: the issue whose fix should gain the most first.

    An issue whose fix should make the step less than :data:`NOTE_BELOW_GAIN` times faster, or (one that cannot
    say) that accounts for less than :data:`NOTE_BELOW` of the window, is reported as a note. Issues come first,
    by their expected gain (a gain that is a hypothesis, no such fix timed in this project, by its low end); one that cannot size its gain is placed as if its fix halved the time it accounts for
    (:data:`UNSIZED_AS`, Amdahl on its share: a place in the order, never printed), so that a compiled region
    holding 72% of the window is not put after a 1.1x remainder. Notes follow, by their share, one that frames the
    reading (:attr:`Finding.leads`) first and those that say what the trace cannot tell (:attr:`Finding.says_little`)
    last. The findings'
    shares do not overlap (:class:`helpers.advice.ledger.Ledger`), so a cause that explains the GPU's idle time
    comes before what remains of it (the CPU-bound finding) by the size of what it explains.
    """
    for f in found:
        if f.severity == Severity.ISSUE:
            small = (f.gain.speedup < NOTE_BELOW_GAIN if f.gain is not None else
                     f.share is not None and f.share < NOTE_BELOW)
            if small:
                f.severity = Severity.NOTE

    def key(f: Finding) -> tuple:
        if f.severity == Severity.ISSUE:
            if f.gain is not None:  # a hypothesis (no such fix timed) by its low end: a timed model's point first
                place = f.gain.low if f.gain.hypothesis else f.gain.speedup
            elif f.share is not None:
                place = 1 / ((1 - f.share) + f.share / UNSIZED_AS)
            else:
                place = 0.0
            return (0, -place, f.gain is None, -(f.share or 0.0))
        return (1, not f.leads, f.says_little, f.share is None, -(f.share or 0.0))
    return sorted(found, key=key)
