"""The trace reader on real traces: every column checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from conftest import raw_events
from helpers.reader.trace import CPU_OP, DRIVER, KERNEL, RUNTIME, read_trace
from helpers.reader.event_fields import ARG_FIELDS


def timed(events):
    return [e for e in events if e.get("ph") == "X"]


@pytest.mark.parametrize("tag", ["64_bf16_cold_eager", "4096_bf16_warm_eager", "4096_bf16_warm_compile",
                                 "attn-sdpa-flash1024_bf16_warm_eager"])
def test_columns_match_the_json(h200, tag):
    path = h200 / f"{tag}.json"
    raw = timed(raw_events(path))
    t = read_trace(path)
    assert len(t) == len(raw)
    t0 = min(e["ts"] for e in raw)
    # Same events, same order, same numbers.
    for i, e in enumerate(raw):
        assert t.name_of(i) == e["name"]
        assert t.cat_table[t.cat_id[i]] == e.get("cat", "")
        assert t.ts[i] == pytest.approx(e["ts"] - t0, abs=1e-3)
        assert t.dur[i] == pytest.approx(e["dur"])
        lane = t.lanes[t.lane[i]]
        assert (lane.pid, lane.tid) == (e["pid"], e["tid"])
        c = e.get("args", {}).get("correlation")
        assert (t.corr[i] if t.corr[i] >= 0 else None) == c
    assert t.t0 == t0
    assert t.device_name == "NVIDIA H200"
    assert t.base_time_ns == json.loads(path.read_bytes())["baseTimeNanoseconds"]


def test_lanes_split_cpu_threads_from_gpu_streams(h200):
    t = read_trace(h200 / "4096_bf16_warm_eager.json")
    gpu = [ln for ln in t.lanes if ln.is_gpu]
    cpu = [ln for ln in t.lanes if not ln.is_gpu and not ln.is_profiler]
    assert gpu and cpu
    for i in range(len(t)):
        assert t.is_gpu(i) == (t.group_of(i) in (KERNEL, "memcpy", "memset", "gpu_annotation"))


def test_nesting_follows_the_dispatch_chain(h200):
    t = read_trace(h200 / "64_bf16_cold_eager.json")
    for mm in t.indices((CPU_OP,), name="aten::mm"):
        chain = [t.name_of(p) for p in t.ancestors(mm)]
        assert chain[:2] == ["aten::matmul", "matmul_add"]
        assert chain[2].startswith("ProfilerStep#")
        assert mm in t.children(t.parent(mm))
        # each event lies inside its parent
        p = t.parent(mm)
        assert t.ts[p] <= t.ts[mm] and t.end_of(mm) <= t.end_of(p) + 1e-3


def test_each_launch_links_to_the_kernel_it_started(h200):
    path = h200 / "4096_bf16_warm_eager.json"
    raw = timed(raw_events(path))
    by_corr = {}
    for e in raw:
        if e["cat"] in ("kernel", "gpu_memset", "gpu_memcpy"):
            by_corr[e["args"]["correlation"]] = e["name"]
    t = read_trace(path)
    launches = [i for i in t.indices((RUNTIME, DRIVER)) if t.gpu_work_of(i)]
    assert len(launches) == len(by_corr)
    for i in launches:
        (j,) = t.gpu_work_of(i)
        assert t.name_of(j) == by_corr[t.corr[i]]
        assert t.launch_of(j) == i
        assert t.ts[j] >= t.ts[i]  # the GPU starts after the CPU asked


def test_old_traces_with_absolute_timestamps(external):
    path = external / "hta_call_stack_backward_thread.json"
    raw = timed(raw_events(path))
    t = read_trace(path)
    assert t.base_time_ns is None
    assert t.t0 == min(e["ts"] for e in raw) > 1e15  # absolute microseconds
    assert min(t.ts) == 0
    assert max(t.ts) == max(e["ts"] for e in raw) - t.t0


def test_gzip_and_plain_give_the_same_trace(h200, tmp_path):
    src = h200 / "4096_bf16_warm_compile.json"
    gz = tmp_path / "same.json.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    a, b = read_trace(src), read_trace(gz)
    assert list(a.ts) == list(b.ts) and list(a.dur) == list(b.dur)
    assert [a.name_of(i) for i in range(len(a))] == [b.name_of(i) for i in range(len(b))]


def test_event_view(h200):
    t = read_trace(h200 / "4096_bf16_warm_eager.json")
    gemm = [e for e in t.events((KERNEL,)) if "nvjet" in e.name]
    assert len(gemm) == 3
    e = gemm[0]
    assert e.is_gpu and e.end == e.start + e.dur
    assert e.args["registers per thread"] > 0
    assert Counter(x.group for x in t.events()) == Counter(t.group_of(i) for i in range(len(t)))


def test_codes_and_tables_give_each_events_name_and_category(h200):
    """name_id/cat_id are per-event codes into name_table/cat_table: the names say which is which."""
    t = read_trace(h200 / "64_bf16_cold_eager.json")
    assert [t.name_table[c] for c in t.name_id] == [t.name_of(i) for i in range(len(t))]
    assert [t.cat_table[c] for c in t.cat_id] == [t[i].cat for i in range(len(t))]
    assert not hasattr(t, "names") and not hasattr(t, "cats")


def test_only_the_args_the_facts_read_are_kept(h200):
    """Of each kernel's, copy's and fill's args, the launch resources, bytes and links; no CPU op keeps any."""
    path = h200 / "block8x256x512_bf16_warm_eager.json"
    raw = timed(raw_events(path))
    t = read_trace(path)
    gpu = [i for i in range(len(t)) if t.is_gpu(i)]
    assert len(gpu) > 70 and set(t.args) == set(gpu)
    for i in gpu:
        assert t.args[i] == {k: v for k, v in raw[i]["args"].items() if k in ARG_FIELDS.values()}
    assert {"registers per thread", "grid", "block", "shared memory"} <= t.args[t.indices((KERNEL,))[0]].keys()
    assert not any(i in t.args for i in t.indices((CPU_OP, RUNTIME)))


