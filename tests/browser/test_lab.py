"""Notebook 01 in a real browser: the prediction widget and the Perfetto button.

JupyterLab serves ``notebooks/`` in recorded mode; headless Chromium opens
notebook 01, runs every cell from the Run menu, and then does what a learner
does: reads the first question (no answer shown yet), picks an answer, locks
it in, and sees the reveal. Then it clicks "Open ... in Perfetto" and checks
that the page opens https://ui.perfetto.dev and hands it the trace. The page
has no internet, so the browser answers requests for ui.perfetto.dev with a
stand-in page that does what the real UI does with a page that opens it:
answer PING with PONG, and take the posted trace (gzipped: the stand-in
inflates it, and the test compares the result with the trace file's JSON).

Screenshots of the widget before and after the reveal go to ``screenshots/``
(git-ignored), with ``console.log`` (the page's console errors and failed
requests) and, when the test fails, ``failure.png``.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest

from helpers.lesson import perfetto

NOTEBOOK = "01_setting_up_the_profiler.ipynb"
QUESTION = "01.steps"  # the first ask() in notebook 01
ANSWER = "3: #2 to #4"  # the right answer: wait=1, warmup=1, active=3 keeps steps #2 to #4
VERDICTS = re.compile(r"Your prediction held|Not what the (trace|timing) shows")
PERFETTO = "https://ui.perfetto.dev"

KERNEL_START_MS = 90_000  # a cold kernel imports torch: seconds, more on a busy machine
RUN_ALL_MS = 120_000
STEP_MS = 20_000

FAKE_PERFETTO = """<!doctype html><title>Perfetto UI (test stand-in)</title>
<script>
// What Perfetto's trace processor does with a posted buffer that starts with gzip's magic bytes: inflate it.
// window.received is set once that is done (or has failed), with the text that came out.
window.received = null; window.pings = 0;
window.addEventListener("message", function (e) {
  if (e.data === "PING") { window.pings++; e.source.postMessage("PONG", "*"); return; }
  if (e.data && e.data.perfetto) {
    var p = e.data.perfetto;
    var got = {origin: e.origin, title: p.title, fileName: p.fileName,
               isArrayBuffer: p.buffer instanceof ArrayBuffer, sentBytes: p.buffer ? p.buffer.byteLength : -1};
    var head = new Uint8Array(p.buffer, 0, 2);
    got.gzip = head[0] === 0x1f && head[1] === 0x8b;
    new Response(new Blob([p.buffer]).stream().pipeThrough(new DecompressionStream("gzip"))).text().then(
      function (text) { got.text = text; window.received = got; document.title = "received " + p.fileName; },
      function (err) { got.error = String(err); window.received = got; });
  }
});
</script><p>stand-in for ui.perfetto.dev</p>"""

# Polled in the page after Run All: "done" when every code cell shows an execution count, "stopped"
# when nothing runs any more but some cell never ran (a cell raised, and Run All stops there).
RUN_STATE = r"""() => {
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => !p.classList.contains('lm-mod-hidden'));
  if (!panel) return null;
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent.trim());
  if (prompts.length && prompts.every(t => /^\[\d+\]:$/.test(t))) return 'done';
  if (prompts.some(t => t === '[ ]:') && !prompts.some(t => t === '[*]:')) return 'stopped';
  return null;
}"""


def _shot(locator, path: Path) -> Path:
    """A screenshot of one region of the page (Playwright scrolls it into view first)."""
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(path), animations="disabled")
    return path


@contextlib.contextmanager
def _open_page(browser, screenshots: Path, viewport: dict | None = None):
    """A fresh browser context and page; on failure, a screenshot of what the page showed. The page's
    console errors and failed requests go to ``console.log`` either way."""
    (screenshots / "failure.png").unlink(missing_ok=True)
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 1000})
    context.set_default_timeout(STEP_MS)
    page = context.new_page()
    log: list[str] = []
    page.on("pageerror", lambda e: log.append(f"pageerror: {e}"))
    page.on("console", lambda m: log.append(f"console.{m.type}: {m.text} ({m.location.get('url', '')})")
            if m.type == "error" else None)
    context.on("requestfailed", lambda r: log.append(f"requestfailed: {r.url} ({r.failure})"))
    page.log = log
    try:
        yield page
    except BaseException:
        try:
            page.screenshot(path=str(screenshots / "failure.png"))
        except Exception as e:  # the page may be gone: the report says why the test failed
            log.append(f"(no failure screenshot: {e})")
        raise
    finally:
        (screenshots / "console.log").write_text("".join(line + "\n" for line in log))
        context.close()


def test_notebook_01_predict_then_reveal_and_perfetto(chromium, lab, screenshots):
    browser = chromium.launch()  # first: no point in starting JupyterLab without a browser
    lab.start()
    with _open_page(browser, screenshots) as page:
        _predict_then_reveal_and_perfetto(page, lab, screenshots)


def _run_menu(page, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def _a_locked_answer_stays_locked(page, panel, cells, first: int, lab) -> None:
    """Running the first question's cell again, and again after a kernel restart, shows the journal's answer and
    its reveal, never a fresh choice; the journal keeps the first answer."""
    from playwright.sync_api import expect

    cell = cells.nth(first)
    out = cell.locator(".jp-Cell-outputArea")
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")  # run this cell again, as a learner would
    expect(out.get_by_text(f"Locked: {ANSWER}")).to_be_visible(timeout=STEP_MS)
    expect(out.get_by_role("radio")).to_have_count(0)
    expect(out.get_by_role("button", name="Lock in my prediction")).to_have_count(0)
    expect(out.get_by_role("button", name="Try again")).to_be_visible()
    expect(out.get_by_text("Your prediction held")).to_be_visible()  # its reveal, again

    # Kernel > Restart: the cell alone says to run the cells above first; after them, the answer is still locked.
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Kernel$")).click()
    page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel",
                 has_text=re.compile(r"^Restart Kernel")).first.click()
    page.get_by_role("button", name=re.compile(r"^(Restart|Confirm Kernel Restart)$")).click()
    idle = page.get_by_role("contentinfo").get_by_role("button", name=re.compile(r"\(ipykernel\) \| Idle$"))
    expect(idle).to_be_visible(timeout=KERNEL_START_MS)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(out.get_by_text("Run the cells above first")).to_be_visible(timeout=STEP_MS)
    _run_menu(page, "Run All Above Selected Cell")
    expect(cells.nth(first - 1).locator(".jp-InputArea-prompt")).not_to_have_text(re.compile(r"\[\*\]"),
                                                                                    timeout=RUN_ALL_MS)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(out.get_by_text(f"Locked: {ANSWER}")).to_be_visible(timeout=STEP_MS)
    expect(out.get_by_role("radio")).to_have_count(0)
    entry = json.loads(lab.journal.read_text())[QUESTION]
    assert entry["answer"] == ANSWER and "attempts" not in entry, entry


def _predict_then_reveal_and_perfetto(page, lab, screenshots: Path) -> None:
    from playwright.sync_api import expect

    perfetto_requests: list[str] = []

    def fake_perfetto(route):
        perfetto_requests.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body=FAKE_PERFETTO)

    page.context.route(f"{PERFETTO}/**", fake_perfetto)

    # Open notebook 01 and wait for its kernel. The status bar names the kernel and its state
    # ("Python 3 (ipykernel) | Idle") once the kernel has answered; the toolbar's indicator says
    # idle before there is any kernel, and a Run All clicked then is lost.
    page.goto(lab.page_url(f"lab/tree/{NOTEBOOK}"), timeout=60_000)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator(".jp-Notebook")).to_be_visible(timeout=60_000)
    idle = page.get_by_role("contentinfo").get_by_role("button", name=re.compile(r"\(ipykernel\) \| Idle$"))
    expect(idle).to_be_visible(timeout=KERNEL_START_MS)

    # Run > Run All Cells, then wait for every cell (Run All stops at a cell that raises: say which).
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel",
                 has_text=re.compile(r"^Run All Cells$")).click()
    cells = panel.locator(".jp-CodeCell")
    expect(cells.first.locator(".jp-InputArea-prompt")).not_to_have_text("[ ]:", timeout=STEP_MS)
    state = page.wait_for_function(RUN_STATE, timeout=RUN_ALL_MS).json_value()
    if state != "done":
        errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        pytest.fail("Run All stopped before the last cell:\n" + "\n---\n".join(errors.all_text_contents()),
                    pytrace=False)
    expect(panel.get_by_text(re.compile(r"^RECORDED \(forced by PROFILING_MODE\)"))).to_be_attached()

    # Before any click: notebook 01's questions (two when this was written) wait, nothing is revealed.
    lock = panel.get_by_role("button", name="Lock in my prediction")
    waiting = lock.count()
    assert waiting >= 1, "no prediction widget in notebook 01 after Run All"
    expect(panel.get_by_text(VERDICTS)).to_have_count(0)
    assert QUESTION not in (json.loads(lab.journal.read_text()) if lab.journal.exists() else {})

    # The first question's cell, pinned by position: once locked, its button no longer says "Lock in...".
    first = cells.evaluate_all("cells => cells.findIndex(c => [...c.querySelectorAll('button')]"
                               ".some(b => b.textContent.trim() === 'Lock in my prediction'))")
    widget = cells.nth(first).locator(".jp-Cell-outputArea")
    expect(widget.get_by_text(re.compile(r"^Predict: .*ProfilerStep"))).to_be_visible()
    expect(widget.get_by_role("radio")).to_have_count(4)
    expect(widget.get_by_role("radio", checked=True)).to_have_count(0)
    _shot(widget, screenshots / "prediction-before.png")

    # Pick an answer and lock it in: the reveal appears under the widget, and only there.
    widget.get_by_role("radio", name=ANSWER, exact=True).check()
    widget.get_by_role("button", name="Lock in my prediction").click()
    expect(widget.get_by_text("Your prediction held")).to_be_visible()
    expect(widget.get_by_role("button", name="Locked")).to_be_disabled()
    expect(widget.get_by_role("radio", name=ANSWER, exact=True)).to_be_disabled()
    expect(widget.get_by_text(f"Locked: {ANSWER}")).to_be_visible()
    # the reveal's table, read from the trace the notebook's by-hand loop wrote
    expect(widget.get_by_role("cell", name="ProfilerStep#2", exact=True)).to_be_visible()
    _shot(widget, screenshots / "prediction-after.png")
    expect(panel.get_by_text(VERDICTS)).to_have_count(1)
    expect(lock).to_have_count(waiting - 1)  # the other questions still wait
    entry = json.loads(lab.journal.read_text())[QUESTION]
    assert entry["answer"] == ANSWER and entry["hit"] is True, entry

    # A cell after a question waits for it under Run All: notebook 01's lanes table (which would give
    # 01.gpu-work away) shows a placeholder until that question is locked in, then the table.
    expect(panel.get_by_text("lock in your prediction for 01.gpu-work")).to_have_count(2)  # the table and the lanes
    expect(panel.get_by_role("columnheader", name="events by category")).to_have_count(0)
    gated_q = cells.evaluate_all("cells => cells.findIndex(c => c.textContent.includes('How many kernels, copies and "
                                 "fills') && [...c.querySelectorAll('button')].some(b => b.textContent.trim() === "
                                 "'Lock in my prediction'))")
    assert gated_q >= 0, "01.gpu-work's widget (its prompt) is not in notebook 01"
    gpu_widget = cells.nth(gated_q).locator(".jp-Cell-outputArea")
    gpu_widget.get_by_role("radio", name="2", exact=True).check()
    gpu_widget.get_by_role("button", name="Lock in my prediction").click()
    expect(gpu_widget.get_by_text(VERDICTS)).to_be_visible()
    expect(panel.get_by_role("columnheader", name="events by category")).to_have_count(1)
    expect(panel.get_by_text("lock in your prediction for 01.gpu-work")).to_have_count(0)

    # The scoreboard at the end ran under Run All before any answer: it redrew itself as the answers locked.
    expect(panel.get_by_text(re.compile(r"Your predictions so far: \d+ of the 2 graded held"))).to_be_visible()
    expect(panel.get_by_text("No predictions recorded yet")).to_have_count(0)

    _a_locked_answer_stays_locked(page, panel, cells, first, lab)

    # The Perfetto button: a click opens ui.perfetto.dev, which gets PINGed, answers PONG, and is sent
    # the trace (the stand-in reports what arrived).
    opens_perfetto = re.compile(r"^Open .+ in Perfetto$")
    perfetto_button = panel.get_by_role("button", name=opens_perfetto)
    expect(perfetto_button).to_have_count(1)
    # (a `has=` locator is matched inside each candidate, so it starts from the page, not the panel)
    output = panel.locator(".jp-OutputArea-output").filter(has=page.get_by_role("button", name=opens_perfetto))
    trace_path = Path((output.locator("code").first.text_content() or "").strip())
    assert trace_path.is_file(), f"the Perfetto button names {trace_path}, which is not a file"
    expect(perfetto_button).to_have_text(f"Open {trace_path.name} in Perfetto")
    perfetto_button.scroll_into_view_if_needed()
    with page.expect_popup() as popup_info:
        perfetto_button.click()
    popup = popup_info.value
    popup.wait_for_load_state("domcontentloaded")
    assert perfetto_requests and perfetto_requests[0].rstrip("/") == PERFETTO, perfetto_requests
    assert popup.url.rstrip("/") == PERFETTO, f"the button opened {popup.url}, not {PERFETTO}"
    expect(output.get_by_text(f"Sent to Perfetto: {trace_path.name}")).to_be_visible()
    # the stand-in gunzips what it was sent (asynchronously): it must be the trace's JSON, every byte of it
    popup.wait_for_function("window.received !== null", timeout=STEP_MS)
    received = popup.evaluate("window.received")
    text = received.pop("text", None)
    assert received == {"origin": lab.url, "title": trace_path.name, "fileName": perfetto.sent_name(trace_path.name),
                        "isArrayBuffer": True, "gzip": True, "sentBytes": len(perfetto.payload(trace_path))}, received
    assert text == perfetto.trace_bytes(trace_path).decode("utf-8"), "the stand-in did not get the trace's JSON"

    uncaught = [line for line in page.log if line.startswith("pageerror")]
    assert not uncaught, "uncaught errors in the page:\n" + "\n".join(uncaught)
