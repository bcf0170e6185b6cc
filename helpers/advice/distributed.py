"""Several ranks of one distributed job: one trace per rank, read together.

``python -m helpers summarize DIR`` and ``diagnose DIR`` come here. Each rank
gets a row (:class:`RankRow`): GPU busy and idle time, compute time (GPU work
other than collectives), collective time, how much of the collective time
had compute running beside it (``overlap_pct``), and a verdict that says when
a rank spends its GPU time waiting in collectives rather than computing.
Across ranks, the same collective is found on each rank (:func:`match`) and
the rank the others wait for is named (:func:`find_straggler`).

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

import errno
import os
import re
import stat
import statistics
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from itertools import filterfalse
from pathlib import Path
from typing import Any, Callable

from .. import facts
from ..reader import vector
from ..facts.text import short, us
from .findings import ISSUE, NOTE_BELOW, Context, Finding, rank
from ..reader.spans import clipped
from ..reader.trace import Trace, TraceError, read_trace


#: exposed collective time over GPU busy time at or above which a rank is communication-bound
COMMUNICATION_BOUND_SHARE = 0.5
#: overlap below which the low-overlap rule speaks (when collectives are a real part of the GPU's time)
LOW_OVERLAP_PCT = 50.0
#: collectives that take less than this share of GPU busy time are not worth a finding
MINOR_SHARE = 0.05
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
    compute_us: float  # GPU time of everything but collectives (summed durations)
    collective_us: float  # GPU time of collectives (summed durations)
    collectives: int
    overlap_pct: float | None  # share of collective time (in the window) with compute running too
    exposed_us: float  # collective time (in the window) with no compute running
    verdict: str | None  # "communication-bound", else facts.balance's verdict on compute only
    compute_verdict: str | None  # facts.balance's verdict alone
    # Across ranks (None with one rank, or with no shared clock):
    wait_us: float | None = None  # inside matched collectives, beyond the quickest rank's time
    last_arrivals: int | None = None  # matched collectives it entered last, beyond noise
    median_late_us: float | None = None  # median delay of its entry behind the first rank's

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


def rank_facts(trace: Trace, rank: int, shift_us: float = 0.0) -> tuple[RankRow, list[Collective]]:
    """One rank's row, and its collectives with starts on the shared clock (the trace's times plus ``shift_us``)."""
    b = facts.balance(trace)
    work = facts.gpu_work(trace)
    coll = facts.collective_work(trace, work)
    lo, hi = facts.window(trace) if len(trace) else (0.0, 0.0)
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
    row = RankRow(
        rank=rank, path=str(trace.path), device=trace.device_name, window_us=b.window_us,
        gpu_busy_us=b.gpu_busy_us, idle_us=max(b.window_us - b.gpu_busy_us, 0.0),
        idle_pct=100.0 * b.gpu_idle_share if b.gpu_idle_share is not None else None,
        self_cpu_us=b.self_cpu_us, compute_us=b.device_us, collective_us=b.collective_us,
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
    :func:`read_ranks` compares the ranks row by row only.
    """
    n = len(ranks)
    wait = [0.0] * n
    last = [0] * n
    late: list[list[float]] = [[] for _ in range(n)]
    per: list[list[float]] = []  # per matched collective: each rank's wait in it
    for m in matched:
        quickest = min(m.durs_us)
        first = min(m.starts_us)
        w = [d - quickest for d in m.durs_us]
        per.append(w)
        for r in range(n):
            wait[r] += w[r]
            late[r].append(m.starts_us[r] - first)
        k = max(range(n), key=lambda x: m.starts_us[x])
        if m.starts_us[k] - first > NOISE_PER_COLLECTIVE_US:
            last[k] += 1
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
    waited = (f"{they} waited {us(gain)} more than {who} inside the same {len(matched)} collectives "
              f"({us(typical)} in the median one)")
    assert lasts is not None and lates is not None
    if 2 * lasts[c] <= len(matched):
        return none(f"{who} waits least, but entered last in only {lasts[c]} of {len(matched)} matched collectives: "
                    "waiting and arrival do not point at one rank")
    return Straggler(ranks[c], f"{who} entered last in {lasts[c]} of {len(matched)} matched collectives "
                               f"(median {us(lates[c])} after the first rank); {waited}", wait, lasts, lates)


