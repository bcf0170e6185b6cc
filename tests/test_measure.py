"""Timing with a spread: interleaved rounds, quartiles, and grades that say inconclusive inside the noise."""

from __future__ import annotations

import math

import pytest

from helpers.runs import comparisons, idle_gpu, rounds
from helpers.facts import measure
from helpers.facts.measure import Estimate, Spread


def test_a_spread_says_its_median_and_quartiles():
    s = Spread.of([10, 11, 12, 13, 14, 100])
    assert s.median == 12.5 and s.quartiles == (11.25, 13.75)
    assert "12.5 us (IQR 11.2 us to 13.8 us, 6 samples)" == s.text()
    assert Spread.of([5.0]).text() == "5.0 us (one sample)"
    assert Spread.of([1, float("nan"), None, 2]).n == 2  # what no clock produced is not a sample


def test_a_single_sample_is_never_graded():
    g = measure.grade_choice("a", Spread.of([3.0], "x"), [2], ["a", "b"])
    assert g.status == measure.Status.INCONCLUSIVE and "too few" in g.why


def test_a_spread_across_an_edge_is_inconclusive_and_one_inside_is_graded():
    across = Spread.of([1.1, 1.15, 1.2, 1.25, 1.3, 1.22], "x")
    inside = Spread.of([1.5, 1.55, 1.6, 1.62, 1.58, 1.57], "x")
    g = measure.grade_choice("same", across, [1.2], ["same", "more"])
    assert g.status == "inconclusive" and "straddles 1.20x" in g.why and g.hit is None
    assert measure.grade_choice("more", inside, [1.2], ["same", "more"]).status == "held"
    assert measure.grade_choice("same", inside, [1.2], ["same", "more"]).status == "missed"


def test_a_typed_number_is_graded_at_both_quartiles():
    s = Spread.of([100, 110, 120, 130, 140], "us")
    assert measure.grade_number(120, s, 1.5).status == "held"
    assert measure.grade_number(1000, s, 1.5).status == "missed"
    assert measure.grade_number(170, s, 1.5).status == "inconclusive"  # within 1.5x of the 130 quartile, not 110


def test_which_is_largest_needs_bands_that_do_not_overlap():
    a, b = Spread.of([10, 11, 12, 11, 10]), Spread.of([20, 21, 22, 20, 21])
    assert measure.grade_order("b", {"a": a, "b": b}).status == "held"
    c = Spread.of([9, 12, 15, 11, 14])
    assert measure.grade_order("a", {"a": a, "c": c}).status == "inconclusive"


def test_estimates_keep_the_range_honest():
    prof, plain = Estimate(30, 28, 33, 9), Estimate(10, 9, 12, 15)
    extra = prof - plain
    assert (extra.mid, extra.lo, extra.hi) == (20, 16, 24)
    r = prof / plain
    assert r.mid == 3 and math.isclose(r.lo, 28 / 12) and math.isclose(r.hi, 33 / 9) and r.unit == "x"
    unbounded = Estimate(5, 1, 9, 9) / Estimate(1, -1, 2, 9)  # a divisor that can be zero
    assert unbounded.lo == -math.inf and "unbounded" in unbounded.text()


def test_per_round_ratios_come_from_the_same_rounds():
    a, b = Spread.of([10, 20, 30, 40, 50]), Spread.of([5, 10, 15, 20, 25])
    r = measure.per_round(a, b)
    assert r.samples == (2, 2, 2, 2, 2) and r.unit == "x"


def test_interleave_times_every_call_in_turn_on_the_cpu():
    torch = pytest.importorskip("torch")
    order = []
    x = torch.randn(32, 32)
    calls = {"a": (lambda: order.append("a") or x @ x, ()), "b": (lambda: order.append("b") or x + x, ())}
    m = rounds.interleave(calls, rounds=6, block_s=0.0005, max_per_block=2, wall=True)
    assert m.rounds == 6 and m.host["a"].n == 6 and m.wall["b"].n == 6
    runs = [x for i, x in enumerate(order) if i == 0 or order[i - 1] != x]  # each label's stretch of calls
    assert runs[-12:] == ["a", "b"] * 6  # the six rounds: a's blocks (host, wall), then b's, in turn
    assert m.conditions.threads == torch.get_num_threads() and m.conditions.cpus >= 1


def test_one_thread_is_restored_afterwards():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    with rounds.one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_the_recorded_comparisons_hold_every_group(h200):
    """The reference set's comparisons, timed in turn on the H200: every group, every label, enough rounds."""
    for name, group in comparisons.GROUPS.items():
        c = comparisons.recorded(name)
        assert set(c.labels) | set(c.unavailable) == set(group.labels), name
        for label in c.labels:
            assert c.spread(label).n >= measure.MIN_SAMPLES, (name, label)
        assert "NVIDIA H200" in c.source and c.measured.conditions.where.startswith("NVIDIA H200")
    # the input pipeline: four workers ahead of the main process, round by round
    inp = comparisons.recorded("input")
    assert inp.ratio("main process, pageable", "4 workers, pinned").median > 1


def test_the_idle_gpu_experiment_reads_back(h200):
    result, source = idle_gpu.measure()
    rows = idle_gpu.summary(result)
    assert {r[0] for r in rows} == set(idle_gpu.CONDITIONS) and "NVIDIA H200" in source
    assert all(r[2] > 0 and r[3] > 0 for r in rows)
    assert len(result["steady"]) >= 5


def test_every_pairing_of_two_runs_is_not_counted_as_so_many_samples():
    """Ratios of two runs timed apart pair every sample with every other: 15 x 15 figures are 30 measurements, and
    the text says where they came from rather than '225 samples'."""
    from helpers.facts.measure import Spread, ratio_range
    a, b = Spread.of([10.0, 11.0, 12.0]), Spread.of([5.0, 5.5, 6.0, 6.5])
    r = ratio_range(a, b)
    assert r.n == 12 and r.paired_from == (3, 4)
    assert "all 12 pairings of 3 with 4 samples" in r.text() and "12 samples" not in r.text()
    assert "3 samples" in a.text() and a.scaled(2.0).paired_from is None and r.scaled(2.0).paired_from == (3, 4)
