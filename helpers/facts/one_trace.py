"""Figures read once from one trace: graded with a declared tolerance; GPU work that spilled in from before it.

A recorded trace holds a few steps, so a duration or a ratio read from it is
one sample, with no spread to grade on (:mod:`helpers.facts.measure` wants five).
A reveal that grades such a figure declares how far it trusts it: a
tolerance, a factor either way (1.25: the figure could be 25% higher or 20%
lower on another recording), or the bracket the data allows (a crossover
between two measured sizes). The grade is *held* or *missed* only when the
whole band gives the same answer, and *inconclusive here* otherwise, with the
same :class:`helpers.facts.measure.Graded` as a measured spread, so that
:func:`helpers.lesson.widgets.grade` shows it alike.

:func:`spilled` finds GPU work whose launch the recorded window does not
hold (launched before the first recorded step, or with no launch in the
trace): the arrow of such work starts outside the trace, and its time
belongs to steps that were not recorded.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .measure import _edges, Graded, Status, bucket


def band(value: float, tolerance: float) -> tuple[float, float]:
    """The values a figure read once may stand for: ``value / tolerance`` to ``value * tolerance``."""
    if tolerance < 1:
        raise ValueError("a tolerance is a factor of 1 or more")
    return value / tolerance, value * tolerance


def _plain(v: float) -> str:
    return f"{v:.3g}"


def grade_choice(answer: Any, value: float, tolerance: float, edges: Sequence[float], choices: Sequence[str], *,
                 fmt: Callable[[float], str] = _plain, what: str = "the figure", most: float | None = None) -> Graded:
    """Grade a multiple-choice prediction on one figure (choices cut at ``edges``) with a declared tolerance.

    ``most`` caps the band where the figure cannot go higher (1.0 for a share: an idle share of 110% is no reading).
    """
    lo, hi = band(value, tolerance)
    if most is not None:
        lo, hi = min(lo, most), min(hi, most)
    mid = bucket(value, edges, choices)
    a, b = bucket(lo, edges, choices), bucket(hi, edges, choices)
    said = (f"{what}, {fmt(value)}, is read once from one trace; taken as uncertain by a factor of {tolerance:g} "
            f"either way, it lies between {fmt(lo)} and {fmt(hi)}")
    if a != b:
        cut = [e for e in edges if lo < e <= hi]
        return Graded(Status.INCONCLUSIVE, mid, f"{said}, which straddles " + _edges(cut, fmt)
                      + f" between '{a}' and '{b}'")
    return Graded(Status.HELD if answer == mid else Status.MISSED, mid, f"{said}, all inside '{mid}'")


def grade_number(answer: float | None, value: float, factor: float, *, lo: float, hi: float,
                 fmt: Callable[[float], str] = _plain, what: str = "the figure", why_band: str = "") -> Graded:
    """Grade a typed number: held when within ``factor`` of every value from ``lo`` to ``hi`` (``value`` among them).

    ``lo``..``hi`` is what the data allows (a tolerance band from :func:`band`,
    or a bracket such as the two measured sizes around a crossover);
    ``why_band`` says where it comes from.
    """

    def ok(v: float) -> bool:
        return answer is not None and answer > 0 and v > 0 and 1 / factor <= answer / v <= factor

    said = (f"{what} is {fmt(value)}, somewhere between {fmt(lo)} and {fmt(hi)}"
            + (f" ({why_band})" if why_band else "") + f"; within {factor:g}x counts")
    if ok(lo) == ok(hi) == ok(value):
        return Graded(Status.HELD if ok(value) else Status.MISSED, value, said)
    return Graded(Status.INCONCLUSIVE, value, f"{said}, and your answer is within {factor:g}x of part of that range "
                                              "and not of the rest")


def spilled(trace) -> list[int]:
    """GPU work (kernels, copies, fills) whose launch call is not inside the recorded steps: before the first, or absent."""
    from .. import facts

    st = facts.steps(trace)
    if not st:
        return []
    start = st[0].start_us
    out = []
    for j in facts.gpu_work(trace):
        i = trace.launch_of(j)
        if i < 0 or trace.ts[i] < start:
            out.append(j)
    return out


def spill_sentence(runs, label: Callable[[Any], str]) -> str:
    """One sentence on GPU work launched before the recorded steps in ``runs`` (or on there being none).

    For reveals that read GPU time or launch arrows in the recorded window: work launched before it was still
    queued when recording began, so its time counts in the window while its launch (the arrow's start, and the
    CPU time that issued it) is not in the trace.
    """
    import html

    late = [(r, s) for r in runs for s in [spilled(r.trace)] if s]
    if not late:
        return ("Every kernel, copy and fill in these traces was launched inside the recorded steps (the series' "
                "runner synchronizes the GPU before the first recorded step), so each one's arrow starts and ends "
                "in the window, and the GPU time read here is the work those steps asked for.")
    return ("Some GPU work in these traces was launched before the first recorded step: "
            + "; ".join(f"{html.escape(label(r))}: {len(s)} piece(s), the first {html.escape(r.trace.name_of(s[0])[:50])}"
                        for r, s in late)
            + ". It was still queued when the recording began: its time counts in the window, while its launch call "
              "(the start of its arrow) and the CPU time that issued it are not in the trace, so those runs lean "
              "towards the GPU's side.")
