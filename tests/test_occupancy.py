"""Theoretical occupancy by the CUDA occupancy calculator's rules, on each architecture the series meets.

Every expected answer below is worked out by hand, the way the occupancy
calculator does it, from the CUDA C++ Programming Guide's per-architecture
limits:

* registers: each warp gets ``regs x 32`` registers rounded up to a unit of
  256; the SM's 65,536 registers hold ``floor(65536 / that)`` warps, rounded
  down to a multiple of 4 (warps are allocated in groups of 4, one per SM
  sub-partition); divided by the block's warps, that many blocks;
* shared memory: each block takes its shared memory plus 1 KiB reserved by
  the system (sm_80 and newer), rounded up to 128 bytes (256 before sm_80);
* threads: the SM's resident warps divided by the block's warps;
* blocks: the architecture's maximum resident blocks per SM, which Kineto
  never records: 32 on sm_70, sm_80 and sm_90; 16 on sm_75 and sm_86; 24 on sm_89.

The fewest blocks any of these allows is the answer, and "limited by" names
each limit that allows exactly that many.
"""

from __future__ import annotations

import pytest

from helpers import facts
from helpers.facts import hardware, kernel_kinds as kk
from helpers.reader.trace import read_trace


def only_capability(major: int, minor: int) -> dict:
    """deviceProperties with nothing but the compute capability: every limit must come from the table."""
    return {"computeMajor": major, "computeMinor": minor}


def occupancy(cap: tuple[int, int], regs: int, smem: int, threads: int) -> tuple:
    o = facts.theoretical_occupancy(regs, smem, threads, only_capability(*cap))
    assert o.unknown is None, o.unknown
    return o.blocks_per_sm, o.warps_per_sm, o.max_warps_per_sm, o.limited_by


CASES = [
    # --- sm_70 (V100): 64 warps, 32 blocks, 96 KiB shared memory, nothing reserved, 256-byte units
    # 32 regs x 32 = 1024 per warp: 64 warps, 8 blocks of 8 warps; threads 64 / 8 = 8 too.
    ((7, 0), 32, 0, 256, (8, 64, 64, "registers and threads")),
    # one-warp blocks: registers 64, threads 64, and the 32-block limit decides (16 was the old guess).
    ((7, 0), 32, 0, 32, (32, 32, 64, "blocks")),
    # 64 regs: 2048 per warp, 32 warps, 8 blocks of 4 warps; 48 KiB each: 98304 / 49152 = 2 blocks.
    ((7, 0), 64, 48 * 1024, 128, (2, 8, 64, "shared memory")),
    # --- sm_75 (T4): 32 warps, 16 blocks, 64 KiB shared memory, nothing reserved, 256-byte units
    # one-warp blocks: threads allow 32, the 16-block limit decides: 16 of 32 warps.
    ((7, 5), 32, 0, 32, (16, 16, 32, "blocks")),
    # 128 regs: 4096 per warp, 16 warps, 2 blocks of 8 warps; threads 32 / 8 = 4.
    ((7, 5), 128, 0, 256, (2, 16, 32, "registers")),
    # 10,000 B rounds up to 10,240: 65536 / 10240 = 6 blocks; registers 48 warps / 3 = 16; threads 32 / 3 = 10.
    ((7, 5), 40, 10_000, 96, (6, 18, 32, "shared memory")),
    # --- sm_80 (A100): 64 warps, 32 blocks, 164 KiB shared memory, 1 KiB reserved, 128-byte units
    # the article's flash kernel: 255 regs -> 8160, rounded to 8192 per warp: 8 warps, 2 blocks of 4.
    ((8, 0), 255, 0, 128, (2, 8, 64, "registers")),
    # 40 regs: 1280 per warp; 65536 / 1280 = 51 warps, rounded down to 48: 16 blocks of 3 warps (not 17).
    ((8, 0), 40, 0, 96, (16, 48, 64, "registers")),
    # 48 KiB + 1 KiB reserved = 50,176 B: 167936 / 50176 = 3 blocks; registers and threads allow 8.
    ((8, 0), 32, 48 * 1024, 256, (3, 24, 64, "shared memory")),
    # one-warp blocks: registers and threads allow 64, shared memory 164 (1 KiB each): 32 blocks, half the warps.
    ((8, 0), 32, 0, 32, (32, 32, 64, "blocks")),
    # --- sm_86 (A10G, RTX 30xx): 48 warps, 16 blocks, 100 KiB shared memory, 1 KiB reserved
    # two-warp blocks: threads allow 48 / 2 = 24, the 16-block limit decides: 32 of 48 warps.
    ((8, 6), 32, 0, 64, (16, 32, 48, "blocks")),
    # 64 regs: 2048 per warp, 32 warps, 4 blocks of 8 warps; threads 48 / 8 = 6.
    ((8, 6), 64, 0, 256, (4, 32, 48, "registers")),
    # 32 KiB + 1 KiB = 33,792 B: 102400 / 33792 = 3 blocks of 4 warps.
    ((8, 6), 32, 32 * 1024, 128, (3, 12, 48, "shared memory")),
    # --- sm_89 (L4, L40S): 48 warps, 24 blocks, 100 KiB shared memory, 1 KiB reserved
    # one-warp blocks: threads allow 48, the 24-block limit decides: half the warps.
    ((8, 9), 32, 0, 32, (24, 24, 48, "blocks")),
    # two-warp blocks: threads 48 / 2 = 24 and blocks 24 agree: full occupancy.
    ((8, 9), 32, 0, 64, (24, 48, 48, "threads and blocks")),
    # 96 regs: 3072 per warp; 65536 / 3072 = 21 warps, rounded down to 20: 5 blocks of 4 warps.
    ((8, 9), 96, 0, 128, (5, 20, 48, "registers")),
    # --- sm_90 (H100, H200): 64 warps, 32 blocks, 228 KiB shared memory, 1 KiB reserved
    # 34 regs -> 1088, rounded to 1280 per warp: 51 warps, rounded down to 48: 12 blocks of 4 warps, 75%.
    ((9, 0), 34, 0, 128, (12, 48, 64, "registers")),
    # 168 regs: 5376 per warp, 12 warps, one block of 12; 213,188 + 1024 B rounds to 214,272: one block.
    ((9, 0), 168, 213_188, 384, (1, 12, 64, "registers and shared memory")),
    # 1024-thread blocks of 32 warps: registers (64 warps) and threads both allow 2.
    ((9, 0), 32, 0, 1024, (2, 64, 64, "registers and threads")),
    # one-warp blocks: registers and threads allow 64, shared memory 228 (1 KiB each): 32 blocks.
    ((9, 0), 32, 0, 32, (32, 32, 64, "blocks")),
]


