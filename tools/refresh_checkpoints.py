"""Execute notebooks in recorded, headless mode: rewrite their golden facts, strip their outputs.

    python tools/refresh_checkpoints.py                 # every notebook
    python tools/refresh_checkpoints.py notebooks/02_*.ipynb

A committed notebook must not show a learner any answer before they predict,
so every output is cleared except that of the checkpoint cell (marked
``# NBVAL_CHECK_OUTPUT``), which holds one line that states no fact. The
facts themselves go to ``tests/golden/<notebook>.json``
(``PROFILING_CHECKPOINT=record``); ``make test`` compares each notebook's
facts with that file. Run this after changing a notebook or a helper that
changes a fact, and read the diff of the golden files before committing it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
MARK = "NBVAL_CHECK_OUTPUT"


def refresh(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(PROFILING_MODE="recorded", PROFILING_HEADLESS="1",
                          PROFILING_JOURNAL=str(Path(tmp) / "journal.json"), MPLBACKEND="Agg",
                          PROFILING_CHECKPOINT="record")
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    kept = 0
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # timestamps: churn in every diff
        if cell.cell_type != "code":
            continue
        if MARK in cell.source:
            kept += 1  # nbval wants an execution count on a cell that has outputs: keep it
        else:
            cell.execution_count = None
            cell.outputs = []
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    return kept


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for p in paths:
        n = refresh(p.resolve())
        print(f"{p.name}: {n} checkpoint cell(s) stored")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
