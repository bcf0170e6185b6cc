"""The rules about the GPU's own work: which kernels and copies its busy time goes to, and what a fix saves.

Each claims, on the ledger (:mod:`helpers.advice.ledger`), the stretches of
the GPU's busy time its pattern explains, in the order of :data:`RULES`; what
no pattern claims is the kernels' own work (the GPU-bound note, with the
roofline). A GPU-side fix shortens the step only where the GPU sets the pace:
the ledger's gain takes the CPU's own work as its floor.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import replace

from .. import facts
from ..facts import hardware, memory, roofline, kernel_kinds as kk, step_facts as sf
from ..facts.budget import EVEN_MARGIN
from ..facts.text import nbytes, short, us
from ..reader.spans import difference, intersection, merged, total
from ..reader.trace import CPU_OP, KERNEL, MEMCPY, Trace
from .findings import IDLE_NOTE, Context, Finding, Rule, Severity
from .ledger import Side, Speedup
from .rulebook import RuleId
from . import trace_rules

TF32_DOCS = "https://docs.pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html"
TF32_NOTE = "https://docs.pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
CDIST_DOCS = "https://docs.pytorch.org/docs/stable/generated/torch.cdist.html"
CHECKPOINT_DOCS = "https://docs.pytorch.org/docs/stable/checkpoint.html"
#: float32 GEMMs on the CUDA cores at or above this share of GEMM time make a finding
FP32_GEMM_SHARE = 0.25
#: the same float32 GEMMs with TF32 allowed, on the H200 reference set: notebook 12's training step 3630 to 854 us of
#: GEMM time per recording (4.3x), notebook 16's loop 12770 to 2589 us (4.9x); the datasheets' TF32 over FP32 rates
#: (7.4x on the H200) bound it above
TF32_MEASURED = 4.5
#: pageable copies to the GPU smaller than this, in all, are not worth a finding (a label tensor, a scalar)
PAGEABLE_BYTES = 1 << 20
#: the pinned copies' speed on the H200 reference set (notebook 14's 6 MiB batches: 28.4 GB/s in input-w0-pin-nb,
#: 52.9 in input-w4-pin-nb, against 9.2 from pageable memory), for a trace that holds no pinned copy to compare with:
#: its pageable copies sped up to these rates (the slower one for the point figure), not by the H200's ratio (a
#: machine whose pageable copies already run at 18.6 GB/s cannot gain 3.1x over its link)
PINNED_GBS = 28.4
PINNED_GBS_HIGH = 52.9
#: one allocation holding at least this share of its GPU's peak allocated memory is a spike (a threshold chosen,
#: not measured: on the H200 reference set the largest single allocation of notebook 13's training steps is under a
#: quarter of their peak, activations spread over many tensors; one temporary half the peak is another shape)
SPIKE_SHARE = 0.4
#: ... and at least this many bytes: a large share of a small peak is no problem on any GPU
SPIKE_BYTES = 256 << 20


def _spans(t: Trace, idx) -> list:
    return merged((t.ts[j], t.end_of(j)) for j in idx)


def _op_chain(t: Trace, j: int) -> str:
    """The innermost ATen op around the launch of GPU work ``j`` and, if another, the outermost one."""
    i = t.launch_of(j)
    if i < 0:
        return "no launch call in the trace"
    ops = [t.name_of(p) for p in t.ancestors(i) if t.group_of(p) == CPU_OP]
    if not ops:
        return "no op"
    return ops[0] if len(ops) == 1 else f"{ops[0]} (in {ops[-1]})"


_MARKS = ("simt", "ffma", "sgemm")


def _showing_marker(name: str, width: int = 70) -> str:
    """The kernel's name cut to ``width``, keeping in sight the part that says float32 on the CUDA cores."""
    low = name.lower()
    at = next((low.find(m) for m in _MARKS if m in low), -1)
    if len(name) <= width or 0 <= at <= width - 12:
        return short(name, width)
    return f"{name[:30]}...{name[max(at - 12, 30):at + 24]}..."


