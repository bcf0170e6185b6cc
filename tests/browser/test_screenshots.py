"""Screenshots of notebooks 01, 03 and 12 at 1280x800 for docs/img/, and checks on what the page renders.

``make screenshots`` (``pytest tests/browser -m screenshots``): JupyterLab in
recorded mode, headless Chromium at a 1280x800 viewport, each notebook run
with Run All, every prediction answered by clicking (a choice, or a number
typed, then the lock button) so that every reveal shows. Then, on the
rendered page, not by eye:

* no table cell in an output area wraps its text onto a second line, and no
  table sticks out of its output area unless a container scrolls it;
* a ``<pre>`` in an HTML output keeps its lines (``white-space: pre``) and
  scrolls sideways when it is wider than the output area;
* no two pieces of text in an HTML output overlap (bounding rects of their
  text, compared across text nodes);
* no whole number was locked in as ``3.0``.

A figure that JupyterLab scales down to fit the output area (its words
shrink) is printed as a note, not (yet) a failure.

Figures are images: whether their own words overlap is matplotlib's layout
(``tests/test_figure_layout.py`` checks every figure goes through
``tight_layout`` or constrained layout and is saved with ``bbox_inches="tight"``).

The PNGs go to ``docs/img/`` (committed), each the viewport scrolled to one
output. This test is not part of ``make test-browser`` (it runs three
notebooks, about a minute): it runs only when ``-m screenshots`` is given.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_lab import KERNEL_START_MS, RUN_ALL_MS, RUN_STATE, STEP_MS, _open_page, _run_menu

pytestmark = pytest.mark.screenshots

IMG = ROOT / "docs" / "img"
VIEWPORT = {"width": 1280, "height": 800}
MAX_PNG_BYTES = 300_000
REVEAL_MS = 60_000
LOCK_BUTTONS = re.compile(r"^(Lock in my prediction|Check what I found)$")

#: a number typed for each question answered by a number (any number reveals; these are plausible guesses)
TYPED = {"03.settle": "2", "03.first-step": "2", "12.syncs": "4"}

#: notebook -> [(png name, question id whose reveal holds it, what to scroll to: CSS inside the reveal)]
SHOTS = {
    "01_setting_up_the_profiler.ipynb": [
        ("01-steps.png", "01.steps", None),  # the question, its locked answer, the table of steps
        ("01-table.png", "01.steps", "pre"),  # the profiler table, split by input shape: it scrolls, not wraps
    ],
    "03_schedule_and_warmup.ipynb": [
        ("03-settle.png", "03.settle", "img"),
        ("03-first-step.png", "03.first-step", None),
    ],
    "12_a_training_step.ipynb": [
        ("12-optimizer.png", "12.optimizer", "img"),  # AdamW: launches and GPU time, each on its own axis
        ("12-syncs.png", "12.syncs", "table"),
    ],
}

# A question's box: the widget's VBox (question, field, button row, reveal) holding its prompt.
BOX_OF = "xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' widget-vbox ')][1]"

# Every problem the page shows, as sentences. Only output areas: the notebook's own Markdown is not checked.
LAYOUT_PROBLEMS = r"""() => {
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => !p.classList.contains('lm-mod-hidden'));
  const out = [], notes = [];
  const label = (el) => (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
  const cellNo = (el) => {
    const cells = [...panel.querySelectorAll('.jp-Cell')];
    return cells.indexOf(el.closest('.jp-Cell'));
  };
  const scrollsX = (el, stop) => {
    for (let p = el.parentElement; p && p !== stop.parentElement; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if ((o === 'auto' || o === 'scroll') ) return true;
    }
    return false;
  };
  // lines a piece of text takes: distinct line boxes among its client rects
  const lines = (node) => {
    const r = document.createRange();
    r.selectNodeContents(node);
    const rects = [...r.getClientRects()].filter(x => x.width > 0.5 && x.height > 0.5);
    const tops = [];
    for (const x of rects.sort((a, b) => a.top - b.top)) {
      if (!tops.length || x.top - tops[tops.length - 1].top > 0.6 * Math.min(x.height, tops[tops.length - 1].h))
        tops.push({top: x.top, h: x.height});
    }
    return tops.length;
  };
  for (const area of panel.querySelectorAll('.jp-OutputArea-output')) {
    const box = area.getBoundingClientRect();
    for (const table of area.querySelectorAll('table')) {
      for (const c of table.querySelectorAll('td, th')) {
        if (!c.textContent.trim() || c.closest('.jp-OutputArea-output') !== area) continue;
        const n = lines(c);
        if (n > 1) out.push(`cell ${cellNo(c)}: table cell "${label(c)}" wraps onto ${n} lines`);
      }
      const t = table.getBoundingClientRect();
      if (t.right > box.right + 1 && !scrollsX(table, area))
        out.push(`cell ${cellNo(table)}: a table (${Math.round(t.width)} px) sticks out of its output area ` +
                 `(${Math.round(box.width)} px) and nothing scrolls it: "${label(table)}"`);
    }
    for (const pre of area.querySelectorAll('.jp-RenderedHTMLCommon pre')) {
      const s = getComputedStyle(pre);
      if (s.whiteSpace !== 'pre')
        out.push(`cell ${cellNo(pre)}: a <pre> in an HTML output has white-space ${s.whiteSpace}: its lines wrap`);
      if (pre.scrollWidth > pre.clientWidth + 1 && !(s.overflowX === 'auto' || s.overflowX === 'scroll'))
        out.push(`cell ${cellNo(pre)}: a wide <pre> is clipped: overflow-x is ${s.overflowX}`);
    }
    for (const img of area.querySelectorAll('img')) {
      if (img.naturalWidth && img.getBoundingClientRect().width < img.naturalWidth - 1)
        notes.push(`cell ${cellNo(img)}: a figure (${img.naturalWidth} px wide) is scaled down to ` +
                   `${Math.round(img.getBoundingClientRect().width)} px: its words shrink`);
    }
    // overlapping text: the rects of each text node, against every other text node's in this output
    const walker = document.createTreeWalker(area, NodeFilter.SHOW_TEXT,
      {acceptNode: n => n.textContent.trim() ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT});
    const boxes = [];
    for (let n = walker.nextNode(), i = 0; n; n = walker.nextNode(), i++) {
      const el = n.parentElement;
      const r = document.createRange();
      r.selectNodeContents(n);
      for (const x of r.getClientRects())
        if (x.width > 0.5 && x.height > 0.5) boxes.push({i, x, text: n.textContent.trim().slice(0, 40)});
    }
    const overlaps = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2 &&
                               Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 3;
    let found = 0;
    for (let a = 0; a < boxes.length && found < 3; a++)
      for (let b = a + 1; b < boxes.length && found < 3; b++)
        if (boxes[a].i !== boxes[b].i && overlaps(boxes[a].x, boxes[b].x)) {
          found++;
          out.push(`cell ${cellNo(area)}: text "${boxes[a].text}" overlaps "${boxes[b].text}"`);
        }
  }
  for (const el of panel.querySelectorAll('.jp-OutputArea-output i')) {
    const m = el.textContent.match(/Locked: (-?\d+\.0)\b(?!\d)/);
    if (m) out.push(`cell ${cellNo(el)}: a whole number locked in as ${m[1]}`);
  }
  return {problems: out, notes};
}"""


def _run_all(page, lab, notebook: str):
    from playwright.sync_api import expect

    page.goto(lab.page_url(f"lab/tree/{notebook}"), timeout=60_000)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator(".jp-Notebook")).to_be_visible(timeout=60_000)
    # the status bar speaks of this notebook (the workspace also reopens the notebooks run before) and its kernel
    status = page.get_by_role("contentinfo")
    expect(status).to_contain_text(notebook, timeout=60_000)
    expect(status.get_by_role("button", name=re.compile(r"\(ipykernel\) \| Idle$"))).to_be_visible(
        timeout=KERNEL_START_MS)
    page.wait_for_timeout(1000)  # a kernel that has just said idle once can still be starting its session
    expect(status.get_by_role("button", name=re.compile(r"\(ipykernel\) \| Idle$"))).to_be_visible(
        timeout=KERNEL_START_MS)
    _run_menu(page, "Run All Cells")
    cells = panel.locator(".jp-CodeCell")
    expect(cells.first.locator(".jp-InputArea-prompt")).not_to_have_text("[ ]:", timeout=STEP_MS)
    state = page.wait_for_function(RUN_STATE, timeout=RUN_ALL_MS * 2).json_value()
    if state != "done":
        errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        pytest.fail(f"{notebook}: Run All stopped before the last cell:\n"
                    + "\n---\n".join(errors.all_text_contents()), pytrace=False)
    return panel


def _answer_every_question(page, panel, notebook: str) -> int:
    """Click through every question in page order: a choice (the first) or a typed number, then the lock button,
    and wait for its reveal (its "Try again" button). Cells waiting on a question fill in as it is answered."""
    answered = 0
    buttons = panel.get_by_role("button", name=LOCK_BUTTONS)
    while buttons.count():
        button = buttons.first  # (the next one once this one says "Locked": pin its box first)
        box = button.locator(BOX_OF)
        pinned = box.element_handle()
        prompt = box.locator(".widget-html-content").first.text_content() or ""
        radios = box.get_by_role("radio")
        if radios.count():
            radios.first.check()
        else:
            qid = next((q for q, _ in _PROMPTS.get(notebook, []) if _ in prompt), "")
            box.get_by_role("textbox").fill(TYPED.get(qid, "3"))
        button.scroll_into_view_if_needed()
        button.click()
        page.wait_for_function("b => [...b.querySelectorAll('button')].some(x => x.textContent.trim() === "
                               "'Try again')", arg=pinned, timeout=REVEAL_MS)
        answered += 1
        assert answered < 40, f"{notebook}: the lock buttons never run out"
    return answered


def _prompts() -> dict[str, list[tuple[str, str]]]:
    """Each shot's question id and a piece of its prompt, read from the lesson modules' ask() calls."""
    import ast

    found: dict[str, list[tuple[str, str]]] = {}
    for nb in SHOTS:
        mod = ROOT / "helpers" / "lessons" / f"n{nb[:-6]}.py"
        for node in ast.walk(ast.parse(mod.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "ask" and len(node.args) >= 2
                    and isinstance(node.args[0], ast.Constant)):
                p = node.args[1]
                text = p.value if isinstance(p, ast.Constant) else next(
                    (v.value for v in getattr(p, "values", []) if isinstance(v, ast.Constant)), "")
                if isinstance(text, str) and text.split("{")[0].strip():
                    # the longest literal piece of the prompt (an f-string's first constant part is enough)
                    found.setdefault(nb, []).append((node.args[0].value, text.split("{")[0][:50]))
    return found


_PROMPTS = _prompts()


def _box_of(panel, notebook: str, qid: str):
    piece = dict(_PROMPTS[notebook]).get(qid)
    assert piece, f"{qid}: no ask() with that id in the lesson module of {notebook}"
    question = panel.locator(".widget-html-content", has_text=piece).first
    return question.locator(BOX_OF)


def _scroll_to(target) -> None:
    """Scroll the notebook so that ``target`` starts near the top of the viewport (a little context above it)."""
    target.evaluate("""el => {
      el.scrollIntoView({block: 'start'});
      for (let p = el.parentElement; p; p = p.parentElement) {
        const o = getComputedStyle(p).overflowY;
        if ((o === 'auto' || o === 'scroll') && p.scrollHeight > p.clientHeight) { p.scrollBy(0, -48); break; }
      }
    }""")


def _save(page, path: Path) -> int:
    page.mouse.move(0, VIEWPORT["height"] - 1)  # no hover highlight on what the shot shows
    # images decoded and the scrolled area repainted: a shot taken at once can show half of an old paint
    page.evaluate("() => Promise.all([...document.images].map(i => i.decode().catch(() => null)))")
    page.wait_for_timeout(1000)
    page.screenshot(path=str(path), animations="disabled", caret="hide")
    size = path.stat().st_size
    if size > MAX_PNG_BYTES:  # a palette PNG of the same pixels: the page has few colours
        from PIL import Image

        Image.open(path).convert("RGB").quantize(colors=256).save(path, optimize=True)
        size = path.stat().st_size
    return size


@pytest.mark.parametrize("notebook", list(SHOTS))
def test_screenshots_and_layout(chromium, lab, screenshots, notebook):
    browser = chromium.launch()
    lab.start()
    IMG.mkdir(parents=True, exist_ok=True)
    with _open_page(browser, screenshots, viewport=VIEWPORT) as page:
        panel = _run_all(page, lab, notebook)
        assert _answer_every_question(page, panel, notebook) >= 1, f"{notebook}: no question to answer"
        found = page.evaluate(LAYOUT_PROBLEMS)
        problems = found["problems"]
        sizes = {}
        for name, qid, inside in SHOTS[notebook]:
            box = _box_of(panel, notebook, qid)
            target = box if inside is None else box.locator(inside).first
            assert target.count(), f"{name}: nothing matches {inside!r} in the reveal of {qid}"
            _scroll_to(target)
            sizes[name] = _save(page, IMG / name)
        print({k: f"{v / 1e3:.0f} kB" for k, v in sizes.items()})
        print("\n".join(dict.fromkeys(found["notes"])))  # shown with -s or on failure: not (yet) a failure
        assert not problems, f"{notebook} at 1280x800:\n" + "\n".join(problems)
        big = {k: v for k, v in sizes.items() if v > MAX_PNG_BYTES}
        assert not big, f"screenshots over {MAX_PNG_BYTES} bytes: {big}"
