"""What the series knows about GPUs: per-architecture limits and per-GPU datasheet figures.

Two tables, and nothing else in the package states a hardware number:

* :data:`ARCHITECTURES`, keyed by compute capability: the per-SM limits of the
  CUDA C++ Programming Guide's table "Technical Specifications per Compute
  Capability" [guide], plus the allocation rules of the CUDA occupancy
  calculator [calc]. Kineto's ``deviceProperties`` carry some of these (see
  :func:`device_architecture`) but never the maximum resident blocks per SM,
  the shared memory reserved per block or the allocation granularities.
* :data:`DATASHEETS`, keyed by name: dense tensor-core throughput and memory
  bandwidth from the vendors' datasheets (labelled as datasheet, never
  measured).

An architecture or GPU that is not listed is said to be unknown; nothing is
guessed for it.

[guide] https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#features-and-technical-specifications-technical-specifications-per-compute-capability
[calc] the CUDA Occupancy Calculator, and ``cuda_occupancy.h`` (in the CUDA
toolkit's ``include/``), which implements the same rules.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

KiB = 1024


class UnknownArchitecture(LookupError):
    """A compute capability the table has no row for, or a trace that names none."""


@dataclass(frozen=True)
class Architecture:
    """The per-SM limits of one compute capability, which decide theoretical occupancy."""

    capability: tuple[int, int]
    examples: str  # GPUs of this architecture the series is likely to meet
    max_threads_per_sm: int  # [guide] maximum number of resident threads per SM
    max_blocks_per_sm: int  # [guide] maximum number of resident blocks per SM
    shared_memory_per_sm: int  # [guide] maximum amount of shared memory per SM, bytes
    shared_memory_per_block: int  # [guide] maximum shared memory per block (opt-in), bytes
    # [guide] "1 KB of shared memory is reserved for system use" per block from sm_80 on (the guide's
    # compute capability 8.x and 9.0 sections; cudaDeviceProp.reservedSharedMemPerBlock on the GPU)
    reserved_shared_memory_per_block: int
    shared_memory_granularity: int  # [calc] shared memory is allocated per block in units of this
    registers_per_sm: int = 64 * KiB  # [guide] number of 32-bit registers per SM, every listed architecture
    max_registers_per_thread: int = 255  # [guide] every listed architecture
    register_allocation_unit: int = 256  # [calc] registers are given to each warp in units of 256
    # [calc] warps take registers in groups of 4: an SM has four sub-partitions, each holding whole warps
    warp_allocation_granularity: int = 4
    max_threads_per_block: int = 1024  # [guide] every listed architecture
    warp_size: int = 32  # [guide] every listed architecture

    @property
    def name(self) -> str:
        """``sm_90`` for compute capability 9.0."""
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def source(self) -> str:
        """Where the row's numbers come from."""
        return (f"CUDA C++ Programming Guide, technical specifications per compute capability, column "
                f"{self.capability[0]}.{self.capability[1]}; allocation rules of the CUDA occupancy calculator "
                "(cuda_occupancy.h)")

    @property
    def max_warps_per_sm(self) -> int:
        """[guide] maximum number of resident warps per SM."""
        return self.max_threads_per_sm // self.warp_size


#: compute capability -> its limits: the guide's table, one column per row (see Architecture.source);
#: the shared memory granularity is cuda_occupancy.h's (256 bytes before sm_80, 128 from sm_80 on).
#: Columns: capability, examples, threads per SM, blocks per SM, shared memory per SM, per block (opt-in),
#: reserved per block, shared memory granularity.
ARCHITECTURES: dict[tuple[int, int], Architecture] = {a.capability: a for a in (
    Architecture((7, 0), "V100", 2048, 32, 96 * KiB, 96 * KiB, 0, 256),
    Architecture((7, 2), "Jetson AGX Xavier", 2048, 32, 96 * KiB, 96 * KiB, 0, 256),
    Architecture((7, 5), "T4, RTX 20xx", 1024, 16, 64 * KiB, 64 * KiB, 0, 256),
    Architecture((8, 0), "A100, A30", 2048, 32, 164 * KiB, 163 * KiB, 1 * KiB, 128),
    Architecture((8, 6), "A10G, A10, RTX 30xx", 1536, 16, 100 * KiB, 99 * KiB, 1 * KiB, 128),
    Architecture((8, 7), "Jetson Orin", 1536, 16, 164 * KiB, 163 * KiB, 1 * KiB, 128),
    Architecture((8, 9), "L4, L40S, RTX 40xx", 1536, 24, 100 * KiB, 99 * KiB, 1 * KiB, 128),
    Architecture((9, 0), "H100, H200", 2048, 32, 228 * KiB, 227 * KiB, 1 * KiB, 128),
    Architecture((10, 0), "B200", 2048, 32, 228 * KiB, 227 * KiB, 1 * KiB, 128),
)}


