"""The rules about the recording itself: what it left out, what the profiler added, and what phase of a program it
holds (a CUDA graph's capture or its replays, a rank inside its collectives).

They claim no time on the ledger, but for the compile tax (the CPU's time in compiled calls beyond their GPU
work): they say how to read the time the other rules divide.
"""

from __future__ import annotations

import statistics

from .. import facts
from ..facts import kernel_kinds as kk
from ..facts import step_facts as sf
from ..facts.text import us
from ..facts.budget import FILL_MAX_US
from ..facts.collectives import CPU_COLLECTIVE_PREFIXES, unrecorded_us
from ..reader.spans import clipped, difference, intersection, merged, total
from ..reader.trace import ANNOTATION, CPU_OP, DRIVER, RUNTIME, Trace
from .findings import Context, Finding, Rule, Severity
from .ledger import Speedup
from .rulebook import RuleId

#: launch calls whose name says they start GPU work (CUDA's and HIP's, runtime and driver)
LAUNCH_WORDS = ("LaunchKernel", "launchKernel", "GraphLaunch", "ModuleLaunch", "LaunchCooperative")
#: calls that say a CUDA (or HIP) graph is being captured (not ...GetCaptureInfo or ...IsCapturing: PyTorch's caching
#: allocator asks those on every allocation, captured or not)
CAPTURE_CALLS = ("BeginCapture", "EndCapture", "GraphInstantiate")
#: labels that say so (vLLM's and others' record_function names around a capture)
CAPTURE_LABELS = ("capture_", "cuda_graph_capture", "CUDAGraph.capture")
GRAPH_LAUNCH = ("cudaGraphLaunch", "hipGraphLaunch")
#: a GPU left idle with its next work launched this share of the window or more gets a word on it
QUEUED_SHARE = 0.05
#: a compiled call is a tax when its traced CPU time is more than this many times the GPU work it launches
COMPILE_TAX_FACTOR = 2.0


# --- what the recording holds ------------------------------------------------------------------------------


#: a trace with launches and at most this many pieces of GPU work holds too little to read a step's pace
TOO_LITTLE = 2
#: a trace with no GPU work whose CPU threads record no op for at least this share of its window is told so (exam
#: 9's rank 0: two thirds of it); a few percent of any trace falls between ops
UNRECORDED_SHARE = 0.2


