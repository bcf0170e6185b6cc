"""The room's predictions: many learners' journals, per question, against what the trace showed.

    python -m helpers room PATH [PATH ...] [--html room.html] [--question QID]

Each journal file stands for one learner (see :mod:`helpers.lesson.journal` for its
format). The command gathers files and folders (``*.json``, recursively),
leaves out what it cannot use with one line each (a broken file, a file that
is no journal, a copy, the same learner twice), and prints per question the
prompt, how many chose each choice (numbers: quartiles and a small
histogram), how many predictions held, and what the trace showed: the line an
instructor opens the discussion with, "most of you said X; the trace says Y".
``--html`` writes the same as a page with a bar chart per question
(matplotlib, embedded as PNG; without matplotlib the page has the tables only).
Journals that hold answers to the exam (notebook 17: a bound and a first fix
per trace) get a table of their own first: per trace, how many got the
bound, the fix, and both right, and each learner's exam score.

Imports neither torch nor (for the terminal) matplotlib.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..lesson.journal import EXAM, FORMAT, META, status_of

MAX_BYTES = 2_000_000  # a journal of every question in the series is ~40 KB: anything far larger is a trace
BAR = 24  # the longest text bar, in characters
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


# --- per question ------------------------------------------------------------------------------------------------


@dataclass
class Answer:
    learner: str
    answer: Any
    hit: bool | None
    actual: Any  # what this learner's trace showed, None when the journal does not say
    gpu: str | None
    status: str = "open"  # held, missed, inconclusive (a timing within its noise) or open


@dataclass
class Row:
    """One line of a question's chart: a choice (or a range of numbers), how many chose it, how many traces fell in it."""

    label: str
    count: int
    traces: int = 0


