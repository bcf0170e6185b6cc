"""Calls timed round by round, with no profiler: the samples every compared time in the series is made of.

:func:`interleave` times several calls round-robin (A, B, C, A, B, C...),
each round a short block of back-to-back calls, so that whatever else the
machine does falls on every side alike; :func:`one_thread` runs torch's CPU
ops on one thread for the CPU micro-benchmarks. What they measure is held
and graded by :mod:`helpers.facts.measure` (spreads, ratios, grades), which
works on recorded samples anywhere and imports no torch; these run
something, so they live with the runs.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator

from ..facts.measure import MIN_SAMPLES, Measured, Spread, conditions


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch's CPU ops on one thread inside the block (the CPU micro-benchmarks' setting).

    With every core's thread, a small op waits for the slowest core, and on a
    machine doing other work that is often one that is busy elsewhere.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


Call = tuple[Callable[..., Any], tuple]


def interleave(calls: dict[str, Call], *, device: str = "cpu", rounds: int = 15, block_s: float = 0.01,
               max_per_block: int = 20, host: bool = True, wall: bool = True, settle: int = 0,
               budget_s: float | None = None, where: str = "this machine") -> Measured:
    """Time each call round-robin, with no profiler: ``rounds`` rounds, one block of back-to-back calls each.

    A block holds as many calls as fit in about ``block_s`` (at most
    ``max_per_block``), the same number in every round. ``host`` times the
    CPU's time per call within a block (on a GPU the device is synchronized
    after the block, outside the clock, so that a full queue never blocks
    the CPU mid-block); ``wall`` times a block with the device synchronized
    at its end: the time the calls take to finish. ``settle`` untimed calls
    open every block (a DataLoader's batches, prepared ahead while the other
    calls ran, would otherwise come for free). ``budget_s`` stops early
    (never under :data:`MIN_SAMPLES` rounds) when the machine is slow.
    """
    import torch

    cuda = device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    per_block: dict[str, int] = {}
    for label, (fn, args) in calls.items():  # warm: first calls pay one-time costs; size the blocks
        for _ in range(3):
            fn(*args)
        sync()
        t0 = time.perf_counter()
        fn(*args)
        sync()
        one = max(time.perf_counter() - t0, 1e-7)
        per_block[label] = max(1, min(max_per_block, int(block_s / one)))
    hosts: dict[str, list[float]] = {k: [] for k in calls}
    walls: dict[str, list[float]] = {k: [] for k in calls}
    start = time.perf_counter()
    done = 0
    for _ in range(rounds):
        for label, (fn, args) in calls.items():
            k = per_block[label]
            for _ in range(settle):
                fn(*args)
            sync()
            if host:
                t0 = time.perf_counter()
                for _ in range(k):
                    fn(*args)
                hosts[label].append((time.perf_counter() - t0) / k * 1e6)
                sync()
            if wall:
                t0 = time.perf_counter()
                for _ in range(k):
                    fn(*args)
                sync()
                walls[label].append((time.perf_counter() - t0) / k * 1e6)
        done += 1
        if budget_s is not None and done >= MIN_SAMPLES and time.perf_counter() - start > budget_s:
            break
    return Measured({k: Spread.of(v) for k, v in hosts.items()} if host else {},
                    {k: Spread.of(v) for k, v in walls.items()} if wall else {},
                    conditions(where, torch.get_num_threads()), done, per_block)
