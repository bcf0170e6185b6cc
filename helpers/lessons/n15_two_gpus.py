"""Notebook 15's questions: DDP over two GPUs (all-reduces per step, a slow rank, overlap, bucket size, no_sync)
and over gloo on this CPU.

The two-GPU pairs come from ``ddp.pair`` (run now on two GPUs, else the
reference set's recording); each says in ``run.json`` how it was recorded.
A pair recorded inside DDP's first ten iterations, or whose base run is not
balanced (:func:`helpers.runs.ddp.balance`), is read for what it is: the reveals
say so, and grade only what such a pair can decide.
"""

from __future__ import annotations

import html
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..advice.rulebook import RuleId
from .. import facts
from ..runs import ddp
from ..advice import distributed
from ..facts import collectives, measure
from ..facts.ranks import Ranks, ranks_text, read_ranks
from ..lesson import plots, show, spoilers, widgets
from ..reader import vector
from ..facts.measure import Estimate, Spread
from ..reader.spans import clipped
from ..facts.text import us
from ..reader.trace import Trace, read_trace

#: DDP collects runtime statistics in its first ten iterations, then one in a hundred (the docstring of
#: ``DistributedDataParallel._set_ddp_runtime_logging_sample_rate``)
DDP_STATS_URL = "https://github.com/pytorch/pytorch/blob/main/torch/nn/parallel/distributed.py"
REDUCER_URL = "https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/reducer.hpp"
DDP_NOTES = "https://docs.pytorch.org/docs/stable/notes/ddp.html"

OVERLAP_CHOICES = ["almost none (under 10%)", "some (10% to 60%)", "most (over 60%)"]
OVERLAP_EDGES = [0.1, 0.6]
BUCKET_CHOICES = ["fewer all-reduces, less overlap", "fewer all-reduces, about the same overlap",
                  "fewer all-reduces, more overlap", "the same number"]
BUCKET_POINTS = 5.0  # overlap within this many points counts as "about the same"
SLOW_CHOICES = ["rank 0", "rank 1", "about the same on both"]
SLOW_EDGES = [1 / 1.2, 1.2]  # rank 0's kernel over rank 1's, per matched all-reduce
SLOW_ORDER = ["rank 1", "about the same on both", "rank 0"]  # the choices from the lowest ratio up
GLOO_CHOICES = ["on the main thread, inside backward", "on a thread of its own", "nowhere: the trace misses it"]


@dataclass
class Pair:
    """One two-rank run: where it came from, its ranks compared, its traces on one clock, and its own record."""

    name: str
    run: ddp.RankRun
    ranks: Ranks
    traces: list[Trace]
    shifts: list[float]
    info: dict

    @property
    def folder(self) -> Path:
        return self.run.folder

    def per_step(self, row: collectives.RankRow) -> float:
        return row.collectives / max(len(facts.steps(self.traces[row.rank])), 1)

    def balance(self) -> tuple[bool, str]:
        return ddp.balance(self.folder)


def of_run(r: ddp.RankRun) -> Pair:
    traces = [read_trace(p) for p in sorted(r.folder.glob("rank*.json"))]
    try:
        info = ddp.run_info(r)
    except Exception:  # noqa: BLE001 - a pair without its record is still read; the reveals say what is missing
        info = {}
    return Pair(r.name, r, read_ranks(r.folder), traces, collectives.clock_shifts_us(traces), info)


def load(name: str) -> Pair:
    """Scenario ``name``'s pair: run now on two GPUs when the series runs live and has them, else the recorded one."""
    return of_run(ddp.pair(name))


def describe(p: Pair) -> str:
    r = p.ranks
    clock = "both traces on one clock" if r.clock else "no shared clock between the traces"
    return (f"The {p.name} pair: {p.run.source}; {r.world_size or len(r.ranks)} ranks over {r.backend or p.run.backend}, "
            f"{clock}.")


# --- how a pair was recorded -----------------------------------------------------------------------------


def event_syncs_per_forward(t: Trace) -> list[int]:
    """For each ``forward`` span on the CPU: the ``cudaEventSynchronize`` calls inside it."""
    syncs = sorted(t.ts[i] for i in t.indices(name="cudaEventSynchronize"))
    out = []
    for i in t.indices(name="forward"):
        if t.is_gpu(i):
            continue
        lo, hi = t.ts[i], t.ts[i] + t.dur[i]
        out.append(sum(1 for s in syncs if lo <= s <= hi))
    return out