def architecture(capability: tuple[int, int]) -> Architecture:
    """The table's row for a compute capability; :class:`UnknownArchitecture` when there is none."""
    row = ARCHITECTURES.get(tuple(capability))
    if row is None:
        known = ", ".join(a.name for a in ARCHITECTURES.values())
        raise UnknownArchitecture(
            f"unknown architecture sm_{capability[0]}{capability[1]}: helpers/facts/hardware.py has limits for "
            f"{known} only; add a row from the CUDA programming guide's table to get its occupancy")
    return row


def has_native_bf16(capability: tuple[int, int]) -> bool:
    """bfloat16 tensor cores came with sm_80 (Ampere); older GPUs only emulate it, slowly."""
    return tuple(capability) >= (8, 0)


# Kineto's deviceProperties key -> the Architecture field it measures on the GPU itself
_KINETO_FIELDS = (
    ("maxThreadsPerMultiprocessor", "max_threads_per_sm"),
    ("maxThreadsPerMultiProcessor", "max_threads_per_sm"),  # the spelling of older Kineto builds
    ("regsPerMultiprocessor", "registers_per_sm"),
    ("sharedMemPerMultiprocessor", "shared_memory_per_sm"),
    ("sharedMemPerBlockOptin", "shared_memory_per_block"),
    ("maxThreadsPerBlock", "max_threads_per_block"),
    ("warpSize", "warp_size"),
)


def _whole(v: object, least: int = 1) -> int | None:
    """A whole number of at least ``least`` from a trace's JSON, or None for anything else."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        v = int(v)
    return v if isinstance(v, int) and v >= least else None


def device_architecture(device: object) -> Architecture:
    """The limits of the GPU a trace was recorded on.

    ``device`` is one of Kineto's ``deviceProperties``. What it measured on
    the GPU (registers, threads and shared memory per SM, warp size) wins;
    the table fills in what Kineto never records. A trace without a compute
    capability, or with one the table lacks, raises :class:`UnknownArchitecture`.
    """
    props = device if isinstance(device, dict) else {}
    major, minor = _whole(props.get("computeMajor")), _whole(props.get("computeMinor"), least=0)
    if major is None or minor is None:
        raise UnknownArchitecture("unknown architecture: the trace's deviceProperties name no compute capability")
    row = architecture((major, minor))
    measured = {name: v for key, name in _KINETO_FIELDS if (v := _whole(props.get(key))) is not None}
    return dataclasses.replace(row, **measured)


# --- datasheets --------------------------------------------------------------------


@dataclass(frozen=True)
class Datasheet:
    """A GPU's vendor figures: dense throughput (no sparsity) and memory bandwidth.

    Datasheets print tensor-core figures "with sparsity" (marked with an
    asterisk); the dense figure, the one a dense matrix multiply can reach, is
    half of it and is the one held here. ``None``: the datasheet gives no such
    figure (Volta and Turing have no TF32 tensor cores).
    """

    words: tuple[str, ...]  # every one of them is a word of the name torch reports (lower case)
    capability: tuple[int, int]
    dense_tflops: float  # 16-bit tensor cores, in the series' dtype on this GPU: bf16, or fp16 where bf16 is emulated
    bandwidth_tbs: float
    fp32_tflops: float | None = None  # FP32 on the CUDA cores (no tensor cores): what plain float32 math can reach
    tf32_tflops: float | None = None  # TF32 tensor cores, dense: float32 matrix multiplies when TF32 is allowed
    source: str = ""  # the datasheet these figures come from
    vendor: str = "nvidia"  # "amd": ``capability`` is then the gfx version ROCm reports, which no CUDA row describes

    @property
    def dtype(self) -> str:
        if self.vendor == "amd":  # CDNA 2 and 3 have bf16 matrix instructions
            return "bf16"
        return "bf16" if has_native_bf16(self.capability) else "fp16"


_H200 = "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column), https://www.nvidia.com/en-us/data-center/h200/"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/"
_A100 = ("NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
         "a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_L40S = "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/"
_L4 = "NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/l4/"
# NVIDIA publishes no datasheet for the A10G (a part made for AWS); its row's two figures predate this column
_A10G = "no vendor datasheet for the A10G (16-bit and bandwidth figures unsourced; no FP32/TF32 figure)"
_V100 = ("NVIDIA V100 Tensor Core GPU datasheet (SXM2 column), https://images.nvidia.com/content/technologies/volta/"
         "pdf/volta-v100-datasheet-update-us-1165301-r5.pdf")
_T4 = ("NVIDIA T4 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
       "tesla-t4/t4-tensor-core-datasheet-951643.pdf")

_MI300X = ("AMD Instinct MI300X data sheet, https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/"
           "data-sheets/amd-instinct-mi300x-data-sheet.pdf")
_MI250 = ("AMD Instinct MI250 and MI250X data sheets (one OAM module, two GCDs: the figures here are half of each, for "
          "the one GCD a process sees), https://www.amd.com/en/products/accelerators/instinct/mi200.html")

#: most specific first: the first row whose words all appear in the GPU's name is its datasheet.
#: Columns: name words, capability, 16-bit tensor-core TFLOP/s (dense), memory TB/s, FP32 (CUDA cores) TFLOP/s,
#: TF32 tensor-core TFLOP/s (dense: half the datasheet's "with sparsity" figure), source.
DATASHEETS: tuple[Datasheet, ...] = (
    Datasheet(("h200",), (9, 0), 989.0, 4.8, 67.0, 494.5, _H200),  # TF32 989* (sparse) / 2
    Datasheet(("h100", "pcie"), (9, 0), 756.0, 2.0, 51.0, 378.0, _H100),  # PCIe column; TF32 756* / 2
    Datasheet(("h100",), (9, 0), 989.0, 3.35, 67.0, 494.5, _H100),  # SXM column; TF32 989* / 2
    Datasheet(("a100", "sxm4", "80gb"), (8, 0), 312.0, 2.039, 19.5, 156.0, _A100),  # TF32 156 dense, 312* sparse
    Datasheet(("a100", "80gb"), (8, 0), 312.0, 1.935, 19.5, 156.0, _A100),  # PCIe
    Datasheet(("a100",), (8, 0), 312.0, 1.555, 19.5, 156.0, _A100),  # 40 GB
    Datasheet(("l40s",), (8, 9), 362.0, 0.864, 91.6, 183.0, _L40S),  # TF32 183 dense, 366* sparse
    Datasheet(("l4",), (8, 9), 121.0, 0.3, 30.3, 60.0, _L4),  # TF32 120* / 2
    Datasheet(("a10g",), (8, 6), 70.0, 0.6, None, None, _A10G),  # no vendor FP32/TF32 figure for the A10G
    Datasheet(("v100",), (7, 0), 125.0, 0.9, 15.7, None, _V100),  # Volta: no TF32
    Datasheet(("t4",), (7, 5), 65.0, 0.32, 8.1, None, _T4),  # Turing: no TF32
    # AMD (its "capability" is the gfx version ROCm reports as computeMajor.computeMinor, not a CUDA one)
    Datasheet(("mi300x",), (9, 4), 1307.4, 5.3, 163.4, 653.7, _MI300X, "amd"),  # dense BF16, TF32; FP32 vector
    Datasheet(("mi250x", "gcd"), (9, 0), 191.5, 1.6384, 23.95, None, _MI250, "amd"),  # 383/2, 3.2768/2, 47.9/2
    Datasheet(("mi250", "gcd"), (9, 0), 181.05, 1.6384, 22.65, None, _MI250, "amd"),  # 362.1/2, 3.2768/2, 45.3/2
)

#: ROCm traces often name no GPU (an empty name, or "AMD Radeon Graphics"): (computeMajor, computeMinor, numSms, the
#: CUs ROCm reports) -> the part they fit, from the same data sheets' compute-unit counts
AMD_PARTS = {(9, 4, 304): "AMD Instinct MI300X", (9, 0, 110): "AMD Instinct MI250X GCD",
             (9, 0, 104): "AMD Instinct MI250 GCD"}
_GENERIC_NAMES = ("", "amd radeon graphics")


def identify(devices: list[dict]) -> str | None:
    """The GPU a trace's deviceProperties fit when their name says none (ROCm's empty or generic name): the first
    device's (compute version, compute units) looked up in :data:`AMD_PARTS`; None when nothing fits."""
    for p in devices:
        name = p.get("name")
        if isinstance(name, str) and name.strip().lower() not in _GENERIC_NAMES:
            return None  # it names itself: the datasheet lookup goes by that name
        key = (p.get("computeMajor"), p.get("computeMinor"), p.get("numSms"))
        if key in AMD_PARTS:
            return AMD_PARTS[key]
    return None


