"""Facts from the H200 reference traces, each checked against what the trace or table holds."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from conftest import raw_events
from helpers import facts
from helpers import kernel_kinds as kk
from helpers.trace import read_trace


def load(h200, tag):
    return read_trace(h200 / f"{tag}.json")


def table_total_us(h200, tag, which):
    """'Self CPU time total: 641.021us' from the profiler table written beside the trace."""
    text = (h200 / f"{tag}.txt").read_text()
    m = re.search(rf"Self {which} time total: ([\d.]+)(us|ms|s)", text)
    value, unit = float(m.group(1)), m.group(2)
    return value * {"us": 1, "ms": 1e3, "s": 1e6}[unit]


def test_steps_are_the_profiler_steps(h200):
    tag = "64_bf16_cold_eager_s0-0-20"
    st = facts.steps(load(h200, tag))
    raw = [e for e in raw_events(h200 / f"{tag}.json") if e.get("name", "").startswith("ProfilerStep#")]
    assert [s.name for s in st] == [f"ProfilerStep#{n}" for n in range(20)]
    assert [s.dur_us for s in st] == [e["dur"] for e in sorted(raw, key=lambda e: e["ts"])]


@pytest.mark.parametrize("tag", ["64_bf16_cold_eager", "4096_bf16_warm_eager", "4096_bf16_warm_compile",
                                 "mlp64x128x768x3072_bf16_warm_eager"])
def test_totals_match_the_profiler_table(h200, tag):
    b = facts.balance(load(h200, tag))
    assert b.self_cpu_us == pytest.approx(table_total_us(h200, tag, "CPU"), rel=0.02)
    assert b.device_us == pytest.approx(table_total_us(h200, tag, "CUDA"), rel=0.02)


def test_verdicts(h200):
    big = facts.balance(load(h200, "4096_bf16_warm_eager"))
    small = facts.balance(load(h200, "64_bf16_cold_eager"))
    assert big.verdict == "compute-bound" and big.ratio >= facts.COMPUTE_BOUND_RATIO
    assert small.verdict == "overhead-bound" and small.ratio < 0.1
    assert 0 < small.gpu_busy_share < big.gpu_busy_share <= 1
    assert small.gpu_idle_share == pytest.approx(1 - small.gpu_busy_share)


def test_kernels_by_kind_count_every_kernel(h200):
    tag = "4096_bf16_warm_eager"
    t = load(h200, tag)
    raw = [e for e in raw_events(h200 / f"{tag}.json") if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    kinds = {k.kind: k for k in facts.kernels_by_kind(t)}
    assert sum(k.count for k in kinds.values()) == len(raw)
    assert set(kinds) == {kk.GEMM, kk.ELEMENTWISE, kk.FILL}
    assert kinds[kk.GEMM].count == kinds[kk.ELEMENTWISE].count == 3  # one of each per active step
    gemm = [e["dur"] for e in raw if "nvjet" in e["name"]]
    assert kinds[kk.GEMM].total_us == pytest.approx(sum(gemm))
    assert kinds[kk.GEMM].median_us == pytest.approx(sorted(gemm)[1])


def test_gemm_resources_come_from_the_kernel_args(h200):
    tag = "4096_bf16_warm_eager"
    raw = next(e for e in raw_events(h200 / f"{tag}.json") if e.get("cat") == "kernel" and "nvjet" in e["name"])
    (gemm,) = [k for k in facts.kernels(load(h200, tag)) if k.kind == kk.GEMM]
    r = gemm.resources
    assert r.registers_per_thread == raw["args"]["registers per thread"]
    assert r.shared_memory == raw["args"]["shared memory"]
    assert r.block == raw["args"]["block"] and r.grid == raw["args"]["grid"]
    assert gemm.launched_by == {"cuLaunchKernelEx": 3}


def test_runtime_calls_are_counted_by_name(h200):
    tag = "4096_bf16_warm_eager"
    raw = Counter(e["name"] for e in raw_events(h200 / f"{tag}.json")
                  if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"))
    calls = {c.name: c.count for c in facts.runtime_calls(load(h200, tag))}
    assert calls == dict(raw)
    assert not any(kk.is_occupancy_query(c) for c in calls)  # Hopper + CUDA 13: no occupancy query


def test_four_byte_memset_before_each_large_gemm(h200):
    t = load(h200, "4096_bf16_warm_eager")
    (memset,) = [c for c in facts.copies(t) if c["kind"] == kk.FILL]
    assert memset["sizes"] == {4: 3}
    launches = facts.launches(t)
    for a, b in zip(launches, launches[1:]):
        if a.kind == kk.FILL:
            assert b.kind == kk.GEMM


def test_launch_latency_is_launch_call_to_kernel_start(h200):
    t = load(h200, "64_bf16_cold_eager")
    found = facts.launches(t)
    lat = facts.launch_latency(t, found)
    assert lat.count == 6
    for x in found:
        assert x.latency_us == pytest.approx(x.work_start_us - x.call_start_us)
        assert x.latency_us > 0
    assert lat.min_us <= lat.median_us <= lat.max_us


def test_annotation_gap_is_annotation_to_first_aten_op(h200):
    tag = "64_bf16_cold_eager"
    raw = [e for e in raw_events(h200 / f"{tag}.json") if e.get("ph") == "X"]
    gaps = facts.annotation_gaps(load(h200, tag), "matmul_add")
    assert [g.step for g in gaps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    ann = sorted((e for e in raw if e["name"] == "matmul_add" and e["cat"] == "user_annotation"),
                 key=lambda e: e["ts"])
    mat = sorted((e for e in raw if e["name"] == "aten::matmul"), key=lambda e: e["ts"])
    for g, a, m in zip(gaps, ann, mat):
        assert g.first_op == "aten::matmul"
        assert g.gap_us == pytest.approx(m["ts"] - a["ts"], abs=1e-3)


def test_buffer_request_only_without_wait_and_warmup(h200):
    with_wait = facts.artifacts(load(h200, "64_bf16_cold_eager"))
    no_wait = facts.artifacts(load(h200, "64_bf16_cold_eager_s0-0-3"))
    assert with_wait.buffer_requests == []
    assert [b["name"] for b in no_wait.buffer_requests] == ["Activity Buffer Request"]
    assert no_wait.buffer_requests[0]["dur_us"] > 0


def test_closing_synchronize(h200):
    a = facts.artifacts(load(h200, "64_bf16_cold_eager"))
    assert a.closing_sync["name"] == "cudaDeviceSynchronize"
    assert a.closing_sync["idle_share"] > 0.9  # nothing left to wait for at 64x64
    big = facts.artifacts(load(h200, "4096_bf16_cold_eager"))
    assert big.closing_sync["idle_share"] < a.closing_sync["idle_share"]


def test_dispatch_chain(h200):
    chain = facts.dispatch_chain(load(h200, "64_bf16_cold_eager"))
    names = chain.names()
    assert names[:4] == ["ProfilerStep#2", "matmul_add", "aten::matmul", "aten::mm"]
    mm = next(n for _, n in chain.walk() if n.name == "aten::mm")
    (launch,) = mm.children
    assert [g["kind"] for g in launch.gpu] == [kk.GEMM]
    add = next(n for _, n in chain.walk() if n.name == "aten::add")
    assert [g["kind"] for g in add.children[0].gpu] == [kk.ELEMENTWISE]


def test_batching_turns_mm_into_bmm(h200):
    t = load(h200, "8x64_bf16_warm_eager")
    names = facts.dispatch_chain(t).names()
    assert "aten::bmm" in names and "aten::mm" not in names
    for op in ("aten::expand", "aten::reshape", "aten::view", "aten::_unsafe_view"):
        assert op in names
    assert facts.ops_per_call(t, "matmul_add") == 12
    assert facts.ops_per_call(load(h200, "64_bf16_warm_eager"), "matmul_add") == 3


def test_compiled_region_and_graph_hash(h200):
    t = load(h200, "4096_bf16_warm_compile")
    c = facts.compiled(t)
    assert c.regions == {"Torch-Compiled Region: 0/0": 3}
    ((h, n),) = c.graph_hashes.items()
    assert n == 3 and len(h) > 20
    copies = {r["name"]: r for r in facts.copies(t)}
    dtod = copies["Memcpy DtoD (Device -> Device)"]
    assert dtod["sizes"] == {4096 * 4096 * 2: 3}  # the bf16 bias, copied before the GEMM
    assert not facts.compiled(load(h200, "4096_bf16_warm_eager")).any


def test_compile_fuses_gelu_and_mul_into_one_triton_kernel(h200):
    eager = {k.kind for k in facts.kernels(load(h200, "mlp64x128x768x3072_bf16_warm_eager"))}
    comp = [k for k in facts.kernels(load(h200, "mlp64x128x768x3072_bf16_warm_compile")) if k.kind == kk.TRITON]
    assert kk.TRITON not in eager
    assert len(comp) == 1 and "gelu" in comp[0].name and "mul" in comp[0].name


def test_summary_json_has_the_documented_keys(h200):
    s = facts.summarize(load(h200, "4096_bf16_warm_eager")).to_json()
    for key in ("device", "steps", "kernels", "memcpy", "runtime_calls", "verdict"):
        assert key in s
    assert s["device"] == "NVIDIA H200" and s["verdict"] == "compute-bound"
    assert {"name", "kind", "count", "total_us", "median_us"} <= set(s["kernels"][0])
    assert s["memcpy"] == [{"name": "Memset (Device)", "count": 3, "bytes": 12}]