def _recording_row(p: Pair) -> tuple:
    info = p.info
    warm = info.get("warm_iterations")
    cap = info.get("bucket_mb")
    default = info.get("bucket_mb_default")
    per = [n for n in event_syncs_per_forward(p.traces[0]) if n] or event_syncs_per_forward(p.traces[0])
    return (p.name, "-" if cap is None else f"{cap:g} MiB", {True: "DDP's default", False: "passed explicitly",
                                                             None: "passed explicitly (an older record)"}[default],
            "not recorded (inside the first ten)" if warm is None else f"{warm} warm, then 2 untimed",
            f"{statistics.median(per):g}" if per else "-")


def inside_first_ten(p: Pair) -> bool:
    """Whether the pair's profiled steps fall inside DDP's first ten iterations (a recording made before the fix:
    its record names no warm iterations), or could (fewer than ten warm ones)."""
    warm = p.info.get("warm_iterations")
    return warm is None or warm + 2 < 10


def recording(*pairs: Pair) -> None:
    """How the pairs were recorded: bucket cap, iterations before the profiler, DDP's runtime statistics."""
    show.table([_recording_row(p) for p in pairs],
               ["pair", "bucket_cap_mb", "the cap", "iterations before the profiled ones",
                "cudaEventSynchronize per forward (rank 0, forwards that have any)"])
    early = [p.name for p in pairs if inside_first_ten(p)]
    explicit = [p.name for p in pairs if not p.info.get("bucket_mb_default")]
    per = [statistics.median(x) for p in pairs if (x := [n for n in event_syncs_per_forward(p.traces[0]) if n])]
    def names(xs: list[str]) -> str:
        return ", ".join(xs[:-1]) + " and " + xs[-1] if len(xs) > 1 else xs[0]

    parts = []
    if early:
        parts.append(f"The {names(early)} pair{'s were' if len(early) > 1 else ' was'} recorded inside DDP's first "
                     "ten iterations, where DDP collects runtime statistics on every iteration (then on one in a "
                     f"hundred: the docstring of <code>_set_ddp_runtime_logging_sample_rate</code> in "
                     f"<a href='{DDP_STATS_URL}'>torch/nn/parallel/distributed.py</a>).")
    if explicit:
        parts.append(f"The bucket cap was passed explicitly to the {names(explicit)} pair{'s' if len(explicit) > 1 else ''}"
                     "; a cap passed explicitly is not DDP's default even at 25 MiB: left to itself, DDP also keeps its "
                     f"first bucket small (<code>kDefaultFirstBucketBytes</code>, 1 MiB, in <a href='{REDUCER_URL}'>"
                     "reducer.hpp</a>).")
    if not early:
        parts.insert(0, "Every pair was recorded past DDP's first ten iterations"
                     + (", with DDP's default buckets." if not explicit else
                        f" ({', '.join(p.name for p in pairs if p.name not in explicit)}: DDP's default buckets)."))
    text = " ".join(parts)
    if per:
        text += (f" Each forward that has them makes {statistics.median(per):g} <code>cudaEventSynchronize</code> "
                 "calls: the CPU waits for the GPU inside forward. "
                 + ("One hypothesis: they are the runtime statistics, and a pair recorded past the tenth iteration "
                    "has none; recording the pairs again past those iterations will tell." if early else
                    "These pairs were recorded past the first ten iterations: the statistics do not explain them."))
    elif pairs and pairs[0].run.backend == "nccl":
        text += " No forward makes a <code>cudaEventSynchronize</code> call."
    if pairs:
        from ..advice.diagnose import diagnose

        hidden = next((f for f in diagnose(pairs[0].traces[0]) if f.rule == RuleId.HIDDEN_SYNC), None)
        if hidden is not None and any("cudaEventSynchronize" in e for e in hidden.evidence):
            text += (f" <code>diagnose</code> on rank 0's trace of the {pairs[0].name} pair reports them as "
                     f"<i>{html.escape(hidden.title)}</i> ({html.escape(hidden.evidence[0])}).")
    show.md(text)


# --- 15.count ----------------------------------------------------------------------------------------------


def count(base: Pair) -> None:
    """15.count: all-reduce kernels per training step."""
    r0 = base.ranks.ranks[0]
    n = base.per_step(r0)

    def reveal(answer):
        show.table([(r.rank, r.collectives, len(facts.steps(base.traces[r.rank])), f"{base.per_step(r):g}")
                    for r in base.ranks.ranks], ["rank", "all-reduce kernels", "recorded steps", "per step"])
        cap = base.info.get("bucket_mb")
        naive = (f"; gradient bytes over the bucket cap give {base.info['gradient_bytes'] / (cap * 2**20):.1f}"
                 if cap and base.info.get("gradient_bytes") else "")
        first = (" Left at its default, DDP also keeps the first bucket small (1 MiB), which can add one."
                 if base.info.get("bucket_mb_default") else "")
        return widgets.verdict(
            widgets.within(answer, n, factor=1.01),
            f"Each rank runs <b>{n:g}</b> all-reduce kernel(s) per step{naive}. DDP assigns gradients to buckets "
            "roughly in the reverse order of <code>model.parameters()</code>, the order backward produces them "
            f"(the <a href='{DDP_NOTES}'>DDP notes</a>).{first} One hypothesis for the difference: a bucket keeps "
            "taking whole gradient tensors until it passes the cap, so large weight matrices make buckets overshoot "
            "it. The bucket experiment below tests whether the cap sets the count.", actual=n)

    widgets.ask("15.count", "How many all-reduce kernels will each rank run per training step?", unit="per step",
                default=1, reveal=reveal, decides=lambda: [spoilers.value(n, "all-reduce kernel(s) per step")])


# --- across the ranks --------------------------------------------------------------------------------------


def places(t: Trace) -> dict[int, int]:
    """Each collective kernel's place among those its step launched (0: the first), by the CPU call that launched
    it: a step's all-reduce kernels can run after its CPU span has ended. Kernels launched outside the recorded
    steps are left out."""
    st = facts.steps(t)
    per: dict[int, list[int]] = {}
    for j in facts.collective_work(t):
        i = t.launch_of(j)
        if i < 0:
            continue
        k = next((n for n, s in enumerate(st) if s.contains(t.ts[i])), -1)
        if k >= 0:
            per.setdefault(k, []).append(j)
    return {j: n for js in per.values() for n, j in enumerate(sorted(js, key=lambda j: t.ts[j]))}


def positions(p: Pair) -> list[int]:
    """For each matched collective (``p.ranks.matched`` order): its place in the step on rank 0 (-1: unknown)."""
    t = p.traces[0]
    where = places(t)
    by_start = {round(t.ts[j] + p.shifts[0], 3): j for j in where}
    return [where.get(by_start.get(round(m.starts_us[0], 3), -1), -1) for m in p.ranks.matched]


def entry_gaps(p: Pair) -> dict[int, list[float]]:
    """Rank 1's entry after rank 0's (µs, negative: before), per place in the step."""
    out: dict[int, list[float]] = {}
    for m, k in zip(p.ranks.matched, positions(p)):
        if k >= 0:
            out.setdefault(k, []).append(m.starts_us[1] - m.starts_us[0])
    return out


def _place(k: int) -> str:
    return ["first", "second", "third", "fourth"][k] if k < 4 else f"number {k + 1}"


def kernels_by_place(t: Trace) -> dict[int, list[float]]:
    """Collective kernel durations (µs) by their place in the step that launched them."""
    out: dict[int, list[float]] = {}
    for j, k in places(t).items():
        out.setdefault(k, []).append(t.dur[j])
    return dict(sorted(out.items()))


def kernel_ratio(p: Pair) -> Spread:
    """Per matched all-reduce: rank 0's kernel over rank 1's."""
    return Spread.of([m.durs_us[0] / m.durs_us[1] for m in p.ranks.matched if m.durs_us[1] > 0], "x")


def straggle_ms(p: Pair) -> float | None:
    v = p.info.get("straggle_ms")
    return float(v) if v else None


def straggler(slow: Pair, base: Pair) -> None:
    """15.straggler: rank 1 starts each step late; whose all-reduce kernels are longer."""
    ratio = kernel_ratio(slow)
    late = straggle_ms(slow)

    def reveal(answer):
        g = measure.grade_choice(answer, ratio, SLOW_EDGES, SLOW_ORDER)
        by_place = {r.rank: kernels_by_place(slow.traces[r.rank]) for r in slow.ranks.ranks}
        n_places = max((len(v) for v in by_place.values()), default=0)
        show.table([(r.rank, *[us(statistics.median(by_place[r.rank][k])) if k in by_place[r.rank] else "-"
                               for k in range(n_places)],
                     us(r.wait_us) if r.wait_us is not None else "-",
                     f"{r.last_arrivals} of {len(slow.ranks.matched)}" if r.last_arrivals is not None else "-",
                     r.verdict) for r in slow.ranks.ranks],
                   ["rank", *[f"the {_place(k)} all-reduce kernel of each step (median)" for k in range(n_places)],
                    "waiting beyond the quickest rank", "all-reduces entered last", "verdict"])
        show.display_figure(plots.ranks(slow.traces, slow.shifts, title=f"{slow.name}: one step's GPU work, both ranks (the CPU rows run on into the next step)"))
        st = slow.ranks.straggler
        ends = slow.ranks.end_spread_us
        gaps_slow, gaps_base = entry_gaps(slow), entry_gaps(base)
        places = sorted(set(gaps_slow) | set(gaps_base))
        show.table([(f"the {_place(k)} of each step",
                     us(statistics.median(gaps_base[k])) if k in gaps_base else "-",
                     us(statistics.median(gaps_slow[k])) if k in gaps_slow else "-") for k in places],
                   ["all-reduce", "base pair: rank 1 entered after rank 0 (median)",
                    f"{slow.name} pair: rank 1 entered after rank 0 (median)"])
        ok, how = base.balance()
        if ok:
            own = f" The base pair is balanced (<code>ddp.balance</code>: {html.escape(how)}): the lateness here is the planted sleep's."
        else:
            own = (f" The base pair, with nothing planted, is not balanced either (<code>ddp.balance</code>: "
                   f"{html.escape(how)}; its margin is {ddp.BALANCE_MARGIN_US:g} us): rank 1 already entered late "
                   "there, so only the difference between the two columns is the planted sleep's")
            first = 0 in gaps_slow and 0 in gaps_base
            own += (": in the first all-reduce of each step, "
                    f"{us(statistics.median(gaps_slow[0]) - statistics.median(gaps_base[0]))}"
                    + (f", against the {late:g} ms planted." if late else ".") if first else ".")
        return widgets.grade(
            g, f"Per matched all-reduce, rank 0's kernel lasted <b>{ratio.median:.1f}x</b> as long as rank 1's "
            f"(IQR {ratio.quartiles[0]:.1f}x to {ratio.quartiles[1]:.1f}x over {ratio.n}). "
            "A kernel starts when its rank launches it and ends when every rank has contributed: the matched "
            "kernels of the two ranks "
            + (f"end within {us(ends)} of each other (median) however far apart they start, " if ends is not None else
               "end together, ")
            + "so the rank that arrives first shows the long kernel, and the waiting happens inside it. The slow "
            "rank's own kernels look fast. The reader names the straggler from arrival order: "
            f"<b>{'rank ' + str(st.rank) if st.rank is not None else 'none'}</b> ({html.escape(st.reason)})." + own,
            live=False)

    prompt = (f"Rank 1 starts every step {late:g} ms late. Whose all-reduce kernels will be longer?" if late else
              "Rank 1 starts every step late. Whose all-reduce kernels will be longer?")
    widgets.ask("15.straggler", prompt, choices=SLOW_CHOICES, default=SLOW_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.ratio(ratio.median)]
                + [spoilers.us(statistics.median(v)) for v in kernels_by_place(slow.traces[0]).values()])


def longest_collective_us(p: Pair, rank: int = 0) -> float:
    t = p.traces[rank]
    coll = facts.collective_work(t)
    return max((t.dur[j] for j in coll), default=0.0)


def perfetto_longest(slow: Pair) -> None:
    """15.perfetto: the longest all-reduce kernel of rank 0's straggler trace, found in Perfetto."""
    longest = longest_collective_us(slow)

    def reveal(found_us):
        return widgets.verdict(widgets.within(found_us, longest, factor=1.1),
                               f"The longest all-reduce kernel on rank 0 lasts <b>{us(longest)}</b>. Within 10% counts.",
                               actual=longest)

    widgets.ask("15.perfetto", "In rank 0's straggler trace, find the longest all-reduce kernel. How long is it?",
                unit="us", default=0, reveal=reveal, kind="task", decides=lambda: [spoilers.us(longest)])


# --- overlap ---------------------------------------------------------------------------------------------


def _overlaps(t: Trace) -> dict[int, float]:
    """Each collective kernel (by index) and the share of its own time with compute running beside it."""
    work = facts.gpu_work(t)
    coll = facts.collective_work(t, work)
    inside = set(coll)
    comp = vector.spans(t, [j for j in work if j not in inside])
    out = {}
    for j in coll:
        s, e = t.ts[j], t.ts[j] + t.dur[j]
        if e > s:
            out[j] = vector.intersection_us([(s, e)], clipped(comp, s, e)) / (e - s)
    return out


def overlap_per_collective(p: Pair, rank: int = 0) -> Spread:
    """Each collective kernel's share of its own time with compute running beside it, on one rank."""
    return Spread.of(list(_overlaps(p.traces[rank]).values()), "%")


def _by_place(p: Pair, rank: int) -> dict[int, list[float]]:
    """Per-collective overlap on a rank, grouped by the collective's place in the step that launched it."""
    t = p.traces[rank]
    where = places(t)
    out: dict[int, list[float]] = {}
    for j, v in _overlaps(t).items():
        if j in where:
            out.setdefault(where[j], []).append(v)
    return out


