"""What several notebooks' reveals do alike: a profiled time against the same call unprofiled, with spreads."""

from __future__ import annotations

import html

from ..facts import measure
from ..lesson import plots, show, spoilers
from ..facts.measure import Estimate, Spread
from ..facts.text import us


def profiled(run) -> Spread:
    """CPU time per call in the trace: the label's span in every steady step (all recorded steps but the first)."""
    return run.cpu_per_call


def unprofiled(run) -> Spread | None:
    """The same call timed without the profiler, block by block, before the run was profiled; None if not timed."""
    return run.timing.host if run.timing else None


def profiler_ratio(run) -> Estimate | None:
    """Profiled over unprofiled time per call, with the range the two spreads allow."""
    plain = unprofiled(run)
    if plain is None or not plain.n or not run.cpu_per_call.n:
        return None
    return Estimate.of(run.cpu_per_call) / Estimate.of(plain)


def profiler_extra(run) -> Estimate | None:
    """Profiled minus unprofiled time per call (µs), with its range."""
    plain = unprofiled(run)
    if plain is None or not plain.n or not run.cpu_per_call.n:
        return None
    return Estimate.of(run.cpu_per_call) - Estimate.of(plain)


def where_measured(*runs) -> str:
    """One sentence: where, on how many threads and under what load the unprofiled timings were taken."""
    parts = []
    for r in runs:
        t = r.timing
        if t is None:
            continue
        threads = f", {t.threads} thread{'s' if t.threads != 1 else ''}" if t.threads else ""
        where = "this CPU" if r.mode == "cpu" else r.device + (" (recorded)" if r.mode == "recorded" else "")
        parts.append(f"{html.escape(r.tag)} on {html.escape(where)}{threads}")
    load = measure.conditions()
    loaded = (f" This machine's load now: {load.load * load.cpus:.1f} on {load.cpus} cores"
              + (" (busy: other work shares the cores, so expect wide spreads)." if load.busy else ".")
              if load.load is not None and load.cpus else "")
    return ("Timed " + "; ".join(parts) + "." if parts else "") + loaded


def spread_figure(groups: dict[str, Spread], title: str, unit: str = "us per call", log: bool = False) -> None:
    """The samples behind a graded timing, as a picture."""
    show.display_figure(plots.spreads({k: v.samples for k, v in groups.items() if v.n}, title=title, unit=unit,
                                      log=log))


def facts_of(*values) -> list:
    """The facts a reveal of timings rests on: each time (µs) and ratio it prints."""
    out = []
    for v in values:
        if isinstance(v, spoilers.Fact):
            out.append(v)
        elif isinstance(v, (Spread, Estimate)):
            out.append(spoilers.ratio(v.median) if v.unit == "x" else spoilers.us(v.median))
    return out


def us_range(e: Estimate | Spread) -> str:
    lo, hi = e.quartiles
    return f"{us(lo)} to {us(hi)}"


def against_timed(run, timed, label: str) -> tuple[str, str, str]:
    """A run's CPU time per call profiled (the trace's steady steps), unprofiled (timed in turn, :mod:`helpers.
    comparisons`), and how much the profiler stretched it: three table cells ("-" where the group lacks it)."""
    if label not in timed.labels:
        return us(run.cpu_per_call_us), "-", "-"
    plain = timed.spread(label)
    return us(run.cpu_per_call_us), plain.text(), f"{run.cpu_per_call_us / plain.median:.1f}x"


def profiled_says(prof_choice: str, g, why: str) -> str:
    """The sentence on what the traces alone would have answered, beside the grade on unprofiled time."""
    return "the same verdict. " if prof_choice == g.actual else f"which alone would say '{prof_choice}': {why}. "
