"""Predict, then reveal: headless runs reveal with the default; clicks lock, journal, then reveal."""

from __future__ import annotations

import warnings
from html.parser import HTMLParser

import pytest

from helpers.lesson import journal, widgets


@pytest.fixture
def journal_file(tmp_path, monkeypatch):
    path = tmp_path / "journal.json"
    monkeypatch.setenv("PROFILING_JOURNAL", str(path))
    return path


def test_headless_calls_the_reveal_with_the_default(journal_file, monkeypatch):
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    seen = []
    widgets.ask("99.q", "Which?", choices=["a", "b"], default="b",
                reveal=lambda a: seen.append(a) or widgets.verdict(a == "a", ""))
    assert seen == ["b"]
    assert journal.load()["99.q"]["answer"] == "b" and journal.load()["99.q"]["hit"] is False


def test_a_reveal_returns_its_outcome_and_the_journal_keeps_it(journal_file, monkeypatch):
    """What the reveal returns is what is recorded: the status and what the trace showed, no side channel."""
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setattr(widgets, "_display", lambda obj: None)
    widgets.ask("99.o", "Which?", choices=["a", "b"], default="a", reveal=lambda a: widgets.verdict(False, "", "b"))
    e = journal.load()["99.o"]
    assert (e["hit"], e["status"], e["actual"]) == (False, "missed", "b")
    out = widgets.inconclusive("noise", actual="a")
    assert (out.status, out.hit, out.actual, out.rerun) == (widgets.Status.INCONCLUSIVE, None, "a", False)  # headless
    assert widgets.verdict(None, "").status is widgets.Status.OPEN


def test_a_reveal_that_returns_no_outcome_is_named(journal_file, monkeypatch):
    """A reveal that returns a bare bool (the old way) or forgets to return fails at once, naming its question."""
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setattr(widgets, "_display", lambda obj: None)
    with pytest.raises(TypeError, match=r"99\.bool: its reveal returned True"):
        widgets.ask("99.bool", "Which?", choices=["a", "b"], default="a", reveal=lambda a: True)
    with pytest.raises(TypeError, match=r"99\.none: its reveal returned None"):
        widgets.ask("99.none", "Which?", choices=["a", "b"], default="a", reveal=lambda a: None)


def test_default_must_be_a_choice(journal_file, monkeypatch):
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    with pytest.raises(ValueError, match="not one of the choices"):
        widgets.ask("99.q", "Which?", choices=["a", "b"], default="c", reveal=lambda a: widgets.verdict(True, ""))


def _interactive(monkeypatch):
    """Run ask() as if in a live kernel, and hand back the widget it displayed."""
    shown = []
    monkeypatch.delenv("PROFILING_HEADLESS", raising=False)
    monkeypatch.setattr(widgets, "_can_show_widgets", lambda: True)
    monkeypatch.setattr(widgets, "_display", shown.append)
    return shown


def test_click_locks_then_reveals(journal_file, monkeypatch):
    shown = _interactive(monkeypatch)
    seen = []
    widgets.ask("99.pick", "Which?", choices=["a", "b"], default="a",
                reveal=lambda a: seen.append(a) or widgets.verdict(a == "b", ""))
    (box,) = shown
    _question, radio, row, _out = box.children
    button, status = row.children
    assert seen == [] and not journal_file.exists()  # nothing revealed before the click
    button.click()  # no choice yet: refused, nothing locked
    assert seen == [] and not button.disabled and "Pick one" in status.value
    radio.value = "b"
    button.click()
    assert seen == ["b"]
    assert radio.disabled and button.disabled  # locked
    assert journal.load()["99.pick"] == {**journal.load()["99.pick"], "answer": "b", "hit": True}
    button.click()  # a disabled button cannot reveal twice
    assert seen == ["b"]


