"""What a learner sees when a cell runs before the cells it needs: one line that says what to do.

After a kernel restart, running a cell in the middle of a notebook fails with
``NameError: name 'widgets' is not defined``: the cells above it, which
define it, have not run in this kernel. :func:`install` makes IPython say so
("run the cells above first: Run > Run All Above") above the usual error.
``make lab`` installs it in every kernel of the series' environment at start
(``.venv/etc/ipython/ipython_kernel_config.py``), so it holds after a restart;
the banner of each notebook installs it too (Colab, other set-ups).
"""

from __future__ import annotations

import re
from typing import Any

HINT = ("This cell needs {what}, which a cell above defines, and that cell has not run in this kernel (after a "
        "restart, nothing has). Run the cells above first: Run > Run All Above, or Shift+Enter from the top.")

#: the kernel config ``make lab`` writes into the environment (IPython reads <prefix>/etc/ipython)
KERNEL_CONFIG = ('# Written by the series\' Makefile: a NameError from a cell run before the cells it needs says so.\n'
                 'c.InteractiveShellApp.exec_lines = ["import helpers.lesson.kernel_hints as _h; _h.install(); del _h"]\n')


def hint(error: BaseException) -> str | None:
    """The line to show for ``error``, or None when it is not a name an earlier cell should have defined."""
    if not isinstance(error, NameError):
        return None
    m = re.search(r"name '([^']+)' is not defined", str(error))
    return HINT.format(what=f"`{m.group(1)}`" if m else "a name")


def install(shell: Any = None) -> bool:
    """Register the hint with IPython (a no-op outside IPython); returns whether it is installed."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = shell or get_ipython()
    if ip is None:
        return False

    def handler(self: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> Any:
        text = hint(value)
        if text:
            print(text)
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)  # IPython shows nothing a handler returns
        return None

    ip.set_custom_exc((NameError,), handler)
    return True
