"""A trace read in parts by forked workers (helpers/reader/parts.py) is the trace one process reads.

Real traces in, every column compared with the single-process read; then what
must make the reader give up its workers and read on alone (a cut inside a
string, begin/end pairs across a cut, a worker that fails or dies, JSON faults
in a worker's part) with the same result or the same error as one process.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXTERNAL, H200, ROOT, cli, columns
from helpers.reader import parts as trace_parts
from helpers.reader.trace import TraceError, read_trace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reader forks workers on Linux only")

TRAINING = H200 / "train-fp32-loop_bf16_warm_eager.json"  # CPU ops, runtime calls, kernels, memory events, flows


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 64 KB, so that the repository's traces are cut too.

    Other tests of the session leave threads running (the simulated GPUs'
    notebook runs), which turns the workers off; these tests fork anyway:
    their workers only read a file. test_no_workers_beside_other_threads
    checks the guard itself.
    """
    monkeypatch.setattr(trace_parts, "MIN_PART", 1 << 16)
    monkeypatch.setattr(trace_parts, "_alone", lambda: True)


def read(path: Path, processes: int, monkeypatch) -> object:
    monkeypatch.setenv("PROFILING_READ_WORKERS", str(processes))
    return read_trace(path)


def _traces() -> list[Path]:
    files = sorted(H200.glob("*.json"), key=lambda p: -p.stat().st_size)[:6]
    if EXTERNAL.is_dir():
        files += [p for p in sorted(EXTERNAL.glob("*.json")) if p.stat().st_size > 1 << 17]
        files += [p for p in sorted(EXTERNAL.glob("*.json.gz")) if p.stat().st_size > 1 << 17]  # read in parts too
    return files


@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.name)
@pytest.mark.parametrize("processes", [2, 3, 5])
def test_parts_give_the_same_columns(path, processes, small_parts, monkeypatch):
    parts = read(path, processes, monkeypatch)
    assert parts.read_by["processes"] > 1, "the trace was not cut: this test would compare nothing"
    assert parts.read_by["worker_peak_bytes"] > 0
    assert columns(parts) == _read_alone(path, monkeypatch)


_ALONE: dict[Path, tuple] = {}


def _read_alone(path: Path, monkeypatch) -> tuple:
    """The trace's columns read in one process, once per file for the three part counts (a third of this file's
    time was reading the same trace alone again)."""
    if path not in _ALONE:
        alone = read(path, 1, monkeypatch)
        assert alone.read_by["processes"] == 1
        _ALONE[path] = columns(alone)
    return _ALONE[path]


