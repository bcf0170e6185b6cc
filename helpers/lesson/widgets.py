"""Predict, then reveal: the widgets that ask before the trace answers.

:func:`ask` shows a question with choices (or a box for a number), and a
button. Clicking it locks the answer, writes it to the journal, and only then
calls the reveal: a plain function that takes the answer, shows what the
trace says, and returns an :class:`Outcome` (what :func:`verdict`,
:func:`grade` or :func:`inconclusive` gives: held, missed, inconclusive or
open, and what the trace showed). In a headless run
(``PROFILING_HEADLESS=1``: nbval, CI, the pre-flight check) there is nobody
to click, so the cell calls the reveal directly with a default answer and
every reveal still executes.

A cell after a question must not show that question's answer before the
click, even under Run All: :func:`after` holds such a cell's output back
until the question is answered (headless, it shows it at once).

A question already in the journal stays answered: running its cell again
shows the locked answer and its reveal, never a fresh widget; "Try again"
asks once more and records a second attempt, while the first answer is the
one counted. A reveal that rests on a timing grades with :func:`grade`:
held or missed only outside the measurement's noise, otherwise
*inconclusive here*, with a button that measures again (the first answer
stays, and is graded once a run is conclusive).

Each question declares the facts that decide it (``decides=``): values with
their units and the names its reveal reads. Headless runs with
``PROFILING_LEAK_CHECK=1`` mark each question and each held-back output in
the cell outputs (:mod:`helpers.lesson.spoilers`), so that a test can prove no fact
appears before its question, anywhere in the series.

Only core widgets that exist in ipywidgets 7.7 and 8 are used, so the same
cells work in JupyterLab and on Colab.
"""

from __future__ import annotations

import contextlib
import html
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from . import journal
from .reveal import answer_text as _answer_text, reveal_box
from ..facts.measure import Status, bucket
from ..runs.mode import headless

__all__ = ["Outcome", "Reveal", "Status", "after", "answer_to", "ask", "bucket", "exercise", "grade",
           "inconclusive", "measured_here", "parse_number", "scoreboard", "verdict", "versus", "within"]


@dataclass(frozen=True)
class Outcome:
    """What a reveal returns: what came of the prediction, and what the trace showed.

    ``actual`` is the choice the trace falls in (for a multiple-choice question)
    or the measured value in the question's unit; None when the reveal does not
    say. ``rerun``: inconclusive on a live measurement, so that measuring again
    may settle it (:func:`ask` then offers "Measure again").
    """

    status: Status
    actual: Any = None
    rerun: bool = False
    #: the reveal's box as verdict/grade/inconclusive built it (head, explanation, fold); :func:`_reveal` shows it
    #: under the learner's answer, as one ``<div class="reveal" data-qid=...>``
    head: str = ""
    body: str = ""
    details: str = ""
    color: str = "#555"
    #: who says what the answer is, on the reveal's first line: the trace, or a timing made without the profiler
    said_by: str = "the trace"
    #: inconclusive for too few samples, not for their spread (the reveal's first line says which)
    too_few: bool = False

    @property
    def hit(self) -> bool | None:
        """True held, False missed, None when graded neither way (inconclusive, or no right or wrong)."""
        return self.status.hit


#: a reveal: takes the learner's answer, shows what the trace says, returns its :class:`Outcome`
Reveal = Callable[[Any], Outcome]

# Questions answered in this kernel, and cells waiting for them: qid -> answer, qid -> [(output, show)].
_answered: dict[str, Any] = {}
_waiting: dict[str, list[tuple[Any, Callable[[], None]]]] = {}


def _display(obj: Any) -> None:
    from IPython.display import display

    display(obj)


def _html(text: str):
    from IPython.display import HTML

    return HTML(text)


LEAK_CHECK_VAR = "PROFILING_LEAK_CHECK"


def _leak_check() -> bool:
    return headless() and os.environ.get(LEAK_CHECK_VAR) == "1"


def _mark(**what: Any) -> None:
    """A marker in the cell's output for the series-wide leak test (headless leak checks only; never on screen)."""
    if not _leak_check():
        return
    from IPython.display import display

    from .spoilers import MIME

    display({MIME: what, "text/plain": ""}, raw=True)


