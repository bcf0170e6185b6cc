"""Start a new notebook: every file docs/architecture.md's recipe names, from the templates in docs/template/.

    python tools/new_notebook.py 18 reading_a_trace "Reading a trace"

Writes ``notebooks/18_reading_a_trace.ipynb`` (the Colab badge and cell, the banner, one question, the scoreboard,
the checkpoint cell), ``helpers/lessons/n18_reading_a_trace.py`` (the question and its reveal),
``tests/test_lessons_18.py``, the README's row, the instructor guide's row (live run: "not run live yet") and
bullet, and the "Next:" line of the notebook before it. Then it says what is left: the two pieces a run of the
notebook writes (the golden file, the guide's generated section), as ``tools/recipe.py`` finds them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import recipe  # noqa: E402  (puts the repository on the path)
from helpers.lesson import colab  # noqa: E402

LAST = "Next: this is the series' last notebook."
_NEXT = re.compile(r"Next: \*\*[^*]+\*\*")
_CHECKPOINT_CELL = {"collapsed": True, "jupyter": {"outputs_hidden": True, "source_hidden": True},
                    "tags": ["checkpoint"]}


def fill(text: str, n: str, name: str, title: str) -> str:
    """A template with its placeholders filled: nNN_name, NN_name, NN, TITLE."""
    return (text.replace("nNN_name", f"n{n}_{name}").replace("NN_name", f"{n}_{name}").replace("NN", n)
            .replace("TITLE", title))


def cells_of(template: str) -> list[tuple[str, str]]:
    """The (kind, source) cells of a notebook written as "# %%" cells (the text before the first one aside)."""
    out = []
    for part in re.split(r"^# %%", template, flags=re.M)[1:]:
        head, _, body = part.partition("\n")
        if "[markdown]" in head:
            out.append(("markdown", "\n".join(ln[2:] if ln.startswith("# ") else ln.lstrip("#")
                                              for ln in body.strip("\n").splitlines())))
        else:
            out.append(("code", body.strip("\n")))
    return out


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    return lines[:-1] + [lines[-1].rstrip("\n")] if lines else []


def notebook(path: Path, cells: list[tuple[str, str]], metadata: dict) -> dict:
    """The notebook: the badge above the first markdown cell, the Colab cell after it, then ``cells``."""
    n = path.name[:2]
    kind, first = cells[0]
    cells = [(kind, colab.badge(path.name) + "\n\n" + first), ("code", colab.bootstrap_source())] + cells[1:]
    out = []
    for i, (kind, src) in enumerate(cells):
        c = {"cell_type": kind, "id": f"nb{n}-c{i:02d}", "metadata": {}, "source": _lines(src)}
        if kind == "code":
            c.update(execution_count=None, outputs=[])
            if src.startswith("# NBVAL_CHECK_OUTPUT"):
                c["metadata"] = dict(_CHECKPOINT_CELL)
        out.append(c)
    return {"cells": out, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def _metadata(root: Path) -> dict:
    """The series' notebook metadata (kernel, Colab's GPU runtime), as the first notebook has it."""
    first = min((root / "notebooks").glob("[0-9][0-9]_*.ipynb"), default=None)
    if first is None:
        return {"accelerator": "GPU",
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}
    return {k: v for k, v in json.loads(first.read_text())["metadata"].items() if k != "widgets"}


def _save(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")  # tools/nbcells.py's layout


def insert_row(text: str, heading: str, n: str, row: str, pattern: str = r"^\| (\d\d) ") -> str:
    """``text`` with ``row`` put among the numbered lines under ``heading`` (to the next heading), in order."""
    lines = text.split("\n")
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    numbered = [(i, m.group(1)) for i in range(start, end) if (m := re.match(pattern, lines[i]))]
    after = [i for i, k in numbered if k > n]
    if after:
        at = after[0]
    else:  # after the last numbered entry, and the lines that continue it (a bullet's), up to a blank line
        at = numbered[-1][0] + 1
        while at < end and lines[at].strip() and not lines[at].startswith(("|", "* ")):
            at += 1
    return "\n".join(lines[:at] + [row] + lines[at:])


def _link_from_before(root: Path, n: str, title: str) -> tuple[str, Path | None]:
    """Make the notebook before ``n`` name it ("Next: **NN · Title**"): the new notebook's own Next line, and the
    notebook edited (None for a first notebook)."""
    paths = [p for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb") if p.name[:2] != n]
    before = max((p for p in paths if p.name[:2] < n), default=None)
    after = min((p for p in paths if p.name[:2] > n), default=None)
    own = f"Next: **{recipe.title(json.loads(after.read_text()))}**." if after else LAST
    if before is None:
        return own, None
    nb = json.loads(before.read_text())
    md = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    mine = f"Next: **{title}**"
    for c in md:
        src = "".join(c["source"])
        if _NEXT.search(src):
            c["source"] = _lines(_NEXT.sub(mine, src, count=1))
            break
        if "\nNext:" in "\n" + src:  # the series' last notebook said so: now the new one does, in its words
            head, _, tail = ("\n" + src).partition("\nNext:")
            line, nl, rest = tail.partition("\n")
            own = "Next:" + line if after is None else own
            c["source"] = _lines((head + "\n" + mine + "." + nl + rest)[1:])
            break
    else:
        md[-1]["source"] = _lines("".join(md[-1]["source"]) + f"\n\n{mine}.")
    _save(before, nb)
    return own, before


def scaffold(root: Path, n: str, name: str, title: str) -> list[Path]:
    """Write every piece of a new notebook ``n`` that no run is needed for; returns the files written or edited."""
    if not re.fullmatch(r"\d\d", n) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError("the number is two digits (18) and the name lower case with underscores (reading_a_trace)")
    if list((root / "notebooks").glob(f"{n}_*.ipynb")):
        raise FileExistsError(f"notebooks/ already holds a notebook {n}")
    template = {f.name: f.read_text() for f in (root / "docs" / "template").iterdir()}  # read before any edit
    path = root / "notebooks" / f"{n}_{name}.ipynb"
    own_next, before = _link_from_before(root, n, f"{n} · {title}")
    cells = [(k, fill(s, n, name, title).replace("NEXT", own_next)) for k, s in cells_of(template["notebook.py"])]
    _save(path, notebook(path, cells, _metadata(root)))
    lesson = root / "helpers" / "lessons" / f"n{n}_{name}.py"
    lesson.write_text(fill(template["nNN_name.py"], n, name, title))
    test = root / "tests" / f"test_lessons_{n}.py"
    test.write_text(fill(template["test_lessons_NN.py"], n, name, title))
    words = name.replace("_", " ")
    readme = root / "README.md"
    readme.write_text(insert_row(readme.read_text(), "## The series", n, f"| {n} {words} | (the question it asks) |"))
    guide = root / "docs" / "instructor.md"
    text = insert_row(guide.read_text(), "## Each notebook", n,
                      f"| {n} {words} | 20 | {recipe.NOT_RUN_LIVE} | (the key question) | (where to pause) |")
    text = insert_row(text, "### Likely wrong guesses, and the discussion each opens", n,
                      f"* **{n}** — \"(the guess you expect the room to make)\": (what the reveal shows, and the "
                      "question that opens the discussion).", pattern=r"^\* \*\*(\d\d)\*\* —")
    guide.write_text(text)
    return [path, lesson, test, readme, guide] + ([before] if before else [])


def main(argv: list[str], root: Path = ROOT) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    n, name, title = argv
    for p in scaffold(root, n, name, title):
        print(f"wrote {p.relative_to(root)}")
    print("\nThen: write the question, its reveal and its test; edit the placeholders in the README's row and the "
          "guide's row and bullet (in parentheses). Left to a run of the notebook:")
    for lacks in recipe.missing(root, {n}).values():
        for piece in lacks:
            print(f"  {piece}: {fill(recipe.PIECES[piece], n, name, title)}")
    print("Then python tools/recipe.py says nothing is missing. A new workload or scenario is recorded on a GPU "
          "first (docs/architecture.md, 'a workload').")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
