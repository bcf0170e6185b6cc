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

:mod:`.journals` gathers the files, :mod:`.tally` counts them; this module shows
the count, in the terminal and as a page. Imports neither torch nor (for the
terminal) matplotlib.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
from pathlib import Path

from ..lesson.journal import EXAM
from .journals import Gathered, RoomError, gather
from .tally import _EXAM_QID, Question, _of, exam_rows, exam_scores, fmt, questions

BAR = 24  # the longest text bar, in characters


# --- the exam ----------------------------------------------------------------------------------------------------


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