def _facts(decides: Any) -> list[dict[str, Any]]:
    """The declared facts, as the leak test reads them (evaluated only in a leak check)."""
    from .spoilers import clean

    found = decides() if callable(decides) else (decides or [])
    return [{"kind": f.kind, "value": f.value} for f in clean(found)]


#: what a front end without Jupyter widgets shows instead of a question (ipywidgets cuts it at 110 characters)
NO_WIDGETS = "[Widget not shown: this Jupyter lacks the widgets front end. Run pip install ipywidgets where Jupyter runs]"
_BOX: Any = None


def _box(children: list) -> Any:
    """A VBox whose plain-text form (what a front end without the widgets extension shows) says what is wrong
    and the one command that fixes it, instead of ``VBox(children=(HTML(value='<b>Predict:</b> ...``."""
    global _BOX
    if _BOX is None:
        import ipywidgets as W

        class SeriesBox(W.VBox):
            def __repr__(self) -> str:
                return NO_WIDGETS

        _BOX = SeriesBox
    return _BOX(children)


def _can_show_widgets() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
        return ip is not None and getattr(ip, "kernel", None) is not None
    except ImportError:
        return False


def parse_number(text: str) -> float | None:
    """A number the learner typed ('150', '1,200', '2.5e3', '40%'), or None."""
    t = str(text).strip().replace(",", "").replace("_", "").rstrip("%").strip()
    try:
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def within(answer: float | None, actual: float, factor: float = 2.0) -> bool:
    """A numeric prediction holds when it is within ``factor`` of the trace's value."""
    if answer is None or answer <= 0 or actual <= 0:
        return answer == actual
    return 1 / factor <= answer / actual <= factor


# What the widget says, by kind of question: a prediction, or a task done in Perfetto and checked on the trace.
_KINDS = {"predict": ("Predict:", "Lock in my prediction"), "task": ("Find in Perfetto:", "Check what I found")}


def ask(qid: str, prompt: str, *, reveal: Reveal, default: Any, choices: list[str] | None = None,
        unit: str | None = None, kind: str = "predict", decides: "Callable[[], Iterable[Any]] | None" = None,
        where: str | None = None) -> None:
    """Ask one prediction (or a Perfetto task, ``kind="task"``), then reveal.

    ``qid`` is ``"<notebook>.<name>"`` (``"02.gpu-share"``); ``choices`` makes
    it multiple choice, otherwise the learner types a number in ``unit``.
    ``default`` is the answer a headless run gives. ``decides`` returns the
    facts the reveal rests on (:mod:`helpers.lesson.spoilers`: values with units,
    names), which must appear nowhere before the question. ``where="cpu"``
    says the reveal reads a measurement of this machine's CPU, not a GPU
    trace: the journal (and the room) then name this CPU as its source.
    """
    if choices is not None and default not in choices:
        raise ValueError(f"{qid}: the default answer {default!r} is not one of the choices")
    lead, _button = _KINDS[kind]
    about = {"prompt": prompt, "choices": choices, "unit": unit if choices is None else None, "kind": kind}
    if where == "cpu":
        about["gpu"] = _cpu_source()
    if headless() or not _can_show_widgets():
        if _leak_check():
            _mark(event="question", qid=qid, prompt=prompt, choices=choices, facts=_facts(decides), where=where)
        _display(_html(f"<p><b>{lead}</b> {html.escape(prompt)}<br>"
                       f"<i>Headless run: answering {html.escape(str(default))}"
                       f"{' ' + html.escape(unit) if unit and choices is None else ''}.</i></p>"))
        _mark(event="reveal", qid=qid, live=where == "cpu")
        _record(qid, default, _reveal(qid, default, reveal, about), about)
        _mark(event="end", qid=qid)
        return
    first = journal.entry(qid)
    if first is not None:  # the journal is the truth: an answered question stays answered
        _locked(qid, prompt, first, reveal, choices, unit, kind, about)
        return
    _answered.pop(qid, None)  # asked afresh: cells after it wait for the answer
    _interactive(qid, prompt, reveal, choices, unit, kind, about)


