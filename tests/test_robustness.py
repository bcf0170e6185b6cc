"""The reader on traces nobody on this project wrote, and on broken input.

Every real trace must summarize, from Python and from the command line; every
broken file must fail the same way: a TraceError (a ValueError) naming the
file and the problem, and on the command line exit status 2 with one line on
stderr. The large-trace machinery (parsing a few MB at a time, cutting out the
args nobody reads, the fallback to the json module) must give exactly what
the plain path gives.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import sys
from collections import Counter
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conftest import BIG, H200, ROCM, SMALL, cli, columns, ext, external_files, raw_doc, raw_events, \
    reader_without_msgspec
from helpers.reader import json_events as trace_json, source as trace_source
from helpers.reader.event_fields import ARG_FIELDS
from helpers.__main__ import main, summary_output
from helpers.facts import kernels, summarize
from helpers.facts.roofline import roofline
from helpers.reader.trace import KERNEL, MEMCPY, RUNTIME, TraceError, read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from grow import grow  # noqa: E402  (the benchmark's own grower: torch's layout, byte for byte)


def summarize_cli(*args) -> "object":
    return cli("summarize", *args)


def _refuse(word: str):
    raise ValueError(f"{word} is not JSON")


# --- real traces written by others ---------------------------------------------------


def _check_command_output(path, text: str, js: str, timed: int) -> None:
    assert f"trace: {path}" in text and "CPU against GPU:" in text
    out = json.loads(js, parse_constant=_refuse)  # strict JSON: no NaN, no Infinity
    assert {"device", "steps", "kernels", "memcpy", "runtime_calls", "verdict", "roofline"} <= out.keys()
    assert out["events"] == timed


# One read per trace for the facts and both of the command's outputs (summary_output is what the command prints); the
# process boundary (exit status, nothing on stderr, the output's encoding) on one trace below: a fresh interpreter
# reading every trace twice more cost the suite about 30 s.
@pytest.mark.parametrize("path", external_files(), ids=lambda p: getattr(p, "name", str(p)))
def test_every_external_trace_summarizes(path):
    t = read_trace(path)
    s = summarize(t)
    timed = [e for e in raw_events(path) if e.get("ph") == "X"]
    assert s.events == len(t) == len(timed)
    assert s.to_json()["events"] == len(timed)
    # the GPU work the summary counts is every timed event on the GPU side in a GPU-work category
    # (the range profiler's counter ranges are not: they span a collection window, not a kernel)
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    assert sum(k.count for k in s.kernels) == sum(1 for e in timed if e.get("cat", "").lower() in gpu_cats)
    r = roofline(t)
    _check_command_output(path, summary_output(s, r, as_json=False), summary_output(s, r, as_json=True), len(timed))


def test_an_external_trace_through_a_fresh_process():
    files = [p for p in external_files() if isinstance(p, Path) and p.suffix == ".gz"]
    if not files:
        pytest.skip("the external traces are not beside the clone")
    path = min(files, key=lambda p: p.stat().st_size)
    text, js = summarize_cli(path), summarize_cli(path, "--json")
    assert text.returncode == js.returncode == 0, text.stderr + js.stderr
    assert text.stderr == js.stderr == ""
    _check_command_output(path, text.stdout, js.stdout, sum(1 for e in raw_events(path) if e.get("ph") == "X"))


def test_rocm_counts_hip_kernels_as_gpu_work():
    path = ext(ROCM)
    raw = raw_events(path)
    s = summarize(read_trace(path))
    kernels_raw = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert kernels_raw and sum(k.count for k in s.kernels) >= len(kernels_raw) > 0
    calls = {c.name: c for c in s.calls}
    assert "hipLaunchKernel" in calls
    assert calls["hipLaunchKernel"].count == sum(1 for e in raw if e.get("name") == "hipLaunchKernel")
    assert calls["hipLaunchKernel"].launches_gpu_work > 0  # HIP launches link to their kernels
    assert s.verdict in ("GPU-bound", "CPU-bound")
    assert s.device and "AMD" in s.device
    out = json.loads(summarize_cli(path, "--json").stdout)
    assert out["verdict"] == s.verdict and out["runtime_calls"]["hipLaunchKernel"] == calls["hipLaunchKernel"].count


def test_cpu_only_trace_has_no_gpu_section():
    path = ext("hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    t = read_trace(path)
    s = summarize(t)
    assert not t.has_gpu
    assert s.kernels == [] and s.kinds == [] and s.copies == []
    assert s.verdict is None and s.balance.ratio is None and s.latency is None
    assert s.balance.self_cpu_us > 0
    text = summarize_cli(path).stdout
    assert "no GPU work in this trace: no verdict" in text and "GPU work by kind" not in text
    out = json.loads(summarize_cli(path, "--json").stdout)
    assert out["kernels"] == [] and out["verdict"] is None


def test_triton_kernel_is_of_kind_triton():
    path = ext("hta_triton_example_triton_example.json.gz")
    s = summarize(read_trace(path))
    triton = [k for k in s.kernels if k.kind == "triton"]
    assert triton and all(k.name.startswith("triton") for k in triton)
    assert any(k.kind == "triton" for k in s.kinds)


def test_nccl_kernels_are_collectives():
    path = ext("hta_nccl_parser_config_nccl_data.json.gz")
    raw = raw_events(path)
    s = summarize(read_trace(path))
    coll = [k for k in s.kernels if k.kind == "collective"]
    assert coll and all("nccl" in k.name.lower() for k in coll)
    n_raw = sum(1 for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in e["name"].lower())
    assert sum(k.count for k in coll) == n_raw > 0


def test_cupti_counter_ranges_load_as_counter_ranges():
    """Not as GPU work: a range spans CUPTI's collection window (121,431 us each here), not a kernel."""
    path = ext("hta_cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz")
    raw = [e for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") == "cuda_profiler_range"]
    t = read_trace(path)
    ranges = t.indices(("counter_range",))
    assert len(ranges) == len(raw) > 0 and not t.indices((KERNEL,))
    # their counters are kept apart from the usual args (helpers.reader.json_events.RangeArgs)
    assert not any(k.startswith("smsp__") for j in ranges for k in t.args.get(j, {}))
    assert [t.counters(j) for j in ranges] == [e["args"] for e in raw]
    assert summarize(t).kernels == []


def test_plain_json_with_two_threads():
    path = ext("hta_call_stack_backward_thread.json")
    t = read_trace(path)
    assert path.suffix == ".json" and len(t) == len([e for e in raw_events(path) if e.get("ph") == "X"])
    cpu_lanes = {t.lane[i] for i in range(len(t)) if not t.is_gpu(i)}
    assert len(cpu_lanes) == 2  # forward and backward threads
    assert summarize(t).verdict is not None


def test_large_trace_counts_match_the_json_module():
    path = ext(BIG)
    raw = [e for e in raw_events(path) if e.get("ph") == "X"]
    by_cat = Counter(e["cat"] for e in raw)
    t = read_trace(path)
    s = summarize(t)
    assert len(t) == len(raw) == 74937
    assert len(t.indices((KERNEL,))) == by_cat["kernel"] == 8568
    assert len(t.indices((RUNTIME,))) == by_cat["cuda_runtime"] == 24692
    assert len(t.indices((MEMCPY,))) == by_cat["gpu_memcpy"]
    assert sum(c.count for c in s.calls) == by_cat["cuda_runtime"]
    assert sum(k.count for k in s.kernels) == by_cat["kernel"] + by_cat["gpu_memcpy"] + by_cat["gpu_memset"]
    assert [x.name for x in s.steps] == sorted({e["name"] for e in raw if e["name"].startswith("ProfilerStep#")})
    names = Counter(e["name"] for e in raw if e["cat"] == "cuda_runtime")
    assert {c.name: c.count for c in s.calls} == dict(names)
    # every correlation id came through
    corr = Counter(e["args"]["correlation"] for e in raw if "correlation" in e.get("args", {}))
    assert Counter(c for c in t.corr if c >= 0) == corr
    # and of each kernel's args, what the facts read
    first = next(i for i in t.indices((KERNEL,)))
    want = next(e["args"] for e in raw if e["cat"] == "kernel")
    assert t.args[first] == {k: v for k, v in want.items() if k in ARG_FIELDS.values()}
    assert {"registers per thread", "grid", "block", "correlation"} <= t.args[first].keys()


def test_large_trace_in_one_batch_gives_the_same(monkeypatch):
    path = ext(BIG)
    batches = read_trace(path)
    monkeypatch.setattr(trace_json, "CHUNK", 1 << 40)  # the whole event list in one batch
    whole = read_trace(path)
    assert columns(batches) == columns(whole)
    assert summarize(batches).to_json() == summarize(whole).to_json()


# --- the streaming machinery gives what the json module gives -------------------------------


@pytest.fixture(scope="session")
def big_trace(tmp_path_factory) -> Path:
    """A 9 MB trace in torch's own layout (a leading newline, indented events), grown from an H200 trace."""
    path = tmp_path_factory.mktemp("big") / "big.json"
    grow(H200 / "attn-sdpa-math1024_bf16_warm_eager.json", path, 9 << 20)
    assert path.read_bytes()[:1] == b"\n" and path.stat().st_size > 100 * trace_json.CHUNK
    return path


def test_big_trace_in_batches_matches_the_json_module(big_trace, monkeypatch):
    t = read_trace(big_trace)
    raw = raw_doc(big_trace)
    timed = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    assert len(t) == len(timed)
    assert t.meta["traceName"] == raw["traceName"]  # the fields after the event list are read too
    assert t.meta["deviceProperties"] == raw["deviceProperties"]
    assert [t.name_of(i) for i in range(len(t))] == [e["name"] for e in timed]
    assert list(t.dur) == [float(e["dur"]) for e in timed]
    monkeypatch.setattr(trace_json, "CHUNK", 1 << 40)
    whole = read_trace(big_trace)
    assert columns(t) == columns(whole)
    assert summarize(t).to_json() == summarize(whole).to_json()


def test_big_bare_list_of_events(big_trace, tmp_path):
    """The Chrome format allows a bare list of events: large ones stream too."""
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(raw_events(big_trace)))
    assert columns(read_trace(path))[4:11] == columns(read_trace(big_trace))[4:11]


