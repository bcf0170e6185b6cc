"""Notebook 11's questions: what diagnose() puts first for two transformer blocks, whether compile pays on the CPU
(unprofiled, timed in turn), which run the profiler slows more, a Perfetto look at the compiled blocks, and a
trace nobody here wrote."""

from __future__ import annotations

import math

from ..advice.rulebook import RuleId
from .. import facts
from ..facts import gpu_calls, measure, kernel_kinds as kk
from ..lesson import plots, show, spoilers, widgets
from ..advice import rulebook
from ..advice.diagnose import diagnose, text as findings_text
from ..advice.cpu_rules import set_up_calls
from ..reader.spans import intersection, merged, total
from ..facts.measure import Estimate, Spread, ratio_range
from ..runs.mode import environment
from ..facts.budget import budget
from ..facts.text import us
from . import _shared


def _said(text: str) -> spoilers.Fact:
    """A fact as the reveal prints it, words included: a bare time or share also stands for other things."""
    return spoilers.Fact("name", text)


def _fmt_x(v: float) -> str:
    return f"{v:.2f}x"


# --- 11.blocks ---------------------------------------------------------------------------------------------

MAIN_CHOICES = [rulebook.VERDICTS[RuleId.CPU_BOUND], rulebook.VERDICTS[RuleId.GPU_BOUND],
                "a cold start in the first step", "nothing: a clean trace"]
#: tiny-kernels is the CPU-bound verdict with its cause named (kernels shorter than their launches)
_RULE_CHOICE = {RuleId.CPU_BOUND: MAIN_CHOICES[0], RuleId.TINY_KERNELS: MAIN_CHOICES[0],
                RuleId.GPU_BOUND: MAIN_CHOICES[1], RuleId.COLD_START: MAIN_CHOICES[2]}


def main_finding(found) -> str:
    """The choice for the first of diagnose's findings (in its own order) that one of the choices names."""
    return next((_RULE_CHOICE[f.rule] for f in found if f.rule in _RULE_CHOICE), MAIN_CHOICES[3])


def issue_against_gpu(run, timed) -> Spread | None:
    """Unprofiled CPU time to issue one call (timed in turn) over the GPU time one call launched (each recorded
    call), every pairing: above 1, the GPU waits for the CPU even with nobody watching."""
    if "eager" not in timed.labels:
        return None
    return ratio_range(timed.spread("eager"), gpu_calls.per_call(run))


def _kinds_of_work(t) -> str:
    """How many distinct kernels ran, and what other GPU work (copies, memsets), from the trace's categories."""
    from ..reader.categories import KERNEL

    kernels = len({t.name_of(j) for j in t.on_gpu((KERNEL,))})
    other = len({t.name_of(j) for j in facts.gpu_work(t)}) - kernels
    return (f"{kernels} different kernels ran" + (f", and {other} other kind{'s' if other != 1 else ''} of GPU work "
            "(copies, memsets)" if other > 0 else ""))


def blocks(run, timed) -> None:
    """11.blocks: what diagnose() puts first for the two transformer blocks, and whether it holds unprofiled."""
    found = diagnose(run.trace)
    actual = main_finding(found)
    first = found[0] if found else None

    def reveal(answer):
        print(findings_text(found))
        b = run.summary.balance
        r = issue_against_gpu(run, timed)
        plain = ""
        if r is not None and actual == MAIN_CHOICES[0]:
            lo, hi = r.quartiles
            gpu = gpu_calls.per_call(run)
            plain = (f" The trace's CPU times are those of a profiled program (notebook 00). Without the profiler "
                     f"({timed.source}), issuing one call takes the CPU {us(timed.spread('eager').median)} against "
                     f"{us(gpu.median)} of GPU work per call: {r.text(_fmt_x)}, "
                     + ("so the GPU waits for the CPU even with nobody watching." if lo > 1 else
                        "so without the profiler the GPU would not wait: the verdict is the profiler's doing."
                        if hi < 1 else "too close to 1 to say whether the verdict holds without the profiler."))
        named = ""
        if first is not None and first.rule == RuleId.TINY_KERNELS:
            named = (f"diagnose's first finding, '{first.title}', is the CPU-bound kind: the GPU waits for the CPU "
                     "between kernels too short to cover their own launches. ")
        return widgets.verdict(
            answer == actual,
            named + f"On this run the GPU is busy {b.gpu_busy_share:.0%} of the window, and its time is {b.ratio:.0%} of the "
            f"CPU's. {_kinds_of_work(run.trace)}; each finding above lists its evidence from "
            f"the trace and the notebook that explains it.{plain}", actual=actual)

    widgets.ask("11.blocks", "What will diagnose() report as the main issue for the two transformer blocks?",
                choices=MAIN_CHOICES, default=MAIN_CHOICES[1], reveal=reveal,
                decides=lambda: [_said(e) for e in (first.evidence[:1] if first else [])])


