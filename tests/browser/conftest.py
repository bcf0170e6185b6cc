"""JupyterLab and headless Chromium for the real-browser test (``make test-browser``).

The server runs the repository's ``notebooks/`` folder in recorded mode
(``PROFILING_MODE=recorded``), with the prediction journal in a scratch file
and *without* ``PROFILING_HEADLESS``, so the widgets wait for a click as they
do for a learner. Its settings, workspaces, checkpoints and runtime files live
in a scratch folder, and autosave is off: running the notebook never rewrites
the committed file or leaves anything in ``notebooks/``. The browser is
Debian's Chromium driven by Playwright (Playwright's own browser download is
not used).

Both start when the test asks for them, not in fixture set-up, so that a
missing Playwright, a missing or crashing Chromium, or a server that does not
come up makes the test FAIL with the reason.

These tests run only when ``tests/browser`` (or a file in it) is named on the
command line: ``make test`` runs ``pytest tests``, which must not need a
browser.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NOTEBOOKS = ROOT / "notebooks"
SCREENSHOTS = ROOT / "screenshots"

#: the flags Debian's Chromium needs here (no sandbox as root, no GPU, no network chatter)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S = 90


# --- only when asked for -----------------------------------------------------------------------

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


def pytest_configure(config):
    config.addinivalue_line("markers", "screenshots: the docs/img/ screenshots and their layout checks "
                                       "(make screenshots); run only with -m screenshots")


def pytest_collection_modifyitems(config, items):
    """The screenshot run (three notebooks, about a minute) only when asked for: ``-m screenshots``."""
    if "screenshots" in (config.getoption("markexpr", "") or ""):
        return
    keep = [i for i in items if i.get_closest_marker("screenshots") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


# --- Playwright and Chromium -------------------------------------------------------------------

def chromium_executable() -> str:
    """Debian's Chromium (``CHROMIUM`` overrides); the test fails, not skips, when there is none."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
            pytest.fail(f"CHROMIUM={explicit} is not an executable file", pytrace=False)
        return explicit
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    pytest.fail("Chromium is not installed: the browser test drives Debian's chromium "
                "(apt-get install -y chromium; .ci/run installs it), or set CHROMIUM=/path/to/chromium",
                pytrace=False)


class Chromium:
    """Playwright and Debian's Chromium, started by :meth:`launch` from the test."""

    def __init__(self):
        self._pw = None
        self.browser = None

    def launch(self):
        if self.browser is not None:
            return self.browser
        try:
            from playwright.sync_api import sync_playwright
        except ImportError as e:
            pytest.fail(f"Playwright is not installed ({e}): `make test-browser` installs it into .venv "
                        f"(or: .venv/bin/pip install 'playwright>=1.40')", pytrace=False)
        exe = chromium_executable()
        self._pw = sync_playwright().start()
        try:
            # Playwright turns Chromium's pop-up blocker off by default; keep it on, as in a learner's
            # browser: the Perfetto button must open its tab from the click itself.
            self.browser = self._pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS,
                                                    ignore_default_args=["--disable-popup-blocking"],
                                                    timeout=60_000)
        except Exception as e:  # a missing library, a crash at start-up: say so and fail
            self.close()
            pytest.fail(f"Chromium ({exe}) could not start: {e}", pytrace=False)
        return self.browser

    def close(self):
        if self.browser is not None:
            self.browser.close()
            self.browser = None
        if self._pw is not None:
            self._pw.stop()
            self._pw = None


@pytest.fixture(scope="session")
def chromium():
    c = Chromium()
    yield c
    c.close()


# --- JupyterLab -------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(settings: Path) -> None:
    """Lab settings for a test session: no autosave (the committed notebook stays as it is), no news toasts."""
    def put(plugin: str, values: dict) -> None:
        pkg, name = plugin.rsplit(":", 1)
        f = settings / pkg / f"{name}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values))

    put("@jupyterlab/docmanager-extension:plugin", {"autosave": False})
    put("@jupyterlab/apputils-extension:notification", {"fetchNews": "false", "checkForUpdates": False})
    # every cell in the page, also those scrolled out of view: the layout checks read the whole notebook
    put("@jupyterlab/notebook-extension:tracker", {"windowingMode": "none"})


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


class LabServer:
    """JupyterLab on a free local port, started by :meth:`start`, stopped at the end of the session
    (also when the test failed)."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.journal = scratch / "journal.json"
        self.log = scratch / "server.log"
        self.token = secrets.token_hex(16)
        self.url = ""
        self.proc: subprocess.Popen | None = None

    def page_url(self, path: str) -> str:
        return f"{self.url}/{path.lstrip('/')}?token={self.token}"

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return "(no server log)"

    def start(self) -> "LabServer":
        if self.proc is not None:
            return self
        scratch = self.scratch
        for d in ("settings", "workspaces", "checkpoints", "config", "runtime", "ipython"):
            (scratch / d).mkdir(exist_ok=True)
        _write_settings(scratch / "settings")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if k != "PROFILING_HEADLESS"}
        env.update(PROFILING_MODE="recorded", PROFILING_JOURNAL=str(self.journal),
                   JUPYTER_CONFIG_DIR=str(scratch / "config"), JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
                   IPYTHONDIR=str(scratch / "ipython"), PYTHONUNBUFFERED="1",
                   # the kernel imports helpers at start-up (helpers/classroom/lab_setup.py's exec_lines), before the
                   # notebook's series_setup: without this, a .venv installed from another clone (a git
                   # worktree's main checkout) would serve that clone's helpers, not the ones under test
                   PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={NOTEBOOKS}",
               f"--LabApp.user_settings_dir={scratch / 'settings'}",
               f"--LabApp.workspaces_dir={scratch / 'workspaces'}",
               # JupyterLab checkpoints a notebook when it opens it: keep that out of the working tree
               f"--FileCheckpoints.checkpoint_dir={scratch / 'checkpoints'}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(cmd, cwd=NOTEBOOKS, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + SERVER_START_S
        while not _answers(f"{self.url}/api/status?token={self.token}"):
            if self.proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with status {self.proc.returncode} before answering:\n"
                            f"{self.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer on port {port} within {SERVER_START_S} s:\n"
                            f"{self.log_tail()}", pytrace=False)
            time.sleep(0.25)
        return self

    def stop(self) -> None:
        """Ask the server to shut down (it stops its kernels), then insist, on this process only."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            req = urllib.request.Request(f"{self.url}/api/shutdown?token={self.token}", method="POST", data=b"")
            urllib.request.urlopen(req, timeout=5).close()
        except (urllib.error.URLError, OSError):
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    server = LabServer(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS
