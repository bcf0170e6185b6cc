"""The rules across ranks: a straggler, collectives that run with no compute beside them, little overlap.

The facts they read are :mod:`helpers.facts.collectives`' (one rank's row, the
matched collectives, the straggler) and :mod:`helpers.facts.ranks`' (a folder
of rank traces read together). :func:`diagnose_ranks` runs the rules on a
folder's ranks; :func:`trace_rules` gives :mod:`helpers.advice.diagnose` the
ones that read one rank's trace alone.

Imports neither torch nor pandas.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

from ..facts.collectives import COMMUNICATION_BOUND, RankRow, Straggler, rank_facts, rank_of
from ..facts.ranks import Ranks
from ..facts.text import us
from .findings import NOTE_BELOW, Context, Finding, Severity, rank
from .ledger import Gain, Speedup, amdahl
from .rulebook import RuleId
from .sync_rules import TORCHREC_PIPELINE
from .trace_rules import UNRECORDED_SHARE  # a straggler's own trace: the same share as a rank read alone


#: overlap below which the low-overlap rule speaks (when collectives are a real part of the GPU's time)
LOW_OVERLAP_PCT = 50.0
#: collectives that take less than this share of GPU busy time are not worth a finding
MINOR_SHARE = 0.05
#: a straggler's GPU work beyond the others' median, as a share of their wait for it, from which the gain is sized by it
EXCESS_OF_WAIT = 0.5
#: a straggler whose fix cannot be sized (no extra GPU work to remove) and whose others' wait for it alone is under
#: this share of the window is a note: at most about a 1.1x gain, against the ranks' own findings
STRAGGLER_MINOR = 0.10


# --- the rules ----------------------------------------------------------------------------

_DDP = "https://pytorch.org/docs/stable/notes/ddp.html"
#: collectives that exchange data between ranks (an embedding all-to-all, which NCCL runs as SendRecv kernels; sends
#: and receives), not reductions such as DDP's of gradients
_EXCHANGE = ("sendrecv", "alltoall", "alltoallv", "alltoallbase", "send", "recv")


def _overlap_advice(rows: list[RankRow], ddp: str) -> str:
    """How to hide these ranks' collectives: ``ddp`` (DDP's all-reduce advice) where all-reduce is most of their
    collective time; else an exchange's advice (DDP's buckets do not touch it), or both for a mix of kinds."""
    ops: dict[str, float] = {}
    for x in rows:
        for k, v in x.collective_ops.items():
            ops[k] = ops.get(k, 0.0) + v
    whole = sum(ops.values())
    exchange = sum(v for k, v in ops.items() if k in _EXCHANGE)
    if whole <= 0 or ops.get("allreduce", 0.0) >= 0.5 * whole:
        return ddp
    kinds = ", ".join(f"{k} {v / whole:.0%}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:3])
    labels = sorted({n for x in rows for n in x.pipeline})
    if labels:  # the loop is pipelined already: the exchange stays exposed beside it
        pipelined = (f"this trace's labels ({', '.join(repr(n) for n in labels)}) are TorchRec's pipelined training "
                     f"loop's own ({TORCHREC_PIPELINE}): the pipeline runs already, and the exchange still has no "
                     "compute beside it for that time; it can hide only behind the compute there is, so fewer or "
                     "larger exchanges (more samples per rank) or a sharding that moves less data between ranks are "
                     "what is left to try")
    else:
        pipelined = ("an exchange such as a sharded embedding's all-to-all hides behind compute only where the "
                     "training loop pipelines it (TorchRec's TrainPipelineSparseDist overlaps the next batch's input "
                     f"distribution with this batch's forward and backward: {TORCHREC_PIPELINE})")
    if exchange >= 0.5 * whole:
        return (f"most of this collective time exchanges data between ranks (all-to-all, send and receive: {kinds} "
                "of the collectives' GPU time, by the ops that launched them) rather than reducing it as DDP's "
                f"gradient all-reduce does: {pipelined}")
    return (f"the collectives are of several kinds ({kinds} of their GPU time, by the ops that launched them): hide "
            f"each where the program allows: {pipelined}; {ddp}")


def _finding(*args: Any) -> Finding:
    return Finding(*args)


_RANK_WINDOW = "the rank's recorded window"


def _window_of(x: RankRow) -> str:
    """What a share of one rank's window is of, naming the rank where there is one."""
    return f"rank {x.rank}'s recorded window" if x.rank >= 0 else _RANK_WINDOW
