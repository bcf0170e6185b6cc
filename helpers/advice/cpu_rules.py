"""The rules about the GPU's idle time while it waited for the CPU: what the CPU was doing instead.

Each claims, on the ledger (:mod:`helpers.advice.ledger`), the stretches of
that idle time its cause explains, in the order of :data:`RULES`: the most
specific cause first (the DataLoader, compiling, a cold start, one long
call, waits for the GPU, the optimizer), and what no cause claims goes to
the last rule, the CPU's own work between launches. A rule that finds its
pattern but whose time an earlier rule claimed says nothing.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, replace

from .. import facts
from ..facts import kernel_kinds as kk, step_facts as sf
from ..facts.budget import EVEN_MARGIN, Budget
from ..facts.text import us
from ..reader.spans import Spans, difference, intersection, merged, total
from ..reader.trace import ANNOTATION, CPU_OP, DRIVER, KERNEL, RUNTIME, Trace
from .findings import Context, Finding, Rule, Severity
from .ledger import Gain, Side, Speedup, times
from .rulebook import RuleId
from . import trace_rules
from .trace_rules import compile_tax, graph_phase
from .sync_rules import hidden_sync

DATALOADER_DOCS = "https://docs.pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading"
PINNED_DOCS = "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html"

#: one runtime or driver call (not a synchronize, not a copy) longer than this share of the window is a one-time cost
#: worth its own finding (lazy module loading, context creation, a large allocation)
LONG_CALL_SHARE = 0.1
#: ... and, once one does, every such call of at least this long and this share of the window joins it
LONG_CALL_MIN_US = 1000.0
LONG_CALL_OF = 0.005
#: the optimizer step's CPU and GPU time with fused=True against each implementation, on the H200 reference set
#: (notebook 12's train-fp32-* and notebook 16's loop traces, median step): foreach 627 to 294 us of CPU time, 372 to
#: 124 us of GPU time; the for-loop 2131 to 294 and 4880 to 870 us of CPU time, 358 to 124 and 696 to 263 us of GPU
#: time. The for-loop's CPU speedup has its low end calibrated on what notebook 16's loop gained timed without the
#: profiler (1.04x and 1.18x where 1.15x and 1.36x were predicted: the profiler inflates each small op's CPU time, so
#: the CPU time a fused step removes is less than the trace shows)
FUSED = {sf.FOREACH: (Speedup(2.1, 1.4, 3.2), Speedup(3.0, 2.0, 4.5)),
         sf.LOOP: (Speedup(6.4, 1.3, 9.6), Speedup(2.8, 1.9, 4.2))}
#: the pairs behind FUSED (us: CPU before, after; GPU before, after), which the basis quotes as they were measured
FUSED_PAIRS = {sf.FOREACH: ((627, 294, 372, 124),),
               sf.LOOP: ((2131, 294, 358, 124), (4880, 870, 696, 263))}
#: where those pairs were recorded: the foreach pair is notebook 12's alone (notebook 16's loop uses the for-loop)
FUSED_WHERE = {sf.FOREACH: "notebook 12's training step", sf.LOOP: "notebook 12's training step and notebook 16's loop"}


def _fused_measured(impl: str) -> str:
    """What fused=True did to the step's CPU and GPU time in the measured pairs, in words."""
    pairs = FUSED_PAIRS[impl]
    cpu = " and ".join(f"{a / b:.1f}x" for a, b, _, _ in pairs)
    gpu = " and ".join(f"{c / d:.1f}x" for _, _, c, d in pairs)
    runs = "in one measured pair" if len(pairs) == 1 else f"in {len(pairs)} measured pairs"
    return f"cut the step's CPU time {cpu} and its GPU time {gpu} {runs}"
#: a multi-process DataLoader whose __next__ takes less than this share of the window keeps up (a queue read)
INPUT_MINOR = 0.05
#: the workers a single-process DataLoader's fix is assumed to add (the series' notebooks 14 and 16 use four)
WORKERS_ASSUMED = 4
#: how much faster those four workers made the batches on the H200 reference machine (16 cores): notebook 14's step,
#: nearly all loading, 2.13x faster timed without the profiler (input-w0-pin-nb; 2.55x with pinned copies as well)
WORKERS_MEASURED = 2.2
#: the CPU's own work between launches, when a fix cuts it: halved as a point figure (how much a fusion, CUDA graphs or
#: larger batches remove depends on the model), at best all of it
OVERHEAD = Speedup(2.0, 1.25, float("inf"))
#: a CPU-bound step whose CPU work is at most this many times its GPU work is within the profiler's reach: notebook 10's
#: flash attention (CPU-bound as recorded; without the profiler its host time per call, 72 us, is under its 94 us of
#: GPU work, and its wall time is the GPU's)
PROFILER_MARGIN = 1.5
#: pieces of GPU work a step: up to this many, the CPU-bound finding sizes no gain (there is little to fuse)
FEW_LAUNCHES = 3


