"""Whatever is done to a real trace, the reader and the facts either work or say TraceError.

Hypothesis takes a real trace (an H200 reference trace, and the ROCm trace
from HTA's test data when it is there), mutates it (drops fields, puts values
of the wrong type in them, deletes, duplicates and shuffles events, nests
garbage, cuts the bytes short or damages them), writes it (plain or gzip),
and reads it with msgspec or with the json module (the json module also as
users without msgspec get it), in batches of a few hundred bytes or whole;
then summarizes and diagnoses it and renders both as the command line does. Nothing but TraceError may come out: no
KeyError, TypeError, IndexError, ZeroDivisionError, RecursionError... Made-up
traces whose values all have the right types get past the reader and put the
facts to the test. And where the JSON stays well formed, reading it a few
hundred bytes at a time must give exactly what reading it in one go gives.
CI and ``make test`` run them derandomized (tests/conftest.py's "ci" profile).
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import pickle
import random
import re
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXTERNAL, H200 as H200_DIR, ROCM as ROCM_NAME, reader_without_msgspec
from helpers.reader import trace as trace_mod, json_events as trace_json, source as trace_source
from helpers.advice.diagnose import diagnose, text as diagnose_text
from helpers.facts import summarize
from helpers.facts.text import summary_text

H200 = H200_DIR / "64_bf16_cold_eager_s0-0-3.json"
ROCM = EXTERNAL / ROCM_NAME

FIELDS = ["ph", "name", "cat", "ts", "dur", "pid", "tid", "args", "id"]
ARG_KEYS = ["correlation", "External id", "grid", "block", "registers per thread", "shared memory", "bytes",
            "name", "device", "stream"]
PHASES = ["X", "B", "E", "M", "i", "f", "s", "C", "", "x"]

garbage = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
    | st.sampled_from(["thread_name", "X", "ProfilerStep#1", "cudaLaunchKernel", "kernel", "cuda_runtime"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
index = st.integers(min_value=0, max_value=10**6)

NAMES = ["ProfilerStep#5", "ProfilerStep#x", "cudaDeviceSynchronize", "cudaLaunchKernel", "hipLaunchKernel",
         "Activity Buffer Request", "## Call CompiledFxGraph fabc ##", "Torch-Compiled Region: 0/0", "aten::mm",
         "Memcpy HtoD", "my_annotation", "", "triton_poi_fused_0", "ncclKernel_AllReduce"]
CATS = ["kernel", "Kernel", "cuda_runtime", "cuda_driver", "cpu_op", "user_annotation", "gpu_memcpy", "gpu_memset",
        "gpu_user_annotation", "overhead", "python_function", "cuda_profiler_range", "Trace", ""]

structural = st.one_of(
    st.tuples(st.just("set_field"), index, st.just("name"), st.sampled_from(NAMES)),
    st.tuples(st.just("set_field"), index, st.just("cat"), st.sampled_from(CATS)),
    st.tuples(st.just("set_field"), index, st.just("dur"), st.sampled_from([0, 0.0005, 1, 1e9])),
    st.tuples(st.just("copy_field"), index, index, st.sampled_from(["ts", "pid", "tid", "dur", "name", "cat"])),
    st.tuples(st.just("drop_field"), index, st.sampled_from(FIELDS)),
    st.tuples(st.just("set_field"), index, st.sampled_from(FIELDS), garbage),
    st.tuples(st.just("set_arg"), index, st.sampled_from(ARG_KEYS), garbage),
    st.tuples(st.just("set_ph"), index, st.sampled_from(PHASES)),
    st.tuples(st.just("shift_ts"), index, st.sampled_from([-1e9, -5.0, -0.001, 0.0, 0.5, 1e6, 1e15, 1e300])),
    st.tuples(st.just("copy_corr"), index, index),
    st.tuples(st.just("delete"), index),
    st.tuples(st.just("duplicate"), index),
    st.tuples(st.just("shuffle"), st.integers(min_value=0, max_value=2**32)),
    st.tuples(st.just("replace_event"), index, garbage),
    st.tuples(st.just("nest"), index, st.integers(min_value=1, max_value=1500),
              st.sampled_from(["deep", "grid", "block", "registers per thread", "name"])),
    st.tuples(st.just("top"), st.sampled_from(["traceEvents", "deviceProperties", "baseTimeNanoseconds",
                                                 "distributedInfo", "schemaVersion"]), garbage),
    st.tuples(st.just("drop_top"), st.sampled_from(["traceEvents", "deviceProperties", "baseTimeNanoseconds"])),
    st.tuples(st.just("bare_list")),
)
damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(min_value=0, max_value=1)),
    st.tuples(st.just("flip"), st.floats(min_value=0, max_value=1), st.integers(min_value=0, max_value=255)),
)

_docs: dict[Path, bytes] = {}


def base(path: Path) -> dict:
    """A fresh copy of the parsed trace for each example (a pickle round trip: ten times faster than deepcopy)."""
    if path not in _docs:
        if not path.exists():
            pytest.skip(f"{path.parent} is absent: the external traces live beside the clone in CI")
        data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
        _docs[path] = pickle.dumps(json.loads(data), protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.loads(_docs[path])


def mutate(doc, ops: list) -> object:
    """Apply structural mutations to a parsed trace; returns the new document."""
    for op in ops:
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        kind = op[0]
        if kind == "top":
            if isinstance(doc, dict):
                doc[op[1]] = op[2]
            continue
        if kind == "drop_top":
            if isinstance(doc, dict):
                doc.pop(op[1], None)
            continue
        if kind == "bare_list":
            if isinstance(doc, dict) and isinstance(events, list):
                doc = events
            continue
        if not isinstance(events, list) or not events:
            continue
        if kind == "shuffle":
            random.Random(op[1]).shuffle(events)
            continue
        k = op[1] % len(events)
        e = events[k]
        if kind == "delete":
            del events[k]
        elif kind == "duplicate":
            events.insert(k, copy.deepcopy(e) if isinstance(e, (dict, list)) else e)
        elif kind == "replace_event":
            events[k] = op[2]
        elif not isinstance(e, dict):
            continue
        elif kind == "drop_field":
            e.pop(op[2], None)
        elif kind == "set_field":
            e[op[2]] = op[3]
        elif kind == "set_arg":
            if not isinstance(e.get("args"), dict):
                e["args"] = {}
            e["args"][op[2]] = op[3]
        elif kind == "set_ph":
            e["ph"] = op[2]
        elif kind == "shift_ts":
            if isinstance(e.get("ts"), (int, float)) and not isinstance(e.get("ts"), bool):
                e["ts"] = e["ts"] + op[2]
        elif kind == "copy_field":  # e.g. two events at one time, or an event moved to another lane
            other = events[op[2] % len(events)]
            if isinstance(other, dict) and op[3] in other:
                e[op[3]] = copy.deepcopy(other[op[3]])
        elif kind == "copy_corr":  # two events with one correlation id
            other = events[op[2] % len(events)]
            if isinstance(other, dict) and isinstance(other.get("args"), dict):
                e.setdefault("args", {})
                if isinstance(e["args"], dict):
                    e["args"]["correlation"] = other["args"].get("correlation")
        elif kind == "nest":  # garbage nested deep inside the args: written out by serialize()
            if isinstance(e.get("args"), dict):
                e["args"][op[3]] = f"__DEEP_{op[2]}__"
    return doc


def _deep(m: re.Match) -> bytes:
    depth = int(m.group(1))
    opens = b"".join(b"[" if d % 2 else b'{"k":' for d in range(depth))
    closes = b"".join(b"]" if d % 2 else b"}" for d in reversed(range(depth)))
    return opens + b'"x"' + closes


def serialize(doc, layout: str) -> bytes:
    return re.sub(rb'"__DEEP_(\d+)__"', _deep, _serialize(doc, layout))


def _serialize(doc, layout: str) -> bytes:
    if layout == "compact":
        return json.dumps(doc, separators=(",", ":")).encode()
    if layout == "kineto" and isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        rows = ",\n".join("  " + json.dumps(e, indent=1).replace("\n", "\n  ") for e in doc["traceEvents"])
        top = "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in head.items())
        return ("{\n" + top + '  "traceEvents": [\n' + rows + "\n  ]\n}").encode()
    return json.dumps(doc).encode()


def apply_damage(data: bytes, ops: list) -> bytes:
    for op in ops:
        if not data:
            break
        if op[0] == "truncate":
            data = data[: int(len(data) * op[1])]
        else:
            k = min(int(len(data) * op[1]), len(data) - 1)
            data = data[:k] + bytes([op[2]]) + data[k + 1:]
    return data


READERS = {"msgspec": lambda p: trace_mod.read_trace(p), "json": lambda p: trace_mod.read_trace(p, parser="json"),
           "json without msgspec": lambda p: reader_without_msgspec().read_trace(p)}
ERRORS = (trace_mod.TraceError, reader_without_msgspec().TraceError)


@contextmanager
def small_batches(on: bool):
    """Make the readers (with and without msgspec) cut any file into batches of a few hundred bytes."""
    slow = reader_without_msgspec()
    knobs = [(trace_json, "CHUNK", 200), (trace_source, "BLOCK", 333),
             (sys.modules[slow.__package__ + ".json_events"], "CHUNK", 200),
             (sys.modules[slow.__package__ + ".source"], "BLOCK", 333)]
    saved = [(m, name, getattr(m, name)) for m, name, _ in knobs]
    if on:
        for m, name, value in knobs:
            setattr(m, name, value)
    try:
        yield
    finally:
        for m, name, value in saved:
            setattr(m, name, value)


def outcome(path: Path, chunked: bool, parser: str = "msgspec"):
    """The columns, the summary and the findings, or the TraceError: nothing else may come out."""
    with small_batches(chunked):
        try:
            t = READERS[parser](path)
        except ERRORS as e:
            assert isinstance(e, ValueError)
            assert str(path) in str(e) and "\n" not in str(e)
            return None
    s = summarize(t)
    js = s.to_json()
    json.dumps(js, default=str)
    summary_text(s)  # what the command line prints
    found = diagnose(t)
    diagnose_text(found)
    json.dumps([asdict(f) for f in found])
    assert js["events"] == len(t) > 0
    assert all(math.isfinite(x) for x in t.ts) and all(x >= 0 for x in t.dur)
    for i in range(min(len(t), 50)):  # the per-event view holds up too
        ev = t[i]
        assert ev.end >= ev.start
    lanes = [(ln.pid, ln.tid, ln.name, ln.is_gpu, ln.is_profiler) for ln in t.lanes]
    return (t.name_table, t.cat_table, lanes, list(t.name_id), list(t.cat_id), list(t.ts), list(t.dur),
            list(t.lane), list(t.corr), t.args, t.meta), js


SETTINGS = settings(max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "200")), deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("source", [H200, ROCM], ids=["h200", "rocm"])
@SETTINGS
@given(ops=st.lists(structural, max_size=6), harm=st.lists(damage, max_size=2),
       layout=st.sampled_from(["plain", "compact", "kineto"]), gz=st.booleans(), chunked=st.booleans(),
       parser=st.sampled_from(["msgspec", "msgspec", "json", "json without msgspec"]))
def test_mutated_traces_read_or_raise_trace_error(source, ops, harm, layout, gz, chunked, parser):
    doc = mutate(base(source), ops)
    data = apply_damage(serialize(doc, layout), harm)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / ("t.json.gz" if gz else "t.json")
        path.write_bytes(gzip.compress(data, compresslevel=1) if gz else data)
        outcome(path, chunked, parser)


@pytest.mark.parametrize("source", [H200, ROCM], ids=["h200", "rocm"])
@SETTINGS
@given(ops=st.lists(structural, max_size=6), cut=st.floats(min_value=0, max_value=1) | st.just(1.0),
       layout=st.sampled_from(["compact", "kineto"]))
def test_reading_in_small_chunks_gives_what_reading_whole_gives(source, ops, cut, layout):
    doc = mutate(base(source), ops)
    data = serialize(doc, layout)
    data = data[: int(len(data) * cut)]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.json"
        path.write_bytes(data)
        whole = outcome(path, chunked=False)
        chunked = outcome(path, chunked=True)
    assert (whole is None) == (chunked is None)
    if whole is not None:
        assert whole[0] == chunked[0]
        assert whole[1] == chunked[1]


# Made-up traces whose every value has the right type: they get past the reader and test the facts.
made_up_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "B", "E", "M", "f"]),
     "name": st.sampled_from(NAMES + ["thread_name"]),
     "cat": st.sampled_from(CATS),
     "pid": st.sampled_from([0, 1, "Spans", -1]),
     "tid": st.sampled_from([0, 7, "stream 7", 1]),
     "ts": st.sampled_from([0, 0, 1, 2.5, 3, 10, 1e6]),
     "dur": st.sampled_from([0, 0, 1, 2, 7.5])},
    optional={"args": st.fixed_dictionaries({}, optional={
        "correlation": st.sampled_from([1, 2, 3, -1, 0]),
        "name": st.sampled_from(["main", "worker"]),
        "grid": garbage, "block": garbage, "registers per thread": garbage, "shared memory": garbage,
        "bytes": garbage, "est. achieved occupancy %": garbage})},
)


@SETTINGS
@given(events=st.lists(made_up_event, min_size=1, max_size=40),
       props=st.lists(st.fixed_dictionaries({}, optional={"name": garbage, "regsPerMultiprocessor": garbage}),
                      max_size=2),
       chunked=st.booleans(), parser=st.sampled_from(["msgspec", "json", "json without msgspec"]))
def test_made_up_traces_read_or_raise_trace_error(events, props, chunked, parser):
    doc = {"deviceProperties": props, "traceEvents": events}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.json"
        path.write_bytes(serialize(doc, "kineto"))
        outcome(path, chunked, parser)
