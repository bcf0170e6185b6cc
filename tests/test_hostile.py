"""Hostile input through the real command line: a correct answer, or one line and exit status 2.

Never a traceback, a crash (a segmentation fault is exit status 139) or a
hang; every ``--json`` output parses with a strict parser; and the result does
not depend on which JSON parser is installed.
"""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROCM, ROOT, SMALL, cli, columns, ext, raw_doc, reader_without_msgspec
from helpers.reader import source as trace_source
from helpers.reader.trace import read_trace


def strict(text: str):
    """json.loads that refuses NaN and Infinity, as every other JSON parser does."""
    def refuse(word: str):
        raise ValueError(f"{word} is not JSON")
    return json.loads(text, parse_constant=refuse)


def ok(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 0, run.stderr
    assert run.stderr == "" and "Traceback" not in run.stdout
    return run.stdout


def refused(run: subprocess.CompletedProcess, *words: str) -> str:
    """Exit status 2, nothing on stdout, one line on stderr holding ``words``."""
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert run.stdout == ""
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run.stderr[-2000:]
    assert all(w in run.stderr for w in words), run.stderr
    return run.stderr


def write(tmp_path: Path, doc, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path


def _x(name: str, cat: str, ts: float, dur: float, pid=1, tid=1, **args) -> dict:
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


# --- a trace with GPU events and no CPU time ----------------------------------------------


def test_gpu_work_and_no_cpu_time_gives_strict_json(tmp_path):
    path = write(tmp_path, {"traceEvents": [
        _x("gemm", "kernel", 10, 5, pid=0, tid=7, correlation=1),
        _x("gemm", "kernel", 20, 5, pid=0, tid=7, correlation=2, **{"registers per thread": 32})]})
    out = strict(ok(cli("summarize", path, "--json")))
    assert out["balance"]["self_cpu_us"] == 0 and out["balance"]["ratio"] is None
    assert out["verdict"] == "GPU-bound"
    strict(ok(cli("diagnose", path, "--json")))
    assert "no CPU time recorded" in ok(cli("summarize", path))


def test_infinite_numbers_in_args_give_strict_json(tmp_path):
    """1e999 is a valid JSON number that no float holds: the json module reads it as inf."""
    data = json.dumps({"traceEvents": [_x("k", "kernel", 10, 5, pid=0, tid=7, correlation=1, occ="OCC")]})
    path = write(tmp_path, data.replace('"occ": "OCC"', '"est. achieved occupancy %": 1e999').encode())
    out = strict(ok(cli("summarize", path, "--json")))
    assert out["kernels"][0]["resources"]["est_achieved_occupancy_pct"] is None


# --- names the terminal cannot print ----------------------------------------------------------

UNPRINTABLE_ENVS = {  # and the encoding the output must then be in
    "ascii": ({"PYTHONIOENCODING": "ascii"}, "ascii"),
    "cp1252 (Windows, redirected)": ({"PYTHONIOENCODING": "cp1252"}, "cp1252"),
    "C locale": ({"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""},
                 "ascii"),
}


@pytest.fixture
def unprintable(tmp_path) -> Path:
    events = [_x("ProfilerStep#1", "user_annotation", 0, 100), _x("注意力 🔥", "user_annotation", 1, 90),
              _x("aten::mm", "cpu_op", 2, 50), _x("cudaLaunchKernel", "cuda_runtime", 3, 5, correlation=1),
              _x("kernel_\ud800_\u00e9", "kernel", 10, 40, pid=0, tid=7, correlation=1)]
    return write(tmp_path, json.dumps({"traceEvents": events}).encode())  # "\ud800": a lone surrogate, escaped


@pytest.mark.parametrize("env", list(UNPRINTABLE_ENVS), ids=list(UNPRINTABLE_ENVS))
def test_names_the_terminal_cannot_print(unprintable, env):
    e, encoding = UNPRINTABLE_ENVS[env]
    text = ok(cli("summarize", unprintable, env=e, encoding=encoding))  # decoding fails if it is not that encoding
    assert "kernel_\\ud800_" in text and "GPU work by name" in text  # what cannot be printed comes out escaped
    out = strict(ok(cli("summarize", unprintable, "--json", env=e, encoding="ascii")))
    assert out["kernels"][0]["name"] == "kernel_\ud800_\u00e9"
    ok(cli("diagnose", unprintable, env=e, encoding=encoding))
    strict(ok(cli("diagnose", unprintable, "--json", env=e, encoding="ascii")))


@pytest.mark.parametrize("env", list(UNPRINTABLE_ENVS), ids=list(UNPRINTABLE_ENVS))
def test_an_error_about_an_unprintable_name(tmp_path, env):
    path = write(tmp_path, {"traceEvents": [_x("注意力 🔥", "cpu_op", "soon", 1)]}, name="注意力.json")
    e, encoding = UNPRINTABLE_ENVS[env]
    refused(cli("summarize", path, env=e, encoding=encoding), "event #0", "'ts' of 'soon'")


# --- nested too deeply --------------------------------------------------------------------------

DEEP = 100_000


def _deep(depth: int, objects: bool = False) -> bytes:
    if objects:
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b"[" * depth + b"]" * depth


NESTING = {
    "in the event list": b'{"traceEvents": [' + _deep(DEEP) + b"]}",
    "as the event list": b'{"traceEvents": ' + _deep(DEEP) + b"}",
    "in an event's args": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
                          b'"ts": 1, "dur": 1, "args": {"grid": ' + _deep(DEEP) + b"}}]}",
    "objects in an event's name": b'{"traceEvents": [{"ph": "X", "name": ' + _deep(DEEP, True) + b"}]}",
    "in the header": b'{"deviceProperties": ' + _deep(DEEP, True) + b', "traceEvents": []}',
    "after the events": b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "pid": 1, "tid": 1}], "x": '
                        + _deep(DEEP) + b"}",
    "a bare list": _deep(DEEP),
    "a million deep": b'{"traceEvents": [' + _deep(1_000_000) + b"]}",
}


@pytest.mark.parametrize("where", list(NESTING), ids=list(NESTING))
def test_nested_too_deeply(tmp_path, where):
    path = write(tmp_path, NESTING[where])
    refused(cli("summarize", path), "nested too deeply")
    refused(cli("diagnose", path), "nested too deeply")


def test_no_orjson_is_imported(h200):
    """orjson before 3.9.15 crashes on deep nesting (exit 139): the reader does not use orjson at all."""
    code = ("import sys, helpers.__main__ as m; m.main(['summarize', %r, '--json']); "
            "print('orjson' in sys.modules, 'msgspec' in sys.modules)" % str(h200 / "64_bf16_cold_eager.json"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "False True"


# --- pipes ----------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_a_named_pipe_that_nothing_writes_to(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    t = time.monotonic()
    refused(cli("summarize", fifo, timeout=60), "named pipe", "start the program that writes the trace first")
    assert time.monotonic() - t < trace_source.FIFO_WAIT_S + 30


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_a_named_pipe_with_a_writer(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)

    def writer() -> None:
        with open(fifo, "wb") as f:  # blocks until the reader opens it, as `cat t.json > fifo &` does
            f.write(SMALL.read_bytes())

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    assert "events: 32" in ok(cli("summarize", fifo))
    th.join(10)


def test_process_substitution_keeps_working(tmp_path):
    gz = tmp_path / "t.json.gz"
    subprocess.run(["gzip", "-c", str(SMALL)], stdout=gz.open("wb"), check=True)
    for source in (f"<(zcat {gz})", f"<(cat {gz})", f"<(sleep {trace_source.FIFO_WAIT_S + 1}; cat {SMALL})"):
        run = subprocess.run(["bash", "-c", f"{sys.executable} -m helpers summarize --json {source}"],
                             capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert strict(ok(run))["events"] == 32, source


# --- trailing commas ---------------------------------------------------------------------------------

EVENT = b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"x": 1}}'
TRAILING = {
    "after the last event": b'{"traceEvents": [' + EVENT + b",\n  ]}",
    "after the last field": b'{"traceEvents": [' + EVENT + b'], "traceName": "t",\n}',
    "in an event's args": b'{"traceEvents": [' + EVENT.replace(b'"x": 1', b'"x": 1, ') + b"]}",
    "in the header": b'{"deviceProperties": [{"name": "H200",}], "traceEvents": [' + EVENT + b"]}",
}


@pytest.mark.parametrize("where", list(TRAILING), ids=list(TRAILING))
def test_a_trailing_comma_is_called_one(tmp_path, where):
    data = TRAILING[where]
    path = write(tmp_path, data)
    err = refused(cli("summarize", path), "trailing comma", "at byte ")
    at = int(err.rsplit("at byte ", 1)[1])
    assert data[at:at + 1] == b","  # the byte it names is the comma


def test_a_trailing_comma_in_a_large_trace(tmp_path, big_trace):
    """Deep inside a streamed trace in torch's layout: a comma after the last member of an event's args."""
    data = big_trace.read_bytes()
    k = data.index(b'"args": {', len(data) // 2)
    end = data.index(b"\n    }", k)  # where torch closes the args object
    path = write(tmp_path, data[:end] + b"," + data[end:])
    err = refused(cli("summarize", path), "trailing comma")
    assert int(err.rsplit("at byte ", 1)[1]) == end


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from grow import grow

    path = tmp_path_factory.mktemp("big") / "big.json"
    grow(ROOT / "traces" / "reference" / "nvidia-h200" / "attn-sdpa-math1024_bf16_warm_eager.json", path, 4 << 20)
    return path


# --- --top -----------------------------------------------------------------------------------------


@pytest.fixture
def long_trace(tmp_path) -> Path:
    """1,000 steps, each with a buffer request and a synchronize: tables that --top must keep short."""
    events = []
    for k in range(1000):
        t = 100.0 * k
        events += [_x(f"ProfilerStep#{k}", "user_annotation", t, 90), _x("aten::mm", "cpu_op", t + 1, 20),
                   _x("cudaLaunchKernel", "cuda_runtime", t + 2, 5, correlation=k + 1),
                   _x("gemm", "kernel", t + 10, 30, pid=0, tid=7, correlation=k + 1),
                   _x("Activity Buffer Request", "overhead", t + 40, 2, pid=-1, tid=0),
                   _x("cudaDeviceSynchronize", "cuda_runtime", t + 50, 30)]
    return write(tmp_path, {"traceEvents": events})


def test_top_limits_every_table(long_trace):
    text = ok(cli("summarize", long_trace, "--top", "5"))
    assert len(text.splitlines()) < 60
    assert "profiler steps (first 5 of 1000):" in text
    assert text.count("Activity Buffer Request on ") == 5 and "... and 995 more buffer requests" in text
    full = ok(cli("summarize", long_trace, "--top", "2000"))
    assert full.count("ProfilerStep#") == 1000 and full.count("Activity Buffer Request on ") == 1000
    assert "ProfilerStep#" not in ok(cli("summarize", long_trace, "--top", "0"))


@pytest.mark.parametrize("top", ["-1", "-100", "ten", "1.5", ""])
def test_top_must_be_a_number_of_rows(long_trace, top):
    refused(cli("summarize", long_trace, "--top", top), "--top", "0 or more", "--help")


def test_usage_errors_are_one_line(long_trace):
    refused(cli("summarize"), "trace", "--help")
    refused(cli("summarize", long_trace, "--color"), "--color", "--help")
    refused(cli("explain", long_trace), "explain", "--help")


# --- copies whose size the trace does not hold -------------------------------------------------------


def test_copy_sizes_that_the_trace_does_not_hold(tmp_path):
    """ROCm puts a copy's size on the runtime call ("size": "2560"), not on the copy: unknown, not 0 B."""
    path = write(tmp_path, {"traceEvents": [
        _x("hipMemcpyWithStream", "cuda_runtime", 1, 60, correlation=117, size="2560", kind="1"),
        _x("Memcpy HtoD (Host -> Device)", "gpu_memcpy", 20, 22, pid=2, tid=0, correlation=117, kind="HtoD"),
        _x("cudaMemcpyAsync", "cuda_runtime", 100, 5, correlation=118),
        _x("Memcpy DtoH (Device -> Host)", "gpu_memcpy", 110, 9, pid=2, tid=0, correlation=118, bytes=4096)]})
    text = ok(cli("summarize", path))
    assert "Memcpy HtoD (Host -> Device)     size unknown (not in the trace)" in text
    assert "Memcpy DtoH (Device -> Host)     4.0 KiB in all" in text and "0 B" not in text
    out = strict(ok(cli("summarize", path, "--json")))
    assert {c["name"]: c["bytes"] for c in out["memcpy"]} == {"Memcpy HtoD (Host -> Device)": None,
                                                             "Memcpy DtoH (Device -> Host)": 4096}


def test_rocm_copies_say_their_size_is_unknown():
    path = ext(ROCM)
    assert "size unknown" in ok(cli("summarize", path))
    assert all(c["bytes"] is None for c in strict(ok(cli("summarize", path, "--json")))["memcpy"])


# --- one behaviour, whichever parser -----------------------------------------------------------------

ENCODINGS = {
    "UTF-8 with a BOM": lambda s: codecs.BOM_UTF8 + s.encode("utf-8"),
    "UTF-16 LE with a BOM": lambda s: s.encode("utf-16"),
    "UTF-16 BE": lambda s: s.encode("utf-16-be"),
    "UTF-32 LE": lambda s: s.encode("utf-32-le"),
}


@pytest.mark.parametrize("encoding", list(ENCODINGS), ids=list(ENCODINGS))
def test_encodings_that_the_json_module_reads(tmp_path, encoding):
    text = SMALL.read_text(encoding="utf-8").replace("thread 0", "thread \u00e9\u6ce8")
    plain = write(tmp_path, text.encode(), "plain.json")
    path = write(tmp_path, ENCODINGS[encoding](text))
    assert json.loads(path.read_bytes()) == json.loads(plain.read_bytes())  # the json module reads both
    want = columns(read_trace(plain))
    for got in (read_trace(path), read_trace(path, parser="json"), reader_without_msgspec().read_trace(path)):
        assert columns(got)[:-1] == want[:-1]
    a = strict(ok(cli("summarize", path, "--json")))
    b = strict(ok(cli("summarize", plain, "--json")))
    assert {**a, "path": None} == {**b, "path": None}


def test_integers_beyond_64_bits(tmp_path):
    """The json module reads any integer; so does the reader, with or without msgspec."""
    big = 2 ** 70
    path = write(tmp_path, {"schemaVersion": big, "traceEvents": [
        _x("cudaLaunchKernel", "cuda_runtime", big, 5, correlation=big),
        _x("cudaLaunchKernel", "cuda_runtime", big + 10, 5, correlation=2 ** 63 + 1),
        _x("Memset (Device)", "gpu_memset", big + 20, 5, pid=0, tid=7, correlation=7, bytes=big)]})
    want = columns(read_trace(path, parser="json"))
    assert columns(read_trace(path)) == want == columns(reader_without_msgspec().read_trace(path))
    t = read_trace(path)
    assert t.meta["schemaVersion"] == big and t.args[2]["bytes"] == big and list(t.corr) == [-1, -1, 7]
    out = strict(ok(cli("summarize", path, "--json")))
    assert out["events"] == 3


@pytest.mark.parametrize("doc", [
    b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "pid": 1, "tid": 1, "ts": 2}]}',  # a key twice: the last
    b'{"traceEvents": [{"ph": "X", "name": "\\ud800", "ts": 1, "pid": 1, "tid": 1}]}',  # a lone surrogate
    b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "pid": 1.5, "tid": null, "cat": "Kernel"}]}',
    b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "pid": 1, "tid": 1, "args": null}]}',
    b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "pid": 1, "tid": 1, "args": {"correlation": true}}]}',
], ids=["duplicate key", "lone surrogate", "odd pid and tid", "null args", "boolean correlation"])
def test_odd_but_valid_json_reads_the_same_with_either_parser(tmp_path, doc):
    path = write(tmp_path, doc)
    assert columns(read_trace(path)) == columns(read_trace(path, parser="json")) \
        == columns(reader_without_msgspec().read_trace(path))
    ok(cli("summarize", path))
    assert raw_doc(path)  # and the json module reads it too


