"""GPU time per call, call by call, from a trace: the spread a prediction about GPU time is graded on.

A profiled run records a few calls of its workload (the reference set: three
per run). The GPU time each call launched is one sample; a figure such as
"the fused kernel's time per call" is a :class:`helpers.facts.measure.Spread` of
those samples, never one of them alone. Two runs' calls are not paired
(each run is a separate recording), so a ratio or a difference of two runs
is taken over every pairing of their samples (:func:`pairs`), which keeps
the range honest, and a prediction is graded with :mod:`helpers.facts.measure` on
that spread: held or missed only when its quartiles agree, otherwise
*inconclusive here*.

No torch: it reads traces.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

from .. import facts
from .measure import Graded, MIN_SAMPLES, Spread, Status, grade_choice, ratio_range
from ..reader.categories import ANNOTATION, CPU_OP
from ..reader.trace import Trace


def calls(run: Any) -> list[int]:
    """The recorded calls of the run's workload: its label's spans on the CPU, in trace order."""
    t = run.trace
    found = [i for i in t.indices((ANNOTATION,), name=run.workload.label) if not t.is_gpu(i)]
    return sorted(found, key=lambda i: t.ts[i])


def _work_under(t: Trace, i: int) -> list[int]:
    return [j for d in [i] + t.descendants(i) for j in t.gpu_work_of(d)]


def per_call(run: Any, keep: Callable[[Trace, int], bool] | None = None) -> Spread:
    """GPU time (µs) each recorded call launched: every piece of GPU work, or those ``keep(trace, j)`` accepts."""
    t = run.trace
    return Spread.of([sum(t.dur[j] for j in _work_under(t, a) if keep is None or keep(t, j)) for a in calls(run)])


def of_kind(*kinds: str) -> Callable[[Trace, int], bool]:
    """A ``keep`` for :func:`per_call`: GPU work of these kinds (:mod:`helpers.facts.kernel_kinds`)."""
    return lambda t, j: facts.kind_of(t, j) in kinds


def by_top_op(run: Any) -> dict[str, Spread]:
    """GPU time (µs) launched per call by each op directly under the label, by op name, one sample per call."""
    t = run.trace
    per: list[dict[str, float]] = []
    for a in calls(run):
        d: dict[str, float] = {}
        for c in t.children(a):
            if t.group_of(c) == CPU_OP:
                d[t.name_of(c)] = d.get(t.name_of(c), 0.0) + facts.gpu_time_under(t, c)
        per.append(d)
    names = list(dict.fromkeys(n for d in per for n in d))
    return {n: Spread.of([d.get(n, 0.0) for d in per]) for n in names if any(d.get(n) for d in per)}


def pairs(a: Spread, b: Spread, f: Callable[[float, float], float], unit: str = "us") -> Spread:
    """``f(x, y)`` for every sample of ``a`` with every sample of ``b`` (two runs whose calls are not paired)."""
    return Spread.of([f(x, y) for x, y in itertools.product(a.samples, b.samples)], unit, paired_from=(a.n, b.n))


def grade_each(answer: Any, samples: Sequence[Any], choose: Callable[[Any], Any], what: str) -> Graded:
    """Grade a prediction that several measured figures decide together: one choice per combination of samples.

    ``samples`` are the combinations (for instance every pairing of two
    growth ratios); held or missed when at least three quarters of them
    give the same choice, otherwise inconclusive. ``what`` says, in words,
    what the combinations are.
    """
    picks = [choose(s) for s in samples]
    if len(picks) < MIN_SAMPLES:
        return Graded(Status.INCONCLUSIVE, picks[0] if picks else None,
                      f"only {len(picks)} combinations of {what}: too few to grade")
    top = max(set(picks), key=picks.count)
    share = picks.count(top) / len(picks)
    if share < 0.75:
        return Graded(Status.INCONCLUSIVE, top, f"{what}: {share:.0%} of the {len(picks)} combinations give "
                                                f"'{top}', the rest another answer")
    return Graded(Status.HELD if answer == top else Status.MISSED, top,
                  f"{what}: {share:.0%} of the {len(picks)} combinations give '{top}'")


def grade_extreme(answer: Any, spreads: dict[str, Spread], *, largest: bool = True) -> Graded:
    """Grade "which is the largest" (or the smallest) on per-call spreads of separate runs.

    The leader by median against the runner-up, over every pairing of their
    samples: conclusive when the middle half of those ratios is on one side of 1.
    """
    ranked = sorted((k for k in spreads if spreads[k].n), key=lambda k: spreads[k].median, reverse=largest)
    if len(ranked) < 2:
        return Graded(Status.INCONCLUSIVE, ranked[0] if ranked else None, "fewer than two figures to compare")
    top, second = ranked[0], ranked[1]
    r = ratio_range(spreads[top], spreads[second]) if largest else ratio_range(spreads[second], spreads[top])
    f = lambda v: f"{v:.2f}x"  # noqa: E731
    said = f"{top} over {second}" if largest else f"{second} over {top}"
    g = grade_choice("yes", r, [1.0], ["no", "yes"], fmt=f)
    if not g.conclusive or g.actual != "yes":
        return Graded(Status.INCONCLUSIVE, top, f"{top} and {second} overlap: {said} is {r.text(f)}, every pairing of "
                                         "their calls")
    return Graded(Status.HELD if answer == top else Status.MISSED, top,
                  f"{top} is the {'largest' if largest else 'smallest'}: {said} is {r.text(f)}, every pairing of "
                  "their calls, its middle half above 1")
