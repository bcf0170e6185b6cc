"""A training step's GEMMs one call at a time (helpers.facts.gemm_table), on the H200 traces of notebooks 12 and 13."""

from __future__ import annotations

from helpers.facts import gemm_table as gt
from helpers.lesson.spoilers import Fact, found, plain_text
from helpers.reader.trace import read_trace


def load(h200, tag):
    return read_trace(h200 / f"{tag}_bf16_warm_eager.json")


def test_every_gemm_call_of_a_step_with_its_phase_and_its_layer(h200):
    rows = gt.typical_step(load(h200, "train-fp32-foreach"))
    assert [r.phase for r in rows] == [gt.FORWARD] * 5 + [gt.BACKWARD] * 9
    assert all(r.op == "aten::addmm" and r.node is None for r in rows[:5])
    assert all(r.op == "aten::mm" and r.node == "AddmmBackward0" for r in rows[5:])
    # backward pairs each GEMM with its layer's forward GEMM by sequence number, last layer first; the first layer's
    # input needs no gradient, so its backward has one GEMM (the weight's) and the others two
    assert [r.forward_position for r in rows] == [0, 1, 2, 3, 4, 4, 4, 3, 3, 2, 2, 1, 1, 0]
    assert all(r.steps == 3 for r in rows)
    # one call may launch two GEMM-kind kernels (a GEMM and its split-K reduction): 14 calls, 18 kernels a step
    assert sum(len(r.kernels) for r in rows) == 18
    assert gt.kernels_per_step(load(h200, "train-fp32-foreach")) == [
        ("ProfilerStep#2", 18), ("ProfilerStep#3", 18), ("ProfilerStep#4", 18)]


def test_equal_flops_do_not_take_equal_time_on_the_h200(h200):
    """Issue 19 (12): forward's 4096->1024 GEMM against backward's GEMMs of the same FLOPs."""
    rows = gt.typical_step(load(h200, "train-fp32-foreach"))
    fwd_4096_1024 = [rows[1].median_us, rows[3].median_us]
    backward_big = [r.median_us for r in rows if r.phase == gt.BACKWARD and r.forward_position in (0, 1, 2, 3)]
    assert len(backward_big) == 7
    assert min(fwd_4096_1024) > 1.6 * max(backward_big)
    assert rows[1].kernels != rows[7].kernels


def test_checkpointing_recomputes_two_gemms_not_four(h200):
    """Issue 19 (13): non-reentrant checkpointing stops before each block's second Linear launches its GEMM."""
    plain = load(h200, "train-fp32-foreach-mem-b4096")
    ckpt = load(h200, "train-fp32-foreach-mem-ckpt-b4096")
    assert [n for _, n in gt.kernels_per_step(plain)] == [14, 14, 14]
    assert [n for _, n in gt.kernels_per_step(ckpt)] == [16, 16, 16]
    rows = gt.typical_step(ckpt)
    again = [r for r in rows if r.phase == gt.RECOMPUTE]
    assert len(again) == 2 and all(r.op == "aten::addmm" and r.node == "AddmmBackward0" for r in again)
    assert all(r.kernels == rows[0].kernels for r in again)  # the blocks' first Linear (1024 -> 4096)
    assert not [r for r in gt.typical_step(plain) if r.phase == gt.RECOMPUTE]


def test_plain_text_leaves_out_scripts():
    """The Perfetto button carries the trace as base64 inside a script: no reader sees it, the leak check must not."""
    html = "<p>Open it</p><script>var DATA = 'QiOiA0MzUsIC4xNjIs';</script><style>p{width:4x}</style> 4.0x"
    text = plain_text(html)
    assert "DATA" not in text and "width" not in text and "Open it" in text
    assert found(Fact("x", 4.0), plain_text("<script>a 4x b</script>")) is None
    assert found(Fact("x", 4.0), text) == "4.0x"