# --- 11.compile --------------------------------------------------------------------------------------------

CHOICES = ["compiled is cheaper on the CPU", "about the same", "compiled is dearer on the CPU"]
EDGES = [0.9, 1.1]


def compile_graded(timed, answer=None) -> measure.Graded:
    """Compiled over eager, one call's CPU time, unprofiled and round by round."""
    return measure.grade_choice(answer, timed.ratio("compiled", "eager"), EDGES, CHOICES, fmt=_fmt_x)


def compile_blocks(eager, compiled, timed) -> None:
    """11.compile: compiled, do the two blocks cost more or less CPU time per call than eager?"""
    ratio = timed.ratio("compiled", "eager")

    def reveal(answer):
        g = compile_graded(timed, answer)
        rows = []
        for label, r in (("eager", eager), ("compiled", compiled)):
            rows.append((label, *_shared.against_timed(r, timed, label), gpu_calls.per_call(r).text(),
                         sum(facts.work_per_call(r.trace).values())))
        show.table(rows, ["", "CPU per call, profiled (trace)", "CPU per call, unprofiled (timed in turn)",
                          "profiled / unprofiled", "GPU per call (each recorded call)", "GPU work per call"])
        _shared.spread_figure({k: timed.spread(k) for k in ("eager", "compiled")},
                              title="Two transformer blocks: one call's CPU time, timed in turn without the profiler")
        print(findings_text(diagnose(compiled.trace)))
        e, c = eager.cpu_per_call_us, compiled.cpu_per_call_us
        prof_choice = measure.bucket(c / e, EDGES, CHOICES)
        ge, gc = gpu_calls.per_call(eager), gpu_calls.per_call(compiled)
        ne, nc = (sum(facts.work_per_call(r.trace).values()) for r in (eager, compiled))
        mc, me = timed.spread('compiled').median, timed.spread('eager').median
        return widgets.grade(
            g, f"Without the profiler ({timed.source}), one compiled call costs <b>{_fmt_x(ratio.median)}</b> the CPU "
            f"time of an eager one ({us(mc)} against {us(me)}, the medians of each; the {_fmt_x(ratio.median)} is "
            f"the median of the ratios taken round by round, which need not equal the ratio of the two medians, "
            f"{_fmt_x(mc / me)}). In the traces: {us(c)} against {us(e)} ({c / e:.2f}x, "
            f"{min(eager.cpu_per_call.n, compiled.cpu_per_call.n)} steady steps each: shown, not graded), "
            + _shared.profiled_says(prof_choice, g, "the profiler stretched the two differently (the table's fourth "
                                    "column)")
            + f"On the GPU, compile ran {nc} pieces of GPU work per call instead of {ne}, and {us(gc.median)} of GPU "
            f"time instead of {us(ge.median)}. Whether the CPU side gains depends on how much eager dispatch the "
            "compiled code replaces against what its guards and wrappers cost: the exercise below tries a larger "
            "batch.", live=environment().live)

    widgets.ask("11.compile", "Compiled, will the two blocks cost more or less CPU time per call than eager?",
                choices=CHOICES, default="about the same", reveal=reveal,
                decides=lambda: [_said(f"{ratio.median:.2f}x the CPU time"),
                                 _said(f"{us(timed.spread('compiled').median)} against "
                                       f"{us(timed.spread('eager').median)}")])