def _on_launcher(c: Context, idx) -> Spans:
    """The spans of these CPU events on the thread that launched the GPU work."""
    lanes = c.budget.launchers
    return merged((c.trace.ts[i], c.trace.end_of(i)) for i in idx
                  if not lanes or c.trace.lane[i] in lanes)


# --- the DataLoader (14) -------------------------------------------------------------------------------------


@dataclass
class _Loading:
    spans: list[sf.LoaderSpan]
    loader_us: float  # DataLoader time inside the recorded steps (or the window, without steps)

    @property
    def workers(self) -> bool:
        return any("_MultiProcessingDataLoaderIter" in s.name for s in self.spans)

    @property
    def single(self) -> bool:
        return any("_SingleProcessDataLoaderIter" in s.name for s in self.spans)


def loading(c: Context) -> _Loading | None:
    """The DataLoader's spans inside the recorded steps (or the window), shared by the rules that read them."""
    def compute() -> _Loading | None:
        spans = sf.dataloader_spans(c.trace)
        if not spans:
            return None
        inside = [s for s in spans if s.step is not None] if c.summary.steps else spans
        return _Loading(inside, sum(s.dur_us for s in inside))
    return c.once("input", compute)


def _by_step(spans: list[sf.LoaderSpan]) -> dict[str, float]:
    """The DataLoader's time in each step, by the step's name, in the order the steps come."""
    by: dict[str, float] = {}
    for s in spans:
        if s.step is not None:
            by[s.step] = by.get(s.step, 0.0) + s.dur_us
    return by


#: one step holding at least this share of the DataLoader's wait (of three or more): a burst, not a steady shortfall
BURST_SHARE = 0.6


def _per_step(spans: list[sf.LoaderSpan]) -> str:
    """'ProfilerStep#2: 9.4 ms, ProfilerStep#3: 9.1 ms': the DataLoader's time per step, each step once (with its
    calls where a step holds several: a loop recorded as one step)."""
    by = _by_step(spans)
    batches: dict[str, int] = {}
    for s in spans:
        if s.step is not None:
            batches[s.step] = batches.get(s.step, 0) + 1
    # calls, not batches: the last __next__ of an epoch makes none (it ends the iteration)
    shown = [f"{k}: {us(v)}" + (f" in {batches[k]} __next__ calls" if batches.get(k, 0) > 1 else "")
             for k, v in list(by.items())[:4]]
    return ", ".join(shown) + (" ..." if len(by) > 4 else "")


