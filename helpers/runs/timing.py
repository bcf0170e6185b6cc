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

On the CPU the two coincide. The profiler leaves a cost behind in the process
once it has run: on an H200 the same call measured 20 to 30% slower after a
profiled run than before it (``.device/checksB.py``, 2026-11-30). So a warm
run is timed *before* it is profiled, and a timing says whether its process
had profiled anything earlier (``clean``). The recorder times every warm
scenario in a fresh process that profiles nothing (``python -m helpers.runs.timing``),
so the reference sets hold clean timings; a live notebook's first run is clean,
later ones are not. Cold runs are not timed: timing them would warm them.
"""

from __future__ import annotations

import statistics
import time
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ..facts.measure import Spread


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
    clean: bool = True  # measured in a process that had not run the profiler before
    host_samples: tuple[float, ...] = ()  # host_us of every block, in the order measured
    threads: int | None = None  # torch's CPU threads while timing

    @property
    def host(self) -> "Spread":
        """``host_us`` with its spread over the blocks (one sample where the blocks were not kept)."""
        from ..facts.measure import Spread

        return Spread.of(self.host_samples or (self.host_us,))

    def to_json(self) -> dict[str, Any]:
        d = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        d["host_samples"] = [round(v, 3) for v in self.host_samples]
        return d

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
            return cls(float(d["host_us"]), float(d["wall_us"]), int(d["calls"]), str(d["device"]),
                       bool(d.get("clean", False)), tuple(float(v) for v in d.get("host_samples") or ()),
                       int(d["threads"]) if d.get("threads") is not None else None)
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
    return Timing(statistics.median(per_call), wall.median * 1e6, blocks * per_block, "cuda" if cuda else "cpu",
                  clean=not _profiled_in_this_process, host_samples=tuple(per_call), threads=torch.get_num_threads())


_profiled_in_this_process = False


def profiled_here() -> bool:
    """Whether a profiler has run in this process (timings taken now are no longer clean)."""
    return _profiled_in_this_process


def note_profiled() -> None:
    """Called once a profiler has run here: later timings in this process are no longer clean."""
    global _profiled_in_this_process
    _profiled_in_this_process = True


def write(trace_path: Path, **fields: Any) -> None:
    """Merge ``fields`` into the JSON kept beside a trace (timing, allocator peaks), keeping what is there."""
    path = timing_path(trace_path)
    d = Timing.measured(trace_path)
    d.update(fields)
    path.write_text(json.dumps(d) + "\n")


def _main(spec_json: str) -> None:
    """Time every warm scenario of a spec list in this fresh process, before it profiles anything."""
    import torch

    from .workload import Workload, WorkloadError

    for spec in json.loads(spec_json):
        wd = spec["workload"]
        w = Workload(wd["kind"], tuple(sorted(wd["params"].items())), wd["label"], wd["no_grad"])
        try:
            fn, args = w.build(spec["device"], spec["dtype"])
            if spec["compile"]:
                torch._dynamo.reset()
                fn = torch.compile(fn, mode=spec["compile_mode"])
            with torch.no_grad() if w.no_grad else torch.enable_grad():
                t = unprofiled(fn, args, device=spec["device"])
        except WorkloadError as e:
            print(f"{spec['tag']}: not timed ({e})", flush=True)
            continue
        write(Path(spec["out_dir"]) / f"{spec['tag']}.json", **t.to_json())
        print(f"{spec['tag']}: {t.host_us:.1f} us host, {t.wall_us:.1f} us wall", flush=True)
        del fn, args
        if spec["device"] == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    import sys

    _main(sys.argv[1])