def test_both_parsers_give_the_same_columns(big_trace, h200):
    paths = [big_trace, h200 / "4096_bf16_warm_compile.json"]
    paths += [p for p in external_files() if isinstance(p, Path)]  # every external trace, where they are
    for path in paths:
        fast = read_trace(path)
        assert columns(read_trace(path, parser="json")) == columns(fast), path.name


@pytest.fixture(scope="module")
def big_trace_read(big_trace) -> tuple:
    """The 9 MB trace's columns as the reader gives them, and its bytes as the json module reads them: once."""
    return columns(read_trace(big_trace)), pickle.dumps(raw_doc(big_trace), protocol=pickle.HIGHEST_PROTOCOL)


@pytest.mark.parametrize("layout", ["torch", "compact", "sorted keys", "tabs and CRLF", "events last", "events first"])
def test_every_layout_streams_to_the_same_trace(big_trace, big_trace_read, tmp_path, monkeypatch, layout):
    """Whatever the whitespace, indentation or key order, the events stream in batches, with the same result."""
    want, pickled = big_trace_read
    doc = pickle.loads(pickled)  # each layout rearranges its own copy
    if layout == "torch":
        data = big_trace.read_bytes()
    elif layout == "compact":
        data = json.dumps(doc, separators=(",", ":")).encode()
    elif layout == "sorted keys":
        data = json.dumps(doc, sort_keys=True, indent=3).encode()
    elif layout == "tabs and CRLF":
        data = json.dumps(doc, indent="\t").replace("\n", "\r\n").encode()
    elif layout == "events last":
        events = doc.pop("traceEvents")
        data = json.dumps({**doc, "traceEvents": events}).encode()
    else:
        events = doc.pop("traceEvents")
        data = json.dumps({"traceEvents": events, **doc}, indent=1).encode()
    path = tmp_path / "t.json"
    path.write_bytes(data)
    sizes: list[int] = []
    decode = trace_json.decode_events
    monkeypatch.setattr(trace_json, "decode_events", lambda p, buf, *a: sizes.append(len(buf)) or decode(p, buf, *a))
    got = columns(read_trace(path))
    assert len(sizes) > 50 and max(sizes) < 4 * trace_json.CHUNK  # streamed: never the whole list at once
    assert got == want