def test_numbers_are_parsed_before_locking(journal_file, monkeypatch):
    shown = _interactive(monkeypatch)
    seen = []
    widgets.ask("99.num", "How long?", unit="us", default=5,
                reveal=lambda a: seen.append(a) or widgets.verdict(widgets.within(a, 10), ""))
    (box,) = shown
    _question, row, buttons, _out = box.children
    text = row.children[0]
    button, status = buttons.children
    text.value = "ten"
    button.click()
    assert seen == [] and "Type a number" in status.value
    text.value = "1.2e1"
    button.click()
    assert seen == [12.0] and journal.load()["99.num"]["hit"] is True


@pytest.mark.parametrize("text,value", [("150", 150.0), ("1,200", 1200.0), ("2.5e3", 2500.0), ("40%", 40.0),
                                        ("", None), ("abc", None), ("nan", None), ("inf", None)])
def test_parse_number(text, value):
    assert widgets.parse_number(text) == value


def test_within_a_factor():
    assert widgets.within(15, 10) and widgets.within(5, 10) and not widgets.within(4.9, 10)
    assert not widgets.within(None, 10) and not widgets.within(0, 10)


def test_scores_per_notebook(journal_file):
    journal.record("01.a", "x", True)
    journal.record("01.b", "y", False)
    journal.record("02.a", "z", None)
    journal.record("01.b", "y2", True)  # answering again changes nothing: the first answer stays
    journal.record("02.b", 3, None, status="inconclusive")
    scores = {s.notebook: s for s in journal.scores()}
    assert (scores["01"].hits, scores["01"].misses) == (1, 1)
    assert journal.load()["01.b"]["answer"] == "y"
    assert (scores["02"].open, scores["02"].inconclusive, scores["02"].hits) == (1, 1, 0)


def test_an_inconclusive_grade_is_replaced_only_for_the_same_answer(journal_file):
    journal.record("05.t", "a", None, status="inconclusive", actual="a")
    journal.record("05.t", "b", True, actual="b")  # another answer: ignored
    assert journal.load()["05.t"]["status"] == "inconclusive" and journal.load()["05.t"]["answer"] == "a"
    journal.record("05.t", "a", False, actual="c")  # the same answer, graded on a conclusive rerun
    e = journal.load()["05.t"]
    assert (e["answer"], e["hit"], e["status"], e["actual"]) == ("a", False, "missed", "c")
    journal.record("05.t", "a", True)  # once graded, it stays graded
    assert journal.load()["05.t"]["hit"] is False


def test_a_broken_journal_is_kept_and_reported(journal_file):
    earlier = b'{"01.a": {"answer": "x", "hit": true}, "02.b": {"answ'  # cut short: every earlier prediction
    journal_file.write_bytes(earlier)
    with pytest.warns(journal.JournalWarning) as said:
        journal.record("03.a", 1, True)
    (kept,) = journal_file.parent.glob("journal.broken-*.json")
    assert kept.read_bytes() == earlier  # the old bytes, untouched
    assert journal.load() == {"03.a": journal.load()["03.a"]} and journal.load()["03.a"]["answer"] == 1
    (message,) = [str(w.message) for w in said]
    assert str(journal_file) in message and str(kept) in message and "not valid JSON" in message


def test_a_journal_that_is_not_an_object_is_kept_too(journal_file):
    journal_file.write_text("[1, 2]")
    with pytest.warns(journal.JournalWarning, match="holds a JSON list"):
        assert journal.load() == {}
    (kept,) = journal_file.parent.glob("journal.broken-*.json")
    assert kept.read_text() == "[1, 2]" and not journal_file.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: the new journal is fine
        journal.record("03.a", 1, True)
        assert journal.load()["03.a"]["hit"] is True


def test_two_broken_journals_in_one_second_are_both_kept(journal_file):
    for data in (b"{one", b"\xff\xfe not text"):
        journal_file.write_bytes(data)
        with pytest.warns(journal.JournalWarning):
            journal.load()
    kept = sorted(p.read_bytes() for p in journal_file.parent.glob("journal.broken-*.json"))
    assert kept == [b"{one", b"\xff\xfe not text"]