def _is_number(x: Any) -> bool:
    """A finite int or float (JSON's integers have no limit: one beyond a float's range is no number here)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def fmt(x: Any) -> str:
    """A number as people say it (3 significant digits, thousands separated); anything else as text."""
    if not _is_number(x):
        return str(x)
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


@dataclass
class Question:
    qid: str
    prompt: str | None
    choices: list[str] | None
    unit: str | None
    kind: str | None
    answers: list[Answer]

    @property
    def numeric(self) -> bool:
        return self.choices is None and all(_is_number(a.answer) for a in self.answers)

    @property
    def _unit(self) -> str:
        return f" {self.unit}" if self.unit else ""

    def held(self) -> tuple[int, int]:
        """Predictions that held, and predictions graded right or wrong (inconclusive and open ones are not)."""
        judged = [a.hit for a in self.answers if a.hit is not None and a.status != "inconclusive"]
        return sum(1 for h in judged if h is True), len(judged)

    def inconclusive(self) -> int:
        """Answers whose measurement was within its noise on the learner's machine: counted apart."""
        return sum(1 for a in self.answers if a.status == "inconclusive")

    def held_text(self) -> str:
        hits, judged = self.held()
        text = (f"held: {hits} of {judged} ({100 * hits / judged:.0f}%)" if judged else
                "no right or wrong (a hypothesis to discuss)" if not self.inconclusive() else "none graded")
        n = self.inconclusive()
        return text + (f"; inconclusive on {n} machine{'s' if n != 1 else ''} (the noise as large as the effect)"
                       if n else "")

    def traces(self) -> list[tuple[Any, int, list[str]]]:
        """What the traces showed: each distinct answer, in how many journals, on which GPUs; most frequent first."""
        acc: dict[str, tuple[Any, int, Counter]] = {}
        for a in self.answers:
            if a.actual is None:
                continue
            key = json.dumps(a.actual, sort_keys=True, default=str)
            value, n, gpus = acc.get(key, (a.actual, 0, Counter()))
            gpus[a.gpu or "unknown GPU"] += 1
            acc[key] = (value, n + 1, gpus)
        return sorted(((v, n, [g for g, _ in gpus.most_common()]) for v, n, gpus in acc.values()),
                      key=lambda t: -t[1])

    def rows(self) -> list[Row]:
        """The chart's rows: every choice in order (picked or not), then answers that are no choice now;
        for a number, one row per value when few, else bins (logarithmic over a wide range)."""
        traced = [a.actual for a in self.answers if a.actual is not None]
        if not self.numeric:
            counts = Counter(str(a.answer) for a in self.answers)
            tcounts = Counter(str(t) for t in traced)
            labels = list(self.choices or [])
            labels += [c for c, _ in counts.most_common() if c not in labels]
            return [Row(c, counts[c], tcounts[c]) for c in labels]
        values = [float(a.answer) for a in self.answers]
        tvalues = [float(t) for t in traced if _is_number(t)]
        distinct = sorted(set(values) | set(tvalues))
        if len(distinct) <= 8:
            return [Row(fmt(v), values.count(v), tvalues.count(v)) for v in distinct]
        positive = [v for v in distinct if v > 0]
        # Zeros beside answers that span decades: a row of their own, and the decades on a log scale.
        apart = len(positive) < len(distinct) and len(positive) >= 2 and positive[-1] / positive[0] > 20
        edges = _edges(positive[0], positive[-1]) if apart else _edges(distinct[0], distinct[-1])
        rows = ([Row("0 or less", 0)] if apart else []) + [Row(f"{fmt(lo)} to {fmt(hi)}", 0)
                                                           for lo, hi in zip(edges, edges[1:])]
        for vs, attr in ((values, "count"), (tvalues, "traces")):
            for v in vs:
                i = 0 if apart and v <= 0 else (
                    int(apart) + min(sum(1 for e in edges[1:-1] if v >= e), len(edges) - 2))
                setattr(rows[i], attr, getattr(rows[i], attr) + 1)
        return rows

    def quartiles(self) -> tuple[float, float, float, float, float]:
        """Smallest, first quartile, median, third quartile, largest of the answers (numbers only)."""
        v = sorted(float(a.answer) for a in self.answers)
        if len(v) == 1:
            return v[0], v[0], v[0], v[0], v[0]
        q1, q2, q3 = statistics.quantiles(v, n=4, method="inclusive")
        return v[0], q1, q2, q3, v[-1]

    def said(self) -> str:
        """What the room said, in a phrase: "most of you said X (7 of 12)"."""
        n = len(self.answers)
        if self.numeric:
            lo, q1, med, q3, hi = self.quartiles()
            if n == 1:
                return f"the one answer is {fmt(med)}{self._unit}"
            if n < 4:
                return f"you said {', '.join(fmt(v) for v in sorted(float(a.answer) for a in self.answers))}{self._unit}"
            return f"half of you said {fmt(q1)} to {fmt(q3)}{self._unit} (median {fmt(med)})"
        top, k = self._top()
        if len(top) == 1:
            return f'{"most of you" if n > 1 else "the one answer"} said "{top[0]}" ({k} of {n})'
        return f'you were split: {" / ".join(chr(34) + c + chr(34) for c in top)} ({k} each of {n})'

    def _top(self) -> tuple[list[str], int]:
        """The answers given most often (several when tied), and how often."""
        counts = Counter(str(a.answer) for a in self.answers).most_common()
        return [c for c, k in counts if k == counts[0][1]], counts[0][1]

    def _known(self) -> str:
        """", from the 3 of 12 journals that say" when only some journals say what their trace showed."""
        known = sum(n for _, n, _ in self.traces())
        return "" if known == len(self.answers) else f", from the {known} of {len(self.answers)} journals that say"

    def trace_says(self) -> str:
        """What the traces showed, in a phrase; says so when learners' traces differ, and on which GPUs."""
        t = self.traces()
        if not t:
            return ("these journals do not say what the trace showed (the notebook's reveal did not report it, "
                    "or the journals are older)")
        if len(t) == 1:
            value, _, gpus = t[0]
            return f"the trace says {self._value(value)} ({', '.join(gpus)}{self._known()})"
        if self.numeric and all(_is_number(v) for v, _, _ in t):
            vals = sorted(float(v) for v, n, _ in t for _ in range(n))
            gpus = sorted({g for _, _, gs in t for g in gs})
            return (f"the traces differ: {fmt(vals[0])} to {fmt(vals[-1])}{self._unit} "
                    f"(median {fmt(statistics.median(vals))}; {', '.join(gpus)}{self._known()})")
        return ("the traces differ: " + "; ".join(f"{self._value(v)} in {n} ({', '.join(g)})" for v, n, g in t)
                + self._known())

    def _value(self, v: Any) -> str:
        return f"{fmt(v)}{self._unit}" if self.numeric and _is_number(v) else f'"{v}"'

    def agrees(self) -> bool | None:
        """Whether the room's most common answer is what the trace showed (None: no trace's answer, or a tie)."""
        t = self.traces()
        if self.numeric or len(t) != 1 or len(self._top()[0]) != 1:
            return None
        return self._top()[0][0] == str(t[0][0])

    def headline(self) -> str:
        """The line to open the discussion with: "Most of you said X (7 of 12); the trace says Y (GPU)."."""
        said, t = self.said(), self.traces()
        if self.agrees():
            return f"{said[0].upper()}{said[1:]}, and so does the trace ({', '.join(t[0][2])}{self._known()})."
        return f"{said[0].upper()}{said[1:]}; {self.trace_says()}."