def _awkward_events() -> list[dict]:
    """Events that make the cutting between events work hard."""
    evs: list[dict] = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main thread"}}]
    for k in range(300):
        ts = 1000 + 10 * k
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 8,
                    "args": {"Input Dims": [[4, 4], [4, 4]], "External id": k}})
        # a cut candidate inside args: a list of objects
        evs.append({"ph": "X", "cat": "cpu_op", "name": "odd args", "pid": 1, "tid": 1, "ts": ts + 1, "dur": 1,
                    "args": {"nested": [{"a": 1}, {"b": [{"c": 2}, {"d": 3}]}], "s": "}, {"}})
        # braces and an escaped key inside args
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 2,
                    "dur": 1, "args": {"note": "a } and a {", "correl\u0061tion": 5000 + k}})
        evs.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": ts + 4, "dur": 3,
                    "args": {"correlation": 5000 + k, "grid": [1, 2, 3], "block": [32, 1, 1],
                             "registers per thread": 32}})
        evs.append({"ph": "f", "id": 5000 + k, "pid": 0, "tid": 7, "ts": ts + 4, "cat": "ac2g", "name": "ac2g"})
        evs.append({"ph": "B", "cat": "user_annotation", "name": "region \"q\"", "pid": 1, "tid": 2, "ts": ts,
                    "args": {"x": 1}})
        evs.append({"ph": "E", "pid": 1, "tid": 2, "ts": ts + 5})
        evs.append({"ph": "C", "name": "memory", "pid": 1, "tid": 1, "ts": ts, "args": {"bytes": k}})
    return evs


