"""Notebook NN's lesson module: its reveal on the recorded run."""

from __future__ import annotations

import pytest

from helpers.lesson import journal
from helpers.lessons import nNN_name as lesson
from helpers.runs.profiling import recorded
from helpers.runs.workload import matmul_add


@pytest.fixture
def headless(tmp_path, monkeypatch):
    """Recorded and headless: ask() answers its default at once and runs the reveal; the journal is a scratch file."""
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setenv("PROFILING_JOURNAL", str(tmp_path / "journal.json"))


def test_the_reveal_counts_the_recorded_calls(headless):
    run = recorded(matmul_add(64), warm=True)
    lesson.mm_calls(run)  # the default, 0, is wrong
    first = journal.entry("NN.mm-calls")
    assert first["actual"] == 3 and first["hit"] is False
    assert lesson.checkpoint_facts(run) == {"aten::mm calls": 3, "recorded steps": 3}
