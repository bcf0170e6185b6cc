"""Notebook 07's questions (07_kernel_variance): how far apart identical GEMMs are, mean or median, and what a pause does.

Two sources: the warm 4096 run recorded for twenty steps (twenty GEMMs in
one trace), and the idle-GPU experiment of :mod:`helpers.runs.idle_gpu` (a GEMM
timed with CUDA events after pauses of 0 to 0.5 s, under three conditions,
five times each, with the SM clock read through NVML while it ran). Every
question that rests on times is graded on a spread:

* a statistic of the twenty GEMMs (their range, mean over median) is graded
  on its value with each GEMM left out in turn, so that no single kernel
  decides the grade;
* the idle-GPU figures on the five repeats of each condition and pause.
"""

from __future__ import annotations

import html
import statistics

from .. import Word
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import hardware, measure
from ..runs import idle_gpu
from ..facts.measure import Estimate, Graded, Spread
from ..facts.text import us

SPREAD_CHOICES = ["under 2%", "2% to 10%", "10% to 50%", "more than 50%"]
SPREAD_EDGES = [0.02, 0.1, 0.5]

MEAN_CHOICES = ["about 1x (under 1.1x): the mean and the median agree", "1.1x to 1.5x",
                "1.5x to 2.5x, like the article's", "more than 2.5x"]
MEAN_EDGES = [1.1, 1.5, 2.5]

TFLOPS_FACTOR = 1.5

IDLE_CHOICES = ["about the same (under 1.1x)", "1.1x to 1.5x", "1.5x to 3x", "more than 3x"]
IDLE_EDGES = [1.1, 1.5, 3]

WHY_CHOICES = ["the clocks: the SM clock reads lower during the slow GEMM",
               "a GPU that needs waking: a small kernel run first takes most of the excess away",
               "cold data: a GEMM on other buffers, with no pause, is as slow",
               "none of the three accounts for most of the excess"]

PAUSED, WAKE, OTHER = idle_gpu.CONDITIONS  # "after a pause", "a small kernel first", "other buffers, no pause"

#: each GPU's page on the vendor's site, where the datasheet figures of helpers.facts.hardware come from
DATASHEET_PAGES = {
    ("h200",): "https://www.nvidia.com/en-us/data-center/h200/",
    ("h100", "pcie"): "https://www.nvidia.com/en-us/data-center/h100/",
    ("h100",): "https://www.nvidia.com/en-us/data-center/h100/",
    ("a100", "sxm4", "80gb"): "https://www.nvidia.com/en-us/data-center/a100/",
    ("a100", "80gb"): "https://www.nvidia.com/en-us/data-center/a100/",
    ("a100",): "https://www.nvidia.com/en-us/data-center/a100/",
    ("l40s",): "https://www.nvidia.com/en-us/data-center/l40s/",
    ("l4",): "https://www.nvidia.com/en-us/data-center/l4/",
    ("v100",): "https://www.nvidia.com/en-us/data-center/v100/",
    ("t4",): "https://www.nvidia.com/en-us/data-center/tesla-t4/",
}
DATA_CENTER = "https://www.nvidia.com/en-us/data-center/"


def _live() -> bool:
    from ..runs.mode import environment

    return environment().live


def leave_one_out(values, stat) -> Spread:
    """``stat`` of the values with each one left out in turn: how much the figure leans on any single sample."""
    v = list(values)
    return Spread.of([stat(v[:i] + v[i + 1:]) for i in range(len(v))], "x")


def spread_of_range(gemms) -> Spread:
    """Slowest over fastest, minus 1, with each GEMM left out in turn."""
    return leave_one_out(gemms, lambda v: max(v) / min(v) - 1)


def mean_over_median(gemms) -> Spread:
    """Mean over median, with each GEMM left out in turn."""
    return leave_one_out(gemms, lambda v: statistics.fmean(v) / statistics.median(v))


def _pct(v: float) -> str:
    return f"{v:.1%}"


# --- the twenty GEMMs ------------------------------------------------------------------------------------------


