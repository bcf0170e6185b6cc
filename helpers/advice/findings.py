"""What a finding is, and how findings are ranked: shared by the single-trace rules (:mod:`helpers.advice.diagnose`) and
the rules for a folder of ranks (:mod:`helpers.advice.distributed`), which import it; it imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .. import Word, facts
from . import rulebook
from .rulebook import RuleId
from ..reader.trace import Trace


class Severity(Word):
    """What kind of finding it is."""

    ISSUE = "issue"  # something costs time that could be won back
    NOTE = "note"  # something to know while reading the trace; not a problem in itself


#: an issue that accounts for less than this share of the step time (or window) is reported as a note
NOTE_BELOW = 0.05
#: a GPU-bound run whose GPU still idles this share of the window gets a word on it
IDLE_NOTE = 0.25
#: a cause of GPU idle time (input, hidden syncs, the compile tax, recompiling, a cold start) that accounts for at
#: least this share of the CPU-bound finding's idle time is named before it: it says where the idle time goes
CAUSE_SHARE = 0.5
#: the rules whose time is part of the GPU's idle time in a CPU-bound run (recompiles: sized by the compile spans,
#: during which the CPU launches nothing)
CAUSES_OF_IDLE = (RuleId.INPUT_BOUND, RuleId.HIDDEN_SYNC, RuleId.COMPILE_TAX, RuleId.RECOMPILES, RuleId.COLD_START)
#: the rules about the GPU's own work: they matter once the GPU sets the pace
GPU_SIDE = (RuleId.FP32_GEMM, RuleId.KERNEL_VARIANCE, RuleId.ADDMM_BIAS_COPY)


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
        return f"{self.share:.0%} of {self.base}" + (f": {self.of}" if self.of else "")

    def text(self) -> str:
        lines = [f"[{self.severity}] {self.title}  ({self.rule}; notebook {self.notebook})"]
        if self.amount:
            lines.append(f"    accounts for {self.amount}")
        lines += [f"    - {e}" for e in self.evidence]
        lines.append(f"    try: {self.next}")
        return "\n".join(lines)


@dataclass
class Context:
    """Facts computed once and shared by the rules."""

    trace: Trace
    summary: facts.Summary
    cache: dict[str, Any] = field(default_factory=dict)  # what more than one rule reads, computed once

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


Rule = Callable[[Context], "Finding | None"]


def rank(found: list[Finding]) -> list[Finding]:
    """Findings ordered by the share of the time each accounts for, the one to look at first first.

    An issue under NOTE_BELOW becomes a note. Issues come before notes, sized ones before those that cannot size
    themselves. A cause of the GPU's idle time that accounts for most of it comes before the CPU-bound finding,
    which then says so: the cause is the thing to fix.
    """
    for f in found:
        if f.severity == Severity.ISSUE and f.share is not None and f.share < NOTE_BELOW:
            f.severity = Severity.NOTE
    ordered = sorted(found, key=lambda f: (f.severity != Severity.ISSUE, f.share is None, -(f.share or 0.0)))
    cpu = next((f for f in ordered if f.rule == RuleId.CPU_BOUND and f.severity == Severity.ISSUE), None)
    if cpu is not None:
        # While the GPU waits for the CPU, faster kernels do not shorten the step: they come after the verdict.
        gpu_side = [f for f in ordered if f.rule in GPU_SIDE and ordered.index(f) < ordered.index(cpu)]
        for f in gpu_side:
            ordered.remove(f)
            ordered.insert(ordered.index(cpu) + 1, f)
            f.evidence.append("the run is CPU-bound (the GPU waits for the CPU): faster GPU work shortens the step "
                              "only once the CPU side no longer sets the pace")
    if cpu is not None and cpu.share:
        causes = [f for f in ordered if f.rule in CAUSES_OF_IDLE and f.severity == Severity.ISSUE
                  and f.share is not None and f.share >= CAUSE_SHARE * cpu.share]
        if causes:
            ordered.remove(cpu)
            ordered.insert(ordered.index(causes[-1]) + 1, cpu)
            cpu.evidence.append("most of that idle time is explained by the finding" + ("s" if len(causes) > 1 else "")
                                + " above (" + ", ".join(f.rule for f in causes) + "): fix " +
                                ("it" if len(causes) == 1 else "them") + " first")
    return ordered