#: collective time with nothing beside it, when a fix hides it: half of it as a point figure, at best all
OVERLAP = Speedup(2.0, 1.25, float("inf"))


def _communication_bound(rows: list[RankRow], folder: bool = True,
                         straggler: "Straggler | None" = None, leads: bool = True,
                         world_size: int | None = None) -> "Finding | None":
    """Ranks whose exposed collective time is a large share of their GPU time; with a straggler named, what remains
    of that time once it is fixed (the exposed time beyond each rank's wait for the straggler)."""

    bound = [x for x in rows if x.verdict == COMMUNICATION_BOUND]
    if not bound:
        return None
    named = straggler is not None and straggler.rank is not None
    ev = [f"{_who(x)}: {us(x.collective_us)} in collectives, {us(x.exposed_us)} of it with no compute running: "
          f"{x.exposed_share:.0%} of the {us(x.gpu_busy_us)} its GPU was busy (its compute: {us(x.compute_us)})"
          for x in bound]
    remains = {x.rank: max(x.exposed_us - (x.wait_us or 0.0), 0.0) for x in bound}
    if named:
        ev += [f"{_who(x)}: {us(x.wait_us or 0.0)} of its collective time lies beyond the quickest rank's time in "
               f"the same collectives (a wait for later ranks, rank {straggler.rank} most often: see straggler); "
               + (f"{us(remains[x.rank])} of its exposed time lies beyond that wait" if remains[x.rank] > 0 else
                  "that wait is at least as long as all of its exposed time, so what the transfer itself costs cannot be "
                  "read until the straggler is fixed")
               for x in bound if x.rank != straggler.rank]
        partial = world_size is not None and len(rows) < world_size  # the latest here may wait for one not here
        ev += [(f"{_who(x)} is the latest of the ranks recorded here: its {us(x.exposed_us)} is the transfer and its "
                "waits for ranks not in this folder, which it cannot tell apart" if partial else
                f"{_who(x)} is the rank the others wait for most: its {us(x.exposed_us)} is the transfer and its own "
                "waits in the collectives it did not enter last")
               for x in bound if x.rank == straggler.rank]
        title = ("What remains once the straggler is fixed: collectives that run with no compute beside them" if leads
                 else "Waiting on communication: the GPU spends more time in collectives alone than computing")
    else:
        title = "Waiting on communication: the GPU spends more time in collectives alone than computing"
    f = _finding(RuleId.COMMUNICATION_BOUND, title, Severity.ISSUE, ev,
                 ("fix the straggler first; then " if named and leads else
                  "the straggler note says how much of it is the wait for one late rank; " if named else
                  "find out how much of it is waiting for another rank "
                  + ("(the straggler finding, if any, says who and how long) " if folder else
                     "(diagnose the folder of every rank's trace: the straggler rule) ") + "and how much is transfer; ")
                 + _overlap_advice(bound, "overlap collectives with compute (DDP launches each bucket's all-reduce "
                                          f"during the backward pass: {_DDP})") + "; send fewer or larger messages")
    worst = max(bound, key=lambda x: remains[x.rank] if named else x.exposed_us)
    f.size(remains[worst.rank] if named else worst.exposed_us, worst.window_us,
           "collective time with no compute beside it" + (", beyond its wait for later ranks" if named else ""),
           _window_of(worst))
    if f.share is not None:
        who = remains[worst.rank] if named else worst.exposed_us
        f.gain = _hidden(worst, who, "if half of that collective time hid behind compute, at most the compute not "
                                     "already beside a collective (how much overlap or fewer, larger messages give "
                                     "depends on the model and the link)")
    return f


