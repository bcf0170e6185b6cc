"""Every notebook's first cell imports this: it puts the clone it sits in on the path.

It lives beside the notebooks so that a kernel started here (JupyterLab,
Colab, VS Code) or at the clone's root finds it, and it finds the clone from
its own place, not from where the kernel started. It installs nothing.
"""

import os
import sys

CLONE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if not os.path.isfile(os.path.join(CLONE, "helpers", "lesson", "colab.py")):
    raise ModuleNotFoundError(f"series_setup.py expects the series' helpers/ folder beside {os.path.dirname(__file__)}: "
                              "keep the notebooks inside their clone (or run 'make lab' there).")
if CLONE not in sys.path:
    sys.path.insert(0, CLONE)