def _trace_source() -> str | None:
    """Where this kernel's traces come from ("NVIDIA H200", "NVIDIA H200 (recorded)"), or None when not known yet.

    Read only from the environment a notebook has already detected (its banner
    does): ask() must not import torch or probe the GPU itself.
    """
    from ..runs import mode

    if mode.environment.cache_info().currsize == 0:
        return None
    try:
        e = mode.environment()
    except Exception:  # noqa: BLE001 - a label for the journal must never stop the lesson
        return None
    if e.live:
        return e.gpu
    return f"{e.reference.gpu} (recorded)" if e.reference else None


def _cpu_source() -> str:
    """Where a CPU measurement was taken, for the journal: this machine's processor, live."""
    import platform

    cpu = platform.processor() or platform.machine() or "CPU"
    return f"this CPU ({cpu}, live)"


def _reveal(qid: str, answer: Any, reveal: Reveal, about: dict | None = None, attempt: bool = False) -> Outcome:
    """Call the reveal and return its outcome; an inconclusive live one gets a "Measure again" button under it."""
    outcome = reveal(answer)
    if not isinstance(outcome, Outcome):  # a reveal that forgot to return its verdict: say where, at once
        raise TypeError(f"{qid}: its reveal returned {outcome!r}, not an Outcome: a reveal returns what "
                        "widgets.verdict(), widgets.grade() or widgets.inconclusive() gives")
    _display(_html(reveal_box(qid, answer, outcome, (about or {}).get("unit"), (about or {}).get("choices"))))
    if outcome.rerun and _can_rerun():
        _rerun_button(qid, answer, reveal, about or {}, attempt)
    return outcome


def _record(qid: str, answer: Any, outcome: Outcome, about: dict[str, Any], attempt: bool = False) -> None:
    """Store the answer, its outcome, what the trace showed and the question itself; release the cells after it."""
    if attempt:
        journal.attempt(qid, answer, outcome.hit, actual=outcome.actual, status=outcome.status)
    else:
        journal.record(qid, answer, outcome.hit, actual=outcome.actual, status=outcome.status,
                       **{"gpu": _trace_source(), **about})
    _answer(qid, answer)
    _refresh_boards()


def _answer(qid: str, answer: Any) -> None:
    """Mark ``qid`` answered and show the cells that waited for it."""
    _answered[qid] = answer
    for out, show in _waiting.pop(qid, []):
        out.clear_output()
        with out:
            show()


class measured_here(contextlib.ContextDecorator):
    """``with widgets.measured_here(): ...`` (or as a decorator): output of a live measurement of this CPU.

    Its figures are new on every run, so the series' leak check does not
    compare values with it (:mod:`helpers.lesson.spoilers`); nothing changes on screen.
    """

    def __enter__(self) -> "measured_here":
        _mark(event="live")
        return self

    def __exit__(self, *exc: Any) -> None:
        _mark(event="end")


def answer_to(qid: str) -> Any:
    """What was answered to ``qid`` in this kernel, or None (a reveal can refer back to a hypothesis)."""
    return _answered.get(qid)


def after(qid: str, show: Callable[[], None]) -> None:
    """Show what ``show`` displays only once question ``qid`` is answered.

    For a cell that follows a prediction and would give its answer away
    (a chain, a table, a figure from the trace). Headless, or when the
    question is already answered, ``show`` runs at once; otherwise the cell
    shows a placeholder that fills when the prediction is locked in.
    """
    if qid in _answered or headless() or not _can_show_widgets():
        _mark(event="after", qid=qid)
        show()
        _mark(event="end", qid=qid)
        return
    import ipywidgets as W

    out = W.Output()
    with out:
        _display(_html(f"<p style='color:#555'><i>This appears once you lock in your prediction for "
                       f"<code>{html.escape(qid)}</code> above.</i></p>"))
    _waiting.setdefault(qid, []).append((out, show))
    _display(_box([out]))