def spread(run, gemms) -> None:
    """07.spread: how far apart the slowest and the fastest of twenty identical GEMMs are."""
    lo, hi, med = min(gemms), max(gemms), statistics.median(gemms)
    r = hi / lo - 1

    def reveal(answer):
        jack = spread_of_range(gemms)
        g = measure.grade_choice(answer, jack, SPREAD_EDGES, SPREAD_CHOICES, fmt=_pct)
        show.display_figure(plots.lines({run.tag: gemms}, title=f"{run.tag}: the 20 GEMM kernels' durations, in order",
                                        ylabel="GEMM duration (us)", xlabel="GEMM (trace order)"))
        slow = [i for i, d in enumerate(gemms) if d > 1.02 * med]
        rest = [d for i, d in enumerate(gemms) if i not in slow]
        if slow and slow == list(range(len(slow))) and len(rest) > 1:
            where = (f"The GEMMs more than 2% above the median are the first {len(slow)} of the recording; the other "
                     f"{len(rest)} span {_pct(max(rest) / min(rest) - 1)}. ")
        elif slow and len(rest) > 1:
            where = (f"{len(slow)} GEMM(s) run more than 2% above the median; without them the others span "
                     f"{_pct(max(rest) / min(rest) - 1)}. ")
        else:
            where = "No GEMM runs more than 2% above the median. "
        typical, mean = article.fig("gemm_typical"), article.fig("gemm_mean")
        return widgets.grade(
            g, f"Fastest {us(lo)}, slowest {us(hi)}: a spread of <b>{_pct(r)}</b>. {where}Compare the article: a "
            f"GEMM that typically took {typical.quote()}, while the mean of five was {mean.text()}. The "
            "article lists suspects for such outliers (Part 1, after figure 18): the GPU's clock at idle against "
            "boost, heat, power management, the driver's housekeeping. Which of them is at work on a given GPU is "
            "a hypothesis to test; an experiment below tests three explanations of one kind of outlier on this GPU. "
            "Graded on the spread with each GEMM left out in turn, so that no single kernel decides it.",
            live=False)

    widgets.ask("07.spread", "Across 20 identical 4096 x 4096 GEMMs, how far apart will the slowest and the fastest be?",
                choices=SPREAD_CHOICES, default=SPREAD_CHOICES[1], reveal=reveal,
                # the spread decides it, with the fastest kernel beside it; the slowest's duration is left out: on
                # the H200 it equals, to the digit, a CPU total in notebook 02's table (a coincidence, not a leak)
                decides=lambda: [spoilers.share(r), spoilers.us(lo)])


def vs_mean(run, gemms) -> None:
    """07.vs-mean: the article's mean GEMM was 1.87x its typical one; the mean over the median here."""
    fig = article.fig("gemm_mean_over_typical")
    mean, med = statistics.fmean(gemms), statistics.median(gemms)

    def reveal(answer):
        jack = mean_over_median(gemms)
        g = measure.grade_choice(answer, jack, MEAN_EDGES, MEAN_CHOICES, fmt=lambda v: f"{v:.3f}x")
        show.display_figure(plots.distribution(gemms, title=f"{run.tag}: GEMM kernel durations, mean and median"))
        show.versus([("mean GEMM over the typical (median) one", fig.text(), f"{mean / med:.3f}×")],
                    note=f"{fig.label(capital=True)}; this GPU: mean over median of {run.tag}")
        ratio = mean / med
        if ratio < MEAN_EDGES[0]:
            reading = ("Here the mean and the median tell the same story: no GEMM of these twenty is slow enough to "
                       "move the mean. On the article's A100 they told two different ones.")
        else:
            reading = ("Here too the mean sits well above the typical GEMM: a few slow kernels pull it up, and the "
                       "median is the figure that predicts the next GEMM.")
        return widgets.grade(
            g, f"Here the mean GEMM took {us(mean)} and the median {us(med)}: <b>{ratio:.3f}x</b>, against "
            f"{fig.quote()}. {reading} Graded with each GEMM left out in turn.", live=False)

    widgets.ask("07.vs-mean", f"On the article's A100 the mean GEMM was {fig.text()} the typical one ({fig.run}; "
                f"{fig.where}). Here, over these 20 GEMMs, the mean over the median will be...",
                choices=MEAN_CHOICES, default=MEAN_CHOICES[2], reveal=reveal,
                # the ratio itself (about 1.00x here) is not declared: the leak check reads "1x" inside kernel
                # names such as ..._1x2_...; the mean decides it, beside the median the reveal prints
                decides=lambda: [spoilers.us(mean)])


