"""The runner: live on the CPU (the files it writes), and recorded mode's lookups."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import facts
from helpers.runs import mode, reference
from helpers.runs.profiling import Schedule, profile, recorded
from helpers.runs.runner import run_fresh
from helpers.runs.workload import BackendUnavailable, attention, matmul_add


def test_cpu_run_writes_table_and_trace(tmp_path):
    run = profile(matmul_add(64), on="cpu", out_dir=tmp_path)
    assert run.tag == "64_fp32_cold_eager" and run.mode == "cpu"
    assert (tmp_path / "64_fp32_cold_eager.json").is_file()
    assert (tmp_path / "64_fp32_cold_eager.txt").read_text() == run.table + "\n"
    assert "Self CPU time total" in run.table
    assert [s.name for s in facts.steps(run.trace)] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert facts.op_times(run.trace, "matmul_add").calls == 3
    assert run.summary.verdict is None  # no GPU work on the CPU


def test_schedule_and_warm_change_the_tag_and_the_steps(tmp_path):
    run = profile(matmul_add(32), warm=True, schedule=Schedule(0, 0, 4), on="cpu", out_dir=tmp_path)
    assert run.tag == "32_fp32_warm_eager_s0-0-4"
    assert len(facts.steps(run.trace)) == 4


def test_fresh_process_run(tmp_path):
    table, path, secs = run_fresh(matmul_add(32), "cpu", "fp32", warm=False, compile=False, compile_mode=None,
                                  schedule=Schedule(), out_dir=tmp_path)
    assert path == tmp_path / "32_fp32_cold_eager.json" and "matmul_add" in table and secs > 0


def test_recorded_mode_returns_the_reference_trace(monkeypatch):
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    mode.environment.cache_clear()
    try:
        run = profile(matmul_add(4096), warm=True)
    finally:
        mode.environment.cache_clear()
    assert run.mode == "recorded" and run.device == "NVIDIA H200"
    assert run.trace_path.name == "4096_bf16_warm_eager.json"
    assert run.summary.verdict == "GPU-bound"
    assert "Self CUDA time total" in run.table


def test_missing_scenario_names_what_is_recorded():
    with pytest.raises(reference.NotRecorded) as e:
        recorded(matmul_add(96))
    assert "96_*_cold_eager" in str(e.value) and "64_*_cold_eager" in str(e.value)
    assert "helpers.runs.record" in str(e.value)


def test_unavailable_backend_is_a_clear_error(tmp_path, h200):
    ref_dir = tmp_path / "some-gpu"
    shutil.copytree(h200, ref_dir)
    mf = json.loads((ref_dir / "manifest.json").read_text())
    key = "attn-sdpa-flash1024_*_warm_eager"
    mf["scenarios"][key] = {"status": "unavailable", "reason": "SDPA backend 'flash' is not available here: no kernel"}
    (ref_dir / "manifest.json").write_text(json.dumps(mf))
    ref = reference.ReferenceSet(ref_dir, mf)
    with pytest.raises(BackendUnavailable, match="not available"):
        recorded(attention("sdpa-flash"), warm=True, reference=ref)


def test_forcing_live_without_a_gpu_says_so(monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.setenv("PROFILING_MODE", "live")
    mode.environment.cache_clear()
    try:
        with pytest.raises(mode.ModeError, match="no CUDA GPU"):
            mode.environment()
    finally:
        mode.environment.cache_clear()


def test_recorded_banner_names_the_gpu_and_date(monkeypatch):
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    mode.environment.cache_clear()
    try:
        e = mode.environment()
    finally:
        mode.environment.cache_clear()
    line = e.banner()
    assert line.startswith("RECORDED") and "NVIDIA H200" in line
    assert e.reference.date in line and "torch" in line


def test_unknown_reference_set(monkeypatch):
    monkeypatch.setenv("PROFILING_REFERENCE", "no-such-gpu")
    with pytest.raises(reference.NotRecorded, match="no-such-gpu"):
        reference.reference_set()


def test_a_broken_manifest_is_reported_and_skipped(tmp_path, monkeypatch, h200):
    shutil.copytree(h200, tmp_path / "good-gpu")
    (tmp_path / "broken-gpu").mkdir()
    (tmp_path / "broken-gpu" / "manifest.json").write_text('{"gpu": {"name": "X"}, "scenarios": {')
    (tmp_path / "list-gpu").mkdir()
    (tmp_path / "list-gpu" / "manifest.json").write_text("[]")
    monkeypatch.setattr(reference, "REFERENCE", tmp_path)
    with pytest.warns(UserWarning) as said:
        sets = reference.reference_sets()
    assert [s.path.name for s in sets] == ["good-gpu"]  # the others are skipped, and the good one still serves
    broken, listed = sorted(str(w.message) for w in said)
    assert str(tmp_path / "broken-gpu" / "manifest.json") in broken and "cannot be read as JSON" in broken
    assert "Expecting" in broken  # the JSON error itself
    assert str(tmp_path / "list-gpu" / "manifest.json") in listed and "not a manifest" in listed


def test_a_dataloader_step_is_not_timed_alone_and_a_stale_timing_goes(tmp_path):
    """Steps fed by a DataLoader are timed in turn (comparisons), never alone after three warm-up steps."""
    pytest.importorskip("torch")
    from helpers.runs.timing import timing_path
    from helpers.runs.training import input_pipeline

    w = input_pipeline(batch=4, size=32, work=200)
    assert not w.timed and matmul_add(8).timed
    tag = "input-w0-32_fp32_warm_eager"
    stale = timing_path(tmp_path / f"{tag}.json")
    stale.write_text('{"host_us": 1.0}')
    run = profile(w, warm=True, on="cpu", out_dir=tmp_path)
    assert run.tag == tag and run.timing is None and not stale.exists()
    assert profile(matmul_add(8), warm=True, on="cpu", out_dir=tmp_path).timing is not None


def test_a_run_whose_timing_nobody_reads_is_not_timed(tmp_path):
    """profile(timed=False): a warm CPU run is profiled as usual, not timed alone first, and a timing an earlier run
    of the same tag left is not read as this run's."""
    pytest.importorskip("torch")
    from helpers.runs.timing import timing_path

    timed = profile(matmul_add(16), warm=True, on="cpu", out_dir=tmp_path, schedule=Schedule(1, 1, 3))
    assert timed.timing is not None and timing_path(timed.trace_path).exists()
    bare = profile(matmul_add(16), warm=True, on="cpu", out_dir=tmp_path, schedule=Schedule(1, 1, 3), timed=False)
    assert bare.tag == timed.tag and bare.timing is None and not timing_path(bare.trace_path).exists()
    assert len(facts.steps(bare.trace)) == 3 and bare.cpu_per_call.n == 2  # the trace as before