# --- durations no clock produced ------------------------------------------------------------------


def _with_duration(dur: float, n: int = 3, window: float = 1000.0) -> dict:
    """Steps of an op, a launch and its kernel over ``window`` us; the second kernel lasts ``dur``."""
    events = []
    for k in range(n):
        t = window * k / max(n - 1, 1)
        events += [_x("aten::mm", "cpu_op", t, 8, **{"Sequence number": k}),
                   _x("cudaLaunchKernel", "cuda_runtime", t + 1, 2, correlation=k + 1),
                   _x(f"gemm_{k}", "kernel", t + 4, dur if k == 1 else 3, pid=0, tid=7, correlation=k + 1,
                      grid=[k, 1, 1])]
    return {"traceEvents": events}


def test_a_duration_no_clock_gives_is_set_aside(tmp_path):
    """The issue's kernel of 1e30 us: left out of every total, with one line that says so; no verdict from it."""
    path = write(tmp_path, _with_duration(1e30))
    run = cli("summarize", path, "--json")
    assert run.returncode == 0 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith(f"note: {path}: set aside 1 event whose duration no profiler's clock gives "
                                 "(up to 1e+30 us; the limit is 1e+09 us, 1,000 times the trace's window")
    out = strict(run.stdout)
    assert out["set_aside"]["events"] == 1 and out["events"] == 8
    assert out["balance"]["device_us"] == 6 and [k["name"] for k in out["kernels"]] == ["gemm_0", "gemm_2"]
    text = cli("summarize", path)
    assert "999999" not in text.stdout and "GPU time               6.0 us" in text.stdout
    diag = cli("diagnose", path, "--json")
    assert diag.stderr == run.stderr and "999999" not in diag.stdout
    t = read_trace(path)
    # the events after it keep their own args and sequence numbers, renumbered with them
    assert [t.args[i]["grid"] for i in t.indices(("kernel",))] == [[0, 1, 1], [2, 1, 1]]
    assert [t.sequence_of(i)[0] for i in t.indices(("cpu_op",))] == [0, 1, 2]
    assert [t.launch_of(i) for i in t.indices(("kernel",))] == [1, 6]


