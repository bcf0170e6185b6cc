"""Notebook 00's questions: a multiply on this CPU, what watching costs, and a first trace in Perfetto."""

from __future__ import annotations

from .. import facts
from ..facts import measure
from ..lesson import show, spoilers, widgets
from ..facts.measure import Estimate, Spread
from ..facts.text import us
from . import _shared

OBSERVER_CHOICES = ["about the same (under 1.2x)", "1.2x to 2x", "2x to 5x", "more than 5x"]
OBSERVER_EDGES = [1.2, 2, 5]


def _mm_calls(run) -> Spread:
    """Every recorded ``aten::mm`` but the first step's, in µs: the multiply's time per call, with its spread."""
    t = run.trace
    first = facts.steps(t)[0] if facts.steps(t) else None
    return Spread.of([t.dur[i] for i in t.indices(name="aten::mm") if not t.is_gpu(i)
                      and (first is None or t.ts[i] > first.end_us)])


def cpu_matmul(cpu) -> None:
    """00.cpu-matmul: how long one 1024 x 1024 float32 multiply takes on this CPU, on one thread."""
    mm = _mm_calls(cpu)

    def reveal(answer_ms):
        ms = Spread.of([v / 1e3 for v in mm.samples], "ms")
        g = measure.grade_number(answer_ms, ms, 3, fmt=lambda v: f"{v:.2f} ms")
        gflops = 2 * 1024**3 / (mm.median / 1e6) / 1e9
        return widgets.grade(
            g, f"Each <code>aten::mm</code> call took <b>{mm.median / 1e3:.2f} ms</b> (median of {mm.n} calls after "
            f"the first step) on one thread of this CPU, about {gflops:.0f} GFLOP/s (2 × 1024³ operations per call). "
            "Within a factor of 3 counts as a hit: the point is the order of magnitude. The series times CPU work "
            "on one thread, so that other programs on this machine disturb it less. "
            + _shared.where_measured(cpu), live=True)

    widgets.ask("00.cpu-matmul", "How long does one 1024 x 1024 float32 matrix multiply take on one core of this CPU?",
                unit="ms", default=10, reveal=reveal, where="cpu",
                decides=lambda: [spoilers.value(round(mm.median / 1e3, 2), "ms"), spoilers.us(mm.median)])


def observer(tiny, gpu_tiny) -> None:
    """00.observer: how much longer one profiled call takes than the same call unprofiled, on this CPU."""
    ratio = _shared.profiler_ratio(tiny)

    def reveal(answer):
        prof, plain = _shared.profiled(tiny), _shared.unprofiled(tiny)
        _shared.spread_figure({"profiled (trace, steady steps)": prof, "unprofiled (timed plainly)": plain},
                              title=f"{tiny.tag}: one call of matmul_add on this CPU")
        g = measure.grade_choice(answer, ratio, OBSERVER_EDGES, OBSERVER_CHOICES)
        gpu_text = ""
        gr = _shared.profiler_ratio(gpu_tiny)
        if gr is not None:
            gpu_text = (f" The GPU run's CPU side: {us(gpu_tiny.cpu_per_call_us)} profiled against "
                        f"{us(gpu_tiny.timing.host_us)} to issue the call unprofiled, {gr.mid:.1f}x "
                        f"({gpu_tiny.source}; {gpu_tiny.cpu_per_call.n} steady steps: shown, not graded).")
        reading = ("One explanation, which notebook 01 tests: the profiler's bookkeeping, paid on the CPU for every "
                   "event it records, weighs most on calls made of few, short ops." if ratio.mid >= 1.2 else
                   "This call is long next to the few events it records, so the profiler's cost per event "
                   "disappears in it; a call made of many small ops would show it (notebook 01 tests that).")
        return widgets.grade(
            g, f"Profiled, one call took <b>{us(prof.median)}</b> (the <code>matmul_add</code> span, median of the "
            f"{prof.n} steps after the first); unprofiled, <b>{us(plain.median)}</b> (median of {plain.n} blocks of "
            f"calls): <b>{ratio.mid:.1f}x</b>. {reading}{gpu_text} {_shared.where_measured(tiny)} Keep this in mind "
            "whenever a conclusion rests on CPU time read from a trace: the notebooks that draw one set it beside "
            "an unprofiled measurement.", live=True)

    widgets.ask("00.observer", "How much longer does one profiled call take than the same call unprofiled, on this CPU?",
                choices=OBSERVER_CHOICES, default=OBSERVER_CHOICES[0], reveal=reveal, where="cpu",
                decides=lambda: _shared.facts_of(ratio, tiny.cpu_per_call, tiny.timing.host))


def perfetto_steps(small) -> None:
    """00.perfetto: how many ProfilerStep spans the CPU thread shows."""
    steps = facts.steps(small.trace)

    def reveal(found):
        n = len(steps)
        return widgets.verdict(found == n, f"The CPU thread holds <b>{n}</b> <code>ProfilerStep</code> spans: the "
                               "recorded ones. Notebook 01 says which they are, and why.", actual=n)

    widgets.ask("00.perfetto", "In Perfetto, how many ProfilerStep spans does the CPU thread show?",
                unit="spans", default=0, reveal=reveal, kind="task",
                decides=lambda: [spoilers.value(len(steps), "spans")] + [s.name for s in steps])


def exercise_size(cpu) -> None:
    """The "double the size" exercise: 2048 against 1024 on the CPU, both on one thread."""
    from ..runs.profiling import Schedule, profile
    from ..runs.workload import matmul_add

    def solution():
        big = profile(matmul_add(2048), warm=True, on="cpu", schedule=Schedule(1, 1, 5), timed=False)  # its trace only
        r = Estimate.of(_mm_calls(big)) / Estimate.of(_mm_calls(cpu))
        lo, hi = r.lo, r.hi
        if lo <= 8 <= hi or 6 <= r.mid <= 10:
            reading = "near 8: the CPU's multiply rate held"
        elif lo > 8:
            reading = ("above 8: the rate fell at the larger size; one hypothesis is that the bigger matrices fit the "
                       "caches less well, which more sizes would test")
        else:
            reading = ("below 8: the rate rose at the larger size (on one thread, larger blocks of work can keep the "
                       "core's vector units busier), or the 1024 run was slowed by other work; repeat both")
        show.md(f"At 2048 × 2048 one `aten::mm` took {us(_mm_calls(big).median)} against "
                f"{us(_mm_calls(cpu).median)} at 1024 × 1024: {r.mid:.1f}x (between {lo:.1f}x and {hi:.1f}x by the "
                f"two spreads). Twice the size is eight times the arithmetic (2n³ operations); this ratio is "
                f"{reading}.")

    widgets.exercise("double the size",
                     "Profile the same multiply at 2048 × 2048 on the CPU. How many times longer than at 1024 × 1024 "
                     "will one multiply take? Write the number down, then ask for the solution.", solution)
