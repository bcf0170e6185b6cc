"""Times the notebooks compare: repeated, interleaved, with their spread, graded only outside the noise.

A time is a measurement with a spread. On a busy laptop or a shared hub one
sample can be off by a factor of ten, so every timing a notebook compares
goes through here:

* :class:`Measured` holds several calls timed round-robin with no
  profiler running (A, B, C, A, B, C...), each round a short block of
  back-to-back calls, so that whatever else the machine does falls on every
  side alike (:func:`helpers.runs.rounds.interleave` times them: it runs
  torch, so it lives with the runs);
* :class:`Spread` holds one figure's samples: median and quartiles (the
  interquartile range, IQR), and says it in words;
* :func:`per_round` divides two interleaved spreads round by round: calls
  timed in the same round shared the machine's state, so their ratio is
  steadier than the ratio of two medians;
* :func:`grade_choice` and :func:`grade_number` grade a prediction against a
  spread: *held* or *missed* only when the whole interquartile range gives
  the same answer, otherwise *inconclusive here*;
* :class:`Status`: what a graded prediction is (held, missed, inconclusive
  here, or open: no right or wrong), as the journal, the room and the
  reveals say it;
* :func:`conditions`: the thread count and the machine's load shown beside
  each figure.

Nothing here imports torch: the grading works on recorded samples anywhere.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .. import Word

#: the fewest samples a spread may be graded on: one sample is not a measurement
MIN_SAMPLES = 5


class Status(Word):
    """What a prediction came to. Its value is the word the journal, ``--json`` and the room keep."""

    HELD = "held"
    MISSED = "missed"
    INCONCLUSIVE = "inconclusive"  # a timing whose spread is as wide as the effect asked about: graded neither way
    OPEN = "open"  # no right or wrong (a hypothesis to discuss)

    @classmethod
    def of(cls, hit: "bool | None") -> "Status":
        """The status a plain verdict gives: True held, False missed, None open."""
        return cls.HELD if hit is True else cls.MISSED if hit is False else cls.OPEN

    @classmethod
    def parse(cls, value: Any) -> "Status | None":
        """``value`` as a status (a journal's word), or None when it is none."""
        try:
            return cls(value)
        except ValueError:
            return None

    @property
    def hit(self) -> "bool | None":
        """True held, False missed, None for the rest (inconclusive, open)."""
        return True if self is Status.HELD else False if self is Status.MISSED else None



@dataclass(frozen=True)
class Spread:
    """One figure measured several times: its samples (in ``unit``) and what they say together."""

    samples: tuple[float, ...]
    unit: str = "us"
    #: set where the samples are every pairing of two runs' samples (ratios of runs timed apart): so many figures
    #: are not so many measurements, and the text says what they came from
    paired_from: tuple[int, int] | None = None

    @classmethod
    def of(cls, values: Sequence[float], unit: str = "us",
           paired_from: tuple[int, int] | None = None) -> "Spread":
        return cls(tuple(float(v) for v in values if v is not None and math.isfinite(float(v))), unit, paired_from)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    @property
    def quartiles(self) -> tuple[float, float]:
        """The first and third quartiles (for fewer than 4 samples: the smallest and the largest)."""
        if not self.samples:
            return math.nan, math.nan
        if self.n < 4:
            return min(self.samples), max(self.samples)
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]

    @property
    def relative_iqr(self) -> float:
        """The interquartile range over the median: how wide the noise is, as a share of the figure."""
        lo, hi = self.quartiles
        return (hi - lo) / self.median if self.median else math.inf

    def scaled(self, factor: float, unit: str | None = None) -> "Spread":
        return Spread(tuple(v * factor for v in self.samples), unit or self.unit, self.paired_from)

    def text(self, fmt: Callable[[float], str] | None = None) -> str:
        """``19.0 µs (IQR 18.7 µs to 19.7 µs, 30 rounds)``."""
        f = fmt or _fmt(self.unit)
        lo, hi = self.quartiles
        if self.n == 0:
            return "no sample"
        if self.n == 1:
            return f"{f(self.median)} (one sample)"
        if self.paired_from is not None:
            a, b = self.paired_from
            if min(a, b) < 2:
                return f"{f(self.median)} (from {a} and {b} samples: too few for a spread)"
            if f(lo) == f(hi):
                return f"{f(self.median)} (the same, to this precision, in every pairing of {a} and {b} samples)"
            return f"{f(self.median)} (IQR {f(lo)} to {f(hi)}, over all {a * b} pairings of {a} with {b} samples)"
        if self.n == 2:  # two samples make no spread: say both
            return f"{f(self.median)} (the mean of 2 samples, {f(lo)} and {f(hi)}: too few for a spread)"
        if self.n == 3:  # the quartiles of three are their ends: call them that
            return f"{f(self.median)} (3 samples, from {f(lo)} to {f(hi)})"
        return f"{f(self.median)} (IQR {f(lo)} to {f(hi)}, {self.n} samples)"

    def to_json(self) -> dict[str, Any]:
        return {"unit": self.unit, "samples": [round(v, 4) for v in self.samples]}

    @classmethod
    def from_json(cls, d: Any) -> "Spread | None":
        if not isinstance(d, dict) or not isinstance(d.get("samples"), list):
            return None
        try:
            return cls.of([float(v) for v in d["samples"]], str(d.get("unit", "us")))
        except (TypeError, ValueError):
            return None