@pytest.mark.parametrize("layout", ["indented", "compact"])
def test_many_small_batches_match_one_batch(tmp_path, monkeypatch, layout):
    meta = {"schemaVersion": 1, "deviceProperties": [{"name": "Test GPU"}],
            "tail": [{"a": [{"b": 1}]}, {"c": "}, {"}]}  # cut candidates after the list, too
    doc = {"schemaVersion": 1, "deviceProperties": meta["deviceProperties"], "traceEvents": _awkward_events(),
           "tail": meta["tail"]}
    path = tmp_path / "awkward.json"
    path.write_text(json.dumps(doc, indent=2) if layout == "indented" else json.dumps(doc, separators=(",", ":")))
    monkeypatch.setattr(trace_json, "CHUNK", 1 << 40)
    whole = read_trace(path)
    assert len(whole) == 300 * 5 and whole.device_name == "Test GPU" and whole.meta["tail"] == meta["tail"]
    assert whole.lanes[whole.lane[0]].name == "main thread"
    launch = whole.indices(name="cudaLaunchKernel")[0]
    assert whole.gpu_work_of(launch) and whole.corr[launch] == 5000  # the escaped key is read too
    monkeypatch.setattr(trace_json, "CHUNK", 200)
    monkeypatch.setattr(trace_source, "BLOCK", 333)
    seen: list[int] = []
    decode = trace_json.decode_events
    monkeypatch.setattr(trace_json, "decode_events", lambda p, buf, *a: seen.append(len(buf)) or decode(p, buf, *a))
    for parser in ("msgspec", "json"):
        small = read_trace(path, parser=parser)
        assert columns(small) == columns(whole)
        assert summarize(small).to_json() == summarize(whole).to_json()
    assert len(seen) > 100  # many batches, and some cuts that fell inside an event


def test_without_msgspec_the_json_module_gives_the_same_columns(big_trace):
    slow = reader_without_msgspec()
    assert slow.PARSER == "json"
    for path in (H200 / "4096_bf16_warm_compile.json", big_trace):
        assert columns(slow.read_trace(path)) == columns(read_trace(path))
    assert trace_json.PARSER == "msgspec"  # the test extra installs it: the fast path is the one tested


