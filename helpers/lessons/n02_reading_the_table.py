"""Notebook 02's questions: Self against total, the GPU's time against the CPU's, the closing synchronize, the crossover.

The notebook's rule, taught by 02.why-cpu: a Self CPU total holds the
profiler's closing synchronize, time the CPU spent waiting for the GPU; to
compare the CPU's own work with the GPU's, take it out. The sweep, the
crossover and its exercise apply that rule.
"""

from __future__ import annotations

import html

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import one_trace
from ..facts.measure import Graded, Status
from ..facts.text import counts_text, short, us

# A ratio read once from one trace (three recorded steps) is graded as uncertain by 25% either way: a choice
# is held or missed only when the whole band falls inside it.
ONE_TRACE = 1.25

SHARE_CHOICES = ["under 1%", "1% to 10%", "10% to 50%", "more than half"]
SHARE_EDGES = [0.01, 0.1, 0.5]

BIG_CHOICES = ["CPU time far larger", "about the same", "GPU time far larger"]
BIG_EDGES = [0.5, 2]

WHY_CHOICES = ["the CPU waited for the GPU: without the final synchronize, both sizes cost about the same CPU time",
               "launching bigger kernels costs more CPU time: it stays larger without the synchronize",
               "the profiler recorded more events at 4096: the event counts differ"]
WHY_EDGE = 1.3  # the CPU's own time at 4096 over 64 from which "it grew" (without the synchronize)
WHY_BANDS = ["under 1.3x: about the same, or less", "1.3x or more: it grew"]

THRESHOLD = facts.GPU_BOUND_RATIO  # GPU-bound once GPU time reaches this share of the CPU's own time
CROSS_FACTOR = 2  # a typed crossover counts within this factor


def _pct(v: float) -> str:
    return f"{v:.1%}"


def _x(v: float) -> str:
    return f"{v:.2f}x"


def own_cpu_us(run) -> float:
    """Self CPU time without the profiler's closing synchronize: the CPU's own work (the notebook's rule)."""
    return facts.self_cpu_without_closing_sync(run.trace)


def _tolerance_text() -> str:
    return (f" (One trace, three recorded steps: the figure is graded as uncertain by a factor of {ONE_TRACE:g} "
            "either way, and a choice counts only when that whole band falls inside it.)")


# --- 02.small-share ------------------------------------------------------------------------------------------


def small_share(small) -> None:
    """02.small-share: at 64 x 64, the GPU's time as a share of the CPU's, from the table's two totals."""
    b = small.summary.balance

    def reveal(answer):
        show.pre(small.table)
        cpu64, cuda64 = article.fig("self_cpu_64"), article.fig("self_cuda_64")
        theirs = cuda64.value_us / cpu64.value_us
        g = one_trace.grade_choice(answer, b.ratio, ONE_TRACE, SHARE_EDGES, SHARE_CHOICES, fmt=_pct,
                                   what="the GPU's share")
        waits = ("so the GPU mostly waited while the CPU prepared and launched its kernels"
                 if b.ratio < THRESHOLD else "so the GPU kept up with the CPU")
        return widgets.grade(
            g, f"This run: Self CPU time total <b>{us(b.self_cpu_us)}</b>, Self CUDA time total "
            f"<b>{us(b.device_us)}</b>: the GPU worked for <b>{b.ratio:.1%}</b> of the CPU's time, {waits}: "
            f"<b>{html.escape(b.verdict)}</b> (the series calls a run GPU-bound from {b.threshold:.0%}). "
            f"For comparison, {cpu64.label()} showed {cpu64.text()} against {cuda64.text()}: {theirs:.1%}."
            + _tolerance_text(), live=False)

    widgets.ask("02.small-share", "At 64 x 64, the GPU's time (Self CUDA total) is what share of the CPU's time "
                "(Self CPU total)?", choices=SHARE_CHOICES, default="10% to 50%", reveal=reveal,
                decides=lambda: [spoilers.us(b.self_cpu_us), spoilers.us(b.device_us), spoilers.share(b.ratio)])


