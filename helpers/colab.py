"""Colab: the first cell of every notebook, and the "Open in Colab" badge.

On Colab, the first cell clones this repository and puts its ``helpers`` on
the path; it installs nothing, so Colab's own torch and ipywidgets stay as
they are. Anywhere else the cell does nothing. The cell is plain Python (no
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
    return f'''{MARK} fetch this series' helpers (Colab's own torch and ipywidgets stay as they are). Elsewhere: nothing.
import os, subprocess, sys
if "google.colab" in sys.modules:
    if not os.path.isdir("{clone_dir}/helpers"):
        subprocess.run(["git", "clone", "--depth", "1", "-q", "{repository}", "{clone_dir}"], check=True)
    sys.path.insert(0, "{clone_dir}")
    os.chdir("{clone_dir}/notebooks")'''


def badge(notebook: str, repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """Markdown for the "Open in Colab" badge of ``notebooks/<notebook>``."""
    path = repository.removeprefix("https://github.com/")
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{path}/blob/{branch}/notebooks/{notebook})")
