"""Colab: the first cell of every notebook, and the "Open in Colab" badge.

On Colab, the first cell clones this repository and puts its ``helpers`` on
the path; it installs nothing, so Colab's own torch and ipywidgets stay as
they are. Anywhere else it looks upward from the working directory for the
clone the notebook sits in and puts that on the path, so that a Python which
has torch and Jupyter but not this package (VS Code, another JupyterLab)
still runs the notebook; outside a clone it says what to do. The cell is plain Python (no
``!`` magics) so that tests can run it against a simulated Colab.
"""

from __future__ import annotations

#: where the series is published; tools/set_repository.py rewrites it everywhere
REPOSITORY = "https://github.com/profiling-notebooks/pytorch-profiler-series"
BRANCH = "main"
CLONE_DIR = "/content/pytorch-profiler-series"

MARK = "# Colab:"


def bootstrap_source(repository: str = REPOSITORY, clone_dir: str = CLONE_DIR) -> str:
    """The first code cell of every notebook."""
    return f'''{MARK} fetch this series' helpers (Colab's own torch and ipywidgets stay as they are).
# Elsewhere: find the clone this notebook sits in, so any Python with torch and Jupyter can run it.
import os, subprocess, sys
if "google.colab" in sys.modules:
    if not os.path.isdir("{clone_dir}/helpers"):
        subprocess.run(["git", "clone", "--depth", "1", "-q", "{repository}", "{clone_dir}"], check=True)
    sys.path.insert(0, "{clone_dir}")
    os.chdir("{clone_dir}/notebooks")
else:
    _up = [os.path.abspath(os.getcwd())]
    while os.path.dirname(_up[-1]) != _up[-1]:
        _up.append(os.path.dirname(_up[-1]))
    _clone = next((d for d in _up if os.path.isfile(os.path.join(d, "helpers", "colab.py"))), None)
    if _clone and _clone not in sys.path:
        sys.path.insert(0, _clone)
    elif not _clone:
        import importlib.util
        if importlib.util.find_spec("helpers") is None:
            raise ModuleNotFoundError("This notebook needs the series' helpers/ folder. Open it from inside a clone "
                                      "of {repository} (notebooks/ sits beside helpers/), or run 'make lab' there.")'''


def badge(notebook: str, repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """Markdown for the "Open in Colab" badge of ``notebooks/<notebook>``."""
    path = repository.removeprefix("https://github.com/")
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{path}/blob/{branch}/notebooks/{notebook})")
