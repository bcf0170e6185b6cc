"""Where a recording's time went, on the GPU's timeline: busy, and idle for the reason the trace gives.

A step on a GPU takes about as long as the slower of two things, the CPU
preparing and launching the work and the GPU running it, plus the time each
waits for the other. The trace shows both sides on one clock, so each
stretch of the window can be put on one side:

* **busy**: some kernel, copy or fill ran (any stream);
* **idle, waiting for the CPU**: the work that ends the stretch had not been
  launched yet (or was launched less than :func:`late_us` before it started:
  the launch path's own latency);
* **idle, work queued**: the work that ends the stretch had been launched long
  before: the GPU was behind something else (a dependency on another stream,
  an event, a graph's set-up), not waiting for the CPU;
* **idle, unlinked**: the work that ends it has no launch call in the trace;
* **idle, after the last work**: to the window's end (the part inside the last
  recorded step is the GPU waiting for the CPU: the step's CPU work goes on).

The idle time before the window's first GPU work, while that work was not yet
launched, is kept apart (**filling**): the GPU's queue filling as the
recording starts (after the runner's synchronize, say), which a steady loop
whose CPU runs ahead does not pay each step. Only a cause the trace names (the
DataLoader, a cold start, one long call) claims it. Only its last
:data:`FILL_MAX_US` are: a longer wait before the first launch is the CPU's
own work, not a queue filling.

Only the first kind of idle time is the CPU's to win back; the findings of
:mod:`helpers.advice.diagnose` divide it among their causes. The thread that
launched most of the GPU work (the launcher) is read too: the time it spent
inside events less its waits for the GPU is the CPU's own work, the floor a
faster GPU cannot go below.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from . import kernel_kinds as kk
from ..reader.spans import Spans, clipped, difference, intersection, merged, total
from ..reader.trace import CPU_OP, DRIVER, RUNTIME, Trace
from .steps import _gpu_busy_spans, gpu_work, steps, window

#: a launch followed by its work within this many µs is the launch path's own latency
LATE_MIN_US = 50.0
#: ... or within this many times the path's latency on this machine: the launches that reached the GPU fastest
#: (the 5th percentile; the median is no measure of the path: where the CPU runs ahead, most launches queue)
LATE_TIMES = 10.0
PATH_QUANTILE = 0.05
#: ... and never beyond this: where every launch queued (a GPU far behind), the fastest tell nothing of the path
LATE_MAX_US = 500.0


def late_us(trace: Trace) -> float:
    """How long after its launch call GPU work may start and still count as launched just in time."""
    work = gpu_work(trace)
    by = trace.launchers(work)
    lat = sorted(trace.ts[j] - trace.ts[i] for j, i in zip(work, by) if i >= 0 and trace.ts[j] >= trace.ts[i])
    if not lat:
        return LATE_MIN_US
    return min(LATE_MAX_US, max(LATE_MIN_US, LATE_TIMES * lat[int(PATH_QUANTILE * (len(lat) - 1))]))


@dataclass
class Budget:
    """One recording's window, split on the GPU's timeline (every field in µs of the trace's clock)."""

    lo: float
    hi: float
    busy: Spans
    waiting_for_cpu: Spans  # GPU idle: its next work not launched yet (or launched just in time)
    filling: Spans  # the same, before the window's first GPU work: the queue filling as the recording starts
    queued: Spans  # GPU idle though its next work had been launched long before
    unlinked: Spans  # GPU idle before work with no launch call in the trace
    after_last: Spans  # GPU idle from the end of its last work to the window's end
    launchers: tuple[int, ...]  # the lanes of the threads that launched the GPU work, most first; () without launches
    cpu_work: Spans  # the launchers' time inside events, less their waits for the GPU
    cpu_waits: Spans  # the launchers' calls that wait for the GPU (synchronizes)
    late_us: float  # the launch latency up to which work counts as launched just in time
    collectives: Spans = ()  # the GPU's collective kernels (NCCL/RCCL): busy waiting for other ranks as well

    @property
    def launcher(self) -> int | None:
        """The lane that launched most of the GPU work."""
        return self.launchers[0] if self.launchers else None

    @property
    def window_us(self) -> float:
        return max(self.hi - self.lo, 0.0)

    @property
    def busy_us(self) -> float:
        return total(self.busy)

    @property
    def waiting_for_cpu_us(self) -> float:
        return total(self.waiting_for_cpu)

    @property
    def filling_us(self) -> float:
        return total(self.filling)

    @property
    def queued_us(self) -> float:
        return total(self.queued)

    @property
    def cpu_work_us(self) -> float:
        return total(self.cpu_work)

    @property
    def about_even(self) -> bool:
        """Whether the CPU's own work and the GPU's lie within :data:`EVEN_MARGIN` of each other: which one sets the
        pace is then within the profiler's own inflation of the CPU's time, so no side is named."""
        gpu = self.busy_us + self.queued_us
        cpu = max(self.paced_cpu_us, self.waiting_for_cpu_us)
        return min(cpu, gpu) > 0 and abs(cpu - gpu) <= EVEN_MARGIN * max(cpu, gpu)

    @property
    def cpu_paced(self) -> bool:
        """Whether the CPU sets the pace: its own work outlasts the GPU's (busy, or behind queued work), the CPU's
        part before the first GPU work (while the queue fills) left out."""
        gpu = self.busy_us + self.queued_us
        return self.paced_cpu_us > gpu or self.waiting_for_cpu_us > gpu  # (a CPU busy on threads that launch nothing)

    @property
    def paced_cpu(self) -> Spans:
        """The CPU's own work from the first GPU work on: what the GPU's work is set against (before it, the CPU
        fills the queue, or sets up; a GPU that starts late has all of the CPU's work before it)."""
        if not self.busy:
            return difference(self.cpu_work, self.filling)
        return intersection(self.cpu_work, [(self.busy[0][0], self.hi)])

    @property
    def paced_cpu_us(self) -> float:
        return total(self.paced_cpu)

    def share(self, us: float) -> float:
        """``us`` as a share of the window."""
        return us / self.window_us if self.window_us > 0 else 0.0


#: the CPU's own work and the GPU's within this share of each other: about even, no side named as the pace-setter
EVEN_MARGIN = 0.05
#: the leading idle time up to this long is the queue filling (the CPU's path to its first launch, profiled); beyond
#: it, the CPU was doing other work first
FILL_MAX_US = 2000.0
#: the stretch before the first GPU work counts as the CPU's only if its events cover at least this share of it
IDLE_CPU_SHARE = 0.1
#: a thread that launched at least this share of the GPU work is a launcher (autograd's backward thread, say, beside
#: the main thread)
LAUNCHER_SHARE = 0.05


def _launchers(trace: Trace, work: list[int]) -> tuple[int, ...]:
    """The lanes whose calls launched the GPU work, most launches first (those with a small share left out)."""
    counts: dict[int, int] = {}
    for i in trace.launchers(work):
        if i >= 0:
            counts[trace.lane[i]] = counts.get(trace.lane[i], 0) + 1
    n = sum(counts.values())
    return tuple(sorted((ln for ln, k in counts.items() if k >= LAUNCHER_SHARE * n), key=lambda ln: -counts[ln]))


def budget(trace: Trace) -> Budget:
    """The recording's window split on the GPU's timeline (see the module's docstring); memoized on the trace."""
    got = trace.memo.get("budget")
    if got is not None:
        return got
    lo, hi = window(trace)
    work = sorted(gpu_work(trace), key=trace.ts.__getitem__)
    busy = clipped(_gpu_busy_spans(trace), lo, hi)
    idle = difference([(lo, hi)] if hi > lo else [], busy)
    starts = [trace.ts[j] for j in work]
    launch = trace.launchers(work)
    late = late_us(trace) if work else LATE_MIN_US
    cpu, queued, unlinked, after = [], [], [], []
    st = steps(trace)
    step_end = st[-1].end_us if st else lo  # (without steps, idle after the last work is the window's tail)
    lanes = _launchers(trace, work)
    # the launchers' CPU events, gathered in one pass over the trace (the checks below each read them)
    mine: dict[int, list[int]] = {lane: [] for lane in lanes}
    for i, lane in enumerate(trace.lane):
        if lane in mine and not trace.is_gpu(i):
            mine[lane].append(i)
    cpu_end = max((trace.end_of(i) for i in trace.indices((CPU_OP, RUNTIME, DRIVER))
                   if trace.lane[i] in lanes), default=lo)
    for a, b in idle:
        k = bisect.bisect_left(starts, b - 1e-6)  # the work that ends this stretch: the first to start at its end
        if k >= len(work):  # no work after it: inside a recorded step, the GPU waits for the CPU's next launch
            until = min(b, step_end, cpu_end)  # as long as the CPU is seen working (a step left open is not)
            inside = [(a, until)] if a < until and work else []
            cpu += inside
            after += difference([(a, b)], inside)
            continue
        i = launch[k]
        if i < 0:
            unlinked.append((a, b))
            continue
        # the work can run once its launch call has returned: a long launch call (a first launch loading its code,
        # say) keeps the GPU waiting for the CPU, not behind queued work
        called = trace.end_of(i)
        if b - called <= late:  # launched just in time: the GPU waited for the CPU (its launch path included)
            cpu.append((a, b))
        elif called <= a:  # launched before the GPU went idle, and started long after: queued
            queued.append((a, b))
        else:  # launched during the stretch, then waited long: the CPU's part, then the queue's
            cpu.append((a, called))
            queued.append((called, b))
    # the queue filling ends where the first work could run: at its start, or where its launch call returned if it
    # then sat queued (a GPU that started late: the CPU's path to that launch is still the filling)
    first_at = busy[0][0] if busy else hi
    if work and launch[0] >= 0 and trace.end_of(launch[0]) + late < first_at:
        first_at = max(lo, trace.end_of(launch[0]))
    filling = intersection(cpu, [(max(lo, first_at - FILL_MAX_US), first_at)]) if busy else []
    cpu = difference(cpu, filling)
    if busy:  # before the first GPU work, a CPU seen doing (almost) nothing is no CPU at work: not counted either
        lead = intersection(cpu, [(lo, busy[0][0])])
        seen = total(intersection(lead, merged((trace.ts[i], trace.end_of(i)) for ev in mine.values() for i in ev
                                               if not trace.name_of(i).startswith("ProfilerStep#"))))
        if lead and seen < IDLE_CPU_SHARE * total(lead):
            filling = merged(filling + lead)
            cpu = difference(cpu, lead)
    cpu_work: Spans = []
    waits: Spans = []
    calls = trace.indices((RUNTIME, DRIVER))
    for lane in lanes:  # each launcher's work less its own waits; a wait while another launcher works is no idle CPU
        on = merged((trace.ts[i], trace.end_of(i)) for i in mine[lane])
        # a wait for the GPU: a synchronize, or a copy call that lasts longer than the launch path (a copy from or
        # to pageable memory returns once the GPU has done the work queued before it)
        own = merged((trace.ts[i], trace.end_of(i)) for i in calls
                     if trace.lane[i] == lane and (kk.is_synchronize(trace.name_of(i))
                                                   or ("emcpy" in trace.name_of(i) and trace.dur[i] > late)))
        cpu_work = merged(cpu_work + difference(clipped(on, lo, hi), own))
        waits = merged(waits + clipped(own, lo, hi))
    comm = clipped(merged((trace.ts[j], trace.end_of(j)) for j in work
                          if kk.classify(trace.name_of(j)) == kk.COLLECTIVE), lo, hi)
    got = trace.memo["budget"] = Budget(lo, hi, busy, cpu, filling, queued, unlinked, after, lanes, cpu_work, waits,
                                        late, comm)
    return got
