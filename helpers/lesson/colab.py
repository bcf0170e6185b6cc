"""Colab: the first cell of every notebook, and the "Open in Colab" badge.

The first cell is two lines. On Colab the first clones this repository once
(it installs nothing, so Colab's own torch and ipywidgets stay as they are);
elsewhere it does nothing. The second imports ``notebooks/series_setup.py``,
which puts the clone it sits in on the path, so that a Python which has torch
and Jupyter but not this package (VS Code, another JupyterLab) still runs the
notebook, with the kernel started beside the notebooks or at the clone's root.
The cell is plain Python (no ``!`` magics) so that tests can run it against a
simulated Colab.
"""

from __future__ import annotations

#: where the series is published; tools/set_repository.py rewrites it everywhere
REPOSITORY = "https://github.com/profiling-notebooks/pytorch-profiler-series"
BRANCH = "main"
CLONE_DIR = "/content/pytorch-profiler-series"

MARK = "# Colab only:"


def bootstrap_source(repository: str = REPOSITORY, clone_dir: str = CLONE_DIR) -> str:
    """The first code cell of every notebook."""
    return (f"{MARK} fetch the series once (nothing is installed: Colab's own torch and ipywidgets stay as they are).\n"
            f'import sys, subprocess; "google.colab" in sys.modules and subprocess.run("test -d {clone_dir} || git clone '
            f'-q --depth 1 {repository} {clone_dir}", shell=True, check=True)\n'
            f'sys.path += ["{clone_dir}/notebooks", "notebooks"]; import series_setup  # puts this clone\'s helpers on '
            "the path (notebooks/series_setup.py)")


def badge(notebook: str, repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """Markdown for the "Open in Colab" badge of ``notebooks/<notebook>``."""
    path = repository.removeprefix("https://github.com/")
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{path}/blob/{branch}/notebooks/{notebook})")