def _waiting_words(p: Pair) -> str:
    ok, how = p.balance()
    rows = p.ranks.ranks
    r0 = rows[0]
    if ok:
        return f"The {p.name} pair is balanced (<code>ddp.balance</code>: {html.escape(how)})."
    return (f"The {p.name} pair is not balanced (<code>ddp.balance</code>: {html.escape(how)}): of rank 0's "
            f"{us(r0.collective_us)} in all-reduces, {us(r0.wait_us or 0.0)} was waiting for the other rank inside them.")


#: rank 0's overlap is one figure read from three recorded steps: graded as uncertain by this factor either way
OVERLAP_TOLERANCE = 1.25


def overlap_grade(base: Pair, answer=None):
    """15.overlap's grade: rank 0's share of all-reduce time with compute beside it (time-weighted, as asked),
    read once from the pair, with :data:`OVERLAP_TOLERANCE` (the collectives differ by design: not noise)."""
    from ..facts.one_trace import grade_choice

    share = (base.ranks.ranks[0].overlap_pct or 0.0) / 100
    return grade_choice(answer, share, OVERLAP_TOLERANCE, OVERLAP_EDGES, OVERLAP_CHOICES, fmt=lambda v: f"{v:.0%}",
                        what="rank 0's overlap, weighted by each all-reduce's time", most=1.0)


def overlap(base: Pair) -> None:
    """15.overlap: how much of rank 0's all-reduce time has compute beside it."""
    r0 = base.ranks.ranks[0]

    def reveal(answer):
        show.pre(ranks_text(base.ranks, top=4))
        show.display_figure(plots.ranks(base.traces, base.shifts, title=f"{base.name}: one step's GPU work, both ranks on one clock (the CPU rows run on into the next step)"))
        g = overlap_grade(base, answer)
        places = _by_place(base, 0)
        by_place = "; ".join(f"the {_place(k)} all-reduce of each step {min(v):.0%} to {max(v):.0%}"
                             for k, v in sorted(places.items()))
        ok, _ = base.balance()
        others = [x for x in base.ranks.ranks[1:] if x.wait_us is not None]
        if ok:
            meaning = (" Both ranks entered each all-reduce together, so this share measures transfer hidden behind "
                       "compute.")
        else:
            late = min(base.ranks.ranks, key=lambda x: x.wait_us if x.wait_us is not None else 0.0)
            meaning = (" So this share is mostly a share of waiting, not of transfer: while rank 0 waited inside "
                       "its kernel, its own backward went on beside it."
                       + (f" Rank {late.rank}, which waited least ({us(late.wait_us or 0.0)}), had compute beside "
                          f"{(late.overlap_pct or 0):.0f}% of its {us(late.collective_us)} in all-reduces."
                          if late.rank != 0 and others else ""))
        return widgets.grade(
            g, f"On rank 0, <b>{(r0.overlap_pct or 0):.0f}%</b> of the all-reduce time had compute beside it "
            f"({us(r0.exposed_us)} exposed). All-reduce by all-reduce the share differs by the all-reduce's place in "
            f"the step, not by chance: {by_place}. "
            + _waiting_words(base) + meaning + " One hypothesis for the difference between the all-reduces of a step: "
            "a bucket's all-reduce can only start once all of its gradients exist, so the last bucket has little "
            "backward left to hide behind. The bucket experiment below changes the buckets.", live=False)

    widgets.ask("15.overlap", "On rank 0, how much of the all-reduce time will overlap compute kernels?",
                choices=OVERLAP_CHOICES, default=OVERLAP_CHOICES[0], reveal=reveal,
                # the exposed and waiting times (a share's short form, "26%", turns up in live CPU tables)
                decides=lambda: [spoilers.us(r0.exposed_us), spoilers.us(r0.wait_us or 0.0)])


# --- bucket size ----------------------------------------------------------------------------------------


def _last_in(p: Pair) -> collectives.RankRow | None:
    """The rank that waited least inside the matched all-reduces (it arrived last): its kernels are transfer."""
    rows = [x for x in p.ranks.ranks if x.wait_us is not None]
    return min(rows, key=lambda x: x.wait_us) if rows else None


def _net_overlap_bounds(r: collectives.RankRow) -> tuple[float, float]:
    """A rank's overlap (%) with its waiting inside collectives taken out: lowest if the waiting had compute beside
    it all along, highest if it had none."""
    net = r.collective_us - (r.wait_us or 0.0)
    if net <= 0:
        return 0.0, 100.0
    overlapped = r.collective_us * (r.overlap_pct or 0.0) / 100
    lo = max(overlapped - (r.wait_us or 0.0), 0.0) / net
    hi = min(overlapped / net, 1.0)
    return 100 * lo, 100 * hi


