"""Notebook 03's questions: the schedule, the first recorded step's excess, the first step of all, twenty steps.

Step durations are read once from one recording, so each comparison of
steps is graded with a declared tolerance (:mod:`helpers.facts.one_trace`): a
ratio near an edge is *inconclusive here*, never a clean hit or miss.
"""

from __future__ import annotations

import bisect
import html
import statistics

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import one_trace
from ..reader.categories import CPU_GROUPS
from ..facts.measure import Graded, Status
from ..runs.runner import RUNS
from ..facts.text import short, us

# One step's duration against another's, read once: taken as uncertain by 25% either way. (A single steady step
# can stray further: the twenty-step recording shows how far.)
STEP_TOL = 1.25
STANDS_OUT = 1.3  # a step "stands out" from 1.3x the median step
STANDS_LABELS = ["under 1.3x: about the same", "1.3x or more: it stands out"]

STEP_CHOICES = ["ProfilerStep#2, the first recorded", "ProfilerStep#3", "ProfilerStep#4", "all about the same"]

WHY_CHOICES = ["#10 still clearly the longest (1.3x the others or more): the profiler's first recorded step costs extra",
               "about even: the program just needed more calls before the recording",
               "another step is the longest: step times are noise"]

FIRST_CHOICES = ["about the same", "2x to 10x", "10x to 100x", "more than 100x"]
FIRST_EDGES = [2, 10, 100]

SETTLE = 1.5  # settled: every later step within 1.5x the median step

BUFFER_CHOICES = ["inside step #1, in the window between its two kernels", "elsewhere in the trace, not in step #1",
                  "the trace records no buffer request"]

# The article's reading of a blank window in step #1 (Part 1, the zoom after figure 9, and figure 11 with
# active=20), in its own words: kept here beside the figures of helpers.lesson.article.
STEP1_WINDOW = article.Figure(
    "step1_window", "a blank window between the matmul and add kernels of ProfilerStep#1, and reads it as another "
    "Activity Buffer Request (the buffer overflowed while the kernels ran)", "",
    "64 × 64, bf16, eager, wait=0, warmup=0, active=3 and active=20", "Part 1, the zoom after figure 9, and figure 11")


def _x(v: float) -> str:
    return f"{v:.2f}x"


# --- which step stands out -------------------------------------------------------------------------------------


def stands_out(steps) -> tuple[str, str | None, float, str]:
    """Whether one step stands out, with the tolerance: ("even" | "stands" | "unclear", its name, ratio, why).

    The longest step against the median step: under 1.3x "about the same", from 1.3x it stands out; and it must
    beat the next longest by more than the tolerance to be named.
    """
    d = sorted((s.dur_us for s in steps), reverse=True)
    longest = max(steps, key=lambda s: s.dur_us)
    med = statistics.median(d)
    r = longest.dur_us / med
    band = one_trace.grade_choice(None, r, STEP_TOL, [STANDS_OUT], STANDS_LABELS, fmt=_x,
                                  what="the longest step over the median step")
    if not band.conclusive:
        return "unclear", longest.name, r, band.why
    if band.actual == STANDS_LABELS[0]:
        return "even", None, r, band.why
    second = d[1] if len(d) > 1 else 0.0
    if second and longest.dur_us / second < STEP_TOL:
        return "unclear", longest.name, r, (f"{longest.name} is the longest, but only {longest.dur_us / second:.2f}x "
                                            f"the next one, inside the tolerance of {STEP_TOL:g}x")
    return "stands", longest.name, r, band.why


def _step_choice(name: str | None) -> str:
    return {"ProfilerStep#2": STEP_CHOICES[0], "ProfilerStep#3": STEP_CHOICES[1],
            "ProfilerStep#4": STEP_CHOICES[2]}.get(name, STEP_CHOICES[2])