def _datasheet_link(gpu: str) -> str:
    d = hardware.datasheet(gpu)
    url = next((u for words, u in DATASHEET_PAGES.items() if d and tuple(d.words) == words), DATA_CENTER)
    return f"<a href='{url}'>the vendor's page</a>"


def tflops(run, gemms) -> None:
    """07.tflops: the throughput a typical GEMM reaches, graded on the twenty kernels' rates."""
    flops = hardware.gemm_flops(4096, 4096, 4096)
    rates = Spread.of([flops / d / 1e6 for d in gemms], "TFLOP/s")

    def reveal(answer):
        mean, med = statistics.fmean(gemms), statistics.median(gemms)
        tf_med, tf_mean = flops / med / 1e6, flops / mean / 1e6
        g = measure.grade_number(answer, rates, TFLOPS_FACTOR, fmt=lambda v: f"{v:.0f} TFLOP/s")
        peak = hardware.datasheet_peak_tflops(run.device)
        rows = [("median kernel", us(med), f"{tf_med:.0f}"), ("mean kernel", us(mean), f"{tf_mean:.0f}")]
        if peak:
            rows.append((f"the vendor's datasheet figure ({peak[0]}, dense, not measured here)", "", f"{peak[1]:.0f}"))
        show.table(rows, ["", "duration", "TFLOP/s"])
        vs_peak = (f" That is {tf_med / peak[1]:.0%} of the vendor's datasheet figure for dense {peak[0]} on this GPU "
                   f"({peak[1]:.0f} TFLOP/s, from {_datasheet_link(run.device)}: a ceiling stated by the vendor, not "
                   "measured by this notebook)." if peak else
                   " This GPU has no datasheet figure in the series' table (helpers/facts/hardware.py).")
        if abs(tf_mean / tf_med - 1) < 0.02:
            mean_text = (f"The mean gives nearly the same rate here ({tf_mean:.0f}): these twenty GEMMs hold no large "
                         "outlier. Where a few are slow (the article's mean against its typical GEMM), a rate from "
                         "the mean describes neither the typical kernel nor the slow ones: quote the median, and "
                         "look at the outliers as their own question.")
        else:
            mean_text = (f"The mean gives {tf_mean:.0f}: the slow kernels pull it away from the typical one. Quote "
                         "the median as the kernel's speed, and look at the outliers as their own question.")
        return widgets.grade(
            g, f"A typical GEMM here reaches <b>{tf_med:.0f} TFLOP/s</b> (2 × 4096³ operations over the median "
            f"kernel's {us(med)}).{vs_peak} {mean_text} Within {TFLOPS_FACTOR:g}x counts, graded on the rate of each "
            "of the twenty kernels.", live=False)

    widgets.ask("07.tflops", "What throughput does a typical (median) 4096 x 4096 GEMM reach on this GPU?",
                unit="TFLOP/s", default=300, reveal=reveal,
                decides=lambda: [spoilers.value(round(rates.median), "TFLOP/s")])


def perfetto_slowest(run, gemms) -> None:
    """07.perfetto: in which step the slowest GEMM was launched, found in Perfetto."""
    from .. import facts
    from ..facts import kernel_kinds as kk

    def reveal(found):
        launches = [x for x in facts.launches(run.trace) if x.kind == kk.GEMM]  # in time order, as gemms is
        slow = launches[max(range(len(gemms)), key=gemms.__getitem__)]
        step = next(s for s in facts.steps(run.trace) if s.contains(slow.call_start_us))
        # No duration here: the question after this one asks how far apart the slowest and the fastest are.
        return widgets.verdict(found == step.number, f"The slowest GEMM was launched in <b>{step.name}</b>. How much "
                               "slower than the others it is, the next question asks.", actual=step.number)

    widgets.ask("07.perfetto", "Find the slowest GEMM on the GPU lane. In which ProfilerStep was it launched? (type its "
                "number)", unit="step number", default=-1, reveal=reveal, kind="task",
                decides=lambda: [])  # a step number: a bare small integer, nothing the leak check can find


