"""The 'open in Perfetto' button: what the page embeds (the trace, gzipped), and its JavaScript, run in Node
against a stand-in window."""

from __future__ import annotations

import base64
import gzip
import io
import json
import random
import re
import shutil
import subprocess

import pytest

from helpers.lesson import perfetto

HARNESS = r"""
const sent = [];
const listeners = [];
const statusEl = { textContent: "" };
const fakeTab = {
  postMessage(msg, origin) {
    sent.push({msg, origin});
    // Perfetto answers the first PING with PONG, from its own window.
    if (msg === "PING" && sent.filter(s => s.msg === "PING").length === 2) {
      for (const l of listeners.slice()) l({source: fakeTab, data: "PONG"});
    }
  },
};
global.window = {
  opened: [],
  open(url) { this.opened.push(url); return %(tab)s; },
  addEventListener(type, fn) { if (type === "message") listeners.push(fn); },
  removeEventListener(type, fn) { const i = listeners.indexOf(fn); if (i >= 0) listeners.splice(i, 1); },
};
global.document = { getElementById: () => statusEl };
global.atob = (s) => Buffer.from(s, "base64").toString("binary");
%(script)s
window["openIt"]();
setTimeout(() => {
  const post = sent.find(s => typeof s.msg === "object");
  const buffer = post ? post.msg.perfetto.buffer : null;
  console.log(JSON.stringify({
    opened: window.opened,
    pings: sent.filter(s => s.msg === "PING").map(s => s.origin),
    posted: post ? {origin: post.origin, title: post.msg.perfetto.title, fileName: post.msg.perfetto.fileName,
                    isArrayBuffer: buffer instanceof ArrayBuffer,
                    base64: Buffer.from(buffer).toString("base64")} : null,
    status: statusEl.textContent,
    listenersLeft: listeners.length,
  }));
}, 300);
"""


def run_js(script: str, tab: str = "fakeTab") -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the button's JavaScript cannot be run here")
    out = subprocess.run([node, "-e", HARNESS % {"script": script, "tab": tab}], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def embedded(page: str) -> bytes:
    """The bytes a button's page carries (its script's ``DATA``), base64-decoded."""
    found = re.search(r'var DATA = "([A-Za-z0-9+/=]*)";', page)
    assert found, "no DATA in the button's script"
    return base64.b64decode(found.group(1), validate=True)


def test_click_opens_perfetto_and_posts_the_trace_gzipped(h200):
    path = h200 / "64_bf16_cold_eager.json"
    res = run_js(perfetto.script(perfetto.payload(path), "my title", path.name, "openIt", "status"))
    assert res["opened"] == ["https://ui.perfetto.dev"]
    assert set(res["pings"]) == {"https://ui.perfetto.dev"}
    posted = res["posted"]
    assert posted["origin"] == "https://ui.perfetto.dev" and posted["isArrayBuffer"]
    # the name says what the bytes are: Perfetto's download saves the buffer under it
    assert posted["title"] == "my title" and posted["fileName"] == path.name + ".gz"
    sent = base64.b64decode(posted["base64"])
    assert sent[:2] == b"\x1f\x8b" and gzip.decompress(sent) == path.read_bytes()  # the very bytes of the trace
    assert res["status"] == f"Sent to Perfetto: {path.name}" and res["listenersLeft"] == 0


def test_blocked_popup_says_what_to_do(h200):
    res = run_js(perfetto.script(b"{}", "t", "f.json", "openIt", "status"), tab="null")
    assert res["posted"] is None and "pop-ups" in res["status"]


def test_the_payload_is_the_trace_gzipped_and_the_same_every_time(h200, tmp_path):
    path = h200 / "64_bf16_cold_eager.json"
    data = perfetto.payload(path)
    assert data[:2] == b"\x1f\x8b" and gzip.decompress(data) == path.read_bytes()
    assert len(data) * 5 < path.stat().st_size  # what the notebook keeps: a profiler's JSON shrinks ~13 times
    # no time stamp and no file name in the gzip header: a re-run, or the same trace elsewhere, embeds the same bytes
    assert data[4:8] == b"\0\0\0\0" and not data[3] & 0x08  # MTIME is zero; no FNAME flag (RFC 1952)
    elsewhere = tmp_path / "other-name.json"
    shutil.copyfile(path, elsewhere)
    assert perfetto.payload(path) == data == perfetto.payload(elsewhere)


def test_a_gzipped_trace_is_sent_as_its_own_bytes(h200, tmp_path):
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress((h200 / "64_bf16_cold_eager.json").read_bytes(), mtime=12345))
    assert perfetto.payload(gz) == gz.read_bytes()
    assert perfetto.sent_name(gz.name) == "t.json.gz" and perfetto.sent_name("t.json") == "t.json.gz"


