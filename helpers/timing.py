"""The profiler's own cost: the same call timed without any profiler.

A profiled trace measures a program that is being observed: every op and
launch call also records an event. To know how much of a CPU time in a trace
is the profiler's, time the same call unprofiled. Two figures per call:

* ``host_us``: how long the CPU takes to issue one call (no device
  synchronization inside the timed loop), the figure to set beside a trace's
  CPU time per call;
* ``wall_us``: one call from start to its results on the device
  (``torch.utils.benchmark.Timer``, which synchronizes CUDA around its timed
  blocks), the figure that says how fast the call really runs.

On the CPU the two coincide. Live runs measure them right after profiling;
the recorder stores them beside each reference trace, so recorded mode has
them too.
"""

from __future__ import annotations

import statistics
import time
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable


def timing_path(trace_path: Path) -> Path:
    """Where a trace's unprofiled timing is kept: ``<tag>.timing.json`` beside ``<tag>.json``."""
    return trace_path.with_suffix(".timing.json")


@dataclass(frozen=True)
class Timing:
    """Per-call times of an unprofiled call, in microseconds."""

    host_us: float  # median CPU time to issue one call, no synchronization inside the loop
    wall_us: float  # median time per call with the device synchronized (torch.utils.benchmark.Timer)
    calls: int  # calls timed for host_us
    device: str  # "cuda" or "cpu"

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def load(cls, trace_path: Path) -> "Timing | None":
        """The timing kept beside a trace, or None when there is none (or it cannot be read)."""
        try:
            return cls.from_json(json.loads(timing_path(trace_path).read_text()))
        except (OSError, ValueError):
            return None

    @staticmethod
    def measured(trace_path: Path) -> dict[str, Any]:
        """Everything kept beside a trace (the timing, and the allocator's peaks when memory was profiled)."""
        try:
            d = json.loads(timing_path(trace_path).read_text())
        except (OSError, ValueError):
            return {}
        return d if isinstance(d, dict) else {}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "Timing | None":
        if not isinstance(d, dict):
            return None
        try:
            return cls(float(d["host_us"]), float(d["wall_us"]), int(d["calls"]), str(d["device"]))
        except (KeyError, TypeError, ValueError):
            return None


def unprofiled(fn: Callable[..., Any], args: tuple, *, device: str, blocks: int = 15, block_s: float = 0.02,
               min_run_time: float = 0.2) -> Timing:
    """Time ``fn(*args)`` with no profiler running: issue cost per call, and wall time per call.

    ``host_us`` is the median over ``blocks`` blocks of back-to-back calls
    (as many as fit in about ``block_s`` seconds, at most 20), the device
    synchronized between blocks and outside the clock, so that a queue of GPU
    work never fills up and blocks the CPU mid-block.
    """
    import torch
    import torch.utils.benchmark as benchmark

    cuda = device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    for _ in range(3):  # warm: first calls pay one-time costs
        fn(*args)
    sync()
    t0 = time.perf_counter()
    fn(*args)
    sync()
    per_block = max(1, min(20, int(block_s / max(time.perf_counter() - t0, 1e-6))))
    per_call = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(per_block):
            fn(*args)
        per_call.append((time.perf_counter() - t0) / per_block * 1e6)
        sync()
    wall = benchmark.Timer(stmt="fn(*args)", globals={"fn": fn, "args": args}).blocked_autorange(
        min_run_time=min_run_time)
    return Timing(statistics.median(per_call), wall.median * 1e6, blocks * per_block, "cuda" if cuda else "cpu")