def bucket(base: Pair, big: Pair) -> None:
    """15.bucket: 100 MiB buckets instead of 25, on rank 0: how many all-reduces, and how much overlap."""
    a, b = base.ranks.ranks[0], big.ranks.ranks[0]
    na, nb = base.per_step(a), big.per_step(b)

    def reveal(answer):
        rows = []
        for p, r, n in ((base, a, na), (big, b, nb)):
            q = _last_in(p)
            ok, _ = p.balance()
            cap = p.info.get("bucket_mb")
            rows.append((f"{cap:g} MiB buckets" if cap else p.name, f"{n:g}", f"{(r.overlap_pct or 0):.0f}%",
                         us(r.collective_us), us(r.wait_us) if r.wait_us is not None else "-",
                         us(r.collective_us - (r.wait_us or 0.0)),
                         f"rank {q.rank}: {(q.overlap_pct or 0):.0f}%" if q is not None else "-",
                         "yes" if ok else "no"))
        show.table(rows, ["", "all-reduces per step (rank 0)", "rank 0: overlap", "rank 0: in all-reduces",
                          "of it waiting for the other rank", "net of the waiting",
                          "the rank that waited least: overlap", "balanced (ddp.balance)"])
        show.display_figure(plots.ranks(big.traces, big.shifts, title=f"{big.name}: one step's GPU work, both ranks (the CPU rows run on into the next step)"))
        count_text = f"Per step, rank 0 ran {na:g} all-reduces with the smaller buckets and <b>{nb:g}</b> with the larger."
        if nb >= na:
            return widgets.verdict(answer == BUCKET_CHOICES[3] and nb == na,
                                   count_text + " The cap did not lower the count here.",
                                   actual=BUCKET_CHOICES[3] if nb == na else None)
        if answer == BUCKET_CHOICES[3]:
            return widgets.verdict(False, count_text + " Fewer: a larger cap puts more gradients in each bucket.",
                                   actual=None)
        oa, ob = overlap_per_collective(base), overlap_per_collective(big)
        ok_a, how_a = base.balance()
        ok_b, how_b = big.balance()
        if ok_a and ok_b:
            d = Estimate.of(ob.scaled(100, "points")) - Estimate.of(oa.scaled(100, "points"))
            g = measure.grade_choice(answer, d, [-BUCKET_POINTS, BUCKET_POINTS], BUCKET_CHOICES[:3],
                                     fmt=lambda v: f"{v:+.0f} points")
            return widgets.grade(
                g, count_text + f" Both pairs are balanced, so their overlap compares transfer with transfer: "
                f"{(a.overlap_pct or 0):.0f}% against <b>{(b.overlap_pct or 0):.0f}%</b> (within {BUCKET_POINTS:g} "
                "points counts as the same). One reading: fewer, larger collectives save fixed costs, and starting "
                "later costs overlap; which wins depends on the model and the link, which is why the cap is a knob.",
                live=False)
        # Not both balanced: rank 0's waiting sits inside its all-reduces. Its overlap net of the waiting lies between
        # two bounds (the waiting may or may not have had compute beside it); when the bounds of the two pairs do not
        # meet, the answer holds whatever the waiting did.
        la, ha = _net_overlap_bounds(a)
        lb, hb = _net_overlap_bounds(b)
        if lb - ha > BUCKET_POINTS or la - hb > BUCKET_POINTS:
            actual = BUCKET_CHOICES[0] if la - hb > BUCKET_POINTS else BUCKET_CHOICES[2]
            return widgets.verdict(
                answer == actual,
                count_text + f" Rank 0's overlap went from {(a.overlap_pct or 0):.0f}% to <b>{(b.overlap_pct or 0):.0f}%"
                f"</b>. Not every pair is balanced ({html.escape(base.name)}: {html.escape(how_a)}; "
                f"{html.escape(big.name)}: {html.escape(how_b)}), so part of rank 0's time in all-reduces is waiting "
                f"({us(a.wait_us or 0.0)} and {us(b.wait_us or 0.0)}); net of it, its overlap lies between "
                f"{la:.0f}% and {ha:.0f}% with the smaller buckets and between {lb:.0f}% and {hb:.0f}% with the larger "
                "(the waiting counted as overlapped or not): apart by more than "
                f"{BUCKET_POINTS:g} points either way. One reading: a bucket's all-reduce can only start once all its "
                "gradients exist, so one large bucket starts after backward has finished, with nothing left to hide "
                "behind; fewer, larger collectives save fixed costs, and starting later costs overlap; which wins "
                "depends on the model and the link, which is why the cap is a knob.", actual=actual)
        qa, qb = _last_in(base), _last_in(big)
        hint = ""
        if qa is not None and qb is not None:
            hint = (f" What can be compared is the rank that waited least in each pair (it arrived last, so its "
                    f"kernels are transfer): rank {qa.rank} had compute beside {(qa.overlap_pct or 0):.0f}% of its "
                    f"{us(qa.collective_us)} in all-reduces with the smaller buckets, rank {qb.rank} beside "
                    f"{(qb.overlap_pct or 0):.0f}% of its {us(qb.collective_us)} with the larger: a hint, from three "
                    "steps of each pair, not a measurement.")
        return widgets.inconclusive(
            count_text + " Fewer, as a larger cap predicts: that part of your answer held. The overlap part cannot "
            "be graded on these pairs: " + ("neither is" if not (ok_a or ok_b) else "one of them is not")
            + f" balanced ({html.escape(base.name)}: {html.escape(how_a)}; {html.escape(big.name)}: "
            f"{html.escape(how_b)}), so rank 0's {(a.overlap_pct or 0):.0f}% against {(b.overlap_pct or 0):.0f}% "
            f"compares waiting, not overlap: rank 0 waited {us(a.wait_us or 0.0)} inside its all-reduces in one pair "
            f"and {us(b.wait_us or 0.0)} in the other. Net of the waiting, rank 0 spent "
            f"{us(a.collective_us - (a.wait_us or 0.0))} in them with the smaller buckets and "
            f"{us(b.collective_us - (b.wait_us or 0.0))} with the larger." + hint
            + " One reading to test on balanced pairs: fewer, larger collectives save fixed costs, and starting later "
            "costs overlap; which wins depends on the model and the link, which is why the cap is a knob.",
            rerun=False)

    widgets.ask("15.bucket", "With 100 MiB buckets instead of 25, what happens on rank 0?", choices=BUCKET_CHOICES,
                default=BUCKET_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.percent(b.overlap_pct or 0.0), spoilers.us(b.collective_us),
                                 spoilers.us(b.collective_us - (b.wait_us or 0.0))])


