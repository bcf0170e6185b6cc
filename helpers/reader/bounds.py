"""Durations no profiler's clock gives: the events that hold them, set aside before any fact reads the trace.

A trace's events all start inside its own window (from its first start to
its last), and each lasts a time some clock measured. A duration more than
:data:`SPAN_RATIO` times that window (counted as at least :data:`FLOOR_US`, so
that a short trace may still hold a call of up to 1,000 s), or beyond what
a signed 64-bit count of nanoseconds holds (:data:`CLOCK_US`, 292 years: how
Kineto and CUPTI record times), is a number written by hand or by a broken
tool, not a measurement: ``"dur": 1e30`` would make "GPU time 1e24 s", a
verdict and findings out of nothing.

Such events are left out of the columns, and :class:`SetAside` says how many
and why, in one line. Ordinary traces pay three min/max passes over two
columns (numpy's when it is installed: the same numbers either way).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import compress
from pathlib import Path

from . import vector
from .columns import Columns
from .source import TraceError

CLOCK_US = 2 ** 63 / 1000  # microseconds a signed 64-bit nanosecond clock reaches: 9.2e15 (292 years)
SPAN_RATIO = 1000  # a duration this many times the trace's window is beyond what the trace can hold
FLOOR_US = 1e6  # the window counted as at least 1 s


@dataclass
class SetAside:
    """The timed events left out of a trace, and why."""

    count: int
    longest_us: float  # the longest duration among them
    window_us: float  # the trace's window: its first start to its last
    limit_us: float  # the longest duration kept

    def why(self) -> str:
        """The durations and the limit they pass, in words."""
        if self.limit_us >= CLOCK_US:
            limit = "what a 64-bit nanosecond clock holds"
        else:
            limit = (f"{SPAN_RATIO:,} times the trace's window of {self.window_us:.6g} us from its first start to "
                     f"its last, or of {FLOOR_US / 1e6:g} s if that is shorter")
        return f"up to {self.longest_us:.3g} us; the limit is {self.limit_us:.3g} us, {limit}"

    def line(self) -> str:
        """How many events were set aside and why, in one line."""
        n = self.count
        return (f"set aside {n:,} event{'s' if n != 1 else ''} whose duration no profiler's clock gives "
                f"({self.why()}): left out of every total")

    def to_json(self) -> dict:
        return {"events": self.count, "longest_us": self.longest_us, "window_us": self.window_us,
                "limit_us": self.limit_us, "reason": self.line()}


def set_aside(c: Columns, path: Path) -> SetAside | None:
    """Leave out of ``c`` the events whose duration no clock gives (the module's docstring says which).

    Returns what was left out, or None when every event is kept (the columns
    untouched). Raises TraceError when no timed event would be left.
    """
    ts, dur = c.ts, c.dur
    lo, hi, longest = _extent(ts, dur)
    window = hi - lo
    limit = min(SPAN_RATIO * max(window, FLOOR_US), CLOCK_US)
    if longest <= limit:
        return None  # nearly always
    keep = [d <= limit for d in dur]
    kept = sum(keep)
    aside = SetAside(len(keep) - kept, longest, window, limit)
    if not kept:
        raise TraceError(f"{path}: every timed event has a duration no profiler's clock gives ({aside.why()})")
    _keep(c, keep)
    return aside


def _extent(ts: array, dur: array) -> tuple[float, float, float]:
    """The earliest start, the latest start and the longest duration."""
    if vector.fast(len(ts)):
        np = vector.np
        t = np.frombuffer(ts, dtype=np.float64)
        return float(t.min()), float(t.max()), float(np.frombuffer(dur, dtype=np.float64).max())
    return min(ts), max(ts), max(dur)


def _keep(c: Columns, keep: list[bool]) -> None:
    """Only the kept events in every column; event indices (args, sequence numbers) renumbered."""
    new = [-1] * len(keep)
    k = 0
    for i, x in enumerate(keep):
        if x:
            new[i] = k
            k += 1
    for name in ("name_id", "cat_id", "ts", "dur", "lane", "corr"):
        col = getattr(c, name)
        setattr(c, name, array(col.typecode, compress(col, keep)))
    c.args.raw = {new[i]: a for i, a in c.args.raw.items() if keep[i]}
    c.shapes = c.shapes.kept(new, keep)
    seq = [keep[i] for i in c.seq_event]
    c.seq_event = array(c.seq_event.typecode, [new[i] for i in compress(c.seq_event, seq)])
    c.seq_number = array(c.seq_number.typecode, compress(c.seq_number, seq))
    c.seq_fwd_thread = array(c.seq_fwd_thread.typecode, compress(c.seq_fwd_thread, seq))
    c.lane_cats = set(zip(c.lane, c.cat_id))  # the lanes keep their kind: a GPU stream stays one, if emptied
