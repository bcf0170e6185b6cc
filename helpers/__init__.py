"""Helpers for the PyTorch profiler notebook series.

Importing this package is cheap and never imports torch: the trace reader and
the facts run on any machine. The notebooks import what they need from the
submodules: ``helpers.runs.profiling`` (profile a workload, live or from the
recordings), ``helpers.facts`` (what a trace says), ``helpers.lesson.plots``,
``helpers.lesson.widgets`` (predict, then reveal), ``helpers.lesson.show`` (banner, tables).
README.md lists every module.
"""

from pathlib import Path

__version__ = "0.1.0"

#: the repository: notebooks/, traces/ and helpers/ itself
ROOT = Path(__file__).resolve().parent.parent
