"""Run All without answering, as a learner in JupyterLab does: every notebook to its end, no error anywhere.

Each notebook runs in a fresh kernel (nbclient) started in ``notebooks/``, as JupyterLab starts it, in recorded
mode and *not* headless, with a scratch journal and nothing answered: every question waits for a click, the cells
that would give an answer away are held back (``widgets.after``), and the checkpoint compares nothing. No cell
may show an error (an ``error`` output, or a traceback on stderr), and the committed notebooks are not rewritten
(the run works on a copy in memory) nor is anything left in ``notebooks/``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent.parent
NOTEBOOKS = ROOT / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CELL_TIMEOUT_S = 600


def problems(nb) -> list[str]:
    """Each output that is an error, or a traceback on stderr: notebook cell, its id, and the error."""
    found = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for n, cell in enumerate(code, 1):
        where = f"code cell {n} of {len(code)} (id {cell.get('id', '?')})"
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                tb = ANSI.sub("", "\n".join(out.get("traceback", [])))
                found.append(f"{where}: {out.get('ename')}: {out.get('evalue')}\n{tb[-1500:]}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and "Traceback" in out.get("text", ""):
                found.append(f"{where}: a traceback on stderr\n{out['text'][-1500:]}")
    return found


def left_in(folder: Path) -> set[str]:
    """The files under ``folder``, bytecode aside (importing series_setup writes it, as any run does)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture
def learner(tmp_path, monkeypatch) -> Path:
    """A learner's kernel environment: recorded mode, not headless, a scratch journal; returns the journal."""
    from helpers.classroom.lab_setup import quiet_profile

    for var in ("PROFILING_HEADLESS", "PROFILING_LEAK_CHECK", "PROFILING_CHECKPOINT", "MPLBACKEND"):
        monkeypatch.delenv(var, raising=False)
    journal = tmp_path / "journal.json"
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    monkeypatch.setenv("PROFILING_JOURNAL", str(journal))
    monkeypatch.setenv("PROFILING_EXPORT", str(tmp_path / "exported"))
    # the kernel hints of make lab's kernels; kernel log lines below errors left out (not cell outputs anyway)
    monkeypatch.setenv("IPYTHONDIR", str(quiet_profile(tmp_path / "ipython")))
    # the helpers of this clone, also for what the kernel imports before the first cell (its kernel hints)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    return journal


def run_all(nb) -> None:
    """Run every code cell of ``nb`` in a fresh kernel started in ``notebooks/``, on past errors (its outputs kept)."""
    # allow_errors: every cell runs, so that one failure does not hide the next
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    # No stand-in for the Output widget's front end: nbclient's sends comm messages on the shell channel while it
    # waits there for the cell's reply, which then comes only at the cell's timeout (jupyter/nbclient#312: here,
    # one of notebook 16's held-back cells took the whole 600 s). Without it, what a cell shows in an Output widget
    # (a held-back cell's placeholder, a traceback the widget catches) lands in the cell's outputs, read below.
    client.widget_registry = {}
    client.execute()


def test_an_error_is_found_and_named(learner):
    """The check itself: an exception, one an Output widget catches, and a traceback printed on stderr."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, id=f"c{i}") for i, src in enumerate([
        "print('fine')",
        "raise ValueError('boom')",
        "import ipywidgets as W\nout = W.Output()\nwith out:\n    1 / 0\ndisplay(out)",
        "import sys, traceback\ntry:\n    {}['key']\nexcept KeyError:\n    traceback.print_exc()",
    ])]
    run_all(nb)
    found = problems(nb)
    assert [f.split(":")[0] for f in found] == [f"code cell {n} of 4 (id c{n - 1})" for n in (2, 3, 4)], found
    assert "ValueError: boom" in found[0] and "ZeroDivisionError" in found[1] and "KeyError" in found[2]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_run_all_unanswered_shows_no_error(path, learner):
    before = left_in(NOTEBOOKS)
    nb = nbformat.read(path, as_version=4)
    run_all(nb)
    found = problems(nb)
    assert not found, f"{path.name}, Run All unanswered:\n" + "\n\n".join(found)
    answered = [k for k in (json.loads(learner.read_text()) if learner.exists() else {}) if not k.startswith("_")]
    assert not answered, f"{path.name}: answered {answered} with nobody clicking: was the run headless?"
    last = "".join(o.get("text", "") for o in [c for c in nb.cells if c.cell_type == "code"][-1].outputs)
    assert last.startswith(f"checkpoint {path.name[:2]}: nothing compared (not a headless run"), \
        f"{path.name}: the checkpoint cell printed {last!r}"
    assert left_in(NOTEBOOKS) == before, f"{path.name} left {sorted(left_in(NOTEBOOKS) - before)} in notebooks/"
