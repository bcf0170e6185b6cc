"""The window's time as the findings claim it, and the gain each fix should bring.

Two kinds of time can be won back (:mod:`helpers.facts.budget`): the GPU's
idle time while it waited for the CPU (a CPU-side fix launches the work
sooner) and the GPU's busy time (a GPU-side fix makes the work shorter).
Each microsecond of either is claimed by one finding at most, the first rule
to ask for it keeping it, so the shares of the findings on one side add up
to that side's share of the window, never more.

The gain is Amdahl's law on the step, with the other side as a floor: a
fix that saves ``saved`` µs of a window of ``W`` µs leaves
``max(W - saved, floor)``, where the floor is what the fix does not touch (a
CPU-side fix cannot take the step below the GPU's own work; a GPU-side one
cannot take it below the CPU's). A part made ``s`` times faster saves
``claimed * (1 - 1/s)``; ``s`` comes with a range, and so does the gain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .. import Word
from ..facts.budget import Budget
from ..facts.text import us as us_text
from ..reader.spans import Spans, difference, intersection, merged, total


#: how much longer the CPU's own work (less what an earlier finding's fix removes whole, the DataLoader's) may be than
#: the GPU's for the GPU to set the pace once the profiler is off, as far as this project measured it: notebook 16's
#: fixed loop, its CPU work about 2.4x its GPU work as recorded, timed TF32 at 1.19x unprofiled (the GPU did set the
#: pace there). Beyond 3x the gain is not said to rest on the profiler's cost: nothing here measured that much.
PROFILED_CPU_MAX = 3.0


class Side(Word):
    """The time a finding claims."""

    CPU = "cpu"  # the GPU's idle time waiting for the CPU
    GPU = "gpu"  # the GPU's busy time


@dataclass(frozen=True)
class Speedup:
    """How much faster a part gets: a point figure and the range it may lie in (math.inf: the part goes away)."""

    mid: float
    low: float
    high: float

    @classmethod
    def gone(cls, low: float = math.inf) -> "Speedup":
        """The part disappears (``low``: unless only part of it does)."""
        return cls(math.inf, low, math.inf)


@dataclass(frozen=True)
class Gain:
    """The step's time before over its time after a fix, with its range and what it assumed."""

    speedup: float
    low: float
    high: float
    basis: str
    of: str = "the step"  # what gets faster: "the step", or "the recording" for a one-time cost
    hypothesis: bool = False  # its basis is a guess no fix of this project timed: said in the one-line summary too
    #: where the point figure is under 5% and the high end is not: what the high end rests on, in words that end
    #: "then this fix could give up to" (empty: the profiler's inflation of the CPU's side)
    high_if: str = ""
    #: its high end takes in what other findings' fixes would win too: said beside the range, not only in the basis
    high_shared: bool = False

    def at_an_end(self) -> bool:
        """Whether the point figure prints as one end of a range wider than 10%."""
        return self.high / self.low > 1.1 and times(self.speedup) in (times(self.low), times(self.high))

    def alone_at_low(self) -> bool:
        """Whether the point figure is the low end and the high end counts other fixes' gains: the fix alone gives
        the point, the rest is the other fixes'."""
        return self.high_shared and self.at_an_end() and times(self.speedup) == times(self.low)

    def how_much(self) -> str:
        """'about 2.1x', or the range, '1.05x to 1.19x', where the point figure is one of its ends."""
        if self.alone_at_low():
            return f"about {times(self.speedup)} alone, up to {times(self.high)} with the other fixes' gains"
        return f"{times(self.low)} to {times(self.high)}" if self.at_an_end() else f"about {times(self.speedup)}"

    def words(self, brief: bool = False) -> str:
        """'fixing this should make the step about 2.1x faster (1.4x to 3.0x)' (``brief``: for a one-line summary,
        a one-time cost's far high end left to the finding's own lines)."""
        if self.hypothesis:
            return "as a hypothesis, " + replace(self, hypothesis=False).words(brief)
        if self.speedup < 1.05 and self.high < 1.05:
            return f"by this trace, fixing this alone should change {self.of} little (under 5%)"
        if self.speedup < 1.05:  # little as recorded, more where the other side would set the pace (the high end)
            why = self.high_if or ("at best, with all the time it claims gone (the profiler's cost on the CPU "
                                   "can make the middle figure too low), this fix could give up to")
            return (f"in this profiled run, fixing this alone changes the step little (under 5%); {why} "
                    f"{times(self.high)}. Time it without the profiler to know")
        span = (f" ({times(self.low)} to {times(self.high)}"
                + (", the high end counting other fixes' gains too" if self.high_shared else "") + ")"
                if self.high / self.low > 1.1 else "")
        if self.of != "the step":
            if self.high / self.low > 10:  # a one-time cost's range this wide says only its low end usefully
                top = f", up to {times(self.high)} with all of it gone" if math.isfinite(self.high) and not brief else ""
                return (f"without it {self.of} should be at least {times(self.low)} shorter{top} (most of this "
                        "recording is this one-time cost: a figure for this recording, not for a step of the loop)")
            return f"without it {self.of} should be about {times(self.speedup)} shorter{span}"
        if self.alone_at_low():  # the fix's own gain first; its high end is the other fixes' too
            return (f"fixing this alone should make the step about {times(self.speedup)} faster; with what the other "
                    f"findings' fixes win too, up to {times(self.high)}")
        if self.at_an_end():
            # a point figure at one end of its range reads as a typical gain where it is a bound: the range alone
            return (f"fixing this should make the step {self.how_much()} faster"
                    + (" (the high end counting other fixes' gains too)" if self.high_shared else ""))
        return f"fixing this should make the step about {times(self.speedup)} faster{span}"