# --- a folder of rank traces -------------------------------------------------------------


@dataclass
class Ranks:
    """Every rank of a folder, side by side."""

    folder: str
    ranks: list[RankRow]  # by rank
    world_size: int | None
    backend: str | None
    clock: str | None  # how events were put on one clock, or None: no shared clock
    matched: list[Match]
    unmatched: dict[int, int]  # rank -> collectives with no partner on some rank
    straggler: Straggler
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    set_aside: list[tuple[str, str]] = field(default_factory=list)  # (file, what was left out of it and why)

    @property
    def end_spread_us(self) -> float | None:
        """Median, over matched collectives, of the gap between the first and last rank's end.

        Ranks leave a collective at nearly the same moment, so a small value
        says the clocks and the matching agree; a large one says to doubt both.
        """
        if not self.matched or self.clock is None:
            return None
        return statistics.median(max(m.ends_us) - min(m.ends_us) for m in self.matched)

    def to_json(self) -> dict[str, Any]:
        """The command line's ``summarize DIR --json`` object."""
        def rnd(v: Any) -> Any:
            return round(v, 3) if isinstance(v, float) else v

        rows = [{k: rnd(v) for k, v in asdict(r).items()} for r in self.ranks]
        return {
            "folder": self.folder,
            "world_size": self.world_size,
            "backend": self.backend,
            "clock": self.clock,
            "ranks": rows,
            "straggler": self.straggler.rank,
            "straggler_reason": self.straggler.reason,
            "matched_collectives": len(self.matched),
            "unmatched_collectives": {str(k): v for k, v in self.unmatched.items()},
            "matched_end_spread_us": rnd(self.end_spread_us),
            "matched": [{"op": m.op, "start_us": [rnd(x) for x in m.starts_us], "dur_us": [rnd(x) for x in m.durs_us]}
                        for m in self.matched],
            "skipped": [{"path": p, "reason": why} for p, why in self.skipped],
            **({"set_aside": [{"path": p, "reason": why} for p, why in self.set_aside]} if self.set_aside else {}),
        }


