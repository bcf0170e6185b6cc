"""Notebook 01's questions: which steps a schedule keeps, what one call runs on the GPU, what watching costs."""

from __future__ import annotations

from collections import Counter

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import measure, kernel_kinds as kk
from ..facts.measure import Estimate, Graded
from ..facts.text import counts_text, short, us
from . import _shared

STEP_CHOICES = ["5: #0 to #4", "3: #0 to #2", "3: #2 to #4", "2: #3 and #4"]

GPU_WORK_CHOICES = ["1", "2", "3", "4 or more"]

COST_CHOICES = ["it grows with the number of ops: a cost per recorded event",
                "it stays about the same: a fixed cost per call"]
# The batched call's extra time over the flat call's: below 1.5x "about the same", from 1.5x "it grows".
COST_EDGES = [1.5]
COST_BY_VALUE = [COST_CHOICES[1], COST_CHOICES[0]]  # grade_choice's order: the choice below the edge first


# --- 01.steps ----------------------------------------------------------------------------------------------


def _roles(wait: int, warmup: int, active: int) -> list[str]:
    return ["wait"] * wait + ["warmup"] * warmup + ["active"] * active


def steps(by_hand, table: str, wait: int = 1, warmup: int = 1, active: int = 3) -> None:
    """01.steps: which ProfilerStep spans a trace written with wait=1, warmup=1, active=3 holds."""
    names = [s.name for s in facts.steps(by_hand)]

    def reveal(answer):
        actual = {tuple(f"ProfilerStep#{i}" for i in range(5)): STEP_CHOICES[0],
                  tuple(f"ProfilerStep#{i}" for i in range(2, 5)): STEP_CHOICES[2]}.get(tuple(names), "something else")
        kept = set(names)
        show.table([(f"#{i}", role, f"ProfilerStep#{i}" if f"ProfilerStep#{i}" in kept else "none: not recorded")
                    for i, role in enumerate(_roles(wait, warmup, active))],
                   ["step the loop ran", "what the schedule did", "its span in the trace"])
        show.pre(table)
        return widgets.verdict(
            answer == actual,
            f"The trace holds {', '.join(names)}. Steps are numbered from 0 as the loop runs them, and the "
            "schedule decides what each one does: step #0 is a <i>wait</i> step (the profiler is off), step #1 a "
            "<i>warmup</i> step (the profiler is switched on, and what it records is thrown away), and only the "
            "three <i>active</i> steps are kept (<a href='https://docs.pytorch.org/docs/stable/profiler.html#torch."
            "profiler.schedule'><code>torch.profiler.schedule</code></a>). The table above is split by input shape, "
            "because the loop recorded shapes.", actual=actual)

    widgets.ask("01.steps", "Five steps ran with wait=1, warmup=1, active=3. Which ProfilerStep spans does the trace hold?",
                choices=STEP_CHOICES, default=STEP_CHOICES[1], reveal=reveal, decides=lambda: names,
                # the by-hand loop ran on this CPU when there is no GPU: its table's times are measured now
                where=None if any(ln.is_gpu for ln in by_hand.lanes) else "cpu")


# --- 01.gpu-work ---------------------------------------------------------------------------------------------


def gpu_work(run) -> None:
    """01.gpu-work: how many kernels, copies and fills one call of add(matmul(x, w), b) runs on the GPU."""
    per_step = facts.gpu_work_per_step(run.trace)
    kernels = facts.kernels(run.trace)

    def reveal(answer):
        counts = [sum(k.values()) for _, k in per_step]
        actual = counts[0] if counts and len(set(counts)) == 1 else None
        show.table([(name, counts_text(kinds)) for name, kinds in per_step], ["step", "GPU work it launched"])
        show.table([(k.kind, short(k.name, 90), k.count) for k in kernels], ["kind", "name", "count"])
        choice = {1: "1", 2: "2", 3: "3"}.get(actual, "4 or more")
        gemm = facts.top_kernel(run.trace, kk.GEMM)
        each = (f"Each recorded step launched <b>{actual}</b> piece(s) of GPU work: {counts_text(per_step[0][1])}. "
                if actual is not None else
                f"The recorded steps launched {', '.join(str(c) for c in counts)} pieces of GPU work: not the same "
                "number in each step (the table above says which). ")
        return widgets.verdict(
            answer == choice,
            each + "The names depend on the GPU and its libraries: "
            f"{article.fig('gemm_kernel').label()} ran {show.code(article.fig('gemm_kernel').value)} for the multiply; "
            + (f"this run's multiply is {show.code(gemm.name, 70)}. " if gemm else "")
            + "So the series classifies kernels by what they are (a matrix multiply, an elementwise op...), "
            "never by one name.", actual=choice)

    widgets.ask("01.gpu-work", "How many kernels, copies and fills does one call of add(matmul(x, w), b) run on the GPU?",
                choices=GPU_WORK_CHOICES, default="1", reveal=reveal,
                decides=lambda: [k.name for k in kernels])