def long_step_grade(steps, answer=None) -> Graded:
    """03.long-step's grade on a run's recorded steps."""
    state, name, _r, why = stands_out(steps)
    if state == "unclear":
        return Graded(Status.INCONCLUSIVE, None, why)
    actual = STEP_CHOICES[3] if state == "even" else _step_choice(name)
    return Graded(Status.HELD if answer == actual else Status.MISSED, actual, why)


def long_step(cold, warm) -> None:
    """03.long-step: which recorded step of the cold run is the longest."""
    st, ws = facts.steps(cold.trace), facts.steps(warm.trace)

    def reveal(answer):
        show.table([(c.name, us(c.dur_us), us(w.dur_us)) for c, w in zip(st, ws)], ["step", "cold", "warm"])
        g = long_step_grade(st, answer)
        state, name, r, _ = stands_out(st)
        cold_text = (f"In the cold run <b>{name}</b> is the longest, {r:.2f}x the median step "
                     f"({us(statistics.median(s.dur_us for s in st))})." if state == "stands" else
                     f"In the cold run the steps are within {r:.2f}x of the median step: about the same."
                     if state == "even" else
                     f"In the cold run {name} is the longest, {r:.2f}x the median step: too close to call from one "
                     "recording.")
        wstate, wname, wr, _ = stands_out(ws)
        if wstate == "stands" and wname == ws[0].name:
            warm_text = (f"In the warm column the first recorded step is <b>still</b> the longest ({wr:.2f}x the "
                         "median). So warm-up did not remove all of it, which is a new question: one hypothesis is "
                         "that the profiler's own first active step costs extra (recording starts there); another is "
                         "that something in the program is still cold. The experiment below tests them.")
        elif wstate == "even":
            warm_text = "In the warm column the steps are about even: warm-up removed the excess."
        elif wstate == "stands":
            warm_text = f"In the warm column another step, {wname}, is the longest: the first one's excess is gone."
        else:
            warm_text = (f"In the warm column {wname} is the longest at {wr:.2f}x the median, too close to call from "
                         "one recording.")
        return widgets.grade(
            g, f"{cold_text} {warm_text} {article.fig('warm_steps_even').label(capital=True)} reports that with "
            f"warm-up its steps took about the same time. (Step durations read once: a ratio of steps is taken as "
            f"uncertain by a factor of {STEP_TOL:g} either way.)", live=False)

    widgets.ask("03.long-step", "In the cold run, which recorded step takes longest?",
                choices=STEP_CHOICES, default="all about the same", reveal=reveal,
                decides=lambda: [spoilers.us(s.dur_us) for s in st])


def first_step_timeline(cold) -> None:
    """After 03.long-step: the first recorded step of the cold run as a timeline."""
    widgets.after("03.long-step", lambda: show.display_figure(
        plots.timeline(cold.trace, plots.step_window(cold.trace, 0, 1), title=f"{cold.tag}: first recorded step")))


# --- 03.vs-gap: the gap before the first op, and where the step's excess went ----------------------------------------


def self_by_step(trace) -> tuple[list, dict[str, list[float]]]:
    """Self time of every event on the main CPU thread, summed by name, for each recorded step (µs).

    Self times of nested events add up to the step's duration, so the rows split it without counting anything
    twice. The steps' own time (outside every op) is the row ``ProfilerStep (its own time)``.
    """
    st = facts.steps(trace)
    starts = [s.start_us for s in st]
    main = facts.main_thread(trace)
    rows: dict[str, list[float]] = {}
    for i in trace.indices(CPU_GROUPS):
        if trace.is_gpu(i) or trace.lane[i] != main:
            continue
        k = bisect.bisect_right(starts, trace.ts[i]) - 1
        if k < 0 or trace.ts[i] > st[k].start_us + st[k].dur_us:
            continue
        name = trace.name_of(i)
        name = "ProfilerStep (its own time)" if name.startswith("ProfilerStep#") else name
        own = trace.dur[i] - sum(trace.dur[c] for c in trace.children(i))
        rows.setdefault(name, [0.0] * len(st))[k] += own
    return st, rows


