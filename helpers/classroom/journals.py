"""The room's journals gathered: one per learner, each read, checked and kept or left out with one line.

Each journal file stands for one learner (see :mod:`helpers.lesson.journal` for its
format). :func:`gather` takes files and folders (``*.json``, recursively) and
leaves out what it cannot use with one line each (a broken file, a file that
is no journal, a copy, the same learner twice). :mod:`.tally` counts what the
kept journals say, :mod:`.room` shows it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..lesson.journal import FORMAT, META

MAX_BYTES = 2_000_000  # a journal of every question in the series is ~40 KB: anything far larger is a trace
_EXPORT_STAMP = re.compile(r"-\d{8}-\d{6}(-\d+)?$")  # journal.export's "<name>-YYYYmmdd-HHMMSS[-n]"
_GENERIC = {"predictions", ".predictions", "journal", "predictions-journal"}


class RoomError(ValueError):
    """Input the command cannot show anything for: one line for the instructor, exit status 2."""


@dataclass
class Journal:
    """One learner's journal, as read: its entries (qid -> entry) and what is known about it."""

    path: Path
    learner: str
    entries: dict[str, dict[str, Any]]
    latest: str  # the latest time in it (export or answer), ISO: which of two copies is newer
    odd: int = 0  # keys that are neither predictions nor ``_``-prefixed facts: left out

    def old_entries(self) -> int:
        """Entries written before format 2: no prompt, choices or trace's answer."""
        return sum(1 for e in self.entries.values() if not isinstance(e.get("format"), int) or e["format"] < 2)


@dataclass
class Gathered:
    """The journals kept, and one line for each thing left out or worth knowing."""

    journals: list[Journal]
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- gathering ---------------------------------------------------------------------------------------------------


def _files(paths: Iterable[str | Path], left_out: list[str]) -> list[Path]:
    """The files named, and every ``*.json`` under the folders named, each once, in order."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            # By path parts: a folder's files before its neighbours' whatever the Python's path order.
            inside = sorted((q for q in p.rglob("*.json") if q.is_file()), key=lambda q: q.relative_to(p).parts)
            if not inside:
                left_out.append(f"{p}: a folder with no .json file in it")
            found += inside
        elif p.exists():
            found.append(p)
        else:
            left_out.append(f"{p}: not found")
    seen: set[Path] = set()
    unique = []
    for p in found:
        key = p.resolve()
        if key not in seen:  # a file named twice, or inside a folder also named: read once
            seen.add(key)
            unique.append(p)
    return unique


def learner_name(path: Path, data: dict[str, Any]) -> str:
    """The learner a journal stands for: its ``_journal.learner``, else its file name (an export's
    ``<name>-<time>.json``), else its folder's name for a plain ``.predictions.json``."""
    meta = data.get(META)
    if isinstance(meta, dict) and isinstance(meta.get("learner"), str) and meta["learner"].strip():
        return " ".join(meta["learner"].split())
    stem = _EXPORT_STAMP.sub("", path.stem)
    if stem.lower() in _GENERIC or not stem.strip("."):
        return path.resolve().parent.name or stem
    return stem


_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _scrub(x: Any) -> Any:
    """``x`` with every string made safe to show: lone surrogates, control characters (a terminal's escape
    sequences) and direction overrides written as escapes. A journal is the learner's file: anything may be in it."""
    if isinstance(x, str):
        x = x.encode("utf-8", "backslashreplace").decode("utf-8")
        return _UNSHOWABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", x)
    if isinstance(x, dict):
        return {_scrub(k): _scrub(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_scrub(v) for v in x]
    return x


def _is_entry(key: str, value: Any) -> bool:
    return "." in key and not key.startswith("_") and isinstance(value, dict) and "answer" in value


def read_journal(path: Path) -> Journal | str:
    """The journal in ``path``, or one line saying why it is none."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return f"{path}: not a journal ({size / 1e6:.0f} MB; a journal is a few KB)"
        raw = path.read_bytes()
    except OSError as e:
        return f"{path}: cannot be read ({e.strerror or e})"
    try:
        data = json.loads(raw)
    except ValueError as e:  # UnicodeDecodeError included
        return f"{path}: broken, not valid JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    if not isinstance(data, dict):
        return f"{path}: not a journal (a JSON {type(data).__name__}, not an object of predictions)"
    data = _scrub(data)
    entries = {k: v for k, v in data.items() if _is_entry(k, v)}
    if not entries:
        if "traceEvents" in data:
            return f"{path}: not a journal (a profiler trace)"
        return (f"{path}: an empty journal (no predictions yet)" if not [k for k in data if not k.startswith("_")]
                else f"{path}: not a journal (none of its {len(data)} keys is a prediction)")
    meta = data.get(META) if isinstance(data.get(META), dict) else {}
    times = [str(e.get("when", "")) for e in entries.values()] + [str(meta.get("exported", ""))]
    odd = sum(1 for k in data if not k.startswith("_")) - len(entries)
    return Journal(path, learner_name(path, data), entries, max(times), odd)


def _fingerprint(j: Journal) -> str:
    return json.dumps(j.entries, sort_keys=True, default=str)


def gather(paths: Iterable[str | Path]) -> Gathered:
    """Read every journal under ``paths``; copies and a learner's older journals are left out, with a line each."""
    left_out: list[str] = []
    read: list[Journal] = []
    for p in _files(paths, left_out):
        j = read_journal(p)
        if isinstance(j, str):
            left_out.append(j)
        else:
            read.append(j)
    # The same predictions twice (a copy, or one export renamed): keep the first.
    by_content: dict[str, Journal] = {}
    unique: list[Journal] = []
    for j in read:
        first = by_content.setdefault(_fingerprint(j), j)
        if first is j:
            unique.append(j)
        else:
            left_out.append(f"{j.path}: a copy of {first.path} (the same predictions): kept {first.path}")
    # The same learner twice (two exports, an old and a new one): keep the newest.
    by_learner: dict[str, list[Journal]] = {}
    for j in unique:
        by_learner.setdefault(j.learner.casefold(), []).append(j)
    kept: list[Journal] = []
    for same in by_learner.values():
        newest = max(same, key=lambda j: (j.latest, len(j.entries)))
        kept.append(newest)
        for j in same:
            if j is not newest:
                left_out.append(f"{j.path}: {j.learner} twice: kept {newest.path} (the newer, "
                                f"{newest.latest[:19] or '?'}), left out this one ({j.latest[:19] or '?'})")
    kept.sort(key=lambda j: j.learner.casefold())
    notes = []
    for j in kept:
        old = j.old_entries()
        if old:
            whole = "its" if old == len(j.entries) else f"{old} of its {len(j.entries)}"
            notes.append(f"{j.path} ({j.learner}): an older journal (format 1): {whole} answers carry no prompt, "
                         f"choices or trace's answer; they are counted all the same")
        if j.odd:
            notes.append(f"{j.path} ({j.learner}): {j.odd} entries that are not predictions left out")
        newer = {e.get("format") for e in j.entries.values() if isinstance(e.get("format"), int) and e["format"] > FORMAT}
        if newer:
            notes.append(f"{j.path} ({j.learner}): written by a newer version (format {max(newer)}): read as format "
                         f"{FORMAT}")
    return Gathered(kept, left_out, notes)