def _edges(lo: float, hi: float, bins: int = 6) -> list[float]:
    """Round bin edges that cover ``lo`` to ``hi``: 1-2-5 per decade (or whole decades) when the values span
    more than 20x, else about ``bins`` even steps of 1, 2 or 5 times a power of ten."""
    if lo > 0 and hi / lo > 20:
        k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        for steps in ((1, 2, 5), (1,)):
            grid = sorted(m * 10.0 ** k for k in range(k0, k1 + 1) for m in steps)
            start, end = max(e for e in grid if e <= lo), min(e for e in grid if e >= hi)
            edges = [e for e in grid if start <= e <= end]
            if len(edges) <= 10:
                break
        return edges
    raw = (hi - lo) / bins or 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    n = max(1, math.ceil((hi - start) / step - 1e-9))
    return [start + i * step for i in range(n + 1)]


def _order(qid: str, journals: list[Journal]) -> tuple[str, float]:
    """Sort key: notebook, then where the question sits in the journals (answers are stored in the order asked)."""
    ranks = [list(j.entries).index(qid) / max(len(j.entries), 1) for j in journals if qid in j.entries]
    return qid.split(".", 1)[0], statistics.mean(ranks) if ranks else 0.0


def _text(x: Any) -> str | None:
    return x if isinstance(x, str) and x else None


def questions(g: Gathered, only: list[str] | None = None) -> list[Question]:
    """Every question answered in the journals (or those ``only`` names: a qid, or a notebook's number)."""
    qids = {q for j in g.journals for q in j.entries}
    if only:
        wanted = {q for q in qids if any(q == w or q.split(".", 1)[0] == w.rstrip(".") for w in only)}
        missing = [w for w in only if not any(q == w or q.split(".", 1)[0] == w.rstrip(".") for q in qids)]
        if missing:
            some = ", ".join(sorted(qids)[:12]) + (", ..." if len(qids) > 12 else "")
            raise RoomError(f"no question {', '.join(missing)} in these journals; they hold {some}")
        qids = wanted
    out = []
    for qid in sorted(qids, key=lambda q: _order(q, g.journals)):
        entries = [(j, j.entries[qid]) for j in g.journals if qid in j.entries]
        described = sorted((e for _, e in entries if _text(e.get("prompt"))), key=lambda e: str(e.get("when", "")))
        about = described[-1] if described else {}  # the newest wording, when learners ran different versions
        choices = about.get("choices")
        out.append(Question(
            qid, _text(about.get("prompt")), [str(c) for c in choices] if isinstance(choices, list) else None,
            _text(about.get("unit")), _text(about.get("kind")),
            [Answer(j.learner, e.get("answer"), e.get("hit") if isinstance(e.get("hit"), bool) else None,
                    e.get("actual"), e.get("gpu"), status_of(e)) for j, e in entries]))
    return out