def _field(W: Any, choices: list[str] | None, unit: str | None, kind: str) -> tuple[Any, Any]:
    """The input (radio buttons, or a text box with its unit) and the row that shows it."""
    if choices is not None:
        field = W.RadioButtons(options=list(choices), value=None, layout=W.Layout(width="max-content"))
        return field, field
    field = W.Text(placeholder="your estimate" if kind == "predict" else "what you found",
                   layout=W.Layout(width="12em"))
    return field, W.HBox([field, W.Label(unit or "")])


def _interactive(qid: str, prompt: str, reveal: Reveal, choices: list[str] | None, unit: str | None,
                 kind: str, about: dict[str, Any], attempt: bool = False, show: Callable[[Any], None] | None = None
                 ) -> None:
    import ipywidgets as W

    lead, label = _KINDS[kind]
    question = W.HTML(f"<b>{lead}</b> {html.escape(prompt)}"
                      + (" <i>(another try: your first answer stays the one counted)</i>" if attempt else ""))
    field, row = _field(W, choices, unit, kind)
    button = W.Button(description=label, button_style="primary",
                      layout=W.Layout(width="max-content"))
    status = W.HTML("")
    out = W.Output()

    def answer() -> Any:
        if choices is not None:
            return field.value
        return parse_number(field.value)

    locked = False

    def on_click(_b: Any) -> None:
        nonlocal locked
        if locked:  # a second click (or a click queued before the button greyed out) changes nothing
            return
        a = answer()
        if a is None:
            status.value = ("<span style='color:#b00'>Pick one answer first.</span>" if choices is not None else
                            "<span style='color:#b00'>Type a number first (for example 150).</span>")
            return
        locked = True
        field.disabled = True
        button.disabled = True
        button.description = "Locked"
        status.value = f"<i>Locked: {html.escape(_answer_text(a, unit, choices))}</i>"
        with out:
            outcome = _reveal(qid, a, reveal, about, attempt)
        _record(qid, a, outcome, about, attempt)
        with out:
            _try_again(qid, prompt, reveal, choices, unit, kind, about)

    button.on_click(on_click)
    (show or _display)(_box([question, row, W.HBox([button, status]), out]))


def _locked(qid: str, prompt: str, first: dict[str, Any], reveal: Reveal, choices: list[str] | None,
            unit: str | None, kind: str, about: dict[str, Any]) -> None:
    """A question the journal already holds: the locked answer, its reveal again, and "Try again"."""
    import ipywidgets as W

    lead, _label = _KINDS[kind]
    a = first.get("answer")
    when = str(first.get("when", ""))[:16].replace("T", " ")
    st = journal.status_of(first)
    word = {Status.HELD: "held", Status.MISSED: "missed", Status.INCONCLUSIVE: "inconclusive so far",
            Status.OPEN: "no right or wrong"}[st]
    out = W.Output()
    _display(_box([W.HTML(f"<b>{lead}</b> {html.escape(prompt)}"),
                     W.HTML(f"<i>Locked: {html.escape(_answer_text(a, unit, choices))}</i> "
                            f"<span style='color:#555'>(answered {html.escape(when)}; {word}. Your journal keeps "
                            "this first answer.)</span>"), out]))
    with out:
        outcome = _reveal(qid, a, reveal, about)
        if st is Status.INCONCLUSIVE and outcome.status is not Status.INCONCLUSIVE:  # graded now: a run is conclusive
            _record(qid, a, outcome, about)
        else:
            _answer(qid, a)
        _try_again(qid, prompt, reveal, choices, unit, kind, about)


def _try_again(qid: str, prompt: str, reveal: Reveal, choices: list[str] | None, unit: str | None,
               kind: str, about: dict[str, Any]) -> None:
    """A button that asks the question once more, as a second attempt (the first answer stays counted)."""
    import ipywidgets as W

    button = W.Button(description="Try again", layout=W.Layout(width="max-content"),
                      tooltip="Answer once more: recorded as another attempt; your first answer stays the one counted")
    out = W.Output()

    def on_click(_b: Any) -> None:
        button.disabled = True
        with out:
            _interactive(qid, prompt, reveal, choices, unit, kind, about, attempt=True)

    button.on_click(on_click)
    _display(_box([button, out]))


