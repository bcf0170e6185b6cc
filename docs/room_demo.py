"""Make the class behind docs/img/room.png: notebook 03 run headless, then fourteen learners' answers.

    .venv/bin/python docs/room_demo.py OUT_FOLDER     # then: python -m helpers room OUT_FOLDER --html room.html

Every trace's answer comes from a real headless run of notebook 03 in
recorded mode (the H200 reference set). Until the notebooks pass ``actual=``
to ``widgets.verdict``, the run uses a temporary copy of 03 with the
arguments in ``PATCH`` added (the change the notebooks need); a line that is
not found (the notebook already has it, or changed) is left as it is, and
said. The learners' answers are made up, seeded, and written through
``journal.record`` with the verdict each notebook's rule gives; each learner
exports through ``journal.export``, as the scoreboard's button does. One
older (format 1) journal and one broken file show the lines the command
prints for them.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers.lesson import journal, widgets

# Each reveal's verdict call in notebook 03, with the actual= it needs: (text in the cell, replacement).
PATCH = [
    ('"same time.")', '"same time.", actual=longest_choice(st))'),
    ('"ratio moves from run to run before you trust it.")', '"ratio moves from run to run before you trust it.", '
                                                            'actual=actual)'),
    ('f"out of the recording. {buffer_text}")', 'f"out of the recording. {buffer_text}", '
                                                'actual=widgets.bucket(ratio, [2, 10, 100], FIRST_CHOICES))'),
    ('keep it out of what you measure.")', 'keep it out of what you measure.", actual=k)'),
    ("Within 10% counts.\")", "Within 10% counts.\", actual=bufs[0][\"dur_us\"])"),
]

LEARNERS = ["Ada", "Bruno", "Chen Wei", "Dana", "Emeka", "Farah", "Gustav", "Hiro", "Ines", "Jonas", "Kemi",
            "Lena", "Mateo", "Noor"]


def run_notebook(where: Path) -> Path:
    """Notebook 03, headless in recorded mode, with PATCH applied to a copy; returns its journal."""
    src = next((ROOT / "notebooks").glob("03_*.ipynb"))
    nb = nbformat.read(src, as_version=4)
    for old, new in PATCH:
        cells = [c for c in nb.cells if c.cell_type == "code" and old in c.source and new not in c.source]
        if not cells:
            print(f"patch not applied (not found, or there already): {old}")
        for c in cells:
            c.source = c.source.replace(old, new)
    j = where / "run.json"
    os.environ.update(PROFILING_MODE="recorded", PROFILING_HEADLESS="1", PROFILING_JOURNAL=str(j),
                      MPLBACKEND="Agg")
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(src.parent)}}).execute()
    return j


def held(qid: str, answer, actual) -> bool | None:
    """The verdict notebook 03's reveal gives that answer (its rules, for the questions with numbers)."""
    if actual is None:
        return None
    if qid == "03.settle":
        return abs(answer - actual) <= 1
    if qid == "03.perfetto":
        return widgets.within(answer, actual, factor=1.1)
    return answer == actual


def guess(rng: random.Random, e: dict):
    """A made-up learner's answer: choices weighted towards the first ones, numbers spread around a guess."""
    if "choices" in e:
        cs = e["choices"]
        return rng.choices(cs, weights=[len(cs) - i + 1 for i in range(len(cs))])[0]
    if e.get("unit") == "us":
        return round(rng.lognormvariate(4, 1.2))
    return rng.choice([1, 1, 2, 2, 2, 3, 5, 10])


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(3)  # a class whose majority misses the first two questions: the case a discussion opens with
    with tempfile.TemporaryDirectory() as tmp:
        run = json.loads(run_notebook(Path(tmp)).read_text())
        for name in LEARNERS:
            mine = Path(tmp) / f"{name}.json"
            for qid, e in run.items():
                a = guess(rng, e)
                journal.record(qid, a, held(qid, a, e.get("actual")), mine, actual=e.get("actual"),
                               prompt=e["prompt"], choices=e.get("choices"), unit=e.get("unit"), kind=e["kind"],
                               gpu=e.get("gpu"))
            print(journal.export(name, where=mine, folder=out))
    older = {qid: {"answer": guess(rng, e), "hit": None, "when": e["when"]} for qid, e in run.items()}
    (out / "olga.json").write_text(json.dumps(older))  # format 1: what the older version wrote
    (out / "pat.json").write_text('{"03.long-step": {"answer": "ProfilerStep#3", "hi')  # cut short


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("room-demo"))