# --- the exam ----------------------------------------------------------------------------------------------------

#: the exam's questions: two per trace, its bound and the first thing to fix (helpers/advice/exam.py)
_EXAM_QID = re.compile(rf"^{EXAM}\.trace-(\d+)-(bound|fix)$")


@dataclass
class ExamRow:
    """One exam trace across the room: how many got its bound, its first fix, and both right."""

    trace: int
    bound: tuple[int, int]  # (right, graded)
    fix: tuple[int, int]
    both: tuple[int, int]  # learners with both answers graded: (both right, such learners)


def _graded(e: dict | None) -> bool | None:
    """A first answer's grade: True held, False missed, None not answered or not graded."""
    st = status_of(e) if isinstance(e, dict) else None
    return {"held": True, "missed": False}.get(st) if st else None


def exam_rows(g: Gathered) -> list[ExamRow]:
    """Per exam trace (the exam notebook's ``trace-N-bound`` and ``trace-N-fix`` questions), the room's results."""
    traces = sorted({int(m.group(1)) for j in g.journals for q in j.entries if (m := _EXAM_QID.match(q))})
    rows = []
    for n in traces:
        marks = [(_graded(j.entries.get(f"{EXAM}.trace-{n}-bound")), _graded(j.entries.get(f"{EXAM}.trace-{n}-fix")))
                 for j in g.journals]
        bound = [b for b, _ in marks if b is not None]
        fix = [f for _, f in marks if f is not None]
        both = [b and f for b, f in marks if b is not None and f is not None]
        rows.append(ExamRow(n, (sum(bound), len(bound)), (sum(fix), len(fix)), (sum(both), len(both))))
    return rows


def exam_scores(g: Gathered) -> list[tuple[str, int, int]]:
    """Each learner with exam answers: (learner, right, graded)."""
    out = []
    for j in g.journals:
        marks = [_graded(e) for q, e in j.entries.items() if _EXAM_QID.match(q)]
        marks = [m for m in marks if m is not None]
        if marks:
            out.append((j.learner, sum(marks), len(marks)))
    return out


def _of(x: tuple[int, int]) -> str:
    right, n = x
    return f"{right} of {n} ({100 * right / n:.0f}%)" if n else "-"


def exam_text(g: Gathered) -> list[str]:
    """The exam's block for the terminal: a line per trace, then the learners' scores; nothing without answers."""
    rows = exam_rows(g)
    if not rows:
        return []
    out = ["", f"The exam (notebook {EXAM}), per trace: how many got it right (first answers)",
           f"  {'trace':>5}  {'bound':<16}  {'first fix':<16}  {'both':<16}"]
    out += [f"  {r.trace:>5}  {_of(r.bound):<16}  {_of(r.fix):<16}  {_of(r.both):<16}" for r in rows]
    scores = exam_scores(g)
    if scores:
        out.append("  scores: " + ", ".join(f"{name} {right}/{n}" for name, right, n in scores))
    return out


def _exam_html(g: Gathered) -> str:
    rows = exam_rows(g)
    if not rows:
        return ""
    e = html.escape
    body = "".join(f"<tr><td class=n>{r.trace}</td><td>{_of(r.bound)}</td><td>{_of(r.fix)}</td><td>{_of(r.both)}</td>"
                   "</tr>" for r in rows)
    scores = "; ".join(f"{e(name)} {right}/{n}" for name, right, n in exam_scores(g))
    return (f"<section id='exam'><h2>The exam (notebook {EXAM}), per trace</h2><p class='meta'>How many learners got "
            "each trace's bound, its first fix, and both right (first answers).</p><table><tr><th>trace</th>"
            f"<th>bound</th><th>first fix</th><th>both</th></tr>{body}</table>"
            + (f"<p class='meta'>Scores: {scores}.</p>" if scores else "") + "</section>")


