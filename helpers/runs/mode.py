"""Where the series runs: the mode (live or recorded), the hardware and versions.

*Live* means a CUDA GPU is visible: workloads run on it and the notebooks read
the traces they just wrote. *Recorded* means there is none (or
``PROFILING_MODE=recorded`` forces it, as CI does): the GPU lanes come from a
reference set recorded earlier on a real GPU (:mod:`helpers.runs.reference`), and
the CPU-side lessons still run live on this machine's CPU.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass
from functools import lru_cache

from .reference import NotRecorded, ReferenceSet, reference_set
from .stopwatch import phase

MODE_VAR = "PROFILING_MODE"  # "live" or "recorded"; unset: live when a GPU is visible
HEADLESS_VAR = "PROFILING_HEADLESS"  # "1": reveal with default answers (nbval, CI, preflight)


class ModeError(RuntimeError):
    """The requested mode cannot run here."""


def headless() -> bool:
    """True in nbval, CI and the pre-flight check: predictions take their default answers."""
    return os.environ.get(HEADLESS_VAR, "").strip().lower() in ("1", "true", "yes")


def on_colab() -> bool:
    return "google.colab" in sys.modules


@dataclass(frozen=True)
class Environment:
    """The mode, this machine's GPU and versions, and the reference set recorded mode reads."""

    mode: str  # "live" or "recorded"
    headless: bool
    colab: bool
    gpu: str | None
    capability: tuple[int, int] | None
    gpu_memory_gib: float | None
    sm_count: int | None
    torch: str
    cuda: str | None
    cudnn: str | None
    python: str
    reference: ReferenceSet | None

    @property
    def live(self) -> bool:
        return self.mode == "live"

    def banner(self, traces: str | None = None) -> str:
        """One line: the mode, and the hardware the GPU lanes come from.

        ``traces``, live only: where this notebook's traces come from, when
        not all of them are recorded now on this GPU (notebook 15 on one GPU).
        """
        where = "on Colab, " if self.colab else ""
        if self.live:
            cap = f"sm_{self.capability[0]}{self.capability[1]}" if self.capability else "?"
            return (f"LIVE {where}on {self.gpu} ({cap}, {self.gpu_memory_gib:.0f} GiB, {self.sm_count} SMs): "
                    f"torch {self.torch}, CUDA {self.cuda}. "
                    + (traces or "Every trace below is recorded now, on this GPU."))
        ref = self.reference.describe() if self.reference else "no reference set found"
        why = "forced by PROFILING_MODE" if os.environ.get(MODE_VAR) == "recorded" else "no CUDA GPU here"
        return (f"RECORDED ({why}): GPU lanes come from traces recorded on {ref}. "
                f"CPU-side cells run live on this machine's CPU (torch {self.torch}).")

    def report(self) -> dict:
        """Everything known about this machine and mode, as plain data."""
        return {
            "mode": self.mode,
            "headless": self.headless,
            "colab": self.colab,
            "gpu": self.gpu,
            "compute capability": "%d.%d" % self.capability if self.capability else None,
            "gpu memory (GiB)": round(self.gpu_memory_gib, 1) if self.gpu_memory_gib else None,
            "SMs": self.sm_count,
            "torch": self.torch,
            "CUDA": self.cuda,
            "cuDNN": self.cudnn,
            "python": self.python,
            "platform": platform.platform(),
            "reference set": self.reference.describe() if self.reference else None,
        }


def _cudnn_version(torch) -> str | None:
    """cuDNN's version, None without one, or what went wrong when torch cannot load it."""
    try:
        v = torch.backends.cudnn.version()
    except RuntimeError as e:  # torch raises this when the cuDNN it finds is not the one it was built for
        return f"unusable: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
    return str(v) if v else None


@lru_cache(maxsize=1)
def environment() -> Environment:
    """Detect the mode and hardware once per kernel."""
    with phase("import torch"):
        import torch

    forced = os.environ.get(MODE_VAR, "").strip().lower()
    if forced not in ("", "live", "recorded", "auto"):
        raise ModeError(f"{MODE_VAR}={forced!r}: use 'live', 'recorded' or leave it unset")
    with phase("CUDA start-up"):  # the driver, the device's properties; the context comes with the first tensor
        has_gpu = torch.cuda.is_available()
        props = torch.cuda.get_device_properties(0) if has_gpu else None
    if forced == "live" and not has_gpu:
        raise ModeError(f"{MODE_VAR}=live, but torch sees no CUDA GPU here. Unset it to use the recorded traces.")
    mode = "live" if has_gpu and forced != "recorded" else "recorded"
    gpu = cap = mem = sms = None
    if props is not None:
        gpu, cap, mem, sms = (props.name, (props.major, props.minor), props.total_memory / 2**30,
                              props.multi_processor_count)
    ref = None
    if mode == "recorded":
        try:
            ref = reference_set()
        except NotRecorded:  # the banner says "no reference set found"; profile() then says what to do
            ref = None
    return Environment(mode, headless(), on_colab(), gpu, cap, mem, sms, torch.__version__.split("+")[0],
                       torch.version.cuda, _cudnn_version(torch) if has_gpu else None, platform.python_version(),
                       ref)
