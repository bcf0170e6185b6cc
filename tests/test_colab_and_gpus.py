"""Colab and other GPUs, simulated: the first cell, the badge, a T4 (no bf16), a GPU with little memory."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from helpers.lesson import colab
from helpers.runs import mode, profiling, runner, tags, workload as wl

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def first_cells(path):
    nb = nbformat.read(path, as_version=4)
    md = next(c for c in nb.cells if c.cell_type == "markdown")
    code = next(c for c in nb.cells if c.cell_type == "code")
    return nb, md, code


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_has_the_badge_the_colab_cell_and_asks_for_a_gpu(path):
    nb, md, code = first_cells(path)
    assert md.source.splitlines()[0] == colab.badge(path.name)
    assert f"/blob/main/notebooks/{path.name}" in md.source
    assert code.source == colab.bootstrap_source()
    assert nb.metadata["accelerator"] == "GPU"


def run_first_cell(monkeypatch, on_colab: bool, namespace: dict | None = None):
    """Run the first cell as a kernel would, with subprocess.run recorded: (commands, paths it added).

    ``namespace``: the kernel's namespace before the cell (VS Code puts ``__vsc_ipynb_file__`` there)."""
    calls = []
    if on_colab:
        monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)))
    monkeypatch.delitem(sys.modules, "series_setup", raising=False)
    saved = list(sys.path)
    try:
        exec(compile(colab.bootstrap_source(), "first-cell", "exec"), dict(namespace or {}))
        added = [p for p in sys.path if p not in saved]
    finally:
        sys.path[:] = saved
        sys.modules.pop("series_setup", None)
    return calls, added


def test_the_first_cell_is_short_a_colab_line_then_the_series_setup():
    """What every learner reads first: seven lines, two of them comments."""
    lines = colab.bootstrap_source().splitlines()
    code = [line for line in lines if not line.lstrip().startswith("#")]
    assert len(lines) <= 7 and len(code) <= 5, lines
    assert "google.colab" in code[0] and "pip" not in colab.bootstrap_source()
    assert code[2] == "try: import series_setup"


def test_first_cell_on_colab_clones_once_and_installs_nothing(monkeypatch):
    monkeypatch.chdir(ROOT)
    calls, added = run_first_cell(monkeypatch, on_colab=True)
    assert len(calls) == 1 and calls[0][1] == {"shell": True, "check": True}
    assert calls[0][0] == f"test -d {colab.CLONE_DIR} || git clone -q --depth 1 {colab.REPOSITORY} {colab.CLONE_DIR}"
    assert not {"pip", "install", "torch", "ipywidgets"} & set(calls[0][0].split())
    assert f"{colab.CLONE_DIR}/notebooks" in added


def test_the_colab_fetch_skips_the_clone_when_it_is_there(tmp_path):
    """The fetch runs in a shell: with the folder present, git is never called (a fake git records any call)."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'git-calls'}\n")
    (bin_dir / "git").chmod(0o755)
    clone = tmp_path / "series"
    src = colab.bootstrap_source(clone_dir=str(clone))
    command = src.split('subprocess.run("')[1].split('", shell=True')[0]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(command, shell=True, check=True, env=env)
    assert (tmp_path / "git-calls").read_text().startswith("clone -q --depth 1")
    (tmp_path / "git-calls").unlink()
    clone.mkdir()
    subprocess.run(command, shell=True, check=True, env=env)
    assert not (tmp_path / "git-calls").exists()


@pytest.mark.parametrize("start", ["notebooks", "root"])
def test_first_cell_elsewhere_puts_the_clone_it_sits_in_on_the_path(monkeypatch, start):
    """JupyterLab starts the kernel beside the notebook; VS Code may start it at the clone's root."""
    monkeypatch.chdir(ROOT / "notebooks" if start == "notebooks" else ROOT)
    monkeypatch.setattr(sys, "path", [""] + [p for p in sys.path if p and Path(p).resolve() != ROOT])
    calls, added = run_first_cell(monkeypatch, on_colab=False)
    assert calls == [] and str(ROOT) in added


