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
    checkpoint.check("99", facts)
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


def test_every_notebook_has_a_golden_file_and_stores_no_fact():
    import nbformat

    from conftest import ROOT

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert (ROOT / "tests" / "golden" / f"{path.name[:2]}.json").is_file(), path.name
        stored = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        texts = ["".join(o.get("text", "")) for o in stored]
        assert texts == [f"checkpoint {path.name[:2]}: {len(json.loads((ROOT / 'tests' / 'golden' / f'{path.name[:2]}.json').read_text()))} facts match tests/golden/{path.name[:2]}.json\n"], path.name