def first_step_excess(trace) -> tuple[list, list[tuple[str, float, float, list[float]]]]:
    """Per event: Self time in the first recorded step, the median over the others, and every step's value."""
    st, rows = self_by_step(trace)
    out = []
    for name, v in rows.items():
        rest = statistics.median(v[1:]) if len(v) > 1 else 0.0
        out.append((name, v[0], rest, v))
    out.sort(key=lambda r: r[2] - r[1])
    return st, out


def _excess_figure(tag, rows, first_name):
    return plots.paired_bars({short(n, 22): (a, b) for n, a, b, _ in rows}, (first_name, "median of the others"),
                             title=f"{tag}: Self time of each event, first recorded step against the others",
                             unit="us (Self)")


def excess_text(trace) -> str:
    """What the per-event table says about the first recorded step's excess (computed, with a branch per shape)."""
    st, rows = first_step_excess(trace)
    if len(st) < 2:
        return "This recording has a single step: there is nothing to compare it with."
    excess = st[0].dur_us - statistics.median(s.dur_us for s in st[1:])
    parts = [(n, a - b) for n, a, b, _ in rows]
    grew = [n for n, d in parts if d > 0]
    top, top_d = max(parts, key=lambda p: p[1])
    lead = (f"{st[0].name} lasted {us(st[0].dur_us)}, {us(excess)} more than the median of the other recorded steps. "
            f"Split by event (Self time, so nothing is counted twice), {len(grew)} of the {len(parts)} events took "
            "longer in it. ")
    if excess <= 0:
        return lead + "The first recorded step is not longer here: there is no excess to place."
    if top_d > 0.75 * excess:
        return lead + (f"Most of the excess sits in one of them, {html.escape(top)} ({us(top_d)} of {us(excess)}): "
                       "look there first.")
    return lead + (f"The largest part went to {html.escape(top)} ({us(top_d)} of {us(excess)}, "
                   f"{top_d / excess:.0%}); the rest is spread over the others. A one-time set-up would sit in one "
                   "place; an excess spread over every op, launch calls included, looks more like a step run slower "
                   "throughout. What slows it is not in the trace; one hypothesis is the profiler starting to record "
                   "in that step, which the experiment below (03.why-first) tests.")


def vs_gap(cold) -> None:
    """03.vs-gap: the gap before the first op in the first recorded step, this GPU against the article's."""
    fig = article.fig("first_step_gap")
    gaps = facts.annotation_gaps(cold.trace, cold.workload.label)
    what = "The gap before the first op, first recorded step"
    choices = widgets.VERSUS_CHOICES

    def reveal(answer):
        show.table([(g.step, us(g.gap_us), g.first_op) for g in gaps],
                   ["step (cold)", "matmul_add to its first op", "first op"])
        ours = gaps[0].gap_us
        show.versus([(what, fig.text(), f"{ours:.1f} µs")],
                    note=f"{fig.label(capital=True)}; this GPU: {cold.tag}, {gaps[0].step}")
        ratio = ours / fig.value_us
        g = one_trace.grade_choice(answer, ratio, STEP_TOL, [0.5, 2.0], choices, fmt=lambda v: f"{v:.2g}x",
                                   what="this GPU's gap over the article's")
        st, rows = first_step_excess(cold.trace)
        show.table([(n, *(us(x) for x in v), us(a - b)) for n, a, b, v in rows],
                   ["event (Self time)", *[s.name for s in st], "first minus the others' median"])
        show.display_figure(_excess_figure(cold.tag, rows, st[0].name))
        reading = ("The gap the article pointed at is short here, yet the first recorded step is still the longest. "
                   if ratio < 0.5 else "")
        return widgets.grade(
            g, f"This GPU: <b>{ours:.1f} µs</b>, {ratio:.2g}x the article's {fig.text()}. {reading}"
            + excess_text(cold.trace), live=False)

    widgets.ask("03.vs-gap", f"{what}: {fig.quote()}. On this GPU, will it be...", choices=choices,
                default=choices[1], reveal=reveal, decides=lambda: [spoilers.us(gaps[0].gap_us)] if gaps else [])