@pytest.mark.parametrize("told_by", ["vscode", "jupyter"])
def test_a_kernel_started_outside_the_clone_finds_it_where_the_front_end_says_the_notebook_is(
        tmp_path, monkeypatch, told_by):
    """The issue's case: a VS Code workspace one folder up starts the kernel there, not beside the notebook."""
    notebook = str(ROOT / "notebooks" / "16_fix_a_slow_loop.ipynb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [""] + [p for p in sys.path if p and Path(p).resolve() != ROOT])
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    if told_by == "jupyter":  # Jupyter Server: the notebook's absolute path, in the kernel's environment
        monkeypatch.setenv("JPY_SESSION_NAME", notebook)
    calls, added = run_first_cell(monkeypatch, on_colab=False,
                                  namespace={"__vsc_ipynb_file__": notebook} if told_by == "vscode" else None)
    assert calls == [] and str(ROOT) in added


def _first_cell_outside_a_clone(tmp_path) -> tuple[dict, str]:
    """An environment without the clone on any path, and a folder outside it to start in."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JPY_SESSION_NAME")}
    (tmp_path / "workspace").mkdir()
    return env, str(tmp_path / "workspace")


def test_first_cell_in_a_kernel_outside_a_clone_says_what_to_do_in_one_sentence(tmp_path):
    """Nothing says where the notebook is, and the kernel runs elsewhere: the cell's own sentence, no traceback."""
    env, cwd = _first_cell_outside_a_clone(tmp_path)
    out = subprocess.run([sys.executable, "-c", colab.bootstrap_source()], capture_output=True, text=True,
                         cwd=cwd, env=env, timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr == colab.NOT_FOUND.format(cwd=cwd) + "\n"
    assert "start Jupyter in the series' clone (make lab)" in out.stderr


def test_ipython_shows_the_first_cells_sentence_not_a_traceback(tmp_path, monkeypatch):
    """In a real kernel: one error output whose message is the sentence, and no "To exit" hint on stderr."""
    import nbformat
    from nbclient import NotebookClient

    _, cwd = _first_cell_outside_a_clone(tmp_path)
    for var in ("PYTHONPATH", "JPY_SESSION_NAME"):  # the kernel inherits this environment
        monkeypatch.delenv(var, raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(colab.bootstrap_source())]
    NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": cwd}}).execute()
    outs = nb.cells[0].outputs
    assert [(o.output_type, o.get("ename"), o.get("evalue")) for o in outs] == [
        ("error", "SystemExit", colab.NOT_FOUND.format(cwd=cwd))], outs
    assert len(outs[0].traceback) == 2 and "%tb" in outs[0].traceback[0], outs[0].traceback


def test_first_cell_outside_a_clone_says_what_to_do(tmp_path):
    """A notebook copied out of its clone with series_setup.py beside it, but no helpers/: a message, not a riddle."""
    import shutil

    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "series_setup.py", tmp_path / "notebooks")
    out = subprocess.run([sys.executable, "-c", "import series_setup"], capture_output=True, text=True,
                         cwd=tmp_path / "notebooks")
    assert "keep the notebooks inside their clone" in out.stderr


def test_a_python_without_the_package_runs_a_notebook_from_the_clone(tmp_path):
    """The issue's case: torch, nbclient and ipykernel there, this package not installed, no PYTHONPATH."""
    import os

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    # Plain path lines: the packages of this environment, but not the .pth files that install helpers in it.
    Path(site, "borrowed.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    kernels = tmp_path / "jupyter" / "kernels" / "python3"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        '{"argv": ["%s", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "bare", '
        '"language": "python"}' % py)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(JUPYTER_PATH=str(tmp_path / "jupyter"), PROFILING_MODE="recorded", PROFILING_HEADLESS="1",
               PROFILING_JOURNAL=str(tmp_path / "journal.json"), MPLBACKEND="Agg")
    nb_path = ROOT / "notebooks" / "02_reading_the_table.ipynb"
    # One process proves the package absent (torch, nbclient and ipykernel there), then runs the notebook.
    script = ("import torch, nbformat, nbclient, ipykernel, sys\n"
              "try:\n import helpers\nexcept ModuleNotFoundError:\n print('no helpers', flush=True)\n"
              "else:\n sys.exit('helpers is importable in this Python: the test needs one without it')\n"
              f"nb = nbformat.read({str(nb_path)!r}, as_version=4)\n"
              f"nbclient.NotebookClient(nb, timeout=300, kernel_name='python3', "
              f"resources={{'metadata': {{'path': {str(nb_path.parent)!r}}}}}).execute()\n"
              "print('ran', sum(c.cell_type == 'code' for c in nb.cells), 'cells')\n")
    ran = subprocess.run([str(py), "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.startswith("no helpers\nran "), ran.stdout


def test_set_repository_rewrites_every_badge_and_cell(tmp_path):
    import shutil

    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(ROOT / "helpers", tmp_path / "helpers")
    shutil.copytree(ROOT / "tools", tmp_path / "tools")
    out = subprocess.run([sys.executable, str(tmp_path / "tools" / "set_repository.py"),
                          "https://github.com/someone/fork"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for path in sorted((tmp_path / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        _, md, code = first_cells(path)
        assert md.source.startswith("[![Open In Colab]") and "github/someone/fork/blob/main/notebooks/" in md.source
        assert md.source.count("Open In Colab") == 1
        assert code.source == colab.bootstrap_source("https://github.com/someone/fork")
    assert 'REPOSITORY = "https://github.com/someone/fork"' in (tmp_path / "helpers" / "lesson" / "colab.py").read_text()


# --- simulated GPUs -------------------------------------------------------------------


def fake_gpu(monkeypatch, name, major, minor, mem_gib, free_gib):
    import torch

    props = types.SimpleNamespace(name=name, major=major, minor=minor, total_memory=int(mem_gib * 2**30),
                                  multi_processor_count=40)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (major, minor))
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90100)
    monkeypatch.setattr(wl, "free_gpu_bytes", lambda: int(free_gib * 2**30))
    monkeypatch.delenv("PROFILING_MODE", raising=False)
    mode.environment.cache_clear()
    ran = []

    def fake_run(w, device, dtype, **kw):
        ran.append((w, device, dtype))
        return "table", Path("/nowhere") / (tags.tag_for(w, dtype, kw["warm"], kw["compile"], kw["schedule"]) + ".json"), 0.0

    monkeypatch.setattr(runner, "run_live", fake_run)
    monkeypatch.setattr(runner, "run_fresh", fake_run)
    return ran


@pytest.fixture(autouse=True)
def _fresh_environment():
    mode.environment.cache_clear()
    yield
    mode.environment.cache_clear()


def test_t4_runs_live_in_fp16_and_says_so(monkeypatch):
    ran = fake_gpu(monkeypatch, "Tesla T4", 7, 5, 15, 14)
    e = mode.environment()
    assert e.live and e.capability == (7, 5) and "Tesla T4" in e.banner()
    note = wl.dtype_note("cuda", e.capability)
    assert "float16" in note
    run = profiling.profile(wl.matmul_add(4096), warm=True)
    assert ran == [(wl.matmul_add(4096), "cuda", "fp16")]
    assert run.dtype == "fp16" and run.tag == "4096_fp16_warm_eager" and run.notes == []


def test_a100_runs_live_in_bf16(monkeypatch):
    ran = fake_gpu(monkeypatch, "NVIDIA A100-SXM4-80GB", 8, 0, 80, 79)
    profiling.profile(wl.matmul_add(64))
    assert ran[0][2] == "bf16"


def test_little_free_memory_steps_down_with_a_message(monkeypatch, capsys):
    ran = fake_gpu(monkeypatch, "Tesla T4", 7, 5, 15, 0.25)
    run = profiling.profile(wl.matmul_add(8192), warm=True)
    (w, _, dtype), = ran
    assert w.p["size"] < 8192 and w.bytes_needed(dtype) <= 0.25 * 2**30
    assert run.notes and run.notes[0].startswith("Stepped down")
    assert "Stepped down" in capsys.readouterr().out  # the learner sees it in the cell's output


def test_little_free_memory_without_step_down_is_refused(monkeypatch):
    fake_gpu(monkeypatch, "Tesla T4", 7, 5, 15, 0.25)
    with pytest.raises(wl.NotEnoughMemory, match="fits"):
        profiling.profile(wl.matmul_add(8192), warm=True, step_down=False)


def test_an_unusable_cudnn_is_named_not_hidden(monkeypatch):
    import torch

    fake_gpu(monkeypatch, "NVIDIA A100-SXM4-80GB", 8, 0, 80, 79)

    def incompatible():
        raise RuntimeError("cuDNN version incompatibility: PyTorch was compiled against (9, 1, 0) but found "
                           "runtime version (8, 9, 2).\nLooks like your LD_LIBRARY_PATH contains ...")

    monkeypatch.setattr(torch.backends.cudnn, "version", incompatible)
    e = mode.environment()
    assert e.cudnn == ("unusable: cuDNN version incompatibility: PyTorch was compiled against (9, 1, 0) but found "
                       "runtime version (8, 9, 2).")
    assert e.report()["cuDNN"] == e.cudnn


@pytest.mark.parametrize("gpus", [1, 2])
def test_notebook_15s_banner_says_where_its_pairs_come_from(monkeypatch, gpus):
    """Live on one GPU, notebook 15 reads the recorded pair: its banner must not say every trace is recorded now."""
    import torch

    from helpers.runs import ddp

    fake_gpu(monkeypatch, "NVIDIA H200", 9, 0, 140, 130)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    line = mode.environment().banner(ddp.where_traces_come_from())
    assert line.startswith("LIVE")
    if gpus == 1:
        assert not ddp.pairs_now()
        assert "recorded now, on this GPU" not in line
        assert "This machine has 1 GPU, not two" in line and "pair recorded on two GPUs" in line
    else:
        assert ddp.pairs_now() and ddp.where_traces_come_from() is None
        assert line.endswith("Every trace below is recorded now, on this GPU.")
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    mode.environment.cache_clear()
    assert ddp.where_traces_come_from() is None  # recorded mode: the banner already says where everything comes from