def verdict(hit: bool | None, explanation: str, actual: Any = None, *, details: str | None = None,
            said_by: str = "the trace") -> Outcome:
    """Say whether the prediction held, and why; returns the :class:`Outcome` for the reveal to return.

    ``explanation`` is HTML, shown as it is: every value in it that comes from
    a trace (kernel and op names hold ``<``, ``>`` and ``&``) must be escaped,
    with :func:`helpers.lesson.show.code` or ``html.escape``.

    ``actual`` (optional) is what the trace showed: for a multiple-choice
    question the choice the trace falls in (one of the question's choices,
    e.g. ``bucket(ratio, EDGES, CHOICES)``); for a numeric question the
    measured value, in the question's unit. :func:`ask` stores it in the
    journal beside the answer, so that ``python -m helpers room`` can tell a
    class "most of you said X; the trace says Y". Without it the journal
    records the answer and the verdict only. ``hit`` None: no right or wrong.
    ``details`` (HTML): the measurement's details (spread, tolerance, provenance, caveats), folded.
    ``said_by``: what the answer comes from, as the first line names it ("the trace", "the timing").
    The reveal shows the box once it returns (:func:`reveal_box`).
    """
    if hit is None:
        head = "<b>Compare with your guess.</b>"
        color = "#555"
    elif hit:
        head = "<b>&#10004; Your prediction held.</b>"
        color = "#1a7f37"
    else:
        head = f"<b>&#10008; Not what {said_by} shows: the mismatch is the lesson.</b>"
        color = "#b35900"
    return Outcome(Status.of(hit), actual, head=head, body=explanation, details=details or "", color=color,
                   said_by=said_by)


def inconclusive(explanation: str, actual: Any = None, *, recorded: str | None = None, rerun: bool = True,
                 too_few: bool = False) -> Outcome:
    """Say the measurement cannot grade the prediction: its spread is as wide as the effect asked about.

    Not held, not missed: the journal counts it apart. ``recorded`` (HTML)
    adds the reference GPU's figure; ``rerun`` offers to measure again
    (a live measurement only: a recorded one gives the same samples), under
    the reveal. Returns the :class:`Outcome` for the reveal to return.
    """
    again = rerun and _can_rerun()
    body = explanation + ("<br><i>Measure again below: your locked answer stays, and is graded once a run is "
                          "conclusive.</i>" if again else "")
    return Outcome(Status.INCONCLUSIVE, actual, rerun=again,
                   head="<b>&#8776; Inconclusive here: the measurement's spread reaches the line between two choices.</b>", body=body,
                   details=recorded or "", color="#777", too_few=too_few)


def grade(g: Any, explanation: str, *, recorded: str | None = None, live: bool = True) -> Outcome:
    """Show a reveal graded on a measurement (:class:`helpers.facts.measure.Graded`): held, missed, or inconclusive.

    ``explanation`` follows the grade's own sentence on the spread; ``live``
    says whether measuring again could change it (False for recorded samples).
    """
    why = html.escape(g.why[:1].upper() + g.why[1:])
    if not g.conclusive:
        return inconclusive(f"{why}. {explanation}", actual=g.actual, recorded=recorded, rerun=live,
                            too_few=getattr(g, "too_few", False))
    return verdict(g.hit, explanation, actual=g.actual, details=f"{why}." + (f"<br>{recorded}" if recorded else ""),
                   said_by="the timing")


def _can_rerun() -> bool:
    return not headless() and _can_show_widgets()


def _rerun_button(qid: str, answer: Any, reveal: Reveal, about: dict[str, Any], attempt: bool) -> None:
    """Measure again with the same locked answer; a conclusive run grades the first answer."""
    import ipywidgets as W

    button = W.Button(description="Measure again", layout=W.Layout(width="max-content"))
    out = W.Output()

    def on_click(_b: Any) -> None:
        button.disabled = True
        out.clear_output()
        with out:
            outcome = _reveal(qid, answer, reveal, about, attempt)
        if outcome.status is not Status.INCONCLUSIVE:  # else the new reveal offers its own "Measure again"
            _record(qid, answer, outcome, about, attempt)

    button.on_click(on_click)
    _display(_box([button, out]))