@pytest.mark.parametrize("cap,regs,smem,threads,expected", CASES,
                         ids=[f"sm_{c[0][0]}{c[0][1]}-{c[1]}r-{c[2]}B-{c[3]}t" for c in CASES])
def test_occupancy_follows_the_calculator(cap, regs, smem, threads, expected):
    assert occupancy(cap, regs, smem, threads) == expected


def test_every_architecture_in_the_table_is_tested():
    assert {c[0] for c in CASES} >= {(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0)}
    assert {(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0)} <= set(hardware.ARCHITECTURES)


def test_what_kineto_measured_wins_over_the_table():
    """A GPU whose SM holds fewer registers than its architecture's row says is computed with what it has."""
    props = {**only_capability(9, 0), "regsPerMultiprocessor": 32768}
    o = facts.theoretical_occupancy(34, 0, 128, props)
    assert (o.blocks_per_sm, o.limited_by) == (6, "registers")  # 32768 / 1280 = 25 warps -> 24 -> 6 blocks


def load(h200, tag):
    return read_trace(h200 / f"{tag}.json")


def test_the_h200_traces_kernels(h200):
    """The real kernels of the reference set, with the trace's own deviceProperties."""
    t = load(h200, "4096_bf16_warm_eager")
    device = t.devices[0]
    ks = {k.kind: k for k in facts.kernels(t)}
    gemm, add = ks[kk.GEMM].resources, ks[kk.ELEMENTWISE].resources
    assert (gemm.registers_per_thread, gemm.shared_memory, gemm.threads_per_block) == (168, 213_188, 384)
    o = facts.theoretical_occupancy(gemm.registers_per_thread, gemm.shared_memory, gemm.threads_per_block, device)
    assert (o.blocks_per_sm, o.warps_per_sm, o.architecture) == (1, 12, "sm_90")
    assert o.blocks_per_sm == gemm.blocks_per_sm  # CUPTI's own figure for the launch: one block per SM
    assert (add.registers_per_thread, add.shared_memory, add.threads_per_block) == (34, 0, 128)
    o = facts.theoretical_occupancy(add.registers_per_thread, add.shared_memory, add.threads_per_block, device)
    assert (o.blocks_per_sm, o.occupancy, o.limited_by) == (12, 0.75, "registers")
    assert 100 * o.occupancy == add.est_achieved_occupancy_pct  # CUPTI estimates 75% too


@pytest.mark.parametrize("tag,blocks,pct", [
    # flash: 255 regs -> 8192 per warp: 8 warps, 2 blocks of 4; CUPTI estimates 13%.
    ("attn-sdpa-flash1024_bf16_warm_eager", 2, 12.5),
    # memory-efficient: 128 regs -> 4096 per warp: 16 warps, 4 blocks of 4; CUPTI estimates 25%.
    ("attn-sdpa-efficient1024_bf16_warm_eager", 4, 25.0),
])
def test_the_h200_attention_kernels(h200, tag, blocks, pct):
    t = load(h200, tag)
    (k,) = [k for k in facts.kernels(t) if k.kind == kk.ATTENTION]
    r = k.resources
    o = facts.theoretical_occupancy(r.registers_per_thread, r.shared_memory, r.threads_per_block, t.devices[0])
    assert (o.blocks_per_sm, 100 * o.occupancy, o.limited_by) == (blocks, pct, "registers")
    assert abs(r.est_achieved_occupancy_pct - pct) <= 1


