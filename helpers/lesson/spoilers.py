"""What would give a question's answer away: the facts that decide it, and how to find them in text.

Each question declares the facts its reveal rests on (``widgets.ask(...,
decides=...)``): measured values with their units, and the names its reveal
reads (kernels, ops, verdict words). A learner must meet none of them before
answering. :func:`found` looks for a fact in any text the series shows (an
output, a markdown cell, a title, a link) in every way the series writes it:
``152.4 µs``, ``152 us``, ``0.15 ms``; ``3.4x``, ``3.40×``; ``34%``.

What counts as a fact: a bare small integer or a choice's own wording does
not (they appear everywhere, and the choices are on screen by design); a
value always comes with its unit, a name is at least six characters.

Live measurements of this machine's CPU are new on every run: a value of one
can match an unrelated figure by chance, run after run differently. So the
check never compares values across them: a question measured on this CPU
(``ask(..., where="cpu")``) is checked on its names only, and its reveal's
text (marked ``live``) is not searched for other questions' values. Everything
else (recorded traces, names, prose) is the same on every run, so a match there
is either a leak or a coincidence that fails every time and gets fixed.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

MIME = "application/vnd.profiling.marker+json"  # headless runs mark questions and gated output with it


@dataclass(frozen=True)
class Fact:
    """One fact that decides a question: a value with its unit, or a name."""

    kind: str  # "us", "x", "%", "name", or another unit word ("TFLOP/s", "MiB", "waits")
    value: Any

    def forms(self) -> list[str]:
        """Every way the series may write it."""
        v = self.value
        if self.kind == "name":
            return [str(v)]
        if self.kind == "us":
            return _time_forms(float(v))
        if self.kind == "x":
            return _ratio_forms(float(v))
        if self.kind == "%":
            return _percent_forms(float(v))
        return [f"{n} {self.kind}" for n in _number_forms(float(v))]

    def describe(self) -> str:
        return self.forms()[0] if self.forms() else str(self.value)


def us(value: float) -> Fact:
    """A duration in microseconds."""
    return Fact("us", value)


def ratio(value: float) -> Fact:
    """A ratio (1.7 is ``1.7x``)."""
    return Fact("x", value)


def share(value: float) -> Fact:
    """A share (0.34 is ``34%``)."""
    return Fact("%", value * 100)


def percent(value: float) -> Fact:
    """A percentage already in percent (34.0 is ``34%``)."""
    return Fact("%", value)


def name(value: str) -> Fact | None:
    """A name the reveal reads (a kernel, an op, a verdict word); None when too short to tell from prose."""
    return Fact("name", value) if value and len(str(value)) >= 6 else None


def exact(text: str) -> Fact:
    """A value as the reveal prints it, matched only in that form (``"2.41x"``): for a figure whose rounder forms
    ("2.4x") also stand for other figures of the series."""
    return Fact("name", text)


def value(v: float, unit: str) -> Fact:
    """A value in a unit of its own: ``value(171, "TFLOP/s")``, ``value(1024, "MiB")``."""
    return Fact(unit, v)


def _number_forms(v: float) -> list[str]:
    """The value written with 0, 1 or 2 decimals, where that still states it to within 1%.

    ``152.4`` is also ``152``; ``9.66`` is ``9.7`` but not ``10``, which would
    match any round number on screen and says a different value.
    """
    if not math.isfinite(v):
        return []
    out = []
    for d in (0, 1, 2):
        s = f"{v:,.{d}f}"
        if v and abs(float(s.replace(",", "")) - v) > 0.01 * abs(v):
            continue
        out += [s, s.replace(",", "")]
    if abs(v) >= 1 and float(v).is_integer():
        out.append(str(int(v)))
    return list(dict.fromkeys(x for x in out if x not in ("0", "0.0", "0.00", "-0")))


def _time_forms(v: float) -> list[str]:
    out = []
    for n in _number_forms(v):
        out += [f"{n} µs", f"{n} us", f"{n}µs", f"{n}us"]
    if abs(v) >= 100:
        for n in _number_forms(v / 1e3):
            out += [f"{n} ms", f"{n}ms"]
    if abs(v) >= 1e5:
        for n in _number_forms(v / 1e6):
            out += [f"{n} s"]
    return out


def _ratio_forms(v: float) -> list[str]:
    out = []
    for n in _number_forms(v):
        out += [f"{n}x", f"{n}×", f"{n} x ", f"{n} times"]
    return out


def _percent_forms(v: float) -> list[str]:
    return [f"{n}%" for n in _number_forms(v)] + [f"{n} %" for n in _number_forms(v)]


def clean(facts: Iterable[Any]) -> list[Fact]:
    """The declared facts that count: Fact objects (None dropped); a plain string counts as a name."""
    out = []
    for f in facts:
        if isinstance(f, str):
            f = name(f)
        if isinstance(f, Fact) and f.forms():
            out.append(f)
    return list(dict.fromkeys(out))


_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")
_UNSEEN = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.S | re.I)  # code a page runs or applies: never shown


def plain_text(s: str) -> str:
    """Text as a reader sees it: scripts and styles dropped, HTML tags dropped, entities read, white space folded."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub(" ", _UNSEEN.sub(" ", s))))


def _boundary_ok(text: str, start: int, end: int, form: str) -> bool:
    """A number must not be part of a longer one: ``3.4x`` is not in ``13.4x``, ``12 µs`` not in ``112 µs``."""
    if form[:1].isdigit() and start > 0 and (text[start - 1].isdigit() or text[start - 1] in ".,"):
        return False
    if form[-1:].isdigit() and end < len(text) and (text[end].isdigit() or (text[end] in ".," and
                                                                           text[end + 1:end + 2].isdigit())):
        return False
    return True


