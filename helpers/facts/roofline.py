"""A roofline for every kernel the trace can size: achieved FLOP/s and bytes/s against the GPU's peaks.

A kernel's work is not in the trace; its op's is. With ``record_shapes=True``
each CPU op carries its shapes (:mod:`helpers.facts.op_shapes` reads them), and
from them the op call's FLOPs and bytes follow (:mod:`helpers.facts.op_work`,
the work model per op kind, with what it assumes). So each kernel is linked to
its op the way the facts link them (:func:`helpers.facts.launching_op`): the
kernel's correlation id gives its runtime launch, and the innermost ATen op
around that launch is the op whose work it does.

How work is attributed: every kernel that one op call launched shares that
call's work. The call's FLOPs and bytes count once; its time is the sum of its
kernels' durations (a split-K GEMM and its reduction kernel, or a GEMM and the
bias kernel run after it, are one matrix multiply); the point is named after
the kernel that took the longest (for a GEMM or a convolution, the longest
kernel whose name says its arithmetic, :func:`helpers.facts.kernel_kinds.gemm_math`:
not a layout transform run beside it). Calls with the same kernel name, op,
shapes and dtype make one point. Each :class:`Roofline` lists what is assumed
in ``assumptions``.

The roofs come from :mod:`helpers.facts.hardware` (datasheet figures, never
measured): the memory bandwidth, and the compute peak that fits the op's
dtype: 16-bit tensor cores for bf16/fp16 GEMMs, the FP32 CUDA cores for
fp32 GEMMs and for every elementwise op and reduction (ATen computes bf16 and
fp16 elementwise math in float32). An fp32 GEMM may have run on TF32 tensor
cores instead (``torch.backends.cuda.matmul.allow_tf32`` or
``torch.set_float32_matmul_precision('high')``), which the trace does not
record: it is judged against TF32 when the kernel's name says tf32
(:func:`helpers.facts.kernel_kinds.gemm_math`) or when it went faster than the FP32
cores can, and its point shows both roofs otherwise.

No torch, no matplotlib: the plot is :func:`helpers.lesson.plots.roofline`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from . import hardware, kernel_kinds as kk
from .kernels import innermost_op, innermost_ops
from .op_shapes import ShapesRead, read_shapes
from .op_work import CONV_OPS, GEMM_OPS, Work, size_op
from ..reader import vector
from ..reader.trace import KERNEL, Trace

#: A kernel is *near* a roof when it reaches at least this fraction of the roof at its own
#: arithmetic intensity (the lower of compute peak and intensity * bandwidth). Below it on
#: both, it is far below both roofs: its time goes to latency, launch or too little work.
NEAR = 0.5

COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
FAR_BELOW = "far below both roofs (latency- or launch-bound)"

ROOF_16 = "16-bit tensor cores"
ROOF_TF32 = "TF32 tensor cores"
ROOF_FP32 = "FP32 CUDA cores"

ASSUMPTIONS = (
    "each op call's FLOPs and bytes are shared by all the kernels it launched; its time is their summed durations",
    "GEMM: 2*M*N*K FLOPs (bias add left out); bytes: inputs read once, output written once",
    "elementwise: output shape = the inputs broadcast, first tensor's dtype; 1 FLOP per output element "
    "(a lower bound); copies and fills 0 FLOPs",
    "reduction: 1 FLOP per element of its largest input; output from the reduced dims when Concrete Inputs give them, "
    "else left out of the bytes (a lower bound)",
    f"near a roof: at least {NEAR:.0%} of the roof at the kernel's intensity",
)


@dataclass
class Point:
    """One kernel name + op + shape group on the roofline."""

    kernel: str  # the kernel that took the longest in each call
    op: str
    kind: str
    dtype: str
    shape: str
    count: int  # op calls
    flops: float  # per call
    bytes: float  # per call
    time_us: float  # all calls' kernels, summed
    share: float  # of all kernel time in the trace
    achieved_tflops: float
    achieved_tbs: float
    intensity: float  # FLOP per byte
    roof: str | None = None  # the compute roof it is judged against
    peak_tflops: float | None = None
    roof_tflops: float | None = None  # the roof at its intensity: min(peak, intensity * bandwidth)
    of_roof: float | None = None  # achieved / roof at its intensity
    bound: str | None = None  # COMPUTE_BOUND, MEMORY_BOUND, FAR_BELOW; None without roofs
    other_roof: str | None = None  # an fp32 GEMM's TF32 roof, when the trace cannot tell which one it used
    other_of_roof: float | None = None
    other_bound: str | None = None
    note: str | None = None

    @property
    def label(self) -> str:
        """A short name for a plot: the kernel's name without its template arguments."""
        return short_name(self.kernel)


