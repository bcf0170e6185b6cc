"""The cheat sheet as code: rules that read any trace and say what to look at next.

Each rule looks for one pattern the series teaches (``docs/cheat-sheet.md``
lists them with the notebook that teaches each) and returns a
:class:`Finding` with its evidence (event names and times from the trace) and
what to try. Like the facts it builds on, this module imports no torch.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

from . import facts
from . import kernel_kinds as kk
from .report import nbytes, short, us
from .trace import CPU_OP, DRIVER, MEMCPY, RUNTIME, Trace

ISSUE = "issue"  # something costs time that could be won back
NOTE = "note"  # something to know while reading the trace; not a problem in itself


@dataclass
class Finding:
    rule: str
    title: str
    severity: str
    evidence: list[str]
    next: str
    notebook: str  # where the series teaches it

    def text(self) -> str:
        lines = [f"[{self.severity}] {self.title}  ({self.rule}; notebook {self.notebook})"]
        lines += [f"    - {e}" for e in self.evidence]
        lines.append(f"    try: {self.next}")
        return "\n".join(lines)


@dataclass
class Context:
    """Facts computed once and shared by the rules."""

    trace: Trace
    summary: facts.Summary


Rule = Callable[[Context], "Finding | None"]


def _overhead(c: Context) -> Finding | None:
    b = c.summary.balance
    if b.verdict is None:
        return None
    evidence = [f"self CPU time {us(b.self_cpu_us)}, GPU time {us(b.device_us)} ({b.ratio:.1%} of the CPU time)",
                f"GPU busy {us(b.gpu_busy_us)} of the {us(b.window_us)} window"
                + (f" ({b.gpu_busy_share:.1%})" if b.gpu_busy_share is not None else "")]
    if b.verdict == "overhead-bound":
        k = c.summary.kinds
        n = sum(x.count for x in k)
        if n:
            med = statistics.median(facts.durations(c.trace))
            evidence.append(f"{n} pieces of GPU work, median {us(med)} each")
        return Finding("overhead-bound", "Overhead-bound: the GPU waits for the CPU", ISSUE, evidence,
                       "give each launch more work (larger batches or tensors), launch fewer kernels (fuse ops with "
                       "torch.compile, CUDA graphs), and keep Python out of the hot loop", "02")
    return Finding("compute-bound", "Compute-bound: the GPU's kernels set the pace", NOTE, evidence,
                   "look at the longest kernels (kernel choice, dtype, shapes, fusion) rather than at the CPU side",
                   "02")


def _cold_start(c: Context) -> Finding | None:
    st = c.summary.steps
    if len(st) < 3:
        return None
    rest = statistics.median(s.dur_us for s in st[1:])
    first = st[0]
    # The profiler's first active step is often ~2x the others even after warm-up: only flag clear outliers.
    if rest <= 0 or first.dur_us < 3 * rest:
        return None
    ev = [f"{first.name} took {us(first.dur_us)}, {first.dur_us / rest:.1f}x the median of the other steps "
          f"({us(rest)})"]
    gaps = [g for g in c.summary.gaps if g.step == first.name]
    later = [g.gap_us for g in c.summary.gaps if g.step != first.name]
    if gaps and later and gaps[0].gap_us > 2 * statistics.median(later):
        ev.append(f"'{gaps[0].annotation}' waited {us(gaps[0].gap_us)} before its first op ({gaps[0].first_op}), "
                  f"against a median of {us(statistics.median(later))} in later steps")
    lo, hi = first.start_us, first.start_us + first.dur_us
    setup = {n: k for n, k in facts.calls_in(c.trace, lo, hi).items()
             if any(w in n for w in ("Malloc", "Attribute", "Occupancy", "GetDevice", "Module", "Library"))}
    if setup:
        ev.append("set-up calls inside it: " + ", ".join(f"{k} x {n}" for n, k in list(setup.items())[:4]))
    return Finding("cold-start", "Wide first step: one-time costs, of the program or of the profiler, in the recording",
                   ISSUE, ev,
                   "run a few untimed warm-up steps before profiling, or use schedule(wait=1, warmup=1, ...) so "
                   "start-up stays out of the recorded steps", "03")


def _occupancy_queries(c: Context) -> Finding | None:
    t = c.trace
    per_step = facts.occupancy_queries_by_step(t)
    total = {n: x.count for n, x in ((x.name, x) for x in c.summary.calls) if kk.is_occupancy_query(n)}
    if not total:
        return None
    ops = sorted(facts.ops_around(t, kk.is_occupancy_query))
    ev = [f"{sum(total.values())} occupancy queries ({', '.join(f'{n} x {q}' for q, n in total.items())})"
          + (f" under {', '.join(ops)}" if ops else "")]
    steps_with = [s for s, q in per_step if q]
    if per_step:
        ev.append(f"in {len(steps_with)} of {len(per_step)} recorded steps"
                  + (f" ({', '.join(steps_with[:4])})" if steps_with else ""))
    if not per_step:
        advice = ("this trace has no profiler steps to place them in; the kernels launched after them are library "
                  "kernels (GEMM, convolution): judge those by their resources and throughput")
    elif len(steps_with) == len(per_step):
        advice = ("they come every step, so each call pays for them on the CPU; the kernels launched after them are "
                  "library kernels (GEMM, convolution): judge those by their resources and throughput")
    else:
        advice = ("they come only in some steps, which fits a library setting itself up once; warm up, or keep the "
                  "first step out of the recording")
    return Finding("occupancy-queries", "Occupancy queries: a library working out how its kernels fit an SM", NOTE, ev,
                   advice, "06")


def _profiler_flush(c: Context) -> Finding | None:
    cs = c.summary.artifacts.closing_sync
    b = c.summary.balance
    if not cs or b.window_us <= 0 or cs["dur_us"] < 0.05 * b.window_us:
        return None
    idle = cs["idle_share"]
    ev = [f"last {cs['name']} took {us(cs['dur_us'])} ({cs['dur_us'] / b.window_us:.0%} of the window)"
          + (f", GPU idle for {idle:.0%} of it" if idle is not None else "")]
    if idle is not None and idle < 0.5:
        meaning = ("the GPU was busy for most of it: the CPU had run ahead and waited for queued work; that wait is "
                   "real GPU time, not the profiler's")
    else:
        meaning = ("the GPU was idle for most of it, so the time did not go to waiting for kernels: it is not your "
                   "GPU work; one hypothesis is the profiler's own work as it stops")
    return Finding("profiler-flush", "Long synchronize at the end: the profiler's own synchronize before it stops",
                   NOTE, ev, f"do not count it against your code: {meaning}", "04")


def _bias_copy(c: Context) -> Finding | None:
    t = c.trace
    found = []
    for j in facts.gpu_work(t):
        if t.group_of(j) != MEMCPY or "DtoD" not in t.name_of(j) and "Device -> Device" not in t.name_of(j):
            continue
        i = t.launch_of(j)
        ops = [t.name_of(p) for p in t.ancestors(i)] if i >= 0 else []
        if any(o in ("aten::addmm", "aten::baddbmm") for o in ops):
            found.append(j)
    if not found:
        return None
    size = t.args.get(found[0], {}).get("bytes")
    total = sum(t.dur[j] for j in found)
    return Finding("addmm-bias-copy", "Device-to-device copy before a GEMM: addmm copying its bias", NOTE,
                   [f"{len(found)} x {t.name_of(found[0])}" + (f" of {nbytes(size)}" if size else "")
                    + f" under aten::addmm, {us(total)} in all",
                    "with a full-matrix bias, ATen's CUDA addmm copies it into the output, then the GEMM adds its "
                    "product onto it"],
                   "expected when the bias is a full matrix (torch.addmm, or torch.compile's rewrite of matmul + add); "
                   "a 1-D bias, as nn.Linear has, can go to the GEMM's bias epilogue with no copy", "08")


def _buffer_request(c: Context) -> Finding | None:
    bufs = c.summary.artifacts.buffer_requests
    if not bufs:
        return None
    return Finding("profiler-buffer", "Activity Buffer Request: the profiler allocating its own buffers", NOTE,
                   [f"{b['name']} on '{b['lane']}', {us(b['dur_us'])}" for b in bufs[:3]],
                   "profiler overhead, not your code: schedule(wait=1, warmup=1, ...) moves it out of the "
                   "recorded steps", "03")


def _variance(c: Context) -> Finding | None:
    worst = None
    for k in c.summary.kernels:
        if k.kind in (kk.COPY, kk.FILL):  # copies vary with what they copy from (pageable memory...)
            continue
        if k.count >= 5 and k.median_us >= 5 and k.max_us > 1.1 * k.median_us:
            spread = k.max_us / k.median_us - 1
            if worst is None or spread > worst[0]:
                worst = (spread, k)
    if worst is None:
        return None
    spread, k = worst
    return Finding("kernel-variance", "Kernels of the same name with different durations", NOTE,
                   [f"{k.count} x {short(k.name, 60)}: median {us(k.median_us)}, mean {us(k.mean_us)}, "
                    f"min {us(k.min_us)}, max {us(k.max_us)} (+{spread:.0%} over the median)"],
                   "if the shapes are the same (an elementwise kernel's name does not change with its size), quote "
                   "the median and study the outliers apart; possible causes to test (the article's list): clocks, "
                   "heat, power management, driver housekeeping, other work on the GPU",
                   "07")


def _compile(c: Context) -> Finding | None:
    comp = c.summary.compiled
    if not comp.any:
        return None
    again = facts.recompiles(comp.regions)
    if again:
        return Finding("recompiles", "Recompilation: a compiled frame was compiled again", ISSUE,
                       [f"{comp.regions[r]} x {r} (the second number counts compiles of the same frame)" for r in again],
                       "run with TORCH_LOGS=recompiles to see which guard failed: shapes, dtypes or devices that change "
                       "between calls; mark dynamic dimensions or keep them fixed", "08")
    frames = {r.split(": ")[-1].split("/")[0] for r in comp.regions}
    if len(frames) > 1:
        return Finding("graph-breaks", "Several compiled frames: the function was split by graph breaks", NOTE,
                       [f"{n} x {r}" for r, n in sorted(comp.regions.items())],
                       "TORCH_LOGS=graph_breaks names each break; code between graphs runs eagerly", "08")
    hashes = comp.graph_hashes
    ev = [f"{n} x CompiledFxGraph {h}" for h, n in hashes.items()]
    region = next(iter(comp.regions), None)
    t = c.trace
    calls = t.indices((CPU_OP,), name=region) if region else []
    cpu = [t.dur[i] for i in calls]
    gpu = [facts.gpu_time_under(t, i) for i in calls]
    if cpu and gpu and statistics.median(gpu) < statistics.median(cpu):
        ev.append(f"each '{region}' call takes {us(statistics.median(cpu))} on the CPU and launches "
                  f"{us(statistics.median(gpu))} of GPU work")
        return Finding("compile-tax", "Compiled region costs more CPU time than the GPU work it launches", ISSUE, ev,
                       "confirm it without the profiler first (torch.utils.benchmark.Timer: the profiler inflates CPU "
                       "time per op); then compile larger graphs, batch the work, or try mode='reduce-overhead' "
                       "(CUDA graphs) and measure", "08")
    return Finding("compile-cache-hits", "torch.compile: one graph, reused every call", NOTE,
                   [e + " (the same graph every call: cache hits)" for e in ev],
                   "nothing to fix; read the generated code under /tmp/torchinductor_<user>/ to see what was fused",
                   "08")


def _tiny_kernels(c: Context) -> Finding | None:
    lat = c.summary.latency
    durs = facts.durations(c.trace)
    if not durs or lat is None or len(durs) < 20:
        return None
    med = statistics.median(durs)
    t = c.trace
    launch = [t.dur[i] for i in t.indices((RUNTIME, DRIVER)) if t.gpu_work_of(i)]
    if not launch:
        return None
    launch_cost = statistics.median(launch)
    if med >= launch_cost:
        return None
    return Finding("tiny-kernels", "Kernels shorter than the calls that launch them", ISSUE,
                   [f"{len(durs)} pieces of GPU work, median {us(med)}; a launch call takes {us(launch_cost)} "
                    "(median) on the CPU"],
                   "fuse small ops (torch.compile), batch work, or capture the sequence in a CUDA graph", "09")


RULES: list[Rule] = [_overhead, _cold_start, _occupancy_queries, _profiler_flush, _bias_copy, _buffer_request,
                     _variance, _compile, _tiny_kernels]


def diagnose(trace: Trace) -> list[Finding]:
    """Every cheat-sheet rule that applies to this trace, issues first."""
    from .distributed import trace_rules  # issue 13's rules for a rank's collectives (they import Finding from here)

    ctx = Context(trace, facts.summarize(trace))
    found = [f for f in (rule(ctx) for rule in RULES + trace_rules()) if f is not None]
    return sorted(found, key=lambda f: f.severity != ISSUE)


def text(findings: list[Finding]) -> str:
    if not findings:
        return "No rule of the cheat sheet applies to this trace."
    return "\n\n".join(f.text() for f in findings)