def test_without_msgspec_errors_are_the_same(tmp_path):
    slow = reader_without_msgspec()
    for name, data in [("nan.json", b'{"traceEvents": [{"ph": "X", "name": "a", "ts": NaN, "pid": 1, "tid": 1}]}'),
                       ("cut.json", SMALL.read_bytes()[:5000]),
                       ("inf.json", b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1e999, "pid": 1, "tid": 1}]}'),
                       ("comma.json", b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "pid": 1, "tid": 1},]}'),
                       ("deep.json", b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}")]:
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(TraceError) as fast:
            read_trace(path)
        with pytest.raises(slow.TraceError) as plain:
            slow.read_trace(path)
        assert str(fast.value) == str(plain.value)


# --- broken input --------------------------------------------------------------------


def _event(**kw) -> dict:
    e = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}
    e.update(kw)
    return e


def _no_ph() -> dict:
    e = _event()
    del e["ph"]
    return e


def _json(obj) -> bytes:
    return json.dumps(obj).encode()


BROKEN = {
    # name: (file name, bytes, words the message must hold)
    "empty file": ("t.json", b"", "empty"),
    "whitespace only": ("t.json", b"  \n\t\r\n  ", "empty"),
    "truncated JSON": ("t.json", SMALL.read_bytes()[: SMALL.stat().st_size // 2], "cut short"),
    "a number": ("t.json", b"42", "not a trace"),
    "a list of numbers": ("t.json", b"[1, 2, 3]", "not an object"),
    "an object without traceEvents": ("t.json", _json({"schemaVersion": 1, "deviceProperties": []}), "traceEvents"),
    "traceEvents not a list": ("t.json", _json({"traceEvents": {"ph": "X"}}), "not a list"),
    "ts as a string": ("t.json", _json({"traceEvents": [_event(ts="10")]}), "'ts'"),
    "name as a number": ("t.json", _json({"traceEvents": [_event(name=5)]}), "name"),
    "negative dur": ("t.json", _json({"traceEvents": [_event(dur=-1)]}), "'dur'"),
    "args not an object": ("t.json", _json({"traceEvents": [_event(args=[1, 2])]}), "'args'"),
    "ph missing": ("t.json", _json({"traceEvents": [_event(), _no_ph()]}), "event #1"),
    "event not an object": ("t.json", _json({"traceEvents": [_event(), "X"]}), "event #1"),
    "pid a list": ("t.json", _json({"traceEvents": [_event(pid=[1])]}), "pid"),
    "infinite ts": ("t.json", b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1e999, "pid": 1, "tid": 1}]}',
                    "'ts' of inf"),
    "NaN dur": ("t.json", b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": NaN, "pid": 1, "tid": 1}]}',
                "not valid JSON"),
    "end before begin": ("t.json", _json({"traceEvents": [_event(ph="B", ts=10), _event(ph="E", ts=5)]}), "before"),
    "deep nesting": ("t.json", b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested too deeply"),
    "not JSON at all": ("t.json", b"PK\x03\x04 this is a zip file", "not valid JSON"),
    "invalid UTF-8": ("t.json", b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe", "ts": 1, "pid": 1, "tid": 1}]}',
                      "not valid UTF-8 text at byte 38"),
    "empty traceEvents": ("t.json", _json({"traceEvents": []}), "no events"),
    "only metadata": ("t.json", _json({"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
                                                         "args": {"name": "main"}}]}), "only metadata"),
    "only instants and flows": ("t.json", _json({"traceEvents": [{"ph": "i", "name": "x", "ts": 1},
                                                                 {"ph": "f", "id": 1, "ts": 2}]}), "no timed events"),
    "gz that is not gzip": ("t.json.gz", SMALL.read_bytes(), "not gzip"),
    "truncated gz": ("t.json.gz", gzip.compress(SMALL.read_bytes())[:1000], "gzip"),
    "gz with its trailer cut": ("t.json.gz", gzip.compress(SMALL.read_bytes())[:-4], "gzip"),
    "gz followed by garbage": ("t.json.gz", gzip.compress(SMALL.read_bytes()) + b"garbage", "gzip"),
    "empty gz": ("t.json.gz", b"", "not gzip"),
    "gz of nothing": ("t.json.gz", gzip.compress(b""), "empty"),
    "gz of a truncated trace": ("t.json.gz", gzip.compress(SMALL.read_bytes()[:7000]), "cut short"),
}


