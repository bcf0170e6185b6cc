"""Notebook 17's exam: traces the series never showed, read as a learner would, then two answers per trace.

For each trace the evidence cell shows what a learner looks at: the
profiler's table rebuilt from the trace, the GPU work by name, one recorded
step's timeline, the roofline, the memory events when the trace has them, and
Perfetto; for the folder of ranks, each rank's table, both ranks on one clock
and their collectives side by side. Never a verdict: no balance, no
``diagnose``. Then two questions: the trace's bound, and (once that is locked)
the first thing to fix. The answers are ``diagnose``'s (:mod:`helpers.advice.exam`),
graded exactly: a fixed trace has no timing spread.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

from .. import facts
from ..advice import diagnose, exam
from ..facts import memory, profile_table, roofline
from ..lesson import plots, show, spoilers, widgets
from ..facts.collectives import clock_shifts_us
from ..facts.text import part_of, short, us

#: each trace's two questions, written out (tools/instructor_table.py finds a notebook's question ids in its source;
#: tests/test_exam.py checks that they are helpers.advice.exam's)
QUESTIONS = (
    dict(bound_qid="17.trace-1-bound", fix_qid="17.trace-1-fix"),
    dict(bound_qid="17.trace-2-bound", fix_qid="17.trace-2-fix"),
    dict(bound_qid="17.trace-3-bound", fix_qid="17.trace-3-fix"),
    dict(bound_qid="17.trace-4-bound", fix_qid="17.trace-4-fix"),
    dict(bound_qid="17.trace-5-bound", fix_qid="17.trace-5-fix"),
    dict(bound_qid="17.trace-6-bound", fix_qid="17.trace-6-fix"),
    dict(bound_qid="17.trace-7-bound", fix_qid="17.trace-7-fix"),
    dict(bound_qid="17.trace-8-bound", fix_qid="17.trace-8-fix"),
    dict(bound_qid="17.trace-9-bound", fix_qid="17.trace-9-fix"),
)


def where_traces_come_from() -> str:
    """For the banner, live: the exam's traces are the recorded ones on every machine."""
    return (f"The exam's traces are not recorded now: they are the set in {exam.folder().relative_to(exam.ROOT)}, "
            "the same on every machine, so that every learner reads the same evidence.")