# --- 11.why-observer ---------------------------------------------------------------------------------------

OBSERVER_CHOICES = ["eager: it records more events per call", "compiled", "both about equally"]
OBSERVER_EDGES = [1 / 1.15, 1.15]
_OBSERVER_ORDER = [OBSERVER_CHOICES[1], OBSERVER_CHOICES[2], OBSERVER_CHOICES[0]]  # eager/compiled low to high


def stretch(run, timed, label: str) -> Estimate:
    """Profiled (the trace's steady steps) over unprofiled (timed in turn), with the range both spreads allow."""
    return Estimate.of(run.cpu_per_call) / Estimate.of(timed.spread(label))


def _over_iqr(run, timed, label: str) -> str:
    """The profiled time over the unprofiled IQR's two ends: how far the unprofiled spread alone moves a stretch."""
    p = Estimate.of(run.cpu_per_call).mid
    q1, q3 = timed.spread(label).quartiles
    return f"{p / q3:.2f}x to {p / q1:.2f}x"


def observer_graded(eager, compiled, timed, answer=None) -> measure.Graded:
    """The profiler's stretch of an eager call over its stretch of a compiled one, against 1/1.15 and 1.15."""
    return measure.grade_choice(answer, stretch(eager, timed, "eager") / stretch(compiled, timed, "compiled"),
                                OBSERVER_EDGES, _OBSERVER_ORDER, fmt=_fmt_x)


def _other_timing(eager, compiled, s_e: float, s_c: float) -> str:
    """A sentence where each recording's own unprofiled timing (made in its process) gives other stretches."""
    if not (eager.timing and compiled.timing):
        return ""
    o_e = Estimate.of(eager.cpu_per_call).mid / eager.timing.host.median
    o_c = Estimate.of(compiled.cpu_per_call).mid / compiled.timing.host.median
    if max(abs(math.log(o_e / s_e)), abs(math.log(o_c / s_c))) < math.log(1.15):
        return ""
    return (" Each recording also timed its call without the profiler, in its own process, and those timings "
            f"disagree with the ones above: over their medians the profiled call takes {o_e:.2f}x (eager) and "
            f"{o_c:.2f}x (compiled) of the unprofiled one"
            + (", below 1x where no profiler can make a call quicker" if min(o_e, o_c) < 1 else "")
            + ". So the call's own time moved between the timings, and how much the profiler adds here is "
            "uncertain: the stretches above are one reading, not the profiler's fixed price.")


def _events_per_step(run) -> float:
    t = run.trace
    return sum(1 for i in t.indices() if not t.is_gpu(i)) / max(len(facts.steps(t)), 1)


