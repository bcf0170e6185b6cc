"""Where a notebook's time goes: named phases, written down only when asked.

``python -m helpers preflight --breakdown`` sets ``PROFILING_STOPWATCH`` to a
file for each notebook; every :func:`phase` then appends one JSON line to it
(the kind, what it was, when it started, how long it took, the process and
how deep it sits in other phases). Fresh processes (a cold run, the two ranks)
inherit the variable and write to the same file. Unset, :func:`phase` costs a
dictionary lookup. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

STOPWATCH_VAR = "PROFILING_STOPWATCH"
SPAWNED_VAR = "PROFILING_STOPWATCH_SPAWNED"  # time.time() when the parent started this process

_depth = threading.local()


def enabled() -> bool:
    return bool(os.environ.get(STOPWATCH_VAR))


def note(kind: str, what: str, start: float, seconds: float) -> None:
    """Write one phase that was timed some other way (``start`` is ``time.time()``)."""
    path = os.environ.get(STOPWATCH_VAR)
    if not path:
        return
    row = {"kind": kind, "what": what, "start": round(start, 4), "seconds": round(seconds, 4),
           "pid": os.getpid(), "depth": getattr(_depth, "n", 0)}
    with open(path, "a", encoding="utf-8") as f:  # one short line per write: concurrent writers do not mix
        f.write(json.dumps(row) + "\n")


@contextmanager
def phase(kind: str, what: str = "") -> Iterator[None]:
    """Time the block as one phase of ``kind`` (say ``"cold run"``) when the stopwatch is on."""
    if not enabled():
        yield
        return
    start, t0 = time.time(), time.perf_counter()
    _depth.n = getattr(_depth, "n", 0) + 1
    try:
        yield
    finally:
        _depth.n -= 1
        note(kind, what, start, time.perf_counter() - t0)


def started_by_parent(kind: str, what: str = "") -> None:
    """In a fresh process: write the time from the parent's spawn to now (interpreter, imports) as a phase."""
    spawned = os.environ.get(SPAWNED_VAR)
    if enabled() and spawned:
        note(kind, what, float(spawned), time.time() - float(spawned))


def spawn_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a fresh process, stamped with the time it is started (only when the stopwatch is on)."""
    if enabled():
        env = dict(env, **{SPAWNED_VAR: repr(time.time())})
    return env


def read(path: str | os.PathLike) -> list[dict]:
    """The phases written to ``path`` (missing file: none)."""
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(ln) for ln in f if ln.strip()]
    except FileNotFoundError:
        return []