def _fmt(unit: str) -> Callable[[float], str]:
    if unit == "us":
        from .text import us

        return us
    if unit == "x":
        return lambda v: f"{v:.2f}x"
    if unit == "%":
        return lambda v: f"{v:.0%}"
    return lambda v: f"{v:.3g} {unit}".rstrip()


def per_round(a: Spread, b: Spread) -> Spread:
    """``a / b`` round by round, as a spread of ratios (``unit="x"``); the two must come from the same rounds."""
    n = min(a.n, b.n)
    return Spread.of([x / y for x, y in zip(a.samples[:n], b.samples[:n]) if y > 0], "x")


def ratio_range(a: Spread, b: Spread) -> Spread:
    """``a / b`` for two spreads measured apart (not round by round): every pairing, so the range is honest."""
    return Spread.of([x / y for x in a.samples for y in b.samples if y > 0], "x", paired_from=(a.n, b.n))


@dataclass(frozen=True)
class Estimate:
    """A figure and the range the measurements allow: ``mid`` from the medians, ``lo``..``hi`` from the quartiles.

    Arithmetic on estimates keeps the range honest (interval arithmetic): the
    profiler's extra time, profiled minus unprofiled, runs from the lowest
    profiled quartile minus the highest unprofiled one to the other way round.
    ``n`` is the fewest samples behind any of its parts.
    """

    mid: float
    lo: float
    hi: float
    n: int
    unit: str = "us"

    @classmethod
    def of(cls, x: "Spread | Estimate") -> "Estimate":
        if isinstance(x, Estimate):
            return x
        lo, hi = x.quartiles
        return cls(x.median, lo, hi, x.n, x.unit)

    def __sub__(self, o: "Estimate") -> "Estimate":
        return Estimate(self.mid - o.mid, self.lo - o.hi, self.hi - o.lo, min(self.n, o.n), self.unit)

    def __truediv__(self, o: "Estimate | float") -> "Estimate":
        if not isinstance(o, Estimate):
            return Estimate(self.mid / o, self.lo / o, self.hi / o, self.n, self.unit)
        if o.lo <= 0:  # the divisor's range reaches zero: the ratio is unbounded
            return Estimate(self.mid / o.mid if o.mid > 0 else math.inf, -math.inf, math.inf,
                            min(self.n, o.n), "x")
        ends = [self.lo / o.lo, self.lo / o.hi, self.hi / o.lo, self.hi / o.hi]
        return Estimate(self.mid / o.mid, min(ends), max(ends), min(self.n, o.n), "x")

    @property
    def quartiles(self) -> tuple[float, float]:
        return self.lo, self.hi

    @property
    def median(self) -> float:
        return self.mid

    def text(self, fmt: Callable[[float], str] | None = None) -> str:
        f = fmt or _fmt(self.unit)
        if self.n < 3:
            return f"{f(self.mid)} (from {self.n} sample{'s' if self.n != 1 else ''}: too few for a range)"
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)):
            return f"{f(self.mid)} (its range is unbounded: the spread reaches zero)"
        return f"{f(self.mid)} (between {f(self.lo)} and {f(self.hi)} by the quartiles)"


