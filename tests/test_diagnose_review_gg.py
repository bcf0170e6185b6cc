"""What review round ff of diagnose's words left for later, each pinned on the trace that showed it.

Traces nobody here wrote are read from ``../shared/external-traces`` and skipped with a reason where absent.
"""

from __future__ import annotations

import re

from conftest import ROOT, diagnosed, ext, findings_by_rule, raw_events
from helpers.advice.diagnose import diagnose_folder, first_line
from helpers.advice.ledger import times

RANKS = ROOT / "traces" / "ranks"


def _window_ms(folder) -> float:
    """The slowest rank's span from its first ProfilerStep to its last GPU event's end, read with json alone."""
    spans = []
    for path in sorted(folder.glob("rank*.json.gz")):
        ev = [e for e in raw_events(path) if e.get("ph") == "X"]
        start = min(e["ts"] for e in ev if e["name"].startswith("ProfilerStep#"))
        end = max(e["ts"] + e["dur"] for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
        spans.append((end - start) / 1e3)
    return max(spans)


def test_the_stragglers_range_holds_the_sibling_recording_without_its_extra_work():
    """h200x2-straggler is h200x2-ddp with 20 extra matrix products on rank 1: the DDP pair's window is the step
    with the straggler's extra work gone, so the ratio of the two windows must lie in the straggler's range."""
    (f,) = [x for x in diagnose_folder(RANKS / "h200x2-straggler").together if x.rule.value == "straggler"]
    ratio = _window_ms(RANKS / "h200x2-straggler") / _window_ms(RANKS / "h200x2-ddp")
    assert ratio > 1.5  # (the pair as recorded: about 1.6x)
    assert f.gain.low <= ratio <= f.gain.high, (ratio, f.gain)


def test_the_overlap_range_holds_the_ddp_recording_of_the_same_job():
    """h200x2-manual all-reduces after the whole backward pass; h200x2-ddp runs the same job with DDP's overlap,
    which also adds GPU work of its own: the manual pair's low-overlap range must hold the two windows' ratio."""
    (f,) = [x for x in diagnose_folder(RANKS / "h200x2-manual").together if x.rule.value == "low-overlap"]
    ratio = _window_ms(RANKS / "h200x2-manual") / _window_ms(RANKS / "h200x2-ddp")
    assert 1.0 < ratio < 1.1
    assert f.gain.low <= ratio <= f.gain.high, (ratio, f.gain)
    assert "the low end: no gain" in f.gain.basis


def test_a_cold_recording_sizes_no_cpu_side_gain():
    """The AMD minitoy recording is held by a 6.5 ms first hipLaunchKernel: the CPU's work left between launches
    may be set-up too, so CPU-bound stays an issue with no gain, and says why."""
    found = findings_by_rule(ext("hta_amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert "long-call" in found
    f = found["cpu-bound"]
    assert f.gain is None
    assert any("no gain is sized here; a recording made after warm-up can size it" in e for e in f.evidence)


def test_a_ranks_long_wait_during_its_collectives_is_said():
    """DLRM's worker 1 waits 6.56 ms in one cudaStreamSynchronize inside DistributedDataParallel.forward while its
    GPU runs collectives: the inside-collectives finding says so (hidden-sync leaves waits for collectives out)."""
    path = next(ext("param_dlrm_8rank").glob("worker1*"))
    longest = max(e["dur"] for e in raw_events(path) if e.get("name") == "cudaStreamSynchronize")
    assert longest > 6000
    f = findings_by_rule(path)["inside-collectives"]
    (line,) = [e for e in f.evidence if "while the GPU ran collectives" in e]
    said = float(re.search(r"the longest: ([\d.]+) ms of it in cudaStreamSynchronize", line).group(1))
    assert 0.9 * longest / 1e3 <= said <= longest / 1e3
    assert "DistributedDataParallel.forward" in line


def test_ddps_own_waits_are_not_sent_to_set_sync_debug_mode():
    """HTA's NCCL trace's 24 waits are cudaEventSynchronize calls with no ATen op around them, under
    DistributedDataParallel.forward: DDP's own code, which no line of the user's names."""
    f = findings_by_rule(ext("hta_nccl_parser_config_nccl_data.json.gz"))["hidden-sync"]
    assert "set_sync_debug_mode" not in f.next
    assert "DDP's own" in f.next
    assert any("its own code waits here, not a line of yours" in e for e in f.evidence)


def test_one_copy_back_a_step_is_not_told_to_copy_less_often():
    """xDiT's step copies its 6 MiB result to the CPU once: that copy cannot be made rarer, only not waited for."""
    f = findings_by_rule(ext("tracelens_xdit_sd35_rank0.json.gz"))["hidden-sync"]
    assert "copy results to the CPU less often" not in f.next
    assert f.next.startswith("one copy to the CPU a step (most likely the step's result")


def test_a_spread_of_ten_percent_is_no_kernel_variance():
    """owlv2's 120 alike softmax launches lie within +10% of their median: ordinary jitter, no finding; vLLM's
    +46% keeps its (tests/test_diagnose_review_x.py)."""
    assert "kernel-variance" not in findings_by_rule(ext("tracelens_h100_owlv2.json.gz"))
    assert "kernel-variance" in findings_by_rule(ext("tracelens_vllm_piecewise_graph_execution.json.gz"))


def test_a_one_time_costs_far_high_end_stays_out_of_the_first_line():
    """Exam 7 is almost all compiling: the first line gives the low end, the finding's own lines the high end."""
    found = diagnosed(str(ROOT / "traces" / "exam" / "nvidia-h200" / "exam-7.json"))
    f = found[0]
    assert f.rule.value == "recompiles" and f.gain.high > 100
    line = first_line(found)
    assert f"at least {times(f.gain.low)} shorter" in line and "up to" not in line
    assert f"up to {times(f.gain.high)} with all of it gone" in f.gain.words()


def test_the_after_last_work_share_says_what_other_findings_took_of_it():
    """Triton's example: the GPU waits 174.6 us (11%) after its last work, of which the compiled call's finding
    claims part: the evidence says how much, so that the 8% share adds up."""
    f = findings_by_rule(ext("hta_triton_example_triton_example.json.gz"))["cpu-bound"]
    m = re.search(r"waited ([\d.]+) us of the ([\d.]+) ms window \((\d+)%\).*explain ([\d.]+) us of it, and the "
                  r"remaining ([\d.]+) us are this finding's", f.evidence[0])
    waited, window, _, other, left = (float(x) for x in m.groups())
    assert abs(other + left - waited) < 0.2
    assert round(100 * left / (window * 1e3)) == int(f.amount.split("%")[0])
