"""Time spans: merging the intervals that events cover, and measuring their overlap with a window."""

from __future__ import annotations

import bisect
import gc
from array import array
from contextlib import contextmanager
from operator import add
from typing import Any, Iterable, Iterator, Protocol


class EventColumns(Protocol):
    """What the span and vector functions read of a trace: its event columns (:class:`helpers.reader.trace.Trace` has
    them). A structural type, so that these modules, below the reader, need not import it."""

    ts: Any  # start of each event, microseconds from the trace's origin
    dur: Any  # its duration
    lane: Any  # its lane (a thread or a GPU stream), an index into the trace's lanes
    cat_id: Any  # its category, an index into the trace's categories
    memo: dict  # what the facts computed once for this trace

    def by_lane(self, idx: list[int]) -> dict[int, list[int]]: ...


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cycle collection while many small objects are made that live on (it would walk them again and again)."""
    collect = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collect:
            gc.enable()


def lane_spans(trace: "EventColumns", idx: Iterable[int]) -> list[tuple[float, float]]:
    """Merged [start, end) intervals covered by these events."""
    ts, dur = trace.ts, trace.dur
    idx = idx if isinstance(idx, (list, array)) else list(idx)
    out: list[tuple[float, float]] = []
    with gc_paused():
        starts = list(map(ts.__getitem__, idx))
        spans = sorted(zip(starts, map(add, starts, map(dur.__getitem__, idx))))
        if not spans:
            return out
        lo, hi = spans[0]
        for s, e in spans:
            if s <= hi:
                if e > hi:
                    hi = e
            else:
                out.append((lo, hi))
                lo, hi = s, e
        out.append((lo, hi))
    return out


def covered(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Microseconds of ``spans`` (merged, sorted) inside [lo, hi]."""
    k = max(bisect.bisect_left(spans, (lo, lo)) - 1, 0)
    stop = bisect.bisect_left(spans, (hi, hi), k)  # spans from here on start at or after hi
    while stop < len(spans) and spans[stop][0] < hi:
        stop += 1
    inside = spans[k:stop]
    if not inside:
        return 0.0
    # clip the spans at the two ends; those between lie wholly inside [lo, hi]
    s, e = inside[0]
    total = 0.0 + max(0.0, min(e, hi) - max(s, lo))
    if len(inside) > 1:
        total = sum([e - s for s, e in inside[1:-1]], total)  # added one by one, in order, as a loop would
        s, e = inside[-1]
        total += max(0.0, min(e, hi) - max(s, lo))
    return total


def clipped(spans: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of ``spans`` (merged, sorted) inside [lo, hi]."""
    return [(max(s, lo), min(e, hi)) for s, e in spans if e > lo and s < hi]


def intersection_us(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Microseconds during which both ``a`` and ``b`` (each merged and sorted) cover the time.

    The overlaps are summed with ``sum`` in the order of the pairs (a's span,
    then b's), as :func:`helpers.reader.vector.intersection_us` sums them.
    """
    parts = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            parts.append(e - s)
        if a[i][1] < b[j][1]:  # the span that ends first can meet nothing further on
            i += 1
        else:
            j += 1
    return sum(parts)


Spans = list[tuple[float, float]]  # merged, sorted [start, end) intervals, in µs


def merged(spans: Iterable[tuple[float, float]]) -> Spans:
    """Any intervals as merged, sorted ones (empty ones dropped)."""
    out: Spans = []
    for s, e in sorted(x for x in spans if x[1] > x[0]):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def intersection(a: Spans, b: Spans) -> Spans:
    """The time both ``a`` and ``b`` (each merged and sorted) cover, as intervals."""
    if len(a) > 16 * len(b):
        a, b = b, a
    if len(b) > 16 * len(a):  # a few spans against many: look each up (the merged spans' ends are sorted too)
        out_: Spans = []
        ends = [e for _, e in b]
        for s, e in a:
            k = bisect.bisect_right(ends, s)
            while k < len(b) and b[k][0] < e:
                x, y = max(s, b[k][0]), min(e, b[k][1])
                if y > x:
                    out_.append((x, y))
                k += 1
        return out_
    out: Spans = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def difference(a: Spans, b: Spans) -> Spans:
    """The time ``a`` covers and ``b`` does not (each merged and sorted), as intervals."""
    out: Spans = []
    j = 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def total(spans: Spans) -> float:
    """Microseconds the intervals cover."""
    return sum(e - s for s, e in spans)
