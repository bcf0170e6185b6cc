"""Notebook 04's questions: which call launches the kernel, how long an arrow is, what the final synchronize waits for.

The launch latencies of one trace are several samples (one per launch),
graded on their spread (:mod:`helpers.facts.measure`); a single call's duration or
share, read once, is graded with a declared tolerance
(:mod:`helpers.facts.one_trace`).
"""

from __future__ import annotations

import statistics

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import measure, one_trace, kernel_kinds as kk
from ..facts.measure import Graded, Spread, Status
from ..facts.text import chain_text, short, us
from . import _shared

ONE_TRACE = 1.25  # a duration or a ratio read once from one trace: uncertain by 25% either way
IDLE_TOL = 1.1  # a share of one call read once: uncertain by 10% of it either way

LAUNCH_CHOICES = ["cudaLaunchKernel", "cuLaunchKernelEx", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                  "aten::mm runs the kernel itself"]

LATENCY_FACTOR = 2  # a typed latency counts within 2x, at both quartiles of the launches' spread

IDLE_CHOICES = ["idle for over 90% of it", "idle for 10% to 90% of it", "idle for under 10% of it"]
IDLE_EDGES = [0.1, 0.9]
IDLE_BY_VALUE = IDLE_CHOICES[::-1]  # grade order: the choice below the first edge first

SYNC_CHOICES = ["it waits for queued GPU work: its length follows the GPU's busy time inside it",
                "it flushes the profiler's records: its length follows the number of events",
                "it grows with the tensors' size, whatever the GPU does"]
# The synchronize "follows" the GPU's busy time inside it when the two differ by at most 30 us or a quarter of the
# call; a size within the tolerance of that line makes the grade inconclusive.
FOLLOW_US, FOLLOW_SHARE = 30.0, 0.25


def _spill(runs) -> str:
    return one_trace.spill_sentence(runs, lambda r: r.tag)


# --- 04.launcher ------------------------------------------------------------------------------------------------


def launcher(run) -> None:
    """04.launcher: which call hands the GEMM to the GPU, read from the dispatch chain."""
    chain = facts.dispatch_chain(run.trace)
    mm = next((n for _, n in chain.walk() if n.name in ("aten::mm", "aten::bmm")), None) if chain else None
    launches = [c.name for c in mm.children if c.gpu] if mm else []
    gemm_launch = launches[0] if launches else "none found"

    def reveal(answer):
        print(chain_text(chain))
        add = next((n for _, n in chain.walk() if n.name == "aten::add"), None) if chain else None
        add_launch = next((c.name for c in add.children if c.gpu), "none found") if add else "none found"
        gemm = facts.top_kernel(run.trace, kk.GEMM)
        return widgets.verdict(
            answer == gemm_launch,
            f"Here the GEMM ({show.code(gemm.name if gemm else '?', 60)}) is launched by "
            f"<b>{show.code(gemm_launch)}</b> and the add by {show.code(add_launch)}. "
            f"{article.fig('occupancy_query').label(capital=True)} shows "
            "<code>cudaOccupancyMaxActiveBlocksPerMultiprocessor</code> and then <code>cudaLaunchKernel</code> under "
            "<code>aten::mm</code>. <code>cudaLaunchKernel</code> belongs to the CUDA runtime API; "
            "<code>cuLaunchKernel</code> and <code>cuLaunchKernelEx</code> to the lower-level driver API, whose "
            "<code>Ex</code> form takes extra launch attributes such as thread-block cluster dimensions "
            "(<a href='https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html'>CUDA driver API</a>). "
            "Which one a library uses is its own choice, and it changes with the GPU and the library version: "
            "follow the arrow from whichever call it is.", actual=gemm_launch)

    widgets.ask("04.launcher", "On this run, which call hands the matmul's kernel to the GPU?",
                choices=LAUNCH_CHOICES, default="cudaLaunchKernel", reveal=reveal,
                decides=lambda: [gemm_launch])


# --- 04.latency -------------------------------------------------------------------------------------------------


def latencies(run) -> Spread:
    """Launch-to-start time of every piece of GPU work in the trace (one sample per launch), in µs."""
    return Spread.of([x.latency_us for x in facts.launches(run.trace)])


