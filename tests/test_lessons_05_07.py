"""Notebooks 05-07's lesson modules: every branch of their graded reveals, on the recorded data and on made-up data.

The notebooks run in recorded mode (``make test-notebooks``), which exercises the branch the H200's data gives;
here each other outcome the data could give (on another GPU, live) is fed in and its reveal read: the grade it
gets, and the sentence that has to match it.
"""

from __future__ import annotations

import copy

import pytest

from helpers import facts
from helpers.runs import comparisons, idle_gpu
from helpers.lesson import journal, spoilers, widgets
from helpers.facts import measure, kernel_kinds as kk
from helpers.lessons import n05_a_batch_axis as n05, n06_occupancy as n06, n07_kernel_variance as n07
from helpers.facts.measure import Measured, Spread
from helpers.runs.profiling import Schedule, profile
from helpers.runs.workload import matmul_add


@pytest.fixture
def headless(tmp_path, monkeypatch):
    """Recorded, headless: ask() reveals with its default at once; returns what the reveals displayed, as text."""
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setenv("PROFILING_JOURNAL", str(tmp_path / "journal.json"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    shown: list[str] = []

    def display(obj):
        data = getattr(obj, "data", None)
        shown.append(spoilers.plain_text(data if isinstance(data, str) else str(obj)))

    monkeypatch.setattr(widgets, "_display", display)
    from helpers.lesson import show

    monkeypatch.setattr(show, "_display_html", lambda text: shown.append(spoilers.plain_text(text)))
    monkeypatch.setattr(show, "display_figure", lambda fig: shown.append("[figure]"))
    monkeypatch.setattr(show, "md", lambda text: shown.append(text))
    return shown


def _status(qid):
    return journal.load()[qid].get("status")


# --- 05 ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs05():
    import os

    old = os.environ.get("PROFILING_MODE")
    os.environ["PROFILING_MODE"] = "recorded"
    try:
        return {k: profile(matmul_add(64, **kw), warm=True)
                for k, kw in (("flat", {}), ("batched", {"batch": 8}), ("wide", {"batch": 64}))}
    finally:
        if old is None:
            os.environ.pop("PROFILING_MODE")
        else:
            os.environ["PROFILING_MODE"] = old


def _made_up(flat, batched, wide, n=30) -> comparisons.Comparison:
    """The batch group timed in turn, with the given per-call times (µs) and a little noise, round by round."""
    noise = [1 + 0.01 * ((i * 7) % 5 - 2) for i in range(n)]
    host = {"2-D": Spread.of([flat * x for x in noise]), "batch 8": Spread.of([batched * x for x in noise]),
            "batch 64": Spread.of([wide * x for x in noise])}
    m = Measured(host, {}, measure.Conditions(1, 2, 0.1, "a made-up machine"), n)
    return comparisons.Comparison(comparisons.GROUPS["batch"], m, "made up for a test", {})


def test_05_recorded_grades_are_conclusive_and_match_the_issue(headless, runs05):
    timed = comparisons.measure("batch")
    cost = measure.grade_choice(None, n05.cost_ratio(timed), n05.COST_EDGES, n05.COST_CHOICES)
    size = measure.grade_choice(None, n05.batch_ratio(timed), n05.BATCH_EDGES, n05.BATCH_CHOICES)
    # a batch axis costs the CPU a few µs; the batch size costs nothing (issue 19, measured on the H200)
    assert cost.conclusive and cost.actual == n05.COST_CHOICES[1]
    assert size.conclusive and size.actual == n05.BATCH_CHOICES[0]


@pytest.mark.parametrize("wide, expect", [(20.0, "no more CPU time"), (30.0, "grew with the batch"),
                                          (15.0, "neither explanation predicted")])
def test_05_why_batch_has_a_sentence_for_each_outcome(headless, runs05, wide, expect):
    r = runs05
    n05.why_batch(_made_up(18.0, 20.0, wide), r["flat"], r["batched"], r["wide"])
    text = " ".join(headless)
    assert expect in text
    assert "profiled" in text and "shown and not graded" in text  # the trace's times beside, never graded
    assert _status("05.why-batch") in ("held", "missed")


def test_05_cpu_cost_straddling_an_edge_is_inconclusive(headless, runs05):
    r = runs05
    noisy = _made_up(20.0, 21.0, 21.0)
    wide = [19.0, 22.0] * 15  # batch 8 against 2-D: 1.0x to 1.16x, across the 1.05x edge
    noisy.measured.host["batch 8"] = Spread.of(wide)
    n05.cpu_cost(noisy, r["flat"], r["batched"], r["flat"], r["batched"])
    assert _status("05.cpu-cost") == "inconclusive"
    assert any("Inconclusive here" in t for t in headless)


def test_05_op_reveal_does_not_print_the_grid_05_perfetto_asks_for(headless, runs05):
    n05.op(runs05["batched"], runs05["flat"])
    grid = facts.top_kernel(runs05["batched"].trace, kk.GEMM).resources.grid
    assert str(grid) not in " ".join(headless) and "thread blocks" in " ".join(headless)


# --- 06 ---------------------------------------------------------------------------------------------------------


def test_06_add_on_the_h200_and_on_the_articles_a100(headless, h200):
    run = profile(matmul_add(4096), warm=True)
    t = run.trace
    add = facts.top_kernel(t, kk.ELEMENTWISE)
    here, a100 = n06.add_occupancy(add, t.devices[0])
    # issue 19: the article's "nothing limits occupancy" holds on its A100 (32 registers: 16 blocks, 100%), not here
    assert (a100.blocks_per_sm, a100.occupancy) == (16, 1.0)
    assert here.occupancy < 1 and n06._add_choice(here) == n06.ADD_CHOICES[1]
    n06.add_limit(add, t.devices[0], t.device_name)
    text = " ".join(headless)
    assert f"{add.resources.registers_per_thread} registers × 32 threads" in text
    assert "on the article's A100" in text and "Part 1, figure 16" in text  # the 32 registers are labelled


@pytest.mark.parametrize("regs, smem, threads, choice", [(32, 0, 128, 0), (40, 0, 128, 1), (16, 100_000, 128, 2),
                                                         (16, 0, 1024, 0)])
def test_06_add_choice_follows_the_limiting_resource(regs, smem, threads, choice):
    o = facts.theoretical_occupancy(regs, smem, threads, {"computeMajor": 9, "computeMinor": 0})
    assert n06._add_choice(o) == n06.ADD_CHOICES[choice]


def test_06_why_query_has_a_choice_for_each_outcome(headless, h200):
    first = profile(matmul_add(64), schedule=Schedule(0, 0, 3))
    n06.where_queries(first)
    assert journal.load()["06.why-query"]["actual"] == n06.WHERE_CHOICES[0]


# --- 07 ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def recorded_idle(monkeypatch):
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    return idle_gpu.measure()[0]


def test_07_recorded_idle_experiment(recorded_idle):
    r = recorded_idle
    g = measure.grade_choice(None, n07.first_over_next(r), n07.IDLE_EDGES, n07.IDLE_CHOICES)
    assert g.conclusive and g.actual == n07.IDLE_CHOICES[2]
    assert {k: o for k, (o, _) in n07.tests(r).items()} == {"clocks": "fails", "waking": "fails", "cold data": "fails"}
    w = n07.why_grade(n07.WHY_CHOICES[3], r)
    assert w.status == measure.Status.HELD and w.actual == n07.WHY_CHOICES[3]


def _edited(result, cond, gap, *, first=None, sm=None):
    r = copy.deepcopy(result)
    for i, row in enumerate(r["rows"]):
        if row["condition"] == cond and row["gap_s"] == gap:
            if first is not None:
                row["first_us"] = first * (1 + 0.002 * (i % 5))  # five repeats a little apart
            if sm is not None and row.get("clocks"):
                row["clocks"]["sm_mhz"] = sm
    return r


def test_07_each_explanation_can_survive(recorded_idle):
    r = recorded_idle
    gap = n07.longest_pause(r)
    clocks = _edited(r, n07.PAUSED, gap, sm=1200)
    assert n07.why_grade(None, clocks).actual == n07.WHY_CHOICES[0]
    waking = _edited(r, n07.WAKE, gap, first=180.0)
    assert n07.why_grade(None, waking).actual == n07.WHY_CHOICES[1]
    cold = _edited(r, n07.OTHER, 0.0, first=370.0)
    assert n07.why_grade(None, cold).actual == n07.WHY_CHOICES[2]
    both = _edited(clocks, n07.WAKE, gap, first=180.0)
    assert not n07.why_grade(None, both).conclusive  # two explanations hold: not graded


def test_07_without_nvml_the_clock_test_cannot_decide(recorded_idle, headless):
    r = copy.deepcopy(recorded_idle)
    for row in r["rows"] + r["steady"]:
        row["clocks"] = None
    assert n07.tests(r)["clocks"][0] == "open"
    assert not n07.why_grade(None, r).conclusive
    n07.why_idle(r, "made up for a test")
    assert _status("07.why-idle") == "inconclusive" and any("not read" in t for t in headless)


def test_07_statistics_of_twenty_gemms_are_graded_with_each_left_out(headless):
    run = profile(matmul_add(4096), warm=True, schedule=Schedule(0, 0, 20))
    gemms = facts.durations(run.trace, kind=kk.GEMM)
    assert n07.spread_of_range(gemms).n == len(gemms) == 20
    n07.vs_mean(run, gemms)
    n07.tflops(run, gemms)
    text = " ".join(headless)
    assert "the vendor's datasheet figure" in text and "the vendor's page" in text
    assert n07._datasheet_link(run.device).startswith("<a href='https://www.nvidia.com/en-us/data-center/h200/'")
    assert _status("07.vs-mean") in ("held", "missed") and _status("07.tflops") in ("held", "missed")