VERSUS_CHOICES = ["far less (under half)", "about the same (half to twice)", "far more (over twice)"]


def versus(qid: str, figure: Any, what: str, this_gpu: Callable[[], tuple[float, str]], *, default: str = VERSUS_CHOICES[1],
           explain: Callable[[float], str] | None = None, excess: bool = False) -> None:
    """The article's A100 against this GPU: the learner predicts which side differs, then both are shown.

    ``figure`` is an :class:`helpers.lesson.article.Figure` with a duration or a ratio; ``what`` names the quantity;
    ``this_gpu()`` returns this run's value in the figure's unit and a label saying where it comes from.
    ``excess=True`` compares multipliers by how far each is above 1 (1.87x against 1.02x: 0.87 against 0.02).
    """
    from . import show

    def reveal(answer: str) -> Outcome:
        value, where = this_gpu()
        theirs = figure.value_us if figure.value_us is not None else float(figure.value)
        ours = value
        a, b = (theirs - 1, ours - 1) if excess else (theirs, ours)
        ratio = b / a if a else float("inf")
        show.versus([(what, figure.text(), _fmt(ours, figure))], note=f"{figure.label(capital=True)}; this GPU: {where}")
        actual = bucket(ratio, [0.5, 2.0], VERSUS_CHOICES)
        compared = (f"{b:.2f} above 1, against the article's {a:.2f}" if excess else
                    f"{ratio:.2g}x the article's {figure.text()}")
        return verdict(answer == actual, f"This GPU: <b>{_fmt(ours, figure)}</b>, {compared}. "
                       + (explain(ratio) if explain else ""), actual=actual)

    ask(qid, f"{what}: {figure.quote()}. On this GPU, will it be...", choices=VERSUS_CHOICES, default=default,
        reveal=reveal)


def _fmt(value: float, figure: Any) -> str:
    if figure.value_us is not None:
        return f"{value / 1e3:.2f} ms" if value >= 1e3 else f"{value:.1f} µs"
    return f"{value:.3g}{'%' if figure.unit == '%' else '×' if figure.unit == 'x' else ''}"


def exercise(title: str, prompt: str, solution: Callable[[], None]) -> None:
    """A "change X, predict Y" exercise: the task now, its solution only when asked for (headless: at once)."""
    _display(_html(f"<div style='border:1px dashed #888;padding:6px 10px'><b>Exercise: {html.escape(title)}</b>"
                   f"<br>{prompt}</div>"))
    if headless() or not _can_show_widgets():
        # Behind a button for a learner: held back. Most solutions run something now, on this CPU, so the leak check
        # compares no values with them (names still count): a live figure would match others by chance.
        _mark(event="after", qid=f"exercise: {title}", live=True)
        solution()
        _mark(event="end", qid=f"exercise: {title}")
        return
    import ipywidgets as W

    button = W.Button(description="Show the solution", layout=W.Layout(width="max-content"))
    out = W.Output()

    def on_click(_b: Any) -> None:
        button.disabled = True
        with out:
            solution()

    button.on_click(on_click)
    _display(_box([button, out]))


# The scoreboards shown in this kernel, each with its ``only``: each redraws when an answer locks.
_boards: list[tuple[Any, str | None]] = []


