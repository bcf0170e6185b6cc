"""docs/architecture.md's recipe for a new notebook, kept true.

Every notebook has every piece the recipe names (``tools/recipe.py``). A notebook started from the template
(``tools/new_notebook.py``, into a copy of the files the recipe reads) lacks only what a run of it writes; run as
``tools/refresh_checkpoints.py`` and ``make test-notebooks`` would run it (in this process, headless and recorded:
no kernel), it lacks nothing, and its test passes. Then each piece is taken away in turn, and the recipe must name
that piece: a check that could not fail would prove nothing.

Run alone, the file takes a few seconds, most of them importing torch (the template's banner asks it for a GPU); in
``make test`` the unit tests' process has imported it already.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import new_notebook  # noqa: E402
import recipe  # noqa: E402

#: what the recipe reads, copied for a notebook to be added to
COPIED = ("notebooks/*.ipynb", "helpers/lessons/*.py", "tests/golden/*.json", "tests/test_*.py", "README.md",
          "docs/instructor.md", "docs/template/*")
NAME, TITLE = "reading_a_trace", "Reading a trace"


def test_every_notebook_has_every_piece():
    found = recipe.missing(ROOT)
    assert not found, "\n".join(f"{stem}: {piece}: {why}" for stem, lacks in found.items()
                                for piece, why in lacks.items())


def _copy(src: Path, dst: Path) -> None:
    for pattern in COPIED:
        for f in src.glob(pattern):
            (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dst / f.relative_to(src))


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(clone: Path, n: str, mp: pytest.MonkeyPatch) -> None:
    """Run notebook ``n`` of the copy as the two tools would: its golden file and stored line, then its section."""
    import helpers.lessons
    from helpers.lesson import checkpoint, widgets
    from helpers.runs import mode

    for var, value in dict(PROFILING_MODE="recorded", PROFILING_HEADLESS="1", MPLBACKEND="Agg",
                           PROFILING_JOURNAL=str(clone / "journal.json"), PROFILING_CHECKPOINT="record").items():
        mp.setenv(var, value)
    mp.setattr(checkpoint, "GOLDEN", clone / "tests" / "golden")
    mp.setattr(widgets, "_display", lambda obj: None)
    mp.setattr(widgets, "_answered", {})
    mp.setattr(widgets, "_waiting", {})
    name = f"helpers.lessons.n{n}_{NAME}"
    lesson = _module(name, clone / "helpers" / "lessons" / f"n{n}_{NAME}.py")
    mp.setitem(sys.modules, name, lesson)
    mp.setattr(helpers.lessons, f"n{n}_{NAME}", lesson, raising=False)
    mode.environment.cache_clear()
    path = clone / "notebooks" / f"{n}_{NAME}.ipynb"
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    scope: dict = {}
    for c in code[1:]:  # the Colab cell aside: it puts a clone on the path
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile("".join(c["source"]), f"{path.name} {c['id']}", "exec"), scope)
    code[-1].update(execution_count=1, outputs=[{"name": "stdout", "output_type": "stream",
                                                  "text": [out.getvalue().splitlines(keepends=True)[-1]]}])
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    import instructor_table

    assert instructor_table.main(["--only", n, str(clone / "journal.json")], clone) == 0
    test = _module(f"test_lessons_{n}", clone / "tests" / f"test_lessons_{n}.py")  # the template's tests pass
    mp.setenv("PROFILING_JOURNAL", str(clone / "test-journal.json"))
    tests = [f for name, f in vars(test).items() if name.startswith("test_")]
    assert tests
    for f in tests:
        f(None)  # their one fixture sets what the run above set already
    mode.environment.cache_clear()


@pytest.fixture(scope="module")
def started(tmp_path_factory) -> tuple[Path, str, dict]:
    """A copy with a notebook after the last started from the template, then run: (copy, number, what it lacked
    before the run)."""
    clone = tmp_path_factory.mktemp("series")
    _copy(ROOT, clone)
    n = f"{int(recipe.it.notebooks(ROOT)[-1].name[:2]) + 1:02d}"
    new_notebook.scaffold(clone, n, NAME, TITLE)
    before = recipe.missing(clone)
    with pytest.MonkeyPatch.context() as mp:
        _run(clone, n, mp)
    return clone, n, before


def test_a_notebook_started_from_the_template_lacks_only_what_its_run_writes(started):
    clone, n, before = started
    assert before == {f"{n}_{NAME}": {"golden file": f"no tests/golden/{n}.json",
                                      "instructor block": f"no section for {n}_{NAME}.ipynb in the generated block"}}
    assert recipe.missing(clone) == {}
    assert json.loads((clone / "tests" / "golden" / f"{n}.json").read_text()) == {"aten::mm calls": 3,
                                                                                  "recorded steps": 3}
    guide = (clone / "docs" / "instructor.md").read_text()
    assert f"| `{n}.mm-calls` (predict) | The profiler records only the steps after" in guide
    assert "| 3 calls |" in guide.split(f"`{n}.mm-calls`")[1].split("\n")[0]
    before_block = (ROOT / "docs" / "instructor.md").read_text().split(recipe.it.BEGIN)[1].split(recipe.it.END)[0]
    assert before_block in guide  # the other notebooks' sections, as they were


def test_the_template_is_short():
    """A newcomer reads the template in one sitting: the lesson, the notebook and the test together."""
    lines = {f.name: len(f.read_text().splitlines()) for f in (ROOT / "docs" / "template").iterdir()}
    assert lines["nNN_name.py"] < 60 and sum(lines.values()) < 150, lines


def _drop_line(text: str, start: str) -> str:
    kept = [ln for ln in text.split("\n") if not ln.startswith(start)]
    assert len(kept) == text.count("\n"), start  # exactly one line went
    return "\n".join(kept)


def _cells(path: Path, edit) -> None:
    nb = json.loads(path.read_text())
    edit(nb["cells"])
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def _in_line(path: Path, start: str, old: str, new: str) -> None:
    """``old`` replaced in the one line that starts with ``start``."""
    lines = path.read_text().split("\n")
    (i,) = [i for i, ln in enumerate(lines) if ln.startswith(start) and old in ln]
    lines[i] = lines[i].replace(old, new)
    path.write_text("\n".join(lines))


def _source(cells: list, i: int, old: str, new: str) -> None:
    src = "".join(cells[i]["source"])
    assert old in src, old
    cells[i]["source"] = src.replace(old, new).splitlines(keepends=True)


#: each piece taken away (piece, what is done to the copy)
TAKEN_AWAY = {
    "number": lambda c, n, nb: shutil.copy(nb, nb.with_name(f"{n}_twin.ipynb")),
    "title": lambda c, n, nb: _cells(nb, lambda cs: _source(cs, 0, "[![Open In Colab]", "[![Colab]")),
    "title (number)": lambda c, n, nb: _cells(nb, lambda cs: _source(cs, 0, f"# {n} · {TITLE}", f"# {TITLE}")),
    "colab cell": lambda c, n, nb: _cells(nb, lambda cs: _source(cs, 1, "import series_setup", "import os")),
    "banner": lambda c, n, nb: _cells(nb, lambda cs: _source(cs, 2, "env = show.banner()", "")),
    "lesson module": lambda c, n, nb: (c / "helpers" / "lessons" / f"n{n}_{NAME}.py").unlink(),
    "question ids": lambda c, n, nb: _replace(c / "helpers" / "lessons" / f"n{n}_{NAME}.py", f'"{n}.mm-calls"',
                                              '"17.mm-calls"'),
    "question ids (scoreboard)": lambda c, n, nb: _cells(
        nb, lambda cs: _source(cs, 6, "widgets.scoreboard()", 'widgets.scoreboard(only="17")')),
    "scoreboard": lambda c, n, nb: _cells(nb, lambda cs: cs.pop(6)),
    "checkpoint cell": lambda c, n, nb: _cells(nb, lambda cs: cs[-1]["metadata"].pop("tags")),
    "golden file": lambda c, n, nb: (c / "tests" / "golden" / f"{n}.json").unlink(),
    "golden file (stored line)": lambda c, n, nb: _cells(nb, lambda cs: cs[-1].update(outputs=[])),
    "next line": lambda c, n, nb: shutil.copy(ROOT / recipe.it.notebooks(ROOT)[-1].relative_to(ROOT),
                                              c / recipe.it.notebooks(ROOT)[-1].relative_to(ROOT)),
    "lesson test": lambda c, n, nb: (c / "tests" / f"test_lessons_{n}.py").unlink(),
    "README row": lambda c, n, nb: (c / "README.md").write_text(_drop_line((c / "README.md").read_text(),
                                                                            f"| {n} ")),
    "instructor row": lambda c, n, nb: (c / "docs" / "instructor.md").write_text(
        _drop_line((c / "docs" / "instructor.md").read_text(), f"| {n} ")),
    "instructor row (live run)": lambda c, n, nb: _in_line(c / "docs" / "instructor.md", f"| {n} ",
                                                           f"| {recipe.NOT_RUN_LIVE} |", "| quick |"),
    "instructor bullet": lambda c, n, nb: (c / "docs" / "instructor.md").write_text(
        _drop_line((c / "docs" / "instructor.md").read_text(), f"* **{n}** —")),
    "instructor block": lambda c, n, nb: (c / "docs" / "instructor.md").write_text(
        _drop_line((c / "docs" / "instructor.md").read_text(), f"| `{n}.mm-calls`")),
}
#: what else a case takes away: without the lesson module the notebook asks nothing; retitled, the notebook before
#: it no longer names it
ALSO = {"lesson module": {"question ids"}, "title (number)": {"next line"}}


def test_every_piece_has_a_check_is_taken_away_below_and_is_in_the_recipe():
    assert set(recipe.CHECKS) == set(recipe.PIECES)
    assert {case.split(" (")[0] for case in TAKEN_AWAY} == set(recipe.PIECES)
    doc = (ROOT / "docs" / "architecture.md").read_text().split("### A new notebook", 1)[1]
    assert [m for m in re.findall(r"^ *\d+\. \*\*([\w ]+)\*\*:", doc, re.M)] == list(recipe.PIECES)


@pytest.mark.parametrize("case", sorted(TAKEN_AWAY))
def test_each_piece_taken_away_is_named(started, tmp_path, case):
    clone, n, _ = started
    copy = tmp_path / "series"
    _copy(clone, copy)
    assert recipe.missing(copy, {n}) == {}
    TAKEN_AWAY[case](copy, n, copy / "notebooks" / f"{n}_{NAME}.ipynb")
    piece = case.split(" (")[0]
    found = recipe.missing(copy, {n}).get(f"{n}_{NAME}", {})
    assert set(found) == {piece} | ALSO.get(case, set()), found