# --- the terminal ------------------------------------------------------------------------------------------------


def _bar(n: int, most: int) -> str:
    return "#" * (round(BAR * n / most) if most else 0)


def text(g: Gathered, qs: list[Question]) -> str:
    """The room in plain ASCII text (non-ASCII in names and prompts is left to the terminal's error handler)."""
    lines = [f"The room: {len(g.journals)} learner{'s' if len(g.journals) != 1 else ''} "
             f"({', '.join(j.learner for j in g.journals)}), {len(qs)} question{'s' if len(qs) != 1 else ''}."]
    if g.left_out:
        lines += ["", "Left out:"] + [f"  {x}" for x in g.left_out]
    if g.notes:
        lines += ["", "Worth knowing:"] + [f"  {x}" for x in g.notes]
    if any(_EXAM_QID.match(q.qid) for q in qs):  # not when --question picked other questions
        lines += exam_text(g)
    for q in qs:
        lines += ["", f"{q.qid}  {q.prompt or '(no prompt: older journals only)'}"]
        lines.append(f"  answered by {len(q.answers)}; {q.held_text()}")
        rows = q.rows()
        most = max((r.count for r in rows), default=0)
        for r in rows:
            mark = ""
            if r.traces:
                mark = "   <- the trace" + (f" ({r.traces} of {sum(x.traces for x in rows)})"
                                             if r.traces != sum(x.traces for x in rows) else "")
            lines.append(f"  {r.count:>4}  {_bar(r.count, most):<{BAR}}  {r.label}"
                         f"{q._unit if q.numeric else ''}{mark}")
        if q.numeric and len(q.answers) > 1:
            lo, q1, med, q3, hi = q.quartiles()
            lines.append(f"  answers: smallest {fmt(lo)}, quartiles {fmt(q1)} / {fmt(med)} / {fmt(q3)}, "
                         f"largest {fmt(hi)}{q._unit}")
        lines.append(f"  {q.headline()}")
    return "\n".join(lines)


# --- the HTML page -----------------------------------------------------------------------------------------------


def _chart(q: Question) -> str | None:
    """The question's bar chart as a PNG data URL, or None without matplotlib."""
    try:
        from matplotlib.figure import Figure  # no pyplot: no backend, no global state
    except ImportError:
        return None
    import textwrap

    rows = q.rows()
    labels = ["\n".join(textwrap.wrap(r.label + (q._unit if q.numeric else ""), 46)) or " " for r in rows]
    height = 0.7 + sum(0.26 + 0.15 * lab.count("\n") for lab in labels)
    fig = Figure(figsize=(7.5, height), dpi=100)
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    colors = ["#1a7f37" if r.traces else "#8c96a8" for r in rows]
    ax.barh(y, [r.count for r in rows], color=colors, height=0.7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8.5)
    most = max((r.count for r in rows), default=0)
    for yi, r in zip(y, rows):
        note = f"{r.count}" + ("  (the trace)" if r.traces else "")
        ax.text(r.count + most * 0.01 + 0.05, yi, note, va="center", fontsize=8.5,
                color="#1a7f37" if r.traces else "#333")
    ax.set_xlim(0, most * 1.35 + 0.5)
    ax.set_ylim(-0.6, len(rows) - 0.4)  # the same bar thickness whatever the number of rows
    ax.set_xlabel("learners", fontsize=8.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:60em;margin:1.5em auto;padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.1em;margin:0 0 .3em}
