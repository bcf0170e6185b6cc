"""What a pause does to the next kernel: an experiment that can tell notebook 07's explanations apart.

A GEMM that follows a pause can be slower than the same GEMM run back to
back. Three explanations predict different things:

* **clocks**: an idle GPU lowers its clocks and the first kernel runs before
  they are back up. Then the SM (or memory) clock read while that kernel
  runs is lower than in steady work;
* **the GPU wakes up**: something other than the clocks (a power state, the
  memory system) needs time after a pause. Then any small kernel run first
  should take the hit and leave the GEMM fast;
* **cold data**: the GEMM's inputs fell out of the caches and address
  translations. Then a GEMM on *other* buffers, with no pause at all, should
  be as slow, and a small kernel first should not help.

:func:`probe` runs those three conditions for a few pause lengths, timing
each GEMM with CUDA events and reading the SM and memory clocks and the
performance state through NVML while it runs (``nvidia-ml-py``; without it
the clocks are left out and the notebook says so). The recorder keeps the
result beside the reference traces as ``idle_gpu.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from .stopwatch import phase

GAPS_S = (0.0, 0.01, 0.1, 0.5)  # pause before the timed GEMM; 0: back to back
CONDITIONS = ("after a pause", "a small kernel first", "other buffers, no pause")


def _nvml() -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        import torch

        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    except Exception:  # noqa: BLE001 - no NVML here: the clocks are simply not read
        return None


def _clocks(nv: Any) -> dict[str, int] | None:
    if nv is None:
        return None
    pynvml, h = nv
    try:
        return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                "pstate": int(pynvml.nvmlDeviceGetPerformanceState(h))}
    except Exception:  # noqa: BLE001
        return None


def probe(size: int = 4096, dtype: str = "bf16", repeats: int = 5, gaps: tuple[float, ...] = GAPS_S) -> dict:
    """Time a ``size`` x ``size`` GEMM after each pause in ``gaps``, under each of :data:`CONDITIONS`."""
    import torch

    from .workload import torch_dtype

    dt = torch_dtype(dtype)
    a, b = (torch.randn(size, size, device="cuda", dtype=dt) for _ in range(2))
    others = [tuple(torch.randn(size, size, device="cuda", dtype=dt) for _ in range(2)) for _ in range(repeats)]
    tiny = torch.zeros(1024, device="cuda")
    out = torch.empty(size, size, device="cuda", dtype=dt)
    for _ in range(10):  # warm: cuBLAS handle, kernels loaded, clocks up
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    nv = _nvml()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]

    def timed_pair(x: Any, y: Any, wake: bool) -> tuple[float, float, dict | None]:
        """The first GEMM and the one right after it (us), and the clocks read while the first ran."""
        if wake:
            tiny.add_(1)
            torch.cuda.synchronize()
        ev[0].record()
        torch.matmul(x, y, out=out)
        ev[1].record()
        clocks = _clocks(nv)  # read while the GEMM runs: the launch returned at once
        ev[2].record()
        torch.matmul(x, y, out=out)
        ev[3].record()
        torch.cuda.synchronize()
        return ev[0].elapsed_time(ev[1]) * 1e3, ev[2].elapsed_time(ev[3]) * 1e3, clocks

    rows = []
    for gap in gaps:
        for cond in CONDITIONS:
            if cond == "other buffers, no pause" and gap:
                continue  # this condition is about data, not pauses
            for r in range(repeats):
                torch.matmul(a, b, out=out)  # steady work right before the pause
                torch.cuda.synchronize()
                if gap:
                    time.sleep(gap)
                x, y = others[r] if cond == "other buffers, no pause" else (a, b)
                first, second, clocks = timed_pair(x, y, wake=cond == "a small kernel first")
                rows.append({"gap_s": gap, "condition": cond, "first_us": round(first, 2),
                             "second_us": round(second, 2), "clocks": clocks})
    steady = []
    for _ in range(repeats):
        first, second, clocks = timed_pair(a, b, wake=False)
        steady.append({"us": round(second, 2), "clocks": clocks})
    return {"size": size, "dtype": dtype, "device": torch.cuda.get_device_name(0), "rows": rows,
            "steady": steady, "nvml": nv is not None}


def summary(result: dict) -> list[tuple[str, float, float, float, str]]:
    """Per (condition, pause): the median first GEMM, the median second, the ratio, and the clocks seen."""
    out = []
    keys = sorted({(r["condition"], r["gap_s"]) for r in result["rows"]}, key=lambda k: (CONDITIONS.index(k[0]), k[1]))
    for cond, gap in keys:
        rs = [r for r in result["rows"] if r["condition"] == cond and r["gap_s"] == gap]
        first = statistics.median(r["first_us"] for r in rs)
        second = statistics.median(r["second_us"] for r in rs)
        sm = sorted({r["clocks"]["sm_mhz"] for r in rs if r.get("clocks")})
        out.append((cond, gap, first, second, f"{sm[0]}-{sm[-1]} MHz" if sm else "not read"))
    return out


def _main(argv: list[str]) -> int:
    """``python -m helpers.runs.idle_gpu OUT_DIR DTYPE``: run :func:`probe` and write ``idle_gpu.json``."""
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    result = probe(dtype=argv[1] if len(argv) > 1 else "bf16")
    (out / "idle_gpu.json").write_text(json.dumps(result) + "\n")
    for cond, gap, first, second, sm in summary(result):
        print(f"idle_gpu: {cond}, pause {gap:g} s: first {first:.1f} us, next {second:.1f} us, SM {sm}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


def measure() -> tuple[dict, str]:
    """The experiment's result and where it comes from: run now on this GPU (live), or the reference set's."""
    from .mode import environment
    from .reference import NotRecorded, reference_set
    from .workload import pick_dtype

    env = environment()
    if env.live:
        with phase("idle-GPU probe"):
            result = probe(dtype=pick_dtype("cuda", env.capability))
        return result, f"measured now on {env.gpu}"
    ref = reference_set()
    p = ref.path / "idle_gpu.json"
    try:
        return json.loads(p.read_text()), f"measured on {ref.short()}"
    except (OSError, ValueError):
        raise NotRecorded(f"The reference set {ref.path.name} has no idle-GPU experiment ({p.name}): record it on "
                          "a GPU with `python -m helpers.runs.record`.") from None