def table_and_twin(run) -> None:
    """After 01.gpu-work: the table's first rows, and the label's second row (its copy on the GPU lane).

    The table's two totals at the bottom stay out: notebook 02 asks what share of the CPU's time the GPU's is,
    on this same trace.
    """

    def body():
        lines = run.table.splitlines()
        show.pre("\n".join(lines[:9] + ["..."]))
        twin = facts.gpu_twin(run.trace, run.workload.label)
        if twin is None:
            show.md("This trace has no GPU-side copy of the label (there is no GPU lane).")
            return
        show.md(f"`{run.workload.label}` has two rows. One is the CPU span you opened with `record_function`. The "
                "other, with time only in the CUDA columns, is its copy on the GPU lane: Kineto draws the label on the "
                f"GPU stream too, from its first kernel's start to its last kernel's end, {twin.spans} times here. "
                f"Those spans add up to {us(twin.span_us)}, and kernels ran for only "
                f"{twin.work_us / twin.span_us:.0%} of it: the rest is idle time between them. That is why that row's *Self CUDA %* can read more than 100% of the GPU's "
                "total: read it as *how long the GPU was inside the label*, not as GPU work.")

    widgets.after("01.gpu-work", body)


def lanes(run) -> None:
    """After 01.gpu-work: the trace's lanes and how many events of each category they hold."""

    def body():
        t = run.trace
        print(t)
        counts = {ln.label: Counter(t.cat_table[t.cat_id[i]] for i in range(len(t)) if t.lane[i] == ln.index)
                  for ln in t.lanes}
        show.table([(ln.label, "GPU" if ln.is_gpu else "profiler" if ln.is_profiler else "CPU",
                     ", ".join(f"{n} {c}" for c, n in counts[ln.label].items())) for ln in t.lanes],
                   ["lane", "side", "events by category"])
        show.display_figure(plots.bars({f"{lane}: {cat}": n for lane, c in counts.items() for cat, n in c.items()},
                                       title=f"{run.tag}: events in the trace, by lane and category", unit="events"))

    widgets.after("01.gpu-work", body)


# --- 01.why-cost ---------------------------------------------------------------------------------------------


def _cost_grade(answer, flat, batched, e_flat: Estimate, e_batched: Estimate) -> tuple[Graded, Estimate | None, str]:
    """The grade, the ratio of the two extras (None where it means nothing) and what the data allows to say.

    Held or missed only when both extras are above zero outside their noise, their ratio's whole range sits
    on one side of the edge, and the ratio lies where the profiler's bookkeeping can put it at all: from
    about 1x (a fixed cost per call) to the ratio of ops per call (a cost per event, and nothing else).
    """
    ops = (batched.ops_per_call or 0) / (flat.ops_per_call or 1)
    for run, e in ((flat, e_flat), (batched, e_batched)):
        if e.lo <= 0:
            why = (f"the profiler's extra time on {run.tag}, {e.text()}, reaches zero inside the spread of the two "
                   "timings: this machine's noise is as large as the cost being measured")
            return Graded(measure.Status.INCONCLUSIVE, None, why), None, ""
    ratio = e_batched / e_flat
    if not (0.5 <= ratio.mid <= 2 * ops):
        why = (f"the two extras ({us(e_flat.mid)} and {us(e_batched.mid)}) are out of proportion: the profiler's "
               f"bookkeeping can make the batched call's extra about 1x the flat call's (a fixed cost) up to "
               f"{ops:.1f}x (its ops per call over the flat call's: a cost per event), and these timings fall far "
               "outside that range, so other work on this machine disturbed one of the runs")
        return Graded(measure.Status.INCONCLUSIVE, None, why), None, ""
    g = measure.grade_choice(answer, ratio, COST_EDGES, COST_BY_VALUE)
    return g, ratio, f"{ops:.1f}x"


#: a ratio of the two extras below this, at a quartile, means the extra vanished into the noise there
LOST_IN_NOISE = 0.1


def ratio_span(ratio) -> str:
    """The ratio of the two extras by its quartiles, in words.

    On a busy machine the smaller extra can vanish into the noise in some rounds: the ratio's lower bound then
    falls towards zero, which says "lost in the noise", not a ratio to read.
    """
    if ratio.lo >= LOST_IN_NOISE:
        return f"between {ratio.lo:.1f}x and {ratio.hi:.1f}x by the quartiles"
    return f"up to {ratio.hi:.1f}x by the quartiles; at the low end the extra was lost in this machine's noise"


