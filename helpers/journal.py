"""The learner's predictions, kept in a small JSON file.

One entry per question: what was predicted, whether it held, when. The end
of each notebook reads it back to show hits and misses so far. The file is
``.predictions.json`` in the folder the notebooks run from, or wherever
``PROFILING_JOURNAL`` points (CI points it at a scratch file).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JOURNAL_VAR = "PROFILING_JOURNAL"


def path() -> Path:
    env = os.environ.get(JOURNAL_VAR)
    return Path(env) if env else Path.cwd() / ".predictions.json"


def load(where: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every recorded prediction, keyed by question id (``"02.gpu-share"``)."""
    p = where or path()
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(qid: str, answer: Any, hit: bool | None, where: Path | None = None) -> None:
    """Store one prediction, replacing an earlier answer to the same question."""
    p = where or path()
    data = load(p)
    data[qid] = {"answer": answer, "hit": hit,
                 "when": _dt.datetime.now().isoformat(timespec="seconds")}
    # Write beside and rename, so that a crash never leaves half a journal.
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".predictions-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, p)
    except OSError:
        pass  # a read-only folder must not stop the lesson


@dataclass
class Score:
    notebook: str
    hits: int
    misses: int
    open: int  # answered, but with no right or wrong


def scores(where: Path | None = None) -> list[Score]:
    """Hits and misses per notebook, in notebook order."""
    acc: dict[str, list[int]] = {}
    for qid, entry in load(where).items():
        nb = qid.split(".", 1)[0]
        row = acc.setdefault(nb, [0, 0, 0])
        hit = entry.get("hit") if isinstance(entry, dict) else None
        row[0 if hit is True else 1 if hit is False else 2] += 1
    return [Score(nb, *row) for nb, row in sorted(acc.items())]