def _input_bound(c: Context) -> Finding | None:
    x = loading(c)
    if x is None:
        return None
    if x.workers and not x.single and x.loader_us < INPUT_MINOR * c.budget.window_us:
        return None  # workers hand over batches prepared ahead: __next__ is a queue read, the workers keep up
    where = "the recorded steps" if c.summary.steps else "the recorded window"
    whole = sum(s.dur_us for s in c.summary.steps) if c.summary.steps else c.budget.window_us
    spans = merged((s.start_us, s.start_us + s.dur_us) for s in x.spans)
    idle = total(intersection(spans, c.budget.busy))
    ev = [f"the DataLoader's __next__ took {us(x.loader_us)} of the {us(whole)} of {where}"
          + (f" ({x.loader_us / whole:.0%}); the GPU was idle for {1 - idle / x.loader_us:.0%} of that time"
             if whole > 0 and x.loader_us > 0 else "")]
    per = _per_step(x.spans)
    if per:
        ev.append("per step: " + per)
    if x.single:
        ev.append("_SingleProcessDataLoaderIter: the batches are made in the main process (num_workers=0): each "
                  "__next__ makes its batch while the loop waits")
        advice = ("prepare batches while the GPU trains: DataLoader(num_workers=N, persistent_workers=True) makes "
                  "them in other processes; make each sample cheaper (decode once, augment on the GPU); then check "
                  f"that the DataLoader span shrinks to a queue read ({DATALOADER_DOCS})")
        # four workers made notebook 14's step 2.13x faster without the profiler (input-w0-pin-nb, its loading
        # most of the step), not 4x (handing batches between processes costs time too, one likely reason). Fitted there
        # (benchmarks/diagnose_calibration.py): 2.2x for the point, 1.5x to WORKERS_ASSUMED for the ends
        rates, basis = (WORKERS_MEASURED, 1.5, float(WORKERS_ASSUMED)), (
            f"{WORKERS_ASSUMED} workers making batches {WORKERS_MEASURED:g}x as fast, while the step runs (1.5x to "
            f"{WORKERS_ASSUMED}x for the ends; {WORKERS_MEASURED:g}x a figure fitted to the H200 reference machine, "
            "where four workers made notebook 14's loading-bound step 2.13x faster, timed without the profiler, "
            "2.55x with pinned copies too); how loading scales with workers on "
            "another machine the trace cannot show (the cores and the samples decide it: time the fix); the step "
            "then takes the longer of its other work and the faster loading")
    else:
        if x.workers:
            ev.append("_MultiProcessingDataLoaderIter: workers already make the batches; the main process waits "
                      "for them")
        advice = ("the workers do not keep up: make each sample cheaper (decode once, smaller images, augment on the "
                  "GPU), add workers if the cores allow, or raise prefetch_factor; then check the DataLoader span "
                  f"shrinks to a queue read ({DATALOADER_DOCS})")
        rates, basis = (2.0, 1.25, 4.0), ("assumed: the workers make batches twice as fast (1.25x to 4x for the ends: it "
                                          "depends on the cores and the samples); the step then takes the longer of "
                                          "its other work and the faster loading")
    by = _by_step(x.spans)
    if len(by) >= 3 and x.loader_us > 0:
        name, most = max(by.items(), key=lambda kv: kv[1])
        if most >= BURST_SHARE * x.loader_us:
            ev.append(f"{name} holds {most / x.loader_us:.0%} of that wait: a burst (workers starting, or refilling "
                      "their queue, is one hypothesis), not the same wait every step; the gain is for a loop that "
                      "waits as this recording does: one that waits less in its other steps gains less, and a longer "
                      "recording would tell which it is")
    f = Finding(RuleId.INPUT_BOUND, "Input-bound: the GPU waits for the DataLoader", Severity.ISSUE, ev, advice)
    loaded = merged((s.start_us, s.start_us + s.dur_us) for s in x.spans)
    got = c.claimed(f, "the GPU idle while the DataLoader ran", basis, cpu=loaded, cpu_speedup=Speedup.gone(),
                    removes=loaded)
    if got is not None and got.share is not None:
        w = c.budget.window_us
        rest = w * (1 - got.share)

        def speed(n: float) -> float:
            if x.single:  # the batches made n times as fast, ahead of the step: the step is the longer of the two
                return w / max(rest, x.loader_us / n, 1e-9)
            # workers already overlap their work with the step: the wait is what their production time P has left
            # beyond the rest of the step (P = wait + rest); made n times as fast, the step is max(rest, P / n)
            return w / max(rest, (rest + x.loader_us) / n, 1e-9)
        high = speed(rates[2])
        shared = False
        gpu_step = c.budget.busy_us + c.budget.queued_us
        if x.single and rest > gpu_step and rest >= x.loader_us / rates[2]:
            # the loading hidden, the rest of the step sets it: profiled CPU work, which the profiler inflates (the
            # loop of notebook 16: 2.01x predicted this way, 3.39x timed); at best the rest runs at the GPU's pace
            alone = high
            high = max(high, w / max(gpu_step, x.loader_us / rates[2], 1e-9))
            if high > alone * 1.05:
                basis += (f"; if the rest of the CPU's work took as long as the profiler recorded it, faster "
                          f"loading alone would give at most {times(alone)}; without the profiler that work is "
                          "usually shorter (notebook 01 measures the profiler's own cost), by an amount this trace "
                          "cannot show, so the high end is the step as short as the "
                          f"longer of the GPU's own work and the loading at {rates[2]:g}x (time the fix to know; "
                          "that end takes in what the other findings' fixes would win too)")
                shared = True
        got.gain = Gain(speed(rates[0]), speed(rates[1]), high, basis, high_shared=shared)
    return got


# --- torch.compile compiling (08) ------------------------------------------------------------------------------


def _recompiles(c: Context) -> Finding | None:
    comp = c.summary.compiled
    again = facts.recompiles(comp.regions) if comp.any else []
    if not again:
        return None
    ev = [f"{comp.regions[r]} x {r} (the second number counts compiles of the same frame)" for r in again]
    spent = facts.compile_time(c.trace)
    if spent.compiles:
        ev.append(f"{spent.compiles} compile{'s' if spent.compiles != 1 else ''} inside the recorded window "
                  f"({', '.join(spent.names)} spans, torch.compile's own), {us(spent.us)} in all")
    f = Finding(RuleId.RECOMPILES, "Recompilation: a compiled frame was compiled again", Severity.ISSUE, ev,
                "run with TORCH_LOGS=recompiles to see which guard failed (a guard: a check torch.compile makes on the inputs before it reuses a compiled graph): shapes, dtypes or devices that change "
                "between calls; mark dynamic dimensions or keep them fixed")
    if not spent.spans or not c.budget.busy:  # recompiled outside the window, or no GPU to idle: nothing to size
        return f
    return c.claimed(f, "compiling (torch.compile's compile spans)", "the window less its compiling, were the "
                     "frame compiled once and reused (the low end: half of the compiling left); a gain for this "
                     "recording, not a steady step's: a longer run that keeps recompiling stops at torch._dynamo's "
                     "recompile limit, 8 by default, and runs the frame eagerly from then on",
                     cpu=spent.spans, cpu_speedup=Speedup.gone(low=2.0), removes=spent.spans,
                     gain_of="the recorded window")


