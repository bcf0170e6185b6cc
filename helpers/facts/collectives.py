"""One rank's collectives and GPU time, and the same collective found on every rank: who the others wait for.

Each rank gets a row (:class:`RankRow`): GPU busy and idle time, compute time
(GPU work other than collectives), collective time, how much of the collective
time had compute running beside it (``overlap_pct``), and a verdict that says
when a rank spends its GPU time waiting in collectives rather than computing.
Across ranks, the same collective is found on each rank (:func:`match`) and
the rank the others wait for is named (:func:`find_straggler`). A folder of
rank traces is read by :mod:`helpers.facts.ranks`; the rules on these facts
are :mod:`helpers.advice.distributed`'s.

The definitions, all computed from the traces:

* **collective**: GPU work of kind ``collective`` (:mod:`helpers.facts.kernel_kinds`:
  NCCL/RCCL kernels); **compute**: every other kernel, copy or fill, on any
  stream of the rank.
* **overlap_pct**: of the time at least one collective runs, the share during
  which some compute runs too (merged intervals, inside the rank's window:
  first recorded step, or first event, to the last event's end).
* **exposed**: collective time with no compute beside it. A rank is
  ``communication-bound`` when exposed time is at least
  :data:`COMMUNICATION_BOUND_SHARE` of its GPU busy time, that is, when its
  GPU spent at least as long in collectives alone as in compute; otherwise
  its verdict is :func:`helpers.facts.balance`'s, which counts compute only.
* **clock**: events are placed on one clock across ranks when every trace
  says where its clock starts: ``baseTimeNanoseconds`` (newer Kineto: times
  are relative to it) or timestamps that are themselves microseconds since
  1970 (older traces, no base). Otherwise collectives cannot be matched
  across ranks: the ranks are compared row by row only.

Imports neither torch nor pandas.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from itertools import filterfalse
from typing import Any

from .balance import balance, collective_work
from .steps import gpu_work, steps, window
from .text import us
from ..reader import vector
from ..reader.spans import merged, total
from ..reader.spans import clipped
from ..reader.trace import ANNOTATION, CPU_OP, DRIVER, RUNTIME, Trace


#: exposed collective time over GPU busy time at or above which a rank is communication-bound
COMMUNICATION_BOUND_SHARE = 0.5
#: fewer matched collectives than this: too few to name a straggler
MIN_MATCHED = 3
#: the others' extra waiting over the straggler's, as a share of their time in matched collectives, below
#: which the ranks are within noise (a threshold chosen, not measured: jitter of a few percent is common)
NOISE_SHARE = 0.05
#: ... and per matched collective, in microseconds (launch jitter is of this order)
NOISE_PER_COLLECTIVE_US = 10.0
#: raw timestamps at or above this many microseconds are taken as wall-clock time since 1970 (2001-09-09 on)
EPOCH_US = 1e15

COMMUNICATION_BOUND = "communication-bound"
#: gloo's own events for a collective it runs on the CPU ("gloo:all_reduce"): the reduction, on gloo's threads
GLOO_PREFIX = "gloo:"
#: the record_function labels CPU backends give their collectives (gloo's "gloo:all_reduce", ...)
CPU_COLLECTIVE_PREFIXES = ("gloo:", "mpi:", "ucc:")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.I)
_KERNEL_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", re.I)


# --- one rank ------------------------------------------------------------------------------


@dataclass
class Collective:
    """One collective kernel on one rank."""

    op: str  # what it is, the same word on every rank: "allreduce", "alltoall", "allgather"...
    name: str  # the kernel's name
    start_us: float  # on the folder's shared clock when there is one (see Ranks.clock), else the trace's own
    dur_us: float
    stream: Any

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass
class RankRow:
    """One rank's GPU time: compute, collectives, their overlap, idle, and a verdict."""

    rank: int
    path: str
    device: str | None
    window_us: float  # first recorded step (or event) to the last event's end
    gpu_busy_us: float  # in the window: at least one kernel, copy, fill or collective running
    idle_us: float  # window minus busy
    idle_pct: float | None
    self_cpu_us: float
    compute_us: float  # GPU time of everything but collectives (the union of its spans: concurrent streams once)
    collective_us: float  # GPU time of collectives (the union of their spans in the window)
    collectives: int
    overlap_pct: float | None  # share of collective time (in the window) with compute running too
    exposed_us: float  # collective time (in the window) with no compute running
    verdict: str | None  # "communication-bound", else facts.balance's verdict on compute only
    compute_verdict: str | None  # facts.balance's verdict alone
    # Across ranks (None with one rank, or with no shared clock):
    wait_us: float | None = None  # inside matched collectives, beyond the quickest rank's time
    last_arrivals: int | None = None  # matched collectives it entered last, beyond noise
    median_late_us: float | None = None  # median delay of its entry behind the first rank's
    #: in the window, time in which no CPU thread ran a recorded op, runtime or driver call (Python between ops,
    #: sleeping, waiting on I/O: what the profiler does not see)
    unrecorded_us: float = 0.0
    start_us: float = 0.0  # the window's start on the shared clock (the ranks' own clocks aligned)
    #: GPU time of its collectives by operation ("allreduce", "sendrecv", "alltoall": :func:`_op`), largest first
    collective_ops: dict[str, float] = field(default_factory=dict)
    #: the TorchRec pipeline labels its trace holds (:func:`pipeline_labels`)
    pipeline: list[str] = field(default_factory=list)
    first_step: str | None = None  # its first recorded ProfilerStep#N, where it has one

    @property
    def exposed_share(self) -> float | None:
        return self.exposed_us / self.gpu_busy_us if self.gpu_busy_us > 0 else None