# --- no_sync ---------------------------------------------------------------------------------------------


def _forwards_per_step(t: Trace) -> float:
    """The CPU's ``forward`` labels per recorded step (the GPU lane repeats each label)."""
    return sum(1 for i in t.indices(name="forward") if not t.is_gpu(i)) / max(len(facts.steps(t)), 1)


def nosync(base: Pair, acc: Pair) -> None:
    """15.nosync: all-reduces per optimizer step with four micro-batches, no_sync on the first three."""
    r = acc.ranks.ranks[0]
    n = acc.per_step(r)

    def reveal(answer):
        n0 = base.per_step(base.ranks.ranks[0])
        fwd = _forwards_per_step(acc.traces[0])
        show.table([("no accumulation", f"{n0:g}", f"{_forwards_per_step(base.traces[0]):g}"),
                    (f"{acc.info.get('accumulate', 4)} micro-batches, no_sync on all but the last", f"{n:g}", f"{fwd:g}")],
                   ["rank 0", "all-reduces per optimizer step", "forward passes per optimizer step"])
        same = "the same count as" if n == n0 else f"against {n0:g}"
        return widgets.verdict(
            widgets.within(answer, n, factor=1.01),
            f"<b>{n:g}</b> all-reduces per optimizer step for {fwd:g} forward passes, {same} without accumulation. "
            "With <code>no_sync</code> the micro-batches inside it only add their gradients locally; the all-reduce "
            "comes with the last one. Communication per optimizer step stays put while the work per step grows.",
            actual=n)

    widgets.ask("15.nosync", "With 4 micro-batches per step and no_sync on the first 3, how many all-reduces per step?",
                unit="per step", default=4, reveal=reveal,
                decides=lambda: [spoilers.value(n, "all-reduces per optimizer step")])


# --- gloo on this CPU ------------------------------------------------------------------------------------


def _gloo_events(t: Trace) -> dict[tuple[str, str], list[float]]:
    found: dict[tuple[str, str], list[float]] = {}
    for i in range(len(t)):
        n = t.name_of(i)
        if n.startswith((collectives.GLOO_PREFIX, "c10d::allreduce")):
            found.setdefault((n, t.lanes[t.lane[i]].label), []).append(t.dur[i])
    return found


def _thread_names(t: Trace) -> list[str]:
    """The names in parentheses of the threads other than the main one that hold gloo's own events
    ("pt_gloo_runloop")."""
    out = []
    main = facts.main_thread(t)
    for i in range(len(t)):
        if t.name_of(i).startswith(collectives.GLOO_PREFIX) and t.lane[i] != main:
            label = t.lanes[t.lane[i]].label
            if "(" in label:
                out.append(label[label.rfind("(") + 1:].rstrip(")"))
    return sorted(set(out) - {"python"})  # a thread with no name of its own carries the process's


