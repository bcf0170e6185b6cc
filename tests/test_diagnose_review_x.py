"""What review round x of diagnose's words found, each pinned on the trace that showed it.

Traces nobody here wrote are read from ``../shared/external-traces`` and skipped with a reason where absent.
"""

from __future__ import annotations

from conftest import ROOT, diagnosed, ext, findings_by_rule
from helpers.advice.distributed import diagnose_ranks
from helpers.advice.ledger import Gain
from helpers.facts.ranks import read_ranks
from helpers.facts import step_facts
from helpers.reader.trace import read_trace


def test_two_kinds_of_launch_get_no_median_share_and_are_timed_apart():
    """vLLM's attention kernel alternates about 133 and 297 us: the median between them describes neither, so the
    note claims no share beyond it, gives each kind's median, and says to time the kinds apart."""
    f = findings_by_rule(ext("tracelens_vllm_piecewise_graph_execution.json.gz"))["kernel-variance"]
    assert f.share is None
    assert "short ones' median" in f.evidence[1] and "long ones'" in f.evidence[1]
    assert f.next.startswith("time the long and the short launches apart")


def test_a_gpu_running_queued_work_back_to_back_leads_as_gpu_bound():
    """vLLM's CPU events end before the GPU starts, then the GPU is busy to the end: GPU-bound comes first, said
    from the GPU's first work on, not over the whole window."""
    found = diagnosed(str(ext("tracelens_vllm_piecewise_graph_execution.json.gz")))
    assert found[0].rule.value == "gpu-bound"
    assert found[0].evidence[0].startswith("from its first work on, the GPU ran back to back")


def test_a_copy_from_pageable_memory_to_an_idle_gpu_is_not_a_wait():
    """sampled_rank-0 has no synchronize call; its small copies to the GPU began when the GPU had no earlier work
    left, so they waited for nothing: only the copies to the host (which return once done) are waits."""
    t = read_trace(ext("hta_trace_filter/sampled_rank-0.json.gz"))
    waits = step_facts.hidden_syncs(t)
    assert waits and all("Pageable -> Device" not in (w.copy or "") for w in waits)


def test_a_filtered_trace_without_stream_events_is_said_to_be_one():
    found = findings_by_rule(ext("hta_trace_filter/sampled_rank-0.json.gz"))
    assert any("no stream-event call" in e for e in found["gpu-behind"].evidence)
    assert "sdd_" in "".join(found["hidden-sync"].evidence)  # TorchRec's sparse-data-dist steps: the library's
    assert "from Python data" not in "".join(found["hidden-sync"].evidence)


def test_time_with_no_op_recorded_is_a_clue_only_where_the_straggler_has_more_of_it():
    """exam 9's ranks both have about 130 ms with no op recorded, but rank 1's lies inside its gloo collectives
    (recorded time: it waits there) and rank 0's outside: set against each other, rank 0's is the clue."""
    lead = diagnose_ranks(read_ranks(ROOT / "traces" / "exam" / "nvidia-h200" / "exam-9"))[0]
    line = next(e for e in lead.evidence if "on any CPU thread" in e)
    assert "hypothesis to test" in line and "does not tell the ranks apart" not in line
    other = float(line.split("the other rank's ")[1].split(" ms")[0])
    assert other < 20  # rank 1's own no-op time, its gloo spans counted as recorded


def test_a_rank_inside_its_collectives_still_says_how_long_its_gpu_waited_for_the_cpu():
    path = next(ext("param_dlrm_8rank").glob("worker1*"))
    f = findings_by_rule(path)["inside-collectives"]
    assert any(e.startswith("the GPU also waited for the CPU") for e in f.evidence)


def test_a_high_end_that_counts_other_fixes_says_so_beside_the_range():
    """worker0's input-bound: 1.08x alone, 2.2x with the other fixes (review aa: said as the fix's own gain first)."""
    g = Gain(1.08, 1.08, 2.2, "basis", high_shared=True)
    assert g.words() == ("fixing this alone should make the step about 1.08x faster; with what the other findings' "
                         "fixes win too, up to 2.2x")
    assert "the high end counting other fixes' gains too" in Gain(1.5, 1.2, 2.2, "basis", high_shared=True).words()
    assert "counting" not in Gain(1.08, 1.05, 2.2, "basis").words()