def why_cost(flat, batched) -> None:
    """01.why-cost: does the profiler's extra time per call grow with the ops a call dispatches?"""
    e_flat, e_batched = _shared.profiler_extra(flat), _shared.profiler_extra(batched)

    def reveal(answer):
        if e_flat is None or e_batched is None:
            return widgets.verdict(None, "One of the two runs has no unprofiled timing to compare with: nothing "
                                         "to grade here.")
        rows = []
        for r, e in ((flat, e_flat), (batched, e_batched)):
            rows.append((r.tag, f"{r.ops_per_call:g}", _shared.profiled(r).text(), _shared.unprofiled(r).text(),
                         e.text(), us(e.mid / r.ops_per_call)))
        show.table(rows, ["run", "ops per call", "profiled (steady steps)", "unprofiled (blocks)",
                          "the profiler's extra", "extra per op"])
        _shared.spread_figure({f"{flat.tag}, profiled": _shared.profiled(flat),
                               f"{flat.tag}, unprofiled": _shared.unprofiled(flat),
                               f"{batched.tag}, profiled": _shared.profiled(batched),
                               f"{batched.tag}, unprofiled": _shared.unprofiled(batched)},
                              title="One call on this CPU, profiled against unprofiled")
        g, ratio, ops = _cost_grade(answer, flat, batched, e_flat, e_batched)
        where = " " + _shared.where_measured(flat, batched) + show.timing_caveat(flat, batched)
        if ratio is None:
            return widgets.grade(g, "Nothing survives or falls on these numbers: measure again, on a quieter "
                                    "machine if you can." + where, live=True)
        said = g.actual.split(": ")[1] if g.conclusive else None
        return widgets.grade(
            g, f"The profiler's extra time per call went from <b>{us(e_flat.mid)}</b> to <b>{us(e_batched.mid)}</b>, "
            f"<b>{ratio.mid:.1f}x</b> ({ratio_span(ratio)}), when the ops per "
            f"call went up {ops}. A fixed cost per call predicts about 1x; a cost per recorded event and nothing "
            f"else predicts {ops}."
            + (f" The hypothesis that survives on this machine: {said}." if said else "")
            + " That is why the series sets a CPU time from a trace beside an unprofiled one before drawing a "
            "conclusion from it, especially when the two calls compared hold different numbers of ops "
            "(notebooks 05, 08, 11)." + where, live=True)

    def decides():
        # The two extras, as the reveal prints them. Their ratio is not declared: near 2, its rounded form
        # ("2x") is on screen all over the series, and would stand for nothing.
        return [spoilers.us(e.mid) for e in (e_flat, e_batched) if e is not None]

    widgets.ask("01.why-cost", "With more than twice the ops per call, what happens to the profiler's extra time per call?",
                choices=COST_CHOICES, default=COST_CHOICES[1], reveal=reveal, decides=decides, where="cpu")


# --- 01.perfetto ---------------------------------------------------------------------------------------------


def perfetto_registers(run) -> None:
    """01.perfetto: the GEMM's registers per thread, read in Perfetto."""
    gemm = facts.top_kernel(run.trace, kk.GEMM)
    regs = gemm.resources.registers_per_thread if gemm else None

    def reveal(found):
        if gemm is None:
            return widgets.verdict(None, "This trace holds no matrix-multiply kernel to click.")
        return widgets.verdict(found == regs, f"The GEMM kernel {show.code(gemm.name, 60)} uses <b>{regs}</b> "
                               "registers per thread (its <i>registers per thread</i> argument). Notebook 06 works "
                               "out what that allows.", actual=regs)

    widgets.ask("01.perfetto", "Click the matrix-multiply kernel in ProfilerStep#3 on the GPU lane. How many registers "
                "per thread does it use?", unit="registers", default=0, reveal=reveal, kind="task",
                decides=lambda: [spoilers.value(regs, "registers")] if regs else [])


# --- the exercise ---------------------------------------------------------------------------------------------


def exercise_schedule(fn, x, w, b, out_dir) -> None:
    """The "change the schedule" exercise: six steps with wait=2, warmup=2, active=2, on the CPU."""
    from torch.profiler import ProfilerActivity, profile as torch_profile, record_function, schedule

    from ..runs.profiling import native_log_filter
    from ..reader.trace import read_trace

    def solution():
        args = (x.cpu().float(), w.cpu().float(), b.cpu().float())
        with native_log_filter(), torch_profile(activities=[ProfilerActivity.CPU],
                                                schedule=schedule(wait=2, warmup=2, active=2, repeat=1)) as p:
            for _ in range(6):
                with record_function("matmul_add"):
                    fn(*args)
                p.step()
        p.export_chrome_trace(str(out_dir / "exercise.json"))
        names = [s.name for s in facts.steps(read_trace(out_dir / "exercise.json"))]
        show.md(f"The trace holds {', '.join(names)}: the first kept step is the one numbered wait + warmup "
                "(2 + 2 here), and `active` of them are kept.")

    widgets.exercise("change the schedule",
                     "Run six steps with <code>schedule(wait=2, warmup=2, active=2)</code>. Which "
                     "<code>ProfilerStep</code> spans will the trace hold? Write your answer down, then ask for the "
                     "solution.", solution)