def test_button_html_embeds_the_gzipped_trace_and_names_the_file(h200):
    path = h200 / "64_bf16_cold_eager.json"
    page = perfetto.button_html(path)
    assert "<script>" in page and "onclick=" in page and str(path.resolve()) in page
    assert f"Open {path.name} in Perfetto" in page
    assert gzip.decompress(embedded(page)) == path.read_bytes()


def test_max_embed_counts_the_embedded_bytes_not_the_file(h200, monkeypatch):
    path = h200 / "64_bf16_cold_eager.json"
    size = len(perfetto.payload(path))
    assert size < path.stat().st_size
    monkeypatch.setattr(perfetto, "MAX_EMBED", size)  # exactly the gzipped size: still embedded
    assert gzip.decompress(embedded(perfetto.button_html(path))) == path.read_bytes()
    monkeypatch.setattr(perfetto, "MAX_EMBED", size - 1)  # one byte less: the drag-the-file line
    page = perfetto.button_html(path)
    assert "<script>" not in page and "drag in" in page and str(path.resolve()) in page


def test_a_trace_too_large_even_gzipped_gets_the_drag_line(tmp_path, monkeypatch):
    # random bytes do not compress: their gzip is larger than the file, so over MAX_EMBED
    big = tmp_path / "big.json"
    big.write_bytes(random.Random(0).randbytes(perfetto.MAX_EMBED + 1))
    assert perfetto.payload(big) is None
    page = perfetto.button_html(big)
    assert "<script>" not in page and "too large" in page and "drag in" in page and str(big.resolve()) in page
    # a .json.gz is embedded as it is on disk, so its size on disk is what counts
    gz = tmp_path / "big.json.gz"
    gz.write_bytes(b"\x1f\x8b" + b"\0" * 100)
    monkeypatch.setattr(perfetto, "MAX_EMBED", 101)
    assert perfetto.payload(gz) is None and "<script>" not in perfetto.button_html(gz)


def test_a_huge_trace_is_given_up_once_its_gzip_passes_the_limit():
    class Counted(io.BytesIO):
        taken = 0

        def read(self, n=-1):
            data = super().read(n)
            Counted.taken += len(data)
            return data

    limit = 1 << 20
    stream = Counted(random.Random(1).randbytes(16 * limit))  # incompressible: its gzip passes 1 MB early
    assert perfetto.gzipped(stream, limit) is None
    assert Counted.taken <= limit + 2 * perfetto._CHUNK  # read about as far as the limit, not all 16 MB
    assert gzip.decompress(perfetto.gzipped(io.BytesIO(b"{}"), limit)) == b"{}"


def test_a_missing_trace_says_so(tmp_path):
    page = perfetto.button_html(tmp_path / "not-written-yet.json")
    assert "<script>" not in page and "no trace at" in page and "not-written-yet.json" in page


def test_gzipped_traces_decompress_to_their_json(tmp_path, h200):
    src = (h200 / "64_bf16_cold_eager.json").read_bytes()
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(src))
    assert perfetto.trace_bytes(gz) == src
