"""Which Python code an event came from, read from a trace profiled with ``with_stack=True``.

With ``with_stack=True`` Kineto writes a ``python_function`` event for every
Python call it sees, nested around the ops they make. Each is named
``file(line): function``, where the line is where the *function* starts
(``co_firstlineno``), not the line inside it that made the call; calls into
C code are named after the built-in (``<built-in method item of Tensor object
at 0x...>``). So a trace says which function of yours made an op and which
built-in it called there; :func:`call_lines` then finds the lines of that
function which make that call, in its source. No torch here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..reader.categories import PYTHON
from ..reader.trace import Trace

_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.+)$")
_BUILTIN = re.compile(r"^<(?:built-in (?:method|function) (?P<a>\w+)|method '(?P<b>\w+)' of)")

#: frames that are not the learner's code: torch, the standard library, and the profiler's own entry points
LIBRARY = ("torch/", "threading.py", "multiprocessing/", "contextlib.py", "functools.py", "<")


@dataclass(frozen=True)
class Frame:
    """One Python function on the stack: its file (as the trace names it), the line it starts at, its name."""

    file: str
    line: int
    function: str


@dataclass(frozen=True)
class Origin:
    """Where an event came from in the learner's code: their innermost function, and what it called there."""

    frame: Frame
    call: str | None  # the built-in it called ("item", "tensor", "to"), or the Python function, or None
    chain: tuple[str, ...]  # the python_function names from that frame inwards to the event, outermost first


def frame_of(name: str) -> Frame | None:
    """``helpers/loop.py(109): step`` -> Frame; None for a built-in or anything else."""
    m = _FRAME.match(name)
    return Frame(m["file"], int(m["line"]), m["func"]) if m else None


def builtin_of(name: str) -> str | None:
    """``<built-in method item of Tensor object at 0x...>`` -> ``item``; None for a Python frame."""
    m = _BUILTIN.match(name)
    return (m["a"] or m["b"]) if m else None


def has_stacks(trace: Trace) -> bool:
    """Whether the trace was profiled with ``with_stack=True`` (it holds python_function events)."""
    return bool(trace.indices((PYTHON,)))


def origin(trace: Trace, i: int, file: str | None = None) -> Origin | None:
    """The innermost Python function around event ``i`` that is the learner's (in ``file`` when given, else any
    file outside :data:`LIBRARY`), with the call it made on the way to ``i``; None when no frame is around it
    (an op on autograd's backward thread, or a trace recorded without stacks)."""
    inner: list[str] = []
    for a in trace.ancestors(i):  # innermost first
        if trace.group_of(a) != PYTHON:
            continue
        name = trace.name_of(a)
        f = frame_of(name)
        mine = f is not None and (f.file.endswith(file) if file else not f.file.startswith(LIBRARY))
        if mine:
            call = None
            if inner:
                callee = inner[-1]
                call = builtin_of(callee) or (frame_of(callee).function if frame_of(callee) else None)
            return Origin(f, call, tuple([name] + inner[::-1]))
        inner.append(name)
    return None


def _function_at(tree: ast.AST, line: int) -> ast.AST | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if line in (node.lineno, first):
                return node
    return None


def call_lines(source: str, def_line: int, call: str) -> list[int]:
    """The lines of the function starting at ``def_line`` in ``source`` that call ``call`` (``x.item()``,
    ``torch.tensor(...)``, ``item(...)``); functions defined inside it are left out. Empty when no function starts
    there (the source changed since the trace was recorded)."""
    fn = _function_at(ast.parse(source), def_line)
    if fn is None:
        return []
    found: set[int] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name == call:
                    found.add(child.lineno)
            visit(child)

    visit(fn)
    return sorted(found)


def starts_function(source: str, def_line: int, function: str) -> bool:
    """Whether ``function`` starts at ``def_line`` in ``source``: the check that a recorded trace's frames still
    point at this source."""
    fn = _function_at(ast.parse(source), def_line)
    return fn is not None and getattr(fn, "name", None) == function