@dataclass
class NotSized:
    """GPU work the roofline leaves out, and why."""

    reason: str
    kernels: int
    time_us: float
    share: float
    example: str  # one kernel's name (with its op, if any)


@dataclass
class Peaks:
    """The roofs: datasheet figures for the trace's GPU."""

    gpu: str
    bandwidth_tbs: float
    compute_tflops: dict[str, float]  # roof name -> peak TFLOP/s
    source: str


@dataclass
class Roofline:
    """Every sized kernel group against the GPU's roofs; what could not be sized and why."""

    gpu: str | None
    peaks: Peaks | None  # None: no roofs (unknown GPU), see ``note``
    points: list[Point] = field(default_factory=list)  # by time, longest first
    not_sized: list[NotSized] = field(default_factory=list)
    note: str | None = None  # why there are no points or no roofs, as a sentence
    kernel_time_us: float = 0.0  # all kernels in the trace
    near: float = NEAR
    assumptions: tuple[str, ...] = ASSUMPTIONS

    @property
    def sized(self) -> bool:
        return bool(self.points)

    @property
    def sized_share(self) -> float:
        return sum(p.share for p in self.points)

    def to_json(self, top: int | None = None) -> dict:
        """The roofline as JSON-ready data, every field's unit in its name."""
        pts = self.points if top is None else self.points[:top]
        return {
            "gpu": self.gpu,
            "note": self.note,
            "near_fraction_of_roof": self.near,
            "peaks": None if self.peaks is None else {
                "gpu": self.peaks.gpu, "peak_tbs": self.peaks.bandwidth_tbs,
                "peak_tflops": dict(self.peaks.compute_tflops), "source": self.peaks.source},
            "kernel_time_us": self.kernel_time_us,
            "sized_share_of_kernel_time": self.sized_share,
            "points": [{
                "kernel": p.kernel, "op": p.op, "kind": p.kind, "dtype": p.dtype, "input_dims": p.shape,
                "count": p.count, "flops_per_call": p.flops, "bytes_per_call": p.bytes, "time_us": p.time_us,
                "share_of_kernel_time": p.share, "achieved_tflops": p.achieved_tflops,
                "achieved_tbs": p.achieved_tbs, "intensity_flop_per_byte": p.intensity, "roof": p.roof,
                "peak_tflops": p.peak_tflops, "roof_tflops_at_intensity": p.roof_tflops,
                "fraction_of_roof": p.of_roof, "bound": p.bound, "other_roof": p.other_roof,
                "other_fraction_of_roof": p.other_of_roof, "other_bound": p.other_bound, "note": p.note,
            } for p in pts],
            "points_left_out": len(self.points) - len(pts),
            "not_sized": [{"reason": n.reason, "kernels": n.kernels, "time_us": n.time_us,
                           "share_of_kernel_time": n.share, "example": n.example} for n in self.not_sized],
            "assumptions": list(self.assumptions),
        }


def short_name(kernel: str, width: int = 40) -> str:
    """A kernel's name without ``void``, namespaces' template arguments and parameter list, cut to ``width``."""
    s = kernel.removeprefix("void ").replace("(anonymous namespace)::", "")
    cut = len(s)
    for ch in "<(":
        k = s.find(ch)
        if k > 0:
            cut = min(cut, k)
    base = s[:cut].rsplit("::", 1)[-1] or s[:cut]
    if base.lower().rstrip("0123456789") in ("kernel", "device_kernel") and s[cut:cut + 1] == "<":
        # a library's generic launcher (CUTLASS's Kernel<...>): the first template argument names the kernel
        inner = re.split(r"[<>,(]", s[cut + 1:], maxsplit=1)[0].strip()
        base = inner.rsplit("::", 1)[-1] or base
    s = base
    return s if len(s) <= width else s[:width - 1] + "…"


# --- the roofline --------------------------------------------------------------------------------


def peaks(gpu: str | None) -> Peaks | None:
    """The roofs for a GPU by name, from :mod:`helpers.facts.hardware`'s datasheets, or None for an unlisted GPU."""
    d = hardware.datasheet(gpu)
    if d is None:
        return None
    roofs = {ROOF_16: d.dense_tflops}
    if d.tf32_tflops is not None:
        roofs[ROOF_TF32] = d.tf32_tflops
    if d.fp32_tflops is not None:
        roofs[ROOF_FP32] = d.fp32_tflops
    return Peaks(gpu or "", d.bandwidth_tbs, roofs, d.source)


