"""The few whole-column computations that the facts repeat over every event, done at C speed.

With numpy installed (it comes with torch and matplotlib, and with the
``fast`` extra) these run on numpy views of the trace's columns, without
copying them; without it, in plain Python. Both give the same numbers, to the
last bit: the same events in the same order, and sums taken by Python's
``sum`` over the same values in the same order (``tests/test_vector.py``
compares the two on every trace it has). Nothing here knows what a kernel or
a step is; :mod:`helpers.facts` asks the questions.
"""

from __future__ import annotations

import importlib.util
import math
from array import array
from itertools import compress
from operator import add, and_
from typing import Any

from .spans import EventColumns, lane_spans, intersection_us as _intersection_plain

np: Any = None  # numpy, imported when a computation first asks for it (about 0.1 s: a small trace never needs it)
#: numpy is installed (tests switch this off to check the plain path against the numpy one)
AVAILABLE = importlib.util.find_spec("numpy") is not None
NUMPY = AVAILABLE
SMALL = 4096  # events: up to this many, plain Python is as quick (tests set 0 to send everything to numpy)


def fast(n: int) -> bool:
    """Whether a computation over ``n`` items goes to numpy: it is installed, imports, and ``n`` is large enough."""
    global np, NUMPY
    if not NUMPY or n <= SMALL:
        return False
    if np is None:
        try:
            import numpy
        except ImportError:  # found but not importable (a broken install, a stand-in that refuses): plain Python
            NUMPY = False
            return False
        np = numpy
    return True


def _views(trace: "EventColumns") -> Any:
    """numpy views of the trace's columns (no copies), made once."""
    v = trace.memo.get("numpy views")
    if v is None:
        v = trace.memo["numpy views"] = {
            "ts": np.frombuffer(trace.ts, dtype=np.float64) if len(trace.ts) else np.zeros(0),
            "dur": np.frombuffer(trace.dur, dtype=np.float64) if len(trace.dur) else np.zeros(0),
            "cat": np.frombuffer(trace.cat_id, dtype=np.dtype(trace.cat_id.typecode)),
            "lane": np.frombuffer(trace.lane, dtype=np.dtype(trace.lane.typecode)),
        }
    return v


def select(trace: "EventColumns", cat_flags: list[bool], lane_flags: list[bool]) -> array:
    """Indices (ascending) of the events whose category and lane both have their flag set."""
    n = len(trace.ts)
    if not n or not any(cat_flags) or not any(lane_flags):
        return array("l")
    if fast(n):
        v = _views(trace)
        mask = np.asarray(cat_flags, dtype=bool)[v["cat"]]
        if not all(lane_flags):
            mask &= np.asarray(lane_flags, dtype=bool)[v["lane"]]
        out = array("l")
        out.frombytes(np.flatnonzero(mask).astype(np.dtype("l"), copy=False).tobytes())  # no list of ints between
        return out
    flags = map(cat_flags.__getitem__, trace.cat_id)
    if not all(lane_flags):
        flags = map(and_, flags, map(lane_flags.__getitem__, trace.lane))
    return array("l", compress(range(n), flags))


def _unique(a: Any) -> Any:
    """The distinct values of a 1-D integer array, ascending (np.unique imports numpy.ma on its first call: 25 ms)."""
    if not len(a):
        return a
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))]


def max_end(trace: "EventColumns", leave_out: "set[int] | None" = None) -> float | None:
    """The latest end (start + duration) of any event (but those in ``leave_out``); None when none is left."""
    if not leave_out:
        if not len(trace.ts):
            return None
        if fast(len(trace.ts)):
            v = _views(trace)
            return float((v["ts"] + v["dur"]).max())
        return max(map(add, trace.ts, trace.dur))
    if fast(len(trace.ts)):
        v = _views(trace)
        ends = v["ts"] + v["dur"]
        ends[np.fromiter(leave_out, dtype=np.int64, count=len(leave_out))] = -np.inf
        top = float(ends.max()) if len(ends) else -math.inf
        return None if top == -math.inf else top
    ends = [e for i, e in enumerate(map(add, trace.ts, trace.dur)) if i not in leave_out]
    return max(ends) if ends else None