# --- one-time costs (03) -------------------------------------------------------------------------------------


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
    setup = {n: k for n, k in facts.calls_in(c.trace, first.start_us, first.end_us).items()
             if any(w in n for w in ("Malloc", "Attribute", "Occupancy", "GetDevice", "Module", "Library"))}
    if setup:
        ev.append("set-up calls inside it: " + ", ".join(f"{k} x {n}" for n, k in list(setup.items())[:4]))
    extra = first.dur_us - rest
    mine = [r for r in c.summary.artifacts.buffer_requests
            if first.start_us <= r.start_us < first.end_us]  # the profiler's own, inside the step (buffer-request)
    held = sum(r.dur_us for r in mine)
    if mine:
        ev.append(f"the profiler's own Activity Buffer Request{'s' if len(mine) > 1 else ''} inside it: {us(held)}, "
                  f"as long as {min(held / extra, 1.0):.0%} of the step's {us(extra)} beyond the others' median (the "
                  "likely reading: that much of the extra is the profiler's cost, not the program's; schedule(wait=1, "
                  "...) tells, as notebook 03 shows)")
    title = "Wide first step: one-time costs, of the program or of the profiler, in the recording"
    advice = ("run a few untimed warm-up steps before profiling, or use schedule(wait=1, warmup=1, ...) so "
              "start-up stays out of the recorded steps")
    basis = ("the recording's, not the program's: one-time costs leave a recording made after warm-up (the steady "
             "steps do not get faster)")
    x = loading(c)
    if x is not None:
        waited = sum(s.dur_us for s in x.spans if s.step == first.name)
        later = [s.dur_us for s in x.spans if s.step is not None and s.step != first.name]
        usual = statistics.median(later) if later else 0.0
        if waited - usual >= 0.5 * (first.dur_us - rest):  # the extra time is the DataLoader's: not start-up
            ev.append(f"the DataLoader's __next__ took {us(waited)} of it, against {us(usual)} (median) in later "
                      "steps: most of the extra time went to waiting for a batch")
            title = "Wide first step: a wait for data"
            advice = ("the extra time was a wait for data, not start-up; one hypothesis: worker processes had "
                      "drained the batches they prepared ahead (num_workers x prefetch_factor); a longer recording "
                      "tells whether the wait comes back")
            basis = "if the first batch came as fast as the later ones (a longer recording tells whether it does)"
    # most of the extra being the profiler's own buffer request, no fix of the program's wins it back: a note
    severity = Severity.NOTE if mine and held >= 0.5 * extra and x is None else Severity.ISSUE
    f = Finding(RuleId.COLD_START, title, severity, ev, advice)
    # claimed before the DataLoader's steady wait (RULES' order): the first step's extra is its own finding
    return c.claimed(f, "the GPU idle in the first step beyond the others' median", basis,
                     cpu=[(first.start_us, first.end_us)], cpu_at_most_us=first.dur_us - rest,
                     cpu_speedup=Speedup.gone(), gain_of="the recording")


def set_up_calls(t: Trace, b: Budget) -> list[int]:
    """The runtime or driver calls long-call names (none unless the longest holds :data:`LONG_CALL_SHARE` of the
    window): every one of at least :data:`LONG_CALL_MIN_US` and :data:`LONG_CALL_OF` of it."""
    if b.window_us <= 0:
        return []
    calls = [i for i in t.indices((RUNTIME, DRIVER)) if not t.is_gpu(i)
             and not kk.is_synchronize(t.name_of(i)) and "emcpy" not in t.name_of(i)]
    longest = max(calls, key=t.dur.__getitem__, default=None)
    if longest is None or t.dur[longest] < LONG_CALL_SHARE * b.window_us:
        return []
    return [i for i in calls if t.dur[i] >= max(LONG_CALL_MIN_US, LONG_CALL_OF * b.window_us)]