def exercise_8192(gemms) -> None:
    """The "larger GEMM" exercise: 8192 against 4096, median rates."""
    from .. import facts
    from ..facts import kernel_kinds as kk
    from ..runs.profiling import profile
    from ..runs.workload import matmul_add

    def solution():
        r = profile(matmul_add(8192), warm=True)
        n = r.workload.p["size"]
        big = facts.durations(r.trace, kind=kk.GEMM)
        tf8 = Spread.of([hardware.gemm_flops(n, n, n) / d / 1e6 for d in big], "TFLOP/s")
        tf4 = Spread.of([hardware.gemm_flops(4096, 4096, 4096) / d / 1e6 for d in gemms], "TFLOP/s")
        (a8, b8), (a4, b4) = tf8.quartiles, tf4.quartiles
        if a8 > b4 * 1.02:
            why = ("The rate rose. One explanation: eight times the work per kernel lets the GPU spend a larger "
                   "share of each kernel at full rate; a sweep of sizes would show where the rate levels off.")
        elif b8 < a4 / 1.02:
            why = ("The rate fell. Hypotheses to test: the clocks came down under a longer, hotter load (read the SM "
                   "clock during the run), or the library picked a kernel less suited to this shape.")
        else:
            why = ("About the same rate: the two spreads are within 2% of each other, so at 4096 the GEMM already "
                   "ran at about the rate it reaches at 8192.")
        show.md(f"At {n} × {n} a typical GEMM takes {us(statistics.median(big))}: {tf8.text(lambda v: f'{v:.0f}')} "
                f"TFLOP/s over its {tf8.n} kernels, against {tf4.text(lambda v: f'{v:.0f}')} at 4096. {why}")

    widgets.exercise("a larger GEMM",
                     "At 8192 × 8192 the GEMM does eight times the arithmetic. Will a typical one reach more TFLOP/s, "
                     "fewer, or about as many as at 4096? Write it down, then ask for the solution.", solution)


# --- the idle GPU ----------------------------------------------------------------------------------------------


def _rows(result, cond, gap) -> list[dict]:
    return [r for r in result["rows"] if r["condition"] == cond and r["gap_s"] == gap]


def longest_pause(result) -> float:
    return max(r["gap_s"] for r in result["rows"] if r["condition"] == PAUSED)


def pauses(result) -> list[float]:
    return sorted({r["gap_s"] for r in result["rows"] if r["condition"] == PAUSED})


def first_spread(result, cond, gap) -> Spread:
    return Spread.of([r["first_us"] for r in _rows(result, cond, gap)])


def steady_spread(result) -> Spread:
    return Spread.of([s["us"] for s in result["steady"]])


def first_over_next(result, gap=None) -> Spread:
    """The first GEMM over the one right after it, pair by pair (the two share the pause and the machine's state)."""
    gap = longest_pause(result) if gap is None else gap
    return Spread.of([r["first_us"] / r["second_us"] for r in _rows(result, PAUSED, gap) if r["second_us"] > 0], "x")


def _clocks(rows, key="sm_mhz") -> Spread:
    return Spread.of([r["clocks"][key] for r in rows if r.get("clocks")], "MHz")


def _picture(result, conditions, title: str) -> None:
    """The first GEMM's time against the pause, per condition (median, with the middle half), steady as a line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    gaps = pauses(result)
    xs = {g: i for i, g in enumerate(gaps)}
    styles = {PAUSED: ("o-", "#e6550d"), WAKE: ("s-", "#3182bd"), OTHER: ("D", "#31a354")}
    for k, cond in enumerate(conditions):
        shift = 0.08 * (k - (len(conditions) - 1) / 2)  # side by side, so that no marker hides another
        pts = [(xs[g] + shift, first_spread(result, cond, g)) for g in gaps if _rows(result, cond, g)]
        if not pts:
            continue
        marker, color = styles.get(cond, ("^-", "#636363"))
        x = [p[0] for p in pts]
        med = [p[1].median for p in pts]
        lo = [p[1].median - p[1].quartiles[0] for p in pts]
        hi = [p[1].quartiles[1] - p[1].median for p in pts]
        ax.errorbar(x, med, yerr=[lo, hi], fmt=marker, color=color, capsize=4, ms=6, lw=1.2,
                    label=f"first GEMM: {cond}")
        for p in pts:
            ax.scatter([p[0] + 0.03] * p[1].n, p[1].samples, s=8, color=color, alpha=0.5)
    st = steady_spread(result)
    if st.n:
        ax.axhline(st.median, color="#555", ls="--", lw=1.2, label="a GEMM right behind another (steady), median")
    ax.set_xticks(list(xs.values()))
    ax.set_xticklabels([f"{g:g} s" for g in gaps])
    ax.set_xlabel("pause before the GEMM (0: only a synchronize)")
    ax.set_ylabel("GEMM duration (us), CUDA events")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title + "\nmarkers: median of the repeats; bars: middle half; dots: each repeat", fontsize=9)
    fig.tight_layout()
    show.display_figure(fig)


def _again(first):
    """The experiment for a reveal: the notebook's the first time, a new run for each rerun (live only)."""
    state = {"calls": 0}

    def get():
        state["calls"] += 1
        if state["calls"] == 1 or not _live():
            return first
        return idle_gpu.measure()
    return get