def found(fact: Fact, text: str) -> str | None:
    """The form of ``fact`` that appears in ``text`` (already plain), or None."""
    for form in fact.forms():
        start = text.find(form)
        while start >= 0:
            if _boundary_ok(text, start, start + len(form), form):
                return form
            start = text.find(form, start + 1)
    return None


def output_text(output: dict) -> str:
    """The readable text of one notebook output (stream, display data or a result), markers left out."""
    if output.get("output_type") == "stream":
        t = output.get("text", "")
        return plain_text("".join(t) if isinstance(t, list) else t)
    data = output.get("data") or {}
    parts = []
    for mime in ("text/html", "text/markdown", "text/plain"):
        if mime in data:
            t = data[mime]
            parts.append(plain_text("".join(t) if isinstance(t, list) else t))
            break  # one rendering of the same content is enough
    return " ".join(parts)


def marker(output: dict) -> dict | None:
    """The marker an output carries (headless runs only), or None."""
    data = output.get("data") or {}
    m = data.get(MIME)
    return m if isinstance(m, dict) else None


# --- the series-wide check ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leak:
    """A fact of a question found where a learner sees it before answering."""

    qid: str
    fact: str  # the form found
    where: str  # notebook, cell and what: "03_schedule_and_warmup cell 12 (output)"
    rule: str  # "before the question" or "after it, not held back (Run All)"
    context: str  # the text around it

    def text(self) -> str:
        return (f"{self.qid}: its fact '{self.fact}' is on screen {self.rule}, in {self.where}: "
                f"...{self.context}...")


@dataclass
class _Seen:
    text: str
    where: str
    notebook: int
    gate: str | None  # the question whose answer releases it (a reveal, an after() cell), or None: always shown
    live: bool = False  # a live CPU measurement's text: new figures on every run


def _context(text: str, form: str, width: int = 60) -> str:
    i = text.find(form)
    return text[max(0, i - width):i + len(form) + width].strip()


def find_leaks(notebooks: list[tuple[str, list[dict]]]) -> tuple[list[Leak], int]:
    """Every fact shown before its question, in a series executed in order; and how many questions were checked.

    ``notebooks`` is the series in reading order: (name, cells), each cell a
    dict with ``cell_type``, ``source`` and, for code, the ``outputs`` of a
    headless leak-check run (:data:`MIME` markers in them). A question's
    facts must not appear (1) anywhere before it: an earlier notebook, a
    markdown cell, a cell's code, an output, an earlier reveal, a notebook's
    file name; nor (2) after it in its own notebook where Run All shows it
    before the answer: a markdown cell, or an output no question holds back.
    A fact that is part of one of the question's own choices does not count.
    """
    seen: list[_Seen] = []
    questions: list[tuple[dict, int, int]] = []  # (marker, notebook index, position in seen)
    for nb_i, (name, cells) in enumerate(notebooks):
        seen.append(_Seen(plain_text(name), f"{name} (file name)", nb_i, None))
        for c_i, cell in enumerate(cells):
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else src
            kind = cell.get("cell_type")
            if kind == "markdown":
                seen.append(_Seen(plain_text(src), f"{name} cell {c_i} (markdown)", nb_i, None))
                continue
            if kind != "code":
                continue
            seen.append(_Seen(src, f"{name} cell {c_i} (code)", nb_i, None))
            gates: list[tuple[str | None, bool]] = [(None, False)]
            skip = False  # the headless line between a question and its reveal: the default answer, not a fact
            for out in cell.get("outputs", []):
                m = marker(out)
                if m is not None:
                    ev = m.get("event")
                    if ev == "question":
                        questions.append((m, nb_i, len(seen)))
                        skip = True
                    elif ev in ("reveal", "after"):
                        skip = False
                        gates.append((m.get("qid"), bool(m.get("live")) or gates[-1][1]))
                    elif ev == "live":  # shown at once, but measured now on this CPU
                        gates.append((gates[-1][0], True))
                    elif ev == "end" and len(gates) > 1:
                        gates.pop()
                    continue
                if skip:
                    continue
                t = output_text(out)
                if t.strip():
                    seen.append(_Seen(t, f"{name} cell {c_i} (output)", nb_i, gates[-1][0], gates[-1][1]))
    leaks: list[Leak] = []
    for m, nb_i, pos in questions:
        qid = str(m.get("qid"))
        choices = " ".join(str(c) for c in (m.get("choices") or []))
        facts = [Fact(f["kind"], f["value"]) for f in m.get("facts", [])]
        facts = [f for f in facts if not found(f, choices)]
        if m.get("where") == "cpu":  # measured now on this CPU: a new value every run (see the docstring)
            facts = [f for f in facts if f.kind == "name"]
        for f in facts:
            hit = None
            for s in seen[:pos] + [_Seen(plain_text(str(m.get("prompt", ""))), f"{qid}'s prompt", nb_i, None)]:
                if s.live and f.kind != "name":
                    continue
                form = found(f, s.text)
                if form:
                    hit = Leak(qid, form, s.where, "before the question", _context(s.text, form))
                    break
            if hit is None:
                for s in seen[pos:]:
                    if s.notebook != nb_i:
                        break
                    if s.gate is not None or (s.live and f.kind != "name"):
                        continue
                    form = found(f, s.text)
                    if form:
                        hit = Leak(qid, form, s.where, "after it, where Run All shows it before the answer",
                                   _context(s.text, form))
                        break
            if hit and not any(x.qid == hit.qid and x.where == hit.where for x in leaks):
                leaks.append(hit)
    return leaks, len(questions)
