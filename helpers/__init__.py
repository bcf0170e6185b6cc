"""Helpers for the PyTorch profiler notebook series.

Importing this package is cheap and never imports torch: the trace reader and
the facts run on any machine. The notebooks import what they need from the
submodules (``helpers.profiling``, ``helpers.plots``, ``helpers.predict``...).
"""

__version__ = "0.1.0"
