"""Input that once stalled the reader for minutes: long stretches without an event boundary.

The files are made here, in tmp_path, at sizes that show the cost grows in
proportion to the input (bytes copied, counted; time against a generous
bound) without taking the suite long. The issue's own cases (400 MB of
whitespace, a 200 MB string, a 2 GiB run, gzip-compressed) are measured by
hand: see the closing note of issue 23.
"""

from __future__ import annotations

import json
import time
import zlib
from pathlib import Path

import pytest

from conftest import cli
from helpers.reader import json_events as trace_json, source as trace_source
from helpers.reader.trace import read_trace

EV = b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}'
EV2 = b'{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 12, "dur": 2}'


def _stretch(kind: str, n: int) -> list:
    """A trace whose text has a stretch of ``n`` bytes without a boundary between two events."""
    head = b'{"traceEvents": ['
    if kind == "whitespace after an event":
        return [head + EV + b",", (b" ", n), EV2 + b"]}"]
    if kind == "whitespace after the last event":
        return [head + EV, (b"\n", n), b"]}"]
    if kind == "a long string in args":
        return [head + EV[:-1] + b', "args": {"s": "', (b"a", n), b'"}}, ' + EV2 + b"]}"]
    if kind == "whitespace before the trace":
        return [(b" ", n), head + EV + b"]}"]
    if kind == "whitespace after the trace":
        return [head + EV + b"]}", (b"\r\n", n // 2)]
    raise ValueError(kind)


KINDS = ["whitespace after an event", "whitespace after the last event", "a long string in args",
         "whitespace before the trace", "whitespace after the trace"]


def _write(path: Path, parts: list, gz: bool = False) -> Path:
    """The parts (bytes, or (byte, count) for a run) written plain or gzip-compressed, a block at a time."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31) if gz else None
    with open(path, "wb") as f:
        for p in parts:
            chunks = [p] if isinstance(p, bytes) else _run(*p)
            for b in chunks:
                f.write(c.compress(b) if c else b)
        if c:
            f.write(c.flush())
    return path


def _run(b: bytes, n: int):
    block = b * (1 << 20)
    while n > 0:
        yield block[:n]
        n -= len(block)


@pytest.mark.parametrize("kind", KINDS)
def test_a_long_stretch_is_read_in_linear_time(tmp_path, kind, monkeypatch):
    """The text held is topped up by doubling, not a block more each time: the bytes copied stay in proportion."""
    copied = []
    hold = trace_json._Text.hold

    def counting(self, pos, want):
        out = hold(self, pos, want)
        copied.append(len(self.data))
        return out

    monkeypatch.setattr(trace_json._Text, "hold", counting)
    for n in (4 << 20, 16 << 20):
        copied.clear()
        path = _write(tmp_path / "t.json", _stretch(kind, n))
        t = read_trace(path)
        assert len(t) == (1 if "last" in kind or "the trace" in kind else 2)
        size = path.stat().st_size
        # block by block, a 16 MB stretch was joined again 60 times (800 MB copied): now about 3 times its size
        assert sum(copied) < 5 * size, (kind, n, sum(copied) / size)


def test_whitespace_is_skipped_at_c_speed(tmp_path):
    """64 MiB of whitespace around the trace: a byte at a time took seconds; now well under one."""
    for kind in ("whitespace before the trace", "whitespace after the trace"):
        path = _write(tmp_path / "ws.json", _stretch(kind, 64 << 20))
        t0 = time.perf_counter()
        assert len(read_trace(path)) == 1
        assert time.perf_counter() - t0 < 1.5, kind


@pytest.mark.parametrize("kind", ["whitespace after an event", "a long string in args"])
def test_gzip_that_expands_far_beyond_a_trace(tmp_path, kind):
    """80 MiB from 80 KiB of gzip: refused once 64 MiB are out, with the bound in the line, in a moment."""
    path = _write(tmp_path / "bomb.json.gz", _stretch(kind, 80 << 20), gz=True)
    assert path.stat().st_size < 200_000
    t0 = time.perf_counter()
    run = cli("summarize", path)
    assert time.perf_counter() - t0 < 10
    assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1, run.stderr
    line = run.stderr
    assert line.startswith(f"error: {path}: gzip data that expands more than {trace_source.GZIP_MAX_RATIO} times")
    assert "MiB from" in line and "un-gzip it and pass the JSON file" in line


def test_gzip_of_high_ratio_below_the_bound_is_read(tmp_path):
    """Under GZIP_CHECK_FROM bytes of text, any ratio is read: a small file is no stall."""
    path = _write(tmp_path / "small.json.gz", _stretch("whitespace after an event", 8 << 20), gz=True)
    assert len(read_trace(path)) == 2


def test_repetitive_gzip_traces_are_far_below_the_bound(tmp_path, monkeypatch):
    """Near-identical events, the most repetitive trace there is, expand about 30 times: read, not refused."""
    monkeypatch.setattr(trace_source, "GZIP_CHECK_FROM", 1 << 20)  # checked from the first MiB on
    events = b",".join(b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":5}' % (10 * k)
                       for k in range(100_000))
    path = _write(tmp_path / "many.json.gz", [b'{"traceEvents":[', events, b"]}"], gz=True)
    assert len(events) / path.stat().st_size < trace_source.GZIP_MAX_RATIO / 2
    assert len(read_trace(path)) == 100_000


def _held(monkeypatch) -> list:
    """The length of the text held after each top-up, recorded."""
    held: list = []
    hold = trace_json._Text.hold

    def recording(self, pos, want):
        out = hold(self, pos, want)
        held.append(len(self.data))
        return out

    monkeypatch.setattr(trace_json._Text, "hold", recording)
    return held


@pytest.mark.parametrize("kind", ["whitespace after an event", "whitespace after the last event",
                                  "whitespace after the trace", "whitespace before the trace"])
def test_whitespace_between_events_is_not_held(tmp_path, kind, monkeypatch):
    """Past a megabyte of whitespace after an event, the rest is skipped as it comes: 64 MiB, a few MiB held."""
    held = _held(monkeypatch)
    path = _write(tmp_path / "t.json", _stretch(kind, 64 << 20))
    assert len(read_trace(path)) in (1, 2)
    assert max(held) < 4 * trace_json.STRETCH, max(held)


GAP = {"short": 100, "long": 3 * trace_json.STRETCH}
AFTER_GAP = {  # what follows an event and a gap of whitespace, and what the reader must say of it
    "the next event": (b", " + EV2 + b"]}", None),
    "a comma, a gap, the next event": (b",\n" + b" " * (3 << 20) + EV2 + b"]}", None),
    "the list's end": (b"]}", None),
    "the document's end": (b"]} \n", None),
    "fields after the list": (b'], "traceName": "t", "x": {"a": [1]}}', None),
    "a trailing comma": (b",\n ]}", "a comma with nothing after it (a trailing comma) at byte "),
    "no comma": (b" " + EV2 + b"]}", "not valid JSON at byte "),
    "a stray brace": (b"}]}", "not valid JSON at byte "),
    "nothing: cut short": (b"", "the JSON ends too early"),
    "a comma, then nothing": (b",  ", "the JSON ends too early"),
    "a number for an event": (b", 7]}", "event #1 is an int, not an object"),
}


@pytest.mark.parametrize("after", list(AFTER_GAP))
def test_what_follows_a_long_gap_is_judged_as_after_a_short_one(tmp_path, after, monkeypatch):
    """Skipping a long gap without holding it changes nothing the reader says: the same events, the same error."""
    tail, error = AFTER_GAP[after]
    said = {}
    skipped = []
    past = trace_json.Document._past_stretch

    def counting(self, pos, j):
        skipped.append(j)
        return (yield from past(self, pos, j))

    monkeypatch.setattr(trace_json.Document, "_past_stretch", counting)
    for gap, n in GAP.items():
        path = _write(tmp_path / f"{gap}.json", [b'{"traceEvents": [' + EV, (b" ", n), tail])
        data = path.read_bytes()
        for parser in ("msgspec", "json"):
            try:
                t = read_trace(path, parser=parser)
                said[gap, parser] = [t.name_of(i) for i in range(len(t))]
                assert error is None, after
                assert said[gap, parser] == [e["name"] for e in json.loads(data)["traceEvents"]]
            except trace_source.TraceError as e:
                assert error is not None and error in str(e), (after, str(e))
                msg = str(e).replace(str(path), "PATH")
                if " at byte " in msg:  # the byte named is the fault's own, wherever the gap put it
                    at = int(msg.rsplit(" at byte ", 1)[1])
                    assert data[at:at + 1] in (b",", b"{", b"}"), (after, gap, data[at - 5:at + 5])
                    msg = msg.rsplit(" at byte ", 1)[0]
                said[gap, parser] = msg
        assert bool(skipped) == (gap == "long" or "a gap" in after), (gap, skipped)  # the long gap was skipped
        skipped.clear()
    assert len(set(map(str, said.values()))) == 1, said


def test_a_brace_in_a_string_before_a_gap(tmp_path):
    """A '}' inside a name followed by megabytes of spaces, inside the same string: every space is kept."""
    spaces = b" " * (3 * trace_json.STRETCH)
    event = b'{"ph": "X", "cat": "cpu_op", "name": "a}' + spaces + b'", "pid": 1, "tid": 1, "ts": 1, "dur": 2}'
    path = _write(tmp_path / "t.json", [b'{"traceEvents": [', event, b", ", EV2, b"]}"])
    t = read_trace(path)
    assert [t.name_of(i) for i in range(len(t))] == ["a}" + spaces.decode(), "gemm"]
