"""The learner's predictions, kept in a small JSON file.

One entry per question: what was predicted, whether it held, when. The end
of each notebook reads it back to show hits and misses so far. The file is
``.predictions.json`` in the series' ``notebooks/`` folder (wherever the
kernel was started), or wherever ``PROFILING_JOURNAL`` points (CI points it
at a scratch file). Files are written with the umask's modes, so that a class
folder on a shared machine can be read by the instructor.

The file is one JSON object, ``{qid: entry}``. An entry of format 2
(:data:`FORMAT`) holds::

    answer   what the learner locked in (a choice, or a number)
    hit      True, False, or None where the reveal has no right or wrong
    when     ISO time of the answer
    format   2
    prompt   the question as asked
    choices  the choices offered (multiple choice only)
    unit     the unit of a typed number (numeric questions only)
    kind     "predict", or "task" for a Perfetto task
    actual   what the trace showed: the choice it fell in, or the measured
             value (only where the reveal reported it)
    gpu      where the trace's GPU lanes came from ("NVIDIA H200", or
             "NVIDIA H200 (recorded)"), when known

Format 3 adds::

    status   "held", "missed", "inconclusive" (a timing whose spread was as
             wide as the effect asked about: graded neither way) or "open"
             (no right or wrong)
    attempts later tries at the same question (each with its own answer,
             hit, status, actual and when); the first answer above is the one
             the scoreboard and the room count

The first answer to a question stays: answering again does not replace it
(:func:`record`), a try after "try again" is an attempt (:func:`attempt`),
and a rerun of an inconclusive measurement grades the first answer once it
is conclusive (:func:`record` with the same answer). Formats 1 (``answer``,
``hit`` and ``when``) and 2 still load. Keys that start with ``_`` are not questions: an exported
copy (:func:`export`) carries ``"_journal": {"format", "learner", "exported"}``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import exam_notebook
from ..facts.measure import Status

JOURNAL_VAR = "PROFILING_JOURNAL"
#: the notebook whose questions are an exam: its answers are scored apart from the lessons' (widgets.scoreboard);
#: its number is the exam's lesson module's (helpers.exam_notebook)
EXAM = exam_notebook()
EXPORT_VAR = "PROFILING_EXPORT"  # the folder exported copies go to; unset: exported-journals/ beside the notebooks
FORMAT = 3  # the entry format record() writes (see the module's docstring); entries without "format" are 1
META = "_journal"  # an exported copy's own facts: format, learner, when exported


class JournalWarning(UserWarning):
    """Something about the journal the learner should know: a broken file kept aside, a prediction not saved."""


class _Unusable(OSError):
    """The journal exists but cannot be read or moved aside: writing would lose it."""


def series_folder() -> Path:
    """The folder the notebooks live in (``notebooks/`` of this clone), wherever the kernel was started.

    A kernel started at the repository's root (VS Code's default) or anywhere else writes to the same journal
    and exports as one started beside the notebooks; without a ``notebooks/`` folder (the helpers installed
    on their own), the working directory.
    """
    from .. import ROOT

    nb = ROOT / "notebooks"
    return nb if nb.is_dir() else Path.cwd()


def path() -> Path:
    env = os.environ.get(JOURNAL_VAR)
    return Path(env) if env else series_folder() / ".predictions.json"


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
    and reads as empty, and is left as it is. Keys that start with ``_``
    (an exported copy's ``_journal``) are not predictions and are left out.
    """
    try:
        data = _read(where or path())
    except _Unusable as e:
        warnings.warn(str(e), JournalWarning, stacklevel=2)
        return {}
    return {k: v for k, v in data.items() if not k.startswith("_")}


def plain(value: Any) -> Any:
    """``value`` as JSON keeps it: numpy and torch numbers become int or float, NaN and infinity None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        return v if math.isfinite(v) else None
    if hasattr(value, "item"):  # a 0-d tensor or array
        try:
            return plain(value.item())
        except (TypeError, ValueError):
            pass
    return str(value)


def _umask() -> int:
    """This process's umask, read without changing it where the system says it (Linux), else set and put back."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write(p: Path, data: dict[str, Any]) -> None:
    """Write beside and rename, so that a crash never leaves half a journal."""
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".predictions-", suffix=".tmp")
    try:
        # mkstemp makes the file -rw------- whatever the umask; a class folder on a shared hub needs the
        # umask's modes (an instructor reads the exports), as any other file the learner writes would get.
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def status_of(entry: Any) -> Status:
    """An entry's status: its own (format 3), else from its hit (True held, False missed, None open)."""
    if isinstance(entry, dict):
        return _status(entry.get("hit"), entry.get("status"))
    return Status.OPEN


def _status(hit: Any, status: Any) -> Status:
    """``status`` when it is one (a journal's word or a :class:`Status`), else what ``hit`` says."""
    return Status.parse(status) or Status.of(hit if isinstance(hit, bool) else None)