def _judge(flops_s: float, bytes_s: float, intensity: float, peak_tflops: float | None,
           bw_tbs: float) -> tuple[float | None, float | None, str | None]:
    """(roof at this intensity in TFLOP/s, achieved fraction of it, bound)."""
    if flops_s <= 0 or peak_tflops is None:  # no arithmetic, or no compute roof: the bandwidth roof alone
        frac = bytes_s / (bw_tbs * 1e12)
        return None, frac, MEMORY_BOUND if frac >= NEAR else FAR_BELOW
    mem_roof = intensity * bw_tbs  # TFLOP/s: FLOP/byte * TB/s
    roof = min(peak_tflops, mem_roof)
    frac = flops_s / 1e12 / roof
    if frac < NEAR:
        return roof, frac, FAR_BELOW
    return roof, frac, COMPUTE_BOUND if mem_roof >= peak_tflops else MEMORY_BOUND


def roofline(trace: Trace) -> Roofline:
    """Every GPU kernel whose op the trace sizes, against the GPU's roofs (see the module's docstring)."""
    memo = trace.memo.get("roofline")
    if memo is not None:
        return memo
    gpu = trace.device_name
    pk = peaks(gpu)
    fits = hardware.identify(trace.devices) if pk is None else None
    if fits is not None:  # a ROCm trace that names no GPU: its compute version and units say which
        pk = peaks(fits)
        pk = Peaks(f"{fits} (by its deviceProperties: the trace names it {gpu or 'nothing'!r})", pk.bandwidth_tbs,
                   pk.compute_tflops, pk.source)
    kernels = trace.on_gpu((KERNEL,))
    total = sum(map(trace.dur.__getitem__, kernels))
    r = Roofline(gpu, pk, kernel_time_us=total)
    if not kernels:
        r.note = "not sized: the trace has no GPU kernels"
    else:
        calls, left = _calls(trace, kernels)
        read = read_shapes(trace, None, ops=calls)
        if read.missing:
            r.note = read.missing
            r.not_sized.append(NotSized(read.missing.removeprefix("not sized: "), len(kernels), total,
                                        1.0 if total else 0.0, trace.name_of(kernels[0])))
        else:
            _fill(trace, r, calls, left, read, total)
        if pk is None and r.note is None:
            r.note = (f"no roofs: the GPU {gpu!r} has no datasheet in helpers/facts/hardware.py, so achieved "
                      "FLOP/s and bytes/s are shown without a bound" if gpu else
                      "no roofs: the trace names no GPU (no deviceProperties), so no datasheet applies")
    trace.memo["roofline"] = r
    return r


def _calls(trace: Trace, kernels: list[int]) -> tuple[dict[int, list[int]], dict[str, list[int]]]:
    """Op event -> the kernels it launched (the innermost ATen op around each launch); reason -> kernels without."""
    calls: dict[int, list[int]] = {}
    left: dict[str, list[int]] = {}
    launchers = trace.launchers(kernels)
    inner = innermost_ops(trace, [i for i in launchers if i >= 0])
    for j, i in zip(kernels, launchers):
        op = inner.get(i, -1) if i >= 0 else -1
        if op < 0:
            why = "its launch call is not in the trace" if i < 0 else "no ATen op around its launch call"
            left.setdefault(why, []).append(j)
            continue
        calls.setdefault(op, []).append(j)
    return calls, left


def _kind(cache: dict[tuple[str, str], str], kernel: str, op: str) -> str:
    """:func:`helpers.facts.kernel_kinds.classify`, once per (kernel, op): it runs regexes over long names."""
    kind = cache.get((kernel, op))
    if kind is None:
        kind = cache[kernel, op] = kk.classify(kernel, KERNEL, op)
    return kind