def latency(run, big) -> None:
    """04.latency: how long after its launch call a kernel starts, at 64 x 64 (graded on the launches' spread)."""
    lat = latencies(run)

    def reveal(answer):
        rows = []
        for r in (run, big):
            s = latencies(r)
            lo, hi = s.quartiles
            rows.append((r.tag, s.n, us(min(s.samples)), f"{us(s.median)} ({us(lo)} to {us(hi)})",
                         us(max(s.samples)), f"{r.summary.balance.gpu_busy_share:.0%}"))
        show.table(rows, ["run", "launches", "min", "median (middle half)", "max", "GPU busy in the window"])
        _shared.spread_figure({run.tag: lat, big.tag: latencies(big)}, title="Launch to start, one dot per launch",
                              unit="us from the call's start", log=True)
        g = measure.grade_number(answer, lat, LATENCY_FACTOR, fmt=us)
        b = latencies(big)
        return widgets.grade(
            g, f"At 64 × 64 the median launch-to-start time is <b>{us(lat.median)}</b>, over {lat.n} launches, on a GPU "
            f"busy {run.summary.balance.gpu_busy_share:.0%} of the window: the kernel has nothing to wait behind, so "
            f"the arrow is the trip itself. At 4096 × 4096 (GPU busy {big.summary.balance.gpu_busy_share:.0%}) the "
            f"median is {us(b.median)} and the maximum {us(max(b.samples))}: the CPU runs ahead, and kernels wait in "
            "the queue behind the work launched before them (the exercise below reads one). A long arrow on a busy "
            f"GPU usually means the queue never runs dry; a long arrow on an idle GPU is overhead. {_spill([run, big])}",
            live=False)

    widgets.ask("04.latency", "At 64 x 64, how long after a launch call starts does its kernel start on the GPU?",
                unit="us", default=50, reveal=reveal, decides=lambda: [spoilers.us(lat.median)])


def step_timeline(run) -> None:
    """After 04.latency: one step of the 64 x 64 run, with its arrows."""
    widgets.after("04.latency", lambda: show.display_figure(
        plots.timeline(run.trace, plots.step_window(run.trace, 1, 1), title=f"{run.tag}: one step")))


# --- 04.vs-offset -----------------------------------------------------------------------------------------------


def vs_offset(warm64) -> None:
    """04.vs-offset: the article's CPU-GPU offset on its warm 64 x 64 run against this GPU's median arrow."""
    fig = article.fig("cpu_gpu_offset")
    what = "CPU–GPU offset at 64 × 64, warm"
    choices = widgets.VERSUS_CHOICES
    lat = latencies(warm64)

    def reveal(answer):
        show.table([(warm64.tag, lat.n, us(lat.median), f"{warm64.summary.balance.gpu_busy_share:.0%}")],
                   ["run", "launches", "median launch to start", "GPU busy in the window"])
        show.versus([(what, fig.text(), f"{lat.median:.1f} µs")],
                    note=f"{fig.label(capital=True)}; this GPU: median launch-to-start in {warm64.tag}")
        ratio = lat.median / fig.value_us
        g = one_trace.grade_choice(answer, ratio, ONE_TRACE, [0.5, 2.0], choices, fmt=lambda v: f"{v:.2g}x",
                                   what="this GPU's median arrow over the article's offset")
        reading = (f" On this GPU, idle most of the window, a launch's trip takes microseconds; the article's offset "
                   f"on its warm run is {1 / ratio:,.0f} times that, and the article did not pin its cause down (it "
                   "went on to the profiler's own buffer requests, notebook 03)." if ratio < 0.5 else "")
        return widgets.grade(g, f"This GPU: <b>{lat.median:.1f} µs</b>, {ratio:.2g}x the article's {fig.text()}."
                             + reading, live=False)

    widgets.ask("04.vs-offset", f"{what}: {fig.quote()}. On this GPU, will it be...", choices=choices,
                default=choices[1], reveal=reveal, decides=lambda: [spoilers.us(lat.median)])


# --- 04.sync-idle ---------------------------------------------------------------------------------------------------


