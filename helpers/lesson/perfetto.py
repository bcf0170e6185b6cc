"""Open a local trace in ui.perfetto.dev without uploading it anywhere.

Perfetto's UI accepts a trace posted from the window that opened it: open
the UI from a click (browsers block pop-ups that no click started), send
``PING`` until it answers ``PONG``, then post ``{perfetto: {buffer, title}}``.
The trace travels from this page to that tab and nowhere else. This module
only builds the HTML and JavaScript; it knows nothing about notebooks.

The page carries the trace gzipped (base64 in its script), not as JSON
text: a notebook saved after running keeps every button's trace, and the
series' traces over 1 MB shrink 11 to 14 times. Perfetto opens a gzipped
buffer as it is. Its trace processor tells formats apart by their first
bytes, and gzip's magic bytes (1f 8b) send the trace through a reader that
inflates it and hands the output to a fresh parser, which finds JSON there.
In google/perfetto v58.2, src/trace_processor/importers/archive/
decompressing_trace_reader.cc: ``GzipImporter::Sniff`` checks
``kMagic[] = {'\\x1f', '\\x8b'}`` and makes a ``DecompressingTraceReader``,
whose ``ParseUnowned`` feeds the inflated chunks to an inner
``ForwardingTraceParser``. v50 did the same in
src/trace_processor/util/trace_type.cc (``GuessTraceType``: ``kGzipMagic``
gives ``kGzipTraceType``, parsed by ``GzipTraceParser``), and so did v30's
src/trace_processor/forwarding_trace_parser.cc; Perfetto's own
test test/trace_processor/diff_tests/parser/gzip/tests.py opens a
``.json.gz``. A posted buffer gets there unchanged:
ui/src/frontend/post_message_handler.ts passes it to
``openTraceFromBuffer``, and ui/src/core/load_trace.ts streams it into the
trace processor (``TraceBufferStream``, ``engine.parse``). Perfetto's own
recording page posts gzipped traces the same way, named ``*.gz``
(ui/src/plugins/dev.perfetto.RecordTraceV2/recording_manager.ts).
"""

from __future__ import annotations

import base64
import gzip
import html
import io
import json
import uuid
from pathlib import Path
from typing import BinaryIO

ORIGIN = "https://ui.perfetto.dev"
#: the most bytes of gzipped trace a page embeds (a saved notebook holds them as base64, a third more); a larger
#: trace (about 25 MB of profiler JSON and up) gets the drag-the-file line instead
MAX_EMBED = 2 << 20
#: zlib's default level: within a tenth of level 9's size here, at a quarter of its time
GZIP_LEVEL = 6
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20

_SCRIPT = """
(function () {
  var ORIGIN = %(origin)s;
  var DATA = %(data)s;
  var TITLE = %(title)s;
  var NAME = %(name)s;
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
      say("Sent to Perfetto: " + NAME);
    }
    window.addEventListener("message", onMessage);
    return false;
  };
})();
"""


def trace_bytes(path: Path) -> bytes:
    """The trace's JSON text (decompressed if it is gzipped)."""
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data


def payload(path: str | Path, limit: int | None = None) -> bytes | None:
    """The trace gzipped, as the page embeds it; ``None`` when that is over ``limit`` bytes (:data:`MAX_EMBED`).

    A ``.json.gz`` is its own bytes; JSON text goes through :func:`gzipped`.
    """
    path, limit = Path(path), MAX_EMBED if limit is None else limit
    with path.open("rb") as f:
        head = f.read(len(GZIP_MAGIC))
        if head == GZIP_MAGIC:
            return None if path.stat().st_size > limit else head + f.read()
        f.seek(0)
        return gzipped(f, limit)


def gzipped(stream: BinaryIO, limit: int) -> bytes | None:
    """``stream``'s bytes gzipped, or ``None`` as soon as that passes ``limit`` bytes.

    The time stamp is fixed (``mtime=0``) and no file is named, so the same trace always gives the same bytes.
    The stream is read a chunk at a time and given up once the output is over ``limit``: a huge trace costs
    the compressing of about ``limit`` bytes of output, not of the whole file.
    """
    out = io.BytesIO()  # it has no name, so the gzip header names no file
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as gz:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            gz.write(chunk)
            if out.tell() > limit:
                return None
    return None if out.tell() > limit else out.getvalue()


def sent_name(file_name: str) -> str:
    """The ``fileName`` posted with gzipped bytes (Perfetto's download saves the buffer under it): ``.gz`` added."""
    return file_name if file_name.endswith(".gz") else file_name + ".gz"


def script(data: bytes, title: str, file_name: str, fn: str, status_id: str) -> str:
    """The JavaScript that defines ``window[fn]()``: open Perfetto and post ``data`` (the gzipped trace) to it."""
    return _SCRIPT % {
        "origin": json.dumps(ORIGIN),
        "data": json.dumps(base64.b64encode(data).decode("ascii")),
        "title": json.dumps(title),
        "name": json.dumps(file_name),
        "file": json.dumps(sent_name(file_name)),
        "fn": json.dumps(fn),
        "status": json.dumps(status_id),
    }


def button_html(path: str | Path, title: str | None = None) -> str:
    """A button that opens the trace in Perfetto, and the path for drag and drop."""
    path = Path(path)
    where = f"<code>{html.escape(str(path.resolve()))}</code>"
    if not path.is_file():
        return f"<p>There is no trace at {where} to open in Perfetto: run the cells above that write it.</p>"
    data = payload(path)
    if data is None:
        size = path.stat().st_size
        return (f"<p>This trace is {size / 2**20:.0f} MB, too large to send from the page: open "
                f"<a href='{ORIGIN}' target='_blank'>ui.perfetto.dev</a> and drag in {where}.</p>")
    uid = uuid.uuid4().hex[:10]
    fn, status = f"openPerfetto_{uid}", f"perfetto-status-{uid}"
    js = script(data, title or path.name, path.name, fn, status)
    return (f"<script>{js}</script>"
            f"<button onclick=\"return window['{fn}']()\" style='padding:4px 10px;cursor:pointer'>"
            f"Open {html.escape(path.name)} in Perfetto</button> "
            f"<span id='{status}' style='color:#555'></span>"
            f"<div style='font-size:90%;color:#555'>Nothing is uploaded: the trace goes from this page to the "
            f"Perfetto tab. Or drag the file into <a href='{ORIGIN}' target='_blank'>ui.perfetto.dev</a>: "
            f"{where}</div>")
