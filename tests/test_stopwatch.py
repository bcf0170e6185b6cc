"""Where a notebook's time goes: the stopwatch's phases, a fresh process's start-up, the breakdown's table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT
from helpers.classroom import breakdown, preflight
from helpers.runs import stopwatch


def test_off_by_default_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(stopwatch.STOPWATCH_VAR, raising=False)
    with stopwatch.phase("warm run on the CPU", "x"):
        pass
    assert not stopwatch.enabled() and stopwatch.read(tmp_path / "none.jsonl") == []
    assert stopwatch.spawn_env({"A": "1"}) == {"A": "1"}  # no stamp when off


def test_a_profiled_cpu_run_is_split_into_its_phases(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from helpers.runs.profiling import profile
    from helpers.runs.workload import matmul_add

    log = tmp_path / "nb.stopwatch.jsonl"
    monkeypatch.setenv(stopwatch.STOPWATCH_VAR, str(log))
    run = profile(matmul_add(32), warm=True, on="cpu", out_dir=tmp_path)
    run.trace  # noqa: B018  reading the trace is a phase of its own
    rows = stopwatch.read(log)
    top = [r for r in rows if r["depth"] == 0]
    assert [r["kind"] for r in top] == ["warm run on the CPU", "read trace"]
    inner = {r["kind"] for r in rows if r["depth"] == 1}
    assert {"build", "warm-up calls", "unprofiled timing", "profiled steps", "table and export"} <= inner
    whole = top[0]["seconds"]
    assert sum(r["seconds"] for r in rows if r["depth"] == 1) <= whole + 1e-3  # the parts fit inside the run

    b = breakdown.of_notebook("99_test", whole + 5.0, 1.5, log)
    assert b.counts["CPU"] == 1 and b.columns["CPU"] == pytest.approx(whole, abs=1e-3)
    assert b.columns["kernel"] == 1.5 and b.rest == pytest.approx(5.0 - 1.5 - b.columns["read"], abs=1e-3)
    text = breakdown.table([b])
    assert text.splitlines()[1].startswith("99_test") and "(1)" in text.splitlines()[1]


def test_a_fresh_process_reports_its_start_up(tmp_path, monkeypatch):
    """A cold run's process writes to the parent's file, from the moment the parent started it."""
    log = tmp_path / "nb.stopwatch.jsonl"
    monkeypatch.setenv(stopwatch.STOPWATCH_VAR, str(log))
    with stopwatch.phase("cold run (fresh process)", "matmul_add"):
        code = "from helpers.runs import stopwatch; stopwatch.started_by_parent('fresh process start-up', 'x')"
        env = stopwatch.spawn_env(dict(os.environ, PYTHONPATH=str(ROOT)))
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
    rows = stopwatch.read(log)
    child = [r for r in rows if r["pid"] != os.getpid()]
    assert [r["kind"] for r in child] == ["fresh process start-up"] and child[0]["seconds"] > 0
    parent = next(r for r in rows if r["pid"] == os.getpid())
    assert child[0]["seconds"] <= parent["seconds"]
    b = breakdown.of_notebook("99_test", 10.0, 1.0, log)
    assert b.counts["cold"] == 1 and set(b.fresh) == {"fresh process start-up"}
    assert "cold runs' fresh processes" in breakdown.table([b])


def test_a_line_per_phase_survives_a_torn_file(tmp_path):
    log = tmp_path / "x.jsonl"
    log.write_text(json.dumps({"kind": "read trace", "what": "", "start": 1.0, "seconds": 0.5, "pid": 1,
                               "depth": 0}) + "\n\n")
    assert len(stopwatch.read(log)) == 1


def test_preflight_warns_when_torch_is_compiled_again_in_every_process(tmp_path):
    """No bytecode for torch and none may be written: the H200 host's set-up, seconds a process."""
    pytest.importorskip("torch")
    code = "from helpers.classroom.preflight import bytecode_note; print(bytecode_note())"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "PYTHONDONTWRITEBYTECODE is set" in out and "compileall" in out
    assert preflight.bytecode_note() is None or "compileall" in preflight.bytecode_note()
