"""A cell run before the cells it needs (after a kernel restart) says what to do, in a real kernel."""

from __future__ import annotations

import pytest

from helpers.lesson import kernel_hints


def test_the_hint_names_what_is_missing_and_what_to_do():
    text = kernel_hints.hint(NameError("name 'widgets' is not defined"))
    assert "`widgets`" in text and "Run > Run All Above" in text
    assert kernel_hints.hint(ZeroDivisionError()) is None


def test_a_fresh_kernel_of_the_environment_says_it_before_any_cell_ran(tmp_path, monkeypatch):
    """What `make lab` writes into the environment, read by a kernel as it starts (here from IPYTHONDIR)."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    from helpers import ROOT

    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(kernel_hints.KERNEL_CONFIG)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("lesson.observer(tiny, gpu_tiny)"),
                                         nbformat.v4.new_code_cell("1 / 0")])
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120).execute()
    first, second = (c.outputs for c in nb.cells)
    assert [o.output_type for o in first] == ["stream", "error"] and first[1].ename == "NameError"
    assert "`lesson`" in first[0].text and "Run All Above" in first[0].text
    assert [o.output_type for o in second] == ["error"]  # other errors are left as they are


def test_the_environment_s_lab_has_no_news_pop_up_and_keeps_other_settings(tmp_path):
    import json

    from helpers.classroom import lab_setup

    over = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    over.parent.mkdir(parents=True)
    over.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}))
    kernel, lab = lab_setup.install(tmp_path)
    got = json.loads(lab.read_text())
    assert got["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert got["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert kernel.read_text() == kernel_hints.KERNEL_CONFIG


def test_make_s_environment_has_them(request):
    """`make lab`/`make test` ran helpers.classroom.lab_setup in the environment running these tests (.venv)."""
    import sys
    from pathlib import Path

    if not (Path(sys.prefix) / "pyvenv.cfg").is_file():
        pytest.skip("not the environment make creates (a conda env or a system Python): nothing was installed")
    lab = Path(sys.prefix, "share", "jupyter", "lab", "settings", "overrides.json")
    assert '"fetchNews": "false"' in lab.read_text()
    assert Path(sys.prefix, "etc", "ipython", "ipython_kernel_config.py").read_text() == kernel_hints.KERNEL_CONFIG
