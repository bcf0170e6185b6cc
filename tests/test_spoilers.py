"""The leak check: a question's facts found wherever a learner sees them before answering, in every form."""

from __future__ import annotations

from helpers.lesson import spoilers
from helpers.lesson.spoilers import MIME, find_leaks


def mark(**kw):
    return {"output_type": "display_data", "data": {MIME: kw, "text/plain": ""}}


def html(text):
    return {"output_type": "display_data", "data": {"text/html": text, "text/plain": "<IPython.HTML>"}}


def question(qid, facts, choices=None, prompt="How long?"):
    f = [{"kind": x.kind, "value": x.value} for x in facts]
    return [mark(event="question", qid=qid, prompt=prompt, choices=choices, facts=f),
            html("<p>Headless run: answering 10.</p>"), mark(event="reveal", qid=qid)]


def code(*outputs, source="lesson.q()"):
    return {"cell_type": "code", "source": source, "outputs": list(outputs)}


def md(text):
    return {"cell_type": "markdown", "source": text}


def test_a_fact_is_found_in_the_forms_the_series_writes():
    t = spoilers.us(152.4)
    assert spoilers.found(t, "took 152.4 us here") and spoilers.found(t, "about 152 µs")
    assert spoilers.found(spoilers.us(1523.0), "1.52 ms")
    assert not spoilers.found(spoilers.us(12.0), "took 112 us")  # part of a longer number
    assert not spoilers.found(spoilers.ratio(3.4), "13.4x")
    assert spoilers.found(spoilers.ratio(3.4), "3.40x") and spoilers.found(spoilers.share(0.34), "34%")
    assert spoilers.name("mm") is None  # too short to tell from prose
    assert spoilers.plain_text("<b>a&amp;b</b>\n c") == " a&b c"


def test_a_fact_before_its_question_is_a_leak_in_any_earlier_notebook():
    fact = spoilers.us(171.5)
    series = [
        ("01_first", [md("# 01"), code(html("<table><td>171.5 us</td></table>"))]),
        ("02_second", [md("## Your prediction"), code(*question("02.t", [fact]),
                                                      html("It took <b>171.5 us</b>."), mark(event="end", qid="02.t"))]),
    ]
    leaks, checked = find_leaks(series)
    assert checked == 1
    (leak,) = leaks
    assert leak.qid == "02.t" and leak.where == "01_first cell 1 (output)" and leak.rule == "before the question"
    assert "171.5 us" in leak.text()


def test_the_reveal_itself_and_held_back_cells_are_no_leak_but_run_all_text_is():
    fact = spoilers.name("cuLaunchKernelEx")
    clean = [("03_x", [code(*question("03.l", [fact]), html("launched by cuLaunchKernelEx"),
                            mark(event="end", qid="03.l")),
                       code(mark(event="after", qid="03.l"), html("cuLaunchKernelEx again"),
                            mark(event="end", qid="03.l"))])]
    assert find_leaks(clean) == ([], 1)
    run_all = [("03_x", clean[0][1] + [md("As the chain showed, cuLaunchKernelEx launches it.")])]
    (leak,) = find_leaks(run_all)[0]
    assert leak.rule.startswith("after it") and leak.where == "03_x cell 2 (markdown)"
    next_nb = [run_all[0], ("04_y", [md("cuLaunchKernelEx, as 03 found")])]
    assert len(find_leaks(next_nb)[0]) == 1  # a later notebook is read after the answer


def test_a_choice_s_own_wording_and_the_headless_default_do_not_count():
    fact = spoilers.name("aten::bmm")
    series = [("05_b", [md("Which op? aten::bmm or aten::mm"),
                        code(*question("05.op", [fact], choices=["aten::bmm", "aten::mm"]),
                             mark(event="end", qid="05.op"))])]
    assert find_leaks(series) == ([], 1)


def test_a_title_a_link_or_the_question_cell_s_code_can_leak():
    fact = spoilers.name("Batching to bmm")
    for where in (md("Next: **05 · Batching to bmm**"), code(source="# answer: Batching to bmm")):
        series = [("04_a", [where]), ("05_b", [code(*question("05.op", [fact]), mark(event="end", qid="05.op"))])]
        assert len(find_leaks(series)[0]) == 1


def test_live_cpu_figures_are_never_compared_by_value():
    """A CPU measurement is new on every run: its values neither leak by chance nor hide another's by chance."""
    recorded = spoilers.us(11.2)  # a launch latency read from a recorded trace
    live_reveal = [mark(event="question", qid="01.cost", prompt="?", choices=None, where="cpu",
                        facts=[{"kind": "us", "value": 9.2}, {"kind": "name", "value": "aten::expand"}]),
                   mark(event="reveal", qid="01.cost", live=True),
                   html("unprofiled 9.2 us (IQR 9.1 us to 11.2 us), aten::expand"), mark(event="end", qid="01.cost")]
    series = [("00_a", [md("Earlier: 9.2 us, as it happens")]),
              ("01_b", [code(*live_reveal)]),
              ("04_c", [code(*question("04.latency", [recorded]), mark(event="end", qid="04.latency"))])]
    assert find_leaks(series) == ([], 2)
    with_name = [("00_a", [md("the chain goes through aten::expand")])] + series[1:]
    (leak,) = find_leaks(with_name)[0]  # a live question's names are still checked
    assert leak.qid == "01.cost" and leak.fact == "aten::expand"


def test_a_rounded_form_must_still_state_the_value():
    assert spoilers.found(spoilers.us(9660.0), "9.66 ms") and spoilers.found(spoilers.us(9660.0), "9.7 ms")
    assert not spoilers.found(spoilers.us(9660.0), "a pause of 10 ms")  # 3.5% off: another value
    assert spoilers.found(spoilers.us(152.4), "152 us")
