"""What ``make lab`` writes into the series' environment, so that JupyterLab and its kernels behave for learners.

    python -m helpers.classroom.lab_setup          # into this Python's prefix (the .venv make creates)

* ``<prefix>/etc/ipython/ipython_kernel_config.py``: every kernel of the environment says "run the cells
  above first" when a cell runs before the cells it needs (:mod:`helpers.lesson.kernel_hints`);
* ``<prefix>/share/jupyter/lab/settings/overrides.json``: no "official Jupyter news?" pop-up and no update
  check, which would cover the reveals (JupyterLab's documented settings overrides).

Both are written only inside the environment's prefix, never in the learner's home.

:func:`quiet_profile` writes an IPython profile for headless runs (``make test``, the pre-flight check): the
same kernel hints, and kernel log lines below errors left out (ipykernel 7 warns on every start that its
local TCP ports are unencrypted, which is how every Jupyter front end talks to a kernel on one machine).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..lesson.kernel_hints import KERNEL_CONFIG

LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def install(prefix: str | Path = sys.prefix) -> list[Path]:
    """Write both files under ``prefix``; keeps other settings already in ``overrides.json``."""
    kernel = Path(prefix, "etc", "ipython", "ipython_kernel_config.py")
    kernel.parent.mkdir(parents=True, exist_ok=True)
    kernel.write_text(KERNEL_CONFIG)
    lab = Path(prefix, "share", "jupyter", "lab", "settings", "overrides.json")
    lab.parent.mkdir(parents=True, exist_ok=True)
    try:
        current = json.loads(lab.read_text())
    except (OSError, ValueError):
        current = {}
    if not isinstance(current, dict):
        current = {}
    for plugin, values in LAB_OVERRIDES.items():
        current[plugin] = {**(current.get(plugin) or {}), **values}
    lab.write_text(json.dumps(current, indent=1) + "\n")
    return [kernel, lab]


QUIET_KERNEL_CONFIG = KERNEL_CONFIG + "c.IPKernelApp.log_level = 'ERROR'\n"


def quiet_profile(ipython_dir: str | Path) -> Path:
    """An IPython directory whose kernels log errors only (point ``IPYTHONDIR`` at it); returns it."""
    cfg = Path(ipython_dir, "profile_default", "ipython_kernel_config.py")
    cfg.parent.mkdir(parents=True, exist_ok=True)
    if not cfg.exists() or cfg.read_text() != QUIET_KERNEL_CONFIG:
        # written whole, then renamed: make test runs two suites at once, and a kernel starting in one must never
        # read the file half-written by the other
        tmp = cfg.with_name(f"{cfg.name}.{os.getpid()}.tmp")
        tmp.write_text(QUIET_KERNEL_CONFIG)
        os.replace(tmp, cfg)
    return Path(ipython_dir)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--quiet-profile"]:
        quiet_profile(sys.argv[2])
        sys.exit(0)
    install()
