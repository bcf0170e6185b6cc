"""Facts from the H200 reference traces, each checked against what the trace or table holds."""

from __future__ import annotations

import re
import statistics
from collections import Counter

import pytest

from conftest import raw_events
from helpers import facts
from helpers.facts import kernel_kinds as kk
from helpers.reader.trace import read_trace


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
    assert big.verdict == "GPU-bound" and big.ratio >= facts.GPU_BOUND_RATIO
    assert small.verdict == "CPU-bound" and small.ratio < 0.1
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
    (memset,) = [c for c in facts.copies(t) if c.kind == kk.FILL]
    assert memset.sizes == {4: 3}
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
    assert [b.name for b in no_wait.buffer_requests] == ["Activity Buffer Request"]
    assert no_wait.buffer_requests[0].dur_us > 0


def test_closing_synchronize(h200):
    a = facts.artifacts(load(h200, "64_bf16_cold_eager"))
    assert a.closing_sync.name == "cudaDeviceSynchronize"
    assert a.closing_sync.idle_share > 0.9  # nothing left to wait for at 64x64
    big = facts.artifacts(load(h200, "4096_bf16_cold_eager"))
    assert big.closing_sync.idle_share < a.closing_sync.idle_share


def test_dispatch_chain(h200):
    chain = facts.dispatch_chain(load(h200, "64_bf16_cold_eager"))
    names = chain.names()
    assert names[:4] == ["ProfilerStep#2", "matmul_add", "aten::matmul", "aten::mm"]
    mm = next(n for _, n in chain.walk() if n.name == "aten::mm")
    (launch,) = mm.children
    assert [g.kind for g in launch.gpu] == [kk.GEMM]
    add = next(n for _, n in chain.walk() if n.name == "aten::add")
    assert [g.kind for g in add.children[0].gpu] == [kk.ELEMENTWISE]


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
    copies = {r.name: r for r in facts.copies(t)}
    dtod = copies["Memcpy DtoD (Device -> Device)"]
    assert dtod.sizes == {4096 * 4096 * 2: 3}  # the bf16 bias, copied before the GEMM
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
    assert s["device"] == "NVIDIA H200" and s["verdict"] == "GPU-bound"
    assert {"name", "kind", "count", "total_us", "median_us"} <= set(s["kernels"][0])
    assert s["memcpy"] == [{"name": "Memset (Device)", "count": 3, "bytes": 12}]


# --- the facts the notebooks' reveals read ---------------------------------------------------


def test_work_per_call_is_the_last_step(h200):
    t = load(h200, "4096_bf16_warm_eager")
    assert facts.work_per_call(t) == facts.gpu_work_per_step(t)[-1][1] == {kk.GEMM: 1, kk.ELEMENTWISE: 1, kk.FILL: 1}
    assert facts.work_per_call(load(h200, "linear1024x32x64_bf16_warm_eager")) == {kk.GEMM: 1}


def test_top_kernel_is_the_costliest_of_its_kind(h200):
    t = load(h200, "attn-naive1024_bf16_warm_eager")
    g = facts.top_kernel(t, kk.GEMM)
    assert g.kind == kk.GEMM and g.total_us == max(k.total_us for k in facts.kernels(t) if k.kind == kk.GEMM)
    assert facts.top_kernel(t, kk.TRITON) is None


def test_occupancy_of_the_h200_kernels(h200):
    t = load(h200, "4096_bf16_warm_eager")
    dev = t.devices[0]
    gemm, add = facts.top_kernel(t, kk.GEMM), facts.top_kernel(t, kk.ELEMENTWISE)
    o = facts.occupancy(gemm, dev)
    assert (o.blocks_per_sm, o.limited_by) == (1, "registers and shared memory")  # 168 regs x 384 threads, 213 KB smem
    a = facts.occupancy(add, dev)
    assert (a.blocks_per_sm, a.limited_by, round(a.occupancy, 2)) == (12, "registers", 0.75)  # 34 regs: 12 blocks of 4 warps


def test_occupancy_queries_only_in_the_first_step(h200):
    first = load(h200, "64_bf16_cold_eager_s0-0-3")
    by_step = facts.occupancy_queries_by_step(first)
    assert [s for s, q in by_step if q] == ["ProfilerStep#0"]
    assert facts.ops_around(first, kk.is_occupancy_query) == {"aten::mm"}
    raw = [e for e in raw_events(h200 / "64_bf16_cold_eager_s0-0-3.json") if "Occupancy" in e.get("name", "")]
    assert sum(by_step[0][1].values()) == len(raw)
    assert all(not q for _, q in facts.occupancy_queries_by_step(load(h200, "64_bf16_cold_eager")))


def test_kineto_estimate_splits_at_the_default_shared_memory_limit(h200):
    t = load(h200, "mlp64x128x768x3072_bf16_warm_compile")
    limit = t.devices[0]["sharedMemPerBlock"]
    s = facts.estimate_by_shared_memory(t, limit)
    assert s.above and s.above_zero == s.above  # the GEMMs: > 48 KiB, estimate 0
    assert s.within and s.within_nonzero == s.within  # the Triton kernel: no shared memory, estimate > 0


def test_launches_under_and_child_ops(h200):
    t = load(h200, "8x64_bf16_warm_eager")
    assert facts.launches_under(t, "aten::bmm") == 3  # one GEMM in each recorded step
    assert facts.launches_under(t, "aten::expand") == 0 and facts.launches_under(t, "aten::_unsafe_view") == 0
    naive = load(h200, "attn-naive1024_bf16_warm_eager")
    assert facts.child_ops(naive, "aten::masked_fill")[-2:] == ["aten::clone", "aten::masked_fill_"]


def test_gpu_time_by_top_op_adds_up_to_the_call(h200):
    t = load(h200, "attn-naive1024_bf16_warm_eager")
    parts = facts.gpu_time_by_top_op(t, "attn_fwd")
    assert set(parts) >= {"aten::matmul", "aten::div", "aten::masked_fill", "aten::softmax"}
    assert sum(parts.values()) == pytest.approx(facts.gpu_time_per_call(t, "attn_fwd"))
    assert max(parts, key=parts.get) == "aten::masked_fill"  # the copy plus the fill over the whole score matrix


def test_compiled_regions_and_recompiles():
    regions = facts.compiled_region_counts(["Torch-Compiled Region: 0/0", "aten::mm", "Torch-Compiled Region: 0/1",
                                            "Torch-Compiled Region: 0/1", "Torch-Compiled Region: 1/0"])
    assert regions == {"Torch-Compiled Region: 0/0": 1, "Torch-Compiled Region: 0/1": 2, "Torch-Compiled Region: 1/0": 1}
    assert facts.recompiles(regions) == ["Torch-Compiled Region: 0/1"]
    assert facts.recompiles({"Torch-Compiled Region: 0/0": 3}) == []


def test_median_step_and_main_thread(h200):
    from helpers.reader.trace import read_trace

    t = read_trace(h200 / "64_bf16_warm_eager.json")
    st = facts.steps(t)
    assert facts.median_step_us(t) == statistics.median(s.dur_us for s in st)
    step_lane = {t.lane[i] for i in t.indices(prefix="ProfilerStep#") if not t.is_gpu(i)}
    assert step_lane == {facts.main_thread(t)}