def _long_call(c: Context) -> Finding | None:
    """Runtime or driver calls long enough to hold the GPU idle on their own (not a synchronize, not a copy): set-up
    that a first call pays (the context, loading the GPU code's modules, reserving memory, creating streams). The
    longest names the finding; every call of at least :data:`LONG_CALL_MIN_US` and :data:`LONG_CALL_OF` of the
    window claims its stretch, so that none of them is read as the CPU's work between launches."""
    t, b = c.trace, c.budget
    slow = set_up_calls(t, b)
    if not slow:
        return None
    longest = max(slow, key=t.dur.__getitem__)
    name = t.name_of(longest)
    ops = [t.name_of(p) for p in t.ancestors(longest) if t.group_of(p) == CPU_OP]
    ev = [f"{name} took {us(t.dur[longest])}, {b.share(t.dur[longest]):.0%} of the window"
          + (f", under {ops[-1]}" + (f" ({ops[0]})" if len(ops) > 1 else "") if ops else ""),
          f"{sum(1 for j in t.indices((RUNTIME, DRIVER), name=name))} call(s) of {name} in the trace"]
    others = Counter(t.name_of(i) for i in slow if i != longest)
    if others:
        ev.append("other long set-up calls: " + ", ".join(
            f"{n} x {k} ({us(sum(t.dur[i] for i in slow if t.name_of(i) == k))})" for k, n in others.most_common(4)))
    n_more = sum(others.values())
    title = (f"Set-up calls hold the GPU idle: {name} and {n_more} more, most likely one-time costs" if others else
             f"One call holds the GPU idle: {name}, most likely a one-time cost")
    f = Finding(RuleId.LONG_CALL, title, Severity.ISSUE, ev,
                "a first call of its kind pays for set-up (loading the GPU code's modules, creating the context, "
                "reserving memory): warm up before recording, or move the set-up out of the recorded steps")
    return c.claimed(f, f"the GPU idle during {name}" + (" and the other set-up calls" if others else ""),
                     "one-time costs: gone from a recording made after warm-up",
                     cpu=[(t.ts[i], t.end_of(i)) for i in slow], cpu_speedup=Speedup.gone(), gain_of="the recording")


# --- the optimizer (12) ----------------------------------------------------------------------------------------

_ADAM_STEPS = ("Optimizer.step#Adam.step", "Optimizer.step#AdamW.step")  # torch.optim's spans: the classes with fused=
_LOOP_OPS = ("aten::_foreach_", "aten::_fused_")


def _unfused_optimizer(c: Context) -> Finding | None:
    t = c.trace
    if not any(t.indices(name=n) for n in _ADAM_STEPS):
        return None
    calls = [o for o in sf.optimizer_work(t, None)
             if o.optimizer in ("Adam", "AdamW") and o.implementation in (sf.FOREACH, sf.LOOP) and o.launches > 0]
    if not calls or not any(ln.is_gpu for ln in t.lanes):
        return None
    impl, cls = calls[0].implementation, calls[0].optimizer
    if impl == sf.FOREACH:
        foreach = [f"{n} x {op}" for op, n in calls[0].ops.items() if op.startswith("aten::_foreach_")]
        how = ("the foreach implementation (in one step: " + ", ".join(foreach[:4])
               + (", ..." if len(foreach) > 4 else "") + ")")
    else:
        per_param = [f"{n} x {op}" for op, n in calls[0].ops.items() if not op.startswith(_LOOP_OPS)][:4]
        how = "the for-loop implementation, its ops run for one parameter at a time (in one step: " + ", ".join(per_param) + ")"
    ev = [f"{len(calls)} x Optimizer.step#{cls}.step: {how}",
          f"{statistics.median(o.launches for o in calls):g} pieces of GPU work, {us(statistics.median(o.cpu_us for o in calls))} "
          f"of CPU time and {us(statistics.median(o.gpu_us for o in calls))} of GPU time per step (median)"]
    steps = [i for n in _ADAM_STEPS for i in t.indices(name=n) if not t.is_gpu(i)]
    kernels = [j for i in steps for d in [i] + t.descendants(i) for j in t.gpu_work_of(d)]
    cpu_speed, gpu_speed = FUSED[impl]
    f = Finding(RuleId.UNFUSED_OPTIMIZER, f"{cls} without fused=True: the optimizer step in more kernels than needed",
                Severity.ISSUE, ev,
                f"{cls}(..., fused=True) (see {sf.ADAMW_DOCS}) updates the parameters in fused kernels: fewer "
                "launches and less GPU time per step; measure the step before and after")
    return c.claimed(f, "the optimizer's step: the GPU idle while the CPU ran it, and its GPU work",
                     f"fused=True {_fused_measured(impl)} against the {impl} implementation on the H200 reference set "
                     f"({FUSED_WHERE[impl]}; taken as {cpu_speed.mid:g}x and {gpu_speed.mid:g}x"
                     + (", the pairs' mean" if len(FUSED_PAIRS[impl]) > 1 else "") +
                     f"; the low end: the CPU time cut only {cpu_speed.low:g}x and the GPU time {gpu_speed.low:g}x, "
                     + ("ends chosen so that the gains notebook 16 timed without the profiler on its loop lie inside)"
                        if impl == sf.LOOP else "ends chosen around the measured pair, not measured themselves)"),
                     cpu=_on_launcher(c, steps), cpu_speedup=cpu_speed,
                     gpu=merged((t.ts[j], t.end_of(j)) for j in kernels), gpu_speedup=gpu_speed)