# --- 03.why-first ---------------------------------------------------------------------------------------------------


def _first_over_rest(steps) -> tuple[float, float]:
    """The first recorded step over the median of the others, and the longest other step over the first."""
    rest = [s.dur_us for s in steps[1:]]
    return steps[0].dur_us / statistics.median(rest), max(rest) / steps[0].dur_us


def why_first_grade(steps, answer=None) -> Graded:
    """03.why-first's grade: the first step clearly longer, about even, or beaten, each outside the tolerance."""
    excess, beaten = _first_over_rest(steps)
    if beaten >= STEP_TOL:
        return Graded(Status.HELD if answer == WHY_CHOICES[2] else Status.MISSED, WHY_CHOICES[2],
                      f"another step is {beaten:.2f}x the first, beyond the tolerance of {STEP_TOL:g}x")
    band = one_trace.grade_choice(None, excess, STEP_TOL, [STANDS_OUT], WHY_CHOICES[1::-1], fmt=_x,
                                  what="the first recorded step over the median of the others")
    if not band.conclusive:
        return Graded(Status.INCONCLUSIVE, None, band.why)
    if beaten > 1:  # another step is longer, inside the tolerance: "about even" holds, "another is longest" is noise
        return Graded(Status.HELD if answer == WHY_CHOICES[1] else Status.MISSED, WHY_CHOICES[1], band.why)
    return Graded(Status.HELD if answer == band.actual else Status.MISSED, band.actual, band.why)


def why_first(longer_wait, warm) -> None:
    """03.why-first: with ten steps before the recording, does the first recorded step still stand out?"""
    st, ws = facts.steps(longer_wait.trace), facts.steps(warm.trace)

    def reveal(answer):
        show.table([(s.name, us(s.dur_us)) for s in st], [f"step ({longer_wait.tag})", "duration"])
        excess, _ = _first_over_rest(st)
        before, _ = _first_over_rest(ws)
        g = why_first_grade(st, answer)
        if not g.conclusive:
            survives = ("that is too close to the 1.3x line to tell the two start-up explanations apart from one "
                        "recording" + (f"; it is down from {before:.2f}x, so part of the excess went with more calls "
                                       "before the recording" if excess < before / STEP_TOL else ""))
        elif g.actual == WHY_CHOICES[0]:
            survives = ("with ten steps before the recording the first recorded step still stands out, which favours "
                        "the profiler's own first recorded step"
                        + (", with part of the excess gone, which favours some warming up too"
                           if excess < before / STEP_TOL else ""))
        elif g.actual == WHY_CHOICES[1]:
            survives = ("more calls before the recording evened the steps out, which favours a program that was "
                        "still warming up")
        else:
            survives = ("the longest step is not the first, so neither start-up explanation fits this run; record "
                        "more steps to see whether any pattern holds")
        return widgets.grade(
            g, f"The first recorded step took <b>{excess:.2f}x</b> the median of the others, against {before:.2f}x "
            f"with one wait and one warmup step ({warm.tag}): {survives}. One experiment is one piece of evidence: in "
            "live mode, run these cells again and see how much the ratio moves from run to run before you trust it. "
            f"(Step durations read once: taken as uncertain by a factor of {STEP_TOL:g} either way.)", live=False)

    widgets.ask("03.why-first", "With ten steps before the recording starts, what will the recorded steps look like?",
                choices=WHY_CHOICES, default=WHY_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.us(s.dur_us) for s in st])


# --- 03.first-step --------------------------------------------------------------------------------------------------


