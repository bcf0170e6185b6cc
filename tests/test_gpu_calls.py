"""GPU time per call, call by call: the spreads notebooks 09 and 10 grade GPU-time predictions on."""

from __future__ import annotations

import pytest

from helpers import facts
from helpers.facts import gpu_calls, kernel_kinds as kk
from helpers.facts.measure import Spread, Status


@pytest.fixture(autouse=True)
def _recorded(monkeypatch, h200):
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    from helpers.runs import mode

    mode.environment.cache_clear()
    yield
    mode.environment.cache_clear()


def _run(w, **kw):
    from helpers.runs.profiling import profile

    return profile(w, warm=True, **kw)


def test_per_call_is_one_sample_per_recorded_call_and_sums_to_the_traces_gpu_time():
    from helpers.runs.workload import mlp

    r = _run(mlp())
    s = gpu_calls.per_call(r)
    assert s.n == len(gpu_calls.calls(r)) == 3
    assert sum(s.samples) / s.n == pytest.approx(r.gpu_per_call_us)
    fused = gpu_calls.per_call(_run(mlp(), compile=True), gpu_calls.of_kind(kk.TRITON))
    k = facts.top_kernel(_run(mlp(), compile=True).trace, kk.TRITON)
    assert fused.median == pytest.approx(k.median_us)


def test_by_top_op_splits_each_call_by_the_ops_under_the_label():
    from helpers.runs.workload import attention

    r = _run(attention("naive"))
    parts = gpu_calls.by_top_op(r)
    assert all(s.n == 3 for s in parts.values())
    total = sum(s.median for s in parts.values())
    assert total == pytest.approx(gpu_calls.per_call(r).median, rel=0.02)


def test_pairs_take_every_pairing():
    a, b = Spread.of([1, 2, 3]), Spread.of([10, 20])
    assert sorted(gpu_calls.pairs(a, b, lambda x, y: x * y).samples) == [10, 20, 20, 30, 40, 60]


def test_grade_each_needs_three_quarters_to_agree():
    choose = lambda v: "big" if v > 1 else "small"  # noqa: E731
    g = gpu_calls.grade_each("big", [2, 3, 4, 5, 6, 0.5], choose, "x")  # 5 of 6 agree
    assert g.status == Status.HELD and g.actual == "big"
    assert gpu_calls.grade_each("small", [2, 3, 4, 5, 6, 0.5], choose, "x").status == Status.MISSED
    assert gpu_calls.grade_each("small", [2, 3, 0.5, 0.4, 0.3, 0.2], choose, "x").status == Status.INCONCLUSIVE
    assert gpu_calls.grade_each("big", [2, 3, 4], choose, "x").status == Status.INCONCLUSIVE  # too few


def test_grade_extreme_is_conclusive_only_when_the_leader_is_clear():
    clear = {"a": Spread.of([10, 10.2, 9.9]), "b": Spread.of([5, 5.1, 4.9]), "c": Spread.of([1, 1, 1])}
    g = gpu_calls.grade_extreme("a", clear)
    assert g.status == Status.HELD and g.actual == "a"
    assert gpu_calls.grade_extreme("c", clear, largest=False).status == Status.HELD
    assert gpu_calls.grade_extreme("a", clear, largest=False).status == Status.MISSED
    close = {"a": Spread.of([10, 11, 9]), "b": Spread.of([9.5, 10.5, 10.2])}
    assert gpu_calls.grade_extreme("a", close).status == Status.INCONCLUSIVE
