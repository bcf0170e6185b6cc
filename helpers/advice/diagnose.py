"""The cheat sheet as code: rules that read any trace and say what to look at next, and what fixing it should bring.

Each rule looks for one pattern the series teaches (``docs/cheat-sheet.md``
lists them with the notebook that teaches each) and returns a
:class:`Finding` with its evidence (event names and times from the trace),
what to try and, for an issue, the gain its fix should bring. The window's
time is divided among the findings on a ledger (:mod:`helpers.advice.ledger`):
the GPU's idle time while it waited for the CPU (:mod:`.cpu_rules`) and its
busy time (:mod:`.gpu_rules`), each microsecond claimed once, so that the
shares on one side add up to that side's share of the window. The rules about
the recording itself (:mod:`.trace_rules`) say how to read the rest. Like the
facts it builds on, this module imports no torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .. import facts
from ..facts.collectives import world_size_of
from ..facts.ranks import Ranks, read_ranks
from ..reader.source import TraceError
from ..reader.trace import read_trace
from . import cpu_rules, gpu_rules, trace_rules
from .distributed import diagnose_ranks, trace_rules as rank_rules
from .findings import Context, Finding, Rule, Severity, rank
from .gpu_rules import CDIST_DOCS, SPIKE_BYTES, SPIKE_SHARE
from .rulebook import RuleId
from ..reader.trace import Trace

__all__ = ["CDIST_DOCS", "Finding", "FolderDiagnosis", "RULES", "RankAlone", "diagnose_folder", "folder_text", "SPIKE_BYTES", "SPIKE_SHARE", "Severity", "diagnose", "first_line",
           "text"]

#: every rule, in the order they claim time: the recording's framing first, then the GPU's wait for the CPU (most
#: specific cause first), then the GPU's own work, then the profiler's footprints
RULES: list[Rule] = trace_rules.FIRST + cpu_rules.RULES + gpu_rules.RULES + trace_rules.LAST


def diagnose(trace: Trace) -> list[Finding]:
    """Every cheat-sheet rule that applies to this trace, the one whose fix should gain the most first (:func:`rank`).

    A rank inside its collectives (:func:`.trace_rules.in_collectives`) gets no CPU- or GPU-side findings: its time is
    the wait for the other ranks, which the folder of every rank's trace can tell apart.
    """
    ctx = Context(trace, facts.summarize(trace))
    inside = trace_rules.in_collectives(ctx)
    skip = set(cpu_rules.RULES + gpu_rules.RULES) - {gpu_rules._memory_spike} if inside else set()
    found = [f for f in (rule(ctx) for rule in RULES + rank_rules() if rule not in skip) if f is not None]
    if any(f.rule == RuleId.INSIDE_COLLECTIVES for f in found):  # the same time, said better for one rank
        found = [f for f in found if f.rule not in (RuleId.COMMUNICATION_BOUND, RuleId.LOW_OVERLAP)]
    world = world_size_of(trace)
    if ctx.budget.collectives and world != 1:  # one rank's gain is the job's only if the other ranks keep up
        for f in found:
            if f.gain is not None:
                f.gain = replace(f.gain, basis=f.gain.basis + ONE_OF_RANKS.format(
                    of=f"one rank of {world}" if world else "one rank of several"))
    return rank(found)


#: said in the basis of every gain on one rank's trace (its GPU runs collectives)
ONE_OF_RANKS = ("; this trace is {of}: in a job whose collectives wait for every rank, this rank's step shortens "
                "only as far as the slowest rank's does, and part of its collective time may be its wait for the "
                "others, which no fix on this rank removes (one trace cannot tell them apart: diagnose the folder of "
                "every rank's trace)")


@dataclass
class RankAlone:
    """One rank's trace diagnosed on its own, beside the folder's findings about the ranks together."""

    rank: int
    path: str
    findings: list[Finding]

    def to_json(self) -> dict:
        return {"rank": self.rank, "path": self.path, "findings": [f.to_json() for f in self.findings]}


@dataclass
class FolderDiagnosis:
    """A folder of rank traces: the rules about the ranks together, then each rank read alone (the single-trace
    rules see what the folder's rules do not: a GPU-bound rank, a long synchronize)."""

    together: list[Finding]
    alone: list[RankAlone]
    ranks: Ranks | None = None  # what the folder's reading found (skipped files, events set aside)

    def to_json(self) -> dict:
        return {"together": [f.to_json() for f in self.together], "each_rank": [x.to_json() for x in self.alone]}


def diagnose_folder(r: "Ranks | str | os.PathLike") -> FolderDiagnosis:
    """:func:`helpers.advice.distributed.diagnose_ranks` on the folder, and :func:`diagnose` on each rank's file.

    Given the folder's path, each trace is read once: diagnosed alone while the ranks are read. Given ranks already
    read, each rank's file is read again."""
    if not isinstance(r, Ranks):
        mine: list[RankAlone] = []
        ranks = read_ranks(r, each=lambda t, k: mine.append(RankAlone(k, t.path, diagnose(t))))
        return FolderDiagnosis(diagnose_ranks(ranks), sorted(mine, key=lambda x: x.rank), ranks)
    alone = []
    for row in r.ranks:
        try:
            alone.append(RankAlone(row.rank, row.path, diagnose(read_trace(row.path))))
        except TraceError:  # (read once already by read_ranks: changed since) the folder's findings still stand
            continue
    return FolderDiagnosis(diagnose_ranks(r), alone, r)


def folder_text(d: FolderDiagnosis) -> str:
    """The folder's findings, then a line per rank: what its own trace says to look at first. Where the ranks
    together show notes only and some rank's own trace has an issue, the first line points at the ranks' own."""
    firsts = [x.findings[0] for x in d.alone if x.findings and x.findings[0].severity == Severity.ISSUE]
    if firsts and not any(f.severity == Severity.ISSUE for f in d.together):
        counts: dict[str, int] = {}
        for f in firsts:
            counts[f.title] = counts.get(f.title, 0) + 1
        named = "; ".join(f"{t} ({n} of {len(d.alone)})" for t, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        lead = (f"Look first at each rank's own trace (below): what the ranks show together is notes only, while "
                f"their own traces first name: {named}.")
        head = lead + "\n" + LEGEND + ("\n\n" + "\n\n".join(f.text() for f in d.together) if d.together else "")
    else:
        head = (text(d.together) if d.together else
                "No rule about the ranks together applies to this folder (no straggler; collectives do not set the "
                "pace).")
    lines = [f"  rank {x.rank} ({os.path.basename(x.path)}): {first_line(x.findings)}" for x in d.alone]
    return (head + "\n\nEach rank's own trace, read alone (python -m helpers diagnose FILE lists its findings):\n"
            + "\n".join(lines)) if lines else head


def first_line(findings: list[Finding], with_gain: bool = True) -> str:
    """The one thing to look at first, in a line (``with_gain=False``: without what its fix should gain)."""
    if not findings:
        return "No rule of the cheat sheet applies to this trace."
    f = findings[0]
    gain = f"; {f.gain.words(brief=True)}" if with_gain and f.gain is not None and f.severity == Severity.ISSUE else ""
    return f"Look first at: {f.title}" + (f" ({f.amount}{gain})" if f.amount else "") + "."


#: how to read the list, printed under its first line
LEGEND = ("(How to read this: an [issue] should win time back, and its second line says how much where the trace "
          "can size it; a [note] is "
          "worth knowing, but in this profiled run its fix gains little (under 5% of the step, or it holds under 5% of the "
          "window where the gain cannot be sized) or less than the profiler's own cost could explain; where its fix "
          "could gain more once the profiler is off, its second line says up to how much: time it without the "
          "profiler. A share "
          "is a part of the recorded window, from the first profiler step (or, without steps, the first event) to "
          "the end of the last recorded activity (the step spans and the profiler's own span, which can end later, "
          "left out): "
          "time the GPU sat idle, or time it was busy, never counted in two findings. Each gain is for that fix "
          "alone, unless its range says its high end counts other fixes' gains too.)")


def text(findings: list[Finding]) -> str:
    if not findings:
        return first_line(findings)
    return first_line(findings) + "\n" + LEGEND + "\n\n" + "\n\n".join(f.text() for f in findings)