def _low_overlap(rows: list[RankRow], covered: "Finding | None" = None) -> "Finding | None":
    """Ranks whose collectives mostly run alone, those whose exposed time ``covered`` (communication-bound) claims
    left out: the same microseconds are claimed once."""
    if covered is not None:
        rows = [x for x in rows if x.verdict != COMMUNICATION_BOUND]

    low = [x for x in rows if x.overlap_pct is not None and x.overlap_pct < LOW_OVERLAP_PCT
           and x.gpu_busy_us > 0 and x.exposed_us >= MINOR_SHARE * x.gpu_busy_us]
    if not low:
        return None
    ev = [f"{_who(x)}: {x.overlap_pct:.1f}% of its collective time had compute running beside it; "
          f"{us(x.exposed_us)} did not" for x in low]
    f = _finding(RuleId.LOW_OVERLAP, "Collectives mostly run alone: under half of their time hidden behind compute",
                 Severity.ISSUE, ev,
                 _overlap_advice(low, "start collectives while independent compute remains (async_op=True and "
                                 f"wait() as late as possible; DDP's gradient buckets, bucket_cap_mb: {_DDP})")
                 + "; check that the collectives run on a stream of their own")
    worst = max(low, key=lambda x: x.exposed_us)
    f.size(worst.exposed_us, worst.window_us, "collective time with no compute beside it", _window_of(worst))
    if f.share is not None:
        f.gain = _hidden(worst, worst.exposed_us, "if half of that collective time hid behind compute, at most the "
                                                  "compute not already beside a collective")
    return f


def _hidden(x: RankRow, exposed_us: float, basis: str) -> "Gain | None":
    """The rank's step once part of ``exposed_us`` (collective time with nothing beside it) hides behind compute:
    half of it as a point figure, none to all of it for the ends, never more than the compute that is not
    already beside a collective (a collective can only hide behind work there is)."""
    w = x.window_us
    free = max(x.compute_us - (x.collective_us - x.exposed_us), 0.0)
    if w <= 0:
        return None

    def after(part: float) -> float:
        return max(w - min(part * exposed_us, free), 1e-9)
    # the low end is no gain: the means of overlap can add GPU work of its own (DDP copies gradients into buckets;
    # the project's DDP pair ran only about 4% quicker than its manual all-reduce pair, h200x2-ddp and -manual)
    return Gain(w / after(0.5), 1.0, w / after(1.0),
                basis + f" ({us(free)} of compute is not beside a collective now); the low end: no gain "
                "(overlapping can add GPU work of its own, such as DDP's copies into its gradient buckets)")