def rank_of(trace: Trace) -> int | None:
    """The trace's rank: ``distributedInfo.rank``, else a number after "rank" in the file's name."""
    info = trace.meta.get("distributedInfo")
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, int) and not isinstance(r, bool) and r >= 0:
            return r
    m = _RANK_IN_NAME.search(trace.path.name)
    return int(m.group(1)) if m else None


def world_size_of(trace: Trace) -> int | None:
    info = trace.meta.get("distributedInfo")
    w = info.get("world_size") if isinstance(info, dict) else None
    return w if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None


def clock_origin_us(trace: Trace) -> float | None:
    """Wall-clock microseconds (since 1970) of the trace's time 0, or None when the trace does not say.

    Newer traces give ``baseTimeNanoseconds``, their timestamps counting from
    it; older ones have none, and their timestamps are themselves wall-clock
    microseconds (then they are at least :data:`EPOCH_US`).
    """
    base = trace.base_time_ns
    if base is not None:
        return base / 1000 + trace.t0
    return trace.t0 if trace.t0 >= EPOCH_US else None


def clock_shifts_us(traces: list[Trace]) -> list[float]:
    """Per trace, what moves its times onto the ranks' shared clock (all zeros when they share none)."""
    origins = [clock_origin_us(t) for t in traces]
    if not origins or any(o is None for o in origins):
        return [0.0] * len(traces)
    zero = min(origins)  # type: ignore[type-var]
    return [o - zero for o in origins]  # type: ignore[operator]


def _op(trace: Trace, j: int) -> str:
    """The collective's operation, from the call that launched it, else from the kernel's name.

    "nccl:all_reduce", "c10d::allreduce_" and "ncclDevKernel_AllReduce_..." all
    give "allreduce", so that ranks whose launch calls fall outside the
    recording still agree.
    """
    i = trace.launch_of(j)
    found = None
    for a in trace.ancestors(i) if i >= 0 else ():
        n = trace.name_of(a)
        if n.startswith("nccl:"):
            found = n
            break
        if found is None and n.startswith("c10d::"):
            found = n
    if found is None:
        m = _KERNEL_OP.search(trace.name_of(j))
        found = m.group(1) if m else trace.name_of(j)
    word = re.sub(r"[^a-z]", "", found.split(":")[-1].lower())
    return word[:-4] if word.endswith("base") and len(word) > 4 else word