def gloo(cpu: Pair) -> None:
    """15.gloo: over gloo on the CPU, where the all-reduce itself runs."""
    t = cpu.traces[0]

    def reveal(answer):
        found = _gloo_events(t)
        show.table([(n, lane, len(d), us(statistics.median(d))) for (n, lane), d in sorted(found.items())],
                   ["event", "thread", "count", "median"])
        main = facts.main_thread(t)
        lanes = {t.lane[i] for i in range(len(t)) if t.name_of(i).startswith(collectives.GLOO_PREFIX)}
        actual = GLOO_CHOICES[2] if not lanes else GLOO_CHOICES[0] if lanes == {main} else GLOO_CHOICES[1]
        where = ", ".join(show.code(lane) for (n, lane) in sorted(found) if n.startswith(collectives.GLOO_PREFIX))
        return widgets.verdict(
            answer == actual,
            "The main thread only queues the work (<code>c10d::allreduce_</code>, inside backward, under the gradient "
            "hook); the reduction itself shows as <code>gloo:all_reduce</code> on " + (where or "no thread")
            + ". On GPUs the same split appears as a launch on the CPU and a kernel on a separate stream.",
            actual=actual)

    widgets.ask("15.gloo", "Over gloo on the CPU, where will the all-reduce itself run?", choices=GLOO_CHOICES,
                default=GLOO_CHOICES[0], reveal=reveal, where="cpu",
                decides=lambda: [spoilers.name(n) for n in _thread_names(t)] + ["gloo:all_reduce"])


@widgets.measured_here()  # two processes on this CPU, run now
def gloo_straggler(cpu_base: Pair, cpu_slow: Pair) -> None:
    """The planted straggler over gloo on this CPU, recorded as the fixed recorder records (past DDP's first ten
    iterations, DDP's default buckets), against the gloo base run's own entry gaps."""
    rows = []
    for p in (cpu_base, cpu_slow):
        ok, how = p.balance()
        gaps = [m.starts_us[1] - m.starts_us[0] for m in p.ranks.matched]
        st = p.ranks.straggler
        rows.append((p.name, f"{p.info.get('straggle_ms', 0):g} ms", len(p.ranks.matched),
                     us(statistics.median(gaps)) if gaps else "-",
                     us(max(gaps, key=abs)) if gaps else "-",
                     f"rank {st.rank}" if st.rank is not None else "none", "yes" if ok else "no"))
    show.table(rows, ["gloo run, this CPU", "rank 1 sleeps per step", "all-reduces matched",
                      "rank 1 entered after rank 0 (median)", "(farthest)", "straggler named", "balanced (ddp.balance)"])
    info = cpu_slow.info
    warm, cap, default = info.get("warm_iterations"), info.get("bucket_mb"), info.get("bucket_mb_default")
    st = cpu_slow.ranks.straggler
    planted = straggle_ms(cpu_slow)
    named = (f"The reader names <b>rank {st.rank}</b>" + (", the rank that was planted" if st.rank == 1 else
                                                         ", not the planted rank 1")
             + f" ({html.escape(st.reason)})." if st.rank is not None else
             f"The reader names no straggler here ({html.escape(st.reason)}).")
    ok, how = cpu_base.balance()
    base_text = (f" With nothing planted the two processes entered their all-reduces together (balanced: "
                 f"{html.escape(how)})." if ok else
                 f" With nothing planted they were not balanced either ({html.escape(how)}): two processes sharing "
                 "this CPU with other work drift apart on their own, which is why the sleep planted here is longer "
                 + (f"({planted:g} ms) " if planted else "") + "than on the GPUs.")
    buckets = "DDP's default buckets" if default else f"{cap:g} MiB buckets passed explicitly"
    recorded = (f" These runs were recorded after {warm} warm iterations, past DDP's first ten, with {buckets} "
                "(their <code>run.json</code>): the conditions the recorded GPU pairs lack."
                if warm is not None else "")
    show.md(named + base_text + recorded)


def exercise_diagnose(slow: Pair) -> None:
    """The "straggler's verdict" exercise: the distributed rules on the straggler pair."""
    def solution():
        for f in distributed.diagnose_ranks(slow.ranks):
            show.pre(f.text())
        show.md("From a terminal the same: <code>python -m helpers diagnose " + html.escape(str(slow.folder)) + "</code>")

    widgets.exercise("the straggler's verdict",
                     "<code>python -m helpers diagnose FOLDER</code> reads every rank of a job. On the straggler run, "
                     "what will it name first, and which rank? Write it down, then ask for the solution.", solution)