def why_observer(eager, compiled, timed) -> None:
    """11.why-observer: which run the profiler slows down more, per call."""
    s_e, s_c = stretch(eager, timed, "eager"), stretch(compiled, timed, "compiled")

    def reveal(answer):
        g = observer_graded(eager, compiled, timed, answer)
        rows = []
        for label, r, s in (("eager", eager, s_e), ("compiled", compiled, s_c)):
            rows.append((label, f"{_events_per_step(r):.0f}", r.cpu_per_call.text(), timed.spread(label).text(),
                         s.text(_fmt_x)))
        show.table(rows, ["", "CPU events per step", "CPU per call, profiled (steady steps)",
                          "unprofiled (timed in turn)", "profiled / unprofiled"])
        show.display_figure(plots.observer([(label, r.cpu_per_call_us, timed.spread(label).median)
                                            for label, r in (("eager", eager), ("compiled", compiled))],
                                           title="Two transformer blocks: CPU time per call, profiled against "
                                                 "unprofiled"))
        n = min(eager.cpu_per_call.n, compiled.cpu_per_call.n)
        few = (f" The profiled side rests on {n} steady step{'s' if n != 1 else ''} per run, too few to tell a few "
               "percent apart: a recording with more active steps (a longer schedule) would settle it."
               if n < measure.MIN_SAMPLES else "")
        events = f"The eager run records about {_events_per_step(eager) / _events_per_step(compiled):.1f} times " \
                 "the CPU events per step"
        events += ("; its calls were stretched more, as that predicts." if g.conclusive and g.actual == OBSERVER_CHOICES[0]
                   else ", yet the two stretches are within the 15% the choices call 'about equally'."
                   if g.conclusive and g.actual == OBSERVER_CHOICES[2] else
                   ", yet the compiled calls were stretched more: the profiler's cost is not one price per event."
                   if g.conclusive else "; whether that shows in the stretches, this measurement cannot say.")
        other = _other_timing(eager, compiled, s_e.mid, s_c.mid)
        return widgets.grade(
            g, f"The profiler stretched an eager call <b>{s_e.mid:.2f}x</b> and a compiled one <b>{s_c.mid:.2f}x</b> "
            f"(the profiled time over the unprofiled median; over the unprofiled IQR's ends, {_over_iqr(eager, timed, 'eager')} "
            f"and {_over_iqr(compiled, timed, 'compiled')}). {events} When it "
            "stretches one side more, a comparison made inside the trace is tilted, which is why the earlier question "
            f"on compiling was graded on timings made without the profiler.{other}{few}", live=False)

    widgets.ask("11.why-observer", "Which run will the profiler slow down more, per call?", choices=OBSERVER_CHOICES,
                default=OBSERVER_CHOICES[2], reveal=reveal,
                decides=lambda: [_said(f"eager call {s_e.mid:.2f}x"), _said(f"compiled one {s_c.mid:.2f}x")])


# --- 11.perfetto, the exercise, the external trace ---------------------------------------------------------

def triton_per_step(run) -> int:
    return facts.work_per_call(run.trace).get(kk.TRITON, 0)


def perfetto_triton(compiled) -> None:
    """11.perfetto: how many generated (Triton) kernels one step of the compiled blocks launches."""
    n = triton_per_step(compiled)

    def reveal(found):
        steps = max(len(facts.steps(compiled.trace)), 1)
        names = sorted((k.name, round(k.count / steps)) for k in facts.kernels(compiled.trace) if k.kind == kk.TRITON)
        listed = ", ".join(show.code(x) + (f" (x{c} per step)" if c > 1 else "") for x, c in names)
        return widgets.verdict(found == n, f"The last recorded step of {compiled.tag} launches <b>{n}</b> Triton "
                               f"kernels, Inductor's own: {listed}. Their names list the ops each fused.", actual=n)

    widgets.ask("11.perfetto", "In the compiled blocks trace, count the Triton kernels the last recorded step launched "
                "(Perfetto: select them on the GPU lane; their names start with triton_).",
                unit="kernels", default=0, reveal=reveal, kind="task",
                decides=lambda: [spoilers.value(n, "Triton kernels")])