def _fp32_marker(name: str) -> str:
    """What in this float32 GEMM kernel's name says it runs on the CUDA cores, in words."""
    low = name.lower()
    for mark, words in (("simt", "'simt' (CUTLASS's CUDA-core class)"),
                        ("ffma", "'ffma' (the CUDA cores' float32 fused multiply-add)")):
        if mark in low:
            return f"{words} in its name"
    if "sgemm" in low:
        return "'sgemm' (BLAS's float32 GEMM) with no tensor-core instruction shape in its name"
    return "a float32 GEMM name with no tensor-core instruction in it"


def _fp32_gemms(c: Context) -> Finding | None:
    t = c.trace
    cc = sf.compute_capability(t)
    if cc is None or cc < (8, 0) or not sf.is_nvidia(t):  # TF32 tensor cores came with sm_80
        return None
    groups = sf.gemm_precision(t, c.summary.kernels)
    simt = next((g for g in groups if g.math == kk.FP32_SIMT), None)
    if simt is None or simt.share < FP32_GEMM_SHARE:
        return None
    gemm_total = sum(g.total_us for g in groups)
    example = simt.names[0]
    ev = [f"{simt.count} GEMM kernels, {us(simt.total_us)} of {us(gemm_total)} GEMM time ({simt.share:.0%}), have "
          f"names that say float32 on the CUDA cores (plain float32 multiply-adds, no tensor cores; kernels whose "
          f"names do not say their arithmetic are not counted, so the share may be larger), e.g. "
          f"{_showing_marker(example)}: {_fp32_marker(example)}",
          f"this GPU ({t.device_name}, compute capability {cc[0]}.{cc[1]}) has tensor cores that run TF32, "
          "from compute capability 8.0 on"]
    tf32 = next((g for g in groups if g.math == kk.TF32), None)
    if tf32:
        ev.append(f"{tf32.count} other GEMM kernels use TF32 ({us(tf32.total_us)}): TF32 is allowed for some "
                  "ops only (cuDNN's convolutions allow it by default, cuBLAS's matmuls do not)")
    names = set(simt.names)
    work = [j for j in facts.gpu_work(t) if t.name_of(j) in names]
    ops = Counter(_op_chain(t, j) for j in work)
    if ops:
        ev.append("launched under " + ", ".join(f"{op} x {n}" for op, n in ops.most_common(4)))
    fp32, tf = hardware.datasheet_fp32_tflops(t.device_name), hardware.datasheet_tf32_tflops(t.device_name)
    top = tf / fp32 if fp32 and tf else 8.0
    f = Finding(RuleId.FP32_GEMM, "float32 GEMMs without tensor cores on a GPU that has them", Severity.ISSUE, ev,
                "likely TF32 is off for matmuls (PyTorch's default): if float32's last bits do not matter, "
                "torch.set_float32_matmul_precision('high') lets cuBLAS use TF32 tensor cores, or run the forward "
                "under torch.autocast in a 16-bit dtype"
                + (" (where the CPU sets the pace, as here, autocast's casts are more launches: notebook 12 timed "
                   "autocast 0.83x on such a step; TF32 adds none, and what it gains there depends on how much the "
                   "profiler inflates the CPU's side: time it)" if c.budget.cpu_paced else "")
                + "; if these GEMMs were meant to be 16-bit, look where "
                f"their inputs became float32 (the ops above) ({TF32_DOCS}; {TF32_NOTE})")
    return c.claimed(f, "float32 GEMMs on the CUDA cores",
                     f"those GEMMs {TF32_MEASURED:g}x faster with TF32, as on the H200 reference set (notebooks 12 "
                     f"and 16); at most {top:.1f}x, the datasheet's TF32 over FP32 rate"
                     + ("" if fp32 and tf else " (no datasheet for this GPU: an assumed bound)"),
                     gpu=_spans(t, work), gpu_speedup=Speedup(min(TF32_MEASURED, top), 2.0, max(top, 2.0)))


