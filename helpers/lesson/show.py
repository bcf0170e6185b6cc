"""Small display helpers for notebook cells: the banner, text with numbers, tables, Perfetto."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..runs import mode as _mode
from . import perfetto as _perfetto
from ..runs.workload import dtype_note


def _display_html(text: str) -> None:
    from IPython.display import HTML, display

    display(HTML(text))


def banner(traces: str | None = None) -> _mode.Environment:
    """Show the one-line mode banner; returns the environment for later cells.

    ``traces``: where the notebook's traces come from, live, when not all are recorded now on this GPU.
    """
    from . import kernel_hints

    kernel_hints.install()  # later cells run out of order say so (make lab installs it before any cell, too)
    e = _mode.environment()
    color = "#1a7f37" if e.live else "#8250df"
    note = dtype_note("cuda", e.capability) if e.live else None
    extra = f"<br><span style='color:#555'>{html.escape(note)}</span>" if note else ""
    # the series' one statistical term, said where every notebook starts
    extra += ("<br><span style='color:#555'>Times are medians of repeated runs; their spread is the IQR "
              "(interquartile range): the middle half of the samples lies between its two ends.</span>")
    _display_html(f"<div style='border:1px solid {color};border-left:6px solid {color};padding:6px 10px'>"
                  f"{html.escape(e.banner(traces))}{extra}</div>")
    return e


def code(text: object, width: int | None = None) -> str:
    """``<code>text</code>``, escaped: for kernel names and other trace values inside reveal HTML.

    Kernel names are C++ templates (``vectorized_elementwise_kernel<8, ...>``):
    put into HTML as they are, the browser takes ``<8, ...>`` for a tag and
    the name disappears. ``width`` cuts a long name to that many characters.
    """
    t = str(text)
    if width is not None and len(t) > width:
        t = t[: width - 1] + "…"
    return f"<code>{html.escape(t)}</code>"


class _Markdown:
    """Markdown that reads as itself where it is not rendered (a terminal, nbconvert to text, a diff of outputs),
    not as IPython's '<IPython.core.display.Markdown object>'."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def md(text: str) -> None:
    """Markdown, for reveals whose numbers come from the trace just read."""
    from IPython.display import display

    display(_Markdown(text))


# Every cell on one line, and the table scrolls sideways when it is wider than the output: a wrapped cell
# ("thread 2281 (pt_autograd_0)" over two lines, a header over six) reads as two rows. JupyterLab sets
# white-space:normal on td and th themselves, so the style goes on each cell, not on the table.
_CELL = "text-align:left;white-space:nowrap"


def _scrolls(table_html: str) -> str:
    """A table in a box that scrolls sideways (and only sideways) when the table is wider than the output."""
    return f"<div style='overflow-x:auto;max-width:100%'>{table_html}</div>"


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> None:
    """A plain HTML table (also readable as text in a headless run); wide ones scroll instead of wrapping."""
    rows = [list(r) for r in rows]
    head = "".join(f"<th style='{_CELL}'>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='{_CELL}'>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    _display_html(_scrolls(f"<table style='margin-left:0'><tr>{head}</tr>{body}</table>"))


def versus(rows: Iterable[Sequence[Any]], note: str = "") -> None:
    """The one element that sets the article's A100 beside this GPU: rows of (what, the article's, this GPU's)."""
    rows = [list(r) for r in rows]
    body = "".join(f"<tr><td style='{_CELL}'>{html.escape(str(w))}</td>"
                   f"<td style='text-align:right;white-space:nowrap;color:#8250df'>{html.escape(str(a))}</td>"
                   f"<td style='text-align:right;white-space:nowrap;color:#1a7f37'><b>{html.escape(str(b))}</b></td>"
                   "</tr>" for w, a, b in rows)
    foot = f"<div style='color:#555;font-size:85%'>{html.escape(note)}</div>" if note else ""
    _display_html(_scrolls("<table style='margin-left:0'><tr><th></th>"
                           "<th style='text-align:right;white-space:nowrap'>the article's A100</th>"
                           f"<th style='text-align:right;white-space:nowrap'>this GPU</th></tr>{body}</table>")
                  + foot)


def timing_caveat(*runs: Any) -> str:
    """A sentence for reveals that use unprofiled timings measured after earlier profiling in this process."""
    unclean = [r.tag for r in runs if getattr(r, "timing", None) is not None and not r.timing.clean]
    if not unclean:
        return ""
    return (f" (The unprofiled timing of {', '.join(unclean)} was measured in a kernel that had already run the "
            "profiler, which can leave a cost behind that slows later calls: read it as an upper bound. Restart the "
            "kernel and run the cell first to get a clean figure.)")


def pre(text: str) -> None:
    """Monospaced text (profiler tables, dispatch chains)."""
    # white-space:pre: a wide profiler table scrolls sideways instead of wrapping its columns into each other
    _display_html(f"<pre style='font-size:85%;line-height:1.25;white-space:pre;overflow-x:auto'>{html.escape(text)}"
                  "</pre>")


def perfetto(path: str | Path, title: str | None = None) -> None:
    """A button that opens the trace in ui.perfetto.dev, and its path for drag and drop."""
    _display_html(_perfetto.button_html(path, title))


def figure_text(fig) -> str:
    """Every word on a figure (titles, axis labels, tick labels, legends, annotations), in reading order.

    Shown as the figure's plain-text form: what a screen reader or a text-only
    front end gets, and what the series' leak check reads.
    """
    import matplotlib.text as mtext

    parts = []
    if getattr(fig, "_suptitle", None) is not None:
        parts.append(fig._suptitle.get_text())
    for ax in fig.axes:
        texts = [ax.title.get_text(), ax.get_xlabel(), ax.get_ylabel()]
        texts += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
        texts += [c.get_text() for c in ax.get_children() if isinstance(c, mtext.Text) and c.get_text()]
        parts += [t for t in texts if t and t.strip()]
    return "Figure: " + "; ".join(dict.fromkeys(" ".join(p.split()) for p in parts))


def display_figure(fig) -> None:
    """Show a matplotlib figure once (and close it, so it is not drawn a second time), with its words as text."""
    import io

    from IPython.display import display
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")
    display({"image/png": small_png(buf.getvalue()), "text/plain": figure_text(fig)}, raw=True)
    plt.close(fig)


#: colours a figure keeps in the notebook: the series' figures use a few dozen, and antialiased edges the rest
PNG_COLOURS = 256


def small_png(png: bytes) -> bytes:
    """``png`` with a palette of :data:`PNG_COLOURS` colours: the same picture at about a third of the bytes.

    A notebook keeps every figure as base64 text; full-colour PNGs made notebook 17 over 2 MB once saved
    (its 18 figures: 1.27 MB, 0.35 MB with a palette, 36 ms each). Where Pillow cannot read the image, the
    original is kept.
    """
    import io

    try:
        from PIL import Image

        im = Image.open(io.BytesIO(png)).convert("RGBA")
        flat = Image.new("RGBA", im.size, (255, 255, 255, 255))  # the figure's own white, without an alpha channel
        flat.alpha_composite(im)
        out = io.BytesIO()
        flat.convert("RGB").quantize(PNG_COLOURS, method=Image.Quantize.FASTOCTREE).save(out, "PNG")
    except Exception:  # noqa: BLE001 - a smaller picture is a nicety: never lose the figure over it
        return png
    small = out.getvalue()
    return small if len(small) < len(png) else png