def _alike(trace: Trace, calls: dict[int, list[int]], shapes: ShapesRead) -> list[tuple[int, list[int], int, list[int]]]:
    """The op calls to size, as (an op, its kernels, how many calls it stands for, all their kernels): the calls
    of one kernel each with the same op, shapes and kernel name taken once (a model's thousands of calls repeat
    a few: each is sized, named and classified once, not once a call). The first call of each stands for it, at
    its place in ``calls``."""
    ops = list(calls)
    numbers = shapes.numbers(ops)
    if numbers is None:
        return [(op, ks, 1, ks) for op, ks in calls.items()]
    kss = list(calls.values())
    name_id = trace.name_id
    # an op of several kernels gets a key of its own (a negative kernel code no name has)
    kernel = [name_id[ks[0]] if len(ks) == 1 else -1 - r for r, ks in enumerate(kss)]
    return [(ops[rows[0]], kss[rows[0]], len(rows), kss[rows[0]] if len(rows) == 1 else
             [j for r in rows for j in kss[r]])
            for rows in vector.alike([list(map(name_id.__getitem__, ops)), numbers, kernel])]


def _fill(trace: Trace, r: Roofline, calls: dict[int, list[int]], left: dict[str, list[int]], shapes: ShapesRead,
          total: float) -> None:
    groups: dict[tuple, list] = {}  # (kernel, op, shape, dtype) -> [count, time, work]
    kinds: dict[tuple[str, str], str] = {}  # (kernel, op) -> its kind
    sized: dict[tuple, Work | str] = {}  # the same op with the same shapes, sized once
    dur = trace.dur
    for op, ks, count, every in _alike(trace, calls, shapes):
        name = trace.name_of(op)
        rec = shapes.of(trace, op)
        main = max(ks, key=dur.__getitem__)
        if name in GEMM_OPS or name in CONV_OPS:
            # named after its longest GEMM kernel, not a layout transform or a reduction launched beside it
            gemm = [j for j in ks if _kind(kinds, trace.name_of(j), name) == kk.GEMM]
            # of those, one whose name says its arithmetic (kernel_kinds.gemm_math): a real matrix multiply
            mma = [j for j in gemm if kk.gemm_math(trace.name_of(j)) is not None]
            main = max(mma or gemm or ks, key=dur.__getitem__)
        kname = trace.name_of(main)
        if rec is None:
            left.setdefault(f"{name}: no Input Dims recorded for it", []).extend(every)
            continue
        kind = _kind(kinds, kname, name)
        key = (name, kind, rec.key)
        w = sized.get(key)
        if w is None:
            try:
                w = size_op(name, rec.shapes(), kind)
            except (ValueError, TypeError, IndexError, ZeroDivisionError) as e:  # shapes no rule expected
                w = f"its shapes could not be read ({type(e).__name__})"
            sized[key] = w
        if isinstance(w, str):
            left.setdefault(f"{name}: {w}", []).extend(every)
            continue
        key = (kname, name, w.shape, w.dtype)
        g = groups.get(key)
        t = sum(map(dur.__getitem__, every))
        if g is None:
            groups[key] = [count, t, w]
        else:
            g[0] += count
            g[1] += t
    for (kname, op, shape, dtype), (count, t, w) in groups.items():
        r.points.append(_point(r.peaks, kname, op, w, count, t, total))
    r.points.sort(key=lambda p: -p.time_us)
    for reason, ks in left.items():
        t = sum(map(trace.dur.__getitem__, ks))
        op = innermost_op(trace, trace.launch_of(ks[0])) if trace.launch_of(ks[0]) >= 0 else -1
        example = trace.name_of(ks[0]) + (f" (under {trace.name_of(op)})" if op >= 0 else "")
        r.not_sized.append(NotSized(reason, len(ks), t, t / total if total else 0.0, example))
    r.not_sized.sort(key=lambda n: -n.time_us)
    if not r.points:
        r.note = "not sized: no kernel's op could be sized (the reasons follow)"


def _point(pk: Peaks | None, kname: str, op: str, w: Work, count: int, t_us: float, total: float) -> Point:
    secs = t_us * 1e-6
    flops_s = w.flops * count / secs if secs > 0 else 0.0
    bytes_s = w.bytes * count / secs if secs > 0 else 0.0
    intensity = w.flops / w.bytes if w.bytes else math.inf
    p = Point(kname, op, w.kind, w.dtype or "?", w.shape, count, w.flops, w.bytes, t_us,
              t_us / total if total else 0.0, flops_s / 1e12, bytes_s / 1e12, intensity)
    if pk is None or secs <= 0:
        return p
    roof, other, note = _roof_for(pk, w, kname, flops_s)
    p.note = note
    if roof is None and w.flops > 0:
        p.note = f"no {w.dtype} compute peak in helpers/facts/hardware.py: judged against the bandwidth roof alone"
    p.roof, p.peak_tflops = roof, pk.compute_tflops.get(roof) if roof else None
    p.roof_tflops, p.of_roof, p.bound = _judge(flops_s, bytes_s, intensity, p.peak_tflops, pk.bandwidth_tbs)
    if p.of_roof is not None and p.of_roof > 1:
        p.note = ((p.note + "; ") if p.note else "") + (
            "above the roof at its intensity: a hypothesis is that part of its data came from the L2 cache, "
            "or that it moved less than the inputs and output counted here")
    if other is not None:
        p.other_roof = other
        _, p.other_of_roof, p.other_bound = _judge(flops_s, bytes_s, intensity, pk.compute_tflops[other],
                                                   pk.bandwidth_tbs)
    return p