@pytest.fixture
def broken(request, tmp_path) -> tuple[Path, str]:
    name, data, words = BROKEN[request.param]
    path = tmp_path / name
    path.write_bytes(data)
    return path, words


def _check_error(path: Path, words: str | tuple[str, ...], in_subprocess: bool = False) -> None:
    """A TraceError naming the file and the problem; from the command line, status 2 and one line."""
    with pytest.raises(TraceError) as err:
        summarize(read_trace(path))
    msg = str(err.value)
    assert isinstance(err.value, ValueError)
    assert str(path) in msg and any(w in msg for w in ((words,) if isinstance(words, str) else words)), msg
    assert "\n" not in msg
    for argv in ([path], [path, "--json"]):
        with capture() as (out, err):
            code = main(["summarize", *map(str, argv)])
        assert code == 2
        assert out.getvalue() == ""
        assert err.getvalue() == f"error: {msg}\n"  # one line, the same words, no traceback
    if in_subprocess:
        run = summarize_cli(path)
        assert run.returncode == 2
        assert run.stdout == ""
        assert run.stderr == f"error: {msg}\n"


@contextmanager
def capture():
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        yield out, err


@pytest.mark.parametrize("broken", list(BROKEN), indirect=True)
def test_broken_input_is_a_trace_error(broken):
    _check_error(*broken, in_subprocess=True)


def test_missing_file(tmp_path):
    _check_error(tmp_path / "nothing-here.json", "no such file", in_subprocess=True)


def test_directory(tmp_path):
    """The reader refuses a directory; the command line reads one as a folder of rank traces (issue 13),
    and an empty one is one line (tests/test_distributed.py has the rest)."""
    with pytest.raises(TraceError, match="directory"):
        read_trace(tmp_path)
    run = summarize_cli(tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == f"error: {tmp_path}: the folder is empty: no rank traces to read\n"


def test_unreadable_file(tmp_path):
    """A file that opens but whose read fails. Mode 000 does that for a user; root (as CI runs) reads any
    file, so there it is /proc/self/mem, whose first page no process can read (EIO)."""
    import os

    path = tmp_path / "secret.json"
    path.write_bytes(SMALL.read_bytes())
    path.chmod(0)
    if os.geteuid() == 0:
        path = Path("/proc/self/mem")
        if not path.exists():
            pytest.skip("running as root without /proc: no file here fails to read")
    _check_error(path, "cannot be read", in_subprocess=True)


@pytest.mark.parametrize("where", [0.3, 0.5, 0.9, 0.999])
def test_truncated_large_trace(big_trace, tmp_path, where):
    data = big_trace.read_bytes()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: int(len(data) * where)])
    _check_error(path, "cut short")


def test_truncated_large_gz(big_trace, tmp_path):
    data = gzip.compress(big_trace.read_bytes(), compresslevel=1)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    _check_error(path, "gzip data is damaged or cut short")


