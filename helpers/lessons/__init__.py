"""Each notebook's questions and reveals, one module per notebook (``n05_a_batch_axis`` for notebook 05).

A notebook keeps the code a learner would write (the workload, the profiler
call, the table, the plot) and one line per question, such as
``lesson.observer(tiny, gpu_tiny)``; the question's wording, its choices,
the facts that decide it and its reveal live here, so that the question
cell gives nothing away. After the learner locks in, a reveal may show how
it computed its figures (the few lines that read the trace): that is part
of the lesson.

These modules may import every other part of ``helpers``; nothing in
``helpers`` imports them.
"""

import ast as _ast
from functools import lru_cache as _lru_cache
import json as _json
import re as _re
from pathlib import Path as _Path
from typing import NamedTuple as _NamedTuple

_HERE = _Path(__file__).parent
_IMPORT = _re.compile(r"from helpers\.lessons import (\w+)")
#: a lesson module's own parts: a sibling lesson module it imports (``from .n12_readings import ...``)
_PART = _re.compile(r"^from \.(?: import (n\d\d_\w+)|(n\d\d_\w+) import)", _re.M)


def _cells(notebook: str | _Path) -> list[str]:
    nb = _json.loads(_Path(notebook).read_text())
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == "code"]


def modules_of(notebook: str | _Path, lessons: _Path = _HERE) -> list[_Path]:
    """The lesson module(s) a notebook imports, then the sibling lesson modules those import in turn (a lesson
    split in two); ``lessons`` is the folder they are looked up in (another clone's, in a test)."""
    names = list(dict.fromkeys(_IMPORT.findall("\n".join(_cells(notebook)))))
    paths = []
    for name in names:  # grows as a module names its parts
        path = lessons / f"{name}.py"
        if path.is_file():
            paths.append(path)
            names += [m for pair in _PART.findall(path.read_text()) for m in pair if m and m not in names]
    return paths


def code_of(notebook: str | _Path, lessons: _Path = _HERE) -> str:
    """The code a notebook runs: its code cells, then the source of its lesson modules (:func:`modules_of`)."""
    return "\n".join(_cells(notebook) + [p.read_text() for p in modules_of(notebook, lessons)])


class QuestionId(_NamedTuple):
    """A question id as the code writes it: the string (an f-string's literal head only), and how it is used."""

    qid: str
    use: str  # "asks" (ask, versus, a ``..._qid=`` keyword), "waits" (after, answer_to), "scores" (scoreboard only=)
    where: str  # "cell 3" or a module's file name, with the line


#: calls whose first argument (or ``qid=``) is a question id, by what they do with it
_QID_CALLS = {"ask": "asks", "versus": "asks", "after": "waits", "answer_to": "waits"}


def _text(node: _ast.AST) -> str | None:
    """A string literal's value, an f-string's literal head ("17.trace-" of f"17.trace-{n}"), else None."""
    if isinstance(node, _ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, _ast.JoinedStr) and node.values and isinstance(node.values[0], _ast.Constant):
        return str(node.values[0].value)
    return None


def _ids_in(source: str, where: str) -> list[QuestionId]:
    return [QuestionId(qid, use, f"{where}, line {line}") for line, qid, use in _ids_at(source)]


@_lru_cache(maxsize=512)  # the series' checks read each module several times: parsing is most of their time
def _ids_at(source: str) -> tuple[tuple[int, str, str], ...]:
    """(line, id, use) of every question id in ``source``, in the order written."""
    found = []
    for node in _ast.walk(_ast.parse(source)):
        if not isinstance(node, _ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        args = {k.arg: k.value for k in node.keywords if k.arg}
        first = node.args[0] if node.args else args.get("qid")
        if name in _QID_CALLS and first is not None and _text(first) is not None:
            found.append((node.lineno, node.col_offset, _text(first), _QID_CALLS[name]))
        if name == "scoreboard" and "only" in args and _text(args["only"]) is not None:
            found.append((node.lineno, node.col_offset, _text(args["only"]), "scores"))
        for k in node.keywords:  # a table of questions the lesson asks from: dict(bound_qid="17.trace-1-bound")
            if k.arg and k.arg.endswith("_qid") and _text(k.value) is not None:
                found.append((k.value.lineno, k.value.col_offset, _text(k.value), "asks"))
    return tuple((line, qid, use) for line, _, qid, use in sorted(found, key=lambda x: x[:2]))


def question_ids(notebook: str | _Path, lessons: _Path = _HERE) -> list[QuestionId]:
    """Every question id a notebook and its lesson modules write, in the order written (cells, then modules); read
    from the code (nothing is run). A cell that is not Python (an IPython magic) is skipped."""
    out = []
    for i, cell in enumerate(_cells(notebook)):
        try:
            out += _ids_in(cell, f"cell {i}")
        except SyntaxError:
            continue
    for path in modules_of(notebook, lessons):
        out += _ids_in(path.read_text(), path.name)
    return out