def first_step(first) -> None:
    """03.first-step: with wait=0, warmup=0, step #0 against the last recorded step."""
    t = first.trace
    st = facts.steps(t)

    def reveal(answer):
        ratio = st[0].dur_us / st[-1].dur_us
        show.table([(s.name, us(s.dur_us)) for s in st], ["step", "duration"])
        calls = facts.calls_in(t, st[0].start_us, st[0].start_us + st[0].dur_us)
        show.table(list(calls.items())[:10], [f"runtime/driver call in {st[0].name}", "count"])
        bufs = facts.artifacts(t).buffer_requests
        where = sorted({_step_of(t, b.start_us) or "outside the steps" for b in bufs})
        buffer_text = (
            f"The trace also holds something we did not launch: {html.escape(bufs[0].name)}, on the lane "
            f"'{html.escape(bufs[0].lane)}', in {', '.join(where)} (03.perfetto below asks how long it lasts). "
            "That is an overhead record of CUPTI, the library the profiler collects GPU activity through: time it "
            "spent on an <i>activity buffer request</i>, getting memory for its activity records "
            "(<a href='https://docs.nvidia.com/cupti/api/group__CUPTI__ACTIVITY__API.html'>CUPTI's activity API</a>, "
            "<code>CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST</code>). It is the profiler's cost, not your "
            f"code's; {article.fig('buffer_request').label()} shows one too."
            if bufs else "This trace holds no buffer request from the profiler.")
        g = one_trace.grade_choice(answer, ratio, STEP_TOL, FIRST_EDGES, FIRST_CHOICES, fmt=lambda v: f"{v:,.0f}x",
                                   what=f"{st[0].name} over {st[-1].name}")
        return widgets.grade(
            g, f"{st[0].name} took <b>{us(st[0].dur_us)}</b>, {ratio:,.0f}x the last step ({us(st[-1].dur_us)}). "
            "The list of calls inside it is the program's one-time set-up, which a <i>wait</i> step or a warm-up "
            f"loop keeps out of the recording. {_invalid_text(t)}{buffer_text}", live=False)

    widgets.ask("03.first-step", "With wait=0 and warmup=0, how much longer than the last recorded step will step #0 take?",
                choices=FIRST_CHOICES, default="2x to 10x", reveal=reveal,
                decides=lambda: [spoilers.us(st[0].dur_us), spoilers.us(st[-1].dur_us)])


def _invalid_text(t) -> str:
    """What an ``INVALID`` call in the list is, from what its events hold (or nothing when there is none)."""
    found = [i for i in range(len(t)) if t.name_of(i) == "INVALID" and not t.is_gpu(i)]
    if not found:
        return ""
    cats = sorted({t.cat_table[t.cat_id[i]] for i in found})
    return (f"<code>INVALID</code> ({len(found)} call{'s' if len(found) != 1 else ''} in this trace, category "
            f"{', '.join(f'<code>{html.escape(c)}</code>' for c in cats)}) is the name the trace gives a call it "
            "could not name: the event keeps its duration and its correlation id, not what the call was. One "
            "hypothesis: the CUDA runtime is newer than the profiler's list of call names. ")


def _step_of(trace, ts: float) -> str | None:
    for s in facts.steps(trace):
        if s.contains(ts):
            return s.name
    return None


# --- 03.settle --------------------------------------------------------------------------------------------------------


def settle_range(durs: list[float]) -> tuple[int, int]:
    """The settle step by a loose band and by a strict one (1.5x the median, widened and narrowed by the tolerance).

    One noisy step can move the settle point a long way at a single threshold; every answer between the two
    counts.
    """
    return facts.settle_index(durs, SETTLE * STEP_TOL), facts.settle_index(durs, SETTLE / STEP_TOL)


def late_bumps(durs: list[float], calm: int = 3) -> list[int]:
    """Steps outside the narrow band that come after at least ``calm`` steps inside it: noise, not start-up."""
    narrow = statistics.median(durs) * SETTLE / STEP_TOL
    out, run = [], 0
    for i, d in enumerate(durs):
        if d > narrow:
            if run >= calm or (out and out[-1] == i - 1):
                out.append(i)
            run = 0
        else:
            run += 1
    return out


