"""Notebooks 01-04's lesson modules: timings graded outside their noise, on samples made up to the point; 02's
crossover and queue on made-up and recorded numbers."""

from __future__ import annotations

from types import SimpleNamespace

from helpers.facts import measure
from helpers.lessons import _shared, n01_setting_up_the_profiler as n01, n02_reading_the_table as n02
from helpers.facts.measure import Spread
from helpers.runs.timing import Timing


def _run(tag, ops, profiled, unprofiled):
    """A stand-in for a CPU ProfileRun: its steady spans and its unprofiled blocks, in µs."""
    t = Timing(sorted(unprofiled)[len(unprofiled) // 2], 0.0, 10, "cpu", True, tuple(unprofiled), 1)
    return SimpleNamespace(tag=tag, ops_per_call=ops, cpu_per_call=Spread.of(profiled), timing=t)


def _cost(flat, batched, answer=n01.COST_CHOICES[0]):
    e_f, e_b = _shared.profiler_extra(flat), _shared.profiler_extra(batched)
    return n01._cost_grade(answer, flat, batched, e_f, e_b)


def test_why_cost_graded_when_the_extras_stand_clear_of_the_noise():
    flat = _run("flat", 6, [19.0, 19.2, 19.4, 19.5, 19.6, 19.8, 20.0, 20.1, 20.3], [9.1, 9.2, 9.2, 9.3, 9.2] * 3)
    batched = _run("batched", 14, [80.0, 80.5, 81.0, 81.2, 81.5, 82.0, 82.4, 83.0, 83.5], [59.0, 59.5, 60.0] * 5)
    g, ratio, _ = _cost(flat, batched)
    assert g.status == measure.Status.HELD and g.actual == n01.COST_CHOICES[0]
    assert 1.5 < ratio.lo and ratio.hi < 2.5


def test_why_cost_inconclusive_when_the_ratio_straddles_the_edge():
    flat = _run("flat", 6, [18, 19, 20, 21, 22, 23, 24, 25, 26], [9.0] * 15)
    batched = _run("batched", 14, [73, 74, 75, 76, 77, 78, 79, 80, 81], [60.0] * 15)
    g, ratio, _ = _cost(flat, batched)
    assert ratio.lo < 1.5 <= ratio.hi
    assert g.status == measure.Status.INCONCLUSIVE


def test_why_cost_never_grades_nor_prints_an_absurd_ratio():
    """The issue's laptop: 40 µs of extra against 21 ms, once graded as held at 530x."""
    flat = _run("flat", 6, [49.0, 49.5, 50.0, 50.5, 51.0, 49.8, 50.2, 50.1, 49.9], [10.0] * 15)
    batched = _run("batched", 14, [21300.0, 21280, 21310, 21290, 21305, 21295, 21300, 21302, 21298], [80.0] * 15)
    g, ratio, _ = _cost(flat, batched)
    assert g.status == measure.Status.INCONCLUSIVE and ratio is None
    assert "530" not in g.why and "out of proportion" in g.why


def test_why_cost_inconclusive_when_an_extra_reaches_zero():
    flat = _run("flat", 6, [19, 20, 21, 19, 20, 21, 19, 20, 21], [9.0] * 15)
    batched = _run("batched", 14, [76, 78, 80, 122, 125, 77, 79, 81, 123], [58, 59, 160, 161, 58] * 3)
    g, ratio, _ = _cost(flat, batched)
    assert g.status == measure.Status.INCONCLUSIVE and ratio is None and "reaches zero" in g.why


def test_why_cost_says_lost_in_the_noise_instead_of_a_ratio_near_zero():
    """Two pytest workers beside busy cores: the smaller extra vanished in some rounds, and the reveal printed a
    lower bound of 0.01x, a ratio nobody should read."""
    wide = measure.Estimate(mid=0.93, lo=0.006, hi=8.93, n=9, unit="x")
    text = n01.ratio_span(wide)
    assert "0.0" not in text and "8.9x" in text and "lost in this machine's noise" in text
    assert n01.ratio_span(measure.Estimate(mid=2.0, lo=1.6, hi=2.4, n=9, unit="x")) == \
        "between 1.6x and 2.4x by the quartiles"


# --- one figure read from one trace ----------------------------------------------------------------------------

from pathlib import Path  # noqa: E402

from helpers.facts import one_trace
from helpers.reader.trace import read_trace

H200 = Path(__file__).resolve().parent.parent / "traces" / "reference" / "nvidia-h200"


def test_one_trace_choice_inconclusive_only_when_the_band_straddles_an_edge():
    choices, edges = ["low", "mid", "high"], [0.5, 2]
    assert one_trace.grade_choice("mid", 0.89, 1.25, edges, choices).status == measure.Status.HELD
    assert one_trace.grade_choice("low", 0.89, 1.25, edges, choices).status == measure.Status.MISSED
    g = one_trace.grade_choice("mid", 1.8, 1.25, edges, choices)
    assert g.status == measure.Status.INCONCLUSIVE and g.actual == "mid" and "straddles" in g.why


def test_one_trace_number_graded_over_the_whole_bracket():
    # a crossover known only to lie between 2048 and 4096: within 2x of all of it, of none of it, or of part
    assert one_trace.grade_number(3000, 2853, 2, lo=2048, hi=4096).status == measure.Status.HELD
    assert one_trace.grade_number(256, 2853, 2, lo=2048, hi=4096).status == measure.Status.MISSED
    assert one_trace.grade_number(1024, 2853, 2, lo=2048, hi=4096).status == measure.Status.INCONCLUSIVE


def test_no_recorded_kernel_of_the_sweep_was_launched_before_the_window():
    for n in (64, 128, 256, 512, 1024, 2048, 4096, 8192):
        assert one_trace.spilled(read_trace(H200 / f"{n}_bf16_warm_eager.json")) == []


def test_spilled_finds_work_launched_before_the_first_step():
    t = read_trace(H200 / "8192_bf16_warm_eager.json")
    from helpers import facts

    first = facts.steps(t)[0]
    j = facts.gpu_work(t)[0]
    i = t.launch_of(j)
    t.ts[i] = first.start_us - 10.0  # as the traces recorded before the runner synchronized had it
    assert one_trace.spilled(t) == [j]


# --- notebook 03: step durations graded with their tolerance -----------------------------------------------------

from helpers.facts import Step
from helpers.lessons import n03_schedule_and_warmup as n03  # noqa: E402


def _steps(durs, first=2):
    t, out = 0.0, []
    for k, d in enumerate(durs):
        out.append(Step(f"ProfilerStep#{first + k}", first + k, t, d))
        t += d + 10
    return out


def test_long_step_near_the_edge_is_inconclusive_not_a_clean_hit_or_miss():
    assert n03.long_step_grade(_steps([130, 100, 98])).status == measure.Status.INCONCLUSIVE  # 1.3x
    assert n03.long_step_grade(_steps([222.3, 92.2, 117.1])).actual == n03.STEP_CHOICES[0]
    assert n03.long_step_grade(_steps([101, 100, 99]), n03.STEP_CHOICES[3]).status == measure.Status.HELD
    # the longest barely ahead of the next: not named
    assert n03.long_step_grade(_steps([100, 210, 200])).status == measure.Status.INCONCLUSIVE


def test_why_first_graded_only_outside_the_tolerance():
    assert n03.why_first_grade(_steps([115.6, 86.7, 83.6], 10)).status == measure.Status.INCONCLUSIVE  # 1.36x
    assert n03.why_first_grade(_steps([200, 86.7, 83.6], 10)).actual == n03.WHY_CHOICES[0]
    assert n03.why_first_grade(_steps([85, 86.7, 83.6], 10)).actual == n03.WHY_CHOICES[1]
    assert n03.why_first_grade(_steps([60, 86.7, 83.6], 10)).actual == n03.WHY_CHOICES[2]


def test_one_noisy_step_widens_the_settle_range_instead_of_flipping_it():
    durs = [85315.5, 225.5, 68.9, 56.1, 51.4, 51.5, 52.7, 51.4, 72.1, 82.5, 55.0, 53.5, 50.2, 50.1, 48.3, 47.4,
            49.1, 47.4, 50.4, 47.4]
    assert n03.settle_range(durs) == (2, 10)
    assert n03.late_bumps(durs) == [8, 9]
    assert n03.settle_range(durs[:9] + [60.0] + durs[10:]) == (2, 9)


def test_the_first_recorded_steps_excess_is_split_without_counting_twice():
    t = read_trace(H200 / "64_bf16_cold_eager.json")
    st, rows = n03.first_step_excess(t)
    for k, s in enumerate(st):  # the Self times of a step add up to the step
        assert abs(sum(v[k] for _, _, _, v in rows) - s.dur_us) < 0.5


# --- notebook 04: the spill where arrows are read, and the synchronize against the GPU's busy time --------------------

from helpers.lessons import n04_the_dispatch_chain as n04  # noqa: E402
from helpers.facts.summary import ClosingSync  # noqa: E402


def test_the_spill_sentence_says_none_or_names_the_runs_that_spilled():
    runs = [SimpleNamespace(tag=f"{n}_bf16_warm_eager", trace=read_trace(H200 / f"{n}_bf16_warm_eager.json"))
            for n in (4096, 8192)]
    assert one_trace.spill_sentence(runs, lambda r: r.tag).startswith("Every kernel")
    from helpers import facts

    t = runs[1].trace
    j = facts.gpu_work(t)[0]
    t.ts[t.launch_of(j)] = facts.steps(t)[0].start_us - 10.0
    said = one_trace.spill_sentence(runs, lambda r: r.tag)
    assert "8192_bf16_warm_eager: 1 piece(s)" in said and "4096" not in said


def test_the_synchronize_follows_the_gpu_unless_a_size_sits_near_the_line():
    def sync(dur_us, busy_us):
        return ClosingSync("cudaDeviceSynchronize", 0.0, dur_us, busy_us, 1 - busy_us / dur_us)

    on = [sync(12.0, 0.0), sync(4070.0, 4050.0)]
    assert n04.follows_grade(on)[0] == "yes"
    assert n04.follows_grade(on + [sync(2000.0, 500.0)])[0] == "no"
    assert n04.follows_grade(on + [sync(28.0, 0.0)])[0] == "unclear"  # 28 us of 30 allowed


def test_launch_latency_is_graded_on_the_spread_of_the_launches():
    run = SimpleNamespace(trace=read_trace(H200 / "64_bf16_cold_eager.json"))
    lat = n04.latencies(run)
    assert lat.n == 6
    assert measure.grade_number(50, lat, n04.LATENCY_FACTOR).status == measure.Status.MISSED
    assert measure.grade_number(12, lat, n04.LATENCY_FACTOR).status == measure.Status.HELD


def test_02_the_crossover_lies_between_the_first_two_sizes_the_line_falls_between():
    sizes = [64, 128, 256, 512]
    cpu = [100.0] * 4
    assert n02.bracket(sizes, cpu, [10, 40, 60, 90], threshold=0.5) == (128, 256)
    assert n02.bracket(sizes, cpu, [10, 60, 40, 90], threshold=0.5) == (64, 128)  # the first crossing, not the last
    assert n02.bracket(sizes, cpu, [60, 70, 80, 90], threshold=0.5) is None  # GPU-bound from the smallest: unknown
    assert n02.bracket(sizes, cpu, [1, 2, 3, 4], threshold=0.5) is None  # never GPU-bound here
    assert n02.bracket(sizes, [100, 0, 100, 100], [1, 2, 3, 4], threshold=0.5) == (64, 128)  # no CPU time: bound


def test_02_the_closing_synchronize_finds_the_recorded_big_run_s_work_queued():
    """02.perfetto-queue's answer on the H200 set: the GPU work still running or waiting when the closing
    synchronize starts, in the order it ran, and none of it ended before the call."""
    from helpers import facts
    from helpers.runs.profiling import recorded
    from helpers.runs.workload import matmul_add

    big = recorded(matmul_add(4096))
    queued = n02.queued_at_sync(big)
    sync = facts.artifacts(big.trace).closing_sync
    t = big.trace
    assert len(queued) == 4 and queued == sorted(queued, key=t.ts.__getitem__)
    assert all(t.ts[j] + t.dur[j] > sync.start_us for j in queued)
    assert n02.queued_at_sync(recorded(matmul_add(64))) == []  # the small run's GPU is idle by then
