"""Figures are images: whether their words overlap is matplotlib's layout, so every figure the lessons draw
must be laid out by it (``tight_layout`` or constrained layout), and the notebook shows it saved with
``bbox_inches="tight"`` (nothing cut at the edge). The browser's layout checks (``make screenshots``) cover the
HTML around them. Read from the code, once: a new figure function without a layout fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "helpers").rglob("*.py"))


def _calls(node: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _functions():
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, fn


def test_every_figure_is_laid_out():
    unlaid, made = [], 0
    for path, fn in _functions():
        calls = _calls(fn)
        if not any(_name(c) in ("subplots", "figure") and isinstance(c.func, ast.Attribute) for c in calls):
            continue
        made += 1
        constrained = any(k.arg == "layout" and isinstance(k.value, ast.Constant)
                          and k.value.value in ("constrained", "tight") for c in calls for k in c.keywords)
        if not constrained and not any(_name(c) == "tight_layout" for c in calls):
            unlaid.append(f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}")
    assert made >= 10, f"only {made} functions make a figure: this check no longer finds them"
    assert not unlaid, "figures without tight_layout or constrained layout (their words can overlap):\n" + \
        "\n".join(unlaid)


def test_notebook_figures_are_saved_tight():
    """Every savefig in the code a notebook shows (not the room's HTML report) crops to the drawn words."""
    loose, seen = [], 0
    for path, fn in _functions():
        if path.name == "room.py":  # the instructor's HTML report: its own fixed-size charts
            continue
        for c in _calls(fn):
            if _name(c) == "savefig":
                seen += 1
                if not any(k.arg == "bbox_inches" and isinstance(k.value, ast.Constant) and k.value.value == "tight"
                           for k in c.keywords):
                    loose.append(f"{path.relative_to(ROOT)}:{c.lineno} {fn.name}")
    assert seen >= 1, "no savefig found: show.display_figure moved?"
    assert not loose, "figures saved without bbox_inches='tight':\n" + "\n".join(loose)


def test_a_figure_is_kept_small_and_looks_the_same():
    """The notebook keeps a figure as a palette PNG: far fewer bytes, the same size, and within a few levels of
    the full-colour picture at every pixel but the antialiased edges."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image, ImageChops

    from helpers.facts import steps
    from helpers.lesson import plots, show
    from helpers.reader.trace import read_trace

    t = read_trace(ROOT / "traces" / "reference" / "nvidia-h200" / "64_bf16_warm_eager.json")
    last = steps(t)[-1]
    fig = plots.timeline(t, (last.start_us, last.end_us))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")
    plt.close(fig)
    full = buf.getvalue()
    small = show.small_png(full)
    assert len(small) < 0.6 * len(full)
    a, b = Image.open(io.BytesIO(full)).convert("RGB"), Image.open(io.BytesIO(small)).convert("RGB")
    assert a.size == b.size
    diff = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 24 else 0)
    far = diff.histogram()[255]
    assert far < 0.01 * a.size[0] * a.size[1], far
    assert show.small_png(b"not a png") == b"not a png"  # what Pillow cannot read is kept as it is


def test_a_step_window_ends_with_the_work_its_own_steps_launched():
    """plots.step_window: from the step's start to the end of the GPU work launched inside it, and no later step's
    (it once widened its end as it went, and swept the next step's kernels into 'one recorded step')."""
    from helpers import facts
    from helpers.lesson import plots
    from helpers.reader.trace import read_trace

    for path in [ROOT / "traces" / "exam" / "nvidia-h200" / "exam-1.json",
                 ROOT / "traces" / "reference" / "nvidia-h200" / "4096_bf16_warm_eager.json"]:
        t = read_trace(path)
        st = facts.steps(t)
        lo, hi = plots.step_window(t, 1, 1)
        step = st[1]
        own = [t.end_of(j) for j in facts.gpu_work(t) if t.launch_of(j) >= 0 and step.contains(t.ts[t.launch_of(j)])]
        assert lo == step.start_us and hi == max([step.end_us] + own), path.name
        later = [t.end_of(j) for j in facts.gpu_work(t)
                 if t.launch_of(j) >= 0 and t.ts[t.launch_of(j)] >= step.end_us]
        assert not later or hi < max(later), path.name  # the next step's work is left out
