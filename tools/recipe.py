"""What a notebook needs beyond its own .ipynb, and which of it each notebook lacks (docs/architecture.md's recipe).

    python tools/recipe.py     # one line per missing piece, by notebook; exit status 1 if any

:func:`missing` reads the files only (no notebook runs, nothing is imported from the notebooks' lessons), so it is
fast enough to run in ``make test`` (``tests/test_recipe.py``), which also proves it names each piece taken away.
``tools/new_notebook.py`` writes every piece but the two that come from running the notebook.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import instructor_table as it  # noqa: E402
from helpers.lesson import colab  # noqa: E402
from helpers.lessons import modules_of, question_ids  # noqa: E402

#: every piece a notebook needs, and where it goes (what :func:`missing` says when it lacks one)
PIECES: dict[str, str] = {
    "number": "a two-digit number no other notebook has: notebooks/NN_name.ipynb",
    "title": "the first markdown cell: the Colab badge (helpers.lesson.colab.badge), then '# NN · Title'",
    "colab cell": "the first code cell is helpers.lesson.colab.bootstrap_source(); the notebook's metadata asks for "
                  "a GPU (\"accelerator\": \"GPU\")",
    "banner": "a code cell calls show.banner(): the line that says live or recorded",
    "lesson module": "helpers/lessons/nNN_name.py, imported by the notebook: from helpers.lessons import nNN_name as "
                     "lesson",
    "question ids": "at least one question, and every id the notebook and its lesson write (ask, versus, after, "
                    "answer_to, ..._qid=, scoreboard(only=...)) starts with 'NN.' (the journal and the scoreboard "
                    "file a question under the notebook its id names)",
    "scoreboard": "a code cell calls widgets.scoreboard(): the learner's record and the Export my journal button",
    "checkpoint cell": "the last cell: tagged 'checkpoint', starting '# NBVAL_CHECK_OUTPUT', calling "
                       "checkpoint.check(\"NN\", lambda: {...}) (a function: a learner's Run All gathers nothing)",
    "next line": "the notebook before it says 'Next: **NN · Title**.' in a markdown cell",
    "lesson test": "a tests/test_*.py that imports the lesson module (a new notebook: tests/test_lessons_NN.py)",
    "README row": "README.md's table under '## The series': '| NN name | the question it asks |'",
    "instructor row": "docs/instructor.md's table under '## Each notebook': '| NN name | minutes | live run | the key "
                      "question | pause after |', the live run 'N s' from the pre-flight, or 'not run live yet'",
    "instructor bullet": "docs/instructor.md's likely wrong guesses: '* **NN** — ...' (or a heading ending '(NN)')",
    "golden file": "tests/golden/NN.json and the checkpoint cell's stored line: python tools/refresh_checkpoints.py "
                   "notebooks/NN_name.ipynb",
    "instructor block": "docs/instructor.md's generated block: the notebook's section, every question in it: "
                        "make test-notebooks NOTEBOOKS=notebooks/NN_name.ipynb && python tools/instructor_table.py "
                        "--only NN",
}
#: what the live-run column says before anyone ran the notebook live (a contributor without a GPU)
NOT_RUN_LIVE = "not run live yet"
#: a row of the guide's per-notebook table: number, minutes, live run
GUIDE_ROW = re.compile(r"^\| (\d\d) [^|]+\| +(\d+) \| ([^|]+?) \|", re.M)
LIVE_RUN = re.compile(rf"^(\d+ s\b.*|{NOT_RUN_LIVE})$")


def _nb(path: Path) -> dict:
    return json.loads(path.read_text())


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def title(nb: dict) -> str | None:
    """'NN · Title' from the first markdown cell's '# ' line."""
    md = next((c for c in nb["cells"] if c["cell_type"] == "markdown"), None)
    m = re.search(r"^# (.+)$", _source(md), re.M) if md else None
    return m.group(1).strip() if m else None


def _section(text: str, heading: str) -> str:
    """The text under a '## ' heading, to the next one."""
    part = text.split(f"\n{heading}\n", 1)
    return part[1].split("\n## ", 1)[0] if len(part) == 2 else ""


