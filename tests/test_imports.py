"""The helpers' imports point one way: no module imports, directly or round a circle, one that imports it back;
and no package imports one above it.

Every import counts, a function's or a type checker's too: a circle through a type hint still means that neither
module can be read, or moved, without the other. (Issue 25 measured three circles; none is left.)

The packages stand on floors (docs/architecture.md draws them): the reader at the bottom, then the facts, the
advice, the runs, the lesson (with the per-notebook modules in helpers/lessons/) and the classroom. A module may
import its own package and any floor below; an import up a floor is a layer upside down.
"""

from __future__ import annotations

import ast

from conftest import ROOT

#: each package's floor; helpers/__init__.py (ROOT) is below them all, the command line (__main__) above
FLOORS = {"helpers": -1, "reader": 0, "facts": 1, "advice": 2, "runs": 3, "lesson": 4, "lessons": 5,
          "classroom": 6, "__main__": 7}


def _modules() -> dict[str, object]:
    """Every module under helpers/, by dotted name (a package by its own name: ``helpers.facts``)."""
    mods = {}
    for path in (ROOT / "helpers").rglob("*.py"):
        parts = ("helpers",) + path.relative_to(ROOT / "helpers").with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _graph() -> dict[str, set[str]]:
    """helpers' modules -> the helpers modules each imports (at the top or inside a function)."""
    mods = _modules()
    edges = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(base + ([node.module] if node.module else []))
                elif (node.module or "").split(".")[0] == "helpers":
                    base = node.module
                else:
                    continue
                for a in node.names:
                    deps.add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.split(".")[0] == "helpers"}
        edges[name] = {d for d in deps if d in mods and d != name}
    return edges


def floor(module: str) -> int:
    """The floor of a module's package (helpers.facts.steps -> the facts' floor)."""
    parts = module.split(".")
    return FLOORS[parts[1]] if len(parts) > 1 else FLOORS["helpers"]


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_every_kind_of_import():
    edges = _graph()
    assert "helpers.reader.trace" in edges["helpers.reader"]  # a package's own __init__, `from .trace import`
    assert "helpers.reader.trace" in edges["helpers.facts.memory"]  # `from ..reader.trace import`, two dots
    assert "helpers.facts" in edges["helpers.advice.diagnose"]  # `from .. import facts`: the package's face
    assert "helpers.lesson.widgets" in edges["helpers.lessons.n00_before_we_start"]


def test_no_import_circle():
    assert circles(_graph()) == []


def test_every_package_has_a_floor():
    assert {m.split(".")[1] for m in _modules() if "." in m} <= set(FLOORS)


def test_no_import_up_a_floor():
    """The reader imports nothing above it, the facts only the reader, the advice never runs or draws, and so on."""
    up = sorted(f"{a} -> {b}" for a, deps in _graph().items() for b in deps if floor(b) > floor(a))
    assert up == []


#: modules not split yet (issue 25): each leaves this list when it is split, and the list only shrinks
NOT_YET_SPLIT: set[str] = set()  # every module is split now; keep it empty


def test_no_module_is_long():
    """A module a newcomer can read in one sitting: about 600 lines at most."""
    long = {m: n for m, p in _modules().items() if (n := len(p.read_text().splitlines())) > 660}
    assert set(long) <= NOT_YET_SPLIT, {m: n for m, n in long.items() if m not in NOT_YET_SPLIT}
    assert not NOT_YET_SPLIT - set(long), "split: take it off NOT_YET_SPLIT"


def test_every_module_run_by_name_exists():
    """Modules started as ``python -m ...`` in a subprocess are named in strings, which no import checks: each must
    resolve (the recorder's fresh processes, the cold runs' process, the ranks' training script)."""
    import importlib.util

    from helpers.runs import record

    names = [f"{record.FRESH_PACKAGE}.{m}" for m in record.FRESH_MODULES]
    names += ["helpers.runs.runner", "helpers.runs.ddp_train", "helpers.classroom.lab_setup"]
    for name in names:
        assert importlib.util.find_spec(name) is not None, name
    src = (ROOT / "helpers" / "runs" / "record.py").read_text()
    assert all(f'_fresh("{m}"' in src for m in record.FRESH_MODULES)


#: the floors that read traces and reason about them: no torch, matplotlib or ipywidgets, not even inside a function
#: (they run on any machine, fast; docs/architecture.md)
LIGHT = ("reader", "facts", "advice")
HEAVY = {"torch", "matplotlib", "ipywidgets", "IPython"}


def _heavy_imports(path) -> set[str]:
    """The heavy packages a module imports anywhere in its code (a function's import included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add((node.module or "").split(".")[0])
    return found & HEAVY


def test_the_light_floors_import_no_torch_anywhere():
    heavy = {m: sorted(_heavy_imports(p)) for m, p in _modules().items()
             if m.split(".")[1:2] and m.split(".")[1] in LIGHT and _heavy_imports(p)}
    assert heavy == {}


def test_the_heavy_import_finder_sees_a_function_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def go():\n    import torch.nn as nn\n    from matplotlib import pyplot\n")
    assert _heavy_imports(f) == {"torch", "matplotlib"}


def test_the_facts_face_shows_no_private_name():
    """``from helpers import facts`` is the public face: what starts with ``_`` stays in its own module."""
    tree = ast.parse((ROOT / "helpers" / "facts" / "__init__.py").read_text())
    private = [a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names
               if a.name.startswith("_")]
    assert private == []


def test_every_manifest_names_a_command_that_exists():
    """A reference or exam set's manifest says how it was recorded: the module or tool it names must still be
    there (the recorder moved to helpers.runs.record; a manifest that named helpers.record sent readers nowhere)."""
    import importlib.util
    import json
    import shlex

    manifests = sorted((ROOT / "traces").glob("*/*/manifest.json"))
    assert manifests
    for path in manifests:
        words = shlex.split(json.loads(path.read_text())["command"])
        assert words[0] == "python", (path, words)
        if words[1] == "-m":
            assert importlib.util.find_spec(words[2]) is not None, (path, words[2])
        else:
            assert (ROOT / words[1]).is_file(), (path, words[1])