def exercise_batch32() -> None:
    """The "larger batch" exercise: eager and compiled blocks at batch 32."""
    from ..runs.profiling import profile
    from ..runs.workload import block

    def solution():
        e, c = profile(block(batch=32), warm=True), profile(block(batch=32), warm=True, compile=True)
        show.table([(r.tag, us(r.cpu_per_call_us), r.timing.host.text() if r.timing else "-",
                     gpu_calls.per_call(r).text(), r.summary.verdict) for r in (e, c)],
                   ["run", "CPU per call, profiled", "unprofiled (blocks of calls)", "GPU per call", "verdict"])
        if e.timing and c.timing:
            cpu = ratio_range(c.timing.host, e.timing.host)
            gpu = gpu_calls.pairs(gpu_calls.per_call(c), gpu_calls.per_call(e), lambda a, b: a / b, "x")
            show.md(f"At batch 32, the compiled call's time over the eager one's (above 1x: compiled takes longer): "
                    f"{cpu.text(_fmt_x)} on the CPU (unprofiled; the two were timed apart, each in its own process, "
                    "so every pairing of their blocks; timings made apart take in whatever the machine did between "
                    "them, so a difference of a few tens of percent may be that drift, not compiling), "
                    f"{gpu.text(_fmt_x)} on the GPU; the verdicts: eager {e.summary.verdict}, compiled "
                    f"{c.summary.verdict}. Compare each run's GPU per call with its CPU per call in the table: where "
                    "the GPU's is the larger, the GPU sets the pace, and a saving on the CPU's side shows less.")

    widgets.exercise("a larger batch",
                     "With batch 32 instead of 8, will compile pay off more, less, or the same, and on which side (CPU "
                     "or GPU)? Write it down, then ask for the solution.", solution)


VERDICT_CHOICES = ["CPU-bound", "GPU-bound"]


def external(other) -> None:
    """11.external: asked only where the external trace exists (a question must be answerable)."""
    if other is None:
        return
    b = budget(other)
    v = VERDICT_CHOICES[0] if b.cpu_paced else VERDICT_CHOICES[1]

    def reveal(answer):
        print(f"{other.device_name}: {len(other):,} events")
        found = diagnose(other)
        print(findings_text(found))
        g = found[0].gain if found else None
        first = ("" if not found else
                 f" diagnose's first finding is <b>{found[0].title}</b>: a one-time cost, whose removal shortens the "
                 "recording rather than the step." if g is not None and g.of != "the step" else
                 f" diagnose's first finding, the one whose fix should gain the most, is <b>{found[0].title}</b>.")
        lead = (b.busy[0][0] - b.lo) if b.busy else 0.0
        side = ("the CPU's own work outlasts the GPU's" if b.paced_cpu_us > b.busy_us else
                "the GPU's work outlasts the CPU's own")
        # one-time set-up calls (long-call) are CPU work too: say how much of it they are, and what is left without
        calls = set_up_calls(other, b)
        set_up = (total(intersection(b.cpu_work, intersection(merged((other.ts[i], other.end_of(i)) for i in calls),
                                                              [(b.busy[0][0], b.hi)])))
                  if calls and b.busy else 0.0)
        if set_up > 0:
            rest = b.paced_cpu_us - set_up
            side += (f". Of that CPU work, {us(set_up)} is the one-time set-up calls that diagnose names (long-call); "
                     f"without them it is {us(rest)}, "
                     + ("still longer than the GPU's (in a recording held by set-up, part of that may be set-up "
                        "too: weights initialised, memory reserved; a recording of steady steps would tell)"
                        if rest > b.busy_us else
                        "shorter than the GPU's: the verdict rests on those one-time calls"))
        return widgets.verdict(
            answer == v, f"The GPU ran work {us(b.busy_us)} of the {us(b.window_us)} window. Its first work came "
            f"{us(lead)} into the window; from then on the CPU's own work (its ops and calls, not counting its waits "
            f"for the GPU) took {us(b.paced_cpu_us)}: {side}, so <b>{v}</b>" + (" as recorded" if set_up > 0 else "")
            + f".{first}"
            + (" diagnose's own CPU-bound line counts less: only the GPU's idle time that no other finding's cause "
               "explains (each stretch of time is counted in one finding only)."
               if b.cpu_paced and any(f.rule == RuleId.CPU_BOUND for f in found[1:]) else "")
            + " Read the findings above for the evidence.", actual=v)

    widgets.ask("11.external", "Is that AlexNet benchmark trace CPU-bound or GPU-bound?",
                choices=VERDICT_CHOICES, default="GPU-bound", reveal=reveal)
