"""Notebook NN's questions: TITLE.

One function per question, called from the notebook with its runs (``lesson.steps(run)``): the question's wording,
its answer's unit (or ``choices=``), the facts that decide it and its reveal live here, so that the notebook's cell
gives nothing away. The reveal runs only once the learner has locked in. (tools/new_notebook.py wrote this module
from the template in docs/template/.)
"""

from __future__ import annotations

from .. import facts
from ..lesson import show, spoilers, widgets


def steps(run) -> None:
    """NN.steps: how many ProfilerStep spans the trace holds (the id starts with the notebook's number)."""
    found = facts.steps(run.trace)

    def reveal(answer):
        n = len(found)
        names = ", ".join(show.code(s.name) for s in found)  # names from a trace are escaped: they may hold < >
        return widgets.verdict(answer == n, f"The trace holds <b>{n}</b> recorded steps: {names}. The schedule's "
                               "wait and warm-up steps ran, but were not recorded.", actual=n)

    # decides: the facts the reveal rests on; the leak check fails the run if any is on screen before this question
    widgets.ask("NN.steps", "How many ProfilerStep spans will the trace hold?", unit="steps", default=0,
                reveal=reveal, decides=lambda: [spoilers.value(len(found), "steps")] + [s.name for s in found])


def checkpoint_facts(run) -> dict:
    """What the reveals rest on, for the notebook's checkpoint cell (compared with tests/golden/NN.json)."""
    return {"recorded steps": [s.name for s in facts.steps(run.trace)]}