def _settle_figure(tag: str, durs: list[float]):
    plt = plots._plt()
    med = statistics.median(durs)
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.plot(range(len(durs)), durs, "o-", color="#3182bd", ms=4, lw=0.8, label="step duration")
    ax.axhline(med, color="#31a354", lw=1.2, ls="--", label=f"median {med:.1f} us")
    for f, style in ((SETTLE / STEP_TOL, ":"), (SETTLE, "-"), (SETTLE * STEP_TOL, ":")):
        ax.axhline(med * f, color="#e6550d", lw=0.9, ls=style, label=f"{f:.2f}x the median")
    ax.set_yscale("log")
    ax.set_xticks(range(len(durs)))
    ax.set_xlabel("step number")
    ax.set_ylabel("step duration (us), log scale")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"{tag}: step durations (log scale: the first step would flatten the rest)", fontsize=10)
    fig.tight_layout()
    return fig


def settle(twenty) -> None:
    """03.settle: from which step the twenty recorded steps settle (a range of answers, not one threshold)."""
    durs = [s.dur_us for s in facts.steps(twenty.trace)]

    def reveal(answer):
        show.display_figure(_settle_figure(twenty.tag, durs))
        lo, hi = settle_range(durs)
        k = facts.settle_index(durs, SETTLE)
        med = statistics.median(durs)
        held = answer is not None and lo <= answer <= hi
        if lo == hi:
            head = (f"From step #{k} on, no step takes longer than {SETTLE:g}x the median step ({us(med)}), whether the "
                    f"band is {SETTLE / STEP_TOL:.2f}x or {SETTLE * STEP_TOL:.2f}x: #{lo} counts. ")
        else:
            outside = [f"#{i} ({durs[i] / med:.2f}x)" for i in range(lo, hi) if durs[i] > med * SETTLE / STEP_TOL]
            head = (f"Where the steps settle depends on how strict the band is (it bounds a step from above: a step "
                    f"quicker than the median is settled): no step longer than {SETTLE * STEP_TOL:.2f}x the "
                    f"median step ({us(med)}) from step #{lo}, than {SETTLE / STEP_TOL:.2f}x only from step #{hi} "
                    f"(later steps outside the narrower band: {', '.join(outside)}). Every answer from #{lo} to #{hi} "
                    "counts. ")
        shape = ("In this recording the slow steps are the first ones and the rest settle, the shape start-up leaves"
                 if lo <= 3 else "The steps do not settle early in this recording")
        late = late_bumps(durs)
        late_noise = (f"; {', '.join(f'#{i}' for i in late)} rise{'s' if len(late) == 1 else ''} again after "
                      "several steps inside the band, late in the run: more like noise (another process, a clock "
                      "change) than start-up" if late else "")
        return widgets.verdict(
            held, head + f"Step #0 took {us(durs[0])}. {shape}{late_noise}. One recording cannot say whether the "
            "pattern repeats, a second one can. <i>wait</i> and <i>warmup</i>, or a warm-up loop before the "
            "profiler, keep it out of what you measure.", actual=k)

    widgets.ask("03.settle", "With 20 recorded steps, from which step number on will the step durations settle?",
                unit="(step number)", default=1, reveal=reveal,
                decides=lambda: [spoilers.us(durs[0]), spoilers.us(statistics.median(durs))])


# --- 03.buffer-gap: the article's explanation of step #1, against the twenty steps -------------------------------------


def step_kernels(trace) -> list[dict]:
    """Per recorded step: its GEMM and add launches, the GPU's idle window between them, and the launch distance."""
    from ..facts import kernel_kinds as kk

    out = []
    launches = facts.launches(trace)
    for s in facts.steps(trace):
        inside = [x for x in launches if s.contains(x.call_start_us)]
        gemm = next((x for x in inside if x.kind == kk.GEMM), None)
        add = next((x for x in inside if x.kind == kk.ELEMENTWISE), None)
        if gemm is None or add is None:
            continue
        j = next(j for j in facts.gpu_work(trace) if trace.ts[j] == gemm.work_start_us)
        out.append({"step": s.name, "start_us": s.start_us, "end_us": s.end_us,
                    "gpu_gap_us": add.work_start_us - trace.end_of(j),
                    "gap_from_us": trace.end_of(j), "gap_to_us": add.work_start_us,
                    "launch_distance_us": add.call_start_us - gemm.call_start_us,
                    "add_latency_us": add.latency_us})
    return out


