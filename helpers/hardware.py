"""Datasheet figures for GPUs the series is likely to meet (labelled as datasheet, never measured).

Dense tensor-core throughput without sparsity, from the vendors' datasheets,
for the dtype the series uses on that GPU (bf16, or fp16 where bf16 is
missing). A GPU that is not listed simply gets no comparison.
"""

from __future__ import annotations

# name fragment (lower case) -> (dtype, dense TFLOP/s)
_PEAK = [
    ("h200", ("bf16", 989.0)),
    ("h100", ("bf16", 989.0)),  # SXM; the PCIe card is lower
    ("a100", ("bf16", 312.0)),
    ("l40s", ("bf16", 362.0)),
    ("l4", ("bf16", 121.0)),
    ("a10g", ("bf16", 70.0)),
    ("v100", ("fp16", 125.0)),
    ("t4", ("fp16", 65.0)),
]


def datasheet_peak_tflops(gpu_name: str | None) -> tuple[str, float] | None:
    """(dtype, dense TFLOP/s) from the vendor's datasheet, or None for an unlisted GPU."""
    if not gpu_name:
        return None
    n = gpu_name.lower()
    if "h100" in n and "pcie" in n:
        return ("bf16", 756.0)
    for frag, peak in _PEAK:
        if frag in n:
            return peak
    return None


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    """Floating-point operations of a (batched) matrix multiply: 2 per multiply-add."""
    return 2.0 * m * n * k * batch


# name fragment (lower case) -> memory bandwidth in TB/s, from the vendors' datasheets
_BANDWIDTH = [("h200", 4.8), ("h100", 3.35), ("a100-sxm4-80gb", 2.039), ("a100 80gb", 1.935), ("a100", 1.555),
              ("l40s", 0.864), ("l4", 0.3), ("a10g", 0.6), ("v100", 0.9), ("t4", 0.32)]


def datasheet_bandwidth_tbs(gpu_name: str | None) -> float | None:
    """Memory bandwidth (TB/s) from the vendor's datasheet, or None for an unlisted GPU."""
    if not gpu_name:
        return None
    n = gpu_name.lower()
    if "h100" in n and "pcie" in n:
        return 2.0
    for frag, bw in _BANDWIDTH:
        if frag in n:
            return bw
    return None
