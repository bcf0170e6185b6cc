"""Run All, unanswered (``make test-runall``): collected only when ``tests/runall`` (or a file in it) is named.

Like ``tests/browser``: ``make test`` runs ``pytest tests``, and this second run of the whole series (minutes)
belongs to ``.ci/run``, beside the browser test, not to it.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def _asked_for(config) -> bool:
    """True when a command-line argument is this folder or a file in it (``pytest tests`` is not)."""
    for arg in config.args:
        target = Path(str(arg).split("::", 1)[0])
        if not target.is_absolute():
            target = Path(config.invocation_params.dir) / target
        try:
            target = target.resolve()
        except OSError:
            continue
        if target == HERE or HERE in target.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    return True if not _asked_for(config) else None