def idle(result, source: str) -> None:
    """07.idle: after a half-second pause, the first GEMM against the one right after it."""
    get = _again((result, source))
    gap = longest_pause(result)

    def reveal(answer):
        res, src = get()
        ratio = first_over_next(res, gap)
        g = measure.grade_choice(answer, ratio, IDLE_EDGES, IDLE_CHOICES)
        _picture(res, [PAUSED], f"a {res['size']} x {res['size']} GEMM after a pause")
        first, nxt = first_spread(res, PAUSED, gap), Spread.of([r["second_us"] for r in _rows(res, PAUSED, gap)])
        gs = pauses(res)
        zero = first_spread(res, PAUSED, gs[0]) if gs and gs[0] == 0 else None
        st = steady_spread(res)
        growth = []
        for a, b in zip(gs, gs[1:]):
            sa, sb = first_spread(res, PAUSED, a), first_spread(res, PAUSED, b)
            apart = sa.quartiles[1] < sb.quartiles[0] or sb.quartiles[1] < sa.quartiles[0]
            growth.append((a, b, apart, sb.median - sa.median))
        steps = "; ".join(f"{a:g} s to {b:g} s: {'+' if d >= 0 else ''}{us(d)}" + ("" if apart else " (within the spread)")
                          for a, b, apart, d in growth)
        zero_text = (f" Even with no pause, only a synchronize before it, the first GEMM took {us(zero.median)} "
                     f"against {us(st.median)} for a GEMM queued right behind another." if zero and st.n else "")
        return widgets.grade(
            g, f"After {gap:g} s of pause the first GEMM took <b>{us(first.median)}</b>, the one right after it "
            f"{us(nxt.median)}: <b>{ratio.median:.2f}x</b>, pair by pair.{zero_text} From one pause to the next, the "
            f"first GEMM's median moved {steps}. Same GEMM, same data, same process: only the time the GPU spent "
            f"idle changed. {_source(src)}; {first.n} repeats per pause, timed with CUDA events.",
            live=_live())

    widgets.ask("07.idle", f"After the GPU sat idle for {gap:g} s, how much longer than the GEMM right after it will the "
                "first GEMM take?", choices=IDLE_CHOICES, default=IDLE_CHOICES[0], reveal=reveal,
                decides=lambda: [spoilers.us(first_spread(result, PAUSED, gap).median),
                                 spoilers.us(statistics.median(r["second_us"] for r in _rows(result, PAUSED, gap)))])


def _excess_share(result, cond, gap) -> Estimate | None:
    """The excess over a steady GEMM under ``cond`` as a share of the excess after the longest pause, with its range."""
    st = Estimate.of(steady_spread(result))
    paused = Estimate.of(first_spread(result, PAUSED, longest_pause(result))) - st
    other = first_spread(result, cond, gap)
    if not other.n or not st.n or paused.lo <= 0:
        return None
    return (Estimate.of(other) - st) / paused


class Test(Word):
    """What one explanation's test came to."""

    HOLDS = "holds"
    FAILS = "fails"
    OPEN = "open"  # the data cannot say