def test_large_trace_with_a_bad_event_names_it(big_trace, tmp_path):
    data = big_trace.read_bytes()
    k = data.index(b'"ts": ', data.index(b'"ph": "X"', len(data) * 3 // 4))
    path = tmp_path / "bad.json"
    path.write_bytes(data[:k] + b'"ts": "soon", "was": ' + data[k + 6:])
    _check_error(path, "'ts' of 'soon'")


@pytest.mark.parametrize("after", [b" x", b"}", b", {}"])
def test_large_trace_with_something_after_it(big_trace, tmp_path, after):
    path = tmp_path / "more.json"
    path.write_bytes(big_trace.read_bytes().rstrip() + after)
    _check_error(path, "not valid JSON")


def test_large_file_of_zero_bytes(tmp_path):
    """Not JSON from its first byte: said at once, without reading (or un-gzipping) all of it."""
    path = tmp_path / "zeros.json.gz"
    path.write_bytes(gzip.compress(b"\0" * (64 << 20), compresslevel=1))
    _check_error(path, "not valid JSON at byte 0")


def test_large_file_that_is_not_a_trace(tmp_path):
    path = tmp_path / "numbers.json"
    path.write_bytes(b"[" + b", ".join(b"%d" % k for k in range(2_000_000)) + b"]")
    _check_error(path, "not an object")


def test_good_gzip_variants(tmp_path):
    """Two gzip members one after the other, or zero padding after the stream, are still gzip."""
    data = SMALL.read_bytes()
    two = tmp_path / "two.json.gz"
    two.write_bytes(gzip.compress(data[:5000]) + gzip.compress(data[5000:]))
    padded = tmp_path / "padded.json.gz"
    padded.write_bytes(gzip.compress(data) + b"\0" * 64)
    want = columns(read_trace(SMALL))
    for path in (two, padded):
        got = columns(read_trace(path))
        assert got[:-2] == want[:-2]


def test_kernels_fact_on_a_trace_without_gpu(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_bytes(_json({"traceEvents": [_event(), _event(ts=20, name="aten::add")]}))
    t = read_trace(path)
    assert kernels(t) == [] and summarize(t).verdict is None


# --- crashes found on the way, kept fixed ------------------------------------------


def _two_events(kernel_args: dict, **launch) -> dict:
    call = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
            "args": {"correlation": 1}}
    call.update(launch)
    return {"traceEvents": [call, {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 3,
                                   "args": {"correlation": 1, **kernel_args}}]}


def _summarize_everywhere(path: Path) -> dict:
    events = summarize(read_trace(path)).events
    for argv in ([path], [path, "--json"]):
        with capture() as (out, err):
            assert main(["summarize", *map(str, argv)]) == 0
        assert err.getvalue() == ""
    js = json.loads(out.getvalue())
    assert js["events"] == events
    return js


def test_garbage_in_kernel_resources(tmp_path):
    """Deeply nested or mistyped launch resources used to crash --json (RecursionError) and threads_per_block."""
    deep = "[" * 400 + "]" * 400  # deeper than the json module's recursion limit is an error: see the hostile tests
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(_two_events({"grid": "__DEEP__", "block": "abc", "registers per thread": True,
                                            "shared memory": [1]})).replace('"__DEEP__"', deep))
    out = _summarize_everywhere(path)
    assert out["kernels"][0]["resources"] == {}
    k = kernels(read_trace(path))[0]
    assert k.resources.grid is None and k.resources.block is None and k.resources.threads_per_block is None


def test_step_number_with_too_many_digits(tmp_path):
    """int() refuses more than 4300 digits: such a name is no profiler step (it used to raise ValueError)."""
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"traceEvents": [_event(name="ProfilerStep#" + "1" * 5000),
                                                _event(name="ProfilerStep#7", ts=100)]}))
    assert [s.number for s in summarize(read_trace(path)).steps] == [7]
    _summarize_everywhere(path)


def test_end_events_need_no_name(tmp_path):
    """Chrome "E" events carry no name: the begin event's name and category are used."""
    path = tmp_path / "be.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "B", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 10},
        {"ph": "B", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 11},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 15},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 20, "name": 5},
    ]}))
    t = read_trace(path)
    assert [(t.name_of(i), t.ts[i], t.dur[i]) for i in range(len(t))] == [("aten::mm", 1.0, 4.0), ("step", 0.0, 10.0)]
    assert t.parent(0) == 1


def test_huge_correlation_ids(tmp_path):
    """Correlation ids beyond 2**63 used to overflow the column (OverflowError)."""
    path = tmp_path / "corr.json"
    path.write_text(json.dumps(_two_events({"correlation": 2**64 - 1}, args={"correlation": 2**64 - 1})))
    t = read_trace(path)
    assert list(t.corr) == [-1, -1]
    _summarize_everywhere(path)


def test_text_report_when_all_gpu_work_is_at_one_instant(tmp_path):
    path = tmp_path / "instant.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 0,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 0, "args": {"correlation": 1}}]}))
    s = summarize(read_trace(path))
    assert s.balance.window_us == 0 and s.balance.gpu_busy_share is None
    from helpers.facts.text import summary_text

    assert "verdict" in summary_text(s)