def covered_us(trace: "EventColumns", idx: list[int]) -> float:
    """The time covered by these events on each lane (merged [start, end) spans), summed over the lanes.

    Each lane's spans are merged as :func:`helpers.reader.spans.lane_spans` merges
    them; their lengths are summed with ``sum`` in time order, lane after lane
    in the order of the lanes' codes.
    """
    if not fast(len(idx)):
        return sum(e - s for one in trace.by_lane(idx).values() for s, e in lane_spans(trace, one))
    if not len(idx):
        return 0
    v = _views(trace)
    ix = np.asarray(idx, dtype=np.int64)
    lanes = v["lane"][ix]
    lengths: list[float] = []
    codes = _unique(lanes)
    for li in codes:
        starts, ends = _merged(v, ix if len(codes) == 1 else ix[lanes == li])
        lengths += (ends - starts).tolist()
    return sum(lengths)


def by_start(trace: "EventColumns", idx: list[int]) -> tuple[list[int], list[float]]:
    """``idx`` sorted by start time (events that start together keep their order in ``idx``), and their starts."""
    if fast(len(idx)):
        ix = np.asarray(idx, dtype=np.int64)
        ts = _views(trace)["ts"]
        ix = ix[np.argsort(ts[ix], kind="stable")]
        return ix.tolist(), ts[ix].tolist()
    idx = sorted(idx, key=trace.ts.__getitem__)
    return idx, list(map(trace.ts.__getitem__, idx))


def positions(column: array, n: int) -> list[array]:
    """For each code 0..n-1, the indices whose ``column`` holds it, ascending (a stable sort, split by count)."""
    a = np.frombuffer(column, dtype=np.dtype(column.typecode)) if len(column) else np.zeros(0, dtype=np.int64)
    order = np.argsort(a, kind="stable").astype(np.dtype("l"), copy=False)
    counts = np.bincount(a, minlength=n) if len(a) else np.zeros(n, dtype=np.int64)
    out = []
    for part in np.split(order, np.cumsum(counts)[:-1]):
        x = array("l")
        x.frombytes(part.tobytes())
        out.append(x)
    return out


def starts_on_lanes(trace: "EventColumns", idx: Any, lanes: set[int]) -> dict[int, tuple[Any, Any]]:
    """For each of ``lanes``: the events of ``idx`` on it, sorted by start (those that start together in the
    order of ``idx``), as (their starts, the events): numpy arrays for a large trace (a few bytes an event, not
    two lists of Python numbers), lists otherwise. For bisecting, and indexing."""
    if fast(len(idx)):
        ix = np.asarray(idx, dtype=np.int64)
        v = _views(trace)
        on = v["lane"][ix]
        out = {}
        for li in lanes:
            o = ix[on == li]
            o = o[np.argsort(v["ts"][o], kind="stable")]
            out[li] = (v["ts"][o], o)
        return out
    res = {}
    for li, part in by_code(trace, list(idx), "lane").items():
        if li in lanes:
            ordered, starts = by_start(trace, part)
            res[li] = (starts, ordered)
    return res


def remap(codes: array, table: list[int]) -> array:
    """``codes`` with each code ``k`` replaced by ``table[k]`` (a part's name codes, say, as the whole trace's)."""
    if table == list(range(len(table))):
        return codes
    if fast(len(codes)):
        out = np.asarray(table, dtype=np.dtype(codes.typecode))[np.frombuffer(codes, dtype=np.dtype(codes.typecode))]
        return array(codes.typecode, out.tobytes())
    return array(codes.typecode, map(table.__getitem__, codes))


def shifted(values: array, by: float) -> array:
    """``values`` minus ``by``, each one (as ``x - by`` in Python gives it)."""
    if fast(len(values)):
        return array("d", (np.frombuffer(values, dtype=np.float64) - by).tobytes())
    out = array("d")
    step = 1 << 16  # a slice at a time: no list of every value at once
    for lo in range(0, len(values), step):
        out.extend([x - by for x in values[lo:lo + step]])
    return out