def _pageable_copies(c: Context) -> Finding | None:
    t = c.trace
    copies = sf.h2d_copies(t)
    pageable = [x for x in copies if x.memory == "pageable"]
    size = sum(x.bytes or 0 for x in pageable)
    if not pageable or size < PAGEABLE_BYTES:
        return None
    ev = []
    for x in pageable:
        rate = f", {x.gb_per_s:.1f} GB/s" if x.gb_per_s is not None else ""
        ev.append(f"{x.count} x {x.name}: {nbytes(x.bytes or 0)} in {us(x.total_us)} on the GPU{rate}")
    pinned = [x for x in copies if x.memory == "pinned" and x.gb_per_s is not None]
    for x in pinned:
        ev.append(f"against {x.count} x {x.name} in the same trace: {x.gb_per_s:.1f} GB/s")
    from .sync_rules import syncs  # the copies that made the CPU wait (hidden-sync claims their idle time)
    waits = [s for s in syncs(c) if s.copy and "Pageable -> Device" in s.copy]
    if waits:
        ev.append(f"{len(waits)} of them made the CPU wait ({' + '.join(waits[0].calls)} under "
                  f"{waits[0].cause_op or waits[0].op}): their idle time is hidden-sync's")
    rates = [x.gb_per_s for x in pageable if x.gb_per_s]
    if pinned and rates:
        ratio = max(x.gb_per_s for x in pinned) / statistics.median(rates)
        speed, how = Speedup(max(ratio, 1.0), max(ratio / 2, 1.0), ratio * 1.5), "as this trace's pinned copies ran"
    else:
        base = statistics.median(rates) if rates else 9.2
        ratio, high = PINNED_GBS / base, PINNED_GBS_HIGH / base  # the point: the slower of the two recordings
        speed = Speedup(max(ratio, 1.0), 1.0, max(high, 1.0))  # the low end: a link the pageable copies fill
        how = (f"at {PINNED_GBS:g} to {PINNED_GBS_HIGH:g} GB/s, as the H200 reference set's pinned copies ran in "
               "notebook 14's two pinned recordings (the point figure at the slower one); how fast pinned copies run "
               "over this machine's host link the trace cannot show: a slower link than the H200 machine's gives "
               "less, and the low end is no gain, a link the pageable copies already fill")
    names = {x.name for x in pageable}
    work = [j for j in facts.gpu_work(t) if t.group_of(j) == MEMCPY and t.name_of(j) in names]
    advice = ("pin the batches (DataLoader(pin_memory=True), which pins in a background thread) and copy with "
              ".to(device, non_blocking=True), so that the GPU's copy engine reads the batch straight from host "
              "memory (no extra copy into a driver buffer first) and the CPU need not wait; pinning each tensor "
              f"yourself costs time too ({PINNED_DOCS}; {sf.SYNC_BEHAVIOUR})")
    kernels = [t.ts[j] for j in t.on_gpu((KERNEL,))]
    if work and kernels and max(t.end_of(j) for j in work) <= min(kernels):
        # every such copy ran before the first kernel (AlexNet's trace: its layers' weights, 233 MiB, then its
        # first convolution): one-time set-up most likely, not a loop's batches
        ev.append("all of them ran before the first kernel: most likely the model's parameters or other set-up "
                  "moving to the GPU once, not the batches of a loop")
        advice = ("if these are one-time copies (the model moving to the GPU), they leave a recording made after "
                  "warm-up and need no fix; if they are a loop's batches: " + advice)
    f = Finding(RuleId.PAGEABLE_COPIES, "Copies to the GPU from pageable memory", Severity.ISSUE, ev, advice)
    return c.claimed(f, "the copies from pageable memory, on the GPU",
                     f"the copies {ratio:.1f}x faster from pinned memory ({how})", gpu=_spans(t, work), gpu_speedup=speed)

PINNED_DOCS = "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html"


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
    f = Finding(RuleId.ADDMM_BIAS_COPY, "Device-to-device copy before a GEMM: addmm copying its bias", Severity.NOTE,
                [f"{len(found)} x {t.name_of(found[0])}" + (f" of {nbytes(size)}" if size else "")
                 + f" under aten::addmm, {us(total)} in all",
                 "with a full-matrix bias, ATen's CUDA addmm copies it into the output, then the GEMM adds its "
                 "product onto it"],
                "expected when the bias is a full matrix (torch.addmm, or torch.compile's rewrite of matmul + add); "
                "a 1-D bias, as nn.Linear has, can go to the GEMM's bias epilogue with no copy")
    return c.claimed(f, "the bias copies on the GPU", gpu=_spans(t, found))


