"""Open a local trace in ui.perfetto.dev without uploading it anywhere.

Perfetto's UI accepts a trace posted from the window that opened it: open
the UI from a click (browsers block pop-ups that no click started), send
``PING`` until it answers ``PONG``, then post ``{perfetto: {buffer, title}}``.
The trace travels from this page to that tab and nowhere else. This module
only builds the HTML and JavaScript; it knows nothing about notebooks.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import uuid
from pathlib import Path

ORIGIN = "https://ui.perfetto.dev"
#: traces larger than this are not embedded in the page; drag the file instead
MAX_EMBED = 20 << 20

_SCRIPT = """
(function () {
  var ORIGIN = %(origin)s;
  var DATA = %(data)s;
  var TITLE = %(title)s;
  var FILE = %(file)s;
  function decode() {
    var s = atob(DATA), a = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a.buffer;
  }
  function say(text) {
    var el = document.getElementById(%(status)s);
    if (el) el.textContent = text;
  }
  window[%(fn)s] = function () {
    var win = window.open(ORIGIN);
    if (!win) {
      say("The browser blocked the new tab: allow pop-ups for this page, or drag the file into ui.perfetto.dev.");
      return false;
    }
    say("Opening Perfetto...");
    var tries = 0;
    var timer = setInterval(function () {
      win.postMessage("PING", ORIGIN);
      if (++tries > 200) {
        clearInterval(timer);
        window.removeEventListener("message", onMessage);
        say("Perfetto did not answer (offline?): drag the file into ui.perfetto.dev instead.");
      }
    }, 50);
    function onMessage(evt) {
      if (evt.source !== win || evt.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      win.postMessage({perfetto: {buffer: decode(), title: TITLE, fileName: FILE}}, ORIGIN);
      say("Sent to Perfetto: " + FILE);
    }
    window.addEventListener("message", onMessage);
    return false;
  };
})();
"""


def trace_bytes(path: Path) -> bytes:
    """The trace's JSON text (decompressed if it is gzipped)."""
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def script(data: bytes, title: str, file_name: str, fn: str, status_id: str) -> str:
    """The JavaScript that defines ``window[fn]()``: open Perfetto and post ``data`` to it."""
    return _SCRIPT % {
        "origin": json.dumps(ORIGIN),
        "data": json.dumps(base64.b64encode(data).decode("ascii")),
        "title": json.dumps(title),
        "file": json.dumps(file_name),
        "fn": json.dumps(fn),
        "status": json.dumps(status_id),
    }


def button_html(path: str | Path, title: str | None = None) -> str:
    """A button that opens the trace in Perfetto, and the path for drag and drop."""
    path = Path(path)
    where = f"<code>{html.escape(str(path.resolve()))}</code>"
    size = path.stat().st_size
    if size > MAX_EMBED:
        return (f"<p>This trace is {size / 2**20:.0f} MB, too large to send from the page: open "
                f"<a href='{ORIGIN}' target='_blank'>ui.perfetto.dev</a> and drag in {where}.</p>")
    uid = uuid.uuid4().hex[:10]
    fn, status = f"openPerfetto_{uid}", f"perfetto-status-{uid}"
    js = script(trace_bytes(path), title or path.name, path.name, fn, status)
    return (f"<script>{js}</script>"
            f"<button onclick=\"return window['{fn}']()\" style='padding:4px 10px;cursor:pointer'>"
            f"Open {html.escape(path.name)} in Perfetto</button> "
            f"<span id='{status}' style='color:#555'></span>"
            f"<div style='font-size:90%;color:#555'>Nothing is uploaded: the trace goes from this page to the "
            f"Perfetto tab. Or drag the file into <a href='{ORIGIN}' target='_blank'>ui.perfetto.dev</a>: "
            f"{where}</div>")
