"""A reveal's box as the learner sees it: the verdict and what the learner said against what the trace says, on one
first line; the explanation; the measurement's details folded (``../shared/review/style.md``).

:func:`helpers.lesson.widgets.verdict`, ``grade`` and ``inconclusive`` give the parts (an ``Outcome``); the
widgets' ``_reveal`` shows the box once the reveal returns. ``tests/reveal_format.py`` reads it back.
"""

from __future__ import annotations

import html
from typing import Any

from ..facts.measure import Status


def answer_text(a: Any, unit: str | None, choices: list[str] | None) -> str:
    """An answer as locked: ``3 spans``, never ``3.0 spans`` for a whole number."""
    if isinstance(a, float) and a.is_integer() and abs(a) < 1e15:
        a = int(a)
    return f"{a}{' ' + unit if unit and choices is None else ''}"


def reveal_box(qid: str, answer: Any, o: Any, unit: str | None = None, choices: list[str] | None = None) -> str:
    """The reveal as one block: ``<div class="reveal" data-qid=...>``, its first line the verdict, what the learner
    said and what the trace says; the explanation; the measurement's details folded in a ``<details>``."""
    said = html.escape(answer_text(answer, unit, choices)) if answer is not None else ""
    if o.actual is None:
        trace = ""
    elif isinstance(o.actual, float):
        trace = html.escape(f"{o.actual:.3g}" + (f" {unit}" if unit and choices is None else ""))
    else:
        trace = html.escape(answer_text(o.actual, unit, choices))
    if getattr(o, "status", None) == Status.INCONCLUSIVE and said and trace:
        # an ungraded answer: say why, even where the median agrees with it
        few = getattr(o, "too_few", False)
        first = (f"You said <b>{said}</b>; the measurement points to <b>{trace}</b> too, but it has too few samples "
                 "to grade" if said == trace and few else
                 f"You said <b>{said}</b>; the measurement points to <b>{trace}</b> too, but its spread reaches "
                 "past that choice's edge" if said == trace else
                 f"You said <b>{said}</b>; the measurement points to <b>{trace}</b>, with a spread too wide to tell")
    else:
        by = getattr(o, "said_by", "the trace")
        first = (f"You said <b>{said}</b>" if said else "") + (f"; {by} says <b>{trace}</b>" if trace else "")
    fold = (f"<details style='margin-top:4px'><summary style='color:#555'>How this was measured</summary>"
            f"<div style='color:#555'>{o.details}</div></details>" if o.details else "")
    return (f"<div class='reveal' data-qid='{html.escape(qid)}' style='border-left:4px solid {o.color};"
            f"padding:4px 10px;margin:6px 0'><p class='reveal-head' style='margin:0'><span style='color:{o.color}'>"
            f"{o.head}</span>{' ' + first + '.' if first else ''}</p>{o.body}{fold}</div>")


