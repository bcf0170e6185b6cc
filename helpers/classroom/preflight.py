"""An instructor's check before a workshop: run every notebook here, headless, and report.

    python -m helpers preflight                  # all notebooks
    python -m helpers preflight 02 08            # only these
    make preflight

Each notebook runs top to bottom in a fresh kernel, as a learner's would, in
the mode this machine gives (live with a GPU), with default answers to the
predictions (``PROFILING_HEADLESS=1``) so that every reveal runs. Progress
shows as it goes; at the end comes a table of notebook, status, seconds and
the GPU it ran on, a clear line for each failure, and an HTML report of the
executed notebooks (``preflight/index.html``, with each executed ``.ipynb``
beside its page).

``--breakdown`` adds where each notebook's time went (kernel start, torch,
CUDA, each kind of profiled run, timings, reading traces, the rest), from the
phases the helpers write down (:mod:`helpers.classroom.breakdown`).
"""

from __future__ import annotations

import argparse
import html
import os
import re
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import ROOT, Word
from ..runs.mode import ModeError, environment
from ..runs.stopwatch import STOPWATCH_VAR
from . import breakdown

NOTEBOOKS = ROOT / "notebooks"
REPORT = ROOT / "preflight"


class Ran(Word):
    """How a notebook's run ended."""

    OK = "ok"
    FAILED = "FAILED"


@dataclass
class Result:
    notebook: str
    status: Ran
    seconds: float
    gpu: str
    error: str = ""
    cells: int = 0
    kernel_start: float = 0.0  # from the start of the kernel to its first cell


def _where() -> str:
    try:
        e = environment()
    except ModeError as err:
        return f"? ({err})"
    if e.live:
        return f"{e.gpu} (live)"
    return f"no GPU: recorded traces from {e.reference.gpu if e.reference else '?'}"


def bytecode_note() -> str | None:
    """A warning when Python here compiles torch's sources again in every process, else None.

    With no bytecode beside torch's sources and none allowed to be written
    (``PYTHONDONTWRITEBYTECODE``, a read-only install), every kernel and every
    cold run's fresh process compiles them again: on the H200 host that set-up
    cost seconds per process (``--breakdown`` shows it under torch and cold).
    """
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    cached = Path(importlib.util.cache_from_source(spec.origin))
    if cached.exists():
        return None
    folder = cached.parent if cached.parent.exists() else cached.parent.parent
    if not sys.flags.dont_write_bytecode and os.access(folder, os.W_OK):
        return None  # the first process writes it; the others read it
    why = "PYTHONDONTWRITEBYTECODE is set" if sys.flags.dont_write_bytecode else f"{folder} is read-only"
    return (f"preflight: torch has no compiled bytecode here and {why}, so every kernel and every cold run compiles "
            "torch's sources again (seconds each, for every learner too). Once: python -m compileall -q "
            f"{Path(spec.origin).parent.parent}; or set PYTHONPYCACHEPREFIX to a writable folder.")


