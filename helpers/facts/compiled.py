"""torch.compile in a trace: the compiled regions, their graphs, recompiles and the time spent compiling."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from ..reader.trace import Trace, lane_spans
from .steps import window


_FX_HASH = re.compile(r"CompiledFxGraph\s+(\S+)")


COMPILE_MARKERS = (
    "TorchDynamo Cache Lookup",
    "Torch-Compiled Region",
    "Pregraph bytecode",
    "AOTDispatcher Runtime Wrapper Prologue",
    "## Call CompiledFxGraph",
)


# --- torch.compile --------------------------------------------------------------

@dataclass
class Compiled:
    regions: dict[str, int]  # "Torch-Compiled Region: 0/0" -> count
    graph_hashes: dict[str, int]  # CompiledFxGraph hash -> count
    markers: dict[str, int]  # each compile marker -> count

    @property
    def any(self) -> bool:
        return bool(self.regions or self.graph_hashes)


def compiled(trace: Trace) -> Compiled:
    """What torch.compile leaves on the CPU lane."""
    regions: Counter = Counter()
    hashes: Counter = Counter()
    markers: Counter = Counter()
    found: Counter = Counter()
    wanted = {ni for ni, name in enumerate(trace.name_table) if any(m in name for m in COMPILE_MARKERS)}
    if wanted:
        for i in range(len(trace)):
            if trace.name_id[i] in wanted and not trace.is_gpu(i):
                found[trace.name_id[i]] += 1
    for ni, n in found.items():
        name = trace.name_table[ni]
        for m in COMPILE_MARKERS:
            if m in name:
                markers[m.strip("# ")] += n
        if name.startswith("Torch-Compiled Region"):
            regions[name] += n
        h = _FX_HASH.search(name)
        if h:
            hashes[h.group(1).strip("#")] += n
    return Compiled(dict(regions), dict(hashes), dict(markers))


#: The spans torch.compile writes on the CPU while it compiles a frame. In torch 2.13's source (torch/_dynamo/
#: utils.py, convert_frame.py), ``ChromiumEventLogger.log_event_start`` records a profiler event named after each
#: compile event, the outermost being ``dynamo`` (``_compile``'s ``chromium_event_timed("dynamo")``) and, inside
#: it, ``entire_frame_compile`` (the phase of ``dynamo_timed("_compile.compile_inner")``); ``dynamo_timed`` also
#: wraps every timed phase in ``<key> (dynamo_timed)`` (``_compile.compile_inner (dynamo_timed)``, ``backend_
#: compile``, Inductor's ...), through ``compile_time_record_function``. torch 2.11 (the exam traces) writes all
#: three. Earlier 2.x releases wrote the ``(dynamo_timed)`` spans only (``torch.profiler.record_function(f"{key}
#: (dynamo_timed)")`` in public copies of utils.py), with other keys (``_compile.<locals>.compile_inner``), so the
#: suffix is matched whatever the key. Nested spans are not counted twice: their union is.
COMPILE_SPANS = ("dynamo", "entire_frame_compile")


COMPILE_SPAN_SUFFIX = " (dynamo_timed)"


@dataclass
class CompileTime:
    """The time torch.compile spent compiling inside the recorded window, from its own spans."""

    compiles: int  # separate stretches of compiling (outermost spans, nested ones merged into them)
    us: float  # wall time they cover inside the window
    window_us: float
    names: list[str]  # the outermost spans' names, most frequent first
    spans: list[tuple[float, float]] = field(default_factory=list)  # the merged stretches, clipped to the window

    @property
    def share(self) -> float | None:
        return self.us / self.window_us if self.window_us > 0 else None


def compile_time(trace: Trace) -> CompileTime:
    """How long torch.compile compiled inside the recorded window: the union of its compile spans
    (:data:`COMPILE_SPANS`, and any ``... (dynamo_timed)``) on every CPU thread, clipped to the window."""
    lo, hi = window(trace)
    wanted = {ni for ni, name in enumerate(trace.name_table)
              if name in COMPILE_SPANS or name.endswith(COMPILE_SPAN_SUFFIX)}
    idx = [i for i in range(len(trace)) if trace.name_id[i] in wanted and not trace.is_gpu(i)] if wanted else []
    spans = lane_spans(trace, idx)  # merged across threads: wall time during which something compiled
    outer: Counter = Counter()
    for s, e in spans:  # the longest span starting at a merged stretch's start names it
        first = max((i for i in idx if trace.ts[i] == s), key=trace.dur.__getitem__)
        outer[trace.name_of(first)] += 1
    inside = [(max(s, lo), min(e, hi)) for s, e in spans if e > lo and s < hi]
    return CompileTime(len(inside), sum(e - s for s, e in inside), hi - lo, [n for n, _ in outer.most_common()],
                       inside)


# --- what the notebooks' reveals read ----------------------------------------------------

_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")


def compiled_region_counts(names) -> dict[str, int]:
    """``Torch-Compiled Region: F/N`` names among ``names``, counted (a profiler's event names, or a trace's)."""
    return dict(Counter(n for n in names if _REGION.match(n)))


def recompiles(regions: dict[str, int]) -> list[str]:
    """The regions whose compile count (the N of F/N) is above 0: a frame compiled again."""
    return sorted(r for r in regions if (m := _REGION.match(r)) and int(m.group(2)) > 0)
