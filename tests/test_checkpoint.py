"""Checkpoints compare a notebook's facts with its golden file and print one line that states none of them."""

from __future__ import annotations

import json

import pytest

from helpers.lesson import checkpoint


@pytest.fixture
def golden(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "GOLDEN", tmp_path)
    monkeypatch.setattr(checkpoint, "_compared_here", lambda: None)  # as in CI: recorded mode, the golden set
    return tmp_path


def test_record_then_match_prints_no_fact(golden, monkeypatch, capsys):
    facts = {"GPU work per call": {"gemm": 1, "copy": 1}, "verdict": "overhead-bound", "steps": ("#2", "#3")}
    monkeypatch.setenv(checkpoint.CHECKPOINT_VAR, "record")
    checkpoint.check("99", lambda: facts)  # as the notebooks pass them (tools/refresh_checkpoints.py records so)
    recorded = capsys.readouterr().out
    monkeypatch.delenv(checkpoint.CHECKPOINT_VAR)
    checkpoint.check("99", facts)
    compared = capsys.readouterr().out
    assert recorded == compared == "checkpoint 99: 3 facts match tests/golden/99.json\n"
    assert "gemm" not in compared and "overhead" not in compared
    assert json.loads((golden / "99.json").read_text())["steps"] == ["#2", "#3"]


def test_a_changed_fact_fails_and_names_it(golden):
    (golden / "99.json").write_text(json.dumps({"verdict": "overhead-bound", "kinds": {"gemm": 1}}))
    with pytest.raises(checkpoint.CheckpointMismatch) as e:
        checkpoint.check("99", {"verdict": "compute-bound", "kinds": {"gemm": 1}, "new": 1})
    msg = str(e.value)
    assert "verdict: golden 'overhead-bound', now 'compute-bound'" in msg and "new: new fact" in msg
    assert "kinds" not in msg.split("differ")[1].split("If the change")[0]  # an unchanged fact is not listed


def test_a_missing_golden_file_says_how_to_make_it(golden):
    with pytest.raises(checkpoint.CheckpointMismatch, match="refresh_checkpoints"):
        checkpoint.check("98", {"a": 1})


def test_live_runs_compare_nothing(monkeypatch, capsys):
    monkeypatch.setattr(checkpoint, "_compared_here", lambda: "live on NVIDIA A100: the golden facts describe ...")
    checkpoint.check("99", {"anything": 1})
    assert capsys.readouterr().out.startswith("checkpoint 99: nothing compared (live on NVIDIA A100")


def test_facts_are_gathered_only_where_they_are_compared(golden, capsys):
    """A function is called when the facts are compared, and gives the same line as the dict it returns."""
    (golden / "99.json").write_text(json.dumps({"verdict": "overhead-bound"}))
    calls = []
    checkpoint.check("99", lambda: calls.append(1) or {"verdict": "overhead-bound"})
    assert calls == [1] and capsys.readouterr().out == "checkpoint 99: 1 facts match tests/golden/99.json\n"
    with pytest.raises(checkpoint.CheckpointMismatch, match="verdict: golden 'overhead-bound', now 'compute-bound'"):
        checkpoint.check("99", lambda: {"verdict": "compute-bound"})


def test_a_learners_run_gathers_no_fact_and_says_why(monkeypatch, capsys):
    """Run All in JupyterLab, nothing answered: the facts may not exist yet (notebook 16's stages), so none is read."""
    from helpers.runs import mode

    monkeypatch.setenv(mode.MODE_VAR, "recorded")
    monkeypatch.delenv(mode.HEADLESS_VAR, raising=False)
    monkeypatch.delenv(checkpoint.CHECKPOINT_VAR, raising=False)
    mode.environment.cache_clear()
    try:
        checkpoint.check("16", lambda: None.unit)  # the AttributeError, were the facts gathered
    finally:
        mode.environment.cache_clear()
    out = capsys.readouterr().out
    assert out == ("checkpoint 16: nothing compared (not a headless run: CI compares these facts with every "
                   "question given its default answer)\n")


def test_the_headless_recorded_run_compares_on_the_golden_set(monkeypatch):
    """What make test runs: recorded, headless, the golden set; a fact that changed fails there."""
    from helpers.runs import mode

    monkeypatch.setenv(mode.MODE_VAR, "recorded")
    monkeypatch.setenv(mode.HEADLESS_VAR, "1")
    monkeypatch.delenv(checkpoint.CHECKPOINT_VAR, raising=False)
    mode.environment.cache_clear()
    try:
        if checkpoint._compared_here() is not None:
            pytest.skip(f"this machine does not read the golden set: {checkpoint._compared_here()}")
        with pytest.raises(checkpoint.CheckpointMismatch, match="differ from tests/golden/00.json"):
            checkpoint.check("00", lambda: {"gpu tag": "not the golden tag"})
    finally:
        mode.environment.cache_clear()


def test_every_notebook_passes_its_facts_as_a_function():
    """A dict would be computed before check() could decide not to compare: the issue's traceback in notebook 16."""
    import nbformat

    from conftest import ROOT

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        last = [c for c in nb.cells if c.cell_type == "code"][-1]
        assert "checkpoint" in last.metadata.get("tags", []), path.name
        assert f'checkpoint.check("{path.name[:2]}", lambda: {{' in last.source or \
            f'checkpoint.check("{path.name[:2]}", _facts)' in last.source, path.name


def test_every_notebook_has_a_golden_file_and_stores_no_fact():
    import nbformat

    from conftest import ROOT

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert (ROOT / "tests" / "golden" / f"{path.name[:2]}.json").is_file(), path.name
        stored = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        texts = ["".join(o.get("text", "")) for o in stored]
        assert texts == [f"checkpoint {path.name[:2]}: {len(json.loads((ROOT / 'tests' / 'golden' / f'{path.name[:2]}.json').read_text()))} facts match tests/golden/{path.name[:2]}.json\n"], path.name