def by_code(trace: "EventColumns", idx: list[int], column: str) -> dict[int, list[int]]:
    """``idx`` split by the code each event has in ``column`` ("lane" or "name_id"): code -> its events in the
    order of ``idx``, codes ascending."""
    values = getattr(trace, column)
    if fast(len(idx)):
        ix = np.asarray(idx, dtype=np.int64)
        codes = np.frombuffer(values, dtype=np.dtype(values.typecode))[ix]
        order = np.argsort(codes, kind="stable")
        sorted_codes = codes[order]
        bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
        groups = np.split(ix[order], bounds)
        keys = sorted_codes[np.concatenate(([0], bounds))].tolist() if len(ix) else []
        return {k: g.tolist() for k, g in zip(keys, groups)}
    codes = list(map(values.__getitem__, idx))
    distinct = set(codes)
    if len(distinct) <= 1:
        return {codes[0]: list(idx)} if codes else {}
    if len(distinct) <= 8:  # a pass in C per code beats one Python pass over all
        return {k: list(compress(idx, map(k.__eq__, codes))) for k in sorted(distinct)}
    out: dict[int, list[int]] = {}
    for i, k in zip(idx, codes):
        x = out.get(k)
        if x is None:
            out[k] = [i]
        else:
            x.append(i)
    return dict(sorted(out.items()))


def spans(trace: "EventColumns", idx: list[int]) -> list[tuple[float, float]]:
    """The merged [start, end) spans these events cover, as :func:`helpers.reader.spans.lane_spans` gives them."""
    if not fast(len(idx)):
        return lane_spans(trace, idx)
    starts, ends = _merged(_views(trace), np.asarray(idx, dtype=np.int64))
    return list(zip(starts.tolist(), ends.tolist()))


def _merged(v: dict, ix: Any) -> tuple[Any, Any]:
    """The merged spans of events ``ix`` (a non-empty numpy array): their starts and ends, in time order."""
    s = v["ts"][ix]
    e = s + v["dur"][ix]
    order = np.lexsort((e, s))  # as sorted() orders (start, end) pairs
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)  # the end of the merged span so far
    cut = np.flatnonzero(s[1:] > reach[:-1])  # a span that starts after it: a new merged span
    return np.concatenate((s[:1], s[cut + 1])), np.concatenate((reach[cut], reach[-1:]))


def visit_order(trace: "EventColumns", lane: int) -> tuple[Any, Any, Any]:
    """A CPU lane's events in the order the nesting visits them (start, longer first, file order), their ends
    (start + duration), and each event's place in that order (-1 for other lanes' events not asked for yet).
    numpy only; kept on the trace."""
    memo = trace.memo.setdefault("visit order", {})
    found = memo.get(lane)
    if found is None:
        v = _views(trace)
        pos = memo.get("pos")
        if pos is None:
            pos = memo["pos"] = np.full(len(v["ts"]), -1, dtype=np.int64)
        ix = np.flatnonzero(v["lane"] == lane)
        s, d = v["ts"][ix], v["dur"][ix]
        order = np.lexsort((ix, -d, s))
        ix = ix[order]
        ends = s[order] - (-d[order])  # as the nesting computes it
        pos[ix] = np.arange(len(ix))
        found = memo[lane] = (ix, ends, pos)
    return found


