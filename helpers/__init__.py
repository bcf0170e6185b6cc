"""Helpers for the PyTorch profiler notebook series.

Importing this package is cheap and never imports torch: the trace reader and
the facts run on any machine. The notebooks import what they need from the
submodules: ``helpers.runs.profiling`` (profile a workload, live or from the
recordings), ``helpers.facts`` (what a trace says), ``helpers.lesson.plots``,
``helpers.lesson.widgets`` (predict, then reveal), ``helpers.lesson.show`` (banner, tables).
README.md lists every module.
"""

from enum import Enum
from pathlib import Path

__version__ = "0.1.0"

#: the repository: notebooks/, traces/ and helpers/ itself
ROOT = Path(__file__).resolve().parent.parent


class Word(str, Enum):
    """An enum whose members are words: ``Status.HELD == "held"``, and JSON, ``str()`` and f-strings give the word.

    The statuses, rule ids and severities are such enums, so that a typo is an error where it is written while the
    journals and ``--json`` keep the words they always held (Python 3.11's ``StrEnum``, on every Python the series
    supports).
    """

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


def exam_notebook(lessons: Path = Path(__file__).resolve().parent / "lessons") -> str:
    """The exam's notebook number ("17"): that of the one lesson module named ``nNN_the_exam.py``.

    The number's one home: the journal (which scores the exam apart), the exam's answer key (its question ids) and
    the tests read it here, so that renumbering the exam is renaming its files, not editing "17" in each reader.
    """
    found = sorted(p.name[1:3] for p in lessons.glob("n[0-9][0-9]_the_exam.py"))
    if len(found) != 1:
        raise LookupError(f"{lessons} holds {len(found)} modules named nNN_the_exam.py, not one: {found}")
    return found[0]