def test_an_unreadable_journal_is_not_written_over(journal_file):
    journal_file.mkdir()  # a folder where the journal should be: it cannot be read, and must not be replaced
    (journal_file / "keep.txt").write_text("mine")
    with pytest.warns(journal.JournalWarning, match="cannot be read"):
        journal.record("03.a", 1, True)
    assert (journal_file / "keep.txt").read_text() == "mine"


class _Text(HTMLParser):
    """What a browser shows of some HTML: its text, without the tags."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.feed(markup)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def test_a_kernel_name_shows_intact_in_a_reveal(monkeypatch, h200):
    from helpers import facts
    from helpers.lesson import show
    from helpers.reader.trace import read_trace

    shown = []
    monkeypatch.setattr(widgets, "_display", shown.append)
    names = [k.name for k in facts.kernels(read_trace(h200 / "4096_bf16_warm_eager.json"))]
    name = next(n for n in names if "<" in n and ">" in n)  # the elementwise add: a C++ template
    page = widgets.reveal_box("09.x", "yes", widgets.verdict(True, f"The add runs as {show.code(name)}, every step."))
    assert name in "".join(_Text(page).parts)
    # unescaped, the browser eats the template
    page = widgets.reveal_box("09.x", "yes", widgets.verdict(True, f"The add runs as <code>{name}</code>."))
    assert name not in "".join(_Text(page).parts)


def test_bucket_picks_the_choice_a_value_falls_in():
    choices = ["under 1%", "1% to 10%", "more"]
    assert [widgets.bucket(v, [0.01, 0.1], choices) for v in (0.0, 0.009, 0.01, 0.5)] == \
        ["under 1%", "under 1%", "1% to 10%", "more"]
    with pytest.raises(ValueError):
        widgets.bucket(1, [1, 2], ["a", "b"])


def test_after_waits_for_the_answer_then_shows(journal_file, monkeypatch):
    shown = _interactive(monkeypatch)
    widgets._answered.pop("99.gate", None)
    seen = []
    widgets.ask("99.gate", "Which?", choices=["a", "b"], default="a", reveal=lambda a: widgets.verdict(True, ""))
    widgets.after("99.gate", lambda: seen.append("the answer's picture"))
    assert seen == []  # Run All: the cell after the question shows nothing yet
    box = shown[0]
    radio, row = box.children[1], box.children[2]
    radio.value = "b"
    row.children[0].click()
    assert seen == ["the answer's picture"]
    widgets.after("99.gate", lambda: seen.append("later cell"))  # already answered: at once
    assert seen[-1] == "later cell"


def test_after_runs_at_once_headless(journal_file, monkeypatch):
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    widgets._answered.pop("99.never", None)
    seen = []
    widgets.after("99.never", lambda: seen.append(1))
    assert seen == [1]


def test_the_scoreboard_exports_the_journal(journal_file, monkeypatch, tmp_path):
    shown = _interactive(monkeypatch)
    out = tmp_path / "exported"
    monkeypatch.setenv("PROFILING_EXPORT", str(out))
    journal.record("01.a", "x", True)
    widgets.scoreboard()
    table, box = shown
    _board, _intro, row, status = box.children
    name, button = row.children
    button.click()  # no name yet: refused, nothing written
    assert "Type your name" in status.value and not out.exists()
    name.value = "Ada Lovelace"
    button.click()
    (copy,) = out.glob("*.json")
    assert copy.name.startswith("Ada-Lovelace-") and str(copy) in status.value
    assert journal.load(copy) == journal.load() and "Ada Lovelace" in copy.read_text()


def test_the_scoreboard_has_no_button_headless(journal_file, monkeypatch):
    shown = []
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setattr(widgets, "_display", shown.append)
    journal.record("01.a", "x", True)
    widgets.scoreboard()
    (table,) = shown
    assert "1 of the 1 graded held" in table.data


def _click(box, choice):
    """Pick ``choice`` in a question widget and lock it in."""
    radio, row = box.children[1], box.children[2]
    radio.value = choice
    row.children[0].click()


def test_a_locked_question_stays_locked_when_its_cell_runs_again(journal_file, monkeypatch):
    shown = _interactive(monkeypatch)
    seen = []
    ask = lambda: widgets.ask("99.lock", "Which?", choices=["a", "b"], default="a",  # noqa: E731
                              reveal=lambda a: seen.append(a) or widgets.verdict(a == "b", "because"))
    ask()
    _click(shown[0], "b")
    assert journal.load()["99.lock"]["answer"] == "b" and seen == ["b"]
    shown.clear()
    ask()  # the cell again, as after a kernel restart: the locked answer and its reveal, no fresh choice
    box = shown[0]
    assert "Locked: b" in box.children[1].value and not any(
        type(w).__name__ == "RadioButtons" for w in box.children)
    assert seen == ["b", "b"]
    # "Try again": a fresh widget whose answer is a second attempt; the first answer stays counted
    again = next(x for x in shown if isinstance(x, __import__("ipywidgets").VBox) and x.children
                 and getattr(x.children[0], "description", "") == "Try again")
    again.children[0].click()
    attempt = next(x for x in shown if isinstance(x, __import__("ipywidgets").VBox) and len(x.children) == 4
                   and type(x.children[1]).__name__ == "RadioButtons")
    _click(attempt, "a")
    e = journal.load()["99.lock"]
    assert e["answer"] == "b" and e["hit"] is True
    assert [(t["answer"], t["hit"]) for t in e["attempts"]] == [("a", False)]
    assert {s.notebook: s for s in journal.scores()}["99"].hits == 1


def test_the_scoreboard_updates_as_answers_lock(journal_file, monkeypatch):
    shown = _interactive(monkeypatch)
    widgets._boards.clear()
    widgets.scoreboard()  # Run All: drawn before any answer
    assert "No predictions recorded yet" in shown[0].data
    widgets.ask("99.sb", "Which?", choices=["a", "b"], default="a", reveal=lambda a: widgets.verdict(a == "a", ""))
    box = next(x for x in shown if isinstance(x, __import__("ipywidgets").VBox) and len(x.children) == 4
               and type(x.children[1]).__name__ == "RadioButtons")
    n = len(shown)
    _click(box, "a")
    assert any("1 of the 1 graded held" in getattr(x, "data", "") for x in shown[n:])  # the board redrew itself


def test_an_inconclusive_reveal_is_counted_apart_and_regraded_on_a_rerun(journal_file, monkeypatch):
    from helpers.facts import measure

    shown = _interactive(monkeypatch)
    runs = iter([measure.Spread.of([1.1, 1.3, 1.15, 1.25, 1.2], "x"), measure.Spread.of([1.5] * 6, "x")])

    def reveal(a):
        g = measure.grade_choice(a, next(runs), [1.2], ["same", "more"])
        return widgets.grade(g, "the ratio")

    widgets.ask("99.noise", "Which?", choices=["same", "more"], default="same", reveal=reveal)
    _click(shown[0], "more")
    e = journal.load()["99.noise"]
    assert e["status"] == "inconclusive" and e["hit"] is None
    assert {s.notebook: s for s in journal.scores()}["99"].inconclusive == 1
    again = next(x for x in shown if isinstance(x, __import__("ipywidgets").VBox) and x.children
                 and getattr(x.children[0], "description", "") == "Measure again")
    again.children[0].click()  # the second run is conclusive: the first answer is graded
    e = journal.load()["99.noise"]
    assert (e["answer"], e["status"], e["hit"]) == ("more", "held", True)


def test_a_question_declares_its_facts_for_the_leak_check(journal_file, monkeypatch):
    from helpers.lesson import spoilers

    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setenv("PROFILING_LEAK_CHECK", "1")
    raw = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: raw_list.append(obj) if raw else None)
    raw_list = raw
    widgets.ask("99.f", "How long?", unit="us", default=1, reveal=lambda a: widgets.verdict(True, ""),
                decides=lambda: [spoilers.us(152.4), spoilers.name("cuLaunchKernelEx"), spoilers.name("mm")])
    marks = [o[spoilers.MIME] for o in raw if spoilers.MIME in o]
    assert [m["event"] for m in marks] == ["question", "reveal", "end"]
    assert marks[0]["facts"] == [{"kind": "us", "value": 152.4}, {"kind": "name", "value": "cuLaunchKernelEx"}]


def test_without_the_widgets_front_end_every_widget_says_what_to_do(journal_file, monkeypatch):
    """A JupyterLab without the ipywidgets extension shows a widget's plain text: it must say what is wrong."""
    shown = _interactive(monkeypatch)
    widgets.ask("99.plain", "Which?", choices=["a", "b"], default="a", reveal=lambda a: widgets.verdict(True, ""))
    widgets.after("99.plain", lambda: None)
    widgets.exercise("x", "do it", lambda: None)
    widgets.scoreboard()
    boxes = [x for x in shown if isinstance(x, __import__("ipywidgets").Widget)]
    assert len(boxes) >= 4
    for box in boxes:
        text = box._repr_mimebundle_()["text/plain"] if hasattr(box, "_repr_mimebundle_") else repr(box)
        assert text == widgets.NO_WIDGETS and "pip install ipywidgets" in text and len(text) <= 110


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664)])
def test_the_journal_and_exports_honour_the_umask(tmp_path, mask, mode):
    """On a shared hub the instructor reads the class's exports: files get the umask's modes, not -rw-------."""
    import subprocess
    import sys

    code = ("import os, sys; os.umask(int(sys.argv[1], 8)); from helpers.lesson import journal; "
            "journal.record('01.a', 'x', True); print(journal.export('Ada'))")
    env = {**__import__("os").environ, "PROFILING_JOURNAL": str(tmp_path / "j.json"),
           "PROFILING_EXPORT": str(tmp_path / "class")}
    out = subprocess.run([sys.executable, "-c", code, oct(mask)[2:]], capture_output=True, text=True, env=env,
                         check=True).stdout.strip()
    assert (tmp_path / "j.json").stat().st_mode & 0o777 == mode
    assert __import__("pathlib").Path(out).stat().st_mode & 0o777 == mode