@dataclass
class Exam:
    """Every exam trace, read, with its answer key (computed now, shown only in the reveals)."""

    loaded: dict[int, exam.Loaded] = field(default_factory=dict)
    keys: dict[int, exam.Key] = field(default_factory=dict)

    @classmethod
    def load(cls) -> "Exam":
        e = cls()
        for it in exam.items():
            x = exam.load(it)
            e.loaded[it.number] = x
            e.keys[it.number] = exam.answer_key(x)
        return e

    def describe(self) -> str:
        """Where the traces come from: the set's folder and manifest (GPU, versions, date)."""
        where = exam.folder()
        m = json.loads((where / "manifest.json").read_text())
        gpu = m.get("gpu", {}).get("name", where.name)
        # a folder recorded over gloo ran on the CPUs of that machine: its ranks' traces hold no GPU at all
        on_cpu = [k for k, v in (m.get("traces") or {}).items() if isinstance(v, dict) and v.get("backend") == "gloo"]
        head = (f"{len(self.loaded)} traces from {where.relative_to(exam.ROOT)}, recorded on one machine with torch "
                f"{m.get('torch', '?')}, CUDA {m.get('cuda', '?')}, on {str(m.get('date', '?'))[:10]}: ")
        if not on_cpu:
            return head + f"on its {gpu}."
        return head + (f"{len(self.loaded) - len(on_cpu)} on its {gpu}, and {len(on_cpu)} "
                       f"({', '.join(on_cpu)}) on its CPUs, over gloo, with no GPU in the trace.")

    # --- the evidence ---------------------------------------------------------------------------------------------

    def evidence(self, n: int) -> None:
        """What a learner would look at in trace ``n``: tables, a timeline, the roofline, memory, Perfetto."""
        x = self.loaded[n]
        if x.ranks is not None:
            return self._rank_evidence(n, x)
        t = x.trace
        st = facts.steps(t)
        show.md(f"`{x.item.path.name}`: {len(st)} recorded steps ({', '.join(s.name for s in st)}), "
                f"GPU: {t.device_name or 'none named'}. The profiler's table, rebuilt from the trace, by CPU total:")
        show.pre(profile_table.text(t, "cpu_total", top=12))
        work = _gpu_work_rows(t)
        if work:
            show.md("GPU work by name (the longest first), and the op each was launched under:")
            show.table(work, ["calls", "total", "median", "launched under", "name"])
        show.display_figure(plots.timeline(t, plots.step_window(t, 1, 1),
                                           title=f"trace {n}: one recorded step, and the GPU work it launched"))
        r = roofline.roofline(t)
        if r.points:
            show.display_figure(plots.roofline(r, title=f"trace {n}: roofline ({r.gpu}; point area: GPU time)"))
        if memory.has_memory(t):
            show.display_figure(plots.memory_timeline(memory.memory_timeline(t), st,
                                                      title=f"trace {n}: memory events (profile_memory=True)"))
        show.perfetto(x.item.path, title=f"trace {n}")

    def _rank_evidence(self, n: int, x: exam.Loaded) -> None:
        r = x.ranks
        show.md(f"`{x.item.path.name}/`: {len(r.ranks)} processes over {r.backend or 'an unnamed backend'}, "
                f"one trace per rank, " + ("on one clock." if r.clock else "with no shared clock."))
        for rank, t in zip(r.ranks, x.rank_traces):
            show.md(f"Rank {rank.rank}: the profiler's table, rebuilt from its trace, by CPU total:")
            show.pre(profile_table.text(t, "cpu_total", top=10))
        show.display_figure(plots.ranks(x.rank_traces, clock_shifts_us(x.rank_traces),
                                        title=f"trace {n}: one step of rank 0, both ranks on one clock"))
        if r.matched:
            show.md("The same collectives on each rank (found on every rank, in time order): when each started on "
                    "the shared clock, and how long it lasted.")
            show.table([(k + 1, m.op) + tuple(v for s, d in zip(m.starts_us, m.durs_us) for v in (us(s), us(d)))
                        for k, m in enumerate(r.matched)],
                       ["#", "collective"] + [h for x_ in r.ranks for h in (f"rank {x_.rank} starts",
                                                                           f"rank {x_.rank} lasts")])
        for path in sorted(x.item.path.glob("rank*.json")):
            show.perfetto(path, title=f"trace {n}: {path.stem}")

    # --- the questions ----------------------------------------------------------------------------------------------

    def ask(self, n: int) -> None:
        """Trace ``n``'s two questions: its bound, then (once locked) the first thing to fix."""
        x, k = self.loaded[n], self.keys[n]
        q = QUESTIONS[n - 1]
        choices = exam.bound_choices(x)
        if x.ranks is not None:
            widgets.ask(q["bound_qid"], f"Trace {n}: which rank sets the pace (the one the other waits for)?",
                        choices=choices, default=choices[-1], reveal=lambda a: _reveal_rank(a, k, x),
                        decides=lambda: [spoilers.exact(x.ranks.straggler.reason)])
        else:
            widgets.ask(q["bound_qid"], f"Trace {n}: CPU-bound or GPU-bound?", choices=choices, default=choices[0],
                        reveal=lambda a: _reveal_bound(a, k, x), decides=lambda: _bound_facts(k))
        widgets.after(q["bound_qid"], lambda: widgets.ask(
            q["fix_qid"], f"Trace {n}: what is the first thing to fix?", choices=exam.FIXES, default=exam.FIXES[0],
            reveal=lambda a: _reveal_fix(a, k), decides=lambda: _fix_facts(k)))


def _gpu_work_rows(t, top: int = 8) -> list[tuple]:
    rows = []
    for kstat in facts.kernels(t)[:top]:
        ops = {facts.launching_op(t, j) for j in t.indices(name=kstat.name) if t.is_gpu(j)}
        ops.discard(None)
        rows.append((kstat.count, us(kstat.total_us), us(kstat.median_us), ", ".join(sorted(ops)) or "-",
                     short(profile_table.display_name(kstat.name), 90)))
    return rows


# --- the reveals ----------------------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    """A share as a percentage, "under 0.1%" rather than a 0.0% that reads as none at all."""
    return f"{x:.1%}" if x >= 0.001 else "under 0.1%"