#: the record_function labels TorchRec's pipelined training loops write themselves (TrainPipelineSparseDist and its
#: variants, torchrec/distributed/train_pipeline): a trace that holds one runs such a pipeline already
TORCHREC_PIPELINE_LABELS = ("## sparse_data_dist ##", "## start_sparse_data_dist ##", "## wait_sparse_data_dist ##")


def pipeline_labels(trace: Trace) -> list[str]:
    """The TorchRec pipeline labels this trace holds (empty: no sign of a pipelined training loop)."""
    return [n for n in TORCHREC_PIPELINE_LABELS if trace.indices((ANNOTATION,), name=n)]


def unrecorded_us(trace: Trace) -> float | None:
    """Time in the window in which no CPU thread ran a recorded op, runtime or driver call, nor a CPU backend's
    collective (Python between ops, sleeping, waiting on I/O: what the profiler does not see); None without ops."""
    ops = trace.on_gpu((CPU_OP, RUNTIME, DRIVER), gpu=False)
    if not len(ops):
        return None
    lo, hi = window(trace)
    # a CPU backend's collective spans (gloo's) are recorded time too: a rank waiting inside them is not unrecorded
    cpu_coll = [i for p in CPU_COLLECTIVE_PREFIXES for i in trace.indices(prefix=p) if not trace.is_gpu(i)]
    recorded = total(clipped(merged(list(vector.spans(trace, ops)) + [(trace.ts[i], trace.end_of(i))
                                                                      for i in cpu_coll]), lo, hi))
    return max(balance(trace).window_us - recorded, 0.0)


def rank_facts(trace: Trace, rank: int, shift_us: float = 0.0) -> tuple[RankRow, list[Collective]]:
    """One rank's row, and its collectives with starts on the shared clock (the trace's times plus ``shift_us``)."""
    b = balance(trace)
    work = gpu_work(trace)
    coll = collective_work(trace, work)
    lo, hi = window(trace) if len(trace) else (0.0, 0.0)
    in_coll = set(coll)
    coll_spans = clipped(vector.spans(trace, coll), lo, hi)
    comp_spans = clipped(vector.spans(trace, list(filterfalse(in_coll.__contains__, work))), lo, hi)
    coll_time = sum(e - s for s, e in coll_spans)
    both = vector.intersection_us(coll_spans, comp_spans)
    overlap = 100.0 * both / coll_time if coll_time > 0 else None
    exposed = coll_time - both
    verdict = b.verdict
    if coll and b.gpu_busy_us > 0 and exposed / b.gpu_busy_us >= COMMUNICATION_BOUND_SHARE:
        verdict = COMMUNICATION_BOUND
    quiet = unrecorded_us(trace)
    by_op: dict[str, float] = {}
    for j in coll:
        op = _op(trace, j)
        by_op[op] = by_op.get(op, 0.0) + trace.dur[j]
    row = RankRow(
        rank=rank, path=str(trace.path), device=trace.device_name, window_us=b.window_us, start_us=lo + shift_us,
        collective_ops=dict(sorted(by_op.items(), key=lambda kv: -kv[1])), pipeline=pipeline_labels(trace),
        first_step=next((st.name for st in steps(trace)), None),
        unrecorded_us=quiet or 0.0,
        gpu_busy_us=b.gpu_busy_us, idle_us=max(b.window_us - b.gpu_busy_us, 0.0),
        idle_pct=100.0 * b.gpu_idle_share if b.gpu_idle_share is not None else None,
        self_cpu_us=b.self_cpu_us, compute_us=sum(e - s for s, e in comp_spans), collective_us=coll_time,
        collectives=len(coll), overlap_pct=overlap, exposed_us=exposed, verdict=verdict, compute_verdict=b.verdict)
    found = [Collective(_op(trace, j), trace.name_of(j), trace.ts[j] + shift_us, trace.dur[j],
                        trace.lanes[trace.lane[j]].tid) for j in coll]
    if not found:  # a CPU job (gloo): the reductions are CPU events, each lasting until every rank has arrived
        found = [Collective(re.sub(r"[^a-z]", "", trace.name_of(i).split(":", 1)[1].lower()), trace.name_of(i),
                            trace.ts[i] + shift_us, trace.dur[i], trace.lanes[trace.lane[i]].tid)
                 for i in range(len(trace)) if not trace.is_gpu(i) and trace.name_of(i).startswith(GLOO_PREFIX)]
    found.sort(key=lambda c: c.start_us)
    return row, found


