"""The room's answers counted, per question and for the exam, against what the trace showed.

For each question in the gathered journals (:mod:`.journals`): how many chose
each choice (numbers: quartiles and histogram bins), how many predictions
held, and what the trace showed, down to the line an instructor opens the
discussion with, "most of you said X; the trace says Y". For the exam
(notebook 17: a bound and a first fix per trace): per trace, how many got
the bound, the fix, and both right, and each learner's score.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..facts.measure import Status
from ..lesson.journal import EXAM, status_of
from .journals import Gathered, Journal, RoomError


# --- per question ------------------------------------------------------------------------------------------------


@dataclass
class Answer:
    learner: str
    answer: Any
    hit: bool | None
    actual: Any  # what this learner's trace showed, None when the journal does not say
    gpu: str | None
    status: Status = Status.OPEN  # held, missed, inconclusive (a timing within its noise) or open


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
        judged = [a.hit for a in self.answers if a.hit is not None and a.status is not Status.INCONCLUSIVE]
        return sum(1 for h in judged if h is True), len(judged)

    def inconclusive(self) -> int:
        """Answers whose measurement was within its noise on the learner's machine: counted apart."""
        return sum(1 for a in self.answers if a.status is Status.INCONCLUSIVE)

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
    return status_of(e).hit if isinstance(e, dict) else None


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
