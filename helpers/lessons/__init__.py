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


def code_of(notebook: str | _Path) -> str:
    """The code a notebook runs: its code cells, then the source of the lesson module(s) it imports."""
    nb = _json.loads(_Path(notebook).read_text())
    cells = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                      for c in nb["cells"] if c["cell_type"] == "code")
    here = _Path(__file__).parent
    modules = [here / f"{m}.py" for m in dict.fromkeys(_IMPORT.findall(cells))]
    return "\n".join([cells] + [m.read_text() for m in modules if m.is_file()])
