"""Volume two's facts on the traces recorded for them: waits, the input pipeline, copies, the optimizer, backward, GEMM arithmetic."""

from __future__ import annotations

from collections import Counter

import pytest

from conftest import ext, raw_events
from helpers.facts import kernel_kinds as kk, step_facts as sf, steps
from helpers import facts
from helpers.reader.trace import read_trace


def load(h200, tag):
    return read_trace(h200 / f"{tag}_bf16_warm_eager.json")


# --- waits for the GPU -------------------------------------------------------------------


def test_the_four_syncing_lines_are_found_and_named(h200):
    t = load(h200, "train-fp32-foreach-syncs")
    syncs = sf.hidden_syncs(t)
    assert len(syncs) == 12
    per_step = Counter(s.step for s in syncs)
    assert per_step == {"ProfilerStep#2": 4, "ProfilerStep#3": 4, "ProfilerStep#4": 4}
    # in the order the lines run: .item(), `if tensor:`, the boolean mask, .cpu()
    causes = [s.cause_op for s in syncs if s.step == "ProfilerStep#3"]
    assert causes == ["aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero", "aten::_to_copy"]
    assert [s.op for s in syncs[:4]] == ["aten::_local_scalar_dense", "aten::_local_scalar_dense", "aten::nonzero",
                                         "aten::copy_"]
    assert {s.annotation for s in syncs} == {"bookkeeping"}
    assert all(s.calls == ["cudaMemcpyAsync", "cudaStreamSynchronize"] and not s.explicit for s in syncs)
    assert [s.copy for s in syncs[:4]] == ["Memcpy DtoH (Device -> Pinned)"] * 3 + ["Memcpy DtoH (Device -> Pageable)"]
    assert [s.copy_bytes for s in syncs[:4]] == [4, 1, 4, 512 * 8]  # a float32 loss, a bool, a count, y (int64)
    # after each wait the GPU has nothing queued: it idles until the CPU launches again
    assert all(s.gpu_idle_after_us > 0 for s in syncs[:-1])
    assert syncs[-1].gpu_idle_after_us is None  # the last step's .cpu(): no GPU work after it in the trace


def test_every_wait_in_the_steps_is_counted_against_the_raw_events(h200):
    path = h200 / "train-fp32-foreach-syncs_bf16_warm_eager.json"
    raw = [e for e in raw_events(path) if e.get("ph") == "X"]
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in raw if e["name"].startswith("ProfilerStep#")]
    waits = [e for e in raw if e["name"] == "cudaStreamSynchronize" and any(lo <= e["ts"] <= hi for lo, hi in windows)]
    closing = [e for e in raw if e["name"] == "cudaDeviceSynchronize"]
    assert len(waits) == 12 and len(closing) == 1
    t = read_trace(path)
    assert sum(s.calls.count("cudaStreamSynchronize") for s in sf.hidden_syncs(t)) == len(waits)
    assert all("cudaDeviceSynchronize" not in s.calls for s in sf.hidden_syncs(t))  # the profiler's, after the steps


@pytest.mark.parametrize("tag", ["train-fp32-foreach", "train-fp32-fused", "train-amp-foreach", "input-w0-pin-nb"])
def test_no_waits_in_clean_steps(h200, tag):
    assert sf.hidden_syncs(load(h200, tag)) == []


def test_the_runners_synchronize_stays_out_of_the_recorded_steps(h200):
    """The memory runs synchronize before resetting the allocator's peak: before the first recorded step opens."""
    for tag in ("train-fp32-foreach-mem-b4096", "train-fp32-foreach-mem-ckpt-b4096"):
        assert sf.hidden_syncs(load(h200, tag)) == []


def test_a_copy_from_pageable_memory_waits(h200):
    syncs = sf.hidden_syncs(load(h200, "input-w0"))
    assert len(syncs) == 6 and {s.annotation for s in syncs} == {"to_device"}
    assert {s.copy for s in syncs} == {"Memcpy HtoD (Pageable -> Device)"}
    assert sorted({s.copy_bytes for s in syncs}) == [256, 32 * 3 * 128 * 128 * 4]  # the labels, the images


# --- the input pipeline ------------------------------------------------------------------