def test_the_journal_is_found_from_the_series_folder_wherever_the_kernel_starts(tmp_path):
    """A kernel started at the repository's root (VS Code) or elsewhere uses the notebooks' journal and exports."""
    import os
    import subprocess
    import sys

    from helpers import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("PROFILING_JOURNAL", "PROFILING_EXPORT")}
    env["PYTHONPATH"] = str(ROOT)
    code = "from helpers.lesson import journal; print(journal.path()); print(journal.export_folder())"
    seen = {subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env,
                           check=True).stdout for cwd in (ROOT, ROOT / "notebooks", tmp_path)}
    assert seen == {f"{ROOT / 'notebooks' / '.predictions.json'}\n{ROOT / 'notebooks' / 'exported-journals'}\n"}


def test_a_cpu_measurement_is_not_labelled_with_the_reference_gpu(journal_file, monkeypatch):
    """The room names where each figure was measured: a multiply timed on this CPU is not "NVIDIA H200 (recorded)"."""
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    widgets.ask("99.cpu", "How long?", unit="ms", default=1, reveal=lambda a: widgets.verdict(True, ""), where="cpu")
    assert journal.load()["99.cpu"]["gpu"].startswith("this CPU (") and "live" in journal.load()["99.cpu"]["gpu"]


def test_no_notebook_writes_or_reads_relative_to_where_the_kernel_started():
    """A kernel started at the repository's root (VS Code) or elsewhere must not write traces outside the clone:
    every path a notebook or a lesson uses comes from the series' own folder (helpers.ROOT, runner.RUNS)."""
    import json
    import re

    from helpers import ROOT

    found = []
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text())["cells"]):
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            if c["cell_type"] == "code" and "google.colab" not in src and re.search(r"""["']\.\./""", src):
                found.append(f"{nb.name} cell {i}")
    for mod in sorted((ROOT / "helpers" / "lessons").glob("*.py")):
        if re.search(r"""["']\.\./""", mod.read_text()):
            found.append(mod.name)
    assert not found, f"paths relative to the working directory: {found}"