def test_a_large_trace_through_the_command_line(tmp_path):
    """A 20 MB trace in torch's layout: two processes by default, the same summary as one."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from grow import grow

    big = tmp_path / "big.pt.trace.json"
    grow(H200 / "block8x256x512_bf16_warm_eager.json", big, 20_000_000)
    assert big.read_bytes()[:1] == b"\n"  # torch's own layout, leading newline included
    one = cli("summarize", "--json", big, env={"PROFILING_READ_WORKERS": "1"})
    two = cli("summarize", "--json", big, env={"PROFILING_READ_WORKERS": "2"})
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert json.loads(two.stdout) == json.loads(one.stdout)
    assert json.loads(one.stdout)["events"] > 40_000  # with record_shapes, ~440 bytes an event: tens of thousands


def _write_events(path: Path, events: list[dict], pretty: bool = False) -> None:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "t"},
                               indent=1 if pretty else None))


def _x(i: int, name: str = "aten::mm", tid: int = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": 10.0 * i, "dur": 5.0,
            "args": {"External id": i}}


def test_cuts_inside_strings_are_not_taken(tmp_path, small_parts, monkeypatch):
    """Every name holds what looks like the end of one event and the start of the next."""
    path = tmp_path / "strings.json"
    _write_events(path, [_x(i, name='a}, {"ph": "X", "name": "b' * 40) for i in range(6000)])
    assert columns(read(path, 3, monkeypatch)) == columns(read(path, 1, monkeypatch))


def test_begin_end_pairs_across_a_cut(tmp_path, small_parts, monkeypatch):
    events = [_x(i) for i in range(3000)]
    events.insert(10, {"ph": "B", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 1.0})
    events.append({"ph": "E", "pid": 1, "tid": 1, "ts": 40000.0})
    path = tmp_path / "pairs.json"
    _write_events(path, events)
    alone, parts = read(path, 1, monkeypatch), read(path, 3, monkeypatch)
    assert columns(parts) == columns(alone)
    assert "outer" in alone.name_table


@pytest.mark.parametrize("how", ["raises", "killed"])
def test_a_worker_that_fails_costs_only_time(how, small_parts, monkeypatch):
    def fail(*args):
        if how == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        raise MemoryError("no room")

    alone = read(TRAINING, 1, monkeypatch)
    monkeypatch.setattr(trace_parts, "_read_part", fail)
    parts = read(TRAINING, 3, monkeypatch)
    assert parts.read_by["processes"] == 1
    assert columns(parts) == columns(alone)


def _message(path: Path, processes: int, monkeypatch) -> str:
    with pytest.raises(TraceError) as e:
        read(path, processes, monkeypatch)
    return str(e.value)


@pytest.mark.parametrize("fault", ["bad byte", "cut short", "trailing comma", "bad event"])
def test_faults_in_a_workers_part_are_worded_as_one_process_words_them(fault, tmp_path, small_parts, monkeypatch):
    text = TRAINING.read_text()
    at = text.index('"ph": "X"', len(text) * 3 // 4)  # in the last part
    if fault == "bad byte":
        text = text[:at] + "\x01" + text[at:]
    elif fault == "cut short":
        text = text[:at]
    elif fault == "trailing comma":
        end = text.rindex("]")
        text = text[:end].rstrip() + ",\n" + text[end:]
    else:
        text = text[:at] + text[at:].replace('"dur": ', '"dur": -', 1)
    path = tmp_path / "faulty.json"
    path.write_text(text)
    alone = _message(path, 1, monkeypatch)
    assert _message(path, 3, monkeypatch) == alone


def test_other_encodings_are_read_by_one_process(tmp_path, small_parts, monkeypatch):
    utf16 = tmp_path / "t16.json"
    utf16.write_bytes(TRAINING.read_text().encode("utf-16"))
    bom = tmp_path / "bom.json.gz"
    bom.write_bytes(gzip.compress(b"\xef\xbb\xbf" + TRAINING.read_bytes()))
    alone = columns(read(TRAINING, 1, monkeypatch))
    for path in (utf16, bom):
        t = read(path, 3, monkeypatch)
        assert t.read_by["processes"] == 1
        assert columns(t) == alone


@pytest.mark.parametrize("processes", [2, 3])
def test_gzip_is_read_in_parts(tmp_path, processes, small_parts, monkeypatch):
    """Each worker un-gzips the text before its part and finds its cut as the parent finds it: the same columns."""
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(TRAINING.read_bytes()))
    t = read(gz, processes, monkeypatch)
    assert t.read_by["processes"] == processes
    assert columns(t) == columns(read(TRAINING, 1, monkeypatch))


def test_gzip_members_and_a_wrong_trailer_cost_only_time(tmp_path, small_parts, monkeypatch):
    """Two gzip members: the trailer gives the second's size only, so the plan is wrong; the columns are not."""
    data = TRAINING.read_bytes()
    gz = tmp_path / "two.json.gz"
    gz.write_bytes(gzip.compress(data[:len(data) // 3]) + gzip.compress(data[len(data) // 3:]))
    assert columns(read(gz, 3, monkeypatch)) == columns(read(TRAINING, 1, monkeypatch))


@pytest.mark.parametrize("fault", ["cut short", "bad event"])
def test_faults_in_a_gzip_workers_part_are_worded_as_one_process_words_them(fault, tmp_path, small_parts,
                                                                              monkeypatch):
    text = TRAINING.read_text()
    at = text.index('"ph": "X"', len(text) * 3 // 4)
    text = text[:at] if fault == "cut short" else text[:at] + text[at:].replace('"dur": ', '"dur": -', 1)
    path = tmp_path / "faulty.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    alone = _message(path, 1, monkeypatch)
    assert _message(path, 3, monkeypatch) == alone


def test_a_gzip_worker_that_fails_costs_only_time(tmp_path, small_parts, monkeypatch):
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(TRAINING.read_bytes()))
    alone = columns(read(gz, 1, monkeypatch))
    real = trace_parts._read_part

    def last_fails(path, parser, start, end, gz=False):
        if end is None:  # the worker that reads to the list's end
            raise MemoryError("no room")
        return real(path, parser, start, end, gz)

    monkeypatch.setattr(trace_parts, "_read_part", last_fails)
    t = read(gz, 3, monkeypatch)
    assert t.read_by["processes"] == 2  # the first worker's part kept, the rest read by the parent
    assert columns(t) == alone


def test_no_workers_beside_other_threads():
    """A Jupyter kernel has threads: fork() would copy none of them, nor release the locks they hold.

    In a fresh process: this session's other tests leave threads of their own running.
    """
    code = f"""
import threading
from helpers.reader import parts as trace_parts
from helpers.reader.trace import read_trace
trace_parts.MIN_PART = 1 << 16
path = {str(TRAINING)!r}
before = read_trace(path).read_by["processes"]
stop = threading.Event()
other = threading.Thread(target=stop.wait)
other.start()
during = read_trace(path).read_by["processes"]
stop.set()
other.join()
print(before, during, read_trace(path).read_by["processes"])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "PROFILING_READ_WORKERS": "3"})
    assert r.returncode == 0, r.stderr
    before, during, after = map(int, r.stdout.split())
    assert before > 1 and after > 1
    assert during == 1


def test_no_workers_once_torch_is_imported(monkeypatch):
    """torch's thread pools are native threads, which Python does not count: its import alone turns the workers off."""
    monkeypatch.setattr(trace_parts.threading, "active_count", lambda: 1)
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or object())
    assert trace_parts.processes(TRAINING, 1 << 30) == 1
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setenv("PROFILING_READ_WORKERS", "3")
    assert trace_parts.processes(TRAINING, 1 << 30) == 3


def test_a_bare_list_and_a_list_that_ends_before_the_cut(tmp_path, small_parts, monkeypatch):
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([_x(i) for i in range(4000)]))
    short_list = tmp_path / "short.json"  # the events end early; a long field follows them
    short_list.write_text(json.dumps({"traceEvents": [_x(i) for i in range(200)], "padding": ["x" * 100] * 4000}))
    for path in (bare, short_list):
        assert columns(read(path, 3, monkeypatch)) == columns(read(path, 1, monkeypatch))
    assert read(bare, 3, monkeypatch).read_by["processes"] > 1


def test_counter_ranges_read_in_parts(tmp_path, small_parts, monkeypatch):
    """The range profiler's counters (kept whole, not as the usual args) come back from the workers unchanged."""
    from test_reader import _range_trace

    path = tmp_path / "ranges.json"
    path.write_text(json.dumps(_range_trace(4000)))
    alone = read(path, 1, monkeypatch)
    parts = read(path, 3, monkeypatch)
    assert parts.read_by["processes"] > 1
    assert columns(parts) == columns(alone)
    assert sum(1 for i in parts.args if parts.counters(i)) == 1334


def test_in_child_gives_what_this_process_would(monkeypatch):
    """The roofline computed in a forked process is the roofline computed here; a child that fails (or a process
    where forking is not safe) costs only time: the value is computed here, and so is its error."""
    from helpers.facts.roofline import roofline

    monkeypatch.setattr(trace_parts, "_alone", lambda: True)
    t = read_trace(H200 / "block8x256x512_bf16_warm_eager.json")
    here = roofline(read_trace(H200 / "block8x256x512_bf16_warm_eager.json"))
    assert trace_parts.in_child(roofline, t)() == here and here.points

    calls = []

    def fails_in_the_child(x):
        calls.append(os.getpid())
        if len(calls) == 1 and os.getpid() != parent:  # (appended in the child only: its list is its own)
            raise MemoryError("no room in the child")
        if x < 0:
            raise ValueError("negative")
        return x * 2

    parent = os.getpid()
    assert trace_parts.in_child(fails_in_the_child, 21)() == 42 and calls == [parent]
    with pytest.raises(ValueError, match="negative"):
        trace_parts.in_child(fails_in_the_child, -1)()
    monkeypatch.setattr(trace_parts, "_alone", lambda: False)
    got = trace_parts.in_child(fails_in_the_child, 5)
    assert calls == [parent, parent] and got() == 10  # computed here, when asked for