# --- the machine -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Conditions:
    """What the machine was doing while a figure was measured."""

    threads: int | None  # torch's intra-op threads during the measurement (None: not measured with torch)
    cpus: int | None  # cores this process may use
    load: float | None  # the 1-minute load average over the cores (1.0: every core busy); None where unknown
    where: str = "this machine"

    @property
    def busy(self) -> bool:
        """Other work held most of the cores while measuring (a load above 0.75 per core)."""
        return self.load is not None and self.load > 0.75

    def text(self) -> str:
        parts = []
        if self.threads is not None:
            parts.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        if self.load is not None and self.cpus:
            parts.append(f"load {self.load * self.cpus:.1f} on {self.cpus} cores"
                         + (", busy" if self.busy else ""))
        return f"measured on {self.where}" + (f" ({', '.join(parts)})" if parts else "")

    def to_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "cpus": self.cpus, "load": self.load, "where": self.where}

    @classmethod
    def from_json(cls, d: Any, where: str | None = None) -> "Conditions":
        d = d if isinstance(d, dict) else {}
        return cls(d.get("threads"), d.get("cpus"), d.get("load"), where or str(d.get("where", "unknown")))


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def conditions(where: str = "this machine", threads: int | None = None) -> Conditions:
    """The thread count (torch's, when torch is loaded) and the load per core, now."""
    import sys

    if threads is None and "torch" in sys.modules:
        threads = sys.modules["torch"].get_num_threads()
    cpus = usable_cpus()
    try:
        load = os.getloadavg()[0] / cpus
    except (AttributeError, OSError):  # Windows has no load average
        load = None
    return Conditions(threads, cpus, None if load is None else round(load, 2), where)


# --- timing -----------------------------------------------------------------------------------------------


@dataclass
class Measured:
    """Several calls timed round-robin, per call in µs: a :class:`Spread` per label, and the conditions."""

    host: dict[str, Spread]  # CPU time to issue one call (no synchronization inside a block)
    wall: dict[str, Spread]  # time per call with the device synchronized at the end of each block
    conditions: Conditions
    rounds: int
    per_block: dict[str, int] = field(default_factory=dict)

    def ratio(self, a: str, b: str, kind: str = "host") -> Spread:
        side = self.host if kind == "host" else self.wall
        return per_round(side[a], side[b])

    def to_json(self) -> dict[str, Any]:
        return {"host": {k: v.to_json() for k, v in self.host.items()},
                "wall": {k: v.to_json() for k, v in self.wall.items()},
                "conditions": self.conditions.to_json(), "rounds": self.rounds, "per_block": self.per_block}

    @classmethod
    def from_json(cls, d: Any, where: str | None = None) -> "Measured | None":
        if not isinstance(d, dict):
            return None
        host = {k: s for k, v in (d.get("host") or {}).items() if (s := Spread.from_json(v))}
        wall = {k: s for k, v in (d.get("wall") or {}).items() if (s := Spread.from_json(v))}
        if not host and not wall:
            return None
        return cls(host, wall, Conditions.from_json(d.get("conditions"), where), int(d.get("rounds", 0)),
                   dict(d.get("per_block") or {}))


# --- grading ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Graded:
    """A prediction graded against a spread: held, missed, or inconclusive here."""

    status: Status  # HELD, MISSED or INCONCLUSIVE
    actual: Any  # the choice (or value) the median gives: what the room is told the measurement says
    why: str  # one sentence on the spread, in words (HTML-safe: numbers and words only)
    too_few: bool = False  # inconclusive because too few samples were taken, not because of their spread

    @property
    def hit(self) -> bool | None:
        return self.status.hit

    @property
    def conclusive(self) -> bool:
        return self.status != Status.INCONCLUSIVE


def bucket(value: float, edges: Sequence[float], choices: Sequence[str]) -> str:
    """The choice a value falls in: ``choices[i]`` covers values below ``edges[i]``, the last the rest."""
    if len(choices) != len(edges) + 1:
        raise ValueError("bucket() needs one more choice than edges")
    return next((c for c, e in zip(choices, edges) if value < e), choices[-1])


def _too_few(s: "Spread | Estimate") -> str | None:
    if s.n < MIN_SAMPLES:
        return (f"only {s.n} sample{'s' if s.n != 1 else ''} ({s.text()}): "
                f"too few to grade (the series grades on {MIN_SAMPLES} or more)")
    return None


