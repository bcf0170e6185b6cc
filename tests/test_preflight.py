"""The pre-flight check: a failing notebook gives a clear line, the table and the HTML report."""

from __future__ import annotations

import nbformat
import pytest

from helpers.classroom import preflight


def test_a_failing_notebook_is_reported_not_raised(tmp_path, monkeypatch):
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("1 / 0"),
                nbformat.v4.new_code_cell("print('never')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "99_broken.ipynb"
    nbformat.write(nb, path)
    r = preflight.run_notebook(path, tmp_path, 1, 1, timeout=120)
    assert r.status == "FAILED" and r.cells == 1
    assert r.error.startswith("cell 2:") and "ZeroDivisionError" in r.error
    assert (tmp_path / "99_broken.html").read_text().count("ZeroDivisionError") >= 1
    text = preflight.table([r])
    assert "FAILED 99_broken: cell 2:" in text and text.splitlines()[0].split() == ["notebook", "status", "seconds", "GPU"]
    index = preflight._write_index([r], tmp_path)
    assert "99_broken.html" in index.read_text()


def test_unknown_notebook_is_a_usage_error(capsys):
    assert preflight.main(["77"]) == 2
    assert "no notebook matches 77" in capsys.readouterr().err


def test_plain_html_needs_no_templates():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('hi')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi <b>\n"),
                    nbformat.v4.new_output("display_data", data={"text/html": "<p>shown</p><script>x()</script>"})]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), cell]
    page = preflight.plain_html(nb)
    assert "# Title" in page and "hi &lt;b&gt;" in page and "<p>shown</p>" in page and "<script>" not in page


def exporter_raising(monkeypatch, error: Exception) -> None:
    """nbconvert's HTMLExporter, replaced by one that fails the way a broken install does."""
    import nbconvert

    class Failing:
        def __init__(self, **kw):
            pass

        def from_notebook_node(self, nb):
            raise error

    monkeypatch.setattr(nbconvert, "HTMLExporter", Failing)


def test_missing_templates_give_plain_pages_and_one_line(tmp_path, monkeypatch, capsys):
    exporter_raising(monkeypatch, ValueError("No template sub-directory with name 'lab' found in the following "
                                             "paths:\n\t/x"))
    preflight._say_once.cache_clear()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('hi')")]
    for name in ("a", "b"):
        preflight._write_html(nb, tmp_path / f"{name}.html")
        assert "print(&#x27;hi&#x27;)" in (tmp_path / f"{name}.html").read_text()
    err = capsys.readouterr().err
    assert err.count("nbconvert cannot render HTML here (No template sub-directory with name 'lab'") == 1


def test_a_bug_in_rendering_is_not_hidden(tmp_path, monkeypatch):
    exporter_raising(monkeypatch, TypeError("a bug"))
    with pytest.raises(TypeError, match="a bug"):
        preflight._write_html(nbformat.v4.new_notebook(), tmp_path / "x.html")
