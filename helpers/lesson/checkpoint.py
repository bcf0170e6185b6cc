"""Regression checkpoints: a notebook's facts against its golden file, in one quiet line.

The last cell of each notebook passes :func:`check` a function that gathers
the facts its reveals rest on (kernel counts, dispatch chains, verdicts). In a
headless run (``PROFILING_HEADLESS=1``: nbval, CI) in recorded mode on the
reference set the golden files were written from, the facts are compared with
``tests/golden/<notebook>.json`` and the cell prints one line that states no
fact, so a committed notebook shows no answer; a mismatch raises, which fails
``make test`` (nbval) with the differences. Anywhere else (a learner's run,
live on a GPU, another reference set) nothing is compared, the facts are not
even gathered, and the line says why: a learner who ran all cells without
answering has stages and reveals still held back, so the facts would be
missing, and computing them could raise where nothing was wrong.

``PROFILING_CHECKPOINT=record`` writes the golden file instead
(``tools/refresh_checkpoints.py`` does that for every notebook).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Union

from .. import ROOT
from ..runs.mode import environment, headless

GOLDEN = ROOT / "tests" / "golden"
#: the reference set the golden files describe
GOLDEN_SET = "nvidia-h200"
CHECKPOINT_VAR = "PROFILING_CHECKPOINT"

#: what a checkpoint cell passes: the facts, or (as the notebooks do) a function that gathers them when needed
Facts = Union[dict[str, Any], Callable[[], dict[str, Any]]]


class CheckpointMismatch(AssertionError):
    """The notebook's facts differ from its golden file."""


def _plain(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts as JSON would give them back (tuples become lists, keys strings)."""
    return json.loads(json.dumps(facts, sort_keys=True, default=str))


def golden_path(notebook: str) -> Path:
    return GOLDEN / f"{notebook}.json"


def _compared_here() -> str | None:
    """None when this run is comparable with the golden files, else why not."""
    e = environment()
    if e.live:
        return f"live on {e.gpu}: the golden facts describe the {GOLDEN_SET} reference set"
    if not headless():
        # the golden facts are those of a run where every question took its default answer
        return "not a headless run: CI compares these facts with every question given its default answer"
    name = e.reference.path.name if e.reference else None
    if name != GOLDEN_SET:
        return f"reference set {name}: the golden facts describe {GOLDEN_SET}"
    return None


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """One line per fact that is missing, new or different."""
    lines = []
    for key in sorted(set(expected) | set(actual)):
        if key not in actual:
            lines.append(f"  {key}: missing (golden: {expected[key]!r})")
        elif key not in expected:
            lines.append(f"  {key}: new fact {actual[key]!r} (not in the golden file)")
        elif expected[key] != actual[key]:
            lines.append(f"  {key}: golden {expected[key]!r}, now {actual[key]!r}")
    return lines


def _gather(facts: Facts) -> dict[str, Any]:
    """The facts as plain data, gathering them first when ``facts`` is a function."""
    return _plain(facts() if callable(facts) else facts)


def check(notebook: str, facts: Facts) -> None:
    """Compare the notebook's facts with its golden file and print one line.

    ``facts`` is a dict, or a function returning one that is called only when
    the facts are recorded or compared.
    """
    path = golden_path(notebook)
    if os.environ.get(CHECKPOINT_VAR, "").strip().lower() == "record":
        actual = _gather(facts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
        # the same line a comparison prints, so that the refreshed notebook stores what nbval will see
        print(f"checkpoint {notebook}: {len(actual)} facts match tests/golden/{path.name}")
        return
    why_not = _compared_here()
    if why_not:
        print(f"checkpoint {notebook}: nothing compared ({why_not})")
        return
    actual = _gather(facts)
    if not path.is_file():
        raise CheckpointMismatch(f"checkpoint {notebook}: no golden file at {path}; write it with "
                                 "`python tools/refresh_checkpoints.py`")
    diff = differences(json.loads(path.read_text()), actual)
    if diff:
        raise CheckpointMismatch(f"checkpoint {notebook}: {len(diff)} fact(s) differ from tests/golden/{path.name}:\n"
                                 + "\n".join(diff)
                                 + "\nIf the change is intended, run `python tools/refresh_checkpoints.py` "
                                   "and read the diff of the golden file.")
    print(f"checkpoint {notebook}: {len(actual)} facts match tests/golden/{path.name}")
