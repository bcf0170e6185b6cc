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
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JOURNAL_VAR = "PROFILING_JOURNAL"


class JournalWarning(UserWarning):
    """Something about the journal the learner should know: a broken file kept aside, a prediction not saved."""


class _Unusable(OSError):
    """The journal exists but cannot be read or moved aside: writing would lose it."""


def path() -> Path:
    env = os.environ.get(JOURNAL_VAR)
    return Path(env) if env else Path.cwd() / ".predictions.json"


def _set_aside(p: Path, problem: str) -> None:
    """Move a journal that is not one beside itself, and say so; never write over it."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    kept, n = p.with_name(f"{p.stem}.broken-{stamp}{p.suffix}"), 1
    while kept.exists():  # two broken journals in one second: keep both
        kept, n = p.with_name(f"{p.stem}.broken-{stamp}-{n}{p.suffix}"), n + 1
    try:
        os.replace(p, kept)
    except OSError as e:
        raise _Unusable(f"The predictions journal {p} {problem}, and it cannot be moved aside ({e}): "
                        "predictions are not saved until it is fixed or removed.") from None
    warnings.warn(f"The predictions journal {p} {problem}: it is kept as {kept}, and a new journal starts.",
                  JournalWarning, stacklevel=3)


def _read(p: Path) -> dict[str, dict[str, Any]]:
    """The journal's entries; a broken one is set aside (:func:`_set_aside`) and reads as empty."""
    try:
        text = p.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise _Unusable(f"The predictions journal {p} cannot be read ({e}): predictions are not saved "
                        "until it can.") from None
    try:
        data = json.loads(text)
    except ValueError as e:  # UnicodeDecodeError included: bytes that are not text are no journal either
        _set_aside(p, f"is not valid JSON ({e})")
        return {}
    if not isinstance(data, dict):
        _set_aside(p, f"holds a JSON {type(data).__name__}, not the object of predictions it should")
        return {}
    return data


def load(where: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every recorded prediction, keyed by question id (``"02.gpu-share"``).

    A journal that is not valid JSON is moved aside (``.predictions.broken-<time>.json``)
    with a warning, and reads as empty; one that cannot be read at all warns
    and reads as empty, and is left as it is.
    """
    try:
        return _read(where or path())
    except _Unusable as e:
        warnings.warn(str(e), JournalWarning, stacklevel=2)
        return {}


def record(qid: str, answer: Any, hit: bool | None, where: Path | None = None) -> None:
    """Store one prediction, replacing an earlier answer to the same question."""
    p = where or path()
    try:
        data = _read(p)
    except _Unusable as e:  # writing now would replace what could not be read
        warnings.warn(str(e), JournalWarning, stacklevel=2)
        return
    data[qid] = {"answer": answer, "hit": hit,
                 "when": _dt.datetime.now().isoformat(timespec="seconds")}
    # Write beside and rename, so that a crash never leaves half a journal.
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".predictions-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, p)
    except OSError as e:  # a read-only folder must not stop the lesson
        warnings.warn(f"This prediction is not saved: the journal {p} cannot be written ({e}).", JournalWarning,
                      stacklevel=2)


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