# --- CUPTI's range profiler: counter ranges, never kernel time ------------------------------------

CUPTI = "hta_cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz"


def test_range_profiler_events_are_counter_ranges_not_kernels():
    """HTA's range-profiler trace holds no kernel: 77 ranges of 121,431 us each, with hardware counters."""
    from conftest import cli, ext
    from helpers.advice.diagnose import diagnose
    from helpers.facts import summarize
    from helpers.reader.trace import COUNTER_RANGE, GPU_WORK

    path = ext(CUPTI)
    ranges = [e for e in timed(raw_events(path)) if e["cat"] == "cuda_profiler_range"]
    assert len(ranges) == 77 and {e["dur"] for e in ranges} == {121431}
    t = read_trace(path)
    assert not t.on_gpu(GPU_WORK) and len(t.indices((COUNTER_RANGE,))) == 77
    s = summarize(t)
    assert s.kernels == [] and s.kinds == [] and s.balance.device_us == 0 and s.verdict is None
    r = s.counter_ranges
    assert (r.count, r.median_us, r.lanes) == (77, 121431, ["GPU 0 stream 0"])
    assert r.kernels == len({e["name"] for e in ranges})
    want: dict = {}
    for e in ranges:
        for k, v in e["args"].items():
            want[k] = want.get(k, 0) + v
    assert r.counters == want and r.counters["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"] > 10 ** 10
    assert not {"fp32-gemm", "gpu-bound", "cpu-bound"} & {f.rule for f in diagnose(t)}
    out = cli("summarize", path, "--json")
    got = json.loads(out.stdout)
    assert got["kernels"] == [] and got["verdict"] is None
    assert got["counter_ranges"]["count"] == 77 and got["counter_ranges"]["counters"] == want
    text = cli("summarize", path).stdout
    assert "counter ranges (CUPTI's range profiler" in text and "77 ranges of 16 kernels on GPU 0 stream 0" in text
    assert "GPU work by name" not in text and "GPU-bound" not in text and "no verdict" in text


def _range_trace(n: int) -> dict:
    """Kernels and range-profiler events alike named, with counters of every JSON type among their args.

    A thread name now and then sends its batch through the event-by-event path; the others go a column at a time.
    """
    events = []
    for k in range(n):
        if k % 500 == 250:
            events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}})
        if k % 700 == 100:
            events.append({"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 10 * k})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 10 * k, "dur": 2, "args": {"correlation": k}})
        events.append({"ph": "X", "cat": "kernel", "name": f"gemm_{k % 7}", "pid": 0, "tid": 7,
                       "ts": 10 * k + 3, "dur": 4, "args": {"correlation": k, "grid": [1, 1, 1]}})
        if k % 3 == 0:
            events.append({"ph": "X", "cat": "cuda_profiler_range", "name": f"gemm_{k % 7}", "pid": 0, "tid": 0,
                           "ts": 10 * k + 3, "dur": 500, "args": {
                               "sm__inst.sum": k, "dram__bytes.sum": k * 0.5, "flag": True, "note": "x",
                               "nested": {"a": 1}, "device": 0, "correlation": k}})
    return {"traceEvents": events}


def test_counter_ranges_read_alike_on_every_path(tmp_path):
    """msgspec and the json module, with and without numpy-free columns, plain and gzip: the same counters."""
    from conftest import columns, reader_without_msgspec
    from helpers.facts import summarize

    doc = _range_trace(3000)  # about 600 KB: many batches, some with ranges and some without
    plain = tmp_path / "ranges.json"
    plain.write_text(json.dumps(doc))
    gz = tmp_path / "ranges.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    t = read_trace(plain)
    for other in (read_trace(plain, parser="json"), read_trace(gz), reader_without_msgspec().read_trace(plain)):
        assert columns(other) == columns(t)
    ranges = [i for i in range(len(t)) if t.group_of(i) == "counter_range"]
    assert len(ranges) == 1000
    # only finite numbers are counters; the kept args (device, correlation) are not
    assert t.counters(ranges[3]) == {"sm__inst.sum": 9, "dram__bytes.sum": 4.5}
    assert t.args[ranges[3]] == {"correlation": 9, "device": 0}
    s = summarize(t)
    assert [k.count for k in s.kernels] == [429, 429, 429, 429, 428, 428, 428]  # the kernels alone
    assert s.counter_ranges.counters == {"dram__bytes.sum": sum(k * 0.5 for k in range(0, 3000, 3)),
                                         "sm__inst.sum": sum(range(0, 3000, 3))}


def test_a_counter_that_msgspec_cannot_hold(tmp_path):
    """1e999 is valid JSON that no float holds: the json module reads it as inf, and inf is no counter."""
    text = json.dumps(_range_trace(3)).replace('"sm__inst.sum": 0,', '"sm__inst.sum": 1e999, "big": 123456789012345678901234567890,')
    path = tmp_path / "inf.json"
    path.write_text(text)
    for parser in ("msgspec", "json"):
        t = read_trace(path, parser=parser)
        first = next(i for i in range(len(t)) if t.group_of(i) == "counter_range")
        assert t.counters(first) == {"big": 123456789012345678901234567890, "dram__bytes.sum": 0.0}