# --- across ranks: the same collective on each -------------------------------------------


@dataclass
class Match:
    """One collective found on every rank: entries in the order of ``Ranks.ranks``."""

    op: str
    starts_us: list[float]
    durs_us: list[float]

    @property
    def ends_us(self) -> list[float]:
        return [s + d for s, d in zip(self.starts_us, self.durs_us)]


def match(per_rank: list[list[Collective]]) -> tuple[list[Match], list[int]]:
    """The collectives found on every rank, and how many of each rank's were left unmatched.

    The starts must be on one clock. The n-th collective of an operation on
    one rank is the n-th of that operation on the others, with one check: the
    same collective runs on every rank at one moment at least (no rank can
    finish an all-reduce, all-gather or all-to-all before every rank has
    entered it), so the kernels must overlap in time. When the first
    unmatched kernels of each rank do not all overlap, the one that ends
    first has no partner on some rank (that rank's recording started later,
    or a sampled trace left it out): it is set aside, and the walk goes on.
    """
    n = len(per_rank)
    unmatched = [0] * n
    out: list[Match] = []
    for op in sorted({c.op for cs in per_rank for c in cs}):
        queues = [[c for c in cs if c.op == op] for cs in per_rank]
        pos = [0] * n
        while all(p < len(q) for p, q in zip(pos, queues)):
            heads = [q[p] for p, q in zip(pos, queues)]
            if max(h.start_us for h in heads) < min(h.end_us for h in heads):
                out.append(Match(op, [h.start_us for h in heads], [h.dur_us for h in heads]))
                pos = [p + 1 for p in pos]
            else:
                r = min(range(n), key=lambda k: heads[k].end_us)
                pos[r] += 1
                unmatched[r] += 1
        unmatched = [u + len(q) - p for u, q, p in zip(unmatched, queues, pos)]
    out.sort(key=lambda m: min(m.starts_us))
    return out, unmatched


@dataclass
class Straggler:
    """Who the others wait for, with the figures behind the answer."""

    rank: int | None  # None: one rank, too few matched collectives, or within noise
    reason: str
    wait_us: list[float]  # per rank (Ranks.ranks order): time inside matched collectives beyond the quickest rank
    last_arrivals: list[int] | None  # per rank: matched collectives it entered last, beyond noise
    median_late_us: list[float] | None  # per rank: median delay of its entry behind the first rank