def datasheet(gpu_name: str | None) -> Datasheet | None:
    """The datasheet row for a GPU's name ('NVIDIA L4', 'Tesla T4'), or None for an unlisted GPU."""
    words = set(re.split(r"[^a-z0-9]+", (gpu_name or "").lower()))
    return next((d for d in DATASHEETS if words.issuperset(d.words)), None)


def datasheet_peak_tflops(gpu_name: str | None) -> tuple[str, float] | None:
    """(dtype, dense TFLOP/s) from the vendor's datasheet, or None for an unlisted GPU."""
    d = datasheet(gpu_name)
    return (d.dtype, d.dense_tflops) if d else None


def datasheet_bandwidth_tbs(gpu_name: str | None) -> float | None:
    """Memory bandwidth (TB/s) from the vendor's datasheet, or None for an unlisted GPU."""
    d = datasheet(gpu_name)
    return d.bandwidth_tbs if d else None


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    """Floating-point operations of a (batched) matrix multiply: 2 per multiply-add."""
    return 2.0 * m * n * k * batch


def datasheet_fp32_tflops(gpu_name: str | None) -> float | None:
    """FP32 TFLOP/s on the CUDA cores (no tensor cores) from the vendor's datasheet, or None."""
    d = datasheet(gpu_name)
    return d.fp32_tflops if d else None


def datasheet_tf32_tflops(gpu_name: str | None) -> float | None:
    """Dense TF32 tensor-core TFLOP/s from the vendor's datasheet, or None (unlisted GPU, or none: Volta, Turing)."""
    d = datasheet(gpu_name)
    return d.tf32_tflops if d else None