section{border-top:1px solid #ddd;padding:1em 0}
.headline{font-size:1.15em;border-left:5px solid #888;padding:.3em .7em;background:#f5f5f5}
.headline.agree{border-color:#1a7f37;background:#f3f8f4} .headline.differ{border-color:#b35900;background:#fcf5ee}
.meta,.note{color:#555;font-size:.9em} code{background:#f2f2f2;padding:0 .2em}
table{border-collapse:collapse;font-size:.9em} td,th{padding:.15em .6em;text-align:left;border-bottom:1px solid #eee}
td.n{text-align:right} tr.trace td{color:#1a7f37;font-weight:600}
"""


_CLASS = {True: "agree", False: "differ", None: ""}  # the headline's colour: the room against the trace


def page(g: Gathered, qs: list[Question], title: str = "How the room predicted") -> str:
    """The room as one self-contained HTML page: a section per question with its chart and headline."""
    e = html.escape
    charts = [_chart(q) for q in qs]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{e(title)}</h1>",
             f"<p class='meta'>{len(g.journals)} learners ({e(', '.join(j.learner for j in g.journals))}), "
             f"{len(qs)} questions; gathered {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')}.</p>"]
    if qs and all(c is None for c in charts):
        parts.append("<p class='note'>The charts need matplotlib (<code>pip install matplotlib</code>); "
                     "the tables below say the same.</p>")
    for heading, items in (("Left out", g.left_out), ("Worth knowing", g.notes)):
        if items:
            parts.append(f"<details><summary class='note'>{heading}: {len(items)}</summary><ul class='note'>"
                         + "".join(f"<li>{e(x)}</li>" for x in items) + "</ul></details>")
    if any(_EXAM_QID.match(q.qid) for q in qs):
        parts.append(_exam_html(g))
    for q, chart in zip(qs, charts):
        held = q.held_text()
        held = held[:1].upper() + held[1:] + "."
        rows = q.rows()
        total = max(len(q.answers), 1)
        body = "".join(f"<tr{' class=trace' if r.traces else ''}><td>{e(r.label)}{e(q._unit) if q.numeric else ''}"
                       f"</td><td class=n>{r.count}</td><td class=n>{100 * r.count / total:.0f}%</td>"
                       f"<td>{'the trace' + (f' ({r.traces})' if r.traces != sum(x.traces for x in rows) else '') if r.traces else ''}</td></tr>"
                       for r in rows)
        quart = ""
        if q.numeric and len(q.answers) > 1:
            lo, q1, med, q3, hi = q.quartiles()
            quart = (f"<p class='meta'>Answers: smallest {fmt(lo)}, quartiles {fmt(q1)} / {fmt(med)} / {fmt(q3)}, "
                     f"largest {fmt(hi)}{e(q._unit)}.</p>")
        table = (f"<table><tr><th>{'answer' if q.numeric else 'choice'}</th><th>learners</th><th>share</th><th></th>"
                 f"</tr>{body}</table>{quart}")
        parts.append(
            f"<section id='{e(q.qid)}'><h2><code>{e(q.qid)}</code> {e(q.prompt or '(no prompt: older journals only)')}"
            f"</h2><p class='headline {_CLASS[q.agrees()]}'>{e(q.headline())}</p>"
            + (f"<img src='{chart}' alt='{e(q.qid)}: answers per choice'>" if chart else "")
            + f"<p class='meta'>{len(q.answers)} answered. {e(held)}</p>"
            # With a chart the table only repeats it in numbers: folded, so the page projects as charts.
            + (f"<details><summary class='meta'>the numbers</summary>{table}</details>" if chart else table)
            + "</section>")
    parts.append("</body></html>")
    return "".join(parts)


def run(paths: list[str], html_out: str | None = None, only: list[str] | None = None) -> int:
    """The command: print the room; with ``html_out``, write the page too. Raises RoomError on unusable input."""
    g = gather(paths)
    if not g.journals:
        why = "; ".join(g.left_out[:4]) + (f" (and {len(g.left_out) - 4} more)" if len(g.left_out) > 4 else "")
        raise RoomError(f"no journal to show: {why or 'nothing given'}")
    qs = questions(g, only)
    if html_out:
        target = Path(html_out)
        try:
            target.write_text(page(g, qs), encoding="utf-8")
        except OSError as e:
            raise RoomError(f"cannot write the page {target}: {e.strerror or e}") from None
    print(text(g, qs))
    if html_out:
        print(f"\nThe page: {html_out}")
    return 0