def sync_idle(run, big) -> None:
    """04.sync-idle: how much of the final synchronize the GPU is idle, at 64 x 64."""
    c = facts.artifacts(run.trace).closing_sync

    def reveal(answer):
        if c is None or c.idle_share is None:
            return widgets.verdict(None, "This trace has no closing synchronize to read.")
        rows = []
        for r in (run, big):
            s = facts.artifacts(r.trace).closing_sync
            rows.append((r.tag, s.name, us(s.dur_us), us(s.gpu_busy_us), f"{s.idle_share:.0%}"))
        show.table(rows, ["run", "last call", "duration", "GPU busy inside it", "GPU idle inside it"])
        cb = facts.artifacts(big.trace).closing_sync
        g = one_trace.grade_choice(answer, c.idle_share, IDLE_TOL, IDLE_EDGES, IDLE_BY_VALUE,
                                   fmt=lambda v: f"{v:.0%}", what="the GPU's idle share of the synchronize",
                                   most=1.0)
        sync, work, idle = (article.fig(k) for k in ("closing_sync", "closing_sync_gpu_work", "closing_sync_idle"))
        return widgets.grade(
            g, f"At 64 × 64 the final synchronize took {us(c.dur_us)}, and the GPU was idle for "
            f"<b>{c.idle_share:.0%}</b> of it: "
            + ("the tiny kernels had finished before it started, so the call had nothing to wait for. "
               if c.idle_share > 0.9 else "some GPU work was still running when it started. ")
            + f"At 4096 × 4096 it took {us(cb.dur_us)}, with the GPU busy {1 - cb.idle_share:.0%} of it: there "
            "it waited for work the CPU had queued ahead. Now the article: a synchronize of "
            f"{sync.quote()}, covering {work.text()} of GPU work, from which it reads the run as idle "
            f"{idle.text()} of the time. A long call with an idle GPU means time went to something other than "
            "waiting for kernels; the article says the profiler issues this synchronize to flush its events, and "
            "this GPU does not show what takes the time. One hypothesis is work the profiler does when it stops, "
            "which would make the "
            "call's length depend on the profiler's version and the GPU rather than on your code. Either way, the "
            "synchronize is the profiler's; what is yours is the GPU's idle share over the whole window "
            f"({run.summary.balance.gpu_idle_share:.0%} at 64 × 64). (A share read once: graded with a tolerance of "
            "10% of it either way.)", live=False)

    widgets.ask("04.sync-idle", "At 64 x 64, for how much of that final cudaDeviceSynchronize is the GPU idle?",
                choices=IDLE_CHOICES, default=IDLE_CHOICES[2], reveal=reveal,
                decides=lambda: _idle_facts(c))


def _idle_facts(c) -> list:
    """The GPU's busy time inside the call, and its idle share unless it is 100%: that figure is in every profiler
    table (a step's "CPU total %"), where it says nothing about this question."""
    if c is None or c.idle_share is None:
        return []
    return [spoilers.us(c.gpu_busy_us)] + ([spoilers.share(c.idle_share)] if c.idle_share < 0.995 else [])


# --- 04.why-sync ----------------------------------------------------------------------------------------------------


def follows_grade(syncs) -> tuple[str, list[float]]:
    """Whether every synchronize follows the GPU's busy time inside it: "yes", "no" or "unclear" (near the line).

    Returns the state and, per size, the distance from the line as a share of what is allowed (1.0: on the edge).
    """
    ratio = [abs(c.dur_us - c.gpu_busy_us) / max(FOLLOW_US, FOLLOW_SHARE * c.dur_us) for c in syncs]
    if all(r <= 1 / ONE_TRACE for r in ratio):
        return "yes", ratio
    if any(r > ONE_TRACE for r in ratio):
        return "no", ratio
    return "unclear", ratio