def _share_or_times(x: float, whole: str) -> str:
    """A ratio to ``whole`` in words: a share below one ("under 0.1%" rather than a 0.0% that reads as none),
    "N times" above."""
    return f"{_pct(x)} of {whole}" if x < 1 else part_of(x, whole)


CPUS = "the CPU's"


def _bound_sentence(b: facts.Balance) -> str:
    return (f"Self CUDA time total {us(b.device_us)} against Self CPU time total {us(b.self_cpu_us)}: the GPU's time "
            f"is {_share_or_times(b.ratio, CPUS)}, and the GPU was busy {us(b.gpu_busy_us)} of the {us(b.window_us)} "
            f"recorded window ({_pct(b.gpu_busy_share)})")


def _bound_facts(k: exam.Key) -> list:
    b = k.balance
    # the forms diagnose and summarize print the balance in (each unique to this trace)
    return [spoilers.exact(part_of(b.ratio, "the CPU time")), spoilers.exact(_bound_sentence(b)),
            spoilers.exact(f"GPU busy {us(b.gpu_busy_us)} of the {us(b.window_us)} window")]


def _reveal_bound(answer: str, k: exam.Key, x: exam.Loaded) -> widgets.Outcome:
    b = k.balance
    own = facts.self_cpu_without_closing_sync(x.trace)
    mine = b.device_us / own if own > 0 else float("inf")
    same = (mine >= b.threshold) == (b.ratio >= b.threshold)
    return widgets.verdict(
        answer == k.bound,
        f"You said <i>{html.escape(answer)}</i>; the totals say <b>{html.escape(k.bound)}</b>. "
        f"{_bound_sentence(b)}. The series' line: GPU-bound when the GPU's time reaches {b.threshold:.0%} of the "
        f"CPU's. Notebook 02 takes the profiler's closing synchronize out of the CPU's time (the ops' self CPU time left: "
        f"{us(own)}): the "
        f"GPU's time is then {_share_or_times(mine, 'it')}, "
        + ("the same verdict." if same else "the other verdict: a trace this near the line reads both ways.")
        + " What to fix first is the next question: a verdict says which side sets the pace, not what to change.",
        actual=k.bound)


def _reveal_rank(answer: str, k: exam.Key, x: exam.Loaded) -> widgets.Outcome:
    st = x.ranks.straggler
    named = f"rank {st.rank}" if st.rank is not None else None
    return widgets.verdict(
        answer == k.bound,
        f"You said <i>{html.escape(answer)}</i>; the collectives say <b>{html.escape(k.bound)}</b>"
        + (f": {html.escape(st.reason)}. A collective ends only when every rank has entered it, so the rank that "
           f"enters last waits least, and the others' collectives last longer by about its delay: {named} sets the "
           "pace." if named else f" ({html.escape(st.reason)})."), actual=k.bound)


def _fix_facts(k: exam.Key) -> list:
    out = [spoilers.exact(diagnose.first_line(k.findings))]
    if k.balance is not None:  # a folder's first evidence line is its straggler's reason: the bound's reveal says it
        out.append(spoilers.exact(k.first.evidence[0]))
    if k.shape is not None:
        out.append(spoilers.exact(roofline.dominant_text(k.shape)))
    return out


def _reveal_fix(answer: str, k: exam.Key) -> widgets.Outcome:
    first = k.first
    ev = "".join(f"<li>{html.escape(e)}</li>" for e in first.evidence)
    full = html.escape(diagnose.text(k.findings))
    return widgets.verdict(
        answer == k.fix,
        f"You said <i>{html.escape(answer)}</i>. diagnose's first finding is <b>{html.escape(first.title)}</b> "
        f"(<code>{html.escape(first.rule)}</code>, taught in notebook {html.escape(first.notebook)}), and the choice "
        f"that answers it is <b>{html.escape(k.fix)}</b>.<br>{html.escape(diagnose.first_line(k.findings))}"
        f"<ul>{ev}</ul>Why it comes first: {html.escape(exam.why(k))}<br>What to try, in diagnose's words: "
        f"{html.escape(first.next)}.<details><summary>Everything diagnose says about this trace</summary>"
        f"<pre style='white-space:pre-wrap;font-size:85%'>{full}</pre></details>", actual=k.fix)