def _roof_for(pk: Peaks, w: Work, kname: str, flops_s: float) -> tuple[str | None, str | None, str | None]:
    """(the compute roof judged against, an alternative roof or None, a note or None)."""
    roofs = pk.compute_tflops
    if w.kind not in ("gemm", "conv"):
        # ATen computes bf16/fp16 elementwise math in float32 (its opmath type), on the CUDA cores
        return (ROOF_FP32 if ROOF_FP32 in roofs else None), None, None
    if w.dtype in ("bf16", "fp16"):
        return ROOF_16, None, None
    if w.dtype == "fp32":
        if ROOF_FP32 not in roofs:
            return None, None, None
        math_ = kk.gemm_math(kname)
        if ROOF_TF32 not in roofs:
            return ROOF_FP32, None, None
        if math_ == kk.TF32:
            return ROOF_TF32, None, "the kernel's name says TF32"
        if flops_s / 1e12 > roofs[ROOF_FP32]:
            return ROOF_TF32, None, ("faster than the FP32 CUDA cores' peak: it ran on TF32 tensor cores "
                                     "(TF32 allowed)")
        if math_ == kk.FP32_SIMT:
            return ROOF_FP32, None, "the kernel's name says FP32 on the CUDA cores"
        return ROOF_FP32, ROOF_TF32, ("fp32: the FP32 CUDA cores' roof; the TF32 roof applies instead if TF32 "
                                      "was allowed (allow_tf32 / set_float32_matmul_precision('high')), "
                                      "which the trace does not record")
    return None, None, None


# --- which bound holds the GPU's time ------------------------------------------------------------------------


@dataclass
class Dominant:
    """The bound (compute, memory, far below both) that holds most of a trace's kernel time, by the roofline."""

    bound: str  # COMPUTE_BOUND, MEMORY_BOUND or FAR_BELOW
    share: float  # of all kernel time in the trace
    of_roof: float  # the fraction of the roof at their intensity its kernels reach: the median, weighted by time
    roofs: list[str]  # the compute roofs its kernels are judged against (compute-bound), longest first
    shares: dict[str, float]  # every bound's share of all kernel time
    longest: dict[str, str] = field(default_factory=dict)  # every bound's longest group: "kernel (op)"


def _weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The median of the values, each counted as often as its weight: (value, weight) pairs."""
    pairs = sorted(pairs)
    half = sum(w for _, w in pairs) / 2
    run = 0.0
    for v, w in pairs:
        run += w
        if run >= half:
            return v
    return pairs[-1][0]


def dominant(r: Roofline) -> Dominant | None:
    """The bound holding at least half the trace's kernel time, or None (no roofs, too little sized, or a mix)."""
    judged = [p for p in r.points if p.bound is not None and p.of_roof is not None]
    shares: dict[str, float] = {}
    for p in judged:
        shares[p.bound] = shares.get(p.bound, 0.0) + p.share
    if not shares:
        return None
    bound, share = max(shares.items(), key=lambda kv: kv[1])
    if share < 0.5:
        return None
    mine = [p for p in judged if p.bound == bound]
    roofs: dict[str, float] = {}
    for p in mine:
        if p.roof and bound == COMPUTE_BOUND:
            roofs[p.roof] = roofs.get(p.roof, 0.0) + p.time_us
    longest: dict[str, str] = {}
    for p in sorted(judged, key=lambda p: -p.time_us):
        longest.setdefault(p.bound, f"{p.label} ({p.op})")
    return Dominant(bound, share, _weighted_median([(p.of_roof, p.time_us) for p in mine]),
                    sorted(roofs, key=lambda k: -roofs[k]), shares, longest)


