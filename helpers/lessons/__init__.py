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

import json as _json
import re as _re
from pathlib import Path as _Path

_IMPORT = _re.compile(r"from helpers\.lessons import (\w+)")
#: a lesson module's own parts: a sibling lesson module it imports (``from .n12_readings import ...``)
_PART = _re.compile(r"^from \.(?: import (n\d\d_\w+)|(n\d\d_\w+) import)", _re.M)


def code_of(notebook: str | _Path) -> str:
    """The code a notebook runs: its code cells, then the source of the lesson module(s) it imports, and of the
    sibling lesson modules those import in turn (a lesson split in two)."""
    nb = _json.loads(_Path(notebook).read_text())
    cells = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                      for c in nb["cells"] if c["cell_type"] == "code")
    here = _Path(__file__).parent
    names = list(dict.fromkeys(_IMPORT.findall(cells)))
    sources = []
    for name in names:  # grows as a module names its parts
        path = here / f"{name}.py"
        if path.is_file():
            sources.append(path.read_text())
            names += [m for pair in _PART.findall(sources[-1]) for m in pair if m and m not in names]
    return "\n".join([cells] + sources)
