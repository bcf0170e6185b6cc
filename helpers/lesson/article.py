"""The article's own figures, each with the run it came from.

The Hugging Face series *Profiling in PyTorch* ran its scripts on an NVIDIA
A100-SXM4-80GB. Its numbers are quoted in the notebooks beside what this run
shows, never as this run's: every figure here names its run (size, warm or
cold, eager or compile) and where in the series it appears. Where the article
does not say which run a figure came from, the label says that too.

No torch, no screens: plain data that reveals and plots read.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU = "A100-SXM4-80GB"


@dataclass(frozen=True)
class Figure:
    """One number (or finding) from the article, with its run."""

    key: str
    value: float | str
    unit: str  # "us", "ms", "%", "x", "count", "registers" or "" for a finding in words
    run: str  # which of the article's runs: size, dtype, warm/cold, eager/compile, schedule
    where: str  # part and figure of the article series

    @property
    def value_us(self) -> float | None:
        """The figure in microseconds, for a duration; None otherwise."""
        if self.unit == "us":
            return float(self.value)
        if self.unit == "ms":
            return float(self.value) * 1e3
        return None

    def text(self) -> str:
        """The figure as it reads in a sentence: '2.314 ms'."""
        if self.unit in ("", "count"):
            return str(self.value)
        if self.unit == "us":
            return f"{self.value:g} µs"
        if self.unit in ("%", "x"):
            return f"{self.value:g}{'%' if self.unit == '%' else '×'}"
        return f"{self.value:g} {self.unit}"

    @property
    def hardware(self) -> str:
        """'A100' for Part 1, whose text names it; 'GPU' for Parts 2 and 3, which the series review does not name."""
        return "A100" if self.where.startswith("Part 1") else "GPU"

    def label(self, capital: bool = False) -> str:
        """'the article's A100 (64 × 64, bf16, cold, eager; Part 1, figure 1)'; 'The ...' to start a sentence."""
        return f"{'The' if capital else 'the'} article's {self.hardware} ({self.run}; {self.where})"

    def quote(self) -> str:
        """'2.314 ms on the article's A100 (64 × 64, bf16, cold, eager; Part 1, figure 1)'."""
        return f"{self.text()} on {self.label()}"


_P1_64_COLD = "64 × 64, bf16, cold, eager"
_P1_64_WARM = "64 × 64, bf16, warm, eager"
_P1_4096_COLD = "4096 × 4096, bf16, cold, eager"
_P1_4096_WARM = "4096 × 4096, bf16, warm, eager"
_P1_4096_COMPILE = "4096 × 4096, bf16, warm, compile against eager"
# The series review gives Part 3's results, not its shapes: the runs are named by what the review says of them
_P3 = "causal attention, shapes not given in the series review"

