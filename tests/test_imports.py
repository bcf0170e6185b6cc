"""The helpers' imports point one way: no module imports, directly or round a circle, one that imports it back.

Every import counts, a function's or a type checker's too: a circle through a type hint still means that neither
module can be read, or moved, without the other. (Issue 25 measured three circles; none is left.)
"""

from __future__ import annotations

import ast

from conftest import ROOT

def _graph() -> dict[str, set[str]]:
    """helpers' top-level modules -> the helpers modules each imports (at the top or inside a function)."""
    mods = {p.stem: p for p in (ROOT / "helpers").glob("*.py")}
    edges = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers"):
                parts = node.module.split(".")
                deps |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
        edges[name] = {d for d in deps if d in mods and d != name}
    return edges


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


def test_no_import_circle():
    assert circles(_graph()) == []