def self_against_total(small) -> None:
    """After 02.small-share: four rows of the table recomputed from the trace's events."""

    def body():
        rows = [facts.op_times(small.trace, name) for name in ("matmul_add", "aten::matmul", "aten::mm", "aten::add")]
        show.table([(r.name, r.calls, us(r.self_us), us(r.total_us)) for r in rows],
                   ["name", "# of calls", "Self CPU", "CPU total"])
        mat = rows[1]
        show.md(f"`aten::matmul` spends {mat.self_us / mat.total_us:.0%} of its CPU total in itself, and "
                f"`aten::mm`, under it, {rows[2].self_us / rows[2].total_us:.0%}: `aten::matmul` looks at the shapes "
                "and hands over to `aten::mm`, which launches the kernel (notebook 04 follows the launch). An op "
                "with a large total and a small Self is a *dispatcher* op.")

    widgets.after("02.small-share", body)


# --- 02.big-balance ------------------------------------------------------------------------------------------


def big_balance(big, small) -> None:
    """02.big-balance: at 4096 x 4096, the table's two totals against each other."""
    b, s0 = big.summary.balance, small.summary.balance

    def reveal(answer):
        show.pre(big.table)
        cpu4k, cuda4k = article.fig("self_cpu_4096"), article.fig("self_cuda_4096")
        g = one_trace.grade_choice(answer, b.ratio, ONE_TRACE, BIG_EDGES, BIG_CHOICES, fmt=_x,
                                   what="Self CUDA over Self CPU")
        return widgets.grade(
            g, f"This run: Self CPU <b>{us(b.self_cpu_us)}</b>, Self CUDA <b>{us(b.device_us)}</b> (GPU over CPU "
            f"{b.ratio:.2f}x): <b>{html.escape(b.verdict)}</b> by the series' rule. Against 64 × 64, the CPU total "
            f"changed {b.self_cpu_us / s0.self_cpu_us:.1f}x and the GPU total {b.device_us / s0.device_us:,.0f}x. "
            f"Per step the GPU ran {counts_text(facts.work_per_call(big.trace))} (at 64 × 64: "
            f"{counts_text(facts.work_per_call(small.trace))}). For comparison, {cpu4k.label()} showed "
            f"{cpu4k.text()} against {cuda4k.text()}." + _tolerance_text(), live=False)

    widgets.ask("02.big-balance", "At 4096 x 4096, how will Self CPU total and Self CUDA total compare?",
                choices=BIG_CHOICES, default="CPU time far larger", reveal=reveal,
                decides=lambda: [spoilers.us(b.self_cpu_us), spoilers.us(b.device_us)])


# --- 02.why-cpu ----------------------------------------------------------------------------------------------


def why_cpu(small, big) -> None:
    """02.why-cpu: which explanation of the CPU total's growth survives without the closing synchronize."""
    a, b = own_cpu_us(small), own_cpu_us(big)

    def reveal(answer):
        rows = []
        for r in (small, big):
            sync = facts.artifacts(r.trace).closing_sync
            rows.append((r.tag, us(r.summary.balance.self_cpu_us), sync.name if sync else "-",
                         us(sync.dur_us) if sync else "-", us(own_cpu_us(r)), len(r.trace)))
        show.table(rows, ["run", "Self CPU total", "last call", "its duration", "Self CPU without it", "events"])
        ratio = b / a
        events = len(big.trace) / len(small.trace)
        band = one_trace.grade_choice(None, ratio, ONE_TRACE, [WHY_EDGE], WHY_BANDS, fmt=_x,
                                      what="the CPU's own time at 4096 over 64")
        if not band.conclusive:
            g = Graded(Status.INCONCLUSIVE, None, band.why)
            reading = ("Too close to the line to say which explanation survives from these two traces: record "
                       "both again and compare.")
        else:
            actual = (WHY_CHOICES[0] if ratio < WHY_EDGE else WHY_CHOICES[2] if events > 1.3 else WHY_CHOICES[1])
            g = Graded(Status.HELD if answer == actual else Status.MISSED, actual, band.why)
            reading = (
                "So the growth was waiting: the profiler's closing synchronize (notebook 04) blocks until the GPU has "
                "finished what the CPU queued, and at 4096 that is real GPU work. A Self CPU total can hold time the "
                "CPU spent doing nothing but wait." if actual == WHY_CHOICES[0] else
                "So the synchronize does not explain it all: the CPU's own work grew too"
                + (", and the trace holds more events" if actual == WHY_CHOICES[2] else "")
                + "; the rows of the two tables above say where.")
        return widgets.grade(
            g, f"Without the final synchronize, 4096 × 4096 costs <b>{ratio:.2f}x</b> the CPU time of 64 × 64 "
            f"({us(b)} against {us(a)}), with {events:.2f}x the events. {reading} From here on, this notebook "
            "compares the GPU's time with the CPU's own time, the closing synchronize taken out."
            + _tolerance_text(), live=False)

    widgets.ask("02.why-cpu", "Which explanation survives when the final synchronize is taken out of the Self CPU total?",
                choices=WHY_CHOICES, default=WHY_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.us(a), spoilers.us(b)])