@pytest.mark.parametrize("dur, window, kept", [
    (9e12, 1000.0, False),  # 104 days in a trace of 1 ms: under the clock's limit, past the trace's
    (5e8, 1000.0, True),  # 500 s in a trace of 1 ms: a window is counted as 1 s at least
    (2e9, 1000.0, False),
    (5e9, 10e6, True),  # 5,000 s where the events start over 10 s
    (2e16, 1e15, False),  # past what a 64-bit nanosecond clock holds, however long the trace
])
def test_the_limit_follows_the_trace_and_the_clock(tmp_path, dur, window, kept):
    path = write(tmp_path, _with_duration(dur, window=window))
    for parser in ("msgspec", "json"):
        t = read_trace(path, parser=parser)
        assert (t.set_aside is None) == kept and len(t) == (9 if kept else 8)


def test_set_aside_alike_with_and_without_numpy(tmp_path, monkeypatch):
    from helpers.reader import vector

    path = write(tmp_path, _with_duration(1e30, n=3000, window=1e6))  # 9,000 events: numpy's path
    with_numpy = read_trace(path)
    monkeypatch.setattr(vector, "NUMPY", False)
    plain = read_trace(path)
    assert with_numpy.set_aside == plain.set_aside and with_numpy.set_aside.count == 1
    assert columns(plain) == columns(with_numpy)