def _straggler(r: Ranks) -> "Finding | None":

    s = r.straggler
    if s.rank is None:
        return None
    k = [x.rank for x in r.ranks].index(s.rank)
    me = r.ranks[k]
    ev = [s.reason]
    if r.world_size is not None and len(r.ranks) < r.world_size:  # the rank it waits for may be one not here
        ev.append(f"the folder holds {len(r.ranks)} of the job's {r.world_size} ranks: rank {s.rank} is the latest of "
                  "these, and may itself wait for a rank not recorded here")
    left = {k: v for k, v in r.unmatched.items() if v}
    if left:
        # matched: the n-th collective of an op on each rank, where their kernels overlap in time (a collective
        # runs on every rank at once); the rest have no partner in the recordings, and say nothing of lateness
        ev.append("a collective is matched across ranks where its kernels overlap in time on every rank (each rank "
                  "is inside it at once); left out as without a partner in the other recordings: "
                  + ", ".join(f"rank {k}: {v}" for k, v in sorted(left.items()))
                  + " (a sampled or filtered trace, or recordings that started apart)")
    waited = [f"rank {x.rank} {us(x.wait_us)}" for x in r.ranks if x.rank != s.rank and x.wait_us is not None]
    if waited:  # one line: each other rank's wait, then the straggler's own once (review 34ff)
        ev.append("waited in all inside the matched collectives (overlapping waits counted once): "
                  + ", ".join(waited) + f"; rank {s.rank} itself {us(me.wait_us)}")
    others = [x.compute_us for x in r.ranks if x.rank != s.rank]
    if any(x.compute_us > 0 for x in r.ranks):
        ev.append(f"compute (GPU work other than collectives): rank {s.rank} {us(me.compute_us)}, the others "
                  + ", ".join(f"{us(v)}" for v in others))
    f = _finding(RuleId.STRAGGLER, f"Straggler: the other ranks wait for rank {s.rank} in their collectives",
                 Severity.ISSUE, ev,
                 f"look at what rank {s.rank} does before the collectives it enters last: its GPU work, its CPU "
                 "side, its input; one hypothesis to test is an uneven split of work between ranks (more data, "
                 "larger shards or more compute on this rank)")
    waiting = [x for x in r.ranks if x.rank != s.rank and x.wait_us is not None]
    if not waiting:
        return f
    gpu = any(x.compute_us > 0 or x.collective_us > 0 for x in r.ranks)
    # what the others wait for it: their time inside the matched collectives beyond its own, on average (the
    # straggler's reason says the same figure); a rank that also waited for someone else is not charged to it
    lateness = statistics.mean(x.wait_us or 0.0 for x in waiting) - (me.wait_us or 0.0)
    # ... but only the part that this rank alone causes: where it enters last, how long after the next-latest rank
    # (with it on time, the others would still wait for that one). Where other ranks are late too, this is less.
    alone = [m.starts_us[k] - max(v for j, v in enumerate(m.starts_us) if j != k) for m in r.matched
             if len(m.starts_us) > 1 and m.starts_us[k] >= max(m.starts_us)]
    alone_us = sum(alone)
    if alone_us < 0.9 * lateness:
        ev.append(f"in the {len(alone)} matched collectives rank {s.rank} entered last, it came {us(alone_us)} in all "
                  f"after the next-latest rank: that much of the others' wait is for rank {s.rank} alone; the rest "
                  f"({us(max(lateness - alone_us, 0.0))} on average) is for other ranks that were late too")
        lateness = alone_us
    started = _started_late(r, k, alone_us)
    if started:
        ev.append(started)
        same = {x.first_step for x in r.ranks}
        if len(same) == 1 and None not in same:  # one step on every rank: it reached that step late
            f.next = (f"every rank records the same step ({same.pop()}), and rank {s.rank} reached it late: what "
                      "delayed it lies in the steps before, which are not recorded; record several steps on every "
                      "rank (a profiler schedule with more active steps) and look at what rank "
                      f"{s.rank} does before the collectives it enters last (its CPU side, its input)")
        else:
            f.next = (f"the ranks' recordings began apart: record every rank from the same step (a profiler "
                      f"schedule counted in steps, started on every rank at once), then look again; if rank "
                      f"{s.rank} still enters last, look at what it does before those collectives (its CPU side, "
                      "its input)")
    before = max(x.window_us for x in r.ranks)
    f.size(max(lateness, 0.0), before, f"the other ranks' wait for rank {s.rank} alone in the matched collectives"
           + (" (some of that time their other GPU work ran beside them)" if gpu else ""),
           "the longest rank's recorded window")
    # The job takes as long as its slowest rank, and the others' wait for the straggler is the most that fixing it
    # can save (past that, another rank is the slowest). Where the straggler's own GPU work exceeds the others' by
    # enough to explain that wait, the fix removes the smaller of the two; where it does not, the trace does not
    # say what delays it (its CPU side, its input, something before the recording): the bound alone is given.
    others_compute = statistics.median(others) if others else 0.0
    excess = me.compute_us - others_compute
    if before <= 0 or lateness <= 0:
        return f
    bound = before / max(before - lateness, 1e-9)
    if gpu and excess >= EXCESS_OF_WAIT * lateness:
        cut = min(excess, lateness)
        # the high end is the bound: the extra work also delays what the straggler launches after it, so the
        # sibling recording without it (h200x2-ddp) ran quicker than its GPU excess alone would say
        f.gain = Gain(before / (before - cut), before / (before - cut / 2), bound,
                      f"the job takes as long as its slowest rank (its recorded window, {us(before)}): without rank "
                      f"{s.rank}'s extra GPU work ({us(excess)} more than the others' median), the others wait "
                      f"{us(cut)} less; the high end: their whole wait, {us(lateness)}, the most any fix of it can "
                      f"save; the low end: half of that {us(cut)}")
        return f
    if not gpu:
        why = (f"the trace holds no GPU work (the ranks ran on CPUs): what delays rank {s.rank} is in its time before "
               "the collectives it enters last")
    elif excess <= 0:
        why = (f"rank {s.rank}'s GPU work is no larger than the others' ({us(me.compute_us)} against "
               f"{us(others_compute)}, their median): what delays it is not in its GPU work")
    else:
        why = (f"rank {s.rank}'s GPU work is {us(excess)} more than the others' median ({us(me.compute_us)} against "
               f"{us(others_compute)}), less than half of the {us(lateness)} the others wait for it: what delays it "
               "is mostly elsewhere")
    # time with no op recorded is a clue only where the straggler has more of it than the others: a rank that waits
    # inside annotations or collectives the profiler records as no op can show as much (exam 9's rank 1)
    quiet_others = statistics.median(x.unrecorded_us for x in r.ranks if x.rank != s.rank)
    quiet = ""
    if me.window_us > 0 and me.unrecorded_us >= UNRECORDED_SHARE * me.window_us:
        quiet = (f"; its trace records no op (nor a CPU backend's collective) on any CPU thread for {us(me.unrecorded_us)} of its "
                 f"{us(me.window_us)} window ({me.unrecorded_us / me.window_us:.0%}), "
                 + (f"the other ranks' {us(quiet_others)} (their median)" if len(r.ranks) > 2 else
                    f"the other rank's {us(quiet_others)}"))
        unseen = me.unrecorded_us - quiet_others >= 0.5 * lateness
        quiet += (": Python between ops, sleeping or waiting on input the profiler does not see, one of them a "
                  "hypothesis to test" if unseen else
                  ": about as much, so that time alone does not tell the ranks apart")
        if unseen and not started:  # the clue is the time no op covers, not its work: say where to look for it
            f.next = (f"look at what rank {s.rank} runs between its ops before the collectives it enters last: its "
                      "trace records no op there, so record again with with_stack=True (the Python functions that "
                      "ran between the ops) or time that part of its step by hand (time.perf_counter)")
    if not gpu and f.next.startswith(f"look at what rank {s.rank} does"):  # a CPU job: there is no GPU work to look at
        f.next = f.next.replace("its GPU work, its CPU side, its input", "its CPU side, its input")
    ev.append(why + (" (its ops, its input, or time no op recorded)" if not gpu else
                     " (its CPU side, its input, or something before the recording)") + quiet
              + f", so no gain is sized, only a bound: the others' wait; were the delay gone, the job would be at most "
                f"{bound:.2g}x faster")
    return f