def record(qid: str, answer: Any, hit: bool | None, where: Path | None = None, *, actual: Any = None,
           prompt: str | None = None, choices: list[str] | None = None, unit: str | None = None,
           kind: str | None = None, gpu: str | None = None, status: Status | None = None) -> bool:
    """Store the first answer to a question; returns whether the journal changed.

    A question already answered keeps its first answer: recording again
    changes nothing, except that an *inconclusive* grade is replaced when the
    same answer is graded again on a conclusive measurement (a rerun refines
    the measurement, never the answer). Later tries go through :func:`attempt`.

    The keyword arguments are optional (see the module's docstring):
    ``actual`` is what the trace showed (the choice it fell in, or the
    measured value of a numeric question); ``prompt``, ``choices``, ``unit``
    and ``kind`` describe the question, so that a room of journals can list
    every choice, picked or not; ``gpu`` says where the trace came from;
    ``status`` is :attr:`Status.INCONCLUSIVE` for a timing graded neither way
    (otherwise it follows ``hit``). Those left as None are not written.
    """
    p = where or path()
    try:
        data = _read(p)
    except _Unusable as e:  # writing now would replace what could not be read
        warnings.warn(str(e), JournalWarning, stacklevel=2)
        return False
    st = _status(hit, status)
    old = data.get(qid)
    if isinstance(old, dict) and "answer" in old:
        if not (status_of(old) is Status.INCONCLUSIVE and st is not Status.INCONCLUSIVE
                and old.get("answer") == plain(answer)):
            return False  # the first answer stays, and so does its grade
        old.update({"hit": plain(hit), "status": st.value, "graded": _dt.datetime.now().isoformat(timespec="seconds")})
        if actual is not None:
            old["actual"] = plain(actual)
        return _save(p, data)
    entry: dict[str, Any] = {"answer": plain(answer), "hit": plain(hit), "status": st.value,
                             "when": _dt.datetime.now().isoformat(timespec="seconds"), "format": FORMAT}
    extra = {"prompt": prompt, "choices": [str(c) for c in choices] if choices is not None else None,
             "unit": unit, "kind": kind, "actual": plain(actual), "gpu": gpu}
    entry.update({k: v for k, v in extra.items() if v is not None})
    data[qid] = entry
    return _save(p, data)


def attempt(qid: str, answer: Any, hit: bool | None, where: Path | None = None, *, actual: Any = None,
            status: Status | None = None) -> bool:
    """Store a later try at an answered question, beside the first answer (which stays what is counted)."""
    p = where or path()
    try:
        data = _read(p)
    except _Unusable as e:
        warnings.warn(str(e), JournalWarning, stacklevel=2)
        return False
    entry = data.get(qid)
    if not isinstance(entry, dict):
        return record(qid, answer, hit, where, actual=actual, status=status)
    tries = entry.setdefault("attempts", [])
    tries.append({"answer": plain(answer), "hit": plain(hit), "status": _status(hit, status).value,
                  "actual": plain(actual), "when": _dt.datetime.now().isoformat(timespec="seconds")})
    return _save(p, data)


def entry(qid: str, where: Path | None = None) -> dict[str, Any] | None:
    """The journal's entry for a question, or None when it was never answered."""
    e = load(where).get(qid)
    return e if isinstance(e, dict) and "answer" in e else None


def _save(p: Path, data: dict[str, Any]) -> bool:
    try:
        _write(p, data)
        return True
    except OSError as e:  # a read-only folder must not stop the lesson
        warnings.warn(f"This prediction is not saved: the journal {p} cannot be written ({e}).", JournalWarning,
                      stacklevel=3)
        return False


def export_folder() -> Path:
    """Where exported copies go: ``PROFILING_EXPORT``, or ``exported-journals/`` beside the notebooks."""
    env = os.environ.get(EXPORT_VAR)
    return Path(env) if env else series_folder() / "exported-journals"


def safe_name(learner: str) -> str:
    """``learner`` as a file name anywhere (ASCII letters, digits, ``-``); "learner" when nothing is left."""
    return re.sub(r"[^A-Za-z0-9]+", "-", learner).strip("-")[:40] or "learner"


def export(learner: str, where: Path | None = None, folder: Path | None = None) -> Path:
    """Copy the journal to ``<folder>/<name>-<YYYYmmdd-HHMMSS>.json`` for the instructor; returns the copy's path.

    The copy carries ``"_journal": {"format", "learner", "exported"}``, so that
    the name survives as typed (the file name keeps only ASCII). Raises
    ValueError when there is nothing to export or no name, OSError when the
    copy cannot be written.
    """
    name = " ".join(str(learner).split())
    if not name:
        raise ValueError("Type your name first (the instructor sees it).")
    entries = load(where)
    if not entries:
        raise ValueError("There is nothing to export yet: answer a prediction first.")
    now = _dt.datetime.now()
    folder = folder or export_folder()
    stem = f"{safe_name(name)}-{now.strftime('%Y%m%d-%H%M%S')}"
    target, n = folder / f"{stem}.json", 1
    while target.exists():  # two exports in one second: keep both
        target, n = folder / f"{stem}-{n}.json", n + 1
    # The export time to the microsecond: of two copies exported in one second, the room keeps the later.
    _write(target, {META: {"format": FORMAT, "learner": name, "exported": now.isoformat(timespec="microseconds")},
                    **entries})
    return target


@dataclass
class Score:
    notebook: str
    hits: int
    misses: int
    open: int  # answered, but with no right or wrong
    inconclusive: int = 0  # a timing whose spread was as wide as the effect: graded neither way


def scores(where: Path | None = None) -> list[Score]:
    """Held, missed, open and inconclusive first answers per notebook, in notebook order."""
    acc: dict[str, dict[str, int]] = {}
    for qid, e in load(where).items():
        row = acc.setdefault(qid.split(".", 1)[0], dict.fromkeys(Status, 0))
        row[status_of(e)] += 1
    return [Score(nb, r[Status.HELD], r[Status.MISSED], r[Status.OPEN], r[Status.INCONCLUSIVE])
            for nb, r in sorted(acc.items())]