FIGURES: dict[str, Figure] = {f.key: f for f in [
    # Part 1: matmul + add (the article itself)
    Figure("self_cpu_64", 2.314, "ms", _P1_64_COLD, "Part 1, figure 1"),
    Figure("self_cuda_64", 23.104, "us", _P1_64_COLD, "Part 1, figure 1"),
    Figure("gemm_kernel", "ampere_bf16_s16816gemm_…", "", "64 × 64 and 4096 × 4096, bf16, eager",
           "Part 1, figures 1 and 2"),
    Figure("self_cpu_4096", 4.908, "ms", _P1_4096_COLD, "Part 1, figure 2"),
    Figure("self_cuda_4096", 4.495, "ms", _P1_4096_COLD, "Part 1, figure 2"),
    Figure("first_step_gap", 228, "us", _P1_64_COLD + ", ProfilerStep#2",
           "Part 1, figure 6: matmul_add to aten::matmul"),
    Figure("warm_steps_even", "with warm-up, the recorded steps took about the same time", "",
           _P1_64_WARM, "Part 1, figure 7"),
    Figure("cpu_gpu_offset", 2.5, "ms", _P1_64_WARM,
           "Part 1, figure 8: 'about 2.5 ms' between the CPU and GPU tracks"),
    Figure("buffer_request", "an Activity Buffer Request on the GPU track before any kernel", "",
           "64 × 64, bf16, eager, wait=0, warmup=0", "Part 1, figure 9"),
    Figure("occupancy_query", "cudaOccupancyMaxActiveBlocksPerMultiprocessor before each GEMM's cudaLaunchKernel; "
           "none before the add's", "", "64 × 64, bf16, eager", "Part 1, figure 14"),
    Figure("add_registers", 32, "registers", "64 × 64, bf16, eager: the add kernel, 0 shared memory",
           "Part 1, figure 16"),
    Figure("closing_sync", 1.78, "ms", "64 × 64, bf16, eager, run not stated",
           "Part 1: the final cudaDeviceSynchronize"),
    Figure("closing_sync_gpu_work", 26, "us", "64 × 64, bf16, eager, run not stated",
           "Part 1: GPU work inside the final synchronize"),
    Figure("closing_sync_idle", 98, "%", "64 × 64, bf16, eager, run not stated",
           "Part 1: the run's idle share, read from the final synchronize"),
    Figure("gemm_typical", 580, "us", _P1_4096_WARM + ", wait=0, warmup=0, active=20", "Part 1, figure 18"),
    Figure("gemm_mean", 1084, "us", _P1_4096_WARM + ", the mean of 5", "Part 1, figure 18"),
    Figure("gemm_mean_over_typical", round(1084 / 580, 2), "x",
           _P1_4096_WARM + ", the article's mean of 5 over its typical GEMM (our division of its two figures)",
           "Part 1, figure 18: a mean of 5 = 1084 µs against about 580 µs typical"),
    Figure("compile_gemm", "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn, the same kernel as eager",
           "", _P1_4096_COMPILE, "Part 1, compile section"),
    Figure("compile_copy", 33, "us", "4096 × 4096, bf16, warm, compile: Memcpy DtoD of 32 MB", "Part 1, compile section"),
    Figure("compile_cpu_cost", 2, "x", _P1_4096_COMPILE + ", CPU cost per step", "Part 1, compile section"),
    # Part 2 and Part 3, as the series review (seed 003) reports them
    Figure("mlp_intermediate", 50, "MB", "an MLP's gelu output written to HBM and read back by mul, eager",
           "Part 2, as the series review reports it"),
    # The review counts 5 kernels for the hand-written version without saying which (out of place or in place);
    # Part 3 itself is not among the source texts, so no per-version count is quoted.
    Figure("handwritten_kernels", 5, "count", _P3 + ", hand-written (the review does not say which version)",
           "Part 3, as the series review reports it"),
    Figure("math_kernels", 20, "count", _P3 + ", SDPA math backend", "Part 3, as the series review reports it"),
    Figure("math_slowdown", 3.7, "x", _P3 + ", SDPA math against the hand-written version",
           "Part 3, as the series review reports it"),
    Figure("flash_occupancy", 13, "%", _P3 + ", flash backend (128 threads × 255 registers)",
           "Part 3, as the series review reports it"),
    Figure("cpu_efficient", 117, "us", _P3 + ", efficient backend, CPU time per call",
           "Part 3, as the series review reports it"),
    Figure("cpu_flash", 138, "us", _P3 + ", flash backend, CPU time per call", "Part 3, as the series review reports it"),
    Figure("cpu_cudnn", 214, "us", _P3 + ", cuDNN backend, CPU time per call", "Part 3, as the series review reports it"),
    Figure("fastest_backend", "flash", "", _P3, "Part 3, as the series review reports it"),
]}


def fig(key: str) -> Figure:
    """One of the article's figures by key (a KeyError names the keys there are)."""
    try:
        return FIGURES[key]
    except KeyError:
        raise KeyError(f"no article figure {key!r}; there are: {', '.join(FIGURES)}") from None