def _started_late(r: Ranks, k: int, late_us: float) -> str:
    """Evidence where the straggler's lateness is mostly its recording starting later than the first rank's: the
    first matched collective it entered last, the others already inside, while its own steps began as late."""
    firsts = [m for m in r.matched if len(m.starts_us) == len(r.ranks) and m.starts_us[k] >= max(m.starts_us)]
    if not firsts or late_us <= 0:
        return ""
    m = min(firsts, key=lambda x: min(x.starts_us))
    j = min(range(len(m.starts_us)), key=m.starts_us.__getitem__)  # the rank that entered it first
    late = m.starts_us[k] - m.starts_us[j]
    offset = r.ranks[k].start_us - r.ranks[j].start_us
    if late <= 0 or offset < 0.8 * late or late < 0.5 * late_us:
        return ""
    me, first = r.ranks[k].rank, r.ranks[j].rank
    return (f"rank {me}'s recorded window began {us(offset)} after rank {first}'s, and it entered its first matched "
            f"collective {us(late)} after rank {first}: from its own window's start it took "
            f"{us(m.starts_us[k] - r.ranks[k].start_us)} to reach that collective, against rank {first}'s "
            f"{us(m.starts_us[j] - r.ranks[j].start_us)}; most of its lateness lies before its recorded window "
            "began, where the trace cannot show what delayed it")


def diagnose_ranks(r: Ranks) -> list["Finding"]:
    """The distributed rules on a folder's ranks: a straggler first, then what remains once it is fixed."""

    lead = _straggler(r)
    # a straggler that costs the others little is a note among the rest: by its share of the window, or by the
    # most its fix could gain (the others' wait for it alone), which is all that a straggler with no extra GPU work
    # can be sized by
    minor = lead is not None and lead.share is not None and (
        lead.share < NOTE_BELOW or (lead.gain is None and lead.share < STRAGGLER_MINOR))
    bound = _communication_bound(r.ranks, straggler=r.straggler, leads=not minor, world_size=r.world_size)
    rest = [f for f in (bound, _low_overlap(r.ranks, bound)) if f is not None]
    if minor:
        assert lead is not None
        lead.severity = Severity.NOTE
        rest, lead = rest + [lead], None
    rest = rank(rest)
    if lead is not None:
        for f in rest:
            if f.rule == RuleId.LOW_OVERLAP:
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
    def bound(c: "Context") -> "Finding | None":
        return c.once("communication-bound", lambda: _communication_bound(_trace_rows(c), folder=False))
    return [bound, lambda c: _low_overlap(_trace_rows(c), bound(c))]
