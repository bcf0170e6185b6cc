"""Memory events and autograd's sequence numbers in the reader; peaks and timelines from them; summarize's memory lines."""

from __future__ import annotations

import json

import pytest

from conftest import cli, columns, raw_events, reader_without_msgspec
from helpers.facts import summarize
from helpers.facts.memory import CPU, CUDA, allocated_by_step, memory_peaks, memory_timeline
from helpers.reader.trace import read_trace

MEM = "train-fp32-foreach-mem-b4096_bf16_warm_eager"
CKPT = "train-fp32-foreach-mem-ckpt-b4096_bf16_warm_eager"


def _memory_events(path):
    return [e for e in raw_events(path) if e.get("ph") == "i" and e.get("name") == "[memory]"]


@pytest.mark.parametrize("tag", [MEM, CKPT])
def test_every_memory_event_is_kept_with_its_numbers(h200, tag):
    path = h200 / f"{tag}.json"
    raw = _memory_events(path)
    t = read_trace(path)
    m = t.memory
    assert len(raw) > 200 and len(m) == len(raw)
    for k, e in enumerate(raw):  # file order, every number as written; times on the timed events' clock
        a = e["args"]
        assert (m.allocated[k], m.reserved[k], m.bytes[k], m.device_type[k], m.device_id[k]) == (
            a["Total Allocated"], a["Total Reserved"], a["Bytes"], a["Device Type"], a["Device Id"])
        assert m.ts[k] == pytest.approx(e["ts"] - t.t0, abs=1e-3)
    # the instants stay out of the timed events: same count as the complete events
    assert len(t) == sum(1 for e in raw_events(path) if e.get("ph") == "X")


@pytest.mark.parametrize("tag", [MEM, CKPT, "train-fp32-foreach_bf16_warm_eager"])
def test_both_parsers_keep_the_same_memory_and_sequence_columns(h200, tag):
    path = h200 / f"{tag}.json"
    fast = columns(read_trace(path))
    assert fast == columns(read_trace(path, parser="json")) == columns(reader_without_msgspec().read_trace(path))


def test_peaks_equal_what_torch_measured(h200):
    """The peak read from the events alone against torch.cuda.max_memory_allocated over the same steps."""
    for tag in (MEM, CKPT):
        timing = json.loads((h200 / f"{tag}.timing.json").read_text())
        (gpu,) = [p for p in memory_peaks(read_trace(h200 / f"{tag}.json")) if p.device_type == CUDA]
        assert gpu.device == "cuda:0"
        assert gpu.peak_allocated == timing["max_memory_allocated"]
        assert gpu.peak_reserved == timing["max_memory_reserved"]


def test_checkpointing_lowers_the_peak_and_it_comes_in_backward(h200):
    plain = memory_peaks(read_trace(h200 / f"{MEM}.json"))[0]
    ckpt = memory_peaks(read_trace(h200 / f"{CKPT}.json"))[0]
    assert ckpt.peak_allocated < plain.peak_allocated
    assert plain.peak_allocated_in == ckpt.peak_allocated_in == "backward"
    assert plain.peak_allocated_step == "ProfilerStep#2"
    # what was allocated before the first event (weights, optimizer state, the batch) is about the same in both
    assert abs(ckpt.allocated_before - plain.allocated_before) < 0.01 * plain.allocated_before


def test_timeline_is_in_time_order_and_adds_up(h200):
    """Each sample's total is the one before it plus its own bytes: the events, sorted, tell one story."""
    samples = memory_timeline(read_trace(h200 / f"{MEM}.json"))
    assert len(samples) == 282
    assert all(a.ts_us <= b.ts_us for a, b in zip(samples, samples[1:]))
    assert all(b.allocated == a.allocated + b.bytes for a, b in zip(samples, samples[1:]))
    assert max(s.allocated for s in samples) == 706182656
    cpu = memory_timeline(read_trace(h200 / f"{MEM}.json"), device_type=CPU)
    assert cpu and all(s.reserved == 0 for s in cpu)