def _op_of(t: Trace, j: int) -> int:
    """The innermost ATen op around the launch of kernel ``j``, or -1."""
    i = t.launch_of(j)
    return next((p for p in t.ancestors(i) if t.group_of(p) == CPU_OP), -1) if i >= 0 else -1


def _variance(c: Context) -> Finding | None:
    """Launches of the same kernel doing the same work (same name, grid, block and op input shapes and types) that
    differ in time. Launches that record neither a grid nor their op's shapes are not compared: the same name is not
    the same work. Collectives are left out: their time holds the wait for other ranks, not a kernel's own variance.
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
    worst = None
    for k, js in candidates:
        groups: dict[tuple, list[int]] = {}
        for j in js:
            a = t.args.get(j, {})
            s = None if shapes.missing else shapes.by_op.get(ops[j])
            if a.get("grid") is None and s is None:
                continue  # nothing says what work this launch did
            key = (str(a.get("grid")), str(a.get("block")),
                   None if s is None else json.dumps(s.dims), None if s is None else json.dumps(s.types))
            groups.setdefault(key, []).append(j)
        for key, members in groups.items():
            durs = [t.dur[j] for j in members]
            if len(durs) < 5:
                continue
            med = statistics.median(durs)
            # a couple of microseconds is the clock's grain in traces stamped in whole microseconds, not variance
            if med < 5 or max(durs) < VARIANCE_FROM * med or max(durs) - med < 2:
                continue
            spread = max(durs) / med - 1
            if worst is None or spread > worst[0]:
                worst = (spread, k, key, members, med)
    if worst is None:
        return None
    spread, k, key, members, med = worst
    durs = [t.dur[j] for j in members]
    grid, block, dims, _types = key
    same = ([f"grid {grid}, block {block}"] if grid != "None" else []) + ([f"inputs {dims}"] if dims is not None else [])
    ev = [f"{len(durs)} x {short(k.name, 60)} with the same " + ", ".join(same)
          + f": median {us(med)}, min {us(min(durs))}, max {us(max(durs))} (+{spread:.0%} over the median)"]
    if dims is None:
        ev.append("their ops' input shapes could not be compared: " + (shapes.missing or "no Input Dims for these ops")
                  .removeprefix("not sized: ") + "; the same grid and block need not be the same work (layers of "
                  "other sizes can launch alike)")
    # in time order, long and short launches taking turns: two kinds of work under one name and launch shape
    seq = [t.dur[j] for j in sorted(members, key=t.ts.__getitem__)]
    turns = sum((a > med) != (b > med) for a, b in zip(seq, seq[1:]))
    hi_, lo_ = [x for x in seq if x > med], [x for x in seq if x <= med]
    alternate = (len(seq) >= 6 and turns >= 0.8 * (len(seq) - 1) and bool(hi_) and bool(lo_)
                 and min(hi_) > 1.3 * max(lo_))  # (two groups clearly apart, not noise around the median)
    if alternate:
        ev.append(f"in time order the launches take turns, long and short ({', '.join(us(x) for x in seq[:4])}, ...; "
                  f"the {len(lo_)} short ones' median {us(statistics.median(lo_))}, the {len(hi_)} long ones' "
                  f"{us(statistics.median(hi_))}): "
                  "two kinds of work under one name and launch shape (layers that alternate, say) is one "
                  "hypothesis, rather than noise")
    if len(durs) < k.count:
        ev.append(f"compared only with each other: the trace holds {k.count} launches of that name in all, "
                  "some doing other work (another grid or other shapes)")
    # the slow launches (beyond 1.1x the median) by step: all in one step is a one-step effect, not steady noise
    steps = facts.steps(t)
    slow_steps = Counter()
    for j in members:
        if t.dur[j] > 1.1 * med:
            s_ = next((x.name for x in steps if x.start_us <= t.ts[j] <= x.start_us + x.dur_us), None)
            slow_steps[s_] += 1
    one_step = len(slow_steps) == 1 and None not in slow_steps and len(steps) > 1
    if one_step:
        (name, n), = slow_steps.items()
        ev.append(f"all {n} launches beyond 1.1x the median run in {name}: a one-step effect (the first steps' "
                  "warm-up, a clock still ramping) is one hypothesis")
    title = ("The same kernel doing the same work with different durations" if dims is not None and not alternate
             else "The same kernel, launched alike, with different durations")
    if alternate:
        # two kinds of launch: the median falls between them and describes neither, so no share is claimed
        ev[0] += "; a median between two kinds of launch, which describes neither"
        return Finding(RuleId.KERNEL_VARIANCE, title, Severity.NOTE, ev,
                       "time the long and the short launches apart: find which op or layer each belongs to (its "
                       "record_function, with_stack's frames), and compare like with like; only if both kinds turn "
                       "out to be the same work, test clocks, heat, power management, driver housekeeping (the "
                       "article's list)")
    f = Finding(RuleId.KERNEL_VARIANCE, title,
                Severity.NOTE, ev,
                "quote the median and study the outliers apart; possible causes to test: "
                + ("the step they share (warm up longer before recording, and see whether they remain), " if one_step
                   else "") + "clocks, heat, power management, driver housekeeping (the article's list), other work "
                "on the GPU")
    slow = [(t.ts[j] + med, t.end_of(j)) for j in members if t.dur[j] > med]
    return c.claimed(f, "the slower launches' time beyond the median", gpu=merged(slow))


#: the slowest launch at least this many times the median: below it, alike launches' spread is a GPU's ordinary
#: jitter (HTA's H100 owlv2 trace: 120 softmax launches within +10%), not a variance worth a finding
VARIANCE_FROM = 1.2


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
    busy = c.budget.busy_us
    gpu = sum(facts.gpu_time_under(t, i) for i in calls)
    if calls and busy > 0:
        ev.append(f"the kernels of those {len(calls)} op calls ran {us(gpu)}, {gpu / busy:.0%} of the GPU's busy time")
    f = Finding(RuleId.MEMORY_SPIKE, "Memory spike: one allocation holds a large share of the peak",
                   Severity.ISSUE, ev,
                   "avoid materialising the large temporary: compute it in chunks (a loop over blocks of rows, each "
                   "temporary a fraction of the size), or use an op that never builds it: for distances "
                   "torch.cdist, whose default computes Euclidean distances through a matrix product beyond 25 rows "
                   f"({CDIST_DOCS}); torch.compile can fuse an elementwise chain into the reduction that follows it; "
                   f"for activations kept for backward, activation checkpointing ({CHECKPOINT_DOCS})")
    # sized by the GPU time of the ops that made it (writing and reading the temporary); what a fix saves of it
    # (an op that never builds it) the project has not measured: no gain
    kernels = [k for op in calls for d in [op] + t.descendants(op) for k in t.gpu_work_of(d)]
    got = c.claimed(f, "the GPU time of the ops that made the large allocations (an op that never builds the "
                       "temporaries, such as a matrix-product form, could save most of this and of the work that "
                       "reads them, less its own cost, which no timing here gives; computing them in chunks lowers "
                       "the peak, not this time)",
                    gpu=_spans(t, kernels)) \
        if kernels else None
    return got or f




#: the GPU busy at least this share of the window (less the queue filling at its start) for the GPU-bound note
GPU_BOUND_MIN = 0.25
#: memory-bound kernels holding at least this share of the kernel time make the GPU-bound finding an issue, sized
#: as if fusing them cut the bytes they move: halved as a point figure, 1.25x to 4x for the ends. A hypothesis: how
#: many passes over memory a fusion saves depends on which kernels read which tensors, which no trace says, and no
#: fix of this kind was timed in this project
FUSE_SHARE = 0.5
FUSE_SPEED = Speedup(2.0, 1.25, 4.0)


#: a GPU busy this share of the time from its first work on, in a trace whose CPU events end before it starts, ran
#: its queued work back to back
BACK_TO_BACK = 0.9


def _gpu_bound(c: Context) -> Finding | None:
    """What no pattern claimed of the GPU's busy time, where the GPU sets the pace (its work outlasts the CPU's)."""
    b, t = c.budget, c.trace
    # collectives are the rank rules' (communication-bound, low-overlap): not the kernels' own work
    comm = list(b.collectives)
    left = difference(c.ledger.left(Side.GPU), comm) if comm else c.ledger.left(Side.GPU)
    if not left or b.cpu_paced or b.busy_us < GPU_BOUND_MIN * max(b.window_us - b.filling_us, 1e-9):
        return None  # (a GPU busy a sliver of the window sets no pace: a fragment, or a GPU behind something)
    if trace_rules.apart(c):
        # the CPU's events all end before the GPU's first work: no balance of the two can be read (gpu-behind says
        # so); but a GPU that, once started, runs its queued work back to back sets the pace of what it runs
        active = b.hi - b.busy[0][0]
        if active <= 0 or b.busy_us < BACK_TO_BACK * active:
            return None
        ev = [f"from its first work on, the GPU ran back to back: {us(b.busy_us)} of the {us(active)} from its first "
              f"work to the window's end ({b.busy_us / active:.0%}), all of it launched before it started: what it "
              "ran was queued, so its kernels set the pace of that part"]
    else:
        ev = [f"the GPU ran work {us(b.busy_us)} of the {us(b.window_us)} window ({b.share(b.busy_us):.0%}); the "
              f"CPU's own work from the first GPU work on (the launching thread's time in its events, less its waits "
              f"for the GPU) took {us(b.paced_cpu_us)}"
              + (f": about even (within {EVEN_MARGIN:.0%}), so the GPU sets the pace by a margin the profiler's own "
                 "cost on the CPU could undo" if b.about_even else "")]
    shape = roofline.dominant(roofline.roofline(c.trace))
    if shape is not None:  # memory-bound kernels (fuse them) or compute-bound ones near their peak: not one advice
        ev.append(roofline.dominant_text(shape))
    idle = b.share(b.waiting_for_cpu_us)
    if idle >= IDLE_NOTE:
        ev.append(f"yet it waited for the CPU {idle:.0%} of the window: by the totals the GPU sets the pace, but part "
                  "of the time it waits (the findings above say for what)")
    # attention written out (two matmuls around a softmax, no SDPA op): the fused kernel is the fix notebook 10 times
    written_out = (any(t.indices((CPU_OP,), name=n) for n in ("aten::softmax", "aten::_softmax"))
                   and any(t.indices((CPU_OP,), name=n) for n in ("aten::matmul", "aten::bmm"))
                   and not t.indices((CPU_OP,), contains="scaled_dot_product"))
    f = Finding(RuleId.GPU_BOUND, "GPU-bound: the GPU's kernels set the pace", Severity.NOTE, ev,
                "look at the longest kernels: how near each comes to the GPU's peaks (the roofline table that python -m helpers summarize prints), "
                "then kernel choice, dtype, shapes, fusion"
                + ("; if the softmax between matmuls here is attention written out, "
                   "torch.nn.functional.scaled_dot_product_attention runs it as one fused kernel (notebook 10)"
                   if written_out else ""))
    got = c.claimed(f, "the GPU busy with work no other finding explains", gpu=left)
    if got is not None and shape is not None and shape.bound == roofline.MEMORY_BOUND and shape.share >= FUSE_SHARE:
        # memory-bound kernels near the memory roof: only fewer bytes makes them faster, and fusing them moves fewer
        # the memory-bound kernels' own time inside what this finding claims (another finding may hold the rest)
        r = roofline.roofline(c.trace)
        names = {p.kernel for p in r.points if p.bound == roofline.MEMORY_BOUND}
        mine = total(intersection(left, merged((t.ts[j], t.end_of(j)) for j in t.on_gpu((KERNEL,))
                                               if t.name_of(j) in names)))
        got.severity = Severity.ISSUE
        got.gain = c.ledger.gain(
            f"if fusing the memory-bound kernels ({shape.share:.0%} of the kernel time; {us(mine)} of it in this "
            "finding's share) halved the bytes they move; "
            f"the ends: {FUSE_SPEED.low:g}x and {FUSE_SPEED.high:g}x fewer bytes, since how many passes over memory a "
            "fusion saves depends on which ops read which op's output, which the trace shows only as shapes (ops "
            "of one shape in a row suggest a chain, a long one could save more than the high end). A hypothesis: "
            "no such fix was timed in this project", gpu_us=mine, gpu=FUSE_SPEED)
        got.gain = replace(got.gain, hypothesis=True)
        got.next = ("fuse the memory-bound kernels (torch.compile fuses chains of elementwise ops into one kernel, "
                    "or a fused op does), so that the data passes through memory fewer times; " + got.next)
    return got


#: in the order they claim the GPU's busy time: the most specific pattern first, the kernels' own work last
#: the math SDPA backend against the fused ones, GPU time per call on the H200 reference set (notebook 10, sequence
#: 1024): math 2638 us; memory-efficient 176.9, flash 94.5, cuDNN 57.5 us
FUSED_ATTENTION = Speedup(28.0, 15.0, 46.0)
#: ... and by the CPU's time per call without the profiler (compare_sdpa: math 347.5 us, the fused ones 44.5-49.9 us)
FUSED_ATTENTION_CPU = 7.4
MATH_SDPA = "aten::_scaled_dot_product_attention_math"
SDPA_DOCS = "https://docs.pytorch.org/docs/stable/generated/torch.nn.attention.sdpa_kernel.html"


def _math_attention(c: Context) -> Finding | None:
    """Attention run by the math SDPA backend: its kernels (float32 GEMMs, softmax, the mask, casts) are one fused
    backend's work; claimed before the fp32-gemm rule, whose GEMMs here are the backend's upcast."""
    t = c.trace
    calls = [i for i in t.indices((CPU_OP,), name=MATH_SDPA) if not t.is_gpu(i)]
    if not calls:
        return None
    work = [j for i in calls for d in [i] + t.descendants(i) for j in t.gpu_work_of(d)]
    if not work:
        return None
    per = sorted(sum(t.dur[j] for d in [i] + t.descendants(i) for j in t.gpu_work_of(d)) for i in calls)
    kinds = Counter(kk.classify(t.name_of(j), t.group_of(j)) for j in work)
    ev = [f"{len(calls)} x {MATH_SDPA}: {len(work) // len(calls)} pieces of GPU work per call, "
          f"{us(statistics.median(per))} of GPU time per call (median)",
          "its work by kind: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common())]
    f = Finding(RuleId.MATH_ATTENTION, "Attention on the math SDPA backend: many kernels where a fused backend runs "
                "one", Severity.ISSUE, ev,
                "let a fused backend run it (flash, memory-efficient or cuDNN; torch.nn.attention.sdpa_kernel picks "
                f"one: {SDPA_DOCS}); if none was picked, find out why: dtype, head size, mask, dropout, a GPU they do "
                "not support; then compare the GPU time per call")
    lanes = c.budget.launchers
    cpu = total(intersection(c.budget.cpu_work, merged((t.ts[i], t.end_of(i)) for i in calls
                                                        if not lanes or t.lane[i] in lanes)))
    return c.claimed(f, "the math backend's GPU work, and the GPU's idle time inside its calls",
                     f"the fused backends ran the same attention {FUSED_ATTENTION.low:g}x to {FUSED_ATTENTION.high:g}x "
                     f"faster by GPU time per call, and {FUSED_ATTENTION_CPU:g}x quicker on the CPU, on the H200 "
                     "reference set (notebook 10)",
                     gpu=_spans(t, work), gpu_speedup=FUSED_ATTENTION, floor_cut_us=cpu * (1 - 1 / FUSED_ATTENTION_CPU),
                     # the GPU's wait for the CPU inside the calls shrinks too: one launch where there were twenty
                     cpu=merged((t.ts[i], t.end_of(i)) for i in calls if not lanes or t.lane[i] in lanes),
                     cpu_speedup=Speedup(FUSED_ATTENTION_CPU, 7.0, 7.8))


RULES: list[Rule] = [_math_attention, _fp32_gemms, _pageable_copies, _bias_copy, _variance, _memory_spike, _gpu_bound]