def _board_html(only: str | None = None) -> str:
    """The lessons' board (``only`` None: every notebook but the exam), or one notebook's questions (the exam's)."""
    if only is not None:
        return _exam_html(only)
    rows = [r for r in journal.scores() if r.notebook != journal.EXAM]
    exam = next((r for r in journal.scores() if r.notebook == journal.EXAM), None)
    apart = (f"<p style='color:#555'>Your exam (notebook {journal.EXAM}) is scored apart: {exam.hits} of "
             f"{exam.hits + exam.misses} held, counted on its own board, not here.</p>" if exam else "")
    if not rows:
        return "<p>No predictions recorded yet: this updates as you lock answers in.</p>" + apart
    held = sum(r.hits for r in rows)
    graded = sum(r.hits + r.misses for r in rows)
    unsure = sum(r.inconclusive for r in rows)
    body = "".join(f"<tr><td>{r.notebook}</td><td>{r.hits}</td><td>{r.misses}</td><td>{r.inconclusive}</td></tr>"
                   for r in rows)
    return (f"<p><b>Your predictions so far:</b> {held} of the {graded} graded held"
            + (f"; {unsure} more inconclusive (a timing within its noise: graded neither way)" if unsure else "")
            + f" (journal: <code>{html.escape(str(journal.path()))}</code>; your first answer to each question "
            "counts)</p>"
            "<table><tr><th>notebook</th><th>held</th><th>missed</th><th>inconclusive</th></tr>" + body + "</table>"
            + apart)


def _exam_html(notebook: str) -> str:
    """One notebook's questions answered so far, each with the first answer and its grade, and the score."""
    entries = [(q, e) for q, e in journal.load().items() if q.split(".", 1)[0] == notebook]
    if not entries:
        return f"<p>No answer to notebook {html.escape(notebook)}'s questions yet: this updates as you lock them in.</p>"
    st = [journal.status_of(e) for _, e in entries]
    held, graded = st.count(Status.HELD), st.count(Status.HELD) + st.count(Status.MISSED)
    word = {Status.HELD: "&#10004; held", Status.MISSED: "&#10008; missed", Status.INCONCLUSIVE: "inconclusive",
            Status.OPEN: "-"}
    body = "".join(f"<tr><td><code>{html.escape(q)}</code></td><td>{html.escape(str(e.get('answer')))}</td>"
                   f"<td>{word[s]}</td></tr>" for (q, e), s in zip(entries, st))
    return (f"<p><b>Your score, notebook {html.escape(notebook)}:</b> {held} of {graded} held (your first answer "
            "to each question counts; apart from the lessons' predictions)</p>"
            "<table><tr><th>question</th><th>your answer</th><th></th></tr>" + body + "</table>")


def _refresh_boards() -> None:
    for out, only in _boards:
        out.clear_output()
        with out:
            _display(_html(_board_html(only)))


def scoreboard(only: str | None = None) -> None:
    """Held, missed and inconclusive first answers so far, per notebook; then a button that exports the journal.

    The lessons' board counts every notebook but the exam (:data:`helpers.lesson.journal.EXAM`), whose answers are
    scored apart: ``scoreboard(only="17")`` shows that notebook's questions one by one, with its own score.

    It updates itself as answers lock (under Run All it is drawn before any
    answer). The export (a name box and "Export my journal") writes a copy
    named with the learner's name and the time into ``PROFILING_EXPORT`` or
    ``exported-journals/`` beside the notebooks, for the instructor's
    ``python -m helpers room``. Headless there is nobody to click: no button.
    """
    if headless() or not _can_show_widgets():
        _display(_html(_board_html(only)))
        return
    import ipywidgets as W

    board = W.Output()
    _boards.append((board, only))
    with board:
        _display(_html(_board_html(only)))

    name = W.Text(placeholder="your name", layout=W.Layout(width="14em"))
    button = W.Button(description="Export my journal", layout=W.Layout(width="max-content"))
    status = W.HTML("")

    def on_click(_b: Any) -> None:
        try:
            kept = journal.export(name.value)
        except ValueError as e:  # no name, or nothing answered yet
            status.value = f"<span style='color:#b00'>{html.escape(str(e))}</span>"
            return
        except OSError as e:  # a read-only folder: say so, the lesson goes on
            status.value = (f"<span style='color:#b00'>The copy cannot be written in "
                            f"{html.escape(str(journal.export_folder()))} ({html.escape(str(e))}).</span>")
            return
        status.value = (f"Exported to <code>{html.escape(str(kept.resolve()))}</code>: hand this file to your "
                        "instructor. Exporting again later writes a new copy; the instructor's view keeps "
                        "your latest.")

    button.on_click(on_click)
    _display(_box([board, W.HTML("<b>For the class discussion:</b> export your predictions for the instructor."),
                     W.HBox([name, button]), status]))