def _not_recorded(c: Context) -> Finding | None:
    """GPU work launched but none recorded, or GPU work recorded and no CPU op: a recording with an activity off."""
    t = c.trace
    calls = t.indices((RUNTIME, DRIVER))
    launches = [i for i in calls if any(w in t.name_of(i) for w in LAUNCH_WORDS)]
    copies = [i for i in calls if "emcpy" in t.name_of(i)]
    work = facts.gpu_work(t)
    if (launches or copies) and not work:
        ranges = c.summary.counter_ranges
        ev = [f"{len(launches)} launch calls and {len(copies)} copy calls on the CPU, no kernel, copy or fill on any "
              "GPU lane: the GPU's side of the timeline is not in the trace, so its idle time cannot be read (an "
              "empty GPU timeline here means nothing was recorded, not a GPU that sat idle)"]
        if ranges is not None:  # CUPTI ran, in its range-profiling mode: counters per kernel, no timeline
            ev.append(f"the trace holds {ranges.count} counter ranges of CUPTI's range profiler ({ranges.kernels} "
                      "kernels' hardware counters, summarize lists them): this run was profiled for hardware "
                      "counters (torch.profiler._ExperimentalConfig's profiler_metrics), and its trace holds no "
                      "kernel timeline beside them")
            advice = ("for the GPU's time, profile again with activities=[ProfilerActivity.CPU, "
                      "ProfilerActivity.CUDA] and without the counter configuration; keep this trace for its counters")
        else:
            advice = ("profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (CUPTI, or ROCm's "
                      "roctracer, must be available to the process), and check the trace holds GPU lanes")
        return Finding(RuleId.NOT_RECORDED, "GPU activity not recorded: launches, but no kernel on a GPU lane",
                       Severity.NOTE, ev, advice)
    if launches and 0 < len(work) <= TOO_LITTLE:
        names = sorted({t.name_of(j) for j in work})
        f = Finding(RuleId.NOT_RECORDED, f"Too little GPU work recorded to read: {len(work)} piece"
                    f"{'s' if len(work) != 1 else ''} of GPU work in the trace", Severity.NOTE,
                    [f"{len(work)} piece{'s' if len(work) != 1 else ''} of GPU work "
                     f"({', '.join(n[:60] for n in names)}; {us(sum(t.dur[j] for j in work))} in all) and "
                     f"{len(launches)} launch call{'s' if len(launches) != 1 else ''}: so little GPU work says "
                     "nothing about a step's pace; the findings below read what little there is"],
                    "record several steps of the loop after warm-up (torch.profiler.schedule with warmup and "
                    "active steps: notebook 03), so that the trace holds the steady step's GPU work")
        f.leads = True
        return f
    if not work and not launches:  # a CPU-only trace: how much of it the profiler did not see
        quiet, w = unrecorded_us(t), c.budget.window_us
        if quiet is not None and w > 0 and quiet >= UNRECORDED_SHARE * w:
            return _unrecorded(c, quiet)
    if work and not t.indices((CPU_OP,)):
        return Finding(RuleId.NOT_RECORDED, "CPU activity not recorded: GPU work, but no ATen op on the CPU",
                       Severity.NOTE,
                       [f"{len(work)} pieces of GPU work and no CPU op: what launched them, and when, is not in the "
                        "trace, so the GPU's idle time cannot be put down to anything on the CPU"],
                       "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    return None


def _unrecorded(c: Context, quiet: float) -> Finding:
    """A trace with no GPU work whose CPU threads record no op for a large part of the window (exam 9's rank 0)."""
    w = c.budget.window_us
    ev = [f"no op, runtime call or CPU backend's collective is recorded on any CPU thread for {us(quiet)} of the "
          f"{us(w)} window ({quiet / w:.0%}); the trace holds no GPU work"]
    gaps = sorted(c.summary.gaps, key=lambda g: -g.gap_us)[:3]
    if gaps and gaps[0].gap_us >= 0.1 * quiet:
        ev.append("the longest waits from a label to its first op: " + ", ".join(
            f"'{g.annotation}'" + (f" in {g.step}" if g.step else "") + f" {us(g.gap_us)} before {g.first_op}"
            for g in gaps))
    ev.append("the profiler records ops and calls, not the Python between them: this time is Python that launches "
              "no op, a sleep, or a wait on input or another process, which the trace cannot tell apart")
    f = Finding(RuleId.NOT_RECORDED, "Time the profiler does not see: no recorded op on any CPU thread for much of "
                "the window", Severity.NOTE, ev,
                "record again with with_stack=True (the profiler then records the Python functions that ran between "
                "the ops too), or time the suspect part of the step by hand (time.perf_counter around it); in a job "
                "of several ranks, diagnose the folder of every rank's trace: a rank that others wait for shows here")
    f.leads = True
    return c.sized(f, quiet, "time with no op recorded on any CPU thread")


def _gpu_behind(c: Context) -> Finding | None:
    """The GPU idle although its next work had been launched long before: behind something, not waiting for the CPU."""
    b, t = c.budget, c.trace
    if b.window_us <= 0 or b.queued_us < QUEUED_SHARE * b.window_us:
        return None
    s, e = max(b.queued, key=lambda x: x[1] - x[0])
    work = sorted(facts.gpu_work(t), key=t.ts.__getitem__)
    nxt = next((j for j in work if t.ts[j] >= e - 1e-6), None)
    ev = [f"no GPU work is recorded for {us(b.queued_us)} ({b.share(b.queued_us):.0%} of the window) while its next "
          f"work had already been launched (more than {us(b.late_us)} before it ran): the GPU was busy with something "
          "the trace does not hold (work queued before the recording began, another process), waited on a "
          "dependency, or the GPU's timestamps are offset from the CPU's (the profiler puts both on one clock: a "
          "skew between them would look like this)"]
    if nxt is not None and t.launch_of(nxt) >= 0:
        i = t.launch_of(nxt)
        ev.append(f"the longest stretch: {us(e - s)}, before {t.name_of(nxt)[:60]}, launched by {t.name_of(i)} "
                  f"{us(t.ts[nxt] - t.ts[i])} before it started")
    last_cpu = _last_cpu(c)
    if apart(c):
        head = (f"the CPU's last op or runtime call ends {us(b.busy[0][0] - last_cpu)} before the GPU's first work "
                "starts: the two timelines do not overlap")
        cpu_span = last_cpu - b.lo
        if b.busy_us > cpu_span:  # (durations do not depend on how the two clocks line up)
            ev.append(head + f"; whatever the offset between their clocks, the GPU's work ({us(b.busy_us)}) outlasts "
                      f"all of the CPU's recorded events ({us(cpu_span)} from the window's start): in this recording "
                      "the GPU sets the pace; why it started when it did, the trace cannot say (record again after "
                      "warm-up, and check both clocks)")
        else:
            ev.append(head + ", so this trace cannot say whether the CPU or the GPU sets the pace (record again, the "
                      "profiler started after warm-up, and check both clocks)")
    elif last_cpu is not None and last_cpu < e:
        ev.append(f"the CPU's last op or runtime call ends {us(e - last_cpu)} before that work starts: everything "
                  "was queued")
    # the window's start, which no finding claims, said rather than lost (past FILL_MAX_US, the budget takes it for
    # the queue filling only where the CPU's events cover little of it)
    if b.filling_us > max(0.05 * b.window_us, FILL_MAX_US) and b.busy:
        ev.append(f"not counted: {us(b.filling_us)} at the window's start ({b.share(b.filling_us):.0%} of the "
                  "window, up to the first GPU work or the launch it waited behind), in which the CPU's recorded events "
                  "cover little: the recording began before this work")
    streams = {t.lane[j] for j in work}
    if b.collectives and len(streams) > 1 and not any(
            t.indices((RUNTIME, DRIVER), contains=n) for n in ("StreamWaitEvent", "EventRecord")):
        # PyTorch's NCCL backend orders its streams with event records and waits: a trace without any, whose
        # collectives run on a stream of their own, lost them (a tool's filter) or never had them recorded
        ev.append(f"its work runs on {len(streams)} streams, its collectives on their own, yet the trace holds no "
                  "stream-event call (cudaEventRecord, cudaStreamWaitEvent), which PyTorch's NCCL backend makes to "
                  "order its streams: the trace was likely filtered by a tool, and a wait of one stream for another "
                  "would look like this idle without showing as one")
    # "started late" only where the longest such stretch ends at the GPU's first work (vLLM's graphs); elsewhere
    # (HTA's sampled rank: mid-run stretches before collectives) the GPU was idle with work queued
    late = bool(work) and e <= t.ts[work[0]] + 1e-6
    f = Finding(RuleId.GPU_BEHIND, ("The GPU started late: work queued, not waiting for the CPU" if late else
                                    "The GPU idle with its next work queued: not waiting for the CPU"), Severity.NOTE, ev,
                "this idle time is not the CPU's: the GPU was behind something the trace does not show as work (a "
                "dependency on another stream or event, a graph's set-up, the recording starting before the GPU was "
                "free); look at what ran on the GPU before the recording, and at stream and event waits")
    return c.sized(f, b.queued_us, "no GPU work recorded, its next work already launched")


def _last_cpu(c: Context) -> float | None:
    t = c.trace
    return c.once("last cpu", lambda: max((t.end_of(i) for i in t.indices((CPU_OP, RUNTIME, DRIVER))
                                           if not t.is_gpu(i)), default=None))


def apart(c: Context) -> bool:
    """Whether the CPU's recorded events all end before the GPU's first work: the timelines do not overlap."""
    last = _last_cpu(c)
    return last is not None and bool(c.budget.busy) and last <= c.budget.busy[0][0]


def graph_phase(c: Context) -> str | None:
    """'capture' when the trace captures a CUDA (or HIP) graph, 'replay' when it only replays one, else None."""
    def compute() -> str | None:
        t = c.trace
        names = set(t.name_of(i) for i in t.indices((RUNTIME, DRIVER, ANNOTATION)))
        if any(any(w in n for w in CAPTURE_CALLS) or n.startswith(CAPTURE_LABELS) for n in names):
            return "capture"
        if any(n in names for n in GRAPH_LAUNCH):
            return "replay"
        return None
    return c.once("graph phase", compute)


def _graphs(c: Context) -> Finding | None:
    """A trace of CUDA graphs: their capture, or their replays (and the work each replay ran)."""
    phase = graph_phase(c)
    if phase is None:
        return None
    t = c.trace
    launches = [i for n in GRAPH_LAUNCH for i in t.indices(name=n) if not t.is_gpu(i)]
    per = [len(t.gpu_work_of(i)) for i in launches]
    if phase == "capture":
        words = sorted({t.name_of(i) for i in t.indices((RUNTIME, DRIVER, ANNOTATION))
                        if any(w in t.name_of(i) for w in CAPTURE_CALLS) or t.name_of(i).startswith(CAPTURE_LABELS)})[:4]
        calls = sum(1 for i in t.indices((RUNTIME, DRIVER)) if any(w in t.name_of(i) for w in LAUNCH_WORDS))
        hip = any(w.startswith("hip") for w in words)
        return Finding(RuleId.GRAPH_CAPTURE, ("HIP-graph capture (ROCm's form of CUDA graphs)" if hip else
                                              "CUDA-graph capture") + ": this trace records a graph being built, not "
                       "its replays", Severity.NOTE,
                       [f"capture calls and labels: {', '.join(words)}",
                        f"{calls} launch calls and {len(facts.gpu_work(t))} pieces of GPU work: during capture the "
                        "launches are recorded into the graph and mostly not run"],
                       "read the steady step from a trace of the replays (record after warm-up and capture); "
                       "the capture's CPU time is a one-time cost, not what the step pays")
    hip = bool(launches) and all(t.name_of(i).startswith("hip") for i in launches)
    return Finding(RuleId.GRAPH_REPLAY, ("HIP-graph replays (ROCm's form of CUDA graphs)" if hip else "CUDA-graph replays")
                   + ": one launch runs many kernels", Severity.NOTE,
                   [f"{len(launches)} graph launches ({', '.join(sorted({t.name_of(i) for i in launches}))})"
                    + (f", {statistics.median(per):g} pieces of GPU work per replay (median)" if per else "")],
                   "the CPU pays one launch per replay: its time per step no longer grows with the kernels; judge "
                   "the replayed kernels by their own time (the GPU side)")


# --- what the profiler adds (03, 04) ------------------------------------------------------------------------


def _occupancy_queries(c: Context) -> Finding | None:
    t = c.trace
    per_step = facts.occupancy_queries_by_step(t)
    total_q = {n: x.count for n, x in ((x.name, x) for x in c.summary.calls) if kk.is_occupancy_query(n)}
    if not total_q:
        return None
    ops = sorted(facts.ops_around(t, kk.is_occupancy_query))
    ev = [f"{sum(total_q.values())} occupancy queries ({', '.join(f'{n} x {q}' for q, n in total_q.items())})"
          + (f" under {', '.join(ops)}" if ops else "")]
    steps_with = [s for s, q in per_step if q]
    if per_step:
        ev.append(f"in {len(steps_with)} of {len(per_step)} recorded steps"
                  + (f" ({', '.join(steps_with)})" if 0 < len(steps_with) <= 4 else
                     f" ({', '.join(steps_with[:3])} ... {steps_with[-1]})" if steps_with else ""))
    if not per_step:
        advice = ("this trace has no profiler steps to place them in; the kernels launched after them come from the "
                  "library that asked (the ops above name it): judge those by their resources and throughput")
    elif len(steps_with) == len(per_step):
        advice = ("they come every step, so each call pays for them on the CPU; the kernels launched after them come "
                  "from the library that asked (the ops above name it): judge those by their resources and "
                  "throughput")
    else:
        advice = ("they come only in some steps, which fits a library setting itself up once; warm up, or keep the "
                  "first step out of the recording")
    return Finding(RuleId.OCCUPANCY_QUERIES, "Occupancy queries: a library working out how its kernels fit an SM",
                   Severity.NOTE, ev, advice)


def _profiler_flush(c: Context) -> Finding | None:
    cs = c.summary.artifacts.closing_sync
    w = c.budget.window_us
    if not cs or w <= 0 or cs.dur_us < 0.05 * w:
        return None
    idle = cs.idle_share
    ev = [f"last {cs.name} took {us(cs.dur_us)} ({cs.dur_us / w:.0%} of the window)"
          + (f", GPU idle for {idle:.0%} of it" if idle is not None else "")]
    if idle is not None and idle < 0.5:  # the CPU waits for the user's own queued kernels: their time counts
        return Finding(RuleId.PROFILER_FLUSH, "Long synchronize at the end: the CPU waits there for the GPU's "
                       "queued work", Severity.NOTE, ev,
                       "the profiler synchronizes before it stops, and the GPU was busy for most of that wait: the CPU "
                       "had run ahead, and the wait is your own kernels finishing; count that GPU work as the step's "
                       "(the GPU-side findings do), not the CPU's wait")
    return Finding(RuleId.PROFILER_FLUSH, "Long synchronize at the end: the profiler's own synchronize before it stops",
                   Severity.NOTE, ev,
                   "do not count it against your code: the GPU was idle for most of it, so the time did not go to "
                   "waiting for kernels; one hypothesis is the profiler's own work as it stops")


def _buffer_request(c: Context) -> Finding | None:
    bufs = c.summary.artifacts.buffer_requests
    if not bufs:
        return None
    return Finding(RuleId.PROFILER_BUFFER, "Activity Buffer Request: the profiler allocating its own buffers",
                   Severity.NOTE, [f"{b.name} on '{b.lane}', {us(b.dur_us)}" for b in bufs[:3]],
                   "profiler overhead, not your code: schedule(wait=1, warmup=1, ...) moves it out of the "
                   "recorded steps")


# --- torch.compile's frames (08) -------------------------------------------------------------------------------


def _frames(c: Context) -> set[str] | None:
    """The compiled frames of a trace that compiled without recompiling (recompiles: cpu_rules), or None."""
    comp = c.summary.compiled
    if not comp.any or facts.recompiles(comp.regions):
        return None
    return {r.split(": ")[-1].split("/")[0] for r in comp.regions}


def _compiled_frames(c: Context) -> Finding | None:
    """A compiled function split by graph breaks, or one graph reused every call (recompiles: cpu_rules)."""
    comp = c.summary.compiled
    frames = _frames(c)
    if frames is None:
        return None
    if len(frames) > 1:
        return Finding(RuleId.GRAPH_BREAKS, "Several compiled frames: the function was split by graph breaks",
                       Severity.NOTE, [f"{n} x {r}" for r, n in sorted(comp.regions.items())],
                       "TORCH_LOGS=graph_breaks names each break; code between graphs runs eagerly")
    if c.once("compile tax", lambda: None) is not None:
        return None
    return Finding(RuleId.COMPILE_CACHE_HITS, "torch.compile: one graph, reused every call", Severity.NOTE,
                   [f"{n} x CompiledFxGraph {h} (the same compiled graph run at every call)"
                    for h, n in comp.graph_hashes.items()],
                   "nothing to fix; read the generated code under /tmp/torchinductor_<user>/ to see what was fused")


def compile_tax(c: Context) -> Finding | None:
    """Compiled calls whose traced CPU time is several times the GPU work they launch (a CPU-side claim)."""
    comp = c.summary.compiled
    frames = _frames(c)
    region = next(iter(comp.regions), None)
    if frames is None or len(frames) > 1 or region is None:
        return None
    t = c.trace
    calls = [i for i in t.indices((CPU_OP,), name=region)]
    cpu = [t.dur[i] for i in calls]
    gpu = [facts.gpu_time_under(t, i) for i in calls]
    # Twice, not merely more: under the profiler a compiled call's CPU time is several times its own (notebook 08
    # measures it), so a call whose GPU work is close to its traced CPU time is not shown to be a tax.
    if not (cpu and gpu and COMPILE_TAX_FACTOR * statistics.median(gpu) < statistics.median(cpu)):
        return None
    ev = [f"{n} x CompiledFxGraph {h}" for h, n in comp.graph_hashes.items()]
    one = len(calls) == 1
    ev.append((f"the one '{region}' call takes " if one else f"each '{region}' call takes ")
              + f"{us(statistics.median(cpu))} on the CPU and launches {us(statistics.median(gpu))} of GPU work "
              + (f"(its CPU time {statistics.median(cpu) / statistics.median(gpu):.0f}x its GPU time)" if statistics.median(gpu) > 0
                 else "(and no GPU time)")
              + ("; one call is one sample: a loop's later calls may cost less" if one else ""))
    spans = [(t.ts[i], t.end_of(i)) for i in calls]
    before = total(intersection(merged(spans), c.budget.filling))
    if before > 0:  # as cpu-bound: a steady loop's CPU is ahead when a call starts, so no call pays its lead-in
        ev.append(f"not counted: the {us(before)} of these calls before the first GPU work, while the CPU made its "
                  "first launch; in a steady loop the CPU is already ahead of the GPU there")
    # What the fix gains is what the same work costs another way (eager, or more of the program in one graph),
    # which a compiled trace does not hold: on the series' 64 x 64 call, eager beat both compiled modes (08).
    ev.append("no gain is sized: what the same work would cost uncompiled, or compiled with more of the program, is "
              "not in this trace (on the series' 64 x 64 call eager was quicker than compiling it, with or without "
              "CUDA graphs: notebook 08)")
    graphs = graph_phase(c) == "replay"
    f = Finding(RuleId.COMPILE_TAX, "Launch-bound even compiled: "
                + ("the one compiled call recorded costs" if one else "each compiled call costs")
                + " more CPU time than the GPU work it launches", Severity.NOTE if one else Severity.ISSUE, ev,
                "give each call more work (larger batches, or more of the program in one graph)"
                + (" (this run replays CUDA graphs already: mode='reduce-overhead' is on)" if graphs else
                   ", or replay it as a CUDA graph (mode='reduce-overhead')")
                + "; confirm the cost without the profiler first (torch.utils.benchmark.Timer: the profiler inflates "
                "CPU time per op), against eager too: on work this small, not compiling may be quickest (notebook 08)")
    got = c.claimed(f, "the GPU idle during the compiled calls", cpu=difference(merged(spans), c.budget.filling))
    if got is not None:
        c.once("compile tax", lambda: got)
    return got


# --- a rank of a distributed job (15) -------------------------------------------------------------------------

#: collectives at or above this share of the window (not of the GPU's busy time: a rank whose GPU mostly idles is
#: not inside its collectives, however few kernels it runs besides them)
IN_COLLECTIVES_SHARE = 0.5




def _in_cpu_collectives(c: Context) -> Finding | None:
    """A rank with no GPU work whose CPU time is mostly inside a CPU backend's collectives (gloo)."""
    t, w = c.trace, c.budget.window_us
    if facts.gpu_work(t) or w <= 0:
        return None
    idx = [i for p in CPU_COLLECTIVE_PREFIXES for i in t.indices(prefix=p) if not t.is_gpu(i)]
    inside = total(clipped(merged((t.ts[i], t.end_of(i)) for i in idx), c.budget.lo, c.budget.hi)) if idx else 0.0
    if inside < IN_COLLECTIVES_SHARE * w:
        return None
    names = sorted({t.name_of(i) for i in idx})
    ev = [f"{us(inside)} of the {us(w)} window is inside {', '.join(names[:3])} ({inside / w:.0%}); the trace holds "
          "no GPU work (a CPU backend)",
          "a collective returns when every rank has entered it: its time holds the wait for the slowest rank as well "
          "as the transfer and, on a CPU backend, the reduction the CPU does itself; one rank's trace cannot tell "
          "them apart"]
    f = Finding(RuleId.INSIDE_COLLECTIVES, "Inside collectives: most of this rank's window is inside its CPU "
                "backend's collectives (waiting for the other ranks, moving data, or reducing it)", Severity.ISSUE, ev,
                "diagnose the folder of every rank's trace (python -m helpers diagnose FOLDER): it names the rank "
                "the others wait for, if any")
    return c.sized(f, inside, "inside the CPU backend's collectives")


def _in_collectives(c: Context) -> Finding | None:
    """A rank whose GPU time is mostly in collectives: sent to the folder view, no CPU/GPU verdict."""
    b = c.summary.balance
    w = c.budget.window_us
    if b.verdict != facts.IN_COLLECTIVES or w <= 0 or b.collective_us < IN_COLLECTIVES_SHARE * w:
        return None
    ev = [f"{us(b.collective_us)} of the {us(w)} window is in collectives ({b.collective_us / w:.0%}); "
          f"{us(b.collective_exposed_us)} of it with no other GPU work beside it",
          "a collective's kernel runs from when this rank enters it until every rank has: its time holds the wait for "
          "the slowest rank as well as the transfer, and one rank's trace cannot tell them apart"]
    idle = c.budget.waiting_for_cpu_us
    if idle >= 0.05 * w:
        # the CPU-side rules are left out on such a rank: say what they would have read, and why it is not sized
        ev.append(f"the GPU also waited for the CPU {us(idle)} ({idle / w:.0%} of the window) between its work: not "
                  "sized here, since a rank whose collectives wait for the others gains from a quicker CPU only as "
                  "far as the slowest rank does (the folder's view says whether this rank is the one waited for)")
    waits = _waits_in_collectives(c)
    if waits:
        ev.append(waits)
    # whether the time is waiting or moving data, one rank's trace cannot tell
    f = Finding(RuleId.INSIDE_COLLECTIVES, f"Inside collectives: {b.collective_us / c.budget.window_us:.0%} of this "
                "rank's window is in collectives (waiting for the other ranks, or moving and reducing data)",
                Severity.ISSUE, ev,
                "diagnose the folder of every rank's trace (python -m helpers diagnose FOLDER): it names the rank "
                "the others wait for, if any, and what remains once it is fixed")
    return c.sized(f, b.collective_exposed_us, "the part of that time with no other GPU work beside the collectives")


def _waits_in_collectives(c: Context) -> str:
    """The CPU's waits for the GPU while the GPU ran collectives, in words (empty: none of 5% of the window): a wait
    there is for the other ranks, which the hidden-sync rule leaves out (worker 1 of the DLRM set waits 6.56 ms in an
    aten::index's copy inside DistributedDataParallel.forward)."""
    b, w = c.budget, c.budget.window_us
    inside = [(s, total(intersection([(s.start_us, s.start_us + s.dur_us)], merged(b.collectives))))
              for s in c.once("syncs", lambda: sf.hidden_syncs(c.trace))]
    inside = [(s, x) for s, x in inside if x > 0]
    held = total(intersection(merged((s.start_us, s.start_us + s.dur_us) for s, _ in inside), merged(b.collectives)))
    if held < 0.05 * w:
        return ""
    s, x = max(inside, key=lambda p: p[1])
    where = " in ".join(n for n in (s.cause_op or s.op, s.annotation) if n)
    return (f"the CPU waited for the GPU {us(held)} while the GPU ran collectives, in {len(inside)} wait"
            f"{'s' if len(inside) != 1 else ''} (the longest: {us(x)} of it in {s.calls[-1]}"
            + (f" under {where}" if where else "") + "): a wait for the collectives, so most likely for the other "
            "ranks (the folder's view says which rank they wait for)")


def in_collectives(c: Context) -> bool:
    """Whether the rank is inside its collectives: then the CPU/GPU rules' time is the waiting's."""
    b = c.summary.balance
    return (b.verdict == facts.IN_COLLECTIVES and c.budget.window_us > 0
            and b.collective_us >= IN_COLLECTIVES_SHARE * c.budget.window_us)


#: the rules that frame the rest (run first) and the notes on the profiler's own footprints (run last)
FIRST: list[Rule] = [_not_recorded, _in_collectives, _in_cpu_collectives, _gpu_behind, _graphs]
LAST: list[Rule] = [_compiled_frames, _occupancy_queries, _profiler_flush, _buffer_request]