# --- 02.crossover --------------------------------------------------------------------------------------------


def _sweep_rows(sweep):
    sizes = [r.workload.p["size"] for r in sweep]
    total = [r.summary.balance.self_cpu_us for r in sweep]
    own = [own_cpu_us(r) for r in sweep]
    gpu = [r.summary.balance.device_us for r in sweep]
    return sizes, total, own, gpu


def bracket(sizes, cpu_us, gpu_us, threshold: float = THRESHOLD) -> tuple[int, int] | None:
    """The two measured sizes between which GPU time first reaches ``threshold`` of CPU time, or None."""
    r = [g / c if c else float("inf") for g, c in zip(gpu_us, cpu_us)]
    for k in range(1, len(sizes)):
        if r[k - 1] < threshold <= r[k]:
            return sizes[k - 1], sizes[k]
    return None


def _figure(sweep, sizes, total, own, gpu, cross):
    plt = plots._plt()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ax.plot(sizes, own, "o-", color="#e6550d", label="Self CPU without the closing synchronize (the CPU's own time)")
    ax.plot(sizes, total, "o--", color="#fdae6b", label="Self CPU total, closing synchronize included")
    ax.plot(sizes, gpu, "s-", color="#3182bd", label="GPU time (kernels, copies, fills)")
    ax.plot(sizes, [THRESHOLD * o for o in own], ":", color="#e6550d", lw=1,
            label=f"{THRESHOLD:.0%} of the CPU's own time (the line)")
    plots.size_axes(ax, sizes)
    if cross is not None:
        ax.axvline(cross, color="#555", ls="--", lw=1)
        ax.text(cross, ax.get_ylim()[1], f" GPU-bound from about n={cross:.0f}", va="top", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"matmul + add on {sweep[0].device} ({sweep[0].dtype}): where does GPU time catch up?", fontsize=10)
    fig.tight_layout()
    return fig


def crossover(sweep) -> None:
    """02.crossover: from which size n the GPU's time reaches half the CPU's own time."""
    sizes, total, own, gpu = _sweep_rows(sweep)
    cross = plots.crossover(sizes, own, gpu, THRESHOLD)

    def reveal(answer):
        show.display_figure(_figure(sweep, sizes, total, own, gpu, cross))
        show.table([(n, us(t), us(o), us(g), f"{g / o:.2f}x", "GPU-bound" if g / o >= THRESHOLD else "CPU-bound")
                    for n, t, o, g in zip(sizes, total, own, gpu)],
                   ["size", "Self CPU total", "CPU's own time (without the closing sync)", "Self CUDA",
                    "GPU / CPU's own", "verdict"])
        spill = one_trace.spill_sentence(sweep, lambda r: f"n = {r.workload.p['size']}")
        br = bracket(sizes, own, gpu)
        if cross is None:
            return widgets.verdict(None, "The GPU's time stays under half the CPU's own time at every size "
                                         f"measured: no crossover up to n = {sizes[-1]}. " + spill)
        if br is None:
            return widgets.verdict(None, f"The GPU's time is at least half the CPU's own time from the smallest size "
                                         f"measured, n = {sizes[0]}: the crossover is at or below it, and this sweep "
                                         "cannot say where. " + spill)
        lo, hi = br
        g = one_trace.grade_number(answer, cross, CROSS_FACTOR, lo=lo, hi=hi, fmt=lambda v: f"n = {v:.0f}",
                                   what="the crossover",
                                   why_band="the measured sizes around it; between them it is interpolated")
        with_sync = plots.crossover(sizes, total, gpu, THRESHOLD)
        return widgets.grade(
            g, f"By the notebook's rule (GPU time against the CPU's own time, the closing synchronize taken out), "
            f"the GPU's time reaches half the CPU's between n = {lo} and n = {hi}, near <b>n = {cross:.0f}</b> "
            "(log-interpolated between the two). Below it the GPU works for less than half the CPU's time, so a "
            "faster GPU would shorten these steps little; above it the GPU's work is a large part of each step, "
            "and once the GPU's time passes the CPU's, the kernels set the pace. "
            + (f"With the closing synchronize left in the CPU column, the line would fall near n = {with_sync:.0f}. "
               if with_sync is not None else "")
            + spill, live=False)

    widgets.ask("02.crossover", "From which matrix size n (an n x n matmul + add) will this GPU be GPU-bound?",
                unit="(n)", default=1024, reveal=reveal,
                decides=lambda: [spoilers.name(f"n = {cross:.0f}")] if cross is not None else [])