def buffer_gap(twenty) -> None:
    """03.buffer-gap: does a buffer request fall in step #1's window between its kernels, as the article read it?"""
    t = twenty.trace
    rows = step_kernels(t)
    bufs = facts.artifacts(t).buffer_requests
    one = next((r for r in rows if r["step"] == "ProfilerStep#1"), None)
    two = next((r for r in rows if r["step"] == "ProfilerStep#2"), None)

    def inside(b, lo, hi):
        return b.start_us < hi and b.start_us + b.dur_us > lo

    def reveal(answer):
        t0 = facts.steps(t)[0].start_us
        show.table([(html.escape(b.name), _step_of(t, b.start_us) or "outside the steps",
                     us(b.start_us - t0), us(b.dur_us)) for b in bufs],
                   ["buffer request", "in step", "starts (from the first step's start)", "lasts"])
        show.table([(r["step"], us(r["gpu_gap_us"]), us(r["launch_distance_us"]), us(r["add_latency_us"]))
                    for r in rows[:5]],
                   ["step", "GPU idle between the GEMM and the add", "the add's launch after the GEMM's",
                    "the add's launch to its start"])
        if one is None:
            return widgets.verdict(None, "Step #1 of this trace has no GEMM and add pair to compare.")
        show.display_figure(plots.timeline(t, plots.step_window(t, 1, 1), title=f"{twenty.tag}: ProfilerStep#1"))
        in_window = [b for b in bufs if inside(b, one["gap_from_us"], one["gap_to_us"])]
        in_step = [b for b in bufs if inside(b, one["start_us"], one["end_us"])]
        actual = BUFFER_CHOICES[0] if in_window else BUFFER_CHOICES[1] if bufs else BUFFER_CHOICES[2]
        if in_window:
            reading = ("A buffer request overlaps the window between step #1's two kernels: this trace is consistent "
                       "with the article's reading.")
        else:
            where = ", ".join(sorted({_step_of(t, b.start_us) or "outside the steps" for b in bufs}))
            reading = ((f"The trace's buffer request{'s' if len(bufs) > 1 else ''} fall{'' if len(bufs) > 1 else 's'} "
                        f"in {where}, none inside step #1's window"
                        + (" (one overlaps the step elsewhere)" if in_step else "") + ". ") if bufs else
                       "The trace records no buffer request at all. ")
            late = two is not None and one["launch_distance_us"] > STEP_TOL * two["launch_distance_us"]
            reading += (
                (f"The window is there ({us(one['gpu_gap_us'])} against {us(two['gpu_gap_us'])} in step #2), and it "
                 f"opens on the CPU side: the add's launch call came {us(one['launch_distance_us'])} after the GEMM's, "
                 f"against {us(two['launch_distance_us'])} in step #2, and its kernel started "
                 f"{us(one['add_latency_us'])} after its launch. In this trace the GPU waited for the CPU, which "
                 f"spent {us(one['end_us'] - one['start_us'])} on step #1 against {us(two['end_us'] - two['start_us'])} "
                 "on step #2; a buffer request is not what opened the window here.") if late else
                (f"The window ({us(one['gpu_gap_us'])}) does not come from a late launch either (the add's launch "
                 f"came {us(one['launch_distance_us'])} after the GEMM's): neither explanation fits it in this "
                 "trace.") if two is not None else "")
            reading += (" This test sees only the buffer requests the trace records: one that CUPTI made without "
                        "an overhead record would not show here.")
        return widgets.verdict(answer == actual, f"{STEP1_WINDOW.label(capital=True)} shows {STEP1_WINDOW.value}. "
                               + reading, actual=actual)

    widgets.ask("03.buffer-gap", "The article explains a blank window between step #1's two kernels with a second "
                "buffer request. In the twenty-step trace, where does the profiler's buffer request fall?",
                choices=BUFFER_CHOICES, default=BUFFER_CHOICES[0], reveal=reveal,
                decides=lambda: ([spoilers.us(one["gpu_gap_us"]), spoilers.us(one["launch_distance_us"])]
                                 if one else []))