#: an import of a lesson module, at a line's start (a test imports at the top or inside a function)
_LESSON_IMPORT = re.compile(r"^[ \t]*(?:from helpers\.lessons import (\([^)]*\)|[^\n]+)"
                            r"|from helpers\.lessons\.(\w+) import|import helpers\.lessons\.(\w+))", re.M)


def _tested_modules(root: Path) -> set[str]:
    """The lesson modules some test imports (read as text: parsing every test took most of this check's time)."""
    found = set()
    for path in sorted((root / "tests").glob("test_*.py")):
        for names, module, imported in _LESSON_IMPORT.findall(path.read_text()):
            found |= {w.split()[0] for w in names.strip("()").replace("\n", " ").split(",") if w.strip()}
            found |= {module, imported} - {""}
    return found


@dataclass
class Notebook:
    """One notebook as the checks read it, beside what every check shares (the series' other files)."""

    path: Path
    nb: dict
    root: Path
    shared: dict

    @property
    def n(self) -> str:
        return self.path.name[:2]

    @property
    def code(self) -> list[str]:
        return [_source(c) for c in self.nb["cells"] if c["cell_type"] == "code"]

    @cached_property
    def ids(self) -> list:
        return question_ids(self.path, self.root / "helpers" / "lessons")


def _number(x: Notebook) -> str | None:
    count = x.shared["numbers"].count(x.n)
    return f"{count} notebooks are numbered {x.n}" if count > 1 else None


def _title(x: Notebook) -> str | None:
    md = next((c for c in x.nb["cells"] if c["cell_type"] == "markdown"), None)
    lines = _source(md).splitlines() if md else []
    if not lines or lines[0] != colab.badge(x.path.name) or not (title(x.nb) or "").startswith(f"{x.n} · "):
        return f"no Colab badge for {x.path.name} as the first line, or no '# {x.n} · Title' under it"
    return None


def _colab_cell(x: Notebook) -> str | None:
    if not x.code or x.code[0] != colab.bootstrap_source() or x.nb.get("metadata", {}).get("accelerator") != "GPU":
        return "the first code cell is not colab.bootstrap_source(), or the metadata asks for no GPU"
    return None


def _banner(x: Notebook) -> str | None:
    return None if any("show.banner(" in s for s in x.code) else "no code cell calls show.banner()"


def _lesson_module(x: Notebook) -> str | None:
    lesson = x.root / "helpers" / "lessons" / f"n{x.path.stem}.py"
    if lesson.is_file() and lesson in modules_of(x.path, lesson.parent):
        return None
    return f"helpers/lessons/{lesson.name} is missing, or the notebook does not import it"


def _question_ids(x: Notebook) -> str | None:
    wrong = [q for q in x.ids if (q.qid != x.n if q.use == "scores" else not q.qid.startswith(f"{x.n}."))]
    if wrong:
        return "; ".join(f"{q.qid!r} ({q.where})" for q in wrong) + f" not of notebook {x.n}"
    return None if any(q.use == "asks" for q in x.ids) else "it asks no question"


def _scoreboard(x: Notebook) -> str | None:
    return None if any("widgets.scoreboard(" in s for s in x.code) else "no code cell calls widgets.scoreboard()"


def _checkpoint_cell(x: Notebook) -> str | None:
    last = x.nb["cells"][-1] if x.nb["cells"] else {"cell_type": "markdown", "source": ""}
    if (last["cell_type"] == "code" and "checkpoint" in last.get("metadata", {}).get("tags", [])
            and _source(last).startswith("# NBVAL_CHECK_OUTPUT") and f'checkpoint.check("{x.n}",' in _source(last)):
        return None
    return f"the last cell is not the checkpoint cell of {x.n}"


def _golden_file(x: Notebook) -> str | None:
    golden = x.root / "tests" / "golden" / f"{x.n}.json"
    if not golden.is_file():
        return f"no tests/golden/{golden.name}"
    stored = ["".join(o.get("text", "")) for c in x.nb["cells"] if c["cell_type"] == "code"
              for o in c.get("outputs", [])]
    line = f"checkpoint {x.n}: {len(json.loads(golden.read_text()))} facts match tests/golden/{golden.name}\n"
    return None if stored == [line] else f"the notebook's stored output is not the checkpoint's one line, {line!r}"


