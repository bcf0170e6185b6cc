"""Notebook NN's questions: TITLE.

One function per question, called from the notebook with its runs (``lesson.mm_calls(run)``): the question's
wording, its answer's unit (or ``choices=``), the facts that decide it and its reveal live here, so that the
notebook's cell gives nothing away. The reveal runs only once the learner has locked in. (tools/new_notebook.py
wrote this module from the template in docs/template/.)
"""

from __future__ import annotations

from .. import facts
from ..lesson import spoilers, widgets


def mm_calls(run) -> None:
    """NN.mm-calls: how many aten::mm calls the trace holds (a question's id starts with its notebook's number)."""
    n = facts.op_times(run.trace, "aten::mm").calls
    steps = len(facts.steps(run.trace))

    def reveal(answer):
        return widgets.verdict(answer == n, f"The trace holds <b>{n}</b> <code>aten::mm</code> calls, one in each of "
                               f"its {steps} recorded steps: the schedule's wait and warm-up steps ran the call too, "
                               "but the profiler kept none of their events.", actual=n)

    # decides: the facts the reveal rests on, as it states them ("3 aten::mm calls", not any "3 calls" of another
    # op); the leak check of make test-notebooks fails if one is on screen anywhere before this question
    widgets.ask("NN.mm-calls", "The profiler records only the steps after its wait and warm-up steps. How many "
                "aten::mm calls will the trace hold?", unit="calls", default=0, reveal=reveal,
                decides=lambda: [spoilers.value(n, "aten::mm calls")])


def checkpoint_facts(run) -> dict:
    """What the reveals rest on, for the notebook's checkpoint cell (compared with tests/golden/NN.json)."""
    return {"aten::mm calls": facts.op_times(run.trace, "aten::mm").calls,
            "recorded steps": len(facts.steps(run.trace))}