def find_straggler(ranks: list[int], matched: list[Match]) -> Straggler:
    """The straggler: the rank the others wait for, or None with the reason.

    The method: in each matched collective, the rank that enters last (its
    kernel starts latest on the shared clock) does not wait; every rank that
    entered before it waits inside the kernel until it comes, so its kernel
    lasts longer by about the delay. A rank's *wait* in a collective is its
    kernel's time beyond the quickest rank's kernel for the same collective.
    The candidate is the rank with the least wait summed over the matched
    collectives. It is named the straggler when

    1. at least :data:`MIN_MATCHED` collectives matched;
    2. the others wait more than it, on average, by at least
       :data:`NOISE_SHARE` of their time in the matched collectives, and by
       at least :data:`NOISE_PER_COLLECTIVE_US` in the median collective:
       one late arrival (a pause, the profiler stopping) does not make a
       straggler, a lead that holds across the steps does; else the ranks
       are within noise;
    3. it also entered last, by more than :data:`NOISE_PER_COLLECTIVE_US`
       after the first rank, in more than half of the matched collectives;
       else waiting and arrival do not point at one rank.

    Matching needs the ranks on one clock (:func:`match`); without one,
    :func:`helpers.facts.ranks.read_ranks` compares the ranks row by row only.
    """
    n = len(ranks)
    wait = [0.0] * n
    last = [0] * n
    late: list[list[float]] = [[] for _ in range(n)]
    per: list[list[float]] = []  # per matched collective: each rank's wait in it
    spans: list[list[tuple[float, float]]] = [[] for _ in range(n)]  # per rank: where it waited, on the shared clock
    for m in matched:
        quickest = min(m.durs_us)
        first = min(m.starts_us)
        w = [d - quickest for d in m.durs_us]
        per.append(w)
        for r in range(n):
            spans[r].append((m.starts_us[r], m.starts_us[r] + w[r]))  # the wait opens the kernel: until the last comes
            late[r].append(m.starts_us[r] - first)
        k = max(range(n), key=lambda x: m.starts_us[x])
        if m.starts_us[k] - first > NOISE_PER_COLLECTIVE_US:
            last[k] += 1
    # a rank's waits in collectives that ran at the same time (gloo's on two threads, say) are counted once
    wait = [total(merged(x)) for x in spans]
    lasts = last if matched else None
    lates = [statistics.median(x) for x in late] if matched else None

    def none(reason: str) -> Straggler:
        return Straggler(None, reason, wait, lasts, lates)

    if n < 2:
        return none("one rank only: nothing to compare")
    if len(matched) < MIN_MATCHED:
        return none(f"{len(matched)} collective(s) matched across the ranks: too few to name a straggler "
                    f"(at least {MIN_MATCHED} needed)")
    c = min(range(n), key=wait.__getitem__)
    others = [r for r in range(n) if r != c]
    gain = statistics.mean(wait[r] for r in others) - wait[c]
    typical = statistics.median(statistics.mean(w[r] for r in others) - w[c] for w in per)
    their_time = statistics.mean(sum(m.durs_us[r] for m in matched) for r in others)
    who = f"rank {ranks[c]}"
    they = "the other rank" if n == 2 else "the other ranks (on average)"
    if their_time <= 0 or gain < NOISE_SHARE * their_time or typical < NOISE_PER_COLLECTIVE_US:
        share = f" ({gain / their_time:.1%} of their {us(their_time)} in them)" if their_time > 0 else ""
        return none(f"within noise: over {len(matched)} matched collectives {they} waited {us(max(gain, 0.0))} "
                    f"more than {who}, the least waiting rank{share}, {us(typical)} in the median collective "
                    f"(a straggler needs {NOISE_SHARE:.0%} and {NOISE_PER_COLLECTIVE_US:g} us)")
    # the wait is the union of each rank's wait spans, not the difference of the ranks' times inside the
    # collectives: where two collectives overlap in time (gloo's on two threads), the transfer of one runs
    # during the wait of the other, so those differences would count it
    waited = (f"{they} waited {us(gain)} more than {who} inside the same {len(matched)} collectives "
              f"({us(typical)} in the median one; a rank's wait is how much longer it spent inside a collective "
              "than the rank that spent least, and where two collectives ran at once, their waits are counted "
              "once)")
    assert lasts is not None and lates is not None
    if 2 * lasts[c] <= len(matched):
        return none(f"{who} waits least, but entered last in only {lasts[c]} of {len(matched)} matched collectives: "
                    "waiting and arrival do not point at one rank")
    return Straggler(ranks[c], f"{who} entered last in {lasts[c]} of {len(matched)} matched collectives "
                               f"(over all {len(matched)}, a median of {us(lates[c])} after the first rank); {waited}", wait,
                     lasts, lates)
