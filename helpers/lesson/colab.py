"""Colab: the first cell of every notebook, and the "Open in Colab" badge.

On Colab the first cell clones this repository once (it installs nothing, so
Colab's own torch and ipywidgets stay as they are); elsewhere that line does
nothing. Then it imports ``notebooks/series_setup.py``, which puts the clone it
sits in on the path, so that a Python which has torch and Jupyter but not this
package (VS Code, another JupyterLab) still runs the notebook. It looks beside
the notebook itself where the front end says where that is (VS Code's
``__vsc_ipynb_file__`` in the kernel's namespace, Jupyter Server's
``JPY_SESSION_NAME`` in its environment), so that a kernel started in another
folder (a VS Code workspace one folder up) finds it too, then under the
kernel's folder (``notebooks/`` or the clone's root). Where none of these holds
it, the cell stops with one sentence that says what to do, not a traceback: a
``SystemExit``, which IPython shows as its message under one line ("An
exception has occurred, use %tb to see the full traceback."); the warnings
filter drops the "To exit: use 'exit', 'quit', or Ctrl-D." hint it adds.
The error series_setup.py raises itself, in a notebooks/ folder taken out of
its clone, goes through as it is.
The cell is plain Python (no ``!`` magics) so that tests can run it against a
simulated Colab.
"""

from __future__ import annotations

#: where the series is published; tools/set_repository.py rewrites it everywhere
REPOSITORY = "https://github.com/profiling-notebooks/pytorch-profiler-series"
BRANCH = "main"
CLONE_DIR = "/content/pytorch-profiler-series"

MARK = "# Colab only:"


#: what the first cell says where it finds no series_setup.py (the kernel's folder is filled in)
NOT_FOUND = ("This kernel runs in {cwd}, and this notebook's folder is not known to it: start Jupyter in the "
             "series' clone (make lab), open the clone's own folder in VS Code, or run %cd with the clone's path, "
             "then run this cell again.")


def bootstrap_source(repository: str = REPOSITORY, clone_dir: str = CLONE_DIR) -> str:
    """The first code cell of every notebook."""
    not_found = NOT_FOUND.format(cwd="{os.getcwd()}")
    return (f"{MARK} fetch the series once (nothing is installed: Colab's own torch and ipywidgets stay as they are).\n"
            f'import os, sys, subprocess, warnings; "google.colab" in sys.modules and subprocess.run("test -d {clone_dir} || '
            f'git clone -q --depth 1 {repository} {clone_dir}", shell=True, check=True)\n'
            "# Put this clone's helpers on the path (notebooks/series_setup.py: beside this notebook, or under the "
            "kernel's folder)\n"
            'sys.path += [os.path.dirname(globals().get("__vsc_ipynb_file__") or os.environ.get("JPY_SESSION_NAME", "")), '
            f'"{clone_dir}/notebooks", "notebooks"]\n'
            "try: import series_setup\n"
            "except ModuleNotFoundError as e:  # not found: what to do, in one line (and no 'To exit' hint from IPython)\n"
            '    warnings.filterwarnings("ignore", "To exit"); '
            f'raise e if e.name != "series_setup" else SystemExit(f"{not_found}") from None')


def badge(notebook: str, repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """Markdown for the "Open in Colab" badge of ``notebooks/<notebook>``."""
    path = repository.removeprefix("https://github.com/")
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{path}/blob/{branch}/notebooks/{notebook})")