def _next_line(x: Notebook) -> str | None:
    before = x.shared["previous"].get(x.path)
    if before is None or f"Next: **{title(x.nb)}**" in x.shared["markdown"][before]:
        return None
    return f"{before.name} does not say 'Next: **{title(x.nb)}**.'"


def _lesson_test(x: Notebook) -> str | None:
    return None if f"n{x.path.stem}" in x.shared["tested"] else f"no tests/test_*.py imports n{x.path.stem}"


def _readme_row(x: Notebook) -> str | None:
    found = re.search(rf"^\| {x.n} ", x.shared["series"], re.M)
    return None if found else f"no '| {x.n} ...' row in README.md's series table"


def _instructor_row(x: Notebook) -> str | None:
    rows = {m.group(1): m.group(3).strip() for m in GUIDE_ROW.finditer(x.shared["guide_hand"])}
    if x.n not in rows:
        return f"no '| {x.n} ...' row in docs/instructor.md's per-notebook table"
    return None if LIVE_RUN.match(rows[x.n]) else f"its live run says {rows[x.n]!r}: 'N s' or '{NOT_RUN_LIVE}'"


def _instructor_bullet(x: Notebook) -> str | None:
    found = re.search(rf"^(\* \*\*{x.n}\*\* —|#+ .*\({x.n}\)$)", x.shared["guide_hand"], re.M)
    return None if found else f"no '* **{x.n}** — ...' in docs/instructor.md"


def _instructor_block(x: Notebook) -> str | None:
    section = x.shared["sections"].get(x.n)
    if section is None or f"(`{x.path.name}`)" not in section.splitlines()[0]:
        return f"no section for {x.path.name} in the generated block"
    asked = dict.fromkeys(q.qid for q in x.ids if q.use == "asks" and q.qid.startswith(f"{x.n}."))  # the others:
    absent = [k for k in asked if f"`{k}`" not in section]  # the question-ids check says so
    return f"its section lacks {', '.join(absent)}" if absent else None


#: each piece's check: None when the notebook has it, else what is wrong (PIECES's keys, in its order)
CHECKS: dict[str, Callable[[Notebook], str | None]] = {
    "number": _number, "title": _title, "colab cell": _colab_cell, "banner": _banner,
    "lesson module": _lesson_module, "question ids": _question_ids, "scoreboard": _scoreboard,
    "checkpoint cell": _checkpoint_cell, "next line": _next_line, "lesson test": _lesson_test,
    "README row": _readme_row, "instructor row": _instructor_row, "instructor bullet": _instructor_bullet,
    "golden file": _golden_file, "instructor block": _instructor_block,
}


def missing(root: Path = ROOT, only: set[str] | None = None) -> dict[str, dict[str, str]]:
    """Notebook (its file's stem, ``18_reading_a_trace``) -> {piece: what is wrong}, for each notebook that lacks a
    piece of :data:`PIECES` (``only``: the notebooks of those numbers); empty when none lacks any."""
    paths = it.notebooks(root)
    nbs = {p: _nb(p) for p in paths}
    guide = (root / "docs" / "instructor.md").read_text()
    hand, _, rest = guide.partition(it.BEGIN)
    shared = {
        "numbers": [p.name[:2] for p in paths],
        "previous": dict(zip(paths[1:], paths)),
        "markdown": {p: "\n".join(_source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
                     for p, nb in nbs.items()},
        "tested": _tested_modules(root),
        "series": _section((root / "README.md").read_text(), "## The series"),
        "guide_hand": hand,
        "sections": it.sections_of(rest.split(it.END, 1)[0] + it.END),
    }
    out = {}
    for p in paths:
        if only is None or p.name[:2] in only:
            x = Notebook(p, nbs[p], root, shared)
            lacks = {piece: why for piece, check in CHECKS.items() if (why := check(x)) is not None}
            if lacks:
                out[p.stem] = lacks
    return out


def main(argv: list[str]) -> int:
    found = missing(ROOT, set(argv) or None)
    for stem, lacks in found.items():
        for piece, why in lacks.items():
            print(f"{stem} lacks its {piece}: {why}\n   (the recipe: {PIECES[piece]})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