def dominant_text(d: Dominant) -> str:
    """One line on what holds the GPU's time, as diagnose's GPU-bound finding words it (the other bounds that hold a
    tenth of it or more too: the longest kernel may be in one of them)."""
    words = {COMPUTE_BOUND: "compute-bound kernels", MEMORY_BOUND: "memory-bound kernels",
             FAR_BELOW: "kernels far below both roofs"}
    rest = "; ".join(f"{v:.0%} in {words[k]}" + (f" (the longest: {d.longest[k]})" if k in d.longest else "")
                     for k, v in sorted(d.shares.items(), key=lambda kv: -kv[1]) if k != d.bound and v >= 0.1)
    return _dominant_words(d) + (f"; the rest: {rest}" if rest else "")


def _dominant_words(d: Dominant) -> str:
    head = (f"by the roofline (each kernel's rate against the GPU's peaks, as python -m helpers summarize prints "
            f"it), {d.share:.0%} of the kernel time is in ")
    most = f"{1 / d.of_roof:.2g}x" if d.of_roof > 0 else "-"
    if d.bound == MEMORY_BOUND:
        return (head + f"memory-bound kernels, at a median {d.of_roof:.0%} of the memory roof at their intensity "
                "(their arithmetic per byte moved, which sets how fast the memory lets them go) "
                f"(weighted by time: a kernel there can go at most {most} faster moving the same bytes); moving "
                "fewer bytes (fusing them: fewer passes over memory) is what would shorten them")
    if d.bound == COMPUTE_BOUND:
        return (head + f"compute-bound kernels, at a median {d.of_roof:.0%} of the {' and '.join(d.roofs)} peak "
                f"(weighted by time: a kernel there can go at most {most} faster with the same arithmetic in the "
                "same precision)")
    return (head + f"kernels far below both roofs, at a median {d.of_roof:.0%} of the roof at their intensity "
            "(their arithmetic per byte moved; weighted by time): not the GPU's peaks set their pace but how the kernels use it; hypotheses to test "
            "on the longest: a memory access that wastes bandwidth (a broadcast, a strided layout), too little work "
            "per kernel to fill the GPU, or waiting on memory latency")


# --- as text ------------------------------------------------------------------------------------

_BOUND_SHORT = {COMPUTE_BOUND: "compute-bound", MEMORY_BOUND: "memory-bound", FAR_BELOW: "far below both"}


def _num(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:,.0f}"


def roofline_text(r: Roofline, top: int = 10) -> list[str]:
    """The roofline's lines for ``python -m helpers summarize``: the top kernel groups by time, what was left out."""
    out = ["", "roofline (achieved against the datasheet's roofs; " + (
        f"near a roof: at least {r.near:.0%} of it at the kernel's FLOP/byte):")]
    if r.peaks is not None:
        roofs = ", ".join(f"{k} {_num(v, 4)} TFLOP/s" for k, v in r.peaks.compute_tflops.items())
        out.append(f"  {r.peaks.gpu}: {roofs}; memory {_num(r.peaks.bandwidth_tbs)} TB/s")
    if r.note:
        out.append(f"  {r.note}")
    if r.points:
        out.append("  work from each op's Input Dims: GEMM 2*M*N*K FLOPs; elementwise and reductions 1 FLOP an element; "
                   "bytes: inputs read and output written once (the assumptions: --json's roofline.assumptions)")
        out.append(f"  {'GPU time':>10} {'share':>6} {'TFLOP/s':>8} {'TB/s':>6} {'FLOP/B':>7}  {'bound':<15} "
                   "kernel (op, dtype, calls)")
        for p in r.points[:top]:
            bound = _BOUND_SHORT.get(p.bound or "", "-")
            if p.other_bound:
                bound += f" ({_BOUND_SHORT.get(p.other_bound)} vs TF32)"
            out.append(f"  {p.time_us:>8.1f}us {p.share:>6.1%} {_num(p.achieved_tflops):>8} {_num(p.achieved_tbs):>6} "
                       f"{_num(p.intensity):>7}  {bound:<15} {p.label} ({p.op}, {p.dtype}, {p.count})")
        if len(r.points) > top:
            out.append(f"  ... {len(r.points) - top} more groups")
        out.append(f"  sized: {r.sized_share:.1%} of kernel time")
    if len(r.not_sized) == 1 and r.note and r.not_sized[0].reason in r.note:
        return out  # the note said why
    for n in r.not_sized[:3]:
        out.append(f"  not sized: {n.share:.1%} of kernel time, {n.kernels} kernels: {n.reason}")
    if len(r.not_sized) > 3:
        rest = r.not_sized[3:]
        out.append(f"  not sized: {sum(n.share for n in rest):.1%} more, for {len(rest)} other reasons")
    return out