def test_every_step_returns_to_where_it_began(h200):
    steps = allocated_by_step(read_trace(h200 / f"{MEM}.json"))
    assert [s[0] for s in steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert len({s[1] for s in steps}) == 1  # no leak from step to step
    assert all(peak > start for _, start, peak in steps)


def test_no_memory_events_no_memory_facts(h200):
    t = read_trace(h200 / "train-fp32-foreach_bf16_warm_eager.json")
    assert len(t.memory) == 0 and memory_peaks(t) == [] and memory_timeline(t) == []
    assert summarize(t).to_json()["memory"] == []


def test_sequence_numbers_of_cpu_ops(h200):
    path = h200 / "train-fp32-foreach_bf16_warm_eager.json"
    raw = [e for e in raw_events(path) if e.get("ph") == "X"]
    t = read_trace(path)
    want = {i: (e["args"]["Sequence number"], e["args"].get("Fwd thread id", -1)) for i, e in enumerate(raw)
            if e.get("cat") == "cpu_op" and "Sequence number" in e.get("args", {})}
    assert len(want) > 100
    assert {i: t.sequence_of(i) for i in t.seq_event} == want
    assert t.sequence_of(t.indices(name="ProfilerStep#2")[0]) is None
    assert not any(i in t.args for i in t.seq_event)  # kept in their own columns, not as args


def _instant(name="[memory]", ts=5.0, **args):
    base = {"Total Allocated": 1024, "Total Reserved": 2048, "Bytes": 1024, "Device Id": 0, "Device Type": 1}
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "args": {**base, **args}}


def test_odd_memory_events_are_left_out_alike_by_both_parsers(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 1, "dur": 10,
               "args": {"Sequence number": 7, "Fwd thread id": "x"}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
               "args": {"Sequence number": True}},
              _instant(), _instant(ts=6, **{"Bytes": -1024, "Total Allocated": 0}),
              _instant(ts=7, **{"Total Allocated": "1"}), _instant(ts=8, **{"Bytes": 1.5}),
              _instant(ts=9, **{"Device Type": True}), _instant(ts=10, **{"Total Reserved": 2 ** 70}),
              {**_instant(ts=11), "args": None}, {**_instant(), "ts": "soon"}, _instant(name="[other]"),
              {**_instant(ts=12), "ph": "I"}, {**_instant(ts=3), "ph": "X", "dur": 1}]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = read_trace(path)
    assert columns(t) == columns(read_trace(path, parser="json")) == columns(reader_without_msgspec().read_trace(path))
    assert list(t.memory.ts) == [4.0, 5.0, 11.0]  # shifted by the first timed event's start (1)
    assert list(t.memory.allocated) == [1024, 0, 1024]
    assert (list(t.seq_number), list(t.seq_fwd_thread)) == ([7], [-1])
    assert len(t) == 3  # the [memory] event written as a complete event is a timed event like any other
    peak = memory_peaks(t)[0]
    assert (peak.device, peak.peak_allocated, peak.peak_reserved, peak.events) == ("cuda:0", 1024, 2048, 3)


def test_only_memory_events_is_still_no_trace(tmp_path):
    path = tmp_path / "instants.json"
    path.write_text(json.dumps({"traceEvents": [_instant(), _instant(ts=6)]}))
    out = cli("summarize", path)
    assert out.returncode == 2 and "no timed events" in out.stderr and out.stderr.count("\n") == 1


def test_summarize_reports_the_peaks(h200):
    out = cli("summarize", h200 / f"{MEM}.json")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "memory (from the profiler's [memory] events):" in text
    assert "cuda:0   peak allocated 673.5 MiB (706,182,656 B)" in text and "(ProfilerStep#2, in backward)" in text
    assert "peak reserved  802.0 MiB (840,957,952 B); 282 events" in text
    js = cli("summarize", h200 / f"{CKPT}.json", "--json")
    d = json.loads(js.stdout, parse_constant=lambda w: pytest.fail(f"{w} in strict JSON"))
    gpu = d["memory"][0]
    assert (gpu["device"], gpu["peak_allocated_bytes"], gpu["peak_reserved_bytes"]) == ("cuda:0", 556273152, 692060160)
    assert [m["device"] for m in d["memory"]] == ["cuda:0", "cpu"]
    plain = cli("summarize", h200 / "train-fp32-foreach_bf16_warm_eager.json")
    assert "[memory]" not in plain.stdout and json.loads(
        cli("summarize", h200 / "train-fp32-foreach_bf16_warm_eager.json", "--json").stdout)["memory"] == []

