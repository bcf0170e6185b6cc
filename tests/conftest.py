"""What the tests share: where the traces are, the json module's view of a trace, the command line,
the reader without msgspec, and Hypothesis's profiles."""

from __future__ import annotations

import functools
import gzip
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "traces" / "reference" / "nvidia-h200"
EXTERNAL = ROOT.parent / "shared" / "external-traces"
BIG = "hta_trace_diff_control_control.json.gz"  # HTA's 35 MB training trace
ROCM = "hta_amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
ABSENT = f"{EXTERNAL} is absent: the external traces live beside the clone in CI, not in a user's clone"
SMALL = H200 / "64_bf16_warm_eager.json"

try:  # Hypothesis is a test dependency; the profiles only matter where it is installed
    from hypothesis import settings

    # CI and `make test` run the same examples every time (HYPOTHESIS_PROFILE=ci): a red run is a real one.
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    settings.register_profile("dev", database=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
except ImportError:  # pragma: no cover
    pass


@pytest.fixture(scope="session")
def h200() -> Path:
    if not (H200 / "manifest.json").is_file():
        pytest.fail(f"the H200 reference set is missing from {H200}: it is part of the repository")
    return H200


@pytest.fixture(scope="session")
def external() -> Path:
    if not EXTERNAL.is_dir():
        pytest.skip(ABSENT)
    return EXTERNAL


def ext(name: str) -> Path:
    """A file of the external set, or a skip that says why it is not there."""
    if not EXTERNAL.is_dir():
        pytest.skip(ABSENT)
    return EXTERNAL / name


def external_files() -> list:
    """Every external trace (the rank folder's too), as test parameters."""
    if not EXTERNAL.is_dir():
        return [pytest.param(None, id="absent", marks=pytest.mark.skip(reason=ABSENT))]
    return sorted(EXTERNAL.rglob("*.json*"), key=lambda p: str(p.relative_to(EXTERNAL)))


def raw_doc(path: Path):
    """The trace as the json module reads it: the tests' independent view."""
    data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    return json.loads(data)


@functools.lru_cache(maxsize=None)
def diagnosed(path: str) -> list:
    """``diagnose`` on a trace file, once per session: several test files check the same findings of the same
    (large) external traces. The findings are shared: a test must not change them."""
    from helpers.advice.diagnose import diagnose
    from helpers.reader.trace import read_trace

    return diagnose(read_trace(path))


def findings_by_rule(path) -> dict:
    """``diagnosed(path)``'s findings by rule id ("hidden-sync": its finding)."""
    return {f.rule.value: f for f in diagnosed(str(path))}


def raw_events(path: Path) -> list[dict]:
    doc = raw_doc(path)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def cli(*args, env: dict | None = None, timeout: float = 120, encoding: str = "utf-8") -> subprocess.CompletedProcess:
    """``python -m helpers ARGS`` in a fresh process, as a user runs it; its output decoded strictly."""
    return subprocess.run([sys.executable, "-m", "helpers", *map(str, args)], capture_output=True,
                          encoding=encoding, errors="strict", cwd=ROOT, timeout=timeout,
                          env={**os.environ, **(env or {})})


def columns(t) -> tuple:
    """Everything the reader produced, in plain Python values."""
    lanes = [(ln.index, ln.pid, ln.tid, ln.name, ln.is_gpu, ln.is_profiler) for ln in t.lanes]
    m = t.memory
    memory = [list(x) for x in (m.ts, m.allocated, m.reserved, m.bytes, m.device_type, m.device_id)]
    sequence = [list(t.seq_event), list(t.seq_number), list(t.seq_fwd_thread)]
    counters = {i: t.counters(i) for i in t.args}  # the range profiler's counters, where it wrote some
    return (t.name_table, t.cat_table, t.cat_groups, lanes, list(t.name_id), list(t.cat_id), list(t.ts),
            list(t.dur), list(t.lane), list(t.corr), t.args, memory, sequence, counters, t.meta, t.t0)


_without_msgspec: ModuleType | None = None


def reader_without_msgspec() -> ModuleType:
    """A second copy of the helpers package, loaded while msgspec cannot be imported: the fallback as users get it."""
    global _without_msgspec
    if _without_msgspec is None:
        name = "helpers_without_msgspec"
        saved = sys.modules.get("msgspec")
        sys.modules["msgspec"] = None  # `import msgspec` raises ImportError
        try:
            spec = importlib.util.spec_from_file_location(name, ROOT / "helpers" / "__init__.py",
                                                          submodule_search_locations=[str(ROOT / "helpers")])
            pkg = importlib.util.module_from_spec(spec)
            sys.modules[name] = pkg
            spec.loader.exec_module(pkg)
            _without_msgspec = importlib.import_module(name + ".reader.trace")
        finally:
            if saved is None:
                del sys.modules["msgspec"]
            else:
                sys.modules["msgspec"] = saved
        assert _without_msgspec.PARSER == "json"
    return _without_msgspec


# --- the simulated GPUs' notebook runs: started at collection, waited for last ---------------------------

sim_runs_key = pytest.StashKey()


def _simulated(item) -> bool:
    return getattr(item, "originalname", None) == "test_notebook_on_a_simulated_gpu"


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: only the runs of the tests that will run start
def pytest_collection_modifyitems(session, config, items):
    """Put the tests that wait for simulated notebook runs last, and start those runs now on one worker.

    The rest of the session runs on one core; the runs (a kernel process each) use the other meanwhile, instead of
    starting when their tests come up in alphabetical order and leaving a core idle until then. Under pytest-xdist
    every worker collects every test, so none starts them all: each run starts when its test asks for it.
    """
    waiting = [it for it in items if _simulated(it)]
    if not waiting:
        return
    items[:] = [it for it in items if not _simulated(it)] + waiting
    if not config.getoption("collectonly", False) and not os.environ.get("PYTEST_XDIST_WORKER"):
        import simulated_gpu as sim

        config.stash[sim_runs_key] = sim.start_runs(waiting)


def pytest_unconfigure(config):
    runs = config.stash.get(sim_runs_key, None)
    if runs is not None:
        runs.close()
