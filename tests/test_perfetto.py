"""The 'open in Perfetto' button: its JavaScript, run in Node against a stand-in window."""

from __future__ import annotations

import json
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
  console.log(JSON.stringify({
    opened: window.opened,
    pings: sent.filter(s => s.msg === "PING").map(s => s.origin),
    posted: post ? {origin: post.origin, title: post.msg.perfetto.title, fileName: post.msg.perfetto.fileName,
                    bytes: Buffer.from(post.msg.perfetto.buffer).toString("latin1")} : null,
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


def test_click_opens_perfetto_and_posts_the_trace(h200):
    path = h200 / "64_bf16_cold_eager.json"
    data = path.read_bytes()
    res = run_js(perfetto.script(data, "my title", path.name, "openIt", "status"))
    assert res["opened"] == ["https://ui.perfetto.dev"]
    assert set(res["pings"]) == {"https://ui.perfetto.dev"}
    assert res["posted"]["origin"] == "https://ui.perfetto.dev"
    assert res["posted"]["title"] == "my title" and res["posted"]["fileName"] == path.name
    assert res["posted"]["bytes"].encode("latin1") == data  # the very bytes of the trace
    assert "Sent" in res["status"] and res["listenersLeft"] == 0


def test_blocked_popup_says_what_to_do(h200):
    res = run_js(perfetto.script(b"{}", "t", "f.json", "openIt", "status"), tab="null")
    assert res["posted"] is None and "pop-ups" in res["status"]


def test_button_html_embeds_the_script_and_names_the_file(h200, tmp_path):
    path = h200 / "64_bf16_cold_eager.json"
    html = perfetto.button_html(path)
    assert "<script>" in html and "onclick=" in html and str(path.resolve()) in html
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (perfetto.MAX_EMBED + 1))
    assert "<script>" not in perfetto.button_html(big) and "drag" in perfetto.button_html(big)


def test_gzipped_traces_are_sent_decompressed(tmp_path, h200):
    import gzip

    src = (h200 / "64_bf16_cold_eager.json").read_bytes()
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(src))
    assert perfetto.trace_bytes(gz) == src