def _when(t_us: float) -> str:
    return datetime.fromtimestamp(t_us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _is_json_name(p: Path) -> bool:
    return p.name.endswith((".json", ".json.gz"))


def _not_a_trace_file(p: Path) -> str | None:
    """Why the folder entry ``p`` is no trace file to read, without opening it; None for a regular ``*.json(.gz)``."""
    try:
        st = os.stat(p)  # through a symbolic link, to what it points at
    except OSError as e:
        if not p.is_symlink():
            return f"cannot be read ({e.strerror or e})"
        if e.errno == errno.ELOOP:
            return "a symbolic link that loops"
        try:
            target = os.readlink(p)
        except OSError:
            target = "?"
        return f"a symbolic link to {target}, which does not exist"
    if stat.S_ISDIR(st.st_mode):
        return "a folder: folders inside the folder are not read (give that folder itself)"
    if not stat.S_ISREG(st.st_mode):
        kind = ("a named pipe" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
        return f"{kind}, not a regular file: in a folder only trace files are read"
    if not _is_json_name(p):
        return "not named *.json or *.json.gz"
    return None


@dataclass
class _Rank:
    """What is kept of one rank's trace once it is read: the trace itself is let go."""

    rank: int
    path: Path
    world_size: int | None
    backend: str | None
    has_base: bool
    origin_us: float | None  # clock_origin_us
    window: tuple[float, float] | None  # the trace's own times
    row: RankRow
    collectives: list[Collective]  # on the trace's own clock until read_ranks shifts them


def _load(t: Trace, rank: int) -> _Rank:
    info = t.meta.get("distributedInfo")
    backend = info.get("backend") if isinstance(info, dict) and isinstance(info.get("backend"), str) else None
    row, coll = rank_facts(t, rank)
    return _Rank(rank, t.path, world_size_of(t), backend, t.base_time_ns is not None, clock_origin_us(t),
                 facts.window(t) if len(t) else None, row, coll)


def read_ranks(folder: str | Path) -> Ranks:
    """Read every rank trace in ``folder`` and compare the ranks.

    Every other entry (files not named ``*.json`` or ``*.json.gz``, JSON
    files that are not traces or name no rank, folders, named pipes, broken
    symbolic links) is skipped, each with its reason in ``Ranks.skipped``;
    traces with events set aside say so in ``Ranks.set_aside``. Raises
    :class:`TraceError`, with one line, for a folder with no rank trace left,
    and for traces that cannot be one job's: two with the same rank,
    different world sizes, a rank beyond the world size, or recordings that
    do not overlap in time. One trace is held in memory at a time.
    """
    if isinstance(folder, str) and not folder:
        raise TraceError("no folder named: the path given is empty")
    folder = Path(folder)
    if not folder.is_dir():
        raise TraceError(f"{folder}: no such folder" if not folder.exists() else f"{folder}: not a folder")
    try:
        entries = sorted(folder.iterdir())
    except OSError as e:
        raise TraceError(f"{folder}: cannot be read ({e.strerror or e})") from None
    if not entries:
        raise TraceError(f"{folder}: the folder is empty: no rank traces to read")
    skipped: list[tuple[str, str]] = []
    set_aside: list[tuple[str, str]] = []
    loaded: list[_Rank] = []
    for p in entries:
        why = _not_a_trace_file(p)
        if why is not None:
            skipped.append((p.name, why))
            continue
        try:
            t = read_trace(p)
        except TraceError as e:
            skipped.append((p.name, str(e).replace(f"{p}: ", "")))
            continue
        r = rank_of(t)
        if r is None:
            skipped.append((p.name, "no rank: neither distributedInfo.rank nor 'rank<N>' in the file's name"))
            continue
        if t.set_aside is not None:
            set_aside.append((p.name, t.set_aside.line()))
        loaded.append(_load(t, r))
        del t
    if not loaded:
        why = "; ".join(f"{name}: {reason}" for name, reason in skipped[:3])
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        raise TraceError(f"{folder}: no rank trace in the folder ({why}{more})")
    _check_one_job(folder, loaded)
    loaded.sort(key=lambda x: x.rank)
    origins = [x.origin_us for x in loaded]
    clock = None
    if all(o is not None for o in origins):
        clock = ("baseTimeNanoseconds" if all(x.has_base for x in loaded) else
                 "wall-clock timestamps" if not any(x.has_base for x in loaded) else
                 "baseTimeNanoseconds and wall-clock timestamps")
        _check_overlap(folder, loaded)
        zero = min(x.origin_us for x in loaded if x.origin_us is not None)
        for x in loaded:
            shift = x.origin_us - zero if x.origin_us is not None else 0.0
            for c in x.collectives:
                c.start_us += shift
    rows = [x.row for x in loaded]
    matched, unmatched = (match([x.collectives for x in loaded]) if clock and len(rows) > 1
                          else ([], [0] * len(rows)))
    st = find_straggler([r.rank for r in rows], matched)
    if clock is None and len(rows) > 1:
        st.reason = ("the traces share no clock (a trace has neither baseTimeNanoseconds nor wall-clock "
                     "timestamps): collectives cannot be matched across ranks, so the comparison is per rank only")
    if len(rows) > 1 and matched:
        for k, row in enumerate(rows):
            row.wait_us = st.wait_us[k]
            row.last_arrivals = st.last_arrivals[k] if st.last_arrivals else None
            row.median_late_us = st.median_late_us[k] if st.median_late_us else None
    world = next((x.world_size for x in loaded if x.world_size), None)
    backend = next((x.backend for x in loaded if x.backend), None)
    return Ranks(str(folder), rows, world, backend, clock, matched,
                 {row.rank: u for row, u in zip(rows, unmatched)}, st, skipped, set_aside)


def _check_one_job(folder: Path, loaded: list[_Rank]) -> None:
    seen: dict[int, Path] = {}
    for x in loaded:
        if x.rank in seen:
            raise TraceError(f"{folder}: two traces claim rank {x.rank} ({seen[x.rank].name} and {x.path.name}): "
                             "not one job's ranks")
        seen[x.rank] = x.path
    sizes = sorted({(x.world_size, x.path.name) for x in loaded if x.world_size is not None})
    if len({w for w, _ in sizes}) > 1:
        (w1, f1), (w2, f2) = sizes[0], sizes[-1]
        raise TraceError(f"{folder}: ranks from different jobs: {f1} has a world size of {w1}, {f2} of {w2}")
    for x in loaded:
        if x.world_size is not None and x.rank >= x.world_size:
            raise TraceError(f"{folder}: {x.path.name} is rank {x.rank}, beyond its world size of {x.world_size}")


def _check_overlap(folder: Path, loaded: list[_Rank]) -> None:
    spans = [(x.origin_us + x.window[0], x.origin_us + x.window[1], x.rank) for x in loaded
             if x.window is not None and x.origin_us is not None]
    if len(spans) < 2:
        return
    a = min(spans, key=lambda s: s[1])  # the recording that ends first
    b = max(spans, key=lambda s: s[0])  # the one that starts last
    if b[0] > a[1]:
        raise TraceError(f"{folder}: the recordings do not overlap in time (rank {a[2]} ends at {_when(a[1])}, "
                         f"rank {b[2]} starts at {_when(b[0])}): ranks from different jobs or runs")


# --- as text ------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def ranks_text(r: Ranks, top: int = 10) -> str:
    """The folder's summary, as the command line prints it."""
    world = f" of a world of {r.world_size}" if r.world_size else ""
    backend = f" ({r.backend})" if r.backend else ""
    clock = (f"one clock for all ranks ({r.clock})" if r.clock else
             "no shared clock (a trace gives neither baseTimeNanoseconds nor wall-clock timestamps): "
             "ranks compared row by row only")
    out = [f"folder: {r.folder}", f"ranks: {len(r.ranks)}{world}{backend}; {clock}"]
    out.append("")
    out.append(f"  {'rank':>4}  {'GPU busy':>10}  {'idle':>6}  {'compute':>10}  {'collectives':>11}  "
               f"{'overlap':>7}  {'exposed':>10}  verdict")
    for x in r.ranks:
        out.append(f"  {x.rank:>4}  {us(x.gpu_busy_us):>10}  {_pct(x.idle_pct):>6}  {us(x.compute_us):>10}  "
                   f"{us(x.collective_us):>11}  {_pct(x.overlap_pct):>7}  {us(x.exposed_us):>10}  "
                   f"{x.verdict or 'no GPU work'}")
    out.append("")
    out.append("  compute: GPU work other than collectives; overlap: share of collective time with compute running;")
    out.append(f"  exposed: collective time with no compute; communication-bound when exposed >= "
               f"{COMMUNICATION_BOUND_SHARE:.0%} of GPU busy")
    if len(r.ranks) < 2:
        out.append("")
        out.append("one rank only: nothing to compare across ranks")
        return "\n".join(out)
    out.append("")
    unmatched = ", ".join(f"rank {k}: {v}" for k, v in r.unmatched.items() if v)
    spread = f"; they end within {us(r.end_spread_us)} of each other (median)" if r.end_spread_us is not None else ""
    out.append(f"matched collectives: {len(r.matched)} found on every rank"
               + (f" (left unmatched: {unmatched})" if unmatched else "") + spread)
    if r.matched:
        for x in r.ranks:
            arrival = ""
            if x.last_arrivals is not None:
                arrival = (f"; entered last in {x.last_arrivals} of {len(r.matched)} (by > {NOISE_PER_COLLECTIVE_US:g} us), median "
                           f"{us(x.median_late_us)} after the first rank")
            out.append(f"  rank {x.rank}: {us(x.wait_us)} inside them beyond the quickest rank{arrival}")
    who = f"rank {r.straggler.rank}" if r.straggler.rank is not None else "none"
    out.append(f"straggler: {who} ({r.straggler.reason})")
    if r.matched and top:
        out.append("")
        shown = r.matched[:top]
        out.append(f"matched collectives, in time order ({len(shown)} of {len(r.matched)}): start and duration per rank")
        for m in shown:
            cells = "  ".join(f"r{x.rank} {us(s):>9} +{us(d):>9}" for x, s, d in zip(r.ranks, m.starts_us, m.durs_us))
            out.append(f"  {short(m.op, 14):<14} {cells}")
    return "\n".join(out)


# --- the rules ----------------------------------------------------------------------------

_DDP = "https://pytorch.org/docs/stable/notes/ddp.html"


def _finding(*args: Any) -> Finding:
    return Finding(*args)


_RANK_WINDOW = "the rank's recorded window"


def _communication_bound(rows: list[RankRow], folder: bool = True,
                         straggler: "Straggler | None" = None) -> "Finding | None":
    """Ranks whose exposed collective time is a large share of their GPU time; with a straggler named, what remains
    of that time once it is fixed (the exposed time beyond each rank's wait for the straggler)."""

    bound = [x for x in rows if x.verdict == COMMUNICATION_BOUND]
    if not bound:
        return None
    named = straggler is not None and straggler.rank is not None
    ev = [f"{_who(x)}: {us(x.collective_us)} in collectives, {us(x.exposed_us)} of it with no compute running: "
          f"{x.exposed_share:.0%} of the {us(x.gpu_busy_us)} its GPU was busy (compute: {us(x.compute_us)}"
          f"{'' if x.compute_verdict is None else ', ' + x.compute_verdict + ' on its own'})" for x in bound]
    remains = {x.rank: max(x.exposed_us - (x.wait_us or 0.0), 0.0) for x in bound}
    if named:
        ev += [f"{_who(x)}: {us(x.wait_us or 0.0)} of it is waiting for rank {straggler.rank} (see straggler); "
               f"{us(remains[x.rank])} remains once that wait is gone" for x in bound]
        title = "What remains once the straggler is fixed: collectives that run with no compute beside them"
    else:
        title = "Waiting on communication: the GPU spends more time in collectives alone than computing"
    f = _finding("communication-bound", title, ISSUE, ev,
                 ("fix the straggler first; then " if named else
                  "find out how much of it is waiting for another rank "
                  + ("(the straggler finding, if any, says who and how long) " if folder else
                     "(diagnose the folder of every rank's trace: the straggler rule) ") + "and how much is transfer; ")
                 + "overlap collectives with compute (DDP launches each bucket's all-reduce during the backward "
                 f"pass: {_DDP}); send fewer or larger messages")
    worst = max(bound, key=lambda x: remains[x.rank] if named else x.exposed_us)
    return f.size(remains[worst.rank] if named else worst.exposed_us, worst.window_us,
                  "collective time with no compute beside it" + (", beyond the wait for the straggler" if named else ""),
                  _RANK_WINDOW)


def _low_overlap(rows: list[RankRow]) -> "Finding | None":

    low = [x for x in rows if x.overlap_pct is not None and x.overlap_pct < LOW_OVERLAP_PCT
           and x.gpu_busy_us > 0 and x.exposed_us >= MINOR_SHARE * x.gpu_busy_us]
    if not low:
        return None
    ev = [f"{_who(x)}: {x.overlap_pct:.1f}% of its collective time had compute running beside it; "
          f"{us(x.exposed_us)} did not" for x in low]
    f = _finding("low-overlap", "Collectives mostly run alone: little communication hidden behind compute", ISSUE, ev,
                 "start collectives while independent compute remains (async_op=True and wait() as late as "
                 f"possible; DDP's gradient buckets, bucket_cap_mb: {_DDP}) and check that they run on their own "
                 "stream")
    worst = max(low, key=lambda x: x.exposed_us)
    return f.size(worst.exposed_us, worst.window_us, "collective time with no compute beside it", _RANK_WINDOW)


def _straggler(r: Ranks) -> "Finding | None":

    s = r.straggler
    if s.rank is None:
        return None
    k = [x.rank for x in r.ranks].index(s.rank)
    me = r.ranks[k]
    ev = [s.reason]
    for x in r.ranks:
        if x.rank != s.rank and x.wait_us is not None:
            ev.append(f"rank {x.rank} spent {us(x.wait_us)} inside the matched collectives beyond the quickest rank; "
                      f"rank {s.rank} {us(me.wait_us)}")
    others = [x.compute_us for x in r.ranks if x.rank != s.rank]
    ev.append(f"compute (GPU work other than collectives): rank {s.rank} {us(me.compute_us)}, the others "
              + ", ".join(f"{us(v)}" for v in others))
    f = _finding("straggler", f"Straggler: the other ranks wait for rank {s.rank} in their collectives", ISSUE, ev,
                 f"look at what rank {s.rank} does before the collectives it enters last: its GPU work, its CPU "
                 "side, its input; one hypothesis to test is an uneven split of work between ranks (more data, "
                 "larger shards or more compute on this rank)")
    waiting = [x for x in r.ranks if x.rank != s.rank and x.wait_us is not None]
    if not waiting:
        return f
    worst = max(waiting, key=lambda x: x.wait_us or 0.0)
    return f.size(worst.wait_us or 0.0, worst.window_us, f"rank {worst.rank} waiting for rank {s.rank}", _RANK_WINDOW)


def diagnose_ranks(r: Ranks) -> list["Finding"]:
    """The distributed rules on a folder's ranks: a straggler first, then what remains once it is fixed."""

    lead = _straggler(r)
    rest = [f for f in (_communication_bound(r.ranks, straggler=r.straggler), _low_overlap(r.ranks)) if f is not None]
    if lead is not None and lead.share is not None and lead.share < NOTE_BELOW:
        rest, lead = rest + [lead], None  # a straggler that costs the others little is a note among the rest
    rest = rank(rest)
    if lead is not None:
        for f in rest:
            if f.rule == "low-overlap":
                f.title = "What remains once the straggler is fixed: " + f.title[0].lower() + f.title[1:]
                f.evidence.append("part of this exposed time is the wait for the straggler: measure again once it "
                                  "is fixed")
    return ([lead] if lead is not None else []) + rest


def _who(x: RankRow) -> str:
    return f"rank {x.rank}" if x.rank >= 0 else "this trace"


def _trace_rows(c: "Context") -> list[RankRow]:
    """The trace's own row, once per context (both rules read it), or none without collectives."""
    rows = getattr(c, "_rank_rows", None)
    if rows is None and not c.summary.balance.collective_us:
        rows = []  # no collectives (every single-GPU run): nothing more to compute
    if rows is None:
        t = c.trace
        rank = rank_of(t)
        row, _ = rank_facts(t, rank if rank is not None else -1)
        rows = [row] if row.collectives else []
        setattr(c, "_rank_rows", rows)
    return rows


def trace_rules() -> list[Callable[["Context"], "Finding | None"]]:
    """The rules that read one rank's trace alone, for :func:`helpers.advice.diagnose.diagnose`."""
    return [lambda c: _communication_bound(_trace_rows(c), folder=False), lambda c: _low_overlap(_trace_rows(c))]