def why_sync(sweep) -> None:
    """04.why-sync: across the sweep, which explanation the final synchronize's length fits."""
    syncs = [facts.artifacts(r.trace).closing_sync for r in sweep]
    sizes = [r.workload.p["size"] for r in sweep]

    def reveal(answer):
        rows, points = [], []
        for n, r, c in zip(sizes, sweep, syncs):
            rows.append((n, us(c.dur_us), us(c.gpu_busy_us), len(r.trace)))
            points.append((str(n), max(c.gpu_busy_us, 0.1), c.dur_us))
        show.table(rows, ["size", "final synchronize", "GPU busy inside it", "events in the trace"])
        show.display_figure(plots.scatter(points, xlabel="GPU busy inside the synchronize (us)",
                                          ylabel="synchronize duration (us)",
                                          title="The final synchronize against the GPU work it waited for, by size"))
        state, dist = follows_grade(syncs)
        events = [len(r.trace) for r in sweep]
        idle = [(n, c.dur_us) for n, c in zip(sizes, syncs) if c.gpu_busy_us < 1.0]
        if state == "unclear":
            near = [str(n) for n, d in zip(sizes, dist) if 1 / ONE_TRACE < d <= ONE_TRACE]
            g = Graded(Status.INCONCLUSIVE, None, f"at n = {', '.join(near)} the synchronize is within the "
                                                  f"tolerance of the line (30 us or a quarter of the call, give or "
                                                  f"take {ONE_TRACE - 1:.0%})")
            text = "Too close to the line at those sizes to say which explanation fits from one recording."
        else:
            actual = (SYNC_CHOICES[0] if state == "yes" else
                      SYNC_CHOICES[1] if max(events) > 1.5 * min(events) else SYNC_CHOICES[2])
            g = Graded(Status.HELD if answer == actual else Status.MISSED, actual,
                       f"at every size the synchronize is within 30 us or a quarter of the call of the GPU's busy time "
                       f"inside it, with {ONE_TRACE - 1:.0%} to spare" if state == "yes" else
                       f"at some size the synchronize is further from the GPU's busy time inside it than 30 us or a "
                       f"quarter of the call, by more than {ONE_TRACE - 1:.0%}")
            if state == "yes":
                size_text = (f" From n = {idle[0][0]} to n = {idle[-1][0]} the tensors grow "
                             f"{(idle[-1][0] / idle[0][0]) ** 2:,.0f}-fold and the synchronize stays between "
                             f"{us(min(d for _, d in idle))} and {us(max(d for _, d in idle))}, with nothing queued: "
                             "size alone does not set it." if len(idle) > 1 else "")
                text = ("At every size the synchronize's length is within 30 us (or a quarter of the call) of the GPU's "
                        "busy time inside it: at the small sizes both are short (a few microseconds of synchronize, "
                        "next to no GPU work), at the large ones the synchronize lasts as long as the queued work. "
                        "It waits for work the CPU queued ahead. The event counts go from {min(events):,} to {max(events):,} across the sizes, so the "
                        f"flush explanation has little to stand on here.{size_text}")
            else:
                text = ("The synchronize's length does not follow the GPU's busy time inside it at every size: look at "
                        "the rows where the two part ways.")
        return widgets.grade(
            g, text + f" The article's {article.fig('closing_sync').text()} with an idle GPU remains unexplained by "
            f"this GPU's traces. {_spill(sweep)}", live=False)

    widgets.ask("04.why-sync", "Across the sizes of the sweep, which explanation does the final synchronize's length fit?",
                choices=SYNC_CHOICES, default=SYNC_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.us(syncs[-1].dur_us), spoilers.us(syncs[-1].gpu_busy_us)])


# --- 04.perfetto --------------------------------------------------------------------------------------------------


def _step_gemm(run):
    step = facts.steps(run.trace)[1]
    gemm = next((x for x in facts.launches(run.trace)
                 if x.kind == kk.GEMM and step.contains(x.call_start_us)), None)
    return step, gemm


def perfetto_arrow(run) -> None:
    """04.perfetto: the GEMM's arrow in ProfilerStep#3, read in Perfetto (a reading: within 25% counts)."""
    step, gemm = _step_gemm(run)

    def reveal(found):
        if gemm is None:
            return widgets.verdict(None, f"{step.name} holds no GEMM launch to follow.")
        return widgets.verdict(widgets.within(found, gemm.latency_us, factor=1.25),
                               f"In {step.name} the GEMM starts <b>{us(gemm.latency_us)}</b> after its launch call "
                               f"({show.code(gemm.call)}) starts. Within 25% counts: it is a short distance to read "
                               "off a timeline.", actual=gemm.latency_us)

    widgets.ask("04.perfetto", "Follow the arrow from the GEMM's launch call in ProfilerStep#3: how long after the call "
                "starts does the kernel start?", unit="us", default=0, reveal=reveal, kind="task",
                decides=lambda: [spoilers.us(gemm.latency_us)] if gemm else [])


# --- the exercise ---------------------------------------------------------------------------------------------------


def exercise_add_wait(big) -> None:
    """The "add at 4096" exercise: how long the add waits after its launch on a busy GPU."""

    def solution():
        adds = [x for x in facts.launches(big.trace) if x.kind == kk.ELEMENTWISE]
        show.table([(short(x.work, 40), us(x.latency_us)) for x in adds], ["add kernel", "launch to start"])
        med = statistics.median(x.latency_us for x in adds)
        gemm = statistics.median(facts.durations(big.trace, kind=kk.GEMM))
        show.md(f"Median {us(med)}, against a GEMM of {us(gemm)} (median): the add is launched while earlier work is "
                "still queued on the GPU, "
                + ("so it waits behind more than one GEMM: the CPU has run ahead by several kernels. " if med > gemm
                   else "so it waits for the GEMM in front of it to finish. ")
                + "On a busy GPU the arrow measures the queue, not the launch.")

    widgets.exercise("the add at 4096",
                     "At 4096 × 4096 (warm), how long after its launch call will the <i>add</i> kernel start? It is "
                     "launched right after the GEMM. Write down a number, then ask for the solution.", solution)



@widgets.measured_here()  # the chain's times are measured now, on this CPU
def cpu_chain(cpu) -> None:
    """The same step run on this machine's CPU: the chain with nothing to launch."""
    from ..facts.text import chain_text

    print(chain_text(facts.dispatch_chain(cpu.trace)))