def tests(result) -> dict[str, tuple[Test, str]]:
    """Each explanation's test: (outcome, sentence)."""
    gap = longest_pause(result)
    out = {}
    slow, steady = _clocks(_rows(result, PAUSED, gap)), _clocks(result["steady"])
    if not slow.n or not steady.n:
        out["clocks"] = (Test.OPEN, "the clocks were not read here (no NVML), so this test cannot be made")
    else:
        (a, b), (c, _) = slow.quartiles, steady.quartiles
        if b < c:
            out["clocks"] = (Test.HOLDS, f"the SM clock read {slow.text()} during the slow first GEMMs, below "
                                         f"{steady.text()} during steady ones")
        elif a >= c:
            out["clocks"] = (Test.FAILS, f"the SM clock read {slow.text(lambda v: f'{v:.0f} MHz')} during the slow "
                                         f"first GEMMs, and {steady.text(lambda v: f'{v:.0f} MHz')} during steady ones")
        else:
            out["clocks"] = (Test.OPEN, f"the SM clock's readings overlap: {slow.text()} during the slow GEMMs, "
                                        f"{steady.text()} during steady ones")
    for key, cond, g, holds_if in (("waking", WAKE, gap, "below"), ("cold data", OTHER, 0.0, "above")):
        e = _excess_share(result, cond, g)
        if e is None:
            out[key] = (Test.OPEN, f"no '{cond}' run to compare, or no excess after the pause to explain")
            continue
        left = f"{e.mid:.0%} of the excess (between {e.lo:.0%} and {e.hi:.0%} by the quartiles)"
        if key == "waking":
            verdict = Test.HOLDS if e.hi < 0.5 else Test.FAILS if e.lo >= 0.5 else Test.OPEN
            text = f"with a small kernel run first after {g:g} s, the GEMM kept {left}"
        else:
            verdict = Test.HOLDS if e.lo >= 0.5 else Test.FAILS if e.hi < 0.5 else Test.OPEN
            text = (f"a GEMM on other buffers with no pause ran slower than a steady one by {e.mid:.0%} of the excess "
                    f"after the longest pause (between {e.lo:.0%} and {e.hi:.0%} by the quartiles)")
        out[key] = (verdict, text)
    return out


_CHOICE_OF = {"clocks": WHY_CHOICES[0], "waking": WHY_CHOICES[1], "cold data": WHY_CHOICES[2]}


def why_grade(answer, result) -> Graded:
    """Which explanation survives: conclusive only when every test is."""
    t = tests(result)
    holding = [k for k, (o, _) in t.items() if o == Test.HOLDS]
    opened = [k for k, (o, _) in t.items() if o == Test.OPEN]
    why = ", ".join(f"the {k} test {'cannot decide' if o is Test.OPEN else o}" for k, (o, _) in t.items())
    if len(holding) == 1 and not opened:
        actual = _CHOICE_OF[holding[0]]
    elif not holding and not opened:
        actual = WHY_CHOICES[3]
    else:
        actual = _CHOICE_OF[holding[0]] if len(holding) == 1 else WHY_CHOICES[3]
        reason = ("more than one explanation holds" if len(holding) > 1 else
                  f"the {', '.join(opened)} test{'s' if len(opened) > 1 else ''} cannot decide")
        return Graded(measure.Status.INCONCLUSIVE, actual, f"{reason}: {why}")
    return Graded(measure.Status.HELD if answer == actual else measure.Status.MISSED, actual, why)