def intersection_us(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Microseconds during which both ``a`` and ``b`` (each merged and sorted) cover the time
    (:func:`helpers.reader.spans.intersection_us`, the overlapping pairs found at once)."""
    if not a or not b or not fast(len(a) + len(b)):
        return _intersection_plain(a, b)
    A, B = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    lo = np.searchsorted(B[:, 1], A[:, 0], side="right")  # b's first span that ends after a's starts
    hi = np.searchsorted(B[:, 0], A[:, 1], side="left")  # b's first span that starts at or after a's end
    counts = np.maximum(hi - lo, 0)
    i = np.repeat(np.arange(len(A)), counts)  # every overlapping pair, in order: a's span, then b's
    j = np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    overlap = np.minimum(A[i, 1], B[j, 1]) - np.maximum(A[i, 0], B[j, 0])
    return sum(overlap[overlap > 0].tolist())


def nest_parent(trace: "EventColumns", lane: int, i: int) -> int:
    """The last event of ``lane`` visited before ``i`` (see :func:`visit_order`) that ends no earlier than ``i``
    does, less 1 ns, or -1: :meth:`helpers.reader.trace.Trace.parent` for one event (numpy only)."""
    ids, ends, pos = visit_order(trace, lane)
    p = int(pos[i])
    lim = ends[p] - 1e-3
    hi, step = p, 64
    while hi > 0:  # backwards, in growing steps: the parent is usually close
        lo = max(0, hi - step)
        hits = np.flatnonzero(ends[lo:hi] >= lim)
        if len(hits):
            return int(ids[lo + hits[-1]])
        hi, step = lo, step * 8
    return -1


def enclosing(trace: "EventColumns", outer: list[int], inner: list[int]) -> dict[int, int]:
    """For each event of ``inner``, the last event of ``outer`` on its lane visited before it (start, longer
    first, file order, as :meth:`helpers.reader.trace.Trace.parent` nests them) that ends no earlier than it does,
    less 1 ns; -1 where none does. That is its innermost enclosing ``outer`` event, as nesting ``outer`` and
    ``inner`` together finds it (:meth:`Trace._parent_alone` says why), for all of ``inner`` at once: the
    nesting's walk event by event costs more than the roofline it serves. numpy only."""
    v = _views(trace)
    out: dict[int, int] = {}
    o_all = np.asarray(outer, dtype=np.int64)
    q_all = np.asarray(inner, dtype=np.int64)
    lane = v["lane"]
    o_lane, q_lane = lane[o_all], lane[q_all]
    for li in _unique(q_lane).tolist():
        o, q = o_all[o_lane == li], q_all[q_lane == li]
        # only an outer event that some inner one starts within (1 ns of slack) can enclose one: the others
        # go, so that the table below covers the few that launch work, not every op of the lane
        q_starts = np.sort(v["ts"][q])
        o_s = v["ts"][o]
        o = o[np.searchsorted(q_starts, o_s, side="left") < np.searchsorted(q_starts, o_s + v["dur"][o] + 1e-3,
                                                                          side="right")]
        if not len(o):
            out.update(dict.fromkeys(q.tolist(), -1))
            continue
        ix = np.concatenate((o, q))
        s, d = v["ts"][ix], v["dur"][ix]
        order = np.lexsort((ix, -d, s))
        is_o = np.zeros(len(ix), dtype=bool)
        is_o[:len(o)] = True
        is_o = is_o[order]
        ends = s[order] - (-d[order])  # as the nesting computes it
        o_ids, o_ends = ix[order][is_o], ends[is_o]
        before = np.cumsum(is_o)[~is_o] - 1  # each inner event: the last outer event visited before it
        lim = ends[~is_o] - 1e-3
        # the last outer event at or before `before` that ends at or after `lim`: binary lifting over a table
        # of running maxima of the ends, table[p][j] = max(o_ends[j - 2**p + 1 .. j]) (clipped at 0)
        table = [o_ends]
        while (1 << len(table)) <= len(o_ends):
            prev, w = table[-1], 1 << (len(table) - 1)
            nxt = prev.copy()
            nxt[w:] = np.maximum(prev[w:], prev[:-w])
            table.append(nxt)
        pos = before.copy()
        for p in range(len(table) - 1, -1, -1):
            live = pos >= 0
            miss = np.zeros(len(pos), dtype=bool)
            miss[live] = table[p][pos[live]] < lim[live]
            pos[miss] -= 1 << p
            np.maximum(pos, -1, out=pos)
        found = np.where(pos >= 0, o_ids[np.maximum(pos, 0)], -1)
        out.update(zip(ix[order][~is_o].tolist(), found.tolist()))
    return out


def looked_up(keys: array, values: array, queries: list[int], missing: int = -1) -> list[int]:
    """For each query, ``values[k]`` where ``keys[k]`` equals it (``keys`` ascending), or ``missing``: a sorted
    table's lookup for many keys at once (numpy when large, else a bisection each)."""
    if fast(len(queries)) and len(keys):
        k = np.frombuffer(keys, dtype=np.dtype(keys.typecode))
        v = np.frombuffer(values, dtype=np.dtype(values.typecode))
        q = np.asarray(queries, dtype=k.dtype)
        at = np.minimum(np.searchsorted(k, q), len(k) - 1)
        return np.where(k[at] == q, v[at], missing).tolist()
    from bisect import bisect_left

    n = len(keys)
    out = []
    for x in queries:
        at = bisect_left(keys, x)
        out.append(values[at] if at < n and keys[at] == x else missing)
    return out


def alike(columns: list[list[int]]) -> list[list[int]]:
    """Rows equal in every column, grouped: each group's rows ascending, the groups in order of their first row.
    (A dict of the rows' tuples: quicker than numpy's unique by rows, which sorts.)"""
    groups: dict[tuple, list[int]] = {}
    for r, key in enumerate(zip(*columns)):
        rows = groups.get(key)
        if rows is None:
            groups[key] = [r]
        else:
            rows.append(r)
    return list(groups.values())