def _progress(line: str, final: bool = False) -> None:
    if sys.stdout.isatty():
        sys.stdout.write("\r" + line.ljust(100)[:100] + ("\n" if final else ""))
    elif final:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_notebook(path: Path, out_dir: Path, index: int, total: int, timeout: int = 900) -> Result:
    """Execute one notebook in a fresh kernel; write its HTML; never raise for a failing cell."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    started = [0]  # code cells started so far: the failing one is the last started
    start = time.perf_counter()
    name = path.stem

    first_cell = [0.0]

    def on_cell_start(cell, cell_index):
        started[0] += 1
        if not first_cell[0]:
            first_cell[0] = time.perf_counter()

    def on_cell_executed(cell, cell_index, execute_reply):
        _progress(f"[{index:>2}/{total}] {name:<32} cell {started[0]:>2}/{len(code_cells)}  "
                  f"{time.perf_counter() - start:6.1f} s")
        if not sys.stdout.isatty() and started[0] == len(code_cells) // 2:
            print(f"[{index:>2}/{total}] {name}: {started[0]} of {len(code_cells)} cells done", flush=True)

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}},
                            on_cell_start=on_cell_start, on_cell_executed=on_cell_executed)
    if not sys.stdout.isatty():
        print(f"[{index:>2}/{total}] {name}: running", flush=True)
    status, error = Ran.OK, ""
    try:
        client.execute()
    except CellExecutionError as e:
        status = Ran.FAILED
        lines = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines() if ln.strip()]
        error = f"cell {started[0]}: {lines[-1] if lines else 'error'}"
    except CellTimeoutError:
        status, error = Ran.FAILED, f"cell {started[0]}: took longer than {timeout} s"
    except DeadKernelError as e:
        status, error = Ran.FAILED, f"cell {started[0]}: the kernel died ({e})"
    secs = time.perf_counter() - start
    _progress(f"[{index:>2}/{total}] {name:<32} {status:<6} {secs:6.1f} s", final=True)
    _write_html(nb, out_dir / f"{name}.html")
    nbformat.write(nb, out_dir / f"{name}.ipynb")  # the executed notebook too: open it to read what ran live
    return Result(name, status, secs, _where(), error, started[0] - (status is not Ran.OK),
                  (first_cell[0] or time.perf_counter()) - start)


def _write_html(nb, target: Path) -> None:
    try:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter(embed_images=True).from_notebook_node(nb)
    # nbconvert missing (ImportError), or its templates (wheels installed with --target): jinja2's
    # TemplateNotFound is an OSError, nbconvert's "No template sub-directory" a ValueError
    except (ImportError, OSError, ValueError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        _say_once(f"preflight: nbconvert cannot render HTML here ({why}); the report has plain pages instead")
        body = plain_html(nb)
    target.write_text(body)


@lru_cache(maxsize=None)
def _say_once(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def plain_html(nb) -> str:
    """The executed notebook as a simple page: sources, text, HTML and images, no templates needed."""
    parts = ["<!doctype html><meta charset='utf-8'><style>pre{background:#f6f8fa;padding:6px}"
             ".md{white-space:pre-wrap;font-family:sans-serif}</style>"]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            parts.append(f"<div class='md'>{html.escape(cell.source)}</div>")
            continue
        if cell.cell_type != "code":
            continue
        parts.append(f"<pre>{html.escape(cell.source)}</pre>")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(f"<pre>{html.escape(out.get('text', ''))}</pre>")
            elif out.get("output_type") == "error":
                tb = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(out.get("traceback", [])))
                parts.append(f"<pre style='color:#b00'>{html.escape(tb)}</pre>")
            else:
                data = out.get("data", {})
                if "image/png" in data:
                    parts.append(f"<img src='data:image/png;base64,{data['image/png']}'>")
                elif "text/html" in data:
                    parts.append(re.sub(r"<script.*?</script>", "", data["text/html"], flags=re.S))
                elif "text/markdown" in data:
                    parts.append(f"<div class='md'>{html.escape(data['text/markdown'])}</div>")
                elif "text/plain" in data:
                    parts.append(f"<pre>{html.escape(data['text/plain'])}</pre>")
    return "\n".join(parts)


def table(results: list[Result]) -> str:
    w = max([len(r.notebook) for r in results] + [8])
    lines = [f"{'notebook':<{w}}  {'status':<6}  {'seconds':>7}  GPU"]
    for r in results:
        lines.append(f"{r.notebook:<{w}}  {r.status:<6}  {r.seconds:>7.1f}  {r.gpu}")
    lines.append(f"{'total':<{w}}  {'':<6}  {sum(r.seconds for r in results):>7.1f}")
    for r in results:
        if r.status is not Ran.OK:
            lines.append(f"FAILED {r.notebook}: {r.error}")
    return "\n".join(lines)


def _write_index(results: list[Result], out_dir: Path) -> Path:
    rows = "".join(
        f"<tr><td><a href='{html.escape(r.notebook)}.html'>{html.escape(r.notebook)}</a></td>"
        f"<td style='color:{'#1a7f37' if r.status is Ran.OK else '#b00'}'>{r.status}</td>"
        f"<td style='text-align:right'>{r.seconds:.1f}</td><td>{html.escape(r.gpu)}</td>"
        f"<td>{html.escape(r.error)}</td></tr>" for r in results)
    page = (f"<!doctype html><meta charset='utf-8'><title>Pre-flight</title>"
            f"<h1>Pre-flight check</h1><p>{html.escape(time.strftime('%Y-%m-%d %H:%M'))}, "
            f"{html.escape(_where())}</p><table border='1' cellpadding='4' style='border-collapse:collapse'>"
            f"<tr><th>notebook</th><th>status</th><th>seconds</th><th>GPU</th><th>error</th></tr>{rows}"
            f"<tr><td>total</td><td></td><td style='text-align:right'>{sum(r.seconds for r in results):.1f}</td>"
            f"<td></td><td></td></tr></table>")
    index = out_dir / "index.html"
    index.write_text(page)
    return index


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers preflight", description=__doc__.split("\n\n")[0])
    ap.add_argument("only", nargs="*", help="notebook numbers or names to run (default: all)")
    ap.add_argument("--out", default=str(REPORT), help="folder for the HTML report (default: preflight/)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell (default 900)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also say where each notebook's time went (breakdown.txt beside the report)")
    a = ap.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if a.only:
        paths = [p for p in paths if any(p.name.startswith(o) or p.stem == o for o in a.only)]
    if not paths:
        print(f"preflight: no notebook matches {' '.join(a.only)}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PROFILING_HEADLESS"] = "1"
    os.environ.setdefault("PROFILING_JOURNAL", str(out / "journal.json"))
    from .lab_setup import quiet_profile

    os.environ["IPYTHONDIR"] = str(quiet_profile(out / "ipython"))  # one progress line each, no kernel chatter
    print(f"pre-flight: {len(paths)} notebooks on {_where()}", flush=True)
    note = bytecode_note()
    if note:
        print(note, flush=True)
    results, splits = [], []
    for i, p in enumerate(paths, 1):
        log = out / f"{p.stem}.stopwatch.jsonl"
        if a.breakdown:  # the kernel and the processes it starts inherit the variable
            log.unlink(missing_ok=True)
            os.environ[STOPWATCH_VAR] = str(log)
        results.append(run_notebook(p, out, i, len(paths), a.timeout))
        os.environ.pop(STOPWATCH_VAR, None)
        if a.breakdown:
            r = results[-1]
            splits.append(breakdown.of_notebook(r.notebook, r.seconds, r.kernel_start, log))
    index = _write_index(results, out)
    print()
    print(table(results))
    if splits:
        (out / "breakdown.txt").write_text(breakdown.table(splits) + "\n")
        print("\nWhere the time went (seconds):\n" + breakdown.table(splits))
    print(f"\nHTML report: {index}")
    return 0 if all(r.status is Ran.OK for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
