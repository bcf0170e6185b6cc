"""What review rounds aa to ff of diagnose's words found, each pinned on the trace that showed it.

Traces nobody here wrote are read from ``../shared/external-traces`` and skipped with a reason where absent.
"""

from __future__ import annotations

import re

from conftest import ROOT, diagnosed, ext, findings_by_rule
from helpers.advice.diagnose import diagnose_folder
from helpers.advice.ledger import Gain


def test_a_point_figure_at_an_end_of_its_range_is_said_as_the_range():
    """A point equal to its high end reads as a typical gain where it is a bound: only the range is printed."""
    assert Gain(1.19, 1.05, 1.19, "b").words() == "fixing this should make the step 1.05x to 1.19x faster"
    assert Gain(1.19, 1.05, 1.19, "b").how_much() == "1.05x to 1.19x"
    assert Gain(1.19, 1.09, 1.19, "b").how_much() == "about 1.19x"  # a range within 10% is not printed
    assert Gain(1.5, 1.2, 2.0, "b").words() == "fixing this should make the step about 1.5x faster (1.2x to 2x)"


def test_every_gain_on_one_ranks_trace_says_the_job_waits_for_its_slowest_rank():
    """DLRM's worker 0 waits in its collectives for later ranks: its communication-bound and input-bound gains
    would only move that wait, so their basis says the job's step shortens only as far as the slowest rank's."""
    worker0 = next(ext("param_dlrm_8rank").glob("worker0*"))
    found = diagnosed(str(worker0))
    sized = [f for f in found if f.gain is not None]
    assert {"communication-bound", "input-bound"} <= {f.rule.value for f in sized}
    assert all("this trace is one rank of 8" in f.gain.basis for f in sized)


def test_a_straggler_that_reached_the_recorded_step_late_is_told_to_record_the_steps_before():
    """DLRM's rank 7 enters the first all-to-all 7.6 ms after rank 1, yet its own recorded step began 7.5 ms later:
    from its window's start it is as quick as the others, so what delayed it lies in the steps before, unrecorded."""
    d = diagnose_folder(ext("param_dlrm_8rank"))
    (f,) = [x for x in d.together if x.rule.value == "straggler"]
    (line,) = [e for e in f.evidence if "recorded window began" in e]
    began, entered = map(float, re.findall(r"began ([\d.]+) ms after rank 1's, and it entered its first matched "
                                           r"collective ([\d.]+) ms", line)[0])
    assert began >= 0.8 * entered and entered > 7
    # every rank records ProfilerStep#10: rank 7 reached that step late, so the cause is in the steps before it
    assert f.next.startswith("every rank records the same step (ProfilerStep#10), and rank 7 reached it late")


def test_waits_in_a_labelled_block_are_counted_as_the_part_they_are():
    """trace_diff's rank: 6 of its 60 waits sit in '## permute_id_list_features ##', the rest in TorchRec's own
    exchanges; the evidence says how many, not that the waits sit there."""
    f = findings_by_rule(ext("hta_trace_diff_control_control.json.gz"))["hidden-sync"]
    (line,) = [e for e in f.evidence if "record_function block" in e]
    assert line.startswith("6 of the 60 waits (")


def test_an_all_to_all_is_not_told_to_tune_ddp_buckets():
    """trace_diff's exposed collectives are mostly an embedding all-to-all, in a loop TorchRec pipelines already (its
    labels are in the trace): the advice says so, not DDP's bucket_cap_mb; an all-reduce job (the H200 pair) keeps
    DDP's advice."""
    f = findings_by_rule(ext("hta_trace_diff_control_control.json.gz"))["low-overlap"]
    assert "exchanges data between ranks (all-to-all, send and receive: alltoall" in f.next
    assert "bucket_cap_mb" not in f.next and "pipelined training loop's own" in f.next  # TorchRec's labels are there
    manual = diagnose_folder(ROOT / "traces/ranks/h200x2-manual").together
    assert any("bucket_cap_mb" in x.next for x in manual if x.rule.value == "low-overlap")


def test_compiled_code_is_not_told_to_compile():
    """xDiT's step is inside a Torch-Compiled Region already: the CPU-side advice is CUDA graphs, not fusing."""
    f = findings_by_rule(ext("tracelens_xdit_sd35_rank0.json.gz"))["cpu-bound"]
    assert f.next.startswith("the step runs compiled code already") and "mode='reduce-overhead'" in f.next


def test_inside_collectives_gives_its_share_in_the_title():
    """The title says the share of the window in collectives (57% on DLRM's worker 1), which the threshold
    guarantees is over half; the bracketed share is the part with nothing beside it."""
    worker1 = next(ext("param_dlrm_8rank").glob("worker1*"))
    f = diagnosed(str(worker1))[0]
    assert f.rule.value == "inside-collectives"
    share = int(re.search(r"Inside collectives: (\d+)% of this rank's window", f.title).group(1))
    assert share >= 50 and share / 100 > f.share


def test_a_cpu_only_rank_with_most_of_its_window_unrecorded_is_told_so():
    """Exam 9's rank 0, read alone, records no op for about 40 ms at the start of each step (two thirds of its
    window): diagnose says so, where it used to find no rule; the rank inside its gloo collectives does not."""
    exam9 = ROOT / "traces/exam/nvidia-h200/exam-9"
    f = diagnosed(str(exam9 / "rank0.json"))[0]
    assert f.rule.value == "not-recorded" and f.title.startswith("Time the profiler does not see")
    assert f.share > 0.5 and "'train_step' in ProfilerStep#" in f.evidence[1]
    assert all(not x.title.startswith("Time the profiler") for x in diagnosed(str(exam9 / "rank1.json")))


def test_copies_that_all_ran_before_the_first_kernel_are_called_set_up():
    """AlexNet's 16 pageable copies (its layers' weights, 233 MiB) all end before its first kernel: most likely the
    model moving to the GPU once, which the advice says before telling a loop to pin its batches."""
    f = findings_by_rule(ext("hta_critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"))[
        "pageable-copies"]
    assert any(e.startswith("all of them ran before the first kernel") for e in f.evidence)
    assert f.next.startswith("if these are one-time copies")


def test_the_generic_cpu_side_gain_is_a_hypothesis_ranked_by_its_low_end():
    """No fix of this project was timed to halve a step's CPU work: CPU-bound's gain says 'as a hypothesis', and
    the foreach training step puts fused AdamW (timed 1.19x) first."""
    found = diagnosed(str(ROOT / "traces/reference/nvidia-h200/train-fp32-foreach_bf16_warm_eager.json"))
    cpu = next(f for f in found if f.rule.value == "cpu-bound")
    assert cpu.gain.hypothesis and cpu.gain.words().startswith("as a hypothesis")
    assert found[0].rule.value == "unfused-optimizer" and cpu.gain.speedup > found[0].gain.speedup > cpu.gain.low


def test_a_gpu_idle_mid_run_with_work_queued_is_not_said_to_have_started_late():
    """HTA's sampled rank: its longest queued stretch (58.86 ms) sits mid-run, before a collective launched long
    before; vLLM's graphs really start late (the GPU's first work 151 ms in). The titles say which."""
    sampled = findings_by_rule(ext("hta_trace_filter/sampled_rank-0.json.gz"))["gpu-behind"]
    vllm = findings_by_rule(ext("tracelens_vllm_piecewise_graph_execution.json.gz"))["gpu-behind"]
    assert sampled.title.startswith("The GPU idle with its next work queued")
    assert vllm.title.startswith("The GPU started late")