def test_without_workers_the_step_is_the_dataloader(h200):
    spans = sf.dataloader_spans(load(h200, "input-w0"))
    assert [s.step for s in spans] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert all(s.name == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" for s in spans)
    assert all(s.step_share > 0.9 and s.gpu_idle_share > 0.99 for s in spans)


def test_dataloader_spans_with_workers_are_the_multiprocessing_iterator(h200):
    """Each span's share is its length over its own step's (steps read apart from the spans), in time order."""
    t = load(h200, "input-w4-pin-nb")
    spans = sf.dataloader_spans(t)
    steps = {s.name: s for s in facts.steps(t)}
    assert len(spans) == len(steps) and all("_MultiProcessingDataLoaderIter" in s.name for s in spans)
    for s in spans:
        assert s.step_share == pytest.approx(s.dur_us / steps[s.step].dur_us)
    assert [s.start_us for s in spans] == sorted(s.start_us for s in spans)


def test_no_dataloader_no_spans(h200):
    assert sf.dataloader_spans(load(h200, "train-fp32-foreach")) == []


def test_pinned_copies_run_faster_than_pageable_ones(h200):
    (pageable,) = sf.h2d_copies(load(h200, "input-w0"))
    (pinned,) = sf.h2d_copies(load(h200, "input-w0-pin-nb"))
    assert (pageable.memory, pageable.count, pageable.bytes) == ("pageable", 6, 3 * (6291456 + 256))
    assert (pinned.memory, pinned.count, pinned.bytes) == ("pinned", 6, pageable.bytes)
    assert pageable.gb_per_s == pytest.approx(pageable.bytes / pageable.total_us / 1e3)
    assert pinned.gb_per_s > 2 * pageable.gb_per_s
    assert sf.h2d_copies(load(h200, "train-fp32-foreach")) == []


def test_a_copy_from_host_memory_of_unknown_kind(external):
    """ROCm names the source only 'Host' and records no size: neither pageable nor pinned, and no rate."""
    (c,) = sf.h2d_copies(read_trace(ext("hta_amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz")))
    assert (c.memory, c.bytes, c.gb_per_s) == ("host", None, None)


# --- the optimizer -----------------------------------------------------------------------


@pytest.mark.parametrize("tag, implementation, launches", [
    ("train-fp32-fused", "fused", 2), ("train-fp32-foreach", "foreach", 8), ("train-fp32-loop", "loop", 80)])
def test_optimizer_implementation_and_launches(h200, tag, implementation, launches):
    t = load(h200, tag)
    calls = sf.optimizer_work(t)
    assert len(calls) == 3 and {c.step for c in calls} == {s.name for s in steps(t)}
    assert {(c.optimizer, c.implementation, c.launches) for c in calls} == {("AdamW", implementation, launches)}
    same = sf.optimizer_work(t, None)  # torch.optim's own spans, inside the label
    assert [c.launches for c in same] == [c.launches for c in calls] and same[0].name == "Optimizer.step#AdamW.step"


def test_fused_adamw_takes_less_gpu_time(h200):
    gpu = {tag: min(c.gpu_us for c in sf.optimizer_work(load(h200, f"train-fp32-{tag}"))) for tag in
           ("fused", "foreach", "loop")}
    assert gpu["fused"] < gpu["foreach"] and gpu["fused"] < gpu["loop"]
    assert "aten::_fused_adamw_" in sf.optimizer_work(load(h200, "train-fp32-fused"))[0].ops


def test_no_such_annotation_no_calls(h200):
    assert sf.optimizer_work(load(h200, "train-fp32-foreach"), "no such label") == []
    assert sf.optimizer_work(read_trace(h200 / "4096_bf16_warm_eager.json"), None) == []


# --- backward ----------------------------------------------------------------------------


def test_backward_ops_link_to_their_forward_ops(h200):
    t = load(h200, "train-fp32-foreach")
    ops = sf.backward_ops(t)
    pairs = Counter((b.name, b.forward_op) for b in ops)
    assert pairs == {("torch::autograd::AccumulateGrad", None): 30, ("AddmmBackward0", "aten::addmm"): 15,
                     ("TBackward0", "aten::t"): 15, ("GeluBackward0", "aten::gelu"): 6,
                     ("NllLossBackward0", "aten::nll_loss_forward"): 3,
                     ("LogSoftmaxBackward0", "aten::_log_softmax"): 3}
    # on CUDA, backward runs on autograd's own thread; the forward on the main thread
    assert {b.lane.rsplit(" ", 1)[-1] for b in ops} == {"(pt_autograd_0)"}
    main = t.lanes[__import__("helpers.facts", fromlist=["main_thread"]).main_thread(t)].label
    assert {b.forward_lane for b in ops if b.forward_op} == {main}  # whatever the process calls itself
    addmm = [b for b in ops if b.name == "AddmmBackward0"]
    assert all(b.launches > 0 and b.gpu_us > 0 for b in addmm)
    assert all(b.gpu_us == 0 for b in ops if b.name == "TBackward0")  # a transpose of strides: no kernel
    # the forward op starts before its backward op, and in the same step
    for b in ops:
        if b.forward_op:
            assert b.sequence is not None and b.step is not None


def test_backward_nodes_account_for_all_gpu_work_launched_from_autograds_thread(h200):
    """Each node's GPU time, summed, is all that autograd's thread launched: nothing counted twice, nothing lost."""
    from helpers.facts import gpu_work

    t = load(h200, "train-fp32-foreach")
    ops = sf.backward_ops(t)
    lane = next(ln.index for ln in t.lanes if ln.label.endswith("(pt_autograd_0)"))
    launched = [j for j in gpu_work(t) if t.launch_of(j) >= 0 and t.lane[t.launch_of(j)] == lane]
    assert sum(b.launches for b in ops) == len(launched) == 69  # 23 a step
    assert sum(b.gpu_us for b in ops) == pytest.approx(sum(t.dur[j] for j in launched))


# --- GEMM arithmetic ---------------------------------------------------------------------


def test_gemm_arithmetic_follows_the_precision_setting(h200):
    def shares(tag):
        return {g.math: g.share for g in sf.gemm_precision(load(h200, tag))}

    fp32, tf32, amp = shares("train-fp32-foreach"), shares("train-tf32-foreach"), shares("train-amp-foreach")
    assert fp32[kk.FP32_SIMT] > 0.95 and kk.TF32 not in fp32
    assert tf32[kk.TF32] > 0.9 and kk.FP32_SIMT not in tf32
    assert kk.FP32_SIMT not in amp and kk.TF32 not in amp and amp[kk.TENSOR_CORES] + amp[kk.HALF] > 0.9
    assert sf.compute_capability(load(h200, "train-fp32-foreach")) == (9, 0)


def test_every_gemm_name_of_the_three_precisions(h200):
    """Every GEMM kernel name in the fp32, tf32 and amp runs, classified: the split-K reductions alone say nothing."""
    want = {"train-fp32-foreach": kk.FP32_SIMT, "train-tf32-foreach": kk.TF32}
    for tag, math in want.items():
        names = {e["name"] for e in raw_events(h200 / f"{tag}_bf16_warm_eager.json") if e.get("cat") == "kernel"
                 and kk.classify(e["name"]) == kk.GEMM}
        assert names
        for n in names:
            assert kk.gemm_math(n) == (None if "splitKreduce" in n else math), n


def test_gemm_names_of_other_gpus():
    assert kk.gemm_math("ampere_sgemm_128x64_nn") == kk.FP32_SIMT
    assert kk.gemm_math("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4>") == kk.TF32
    assert kk.gemm_math("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw") == kk.TF32
    assert kk.gemm_math("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn") == kk.HALF
    assert kk.gemm_math("Cijk_Ailk_Bjlk_SB_MT64x16x16_MI16x16x1") is None  # ROCm: the name does not say


def test_an_amd_gpu_is_not_taken_for_an_nvidia_one(external):
    t = read_trace(ext("hta_amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert sf.compute_capability(t) == (9, 0) and not sf.is_nvidia(t)


def test_dataloader_share_is_the_spans_over_the_steps(h200):
    t = load(h200, "input-w0")
    total = sum(s.dur_us for s in sf.dataloader_spans(t)) / sum(s.dur_us for s in facts.steps(t))
    assert sf.dataloader_share(t) == pytest.approx(total, rel=0.05)  # steps of near-equal length: mean of shares
    assert sf.dataloader_share(load(h200, "train-fp32-foreach")) == 0.0
