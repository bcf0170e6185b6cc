"""The roofline: real traces in, work, achieved rates and bounds out (helpers/facts/roofline.py, with the ops'
shapes read by helpers/facts/op_shapes.py and their work by helpers/facts/op_work.py)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import BIG, H200, ROOT, cli, ext, raw_events
from helpers.facts import hardware, op_shapes, op_work, roofline as rl
from helpers.reader.trace import read_trace


@lru_cache(maxsize=None)
def _r(path: Path) -> rl.Roofline:
    return rl.roofline(read_trace(path))


def _gemms(r: rl.Roofline) -> list[rl.Point]:
    return [p for p in r.points if p.kind == "gemm"]


def test_4096_gemm_flops_come_from_its_input_dims_and_it_is_compute_bound():
    path = H200 / "4096_bf16_warm_eager.json"
    r = _r(path)
    (g,) = _gemms(r)
    # the op's Input Dims, read by the json module: [[M, K], [K, N]]
    mm = [e for e in raw_events(path) if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"]
    (m, k), (k2, n) = mm[0]["args"]["Input Dims"]
    assert (m, k, k2, n) == (4096, 4096, 4096, 4096)
    assert g.op == "aten::mm" and g.dtype == "bf16" and g.count == len(mm)
    assert g.flops == 2 * 4096 ** 3 == 2 * m * n * k
    assert g.bytes == 3 * 4096 * 4096 * 2  # two bf16 inputs read, one output written
    # achieved = work / the kernels' summed time, and below the datasheet's peak
    assert g.achieved_tflops == pytest.approx(g.flops * g.count / (g.time_us * 1e-6) / 1e12)
    peak = hardware.datasheet_peak_tflops("NVIDIA H200")[1]
    assert g.roof == rl.ROOF_16 and g.peak_tflops == peak
    assert rl.NEAR * peak <= g.achieved_tflops < peak
    assert g.bound == rl.COMPUTE_BOUND
    assert g.intensity > peak / r.peaks.bandwidth_tbs  # right of the ridge


def test_the_add_after_the_gemm_is_memory_bound():
    (add,) = [p for p in _r(H200 / "4096_bf16_warm_eager.json").points if p.op == "aten::add"]
    assert add.kind == "elementwise" and add.flops == 4096 * 4096
    assert add.bytes == 3 * 4096 * 4096 * 2  # two inputs, one output of the broadcast shape
    assert add.bound == rl.MEMORY_BOUND


@pytest.mark.parametrize("name", ["64_bf16_warm_eager.json", "64x64_bf16_warm_eager.json",
                                  "linear1024x32x64_bf16_warm_eager.json"])
def test_tiny_gemms_are_far_below_both_roofs(name):
    gemms = _gemms(_r(H200 / name))
    assert gemms
    for g in gemms:
        assert g.bound == rl.FAR_BELOW and g.of_roof < rl.NEAR


def test_bmm_counts_its_batch():
    (g,) = _gemms(_r(H200 / "64x64_bf16_warm_eager.json"))
    assert g.op == "aten::bmm" and g.flops == 2 * 64 ** 4


def test_mlp_gemms_near_compute_and_elementwise_near_memory():
    r = _r(H200 / "mlp128x128x768x3072_bf16_warm_eager.json")
    assert {p.bound for p in _gemms(r)} == {rl.COMPUTE_BOUND}
    others = {p.op: p.bound for p in r.points if p.kind == "elementwise"}
    assert others == {"aten::mul": rl.MEMORY_BOUND, "aten::gelu": rl.MEMORY_BOUND}
    assert r.sized_share == pytest.approx(1.0)


def test_fp32_training_gemms_are_judged_on_the_fp32_or_tf32_roof():
    fp32 = _r(H200 / "train-fp32-foreach_bf16_warm_eager.json")
    tf32 = _r(H200 / "train-tf32-foreach_bf16_warm_eager.json")
    assert {p.dtype for p in _gemms(fp32)} == {"fp32"} == {p.dtype for p in _gemms(tf32)}
    # the fp32 step's kernels say FP32 in their names; none goes faster than the FP32 CUDA cores' peak
    assert {p.roof for p in _gemms(fp32)} == {rl.ROOF_FP32}
    assert all(p.achieved_tflops < p.peak_tflops for p in _gemms(fp32))
    # the TF32 step: names that say tf32, or rates no FP32 CUDA core reaches
    assert {p.roof for p in _gemms(tf32)} == {rl.ROOF_TF32}
    assert max(p.achieved_tflops for p in _gemms(tf32)) > hardware.datasheet_fp32_tflops("NVIDIA H200")
    # foreach optimizer ops take tensor lists whose element type the trace does not record: said, not guessed
    assert any("TensorList" in n.reason for n in fp32.not_sized)


def test_a_trace_without_input_dims_says_so():
    r = _r(ROOT / "traces" / "ranks" / "h200x2-ddp" / "rank0.json.gz")
    assert r.points == [] and r.note == op_shapes.NO_SHAPES
    assert r.not_sized and r.not_sized[0].share == 1.0


def test_an_unknown_gpu_gets_no_roofs(tmp_path):
    doc = json.loads((H200 / "4096_bf16_warm_eager.json").read_text())
    for d in doc["deviceProperties"]:
        d["name"] = "AMD Instinct MI250X"
    path = tmp_path / "unknown_gpu.json"
    path.write_text(json.dumps(doc))
    r = rl.roofline(read_trace(path))
    assert r.peaks is None and "no roofs" in r.note and "MI250X" in r.note
    (g,) = _gemms(r)
    assert g.flops == 2 * 4096 ** 3 and g.achieved_tflops > 0 and g.bound is None and g.roof is None


def test_fp32_gemm_with_an_unnamed_kernel_shows_both_roofs():
    pk = rl.peaks("NVIDIA H200")
    w = op_work.Work("gemm", 2 * 1024 ** 3, 3 * 1024 * 1024 * 4, "fp32", "[[1024,1024],[1024,1024]]")
    p = rl._point(pk, "some_gemm_kernel", "aten::mm", w, 1, 1000.0, 1000.0)  # 2.1 TFLOP/s: no tag, no hint
    assert p.roof == rl.ROOF_FP32 and p.other_roof == rl.ROOF_TF32 and "TF32" in p.note


def test_conv_and_reduction_sizing_from_shapes():
    conv = op_work.size_op("aten::cudnn_convolution", op_shapes.Shapes(
        [[8, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], []],
        ["c10::BFloat16", "c10::BFloat16", "ScalarList", "ScalarList", "ScalarList", "Int", "Scalar", "Scalar",
         "Scalar"],
        ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"]), "gemm")
    assert conv.flops == 2 * (8 * 128 * 28 * 28) * 64 * 9  # stride 2, padding 1: 56 -> 28
    s = op_work.size_op("aten::sum", op_shapes.Shapes([[512, 1024], [], [], []], ["float", "ScalarList", "Scalar", ""],
                                                      ["", "[0]", "False", ""]), "reduction")
    assert s.flops == 512 * 1024 and s.bytes == (512 * 1024 + 1024) * 4


def test_summarize_prints_and_jsons_the_roofline():
    out = cli("summarize", H200 / "4096_bf16_warm_eager.json", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)["roofline"]
    assert r["peaks"]["peak_tbs"] == hardware.datasheet_bandwidth_tbs("NVIDIA H200")
    g = r["points"][0]
    for key in ("achieved_tflops", "achieved_tbs", "intensity_flop_per_byte", "flops_per_call", "bytes_per_call",
                "time_us", "share_of_kernel_time", "peak_tflops", "fraction_of_roof"):
        assert key in g
    assert g["op"] == "aten::mm" and g["flops_per_call"] == 2 * 4096 ** 3 and g["bound"] == rl.COMPUTE_BOUND
    text = cli("summarize", H200 / "4096_bf16_warm_eager.json").stdout
    assert "roofline (" in text and "compute-bound" in text.split("roofline (")[1]


def test_the_external_training_trace_is_sized_in_part_and_says_why_not_the_rest():
    r = _r(ext(BIG))
    assert r.gpu.startswith("NVIDIA A100") and r.peaks is not None
    assert r.points and 0 < r.sized_share < 1
    assert any(p.kind == "gemm" and p.dtype == "fp32" for p in r.points)
    # NCCL's kernels run under record_param_comms, which has no shapes: left out, with the reason
    assert any("record_param_comms" in n.reason for n in r.not_sized)
    assert sum(n.share for n in r.not_sized) + r.sized_share == pytest.approx(1.0)


def test_the_json_module_finds_the_same_shapes_as_msgspec(monkeypatch):
    text = (H200 / "mlp64x128x768x3072_bf16_warm_eager.json").read_bytes()
    every = (lambda name, ts: True)
    seen, found = op_shapes._scan(text, every)
    fast = [(n, tid, ts, r.shapes()) for n, tid, ts, r in found]
    monkeypatch.setattr(op_shapes, "msgspec", None)
    seen_plain, found_plain = op_shapes._scan(text, every)
    assert fast and len(fast) == seen == seen_plain
    assert fast == [(n, tid, ts, r.shapes()) for n, tid, ts, r in found_plain]


@pytest.mark.parametrize("name", ["block8x256x512_bf16_warm_eager.json", "train-fp32-loop_bf16_warm_eager.json"])
def test_alike_calls_sized_once_give_what_sizing_each_call_gives(name):
    """The roofline sizes a model's thousands of alike op calls once each (by the reader's table of shapes); with
    the shapes in a plain dict it sizes every call on its own: the same points, counts and times."""
    def points(plain: bool):
        t = read_trace(H200 / name)
        if plain:
            t.shapes = dict(t.shapes.pairs())
        r = rl.roofline(t)
        return ([(p.kernel, p.op, p.shape, p.dtype, p.count, round(p.time_us, 6)) for p in r.points],
                [(n.reason, n.kernels, round(n.time_us, 6), n.example) for n in r.not_sized])

    grouped, each = points(False), points(True)
    assert grouped == each and grouped[0] and max(p[4] for p in grouped[0]) > 10
