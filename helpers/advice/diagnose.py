"""The cheat sheet as code: rules that read any trace and say what to look at next.

Each rule looks for one pattern the series teaches (``docs/cheat-sheet.md``
lists them with the notebook that teaches each) and returns a
:class:`Finding` with its evidence (event names and times from the trace) and
what to try. Like the facts it builds on, this module imports no torch.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass

from .. import facts
from ..facts import memory, roofline, kernel_kinds as kk, step_facts as sf
from .distributed import trace_rules
from .findings import IDLE_NOTE, Context, Finding, Rule, Severity, rank
from .rulebook import RuleId
from ..facts.text import nbytes, part_of, short, us
from ..reader.trace import CPU_OP, DRIVER, MEMCPY, RUNTIME, Trace



def _balance(c: Context) -> Finding | None:
    """The CPU/GPU balance: CPU-bound (the GPU waits for the CPU) or GPU-bound; none for a rank inside collectives."""
    b = c.summary.balance
    if b.verdict is None or b.verdict == facts.IN_COLLECTIVES:
        return None
    evidence = [f"self CPU time {us(b.self_cpu_us)}, GPU time {us(b.device_us)} ({part_of(b.ratio, 'the CPU time')})",
                f"GPU busy {us(b.gpu_busy_us)} of the {us(b.window_us)} window"
                + (f" ({b.gpu_busy_share:.1%})" if b.gpu_busy_share is not None else "")]
    if b.verdict == facts.CPU_BOUND:
        k = c.summary.kinds
        n = sum(x.count for x in k)
        if n:
            med = statistics.median(facts.durations(c.trace))
            evidence.append(f"{n} pieces of GPU work, median {us(med)} each")
        advice = ("give each launch more work (larger batches or tensors), launch fewer kernels (fuse ops with "
                  "torch.compile, CUDA graphs), and keep Python out of the hot loop")
        loading = _input(c)
        if loading is not None and loading.bound:
            # The CPU time is mostly the DataLoader's: launch-side advice would miss the cause.
            evidence.append(f"the DataLoader's __next__ takes {loading.share:.0%} of the recorded steps "
                            "(see input-bound): much of that CPU time is spent preparing data, not launching work")
            advice = ("feed the GPU first (see input-bound: DataLoader workers, pinned memory); fewer or larger "
                      "launches only matter once the input no longer sets the pace")
        return c.sized(Finding(RuleId.CPU_BOUND, "CPU-bound: the GPU waits for the CPU", Severity.ISSUE, evidence,
                               advice), b.window_us - b.gpu_busy_us, "the GPU idle")
    shape = roofline.dominant(roofline.roofline(c.trace))
    if shape is not None:  # memory-bound kernels (fuse them) or compute-bound ones near their peak: not one advice
        evidence.append(roofline.dominant_text(shape))
    if b.gpu_idle_share is not None and b.gpu_idle_share >= IDLE_NOTE:
        evidence.append(f"yet the GPU was idle for {b.gpu_idle_share:.0%} of the window: by the totals the GPU sets "
                        "the pace, but part of the time it waits (the other findings may say for what)")
    return c.sized(Finding(RuleId.GPU_BOUND, "GPU-bound: the GPU's kernels set the pace", Severity.NOTE, evidence,
                           "look at the longest kernels: how near each comes to the GPU's peaks (the roofline in "
                           "summarize), then kernel choice, dtype, shapes, fusion; the CPU side is not what holds "
                           "this run back"), b.gpu_busy_us, "the GPU busy")


def _in_collectives(c: Context) -> Finding | None:
    """A rank whose GPU time is mostly in collectives: sent to the folder view, no CPU/GPU verdict."""
    b = c.summary.balance
    if b.verdict != facts.IN_COLLECTIVES:
        return None
    ev = [f"{us(b.collective_us)} of the GPU's {us(b.gpu_busy_us)} busy time is in collectives "
          f"({b.collective_us / b.gpu_busy_us:.0%}); {us(b.collective_exposed_us)} of it with no other GPU work "
          "beside it",
          "a collective's kernel runs from when this rank enters it until every rank has: its time holds the wait for "
          "the slowest rank as well as the transfer, and one rank's trace cannot tell them apart",
          f"so no CPU- or GPU-bound verdict: this rank's own balance (GPU time {b.ratio:.0%} of its CPU time, "
          "collectives left out) is not what sets its pace"]
    return c.sized(Finding(RuleId.INSIDE_COLLECTIVES, "Inside collectives: this rank's GPU mostly waits for the other "
                           "ranks or the network", Severity.ISSUE, ev,
                           "diagnose the folder of every rank's trace (python -m helpers diagnose FOLDER): it names "
                           "the rank the others wait for, if any, and what remains once it is fixed"),
                   b.collective_exposed_us, "collectives with nothing beside them")


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
    lo, hi = first.start_us, first.end_us
    setup = {n: k for n, k in facts.calls_in(c.trace, lo, hi).items()
             if any(w in n for w in ("Malloc", "Attribute", "Occupancy", "GetDevice", "Module", "Library"))}
    if setup:
        ev.append("set-up calls inside it: " + ", ".join(f"{k} x {n}" for n, k in list(setup.items())[:4]))
    advice = ("run a few untimed warm-up steps before profiling, or use schedule(wait=1, warmup=1, ...) so "
              "start-up stays out of the recorded steps")
    title = "Wide first step: one-time costs, of the program or of the profiler, in the recording"
    loading = _input(c)
    if loading is not None:
        waited = sum(s.dur_us for s in loading.spans if s.step == first.name)
        later = [s.dur_us for s in loading.spans if s.step is not None and s.step != first.name]
        usual_wait = statistics.median(later) if later else 0.0
        if waited - usual_wait >= 0.5 * (first.dur_us - rest):
            # The extra time is the DataLoader's: warm-up advice would miss it.
            ev.append(f"the DataLoader's __next__ took {us(waited)} of it, against {us(usual_wait)} (median) in "
                      "later steps: most of the extra time went to waiting for a batch")
            title = "Wide first step: a wait for data"
            advice = ("the extra time was a wait for data, not start-up (see input-bound when it fires); one "
                      "hypothesis: worker processes had drained the batches they prepared ahead "
                      "(num_workers x prefetch_factor); a longer recording tells whether the wait comes back")
    return c.sized(Finding(RuleId.COLD_START, title, Severity.ISSUE, ev, advice), first.dur_us - rest,
                   "the first step beyond the others' median")


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
    return Finding(RuleId.OCCUPANCY_QUERIES, "Occupancy queries: a library working out how its kernels fit an SM",
                   Severity.NOTE, ev, advice)


def _profiler_flush(c: Context) -> Finding | None:
    cs = c.summary.artifacts.closing_sync
    b = c.summary.balance
    if not cs or b.window_us <= 0 or cs.dur_us < 0.05 * b.window_us:
        return None
    idle = cs.idle_share
    ev = [f"last {cs.name} took {us(cs.dur_us)} ({cs.dur_us / b.window_us:.0%} of the window)"
          + (f", GPU idle for {idle:.0%} of it" if idle is not None else "")]
    if idle is not None and idle < 0.5:
        meaning = ("the GPU was busy for most of it: the CPU had run ahead and waited for queued work; that wait is "
                   "real GPU time, not the profiler's")
    else:
        meaning = ("the GPU was idle for most of it, so the time did not go to waiting for kernels: it is not your "
                   "GPU work; one hypothesis is the profiler's own work as it stops")
    return Finding(RuleId.PROFILER_FLUSH, "Long synchronize at the end: the profiler's own synchronize before it stops",
                   Severity.NOTE, ev, f"do not count it against your code: {meaning}")


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
    return c.sized(Finding(RuleId.ADDMM_BIAS_COPY, "Device-to-device copy before a GEMM: addmm copying its bias",
                   Severity.NOTE,
                   [f"{len(found)} x {t.name_of(found[0])}" + (f" of {nbytes(size)}" if size else "")
                    + f" under aten::addmm, {us(total)} in all",
                    "with a full-matrix bias, ATen's CUDA addmm copies it into the output, then the GEMM adds its "
                    "product onto it"],
                   "expected when the bias is a full matrix (torch.addmm, or torch.compile's rewrite of matmul + add); "
                   "a 1-D bias, as nn.Linear has, can go to the GEMM's bias epilogue with no copy"),
                   total, "the bias copies on the GPU")


def _buffer_request(c: Context) -> Finding | None:
    bufs = c.summary.artifacts.buffer_requests
    if not bufs:
        return None
    return Finding(RuleId.PROFILER_BUFFER, "Activity Buffer Request: the profiler allocating its own buffers",
                   Severity.NOTE,
                   [f"{b.name} on '{b.lane}', {us(b.dur_us)}" for b in bufs[:3]],
                   "profiler overhead, not your code: schedule(wait=1, warmup=1, ...) moves it out of the "
                   "recorded steps")


def _op_of(t: Trace, j: int) -> int:
    """The innermost ATen op around the launch of kernel ``j``, or -1."""
    i = t.launch_of(j)
    return next((p for p in t.ancestors(i) if t.group_of(p) == CPU_OP), -1) if i >= 0 else -1


def _variance(c: Context) -> Finding | None:
    """Launches of the same kernel doing the same work (same name, grid, block and op input shapes and types) that
    differ in time. The reader keeps no op shapes: they are read again from the file, for the candidates only.

    Collectives are left out: their time holds the wait for other ranks, not a kernel's own variance.
    """
    t = c.trace
    candidates = []
    for k in c.summary.kernels:
        if k.kind in (kk.COPY, kk.FILL, kk.COLLECTIVE):  # copies vary with what they copy from (pageable memory...)
            continue
        if k.count >= 5 and k.median_us >= 5 and k.max_us > 1.1 * k.median_us:
            candidates.append((k, [j for j in t.indices(name=k.name) if t.is_gpu(j)]))
    if not candidates:
        return None
    ops = {j: _op_of(t, j) for _, js in candidates for j in js}
    from ..facts.op_shapes import op_shapes

    shapes = op_shapes(t, sorted({o for o in ops.values() if o >= 0}))
    no_shapes = shapes.missing
    worst = None
    for k, js in candidates:
        groups: dict[tuple, list[float]] = {}
        for j in js:
            a = t.args.get(j, {})
            s = None if no_shapes else shapes.by_op.get(ops[j])
            key = (str(a.get("grid")), str(a.get("block")),
                   None if s is None else json.dumps(s.dims), None if s is None else json.dumps(s.types))
            groups.setdefault(key, []).append(t.dur[j])
        for key, durs in groups.items():
            if len(durs) < 5:
                continue
            med = statistics.median(durs)
            if med < 5 or max(durs) <= 1.1 * med:
                continue
            spread = max(durs) / med - 1
            if worst is None or spread > worst[0]:
                worst = (spread, k, key, durs, med)
    if worst is None:
        return None
    spread, k, key, durs, med = worst
    grid, block, dims, _types = key
    same = ([f"grid {grid}, block {block}"] if grid != "None" else []) + \
        ([f"inputs {dims}"] if dims is not None else [])
    ev = [f"{len(durs)} x {short(k.name, 60)} with the same " + (", ".join(same) or "name")
          + f": median {us(med)}, min {us(min(durs))}, max {us(max(durs))} (+{spread:.0%} over the median)"]
    if dims is None:
        ev.append("their ops' input shapes could not be compared: " + (no_shapes or "no Input Dims for these ops")
                  .removeprefix("not sized: "))
    if len(durs) < k.count:
        ev.append(f"compared only with each other: the trace holds {k.count} launches of that name in all, "
                  "some doing other work (another grid or other shapes)")
    return c.sized(Finding(RuleId.KERNEL_VARIANCE, "The same kernel doing the same work with different durations",
                           Severity.NOTE, ev,
                           "quote the median and study the outliers apart; possible causes to test: clocks, heat, "
                           "power management, driver housekeeping (the article's list), other work on the GPU"),
                   sum(d - med for d in durs if d > med), "the slower launches' time beyond the median")


#: a compiled call is a tax when its traced CPU time is more than this many times the GPU work it launches
COMPILE_TAX_FACTOR = 2.0


def _compile(c: Context) -> Finding | None:
    comp = c.summary.compiled
    if not comp.any:
        return None
    again = facts.recompiles(comp.regions)
    if again:
        ev = [f"{comp.regions[r]} x {r} (the second number counts compiles of the same frame)" for r in again]
        spent = facts.compile_time(c.trace)
        if spent.compiles:
            # Sized by the compiling itself: while Dynamo and Inductor run on the CPU, nothing is launched.
            ev.append(f"{spent.compiles} compile{'s' if spent.compiles != 1 else ''} inside the recorded window "
                      f"({', '.join(spent.names)} spans, torch.compile's own), {us(spent.us)} in all: "
                      f"{spent.share:.0%} of the window")
        f = Finding(RuleId.RECOMPILES, "Recompilation: a compiled frame was compiled again", Severity.ISSUE, ev,
                    "run with TORCH_LOGS=recompiles to see which guard failed: shapes, dtypes or devices that change "
                    "between calls; mark dynamic dimensions or keep them fixed")
        return c.sized(f, spent.us, "compiling (torch.compile's compile spans)") if spent.compiles else f
    frames = {r.split(": ")[-1].split("/")[0] for r in comp.regions}
    if len(frames) > 1:
        return Finding(RuleId.GRAPH_BREAKS, "Several compiled frames: the function was split by graph breaks",
                       Severity.NOTE,
                       [f"{n} x {r}" for r, n in sorted(comp.regions.items())],
                       "TORCH_LOGS=graph_breaks names each break; code between graphs runs eagerly")
    hashes = comp.graph_hashes
    ev = [f"{n} x CompiledFxGraph {h}" for h, n in hashes.items()]
    region = next(iter(comp.regions), None)
    t = c.trace
    calls = t.indices((CPU_OP,), name=region) if region else []
    cpu = [t.dur[i] for i in calls]
    gpu = [facts.gpu_time_under(t, i) for i in calls]
    # Twice, not merely more: under the profiler a compiled call's CPU time is several times its own (notebook 08
    # measures it), so a call whose GPU work is close to its traced CPU time is not shown to be a tax.
    if cpu and gpu and COMPILE_TAX_FACTOR * statistics.median(gpu) < statistics.median(cpu):
        ev.append(f"each '{region}' call takes {us(statistics.median(cpu))} on the CPU and launches "
                  f"{us(statistics.median(gpu))} of GPU work (more than {COMPILE_TAX_FACTOR:g}x)")
        return c.sized(Finding(RuleId.COMPILE_TAX, "Compiled region costs more CPU time than the GPU work it launches",
                               Severity.ISSUE, ev,
                               "confirm it without the profiler first (torch.utils.benchmark.Timer: the profiler "
                               "inflates CPU time per op); then compile larger graphs, batch the work, or try "
                               "mode='reduce-overhead' (CUDA graphs) and measure"),
                       sum(max(a - b, 0.0) for a, b in zip(cpu, gpu)), "compiled calls' CPU time beyond their GPU work")
    return Finding(RuleId.COMPILE_CACHE_HITS, "torch.compile: one graph, reused every call", Severity.NOTE,
                   [e + " (the same graph every call: cache hits)" for e in ev],
                   "nothing to fix; read the generated code under /tmp/torchinductor_<user>/ to see what was fused")


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
    return c.sized(Finding(RuleId.TINY_KERNELS, "Kernels shorter than the calls that launch them", Severity.ISSUE,
                           [f"{len(durs)} pieces of GPU work, median {us(med)}; a launch call takes "
                            f"{us(launch_cost)} (median) on the CPU"],
                           "fuse small ops (torch.compile), batch work, or capture the sequence in a CUDA graph"),
                   sum(launch), "launch calls on the CPU")


# --- volume two: the training step (12), memory (13), the input pipeline (14) -------------------

SYNC_DEBUG = "https://docs.pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html"
DATALOADER_DOCS = "https://docs.pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading"
PINNED_DOCS = "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html"
TF32_DOCS = "https://docs.pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html"
TF32_NOTE = "https://docs.pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
#: the DataLoader's share of the recorded steps at or above which a run is input-bound
INPUT_BOUND_SHARE = 0.25
#: ... when the GPU is idle for at least this share of the DataLoader's time
INPUT_IDLE_SHARE = 0.5
#: pageable copies to the GPU smaller than this, in all, are not worth a finding (a label tensor, a scalar)
PAGEABLE_BYTES = 1 << 20
#: float32 GEMMs on the CUDA cores at or above this share of GEMM time make a finding
FP32_GEMM_SHARE = 0.25


@dataclass
class _Loading:
    spans: list[sf.LoaderSpan]
    loader_us: float  # DataLoader time inside the recorded steps (or the window, without steps)
    total_us: float  # the recorded steps' time (or the window)
    idle_us: float | None  # GPU idle time inside those spans

    @property
    def share(self) -> float:
        return self.loader_us / self.total_us if self.total_us > 0 else 0.0

    @property
    def idle_share(self) -> float | None:
        return self.idle_us / self.loader_us if self.idle_us is not None and self.loader_us > 0 else None

    @property
    def bound(self) -> bool:
        idle = self.idle_share
        return self.share >= INPUT_BOUND_SHARE and idle is not None and idle >= INPUT_IDLE_SHARE


def _input(c: Context) -> _Loading | None:
    """The DataLoader's time against the recorded steps', shared by input-bound and overhead-bound."""
    def compute() -> _Loading | None:
        spans = sf.dataloader_spans(c.trace)
        if not spans:
            return None
        st = c.summary.steps
        inside = [s for s in spans if s.step is not None] if st else spans
        total = sum(x.dur_us for x in st) if st else c.summary.balance.window_us
        idle = [s.gpu_idle_us for s in inside]
        return _Loading(inside, sum(s.dur_us for s in inside), total,
                        None if any(x is None for x in idle) else sum(idle))
    return c.once("input", compute)


def _input_bound(c: Context) -> Finding | None:
    loading = _input(c)
    if loading is None or not loading.bound:
        return None
    where = "the recorded steps" if c.summary.steps else "the recorded window"
    ev = [f"the DataLoader's __next__ took {us(loading.loader_us)} of the {us(loading.total_us)} of {where} "
          f"({loading.share:.0%}); the GPU was idle for {loading.idle_share:.0%} of that time"]
    per_step = [f"{s.step}: {us(s.dur_us)}" + (f" ({s.step_share:.0%} of it)" if s.step_share is not None else "")
                for s in loading.spans[:4]]
    if per_step:
        ev.append("per step: " + ", ".join(per_step) + (" ..." if len(loading.spans) > 4 else ""))
    names = {s.name for s in loading.spans}
    if any("_SingleProcessDataLoaderIter" in n for n in names):
        ev.append("_SingleProcessDataLoaderIter: the batches are made in the main process (num_workers=0), "
                  "between the steps")
    return c.sized(Finding(RuleId.INPUT_BOUND, "Input-bound: the GPU waits for the DataLoader", Severity.ISSUE, ev,
                   "prepare batches while the GPU trains: DataLoader(num_workers=N, persistent_workers=True) makes "
                   "them in other processes; make each sample cheaper (decode once, augment on the GPU); then check "
                   f"that the DataLoader span shrinks to a queue read ({DATALOADER_DOCS})"),
                   loading.loader_us, "the DataLoader's __next__")


def _syncs(c: Context) -> list[sf.Sync]:
    return c.once("syncs", lambda: sf.hidden_syncs(c.trace))


def _sync_text(group: list[sf.Sync]) -> str:
    s = group[0]
    what = s.cause_op or s.op or s.calls[-1]
    where = f" under '{s.annotation}'" if s.annotation else ""
    copy = ""
    if s.copy:
        sizes = sorted({x.copy_bytes for x in group if x.copy_bytes is not None})
        size = "" if not sizes else f" of {nbytes(sizes[0])}" + (f" to {nbytes(sizes[-1])}" if len(sizes) > 1 else "")
        copy = f", {s.copy}{size}"
    idle = [x.gpu_idle_after_us for x in group if x.gpu_idle_after_us is not None]
    after = f"; then the GPU idles {us(statistics.median(idle))} (median) until the CPU launches more" if idle else ""
    usual = f" (usually {s.cause})" if s.cause else ""
    mean = us(sum(x.dur_us for x in group) / len(group))
    return f"{len(group)} x {what}{where}: {' + '.join(s.calls)}{copy}, {mean} on average{after}{usual}"


def _hidden_sync(c: Context) -> Finding | None:
    syncs = [s for s in _syncs(c) if not s.explicit]
    if not syncs:
        return None
    groups: dict[tuple, list[sf.Sync]] = {}
    for s in syncs:
        groups.setdefault((s.cause_op or s.op or s.calls[-1], s.annotation, s.copy), []).append(s)
    ordered = sorted(groups.values(), key=lambda g: -sum(x.dur_us for x in g))
    steps_with = {s.step for s in syncs if s.step}
    if c.summary.steps:
        head = (f"{len(syncs)} waits for the GPU inside the recorded steps "
                f"(in {len(steps_with)} of {len(c.summary.steps)} steps)")
    else:  # no ProfilerStep#N: the waits are counted over the whole trace, the profiler's closing one left out
        head = f"{len(syncs)} waits for the GPU in the trace (it has no profiler steps to place them in)"
    ev = [head + f", {us(sum(s.dur_us for s in syncs))} in the calls that wait"]
    ev += [_sync_text(g) for g in ordered[:5]]
    tips = []
    causes = {s.cause_op for s in syncs}
    if "aten::_local_scalar_dense" in causes or "aten::is_nonzero" in causes:
        tips.append("keep values such as the loss on the GPU and read them (.item()) every N steps, not every step; "
                    "decide with tensor ops (torch.where) instead of `if tensor:`")
    if "aten::nonzero" in causes or "aten::masked_select" in causes:
        tips.append("replace boolean-mask indexing, whose output size only the GPU knows, by fixed-size ops "
                    "(torch.where, multiplying by the mask)")
    if any(s.copy and sf._host_memory(s.copy) is not None for s in syncs):
        tips.append("copy to the GPU from pinned memory with .to(device, non_blocking=True)")
    if any(s.copy and sf._is_to_host(s.copy) for s in syncs):
        tips.append("copy results to the CPU less often, or into pinned memory with non_blocking=True and read them "
                    "after a later synchronize")
    tips.append(f"torch.cuda.set_sync_debug_mode('warn') names each line that synchronizes ({SYNC_DEBUG}; "
                f"when a copy call waits: {sf.SYNC_BEHAVIOUR})")
    where = " inside the step" if c.summary.steps else ""  # no steps: no step to say it is in
    # What the waits cost: the GPU's idle time after each (the CPU launches nothing while it waits, then the GPU
    # waits for it); where the trace cannot say, the waits' own length.
    idle = [s.gpu_idle_after_us for s in syncs if s.gpu_idle_after_us is not None]
    cost, of = ((sum(idle), "the GPU idle after the waits") if idle else
                (sum(s.dur_us for s in syncs), "the calls that wait"))
    return c.sized(Finding(RuleId.HIDDEN_SYNC, f"Hidden synchronizations: the CPU waits for the GPU{where}",
                           Severity.ISSUE, ev, "; ".join(tips)), cost, of)


def _pageable_copies(c: Context) -> Finding | None:
    copies = sf.h2d_copies(c.trace)
    pageable = [x for x in copies if x.memory == "pageable"]
    size = sum(x.bytes or 0 for x in pageable)
    if not pageable or size < PAGEABLE_BYTES:
        return None
    ev = []
    for x in pageable:
        rate = f", {x.gb_per_s:.1f} GB/s" if x.gb_per_s is not None else ""
        ev.append(f"{x.count} x {x.name}: {nbytes(x.bytes or 0)} in {us(x.total_us)} on the GPU{rate}")
    for x in copies:
        if x.memory == "pinned" and x.gb_per_s is not None:
            ev.append(f"against {x.count} x {x.name} in the same trace: {x.gb_per_s:.1f} GB/s")
    waits = [s for s in _syncs(c) if s.copy and "Pageable -> Device" in s.copy]
    if waits:
        ev.append(f"{len(waits)} of them made the CPU wait ({' + '.join(waits[0].calls)} under "
                  f"{waits[0].cause_op or waits[0].op})")
    return c.sized(Finding(RuleId.PAGEABLE_COPIES, "Copies to the GPU from pageable memory", Severity.ISSUE, ev,
                   "pin the batches (DataLoader(pin_memory=True), which pins in a background thread) and copy with "
                   ".to(device, non_blocking=True), so that the copy goes by DMA without a staging buffer and the CPU "
                   f"need not wait; pinning each tensor yourself costs time too ({PINNED_DOCS}; {sf.SYNC_BEHAVIOUR})"), sum(x.total_us for x in pageable), "the copies from pageable memory, on the GPU")


def _fp32_gemms(c: Context) -> Finding | None:
    t = c.trace
    cc = sf.compute_capability(t)
    if cc is None or cc < (8, 0) or not sf.is_nvidia(t):  # TF32 tensor cores came with sm_80
        return None
    groups = sf.gemm_precision(t, c.summary.kernels)
    simt = next((g for g in groups if g.math == kk.FP32_SIMT), None)
    if simt is None or simt.share < FP32_GEMM_SHARE:
        return None
    total = sum(g.total_us for g in groups)
    ev = [f"{simt.count} GEMM kernels, {us(simt.total_us)} of {us(total)} GEMM time ({simt.share:.0%}), have "
          f"names that say float32 on the CUDA cores (SIMT, FFMA), e.g. {short(simt.names[0], 70)}",
          f"this GPU ({t.device_name}, compute capability {cc[0]}.{cc[1]}) has tensor cores that run TF32, "
          "from compute capability 8.0 on"]
    tf32 = next((g for g in groups if g.math == kk.TF32), None)
    if tf32:
        ev.append(f"{tf32.count} other GEMM kernels use TF32 ({us(tf32.total_us)}): TF32 is allowed for some "
                  "ops only (cuDNN's convolutions allow it by default, cuBLAS's matmuls do not)")
    names = set(simt.names)
    ops = Counter(_op_chain(t, j) for j in facts.gpu_work(t) if t.name_of(j) in names)
    if ops:
        ev.append("launched under " + ", ".join(f"{op} x {n}" for op, n in ops.most_common(4)))
    return c.sized(Finding(RuleId.FP32_GEMM, "float32 GEMMs without tensor cores on a GPU that has them",
                   Severity.ISSUE, ev,
                   "likely TF32 is off for matmuls (PyTorch's default): if float32's last bits do not matter, "
                   "torch.set_float32_matmul_precision('high') lets cuBLAS use TF32 tensor cores, or run the forward "
                   "under torch.autocast in a 16-bit dtype; if these GEMMs were meant to be 16-bit, look where "
                   f"their inputs became float32 (the ops above) ({TF32_DOCS}; {TF32_NOTE})"),
                   simt.total_us, "float32 GEMMs on the CUDA cores")


def _op_chain(t: Trace, j: int) -> str:
    """The innermost ATen op around the launch of GPU work ``j`` and, if another, the outermost one."""
    i = t.launch_of(j)
    if i < 0:
        return "no launch call in the trace"
    ops = [t.name_of(p) for p in t.ancestors(i) if t.group_of(p) == CPU_OP]
    if not ops:
        return "no op"
    return ops[0] if len(ops) == 1 else f"{ops[0]} (in {ops[-1]})"


_LOOP_OPS = ("aten::_foreach_", "aten::_fused_")


_ADAM_STEPS = ("Optimizer.step#Adam.step", "Optimizer.step#AdamW.step")  # torch.optim's spans: the classes with fused=


def _unfused_optimizer(c: Context) -> Finding | None:
    t = c.trace
    if not any(t.indices(name=n) for n in _ADAM_STEPS):
        return None
    calls = [o for o in sf.optimizer_work(t, None)
             if o.optimizer in ("Adam", "AdamW") and o.implementation in (sf.FOREACH, sf.LOOP) and o.launches > 0]
    if not calls or not any(ln.is_gpu for ln in t.lanes):
        return None
    impl = calls[0].implementation
    cls = calls[0].optimizer
    launches = statistics.median(o.launches for o in calls)
    gpu = statistics.median(o.gpu_us for o in calls)
    if impl == sf.FOREACH:
        foreach = [f"{n} x {op}" for op, n in calls[0].ops.items() if op.startswith("aten::_foreach_")]
        how = "the foreach implementation (" + ", ".join(foreach[:4]) + (", ..." if len(foreach) > 4 else "") + ")"
    else:
        per_param = [f"{n} x {op}" for op, n in calls[0].ops.items() if not op.startswith(_LOOP_OPS)][:4]
        how = "the for-loop implementation, ops per parameter (" + ", ".join(per_param) + ")"
    ev = [f"{len(calls)} x Optimizer.step#{cls}.step: {how}",
          f"{launches:g} pieces of GPU work and {us(gpu)} of GPU time per step (median)"]
    steps_gpu = c.summary.balance.device_us
    if steps_gpu > 0:
        ev.append(f"{sum(o.gpu_us for o in calls) / steps_gpu:.0%} of the trace's GPU time")
    return c.sized(Finding(RuleId.UNFUSED_OPTIMIZER,
                           f"{cls} without fused=True: the optimizer step in more kernels than needed",
                           Severity.ISSUE, ev,
                   f"{cls}(..., fused=True) (see {sf.ADAMW_DOCS}) updates the parameters in fused kernels: likely fewer "
                   "launches and less GPU time per step; measure the step before and after"),
                   sum(o.gpu_us for o in calls), "the optimizer's GPU work")


# --- memory (13) -------------------------------------------------------------------------------

CDIST_DOCS = "https://docs.pytorch.org/docs/stable/generated/torch.cdist.html"
CHECKPOINT_DOCS = "https://docs.pytorch.org/docs/stable/checkpoint.html"
#: one allocation holding at least this share of its GPU's peak allocated memory is a spike (a threshold chosen,
#: not measured: on the H200 reference set the largest single allocation of notebook 13's training steps is under a
#: quarter of their peak, activations spread over many tensors; one temporary half the peak is another shape)
SPIKE_SHARE = 0.4
#: ... and at least this many bytes: a large share of a small peak is no problem on any GPU
SPIKE_BYTES = 256 << 20


def _memory_spike(c: Context) -> Finding | None:
    """One allocation (or one op's allocations) holding a large share of a GPU's peak allocated memory.

    Unsized in time: memory is not time, and what the spike costs (a smaller batch, an out-of-memory error) is not
    in the trace. The GPU time of the ops that made it is evidence, not a size.
    """
    t = c.trace
    big = memory.large_allocations(t, SPIKE_SHARE, SPIKE_BYTES)
    if not big:
        return None
    peaks = {p.device: p for p in memory.memory_peaks(t)}
    top = max(big, key=lambda a: a.bytes)
    pk = peaks[top.device]
    ops = Counter(a.op or "no op around it" for a in big if a.device == top.device)
    sizes = sorted({a.bytes for a in big if a.device == top.device})
    size = nbytes(sizes[0]) if len(sizes) == 1 else f"{nbytes(sizes[0])} to {nbytes(sizes[-1])}"
    n = sum(ops.values())
    ev = [f"{n} allocation{'s' if n != 1 else ''} of {size} on {top.device}, the largest {top.share_of_peak:.0%} of "
          f"its peak allocated memory ({nbytes(pk.peak_allocated)}); made under "
          + ", ".join(f"{op} x {k}" for op, k in ops.most_common())]
    where = ", ".join(x for x in (pk.peak_allocated_step, f"in '{pk.peak_allocated_in}'" if pk.peak_allocated_in
                                  else None) if x)
    if pk.allocated_before > 0:
        ev.append(f"{nbytes(pk.allocated_before)} was allocated before the first recorded allocation (what the "
                  f"program held when recording began); the largest allocation alone is "
                  f"{top.bytes / pk.allocated_before:,.0f}x that")
    if where:
        ev.append(f"the peak is reached in {where}")
    calls = {a.op_index for a in big if a.device == top.device and a.op_index >= 0}
    busy = c.summary.balance.gpu_busy_us
    gpu = sum(facts.gpu_time_under(t, i) for i in calls)
    if calls and busy > 0:
        ev.append(f"the kernels of those {len(calls)} op calls ran {us(gpu)}, {gpu / busy:.0%} of the GPU's busy time")
    return Finding(RuleId.MEMORY_SPIKE, "Memory spike: one allocation holds a large share of the peak",
                   Severity.ISSUE, ev,
                   "avoid materialising the large temporary: compute it in chunks (a loop over blocks of rows, each "
                   "temporary a fraction of the size), or use an op that never builds it: for distances "
                   "torch.cdist, whose default computes Euclidean distances through a matrix product beyond 25 rows "
                   f"({CDIST_DOCS}); torch.compile can fuse an elementwise chain into the reduction that follows it; "
                   f"for activations kept for backward, activation checkpointing ({CHECKPOINT_DOCS})")


RULES: list[Rule] = [_input_bound, _balance, _in_collectives, _cold_start, _occupancy_queries, _profiler_flush,
                     _bias_copy, _buffer_request, _variance, _compile, _tiny_kernels, _hidden_sync, _pageable_copies,
                     _fp32_gemms, _unfused_optimizer, _memory_spike]


def diagnose(trace: Trace) -> list[Finding]:
    """Every cheat-sheet rule that applies to this trace, ranked by what it accounts for (:func:`rank`)."""
    ctx = Context(trace, facts.summarize(trace))
    found = [f for f in (rule(ctx) for rule in RULES + trace_rules()) if f is not None]
    if any(f.rule == RuleId.INSIDE_COLLECTIVES for f in found):  # the same time, said better for one rank
        found = [f for f in found if f.rule != RuleId.COMMUNICATION_BOUND]
    return rank(found)


def first_line(findings: list[Finding]) -> str:
    """The one thing to look at first, in a line."""
    if not findings:
        return "No rule of the cheat sheet applies to this trace."
    f = findings[0]
    return f"Look first at: {f.title}" + (f" ({f.amount})" if f.amount else "") + "."


def text(findings: list[Finding]) -> str:
    if not findings:
        return first_line(findings)
    return first_line(findings) + "\n\n" + "\n\n".join(f.text() for f in findings)