def times(x: float) -> str:
    """'1.04x', '1.4x', '12x', '340x': two decimals below 1.2, two figures below 10, whole numbers above."""
    if not math.isfinite(x):
        return "many times"
    if x < 1.2:  # near 1x two figures hide the gain itself ("1x to 1.2x" reads as none to some)
        return f"{x:.2f}x"
    return f"{x:.2g}x" if x < 10 else f"{x:,.0f}x"


class Ledger:
    """The claims of one trace's findings on each side's time."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        # the queue filling at the window's start is the CPU's only where a cause names it (see Budget.filling)
        self._free = {Side.CPU: merged(list(budget.waiting_for_cpu) + list(budget.filling)), Side.GPU: list(budget.busy)}
        #: the CPU's work that an earlier finding's fix takes away whole (the DataLoader's spans, compiling): a wait
        #: for the GPU inside it goes with that fix, and is not credited to a later one
        self.removed: Spans = []

    def claim(self, side: Side, spans: Spans, at_most_us: float | None = None) -> Spans:
        """The part of ``spans`` on ``side`` that no earlier finding claimed, now claimed (``at_most_us``: the
        earliest part of it up to that many µs)."""
        got = intersection(self._free[side], merged(spans))
        if at_most_us is not None:
            got = _first(got, at_most_us)
        self._free[side] = difference(self._free[side], got)
        return got

    def left(self, side: Side, filling: bool = True) -> Spans:
        """What no finding has claimed yet on ``side`` (``filling=False``: less the queue filling at the start)."""
        free = list(self._free[side])
        return free if filling or side != Side.CPU else difference(free, self.budget.filling)

    def gain(self, basis: str, *, of: str = "the step", cpu_us: float = 0.0, cpu: Speedup | None = None, gpu_us: float = 0.0,
             gpu: Speedup | None = None, wait_us: float = 0.0, floor_cut_us: float = 0.0,
             uploads: bool = False) -> Gain:
        """The step's speedup when the CPU-side part (``cpu_us`` of idle time) gets ``cpu`` times faster and the
        GPU-side part (``gpu_us`` of busy time) ``gpu`` times faster; ``wait_us``: the CPU's waits for the GPU that the
        fix removes as well, at ``cpu``'s rate (while the GPU ran: where the CPU sets the pace, they are the step's);
        ``floor_cut_us``: the CPU's own work the fix removes too (one fused kernel launched instead of twenty)."""
        b = self.budget
        w = b.window_us
        if w <= 0:
            return Gain(1.0, 1.0, 1.0, basis, of)

        def after(sc: float, sg: float, waits: bool = False) -> float:
            saved_cpu = cpu_us * (1 - 1 / sc) if cpu_us else 0.0
            saved_gpu = gpu_us * (1 - 1 / sg) if gpu_us else 0.0
            # the CPU's waits leave the step only if the values they wait for can be read later: the high end's
            saved_wait = wait_us * (1 - 1 / sc) if wait_us and waits else 0.0
            floor = max(b.busy_us + b.queued_us - saved_gpu, b.cpu_work_us - saved_cpu - floor_cut_us, 0.0)
            return max(w - saved_cpu - saved_gpu - saved_wait, floor, 1e-9)

        c, g = cpu or Speedup(1.0, 1.0, 1.0), gpu or Speedup(1.0, 1.0, 1.0)
        saved_gpu = gpu_us * (1 - 1 / g.mid) if gpu_us else 0.0
        saved_cpu = cpu_us * (1 - 1 / c.mid) if cpu_us else 0.0
        cpu_floor = b.cpu_work_us - saved_cpu - floor_cut_us
        high, paced = w / after(c.high, g.high, waits=True), 0.0
        # (uploads: copies to the GPU that block, pageable, behind a busy stream; nothing is read back)
        high_if = (("but if these copies to the GPU did not block (from pinned memory with non_blocking=True), its "
                    "waits would leave the step too: then this fix could give up to" if uploads else
                    "but if the values the CPU waits for could be read later, its waits would leave the step too: "
                    "then this fix could give up to") if wait_us and high > 1.01 * w / after(c.high, g.high) else "")
        # (the CPU's work less what an earlier fix removes whole, the DataLoader's spans, say: not the profiler's)
        own_cpu = total(difference(b.cpu_work, self.removed)) if self.removed else b.cpu_work_us
        if (gpu_us and b.cpu_paced and cpu_floor >= max(w - saved_cpu - saved_gpu, b.busy_us + b.queued_us - saved_gpu)
                and own_cpu <= PROFILED_CPU_MAX * (b.busy_us + b.queued_us)):
            # A GPU-side fix stopped by the CPU's own work, timed under the profiler, which inflates that work: the
            # step unprofiled may be the GPU's (notebook 16's TF32 on its fixed loop: 1.00x predicted this way,
            # 1.19x timed). The high end is the GPU's own time cut by the fix, as if the GPU set the pace.
            gpu_step = b.busy_us + b.queued_us
            paced = gpu_step / max(gpu_step - saved_gpu, 1e-9)
        if gpu_us and paced > high:
            high, high_if = paced, ""
            basis += ("; as recorded, the CPU's own work is the longer side: the step cannot get shorter than that "
                      "work, which holds the point figure down; without the profiler that work may be "
                      "shorter (the profiler adds to it, by an amount the trace cannot show), and the GPU's share of "
                      "the step larger: the high end is the GPU's own time, cut by the fix, setting the pace (that "
                      "end takes in what the CPU-side findings' fixes would win too)")
        mid, low = w / after(c.mid, g.mid), w / after(c.low, g.low)
        if gpu_us and not b.cpu_paced and b.busy_us + b.queued_us > 0:
            # A GPU-side fix where the GPU sets the pace: Amdahl on the GPU's time, the share the fix's work holds of
            # it (notebook 10's attention: 27.9x timed unprofiled from math to flash, where the recorded window, whose
            # lead-in and closing wait stay, gave 10.6x). The recorded window's own figure is the low end.
            gpu_step = b.busy_us + b.queued_us

            # (the CPU's own work from the first GPU work on stays: once the GPU's work is shorter, the CPU's sets
            # the pace; train-fp32-foreach-mem-b4096's 4.5x TF32 GEMMs would otherwise leave a step shorter than it)
            cpu_floor_paced = max(b.paced_cpu_us - saved_cpu - floor_cut_us, 0.0)

            def on_gpu(s: float, floor: float = 0.0) -> float:
                cut = gpu_us * (1 - 1 / s) if math.isfinite(s) else gpu_us
                return gpu_step / max(gpu_step - cut, floor, 1e-9)
            capped = on_gpu(g.mid, cpu_floor_paced) < on_gpu(g.mid) * 0.99
            mid, high, low = max(mid, on_gpu(g.mid, cpu_floor_paced)), max(high, on_gpu(g.high)), min(low, mid)
            basis += (f"; Amdahl's law on the GPU's time, which sets the pace here (the point figure and the high "
                      "end: the GPU's busy time, with any idle while its next work was already queued, shorter by what the "
                      "fix saves of it, no more); the "
                      f"low end: that GPU work {g.low:g}x "
                      "faster, on the recorded window, where the time before the first GPU work and the CPU's own "
                      "work stay")
            if capped:  # the profiled CPU's own work stops the point figure; without the profiler it may be shorter
                basis += (f"; as recorded, the CPU's own work from the first GPU work on ({us_text(b.paced_cpu_us)}, "
                          f"{us_text(cpu_floor_paced)} once the fix has cut its own part) would then set the pace and "
                          "stops the point figure there; the high end: that work shorter without the profiler, as "
                          "notebook 10's attention timed it")
        return Gain(mid, low, high, basis, of, high_if=high_if)


def amdahl(share: float, speed: Speedup, basis: str) -> Gain:
    """Amdahl's law for a part that is ``share`` of the step and gets ``speed`` times faster: the step's speedup."""
    def one(s: float) -> float:
        rest = (1 - share) + (share / s if math.isfinite(s) else 0.0)
        return 1 / max(rest, 1e-9)
    return Gain(one(speed.mid), one(speed.low), one(speed.high), basis)


def _first(spans: Spans, us: float) -> Spans:
    """The earliest ``us`` microseconds of ``spans``."""
    out: Spans = []
    left = us
    for s, e in spans:
        if left <= 0:
            break
        take = min(e - s, left)
        out.append((s, s + take))
        left -= take
    return out


__all__ = ["Gain", "Ledger", "Side", "Speedup", "amdahl", "total"]