def test_every_duration_beyond_the_clock_is_one_line(tmp_path):
    path = write(tmp_path, {"traceEvents": [_x("gemm", "kernel", 5, 1e30, pid=0, tid=7)]})
    refused(cli("summarize", path), "every timed event has a duration no profiler's clock gives (up to 1e+30 us")


def test_a_rank_with_a_duration_no_clock_gives(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    write(d, _with_duration(1e30), "rank0.json")
    write(d, _with_duration(3), "rank1.json")
    run = cli("summarize", d, "--json")
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("note: rank0.json: set aside 1 event whose duration") and run.stderr.count("\n") == 1
    out = strict(run.stdout)
    assert out["set_aside"][0]["path"] == "rank0.json" and len(out["ranks"]) == 2


# --- one line means one line --------------------------------------------------------------------

TEMPLATE = "void at::native::elementwise_kernel<128, 2, " + "at::native::gpu_kernel_impl<at::native::F<float> >, " * 100 + ">"


@pytest.mark.parametrize("field, value, cause", [
    ("dur", -1, "has a 'dur' of -1; expected a non-negative number"),
    ("ts", "x" * 100_000, "has a 'ts' of 'xxxxx"),
    ("cat", 7, "has a 'cat' of type int; expected a string"),
    ("args", [1], "has 'args' of type list; expected an object"),
])
def test_an_error_about_a_long_kernel_name_puts_the_cause_first(tmp_path, field, value, cause):
    """A C++ template name runs to thousands of characters: quoted after the cause, and cut short."""
    assert len(TEMPLATE) > 5000
    event = _x(TEMPLATE, "kernel", 5, 3, pid=0, tid=7)
    event[field] = value
    path = write(tmp_path, {"traceEvents": [_x("aten::mm", "cpu_op", 0, 9), event]})
    line = refused(cli("summarize", path), f"{path}: event #1 {cause}", "(its name: 'void at::native::elementwise")
    assert len(line) < len(str(path)) + 300, line
    assert line.index(cause[:12]) < line.index("its name") and f"({len(TEMPLATE):,} characters)" in line


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path):
    for name in ("bad\nname.json", "bad\rname.json", "bad\u2028name.json"):
        path = tmp_path / name
        refused(cli("summarize", path), "no such file", repr(name)[1:-1])  # escaped as Python writes it
        path.write_text('{"traceEvents": [{"ph": "X", "name": "a"}]}')
        refused(cli("diagnose", path), "event #0 has no 'ts'", repr(name)[1:-1])


# --- smaller -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["summarize", "diagnose"])
def test_an_empty_path_says_so(command):
    refused(cli(command, ""), "no trace named: the path given is empty")


def test_waits_on_a_trace_without_steps_are_not_said_to_be_in_steps():
    """HTA's AlexNet trace has no ProfilerStep#: its 16 waits are in the trace, not "inside the recorded steps"."""
    from helpers.advice.diagnose import diagnose

    found = {f.rule: f for f in diagnose(read_trace(ext(
        "hta_critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz")))}
    f = found["hidden-sync"]
    assert f.evidence[0].startswith("16 waits for the GPU in the trace (it has no profiler steps to place them in)")
    assert "step" not in f.title and "steps" not in " ".join(f.evidence[1:])