# --- what remains: the CPU's own work between launches (02, 08, 09) ----------------------------------------


def _where_the_cpu_was(c: Context, spans: Spans, top: int = 3) -> str:
    """The ATen ops (outermost) and labels the launcher ran during ``spans``, by the GPU idle time inside each."""
    t = c.trace
    lanes = c.budget.launchers
    by: dict[str, list] = {}
    for i in t.indices((CPU_OP, ANNOTATION)):
        if t.is_gpu(i) or (lanes and t.lane[i] not in lanes) or t.name_of(i).startswith("ProfilerStep#"):
            continue
        if t.group_of(i) == CPU_OP and any(t.group_of(p) == CPU_OP for p in t.ancestors(i)):
            continue  # the outermost op stands for its children
        by.setdefault(t.name_of(i), []).append((t.ts[i], t.end_of(i)))
    # each name's spans merged first: nested or repeated spans of one name count their time once
    acc: Counter = Counter({n: total(intersection(spans, merged(sp))) for n, sp in by.items()})
    acc = Counter({n: v for n, v in acc.items() if v > 0})
    if not acc:
        return ""
    shown = acc.most_common(top)
    nested = sum(v for _, v in shown) > total(spans) * 1.001  # labels inside labels: their times overlap
    return ", ".join(f"{n} {us(v)}" for n, v in shown) + (" (labels nest inside one another, so these overlap)"
                                                          if nested else "")