def test_an_unknown_architecture_says_so():
    o = facts.theoretical_occupancy(32, 0, 128, {"computeMajor": 12, "computeMinor": 0,
                                                "regsPerMultiprocessor": 65536, "maxThreadsPerMultiprocessor": 1536})
    assert o.unknown.startswith("unknown architecture sm_120:") and "sm_90" in o.unknown
    assert o.blocks_per_sm is None and o.occupancy is None and o.limited_by is None


@pytest.mark.parametrize("props", [{}, {"computeMajor": "9"}, {"computeMajor": 9}, None, [1, 2],
                                   {"computeMajor": 9.5, "computeMinor": 0}, {"computeMajor": True, "computeMinor": 0}])
def test_no_compute_capability_is_no_guess(props):
    o = facts.theoretical_occupancy(32, 0, 128, props)
    assert o.unknown == "unknown architecture: the trace's deviceProperties name no compute capability"
    assert o.blocks_per_sm is None


@pytest.mark.parametrize("regs,smem,threads,words", [
    (32, 0, 0, "no usable block size"), (32, 0, 2048, "2048 threads per block is more than sm_90 allows (1024)"),
    (256, 0, 128, "256 registers per thread"), (32, 240_000, 128, "240000 bytes of shared memory"),
    (float("inf"), 0, 128, "no usable"),
])
def test_a_kernel_that_cannot_launch_gets_a_reason(regs, smem, threads, words):
    o = facts.theoretical_occupancy(regs, smem, threads, only_capability(9, 0))
    assert o.blocks_per_sm is None and words in o.unknown


def test_nonsense_from_the_trace_is_no_answer_not_a_crash():
    props = {**only_capability(9, 0), "maxThreadsPerMultiprocessor": 16}
    o = facts.theoretical_occupancy(32, 0, 128, props)
    assert o.blocks_per_sm is None and "16 threads per SM, less than one warp of 32" in o.unknown


def test_an_unknown_architecture_draws_without_limits(h200):
    import matplotlib

    matplotlib.use("Agg")
    from helpers.lesson import plots

    t = load(h200, "4096_bf16_warm_eager")
    ks = [(k.kind, k.resources) for k in facts.kernels(t) if k.resources.registers_per_thread]
    fig = plots.resources(ks, t.devices[0])
    assert [ln.get_xdata()[0] for ax in fig.axes for ln in ax.lines] == [255, 227.0, 1024, 32]
    fig = plots.resources(ks, {**t.devices[0], "computeMajor": 12})
    assert not any(ax.lines for ax in fig.axes) and "unknown architecture sm_120" in fig._suptitle.get_text()


@pytest.mark.parametrize("name,dtype,tflops,tbs", [
    ("NVIDIA H200", "bf16", 989.0, 4.8), ("NVIDIA H100 PCIe", "bf16", 756.0, 2.0),
    ("NVIDIA H100 80GB HBM3", "bf16", 989.0, 3.35), ("NVIDIA A100-SXM4-80GB", "bf16", 312.0, 2.039),
    ("NVIDIA A100 80GB PCIe", "bf16", 312.0, 1.935), ("NVIDIA A100-SXM4-40GB", "bf16", 312.0, 1.555),
    ("NVIDIA L4", "bf16", 121.0, 0.3), ("NVIDIA L40S", "bf16", 362.0, 0.864), ("NVIDIA A10G", "bf16", 70.0, 0.6),
    ("Tesla V100-SXM2-16GB", "fp16", 125.0, 0.9), ("Tesla T4", "fp16", 65.0, 0.32),
])
def test_datasheets_by_name(name, dtype, tflops, tbs):
    assert hardware.datasheet_peak_tflops(name) == (dtype, tflops)
    assert hardware.datasheet_bandwidth_tbs(name) == tbs


@pytest.mark.parametrize("name", ["NVIDIA L40", "NVIDIA GeForce RTX 4090", "AMD Instinct MI250X", "", None])
def test_an_unlisted_gpu_gets_no_datasheet(name):
    """'L40' is not an L4 nor an L40S: a word must match, not a piece of one."""
    assert hardware.datasheet_peak_tflops(name) is None and hardware.datasheet_bandwidth_tbs(name) is None


def test_datasheet_dtype_follows_the_architecture():
    for d in hardware.DATASHEETS:
        if d.vendor == "amd":  # its capability is a gfx version: no CUDA row; bf16 on CDNA 2 and 3
            assert d.dtype == "bf16"
            continue
        hardware.architecture(d.capability)  # every listed GPU's architecture has a row
        assert d.dtype == ("bf16" if d.capability >= (8, 0) else "fp16")
