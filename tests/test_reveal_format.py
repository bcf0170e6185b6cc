"""The reveal-format checks find what they are for, on reveals built by the widgets and on planted ones."""

from __future__ import annotations

import reveal_format as rf
from helpers.facts.measure import Status
from helpers.lesson import widgets


def _box(explanation: str, details: str = "", answer="3", actual="3 spans", qid="01.steps", hit=True) -> str:
    o = widgets.verdict(hit, explanation, actual=actual, details=details or None)
    return widgets.reveal_box(qid, answer, o)


def test_a_reveal_built_by_the_widgets_has_the_shape():
    (r,) = rf.reveals(_box("Three <code>ProfilerStep#N</code> spans, one a step.", details="median of 5, IQR ..."))
    assert r.qid == "01.steps" and "You said 3" in r.head and "the trace says 3 spans" in r.head
    assert "median of 5" in r.folded and "median of 5" not in r.outside
    assert rf.shape_problems(r) == [] and rf.length_problems([r]) == []


def test_an_inconclusive_reveal_quotes_the_answer_too():
    o = widgets.inconclusive("The spread is as wide as the effect.", actual=None, recorded="on the H200: 1.2x")
    (r,) = rf.reveals(widgets.reveal_box("07.spread", "under 5%", o))
    assert o.status is Status.INCONCLUSIVE and "You said under 5%" in r.head and "on the H200" in r.folded


def test_planted_faults_are_found():
    # a reveal that printed its own box, with no question id and no quote of the answer
    (r,) = rf.reveals("<div class='reveal'><p class='reveal-head'>Your prediction held.</p>Because.</div>")
    assert rf.shape_problems(r) == ["no question id (data-qid='')",
                                    "its first line does not quote the answer: 'Your prediction held.'"]
    # provenance in the text, not in the fold
    (r,) = rf.reveals(_box("On NVIDIA H200, recorded 2026-12-01 with torch 2.11, driver 580.1: 3 spans."))
    assert rf.provenance_problems(r, ["driver 580.1", "torch 2.11"]) == [
        "provenance outside the fold: 'driver 580.1'", "provenance outside the fold: 'torch 2.11'"]
    (folded,) = rf.reveals(_box("3 spans.", details="NVIDIA H200, driver 580.1"))
    assert rf.provenance_problems(folded, ["driver 580.1"]) == []
    # a wall of text
    long = rf.reveals(_box("word " * 200))
    assert rf.length_problems(long) == [f"01.steps: {rf.words(long[0].outside)} words outside the fold (at most "
                                        f"{rf.MAX_WORDS})", f"the median reveal has {rf.words(long[0].outside)} "
                                        f"words outside its fold (about {rf.MEDIAN_WORDS} at most)"]
