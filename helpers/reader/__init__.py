"""The reader: a trace file becomes a :class:`Trace` (bytes -> events -> columns -> ``Trace``).

Knows Kineto's JSON format and nothing about what a trace means. Imports nothing
else from helpers (nor torch, matplotlib, ipywidgets). The path is one way:
:mod:`.source` opens the bytes (plain or gzip), :mod:`.json_events` decodes them
into events (it walks the document; :mod:`.json_decode` decodes each batch into
the records :mod:`.event_fields` describes), :mod:`.columns` packs the events
into columns, :mod:`.trace` builds the :class:`Trace`; :mod:`.parts` reads a
large file in parts by running those same steps on each part, :mod:`.bounds`
finds where the parts may start. :mod:`.vector` and :mod:`.spans` are the
column arithmetic and the interval arithmetic the steps share;
:mod:`.categories` names Kineto's event categories.
"""

from .categories import (ANNOTATION, COUNTER_RANGE, CPU_GROUPS, CPU_OP, DRIVER, GPU_ANNOTATION, GPU_GROUPS, GPU_WORK,
                         KERNEL, MEMCPY, MEMSET, OTHER, OVERHEAD, PYTHON, RUNTIME, SYNC)
from .source import TraceError
from .trace import Trace, read_trace

__all__ = ["read_trace", "Trace", "TraceError", "ANNOTATION", "COUNTER_RANGE", "CPU_GROUPS", "CPU_OP", "DRIVER",
           "GPU_ANNOTATION", "GPU_GROUPS", "GPU_WORK", "KERNEL", "MEMCPY", "MEMSET", "OTHER", "OVERHEAD", "PYTHON",
           "RUNTIME", "SYNC"]
