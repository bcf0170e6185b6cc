"""The room's predictions, on real journals: notebook 03 run headless, its journal kept as two learners'.

Headless, every question takes its default answer, so two runs would agree; one
learner's answers are then changed in the journal files (the API keeps a first answer)
(as a click on another choice would). Beside them: an export of the same run,
made twice by one learner, a copy, a journal cut short, a profiler trace, and
a format-1 journal (the same run stripped to what the older version wrote).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT, SMALL, cli
from helpers.lesson import journal, widgets
from helpers.classroom import journals, room

NOTEBOOK = next((ROOT / "notebooks").glob("03_*.ipynb"))

_RUN = """
import sys
import nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3",
               resources={"metadata": {"path": str(__import__("pathlib").Path(path).parent)}}).execute()
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """Two learners' journals: one written by a headless run of notebook 03, and the same run's journal as a second
    learner's, a minute later. Headless runs of the recorded set answer and grade alike: a second run would give
    the same entries but for the times, at the cost of a second kernel."""
    where = tmp_path_factory.mktemp("runs")
    first, second = where / "first.json", where / "second.json"
    proc = subprocess.run([sys.executable, "-c", _RUN, str(NOTEBOOK)], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=600,
                          env={**os.environ, "PROFILING_MODE": "recorded", "PROFILING_HEADLESS": "1",
                               "PROFILING_JOURNAL": str(first), "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stdout.decode(errors="replace")[-3000:]
    data = json.loads(first.read_text())
    for e in data.values():
        if isinstance(e, dict) and e.get("when"):
            e["when"] = (datetime.fromisoformat(e["when"]) + timedelta(minutes=1)).isoformat(timespec="seconds")
    second.write_text(json.dumps(data, indent=1))
    return first, second


def _other(entry: dict) -> object:
    """An answer other than the headless default: the next choice, or ten times the number."""
    if entry.get("choices"):
        cs = entry["choices"]
        return cs[(cs.index(entry["answer"]) + 1) % len(cs)]
    return entry["answer"] * 10 + 7


def _answer(qid: str, answer: object, where: Path) -> None:
    """Change one answer in a journal file, as another learner's (or a later export's) journal would hold it,
    keeping the question and the trace's answer as recorded. (The journal API keeps a first answer: a learner
    cannot change it, so the file is written directly.)

    The verdict is the trace's answer against the new one where the journal has it; where it has not, the old
    verdict is flipped (any verdict serves: the room counts what the journal says).
    """
    data = json.loads(where.read_text())
    e = data[qid]
    hit = None if e["hit"] is None else (answer == e["actual"] if "actual" in e else not e["hit"])
    e.update(answer=answer, hit=hit, status=("open" if hit is None else "held" if hit else "missed")
             if e.get("status") != "inconclusive" else "inconclusive")
    where.write_text(json.dumps(data, indent=1))


@pytest.fixture(scope="module")
def room_dir(runs, tmp_path_factory) -> Path:
    first, second = runs
    d = tmp_path_factory.mktemp("room")
    # Ada exports twice: the first export, then (after changing her mind on one question) the newer one.
    early = journal.export("Ada", where=first, folder=d)
    ada = d / "ada-work.json"
    shutil.copy(first, ada)
    _answer("03.long-step", _other(journal.load(first)["03.long-step"]), ada)
    late = journal.export("Ada", where=ada, folder=d)
    ada.unlink()
    # Bob: the second run, in his own folder as a plain .predictions.json, every answer changed.
    bob = d / "bob" / ".predictions.json"
    bob.parent.mkdir()
    shutil.copy(second, bob)
    for qid, e in journal.load(bob).items():
        _answer(qid, _other(e), bob)
    shutil.copy(bob, d / "bob-copy.json")  # the same bytes twice
    # Cara's journal from the older version: only answer, hit and when (format 1).
    (d / "cara.json").write_text(json.dumps(
        {q: {k: e[k] for k in ("answer", "hit", "when")} for q, e in journal.load(second).items()}))
    (d / "broken.json").write_bytes(first.read_bytes()[: first.stat().st_size // 2])  # cut short
    shutil.copy(SMALL, d / "a-trace.json")  # a profiler trace left in the folder
    return d


def _kept(d: Path) -> dict[str, dict]:
    """The journals the room should count, read here with the json module: the tests' independent view."""
    newest = max(d.glob("Ada-*.json"), key=lambda p: json.loads(p.read_text())["_journal"]["exported"])
    files = {"Ada": newest, "bob": d / "bob" / ".predictions.json", "cara": d / "cara.json"}
    return {name: {k: v for k, v in json.loads(p.read_text()).items() if not k.startswith("_")}
            for name, p in files.items()}


def test_a_headless_run_records_each_question_and_the_trace(runs):
    entries = json.loads(runs[0].read_text())
    assert entries and all(e["format"] == journal.FORMAT and e["prompt"] and e["kind"] in ("predict", "task")
                           for e in entries.values())
    assert all(e["answer"] in e["choices"] for e in entries.values() if "choices" in e)
    assert any("unit" in e for e in entries.values())  # 03 has numeric questions too
    assert {e["gpu"] for e in entries.values()} == {"NVIDIA H200 (recorded)"}
    vs = entries["03.vs-gap"]  # widgets.versus reports the choice the trace fell in
    assert vs["actual"] in vs["choices"] and vs["hit"] == (vs["answer"] == vs["actual"])


def test_the_room_in_the_terminal(room_dir):
    out = cli("room", room_dir)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("The room: 3 learners (Ada, bob, cara)"), text[:300]
    left = text.split("Left out:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"broken\.json: broken, not valid JSON", left)
    assert "a-trace.json: not a journal (a profiler trace)" in left
    assert re.search(r"bob-copy\.json: a copy of .*\.predictions\.json", left) or \
        re.search(r"\.predictions\.json: a copy of .*bob-copy\.json", left)
    (older,) = [ln for ln in left.splitlines() if "Ada twice" in ln]
    newest = max(room_dir.glob("Ada-*.json"), key=lambda p: json.loads(p.read_text())["_journal"]["exported"])
    assert f"kept {newest}" in older and newest.name not in older.split("kept", 1)[0]
    assert re.search(r"cara\.json \(cara\): an older journal \(format 1\)", text)


def _block(text: str, qid: str) -> list[str]:
    """The lines the terminal output gives one question."""
    start = text.index(f"\n{qid}  ") + 1
    return text[start:].split("\n\n", 1)[0].splitlines()


def test_every_choice_is_counted_and_the_trace_marked(room_dir):
    text = cli("room", room_dir).stdout
    kept = _kept(room_dir)
    qids = {q for entries in kept.values() for q in entries}
    assert len(qids) >= 5
    for qid in qids:
        block = _block(text, qid)
        entries = [e[qid] for e in kept.values() if qid in e]
        about = next(e for e in entries if "choices" in e or "unit" in e)
        assert block[0] == f"{qid}  {about['prompt']}"
        judged = [e["hit"] for e in entries if e["hit"] is not None]
        assert f"answered by {len(entries)}; " in block[1]
        if judged:
            assert f"held: {sum(judged)} of {len(judged)}" in block[1]
        actuals = Counter(str(e["actual"]) for e in entries if "actual" in e)
        if "choices" not in about:
            continue
        counts = Counter(e["answer"] for e in entries)
        rows = {m.group(3): (int(m.group(1)), m.group(4)) for m in
                (re.match(r"\s+(\d+)  (#*)\s+ (.+?)(   <- the trace.*)?$", ln) for ln in block[2:-1]) if m}
        assert set(rows) == set(about["choices"]), (qid, block)  # picked or not, every choice has its row
        assert {c: n for c, (n, _) in rows.items()} == {c: counts[c] for c in about["choices"]}
        assert {c for c, (_, mark) in rows.items() if mark} == set(actuals)
        top, n = counts.most_common(1)[0]
        if [k for k in counts.values() if k == n] == [n]:
            assert f'said "{top}" ({n} of {len(entries)})' in block[-1]
        if len(actuals) == 1:
            (actual,) = actuals
            assert f'the trace says "{actual}"' in block[-1] or f"and so does the trace" in block[-1]
        elif not actuals:
            assert "do not say what the trace showed" in block[-1]


def test_the_trace_s_answer_comes_from_the_run(room_dir, runs):
    vs = json.loads(runs[0].read_text())["03.vs-gap"]
    block = _block(cli("room", room_dir, "--question", "03.vs-gap").stdout, "03.vs-gap")
    marked = [ln for ln in block if "<- the trace" in ln]
    assert len(marked) == 1 and vs["actual"] in marked[0]
    where = "(NVIDIA H200 (recorded), from the 2 of 3 journals that say)"  # Cara's older journal does not say
    said = Counter(e["03.vs-gap"]["answer"] for e in _kept(room_dir).values()).most_common(1)[0][0]
    assert block[-1].endswith(f'the trace says "{vs["actual"]}" {where}.' if said != vs["actual"] else
                              f"and so does the trace {where}.")


def test_a_numeric_question_gets_quartiles(room_dir):
    kept = _kept(room_dir)
    text = cli("room", room_dir, "--question", "03.settle").stdout
    block = _block(text, "03.settle")
    values = sorted(float(e["03.settle"]["answer"]) for e in kept.values())
    assert any(ln.strip().startswith(f"answers: smallest {room.fmt(values[0])}") for ln in block)
    counts = [int(ln.split()[0]) for ln in block[2:] if re.match(r"\s+\d+  ", ln)]
    assert sum(counts) == len(values)
    assert "03.long-step" not in text  # --question keeps the others out


def test_traces_that_differ_are_said_to(room_dir, tmp_path):
    """A learner whose trace fell elsewhere (another GPU): made by recording a different actual, through the API."""
    d = tmp_path / "room"
    shutil.copytree(room_dir, d)
    (d / "bob-copy.json").unlink()  # no longer a copy once Bob's journal changes
    bob = d / "bob" / ".predictions.json"
    e = journal.load(bob)["03.vs-gap"]
    other = next(c for c in e["choices"] if c != e["actual"])
    data = json.loads(bob.read_text())  # another learner's journal: written directly (see _answer)
    data["03.vs-gap"].update(hit=e["answer"] == other, actual=other, gpu="Tesla T4")
    bob.write_text(json.dumps(data, indent=1))
    block = _block(cli("room", d, "--question", "03.vs-gap").stdout, "03.vs-gap")
    assert (f'the traces differ: "{e["actual"]}" in 1 (NVIDIA H200 (recorded)); "{other}" in 1 (Tesla T4), '
            "from the 2 of 3 journals that say." in block[-1])
    assert sum("<- the trace (1 of 2)" in ln for ln in block) == 2


class _Page(HTMLParser):
    """The page's sections: id, headline, images, table rows (text per cell)."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.sections: dict[str, dict] = {}
        self._cur: dict | None = None
        self._in: str | None = None
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self._cur = self.sections.setdefault(a["id"], {"headline": "", "img": [], "rows": []})
        elif self._cur is not None:
            if tag == "p" and a.get("class", "").split()[:1] == ["headline"]:
                self._in = "headline"
            elif tag == "img":
                self._cur["img"].append(a["src"])
            elif tag == "tr":
                self._cur["rows"].append([])
            elif tag == "td":
                self._cur["rows"][-1].append("")
                self._in = "td"

    def handle_endtag(self, tag):
        if tag in ("p", "td"):
            self._in = None

    def handle_data(self, data):
        if self._cur is None or self._in is None:
            return
        if self._in == "headline":
            self._cur["headline"] += data
        else:
            self._cur["rows"][-1][-1] += data


def test_the_html_page(room_dir, tmp_path):
    out_file = tmp_path / "room.html"
    out = cli("room", room_dir, "--html", out_file)
    assert out.returncode == 0 and f"The page: {out_file}" in out.stdout
    page = _Page(out_file.read_text(encoding="utf-8"))
    kept = _kept(room_dir)
    assert set(page.sections) == {q for entries in kept.values() for q in entries}
    text = out.stdout
    for qid, sec in page.sections.items():
        assert sec["headline"] == _block(text, qid)[-1].strip()  # the same line as in the terminal
        (img,) = sec["img"]
        assert base64.b64decode(img.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        entries = [e[qid] for e in kept.values() if qid in e]
        about = next(e for e in entries if "choices" in e or "unit" in e)
        if "choices" in about:
            body = [r for r in sec["rows"] if r]
            assert [r[0] for r in body] == about["choices"]
            assert [int(r[1]) for r in body] == [sum(e["answer"] == c for e in entries) for c in about["choices"]]
            traced = {str(e["actual"]) for e in entries if "actual" in e}
            assert {r[0] for r in body if r[3].startswith("the trace")} == traced


def test_without_matplotlib_the_terminal_works_and_the_page_says_so(room_dir, tmp_path):
    out_file = tmp_path / "room.html"
    code = ("import sys; sys.modules['matplotlib'] = None; from helpers.__main__ import main; "
            f"sys.exit(main(['room', {str(room_dir)!r}, '--html', {str(out_file)!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "03.long-step  " in out.stdout
    page = out_file.read_text(encoding="utf-8")
    assert "The charts need matplotlib" in page and "<img" not in page and "<table>" in page


def test_a_c_locale_gets_escapes_not_a_traceback(room_dir):
    out = cli("room", room_dir, env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"}, encoding="ascii")
    assert out.returncode == 0, out.stderr
    prompt = _kept(room_dir)["Ada"]["03.vs-gap"]["prompt"]  # the article's figure: "228 µs ... 64 × 64"
    assert not prompt.isascii() and prompt.encode("ascii", "backslashreplace").decode() in out.stdout


@pytest.mark.parametrize("args,said", [
    (["--question", "03.nothing"], "no question 03.nothing in these journals; they hold 03."),
    (["--question", "42"], "no question 42 in these journals"),
])
def test_an_unknown_question_is_one_line(room_dir, args, said):
    out = cli("room", room_dir, *args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and said in out.stderr


def test_nothing_usable_is_one_line(tmp_path):
    (tmp_path / "broken.json").write_text("{")
    out = cli("room", tmp_path, tmp_path / "absent.json")
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert "no journal to show" in out.stderr and "broken.json: broken" in out.stderr and "absent.json: not found" \
        in out.stderr
    out = cli("room")
    assert out.returncode == 2 and out.stderr.count("\n") == 1


def test_an_unwritable_page_is_one_line(room_dir, tmp_path):
    out = cli("room", room_dir, "--html", tmp_path / "no-such-folder" / "room.html")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "cannot write the page" in out.stderr


def test_verdict_s_actual_is_recorded_and_does_not_leak(tmp_path, monkeypatch):
    where = tmp_path / "j.json"
    monkeypatch.setenv("PROFILING_JOURNAL", str(where))
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setattr(widgets, "_display", lambda _x: None)
    widgets.ask("99.a", "Which?", choices=["x", "y"], default="x",
                reveal=lambda a: widgets.verdict(a == "y", "It is y.", actual="y"))
    widgets.ask("99.b", "How many?", unit="spans", default=3, reveal=lambda a: widgets.verdict(a == 3, "Three."))
    widgets.ask("99.c", "How long?", unit="us", default=2,
                reveal=lambda a: widgets.verdict(None, "Measured.", actual=__import__("numpy").float64(2.5)))
    e = journal.load()
    assert e["99.a"]["actual"] == "y" and e["99.a"]["choices"] == ["x", "y"] and e["99.a"]["hit"] is False
    assert "actual" not in e["99.b"] and e["99.b"]["unit"] == "spans"  # 99.a's answer did not carry over
    assert e["99.c"]["actual"] == 2.5 and type(e["99.c"]["actual"]) is float and e["99.c"]["hit"] is None


def test_an_older_journal_still_loads_and_scores(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"01.a": {"answer": "x", "hit": True, "when": "2026-01-01T10:00:00"}}))
    journal.record("01.b", 3, False, old, prompt="How many?", unit="kernels", kind="predict")
    assert [(s.hits, s.misses) for s in journal.scores(old)] == [(1, 1)]
    j = journals.read_journal(old)
    assert j.old_entries() == 1 and j.learner == "old"


def test_an_export_is_named_and_loads_as_the_journal(tmp_path, monkeypatch):
    src = tmp_path / "j.json"
    journal.record("01.a", "x", True, src, prompt="Which?", choices=["x"], kind="predict")
    monkeypatch.setenv("PROFILING_EXPORT", str(tmp_path / "out"))
    a = journal.export("  Zoë  O'Neil ", where=src)
    b = journal.export("Zoë O'Neil", where=src)  # the same second: a second file, not overwritten
    assert a != b and a.parent == b.parent == tmp_path / "out"
    assert re.fullmatch(r"Zo-O-Neil-\d{8}-\d{6}(-1)?\.json", a.name)
    assert journal.load(a) == journal.load(src)  # the _journal facts are not a prediction
    assert json.loads(a.read_text())["_journal"]["learner"] == "Zoë O'Neil"
    assert journals.read_journal(a).learner == "Zoë O'Neil"
    with pytest.raises(ValueError, match="name"):
        journal.export("   ", where=src)
    with pytest.raises(ValueError, match="nothing to export"):
        journal.export("Ada", where=tmp_path / "empty.json")


def test_a_hostile_journal_is_shown_escaped(tmp_path):
    """A journal is the learner's file: terminal escapes, a lone surrogate, an integer beyond a float, NaN,
    fields of the wrong type. The room shows them escaped, in the terminal and on the page, and carries on."""
    bad = tmp_path / "eve.json"
    bad.write_text('{"_journal": {"learner": "Eve\\u001b[31m\\u202e"}, '
                   '"01.a\\u0007": {"answer": "\\ud800x", "hit": true, "when": "2026", "format": 2, "prompt": 7}, '
                   '"01.b": {"answer": 1' + "0" * 400 + ', "hit": false, "format": 2, "unit": ["ms"]}, '
                   '"01.c": {"answer": NaN, "hit": "yes", "actual": [1, {"a": 2}], "choices": "abc"}}')
    page = tmp_path / "room.html"
    out = cli("room", bad, "--html", page, env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"}, encoding="ascii")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "Eve\\u001b[31m\\u202e" in out.stdout and "01.a\\u0007  (no prompt" in out.stdout
    assert "\\ud800x" in out.stdout and "1" + "0" * 400 in out.stdout
    html = page.read_text(encoding="utf-8")
    assert "\x1b" not in html and "\\ud800x" in html and html.count("<section") == 3


def test_inconclusive_answers_are_counted_apart(tmp_path):
    """A timing within its noise on a learner's machine is neither held nor missed in the room's count."""
    for name, hit, status in (("ann", True, None), ("ben", False, None), ("cat", None, "inconclusive")):
        journal.record("05.cost", "about the same", hit, tmp_path / f"{name}.json", prompt="Which?",
                       choices=["about the same", "more"], kind="predict", actual="about the same", status=status)
    (q,) = room.questions(room.gather([tmp_path]))
    assert q.held() == (1, 2) and q.inconclusive() == 1
    out = room.text(room.gather([tmp_path]), [q])
    assert "held: 1 of 2 (50%); inconclusive on 1 machine" in out


def test_the_exam_per_trace(tmp_path):
    """Journals with exam answers (notebook 17: a bound and a first fix per trace): per trace, how many got the
    bound, the fix and both right, and each learner's score; a lesson's question beside them stays a question."""
    graded = {"ann": {1: (True, True), 2: (True, False)}, "ben": {1: (False, True), 2: (True, True)},
              "cat": {1: (True, None)}}
    for name, traces in graded.items():
        where = tmp_path / f"{name}.json"
        journal.record("03.long-step", "ProfilerStep#3", False, where, prompt="Which step?",
                       choices=["ProfilerStep#2", "ProfilerStep#3"], kind="predict", actual="ProfilerStep#2")
        for n, (bound, fix) in traces.items():
            journal.record(f"{journal.EXAM}.trace-{n}-bound", "x" if bound else "y", bound, where,
                           prompt=f"Trace {n}: bound?", choices=["x", "y"], kind="predict", actual="x")
            if fix is not None:
                journal.record(f"{journal.EXAM}.trace-{n}-fix", "a" if fix else "b", fix, where,
                               prompt=f"Trace {n}: fix?", choices=["a", "b"], kind="predict", actual="a")
    g = room.gather([tmp_path])
    rows = [(r.trace, r.bound, r.fix, r.both) for r in room.exam_rows(g)]
    assert rows == [(1, (2, 3), (2, 2), (1, 2)), (2, (2, 2), (1, 2), (1, 2))]
    assert room.exam_scores(g) == [("ann", 3, 4), ("ben", 3, 4), ("cat", 1, 1)]
    out = cli("room", tmp_path)
    assert out.returncode == 0, out.stderr
    block = out.stdout.split(f"The exam (notebook {journal.EXAM}), per trace", 1)[1]
    block = block.split("\n\n", 1)[0].splitlines()
    assert re.match(r"\s+1\s+2 of 3 \(67%\)\s+2 of 2 \(100%\)\s+1 of 2 \(50%\)", block[2]), block
    assert block[-1].strip() == "scores: ann 3/4, ben 3/4, cat 1/1"
    assert f"\n{journal.EXAM}.trace-1-bound  Trace 1: bound?" in out.stdout  # each question still has its own block
    only = cli("room", tmp_path, "--question", "03")
    assert "The exam" not in only.stdout and "03.long-step" in only.stdout
    page = tmp_path / "room.html"
    assert cli("room", tmp_path, "--html", page).returncode == 0
    sections = _Page(page.read_text()).sections
    assert sections["exam"]["rows"][1] == ["1", "2 of 3 (67%)", "2 of 2 (100%)", "1 of 2 (50%)"]