def why_idle(result, source: str) -> None:
    """07.why-idle: which explanation of the slow first GEMM the three conditions leave standing."""
    get = _again((result, source))
    gap = longest_pause(result)

    def reveal(answer):
        res, src = get()
        g = why_grade(answer, res)
        conds = [c for c in idle_gpu.CONDITIONS if any(r["condition"] == c for r in res["rows"])]
        _picture(res, conds, f"a {res['size']} x {res['size']} GEMM after a pause, three conditions")
        st = res["steady"]
        show.table([(c, f"{p:g} s", us(a), us(b), _clock_range(_rows(res, c, p)))
                    for c, p, a, b, _ in idle_gpu.summary(res)]
                   + [("steady (a GEMM right behind another)", "-", us(steady_spread(res).median), "-",
                       _clock_range(st))],
                   ["condition", "pause", "first GEMM (median)", "the next one (median)", "SM clock read (NVML)"])
        t = tests(res)
        first, wake = first_spread(res, PAUSED, gap), first_spread(res, WAKE, gap)
        other, same = first_spread(res, OTHER, 0.0), first_spread(res, PAUSED, 0.0)
        lines = []
        if t["clocks"][0] == Test.FAILS:
            lines.append(f"The clocks: NVML read the SM clock at {_clock_range(_rows(res, PAUSED, gap))} while each slow "
                         f"first GEMM ran, as during steady ones ({_clock_range(st)}); the memory clock and the "
                         f"performance state read {_mem_range(_rows(res, PAUSED, gap))} (steady: {_mem_range(st)}).")
        else:
            lines.append(f"The clocks: {html.escape(t['clocks'][1])}.")
        kept, carried = _excess_share(res, WAKE, gap), _excess_share(res, OTHER, 0.0)
        if wake.n and first.n and kept is not None:
            lines.append(f"Waking: a small kernel run first, right after the {gap:g} s pause, left the GEMM at "
                         f"{us(wake.median)} against {us(first.median)} without it: {kept.mid:.0%} of the excess over "
                         f"a steady GEMM stayed ({kept.lo:.0%} to {kept.hi:.0%} by the quartiles).")
        if other.n and same.n and carried is not None:
            lines.append(f"Cold data: a GEMM on other buffers, with no pause, took {us(other.median)}, against "
                         f"{us(same.median)} on the same buffers with no pause: its excess over a steady GEMM is "
                         f"{carried.mid:.0%} of the longest pause's ({carried.lo:.0%} to {carried.hi:.0%}).")
        holding = [k for k, (o, _) in t.items() if o == Test.HOLDS]
        if not g.conclusive:
            head = "The experiment cannot single out one explanation here."
        elif g.actual == WHY_CHOICES[3]:
            head = "None of the three explanations accounts for most of the excess here."
        else:
            head = f"Of the three, one survives: <b>{html.escape(g.actual)}</b>."
        opened = ("What the data cannot decide, and stays open: what costs the first GEMM that time. NVML reads "
                  "the clock at one moment, so a dip shorter than a GEMM may not show in it. One hypothesis, not tested here: a small kernel wakes only the "
                  "part of the GPU it runs on, which would explain why it takes only part of the excess away; a "
                  "first kernel that keeps every SM busy would test it. " if not holding else
                  "What the data cannot decide: why that part of the GPU slows down when idle; the vendor's power "
                  "management is not visible from here. ")
        return widgets.grade(
            g, f"{head} " + " ".join(lines) + f" {opened}The article's suspects (clocks at idle against boost, heat, "
            "power management, the driver's housekeeping) stay the article's: this experiment tests three "
            f"explanations of one kind of slow GEMM, on this GPU. {_source(src)}; "
            f"{first.n} repeats per condition and pause.", live=_live())

    def facts_of():
        out = [spoilers.us(first_spread(result, WAKE, gap).median), spoilers.us(first_spread(result, OTHER, 0.0).median)]
        sm = _clocks(_rows(result, PAUSED, gap))
        if sm.n:
            out.append(spoilers.value(sm.median, "MHz"))
        return out

    widgets.ask("07.why-idle", "Which explanation of the slow first GEMM does the experiment leave standing?",
                choices=WHY_CHOICES, default=WHY_CHOICES[0], reveal=reveal, decides=facts_of)


def _source(src: str) -> str:
    """'measured on ...' as the start of a sentence."""
    return html.escape(src[:1].upper() + src[1:])


def _clock_range(rows) -> str:
    sm = sorted({r["clocks"]["sm_mhz"] for r in rows if r.get("clocks")})
    return (f"{sm[0]} MHz" if len(sm) == 1 else f"{sm[0]}-{sm[-1]} MHz") if sm else "not read"


def _mem_range(rows) -> str:
    mem = sorted({r["clocks"]["mem_mhz"] for r in rows if r.get("clocks")})
    ps = sorted({r["clocks"]["pstate"] for r in rows if r.get("clocks")})
    if not mem:
        return "nothing (not read)"
    m = f"{mem[0]} MHz" if len(mem) == 1 else f"{mem[0]}-{mem[-1]} MHz"
    return f"{m} and P{ps[0]}" if len(ps) == 1 else f"{m} and P{ps[0]}-P{ps[-1]}"
