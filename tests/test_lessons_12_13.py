"""Notebooks 12 and 13's lesson modules: what their reveals conclude, on the H200 reference set."""

from __future__ import annotations

import pytest

from helpers.runs import comparisons
from helpers.lessons import n12_a_training_step as n12
from helpers.facts.measure import Status
from helpers.runs.profiling import recorded
from helpers.runs.training import train_step


@pytest.fixture(scope="module")
def runs():
    return {k: recorded(w, warm=True) for k, w in {
        "fp32": train_step(), "tf32": train_step(precision="tf32"), "amp": train_step(precision="amp"),
        "fused": train_step(optimizer="fused"), "syncs": train_step(syncs=True)}.items()}


@pytest.fixture(scope="module")
def timed():
    return comparisons.recorded("train-step")


def test_the_step_is_cpu_bound_and_autocast_does_not_shorten_it(runs, timed):
    """Issue 19 (12): the GEMMs get several times faster, the step does not; graded on the per-round ratios."""
    choice, conclusive, bound = n12.step_time_reading(timed, runs["fp32"], runs["tf32"], runs["amp"], runs["fused"])
    assert choice == n12.STEP_CHOICES[2] and conclusive and bound == n12.CPU_BOUND
    s = n12.sides(timed, runs["fp32"], runs["tf32"], runs["amp"], runs["fused"])
    assert s["fp32"].gemm > 5 * s["autocast"].gemm
    assert s["fused AdamW"].ratio.quartiles[1] < 1  # the fused optimizer is what shortens it
    assert s["fused AdamW"].host.median < s["fp32"].host.median


def test_sync_cost_grades_on_rounds_not_one_timing(timed):
    assert n12.sync_cost_reading(timed) == [n12.COST_CHOICES[1], True]
    r = timed.ratio(n12.LINES, n12.CLEAN)
    assert r.n == 20 and r.unit == "x"


def test_waits_are_grouped_by_line(runs):
    groups = n12.waits_by_line(runs["syncs"])
    assert [g["op"] for g in groups] == ["aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero",
                                         "aten::_to_copy"]
    assert all(len(g["waited"]) == 3 and g["cause"] for g in groups)


def test_every_step_is_inconclusive_when_the_steps_disagree():
    fmt = "{:.0%}".format
    g = n12.every_step(n12.SHARE_CHOICES[1], [0.40, 0.41, 0.42], n12.SHARE_EDGES, n12.SHARE_CHOICES, "share", fmt)
    assert g.status == Status.HELD
    g = n12.every_step(n12.SHARE_CHOICES[0], [0.40, 0.41, 0.42], n12.SHARE_EDGES, n12.SHARE_CHOICES, "share", fmt)
    assert g.status == Status.MISSED
    g = n12.every_step(n12.SHARE_CHOICES[1], [0.32, 0.35, 0.36], n12.SHARE_EDGES, n12.SHARE_CHOICES, "share", fmt)
    assert g.status == Status.INCONCLUSIVE


def test_backward_share_and_equal_flops(runs):
    per = n12.phases_per_step(runs["fp32"])
    assert len(per) == 3
    shares = [d["backward"] / sum(d.values()) for d in per]
    assert all(1 / 3 < s < 0.5 for s in shares)
    assert n12.equal_flops_ratio(runs["fp32"]) > 1.3


# --- notebook 13 ----------------------------------------------------------------------------------------------------

from helpers.lessons import n13_gpu_memory as n13  # noqa: E402


@pytest.fixture(scope="module")
def memory_runs():
    return (recorded(train_step(batch=4096, memory=True), warm=True),
            recorded(train_step(batch=4096, memory=True, checkpoint=True), warm=True))


def test_checkpointing_reruns_each_blocks_first_linear_and_stops_before_the_second(memory_runs):
    """Issue 19 (13): not "forward ran twice": two more GEMMs a step, and two Linear ops that launch nothing."""
    _, ckpt = memory_runs
    ops = n13.recomputed_ops(ckpt.trace)
    assert [(x["op"], len(x["gemms"])) for x in ops] == [("aten::linear", 1), ("aten::gelu", 0),
                                                          ("aten::linear", 0)] * 2
    assert all(x["gpu_us"] == 0 for x in ops if x["op"] == "aten::linear" and not x["gemms"])


def test_reserved_stays_up_while_allocated_falls(memory_runs):
    run, _ = memory_runs
    name, lo_alloc, lo_res, hi_res = n13.reserved_in_last_step(run)
    assert lo_res == hi_res and lo_alloc < 0.5 * hi_res


def test_the_peak_sits_in_backward_after_forward_ended_lower(memory_runs):
    run, _ = memory_runs
    place = n13.peak_place(run)
    assert place["label"] == "backward" and place["step"] == "ProfilerStep#2"
    assert place["at_start"] < place["at_end_of_forward"] < place["peak"].peak_allocated
    assert place["before"][-1][2] == place["peak"].peak_allocated


def test_the_peak_reveal_draws_allocated_alone(memory_runs, monkeypatch):
    """13.reserved is asked after 13.peak: 13.peak's plot must not show the reserved line (issue 20's leak)."""
    from helpers.lesson import show

    run, _ = memory_runs
    figs = []
    monkeypatch.setattr(show, "display_figure", figs.append)
    n13._timeline(run, "t", reserved=False)
    n13._timeline(run, "t")
    assert [[ln.get_label() for ln in f.axes[0].lines] for f in figs] == [["allocated"], ["allocated", "reserved"]]