def _cpu_bound(c: Context) -> Finding | None:
    """What no cause claimed of the GPU's wait for the CPU: the CPU's own work between launches."""
    b = c.budget
    left = c.ledger.left(Side.CPU, filling=False)
    if not left or b.window_us <= 0:
        return None
    if trace_rules.apart(c):
        return None  # the CPU's events all end before the GPU's first work: no gap between GPU work is the CPU's
    gaps = [e - s for s, e in b.waiting_for_cpu]
    claimed = b.waiting_for_cpu_us - total(intersection(left, b.waiting_for_cpu))
    ev = [f"in all the GPU waited for the CPU {us(b.waiting_for_cpu_us)} of the {us(b.window_us)} window "
          f"({b.share(b.waiting_for_cpu_us):.0%}), in {len(gaps):,} gap{'s' if len(gaps) != 1 else ''}"
          + (f" ({sum(1 for g in gaps if 100 <= g < 1000):,} of them 0.1 to 1 ms)" if len(gaps) > 20 else "")
          + (f"; the other findings here explain {us(claimed)} of them (their shares can also hold idle time "
             f"outside these gaps), and the remaining {us(total(left))} are this finding's"
             if claimed > 0.01 * b.window_us else ""),
          f"the GPU ran work {us(b.busy_us)} ({b.share(b.busy_us):.0%})"
          + (f"; it idled {us(b.queued_us)} more with its next work already launched (not the CPU's)"
             if b.queued_us > 0.01 * b.window_us else "")]
    gap_rule = (f"(a gap counts as waiting for the CPU when the GPU's next work was launched during it, or less "
                f"than {us(b.late_us)} before the GPU reached it: ten times the 5th percentile of this trace's delays "
                "from a launch call to its work's start, held within 50 us to 500 us)")
    ev.append(gap_rule)
    fill = total(intersection(c.ledger.left(Side.CPU), b.filling))  # what no cause claimed of it
    if fill > 0.01 * b.window_us and b.busy:
        start = us(b.busy[0][0] - b.lo)
        ev.append((f"not counted: the {us(fill)} before the first GPU work (which starts {start} into the window) "
                   "that no other finding claims" if fill < 0.95 * (b.busy[0][0] - b.lo) else
                   f"not counted: the {us(fill)} before the first GPU work ({start} into the window)")
                  + ", while the CPU made its first launch; in a steady loop the CPU is already ahead of the GPU "
                  "when a step starts, so no step pays this")
    where = _where_the_cpu_was(c, left)
    if where:
        ev.append(f"where the CPU was in the {us(total(left))} no other finding explains: {where}")
    # kernels against their own launch calls (copies and their calls apart: a copy's call is no kernel launch)
    t = c.trace
    kernels = t.on_gpu((KERNEL,))
    durs = [t.dur[j] for j in kernels]
    launch = [t.dur[i] for i in set(t.launchers(kernels)) if i >= 0]
    tiny = bool(durs and launch and len(durs) >= 20 and statistics.median(durs) < statistics.median(launch))
    if tiny:
        pieces = len(facts.gpu_work(t))
        x = loading(c)
        own = b.paced_cpu
        if x is not None:  # the DataLoader's batch-making is no launch's work
            own = difference(own, merged((s.start_us, s.start_us + s.dur_us) for s in x.spans))
        own_us = total(own)
        ev.append(f"{len(durs)} kernels, median {us(statistics.median(durs))}; the call that launches one takes "
                  f"{us(statistics.median(launch))} (median) on the CPU"
                  + (f"; the CPU's own work from the first GPU work on, its waits for the GPU"
                     + (" and the DataLoader's spans" if x is not None else "") + f" left out ({us(own_us)}), comes "
                     f"to {us(own_us / pieces)} for each of the {pieces:,} pieces of GPU work (kernels, copies, "
                     "fills)" if pieces and own_us > 0 else ""))
    phase = graph_phase(c)
    cold = False
    if phase == "capture":
        advice = ("this trace records CUDA-graph capture (see graph-capture): read a trace of the replays for the "
                  "steady step's CPU time")
    elif phase == "replay":
        advice = ("the step already replays CUDA graphs (see graph-replay): what is left between launches is the "
                  "work outside the graphs; give each replay more work (a larger batch), or bring more of the step "
                  "into the graph (the ops between replays), and keep Python out of the hot loop")
    elif c.summary.compiled.any:  # compiled already: fusing by torch.compile is done; its CUDA graphs are not
        advice = ("the step runs compiled code already (its Torch-Compiled Region spans): give each launch more work "
                  "(larger batches or tensors), replay the compiled code as CUDA graphs "
                  "(torch.compile(mode='reduce-overhead'): one launch for many kernels, where the shapes stay fixed; it pays "
                  "off only where it replaces many launches, and notebook 08 times a call where it did not), "
                  "bring more of the step into the compiled graph, and keep Python out of the hot loop")
    else:
        advice = ("give each launch more work (larger batches or tensors), launch fewer kernels (fuse ops with "
                  "torch.compile, CUDA graphs: they pay off only where they replace many launches, since a compiled "
                  "call has a CPU cost of its own, which notebook 08 measures), and keep Python out of the hot loop")
        cold = bool(set_up_calls(t, b))
        if cold:
            # a recording held by one-time set-up: what is left between launches may be set-up too (weights
            # initialised, memory reserved), not a steady loop's launch cost
            advice = ("first record after warm-up (see long-call): this recording holds one-time set-up calls, and "
                      "the CPU's work left here may be set-up too (weights initialised, memory reserved); if a "
                      "recording of steady steps still shows it, " + advice)
    rule, title = ((RuleId.TINY_KERNELS, "Launch-bound: the median kernel is shorter than the CPU's work to launch it")
                   if tiny else
                   (RuleId.CPU_BOUND, "CPU-bound: the GPU waits for the CPU"))
    severity = Severity.ISSUE
    if not b.cpu_paced:  # the GPU's work outlasts the CPU's: these gaps are the frame's remainder, not the step's pace
        ev.insert(0, f"the CPU's own work, {us(b.paced_cpu_us)} from the first GPU work on, is shorter than the GPU's, {us(b.busy_us + b.queued_us)} (its work, and the idle behind work queued long before)"
                     + (f": about even (within {EVEN_MARGIN:.0%}), so the GPU sets the pace by a margin the "
                        "profiler's own cost on the CPU could undo; these gaps are where the GPU waited"
                        if b.about_even else
                        ": the GPU sets the pace, and these gaps are what is left between its work"))
        title = ("Launch-bound in part of the window: the median kernel shorter than the CPU's work to launch it" if tiny else
                 "Gaps between GPU work: the GPU waits for the CPU part of the time")
        severity = Severity.NOTE
    speedup: Speedup | None = OVERHEAD
    label = "the GPU idle while the CPU worked toward its next launch"
    after_last = bool(b.busy) and all(s >= b.busy[-1][1] - 1e-6 for s, _ in b.waiting_for_cpu)
    if after_last:
        # every wait comes after the GPU's last work: no launch was waited for, only the window's end (a script
        # that runs one kernel and then goes on in Python): no gap between two pieces of work shows the pace
        ev.remove(gap_rule)  # (no gap between two pieces of work here)
        ev[0] = (f"the GPU waited {us(b.waiting_for_cpu_us)} of the {us(b.window_us)} window "
                 f"({b.share(b.waiting_for_cpu_us):.0%}) after its last work, until the CPU's last event"
                 + (f" (the other findings here explain {us(claimed)} of it, and the remaining {us(total(left))} "
                    "are this finding's)" if claimed > 0.01 * b.window_us else "")
                 + ": no gap comes between two pieces of GPU work, so this trace cannot say whose pace a loop of it "
                 "would have")
        title = "After the GPU's last work the CPU runs on: no gap between two pieces of GPU work to read"
        severity, speedup = Severity.NOTE, None
        advice = ("record several iterations of the loop (torch.profiler.schedule with warmup and active steps: "
                  "notebook 03) to see whose pace it has")
        label = "the GPU idle after its last work, while the CPU ran on"
    steps = facts.steps(c.trace)
    per_step = len(facts.gpu_work(t)) / len(steps) if steps else None  # every piece: kernels, copies, memsets
    if speedup is not None and per_step is not None and per_step <= FEW_LAUNCHES:
        # nothing to fuse: a compiled call's own CPU cost can outweigh the launches it saves (notebook 08 measures it)
        speedup = None
        ev.append(f"each step runs {per_step:.3g} piece{'s' if per_step != 1 else ''} of GPU work: "
                  + ("the step replays CUDA graphs already, so" if phase == "replay" else
                     "fusing them or a CUDA graph removes a launch or two, while a compiled call has a CPU cost of "
                     "its own, so") + " no gain is sized here; what such a step can take is more work per launch "
                  "(a larger batch or tensors)")
    if speedup is not None and cold:
        # a cold recording's CPU work between launches is no steady step's (the AMD minitoy's first steps): no
        # gain is sized on it (review 34ff)
        speedup = None
        ev.append("this recording holds one-time set-up calls (see long-call), so its CPU work between launches may "
                  "be set-up too rather than a steady step's: no gain is sized here; a recording made after "
                  "warm-up can size it")
    basis = ("if a fix halved the CPU's work between launches (how much fusion, CUDA graphs or larger batches "
             f"remove depends on the model); the low end: that work {OVERHEAD.low:g}x faster (a fifth of it gone); "
             "at best all the GPU idle it claims goes, and the rest of the window stays")
    x = loading(c)
    if x is not None and x.workers and not x.single:
        basis += "; unless the DataLoader's workers then set it (below)"
        # the workers' pace is not in the trace: once the main process is quicker, they may set the step's (notebook
        # 16's fixed loop: its input alone took longer than the whole step, timed without the model)
        ev.append("the DataLoader's workers make the batches in other processes, outside this trace: how fast they "
                  "do is not here, and once the main process is quicker they may set the pace instead (time the "
                  "loop without the model to know, as notebook 16 does)")
    gpu_step = b.busy_us + b.queued_us
    if severity == Severity.ISSUE and not after_last and gpu_step > 0 and b.paced_cpu_us <= PROFILER_MARGIN * gpu_step:
        ev.append(f"the CPU's own work ({us(b.paced_cpu_us)} from the first GPU work on) is at most "
                  f"{PROFILER_MARGIN:g}x the GPU's ({us(gpu_step)}): a margin the profiler's own cost on the CPU can "
                  "make, so without the profiler the GPU may set the pace (notebook 10's flash attention: CPU-bound "
                  "as recorded, as quick as its GPU work when timed without the profiler): a note, not an issue, "
                  "until a timing without the profiler says otherwise")
        severity = Severity.NOTE
        # the headline carries the doubt too: a reader who stops at the first line must not read a plain verdict
        title = (("Launch-bound" if tiny else "CPU-bound") + " as recorded, by a margin the profiler's own cost "
                 "on the CPU can make: without it the GPU may set the pace")
    f = Finding(rule, title, severity, ev, advice, says_little=after_last)
    got = c.claimed(f, label, basis + OVERHEAD_UNTIMED, cpu=left, cpu_speedup=speedup)
    if got is not None and got.gain is not None:
        # no fix of this kind was timed to halve a step's CPU work: a hypothesis, ranked by its low end (rank())
        got.gain = replace(got.gain, hypothesis=True)
    return got


#: said in the basis of the generic CPU-side gain: what the project timed of such fixes
OVERHEAD_UNTIMED = ("; a hypothesis: no fix of this project was timed to halve a step's CPU work (notebook 08's "
                    "compiled 64 x 64 call was slower than eager, with or without CUDA graphs; notebook 11's compiled "
                    "blocks took about as much CPU time per call as eager ones)")


#: in the order they claim the GPU's idle time: the most specific cause first, the rest last
RULES: list[Rule] = [_cold_start, _input_bound, _recompiles, _long_call, hidden_sync, _unfused_optimizer,
                     compile_tax, _cpu_bound]
