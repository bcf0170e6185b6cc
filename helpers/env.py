"""Where the series runs: the mode (live or recorded), the hardware and versions.

*Live* means a CUDA GPU is visible: workloads run on it and the notebooks read
the traces they just wrote. *Recorded* means there is none (or
``PROFILING_MODE=recorded`` forces it, as CI does): the GPU lanes come from a
reference set recorded earlier on a real GPU (``traces/reference/``), and the
CPU-side lessons still run live on this machine's CPU.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
REFERENCE = TRACES / "reference"
RUNS = TRACES / "runs"

MODE_VAR = "PROFILING_MODE"  # "live" or "recorded"; unset: live when a GPU is visible
HEADLESS_VAR = "PROFILING_HEADLESS"  # "1": reveal with default answers (nbval, CI, preflight)
REFERENCE_VAR = "PROFILING_REFERENCE"  # which reference set, e.g. "nvidia-h200"


class ModeError(RuntimeError):
    """The requested mode cannot run here."""


def headless() -> bool:
    """True in nbval, CI and the pre-flight check: predictions take their default answers."""
    return os.environ.get(HEADLESS_VAR, "").strip().lower() in ("1", "true", "yes")


def on_colab() -> bool:
    return "google.colab" in sys.modules


def slug(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'."""
    out = "".join(c.lower() if c.isalnum() else "-" for c in name)
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "unknown"


@dataclass(frozen=True)
class ReferenceSet:
    """Traces recorded on one GPU by ``python -m helpers.record``."""

    path: Path
    manifest: dict

    @property
    def gpu(self) -> str:
        return self.manifest.get("gpu", {}).get("name", self.path.name)

    @property
    def date(self) -> str:
        return str(self.manifest.get("date", "unknown date"))[:10]

    def describe(self) -> str:
        m = self.manifest
        return (f"{self.gpu}, recorded {self.date} with torch {m.get('torch', '?')}, "
                f"CUDA {m.get('cuda', '?')}, driver {m.get('driver', '?')}")


def reference_sets() -> list[ReferenceSet]:
    out = []
    if REFERENCE.is_dir():
        for d in sorted(REFERENCE.iterdir()):
            mf = d / "manifest.json"
            if mf.is_file():
                try:
                    out.append(ReferenceSet(d, json.loads(mf.read_text())))
                except (OSError, ValueError):
                    continue
    return out


def reference_set() -> ReferenceSet:
    """The reference set recorded mode reads (``PROFILING_REFERENCE`` picks one)."""
    sets = reference_sets()
    if not sets:
        raise ModeError(f"No reference traces under {REFERENCE}. Record a set on a GPU machine with "
                        "`python -m helpers.record`, or check out the repository's traces/ folder.")
    want = os.environ.get(REFERENCE_VAR)
    if want:
        for s in sets:
            if s.path.name == want or slug(s.gpu) == slug(want):
                return s
        raise ModeError(f"{REFERENCE_VAR}={want!r} names no reference set; there are: "
                        + ", ".join(s.path.name for s in sets))
    # The H200 set is the one the notebooks' checkpoints were written against.
    for s in sets:
        if s.path.name == "nvidia-h200":
            return s
    return sets[0]


@dataclass(frozen=True)
class Environment:
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

    def banner(self) -> str:
        """One line: the mode, and the hardware the GPU lanes come from."""
        where = "on Colab, " if self.colab else ""
        if self.live:
            cap = f"sm_{self.capability[0]}{self.capability[1]}" if self.capability else "?"
            return (f"LIVE {where}on {self.gpu} ({cap}, {self.gpu_memory_gib:.0f} GiB, {self.sm_count} SMs): "
                    f"torch {self.torch}, CUDA {self.cuda}. Every trace below is recorded now, on this GPU.")
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


@lru_cache(maxsize=1)
def environment() -> Environment:
    """Detect the mode and hardware once per kernel."""
    import torch

    forced = os.environ.get(MODE_VAR, "").strip().lower()
    if forced not in ("", "live", "recorded", "auto"):
        raise ModeError(f"{MODE_VAR}={forced!r}: use 'live', 'recorded' or leave it unset")
    has_gpu = torch.cuda.is_available()
    if forced == "live" and not has_gpu:
        raise ModeError(f"{MODE_VAR}=live, but torch sees no CUDA GPU here. Unset it to use the recorded traces.")
    mode = "live" if has_gpu and forced != "recorded" else "recorded"
    gpu = cap = mem = sms = None
    if has_gpu:
        p = torch.cuda.get_device_properties(0)
        gpu, cap, mem, sms = p.name, (p.major, p.minor), p.total_memory / 2**30, p.multi_processor_count
    cudnn = None
    try:
        v = torch.backends.cudnn.version() if has_gpu else None
        cudnn = str(v) if v else None
    except Exception:  # cuDNN missing from a CPU build
        cudnn = None
    ref = None
    if mode == "recorded":
        try:
            ref = reference_set()
        except ModeError:
            ref = None
    return Environment(mode, headless(), on_colab(), gpu, cap, mem, sms, torch.__version__.split("+")[0],
                       torch.version.cuda, cudnn, platform.python_version(), ref)