# --- 02.perfetto-queue -----------------------------------------------------------------------------------------


def queued_at_sync(run) -> list[int]:
    """GPU work still running or waiting when the closing synchronize starts (it ends after the call's start)."""
    sync = facts.artifacts(run.trace).closing_sync
    if sync is None:
        return []
    t = run.trace
    return sorted((j for j in facts.gpu_work(t) if t.ts[j] + t.dur[j] > sync.start_us), key=t.ts.__getitem__)


def perfetto_queue(big) -> None:
    """02.perfetto-queue: how much GPU work the closing synchronize finds queued, read in Perfetto."""
    sync = facts.artifacts(big.trace).closing_sync
    queued = queued_at_sync(big)

    def reveal(found):
        if sync is None:
            return widgets.verdict(None, "This trace has no closing synchronize to click.")
        t = big.trace
        s = sync.start_us
        show.table([(short(t.name_of(j), 50), us(t.ts[j] - s), us(t.ts[j] + t.dur[j] - s)) for j in queued],
                   ["GPU work", "starts (from the synchronize's start)", "ends"])
        end = max((t.ts[j] + t.dur[j] for j in queued), default=s)
        after = s + sync.dur_us - end
        return widgets.verdict(
            found == len(queued),
            f"When the last <code>{html.escape(sync.name)}</code> starts, <b>{len(queued)}</b> piece(s) of GPU work "
            f"are still running or queued (the table, times from the call's start); the call returns "
            f"{us(after)} after the last of them ends. That is the waiting 02.why-cpu took out of the CPU's time.",
            actual=len(queued))

    widgets.ask("02.perfetto-queue", "In the 4096 x 4096 trace, click the last cudaDeviceSynchronize on the CPU thread. "
                "How many pieces of GPU work (kernels, fills) are still running or queued on the GPU when it starts?",
                unit="pieces", default=0, reveal=reveal, kind="task",
                decides=lambda: [spoilers.value(len(queued), "pieces of GPU work")])


# --- the exercise ------------------------------------------------------------------------------------------------


def exercise_threshold(sweep) -> None:
    """The "move the line" exercise: GPU-bound from GPU time equal to the CPU's own time, not half."""

    def solution():
        sizes, total, own, gpu = _sweep_rows(sweep)
        at_half, at_one = plots.crossover(sizes, own, gpu, THRESHOLD), plots.crossover(sizes, own, gpu, 1.0)
        most = max(g / t for g, t in zip(gpu, total))
        show.md("With the series' threshold (GPU time at least half the CPU's own time) the crossover is "
                + (f"near n = {at_half:.0f}" if at_half else "beyond the sizes measured here")
                + "; asking for GPU time at least equal to it moves it to "
                + (f"n = {at_one:.0f}." if at_one else "beyond the sizes measured here.")
                + (f" With the closing synchronize left in the CPU column, GPU time never reaches CPU time in this "
                   f"sweep (at most {most:.2f}x): a synchronize that waits for the GPU's work grows with it, so that "
                   "column keeps pace with the GPU's." if most < 1 else "")
                + " A verdict is a line drawn on a continuous ratio: say where you drew it, and what you compared.")

    widgets.exercise("move the line",
                     "Suppose GPU-bound meant GPU time at least <i>equal</i> to the CPU's own time, instead of half. "
                     "Where would the crossover move? Write down a size, then ask for the solution.", solution)