# --- 03.perfetto ------------------------------------------------------------------------------------------------------


def perfetto_buffer(first) -> None:
    """03.perfetto: the Activity Buffer Request's duration in the wait=0 trace, read in Perfetto."""
    bufs = facts.artifacts(first.trace).buffer_requests

    def reveal(found):
        if not bufs:
            return widgets.verdict(None, "This trace holds no Activity Buffer Request to find.")
        return widgets.verdict(widgets.within(found, bufs[0].dur_us, factor=1.1),
                               f"The first <code>{html.escape(bufs[0].name)}</code> lasts "
                               f"<b>{us(bufs[0].dur_us)}</b>, on the lane '{html.escape(bufs[0].lane)}'. Within "
                               "10% counts.", actual=bufs[0].dur_us)

    widgets.ask("03.perfetto", "In the wait=0 trace, find the Activity Buffer Request. How long is it?",
                unit="us", default=0, reveal=reveal, kind="task",
                decides=lambda: [spoilers.us(bufs[0].dur_us)] if bufs else [])


# --- the exercise -------------------------------------------------------------------------------------------------------


def exercise_cpu_first_step(first) -> None:
    """The "first step on the CPU" exercise: wait=0, warmup=0, CPU activity only, one thread."""
    import os
    import warnings

    from torch.profiler import ProfilerActivity, profile as torch_profile, record_function, schedule

    from ..runs.rounds import one_thread
    from ..runs.profiling import native_log_filter
    from ..reader.trace import read_trace
    from ..runs.workload import matmul_add

    def solution():
        fn, args = matmul_add(64).build("cpu", "fp32")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*won't be using warmup.*")  # warmup=0 is the point here
            sched = schedule(wait=0, warmup=0, active=3, repeat=1)
        with one_thread(), native_log_filter(), torch_profile(activities=[ProfilerActivity.CPU], schedule=sched) as p:
            for _ in range(3):
                with record_function("matmul_add"):
                    fn(*args)
                p.step()
        out = RUNS / "cpu"  # the series' traces/runs/, wherever the kernel was started
        out.mkdir(parents=True, exist_ok=True)  # a fresh clone has no traces/runs yet
        path = str(out / f"exercise_first_step_{os.getpid()}.json")  # one per kernel: runs side by side do not collide
        p.export_chrome_trace(path)
        st = facts.steps(read_trace(path))
        show.table([(s.name, us(s.dur_us)) for s in st], ["step (CPU, wait=0, warmup=0, one thread)", "duration"])
        gs = facts.steps(first.trace)
        cpu_r, gpu_r = st[0].dur_us / st[-1].dur_us, gs[0].dur_us / gs[-1].dur_us
        show.md(f"On this CPU, step #0 took {cpu_r:.1f}x the last step, against {gpu_r:,.0f}x in the GPU trace above "
                f"({first.tag}). "
                + ("A likely reading: most of the GPU run's one-time set-up was the GPU's libraries and the profiler's "
                   "GPU side, which a CPU-only run does not have; 03.first-step's list of calls is the evidence to "
                   "check it against." if gpu_r > 3 * cpu_r else
                   "Here the CPU's first step stands out about as much: a set-up shared by both, or a noisy CPU "
                   "step; record it again before reading more into it."))

    widgets.exercise("the first step on the CPU",
                     "Record the first step on this CPU (<code>wait=0, warmup=0</code>, CPU activity only, one "
                     "thread). Will step #0 stand out as much as it did on the GPU? Write down a ratio, then ask for "
                     "the solution.", solution)