def grade_choice(answer: Any, spread: "Spread | Estimate", edges: Sequence[float], choices: Sequence[str], *,
                 fmt: Callable[[float], str] | None = None) -> Graded:
    """Grade a multiple-choice prediction on a measured quantity (its choices are ranges cut at ``edges``).

    Held or missed only when the first and third quartiles fall in the same
    choice; when they straddle an edge the answer depends on which sample you
    take, and the grade is inconclusive.
    """
    f = fmt or _fmt(spread.unit)
    mid = bucket(spread.median, edges, choices)
    few = _too_few(spread)
    if few:
        return Graded(Status.INCONCLUSIVE, mid, few, too_few=True)
    lo, hi = spread.quartiles
    # a quartile that prints as an edge ("IQR 1.10x to ..." for 1.1021x) is graded as touching it, so that two
    # spreads printed alike are never graded apart
    touched = [e for e in edges if f(lo) == f(e) or f(hi) == f(e)]
    a, b = bucket(lo, edges, choices), bucket(hi, edges, choices)
    if a != b or touched:
        cut = sorted({e for e in edges if lo < e <= hi} | set(touched))
        crosses = any(lo < e <= hi for e in cut)
        below, above = bucket(min(lo, min(cut) * 0.999), edges, choices), bucket(max(hi, max(cut)), edges, choices)
        return Graded(Status.INCONCLUSIVE, mid,
                      f"the measurement, {spread.text(f)}, " + ("straddles " if crosses else
                      "reaches, as printed, ") + _edges(cut, f) + f" between '{below}' and '{above}'")
    return Graded(Status.HELD if answer == mid else Status.MISSED, mid, f"{spread.text(f)}, all inside '{mid}'")


def _edges(cut: list[float], f: Callable[[float], str]) -> str:
    """'1.10x, the edge' or '0.90x and 1.10x, the edges' (a spread can cross more than one)."""
    return (f"{f(cut[0])}, the edge" if len(cut) == 1 else " and ".join(f(e) for e in cut) + ", the edges")


def grade_number(answer: float | None, spread: "Spread | Estimate", factor: float, *,
                 fmt: Callable[[float], str] | None = None) -> Graded:
    """Grade a typed number: held when within ``factor`` of the measurement, at both of its quartiles."""
    f = fmt or _fmt(spread.unit)
    few = _too_few(spread)
    if few:
        return Graded(Status.INCONCLUSIVE, spread.median, few, too_few=True)
    lo, hi = spread.quartiles

    def ok(v: float) -> bool:
        return answer is not None and answer > 0 and v > 0 and 1 / factor <= answer / v <= factor

    if ok(lo) == ok(hi) == ok(spread.median):
        return Graded(Status.HELD if ok(spread.median) else Status.MISSED, spread.median,
                      f"{spread.text(f)}; within {factor:g}x counts")
    return Graded(Status.INCONCLUSIVE, spread.median,
                  f"your estimate is within {factor:g}x of part of the measurement's range ({spread.text(f)}) "
                  "and not of the rest")


def grade_order(answer: Any, spreads: dict[Any, Spread], *, fmt: Callable[[float], str] | None = None) -> Graded:
    """Grade "which is largest": conclusive when the largest's first quartile is above every other's third."""
    ranked = sorted(spreads, key=lambda k: spreads[k].median, reverse=True)
    few = next((_too_few(spreads[k]) for k in ranked if _too_few(spreads[k])), None)
    if few:
        return Graded(Status.INCONCLUSIVE, ranked[0], few, too_few=True)
    top, second = ranked[0], ranked[1]
    f = fmt or _fmt(spreads[top].unit)
    lo_top, _ = spreads[top].quartiles
    _, hi_second = spreads[second].quartiles
    if lo_top > hi_second:
        return Graded(Status.HELD if answer == top else Status.MISSED, top,
                      f"{top}: {spreads[top].text(f)}, above {second}: {spreads[second].text(f)}, no overlap")
    return Graded(Status.INCONCLUSIVE, top, f"{top} and {second} overlap: {spreads[top].text(f)} against "
                                     f"{spreads[second].text(f)}")
