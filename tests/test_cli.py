"""The command line: text by default, one JSON object with --json, exit 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, cli


def test_summarize_text(h200):
    out = cli("summarize", h200 / "4096_bf16_warm_eager.json")
    assert out.returncode == 0, out.stderr
    assert "verdict            GPU-bound" in out.stdout
    assert "NVIDIA H200" in out.stdout and "cuLaunchKernelEx" in out.stdout


def test_summarize_json(h200):
    out = cli("summarize", h200 / "64_bf16_cold_eager.json", "--json")
    d = json.loads(out.stdout)
    assert d["verdict"] == "CPU-bound" and d["device"] == "NVIDIA H200"
    assert [s["name"] for s in d["steps"]] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert d["runtime_calls"] == {"cuLaunchKernelEx": 3, "cudaLaunchKernel": 3, "cudaDeviceSynchronize": 1}
    assert sorted(k["kind"] for k in d["kernels"]) == ["elementwise", "gemm"]


def test_every_reference_trace_summarizes(h200, capsys):
    """The command's own code on every reference trace, in this process (a process per trace cost 12 s of the
    suite; the other tests here run the command as a user does, in a process of its own)."""
    from helpers.__main__ import main

    manifest = json.loads((h200 / "manifest.json").read_text())
    traces = sorted(e["trace"] for e in manifest["scenarios"].values() if e.get("status") == "ok")
    assert len(traces) >= 50
    for path in (h200 / name for name in traces):
        assert main(["summarize", str(path), "--json"]) == 0, path.name
        out = capsys.readouterr()
        assert json.loads(out.out)["verdict"] in ("CPU-bound", "GPU-bound"), (path.name, out.err)


def test_not_a_trace_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    out = cli("summarize", bad)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "traceEvents" in out.stderr


def test_the_command_line_does_not_import_torch(h200):
    code = ("import sys, helpers.__main__ as m; m.main(['summarize', %r]); "
            "print('torch' in sys.modules, 'matplotlib' in sys.modules, 'ipywidgets' in sys.modules)"
            % str(h200 / "64_bf16_cold_eager.json"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "False False False"


def test_the_whole_output_arrives_and_a_closed_pipe_is_no_error(h200):
    """The command leaves without tearing down the interpreter (os._exit): what it printed must still all arrive,
    through a pipe too, and a reader that stops early (`| head -1`) must cost no traceback."""
    path = h200 / "block8x256x512_bf16_warm_eager.json"
    whole = cli("diagnose", path)
    assert whole.returncode == 0 and whole.stdout.endswith("\n")
    from helpers.advice.diagnose import diagnose, text
    from helpers.reader.trace import read_trace

    assert whole.stdout == text(diagnose(read_trace(path))) + "\n"
    p = subprocess.Popen([sys.executable, "-m", "helpers", "summarize", str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
    first = p.stdout.readline()
    p.stdout.close()  # as `head -1` does
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0 and first.startswith(b"trace: ") and err == b"", err
