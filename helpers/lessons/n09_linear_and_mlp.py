"""Notebook 09's questions: what one nn.Linear runs, what compile costs it, what compile fuses in a GeGLU MLP,
what the fusion saves, and whether the time saved follows the bytes saved."""

from __future__ import annotations

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import gpu_calls, hardware, measure, roofline as roofline_mod, kernel_kinds as kk
from ..facts.measure import Spread
from ..runs.mode import environment
from ..facts.text import chain_text, counts_text, nbytes, short, us
from ..runs.workload import geglu_traffic
from . import _shared

# --- 09.linear ---------------------------------------------------------------------------------------------

LINEAR_CHOICES = ["1", "2", "3 or more"]


def linear_choice(lin) -> str:
    n = sum(facts.work_per_call(lin.trace).values())
    return str(n) if n < 3 else LINEAR_CHOICES[2]


def linear(lin) -> None:
    """09.linear: how many pieces of GPU work one nn.Linear(32, 64) call runs."""
    gemm = facts.top_kernel(lin.trace, kk.GEMM)
    actual = linear_choice(lin)

    def reveal(answer):
        print(chain_text(facts.dispatch_chain(lin.trace)))
        per_call = facts.work_per_call(lin.trace)
        n = sum(per_call.values())
        names = facts.dispatch_chain(lin.trace).names()
        copies = per_call.get(kk.COPY, 0)
        t_text = ("<code>aten::linear</code> calls <code>aten::t</code>, which launches nothing (the chain shows no "
                  "GPU work under it: it transposes the weight by swapping its strides), then "
                  "<code>aten::addmm</code> with the layer's 1-D bias. " if "aten::t" in names and
                  "aten::addmm" in names else "")
        return widgets.verdict(
            answer == actual,
            f"One call runs <b>{n}</b> piece(s) of GPU work: {counts_text(per_call)}. {t_text}"
            + ("No device-to-device copy: that is the 1-D bias path notebook 08 met, where the bias goes to the "
               "GEMM's epilogue instead of into the output first. "
               if not copies else "A copy runs here: on this GPU the bias is written into the output first. ")
            + f"The kernel is {show.code(gemm.name, 70)}. So eager <code>nn.Linear</code> is not what compile made "
            "of notebook 08's matmul + add (a full-matrix bias, copied); it is what the 1-D bias gave there.",
            actual=actual)

    widgets.ask("09.linear", "How many kernels, copies and fills does one nn.Linear(32, 64) call (with bias) run on "
                "the GPU?", choices=LINEAR_CHOICES, default="2", reveal=reveal,
                decides=lambda: [spoilers.name(gemm.name)])


def cpu_linear(lin, lin_cpu) -> None:
    """The same Linear on this CPU, once 09.linear is answered."""
    @widgets.measured_here()  # the CPU chain's times are measured now, on this CPU
    def show_it():
        print(chain_text(facts.dispatch_chain(lin_cpu.trace), gpu=False))
        cpu = ", ".join(f"`{n}`" for n in facts.child_ops(lin_cpu.trace, "aten::addmm")) or "no further ops"
        gpu = ", ".join(f"`{n}`" for n in facts.child_ops(lin.trace, "aten::addmm")) or "no further ops, only the launch"
        show.md(f"Inside `aten::addmm` on the CPU: {cpu}; on the GPU: {gpu}.")
    widgets.after("09.linear", show_it)


# --- 09.linear-compile -------------------------------------------------------------------------------------

TAX_CHOICES = ["cheaper than eager", "about the same", "clearly dearer than eager"]
TAX_EDGES = [0.9, 1.2]


def _fmt_x(v: float) -> str:
    return f"{v:.2f}x"


def linear_compile_graded(timed, answer=None) -> measure.Graded:
    """Compiled over eager, one Linear call's CPU time, unprofiled and round by round."""
    return measure.grade_choice(answer, timed.ratio("compiled", "eager"), TAX_EDGES, TAX_CHOICES, fmt=_fmt_x)


def linear_compile(lin, lin_c, timed) -> None:
    """09.linear-compile: compiled, does one Linear call cost more or less CPU time than eager?"""
    ratio = timed.ratio("compiled", "eager")

    def reveal(answer):
        g = linear_compile_graded(timed, answer)
        rows = []
        for label, r in (("eager", lin), ("compiled", lin_c)):
            rows.append((label, *_shared.against_timed(r, timed, label), us(r.gpu_per_call_us),
                         ", ".join(short(k.name, 50) for k in facts.kernels(r.trace))))
        show.table(rows, ["", "CPU time per call, profiled (trace)", "unprofiled, timed in turn",
                          "profiled / unprofiled", "GPU time per call", "kernels"])
        _shared.spread_figure({k: timed.spread(k) for k in ("eager", "compiled")},
                              title="nn.Linear(32, 64): one call's CPU time, timed in turn without the profiler")
        e, c = lin.cpu_per_call_us, lin_c.cpu_per_call_us
        prof_choice = measure.bucket(c / e, TAX_EDGES, TAX_CHOICES)
        same_gpu = [k.name for k in facts.kernels(lin.trace)] == [k.name for k in facts.kernels(lin_c.trace)]
        return widgets.grade(
            g, f"Without the profiler ({timed.source}), one compiled call costs <b>{_fmt_x(ratio.median)}</b> the "
            f"CPU time of an eager one ({us(timed.spread('compiled').median)} against "
            f"{us(timed.spread('eager').median)}). In the traces: {us(c)} against {us(e)} ({c / e:.2f}x), "
            + _shared.profiled_says(prof_choice, g, "the profiler stretches the two calls differently (the "
                                    "table's fourth column)")
            + ("The GPU runs the same kernel either way, so there was nothing for compile to fuse: what it adds is "
               "its per-call stack on the CPU (notebook 08)." if same_gpu else
               "The GPU work changed too: compare the kernels above."), live=environment().live)

    widgets.ask("09.linear-compile", "Compiled, will one Linear call cost more or less CPU time than eager?",
                choices=TAX_CHOICES, default="cheaper than eager", reveal=reveal,
                decides=lambda: [spoilers.Fact("name", f"{ratio.median:.2f}x the CPU time"),
                                 spoilers.Fact("name", f"{us(timed.spread('compiled').median)} against "
                                                       f"{us(timed.spread('eager').median)}")])


# --- 09.mlp and what the fusion saves ----------------------------------------------------------------------

ELEM_CHOICES = ["none: folded into the GEMMs", "1", "2, as in eager", "more than 2"]  # by count: 0, 1, 2, 3+


def mlp_choice(m_c) -> str:
    pc = facts.work_per_call(m_c.trace)
    return ELEM_CHOICES[min(pc.get(kk.ELEMENTWISE, 0) + pc.get(kk.TRITON, 0), 3)]


def mlp(m_e, m_c) -> None:
    """09.mlp: after compile, how many elementwise kernels run between the MLP's GEMMs?"""
    actual = mlp_choice(m_c)
    fused = [k for k in facts.kernels(m_c.trace) if k.kind == kk.TRITON]

    def reveal(answer):
        rows = []
        for label, r in (("eager", m_e), ("compiled", m_c)):
            for k in facts.kernels(r.trace):
                rows.append((label, k.kind, short(k.name, 70), k.count, us(k.median_us)))
        show.table(rows, ["", "kind", "kernel", "count", "median"])
        pe, pc = facts.work_per_call(m_e.trace), facts.work_per_call(m_c.trace)
        ge = {k.name for k in facts.kernels(m_e.trace) if k.kind == kk.GEMM}
        gc = {k.name for k in facts.kernels(m_c.trace) if k.kind == kk.GEMM}
        return widgets.verdict(
            answer == actual,
            f"Per call, eager runs {counts_text(pe)}; compiled runs {counts_text(pc)}. "
            + (f"Inductor generated {show.code(fused[0].name)}: its name lists what it fused. " if fused else "")
            + ("The GEMM kernels are the same as in eager mode: only the elementwise chain between them changed."
               if ge == gc else "The GEMM kernels changed too: compare their names above."), actual=actual)

    widgets.ask("09.mlp", "After torch.compile, how many elementwise kernels run between the MLP's GEMMs per call?",
                choices=ELEM_CHOICES, default="2, as in eager", reveal=reveal,
                decides=lambda: [spoilers.name(k.name) for k in fused])


def _elementwise(run) -> Spread:
    """GPU time per call of the MLP's elementwise part: gelu + mul eager, the generated kernel compiled."""
    return gpu_calls.per_call(run, gpu_calls.of_kind(kk.ELEMENTWISE, kk.TRITON))


def saved_per_call(e, c) -> Spread:
    """GPU time the fusion saves per call: every pairing of the eager run's calls with the compiled run's."""
    return gpu_calls.pairs(_elementwise(e), _elementwise(c), lambda x, y: x - y)


def fusion_savings(m_e, m_c) -> None:
    """What the fusion saves, in bytes (from the shapes) and in GPU time (from the traces), once 09.mlp is answered."""
    def show_it():
        traffic = geglu_traffic(m_e.workload, m_e.dtype)
        eager_t, fused_t = _elementwise(m_e), _elementwise(m_c)
        if not (eager_t.n and fused_t.n and any(k.kind == kk.TRITON for k in facts.kernels(m_c.trace))):
            show.md("These traces do not hold both an eager elementwise pair and a fused kernel to compare.")
            return
        et, ft = eager_t.median, fused_t.median
        show.table([("eager: gelu, then mul", nbytes(traffic["eager"]), eager_t.text(),
                     f"{traffic['eager'] / et / 1e6:.2f} TB/s"),
                    ("fused Triton kernel", nbytes(traffic["fused"]), fused_t.text(),
                     f"{traffic['fused'] / ft / 1e6:.2f} TB/s")],
                   ["elementwise part", "HBM traffic (from shapes)", "GPU time per call (trace, each recorded call)",
                    "achieved bandwidth (median)"])
        show.display_figure(plots.paired_bars({"eager: gelu, then mul": (traffic["eager"] / 2**20, et),
                                               "fused": (traffic["fused"] / 2**20, ft)},
                                              ("HBM traffic (MiB, from shapes)", "GPU time per call (us, trace)"),
                                              unit="", title="The elementwise part of the MLP: bytes moved and "
                                                             "time, eager against fused"))
        bw = hardware.datasheet_bandwidth_tbs(m_e.device)
        vs = (f" The vendor's datasheet (<a href='https://www.nvidia.com/en-us/data-center/'>NVIDIA's data-center "
              f"GPU pages</a>) gives {bw} TB/s of memory bandwidth for this GPU; the eager kernels reach "
              f"{traffic['eager'] / et / 1e6 / bw:.0%} of it and the fused one {traffic['fused'] / ft / 1e6 / bw:.0%}."
              " Kernels that run near that ceiling are limited by memory traffic, and for them moving fewer bytes is "
              "the way to go faster; how near is near enough is a judgement, so compare the two rows." if bw else "")
        mb = article.fig("mlp_intermediate")
        saved = saved_per_call(m_e, m_c)
        lo, hi = min(saved.samples), max(saved.samples)
        show.md(f"The intermediate is {nbytes(traffic['intermediate'])} ({m_e.dtype}; {mb.quote()}); fusing saves "
                f"writing it and reading it back: **{nbytes(traffic['saved'])}** per call, and **{us(saved.median)}** "
                f"of GPU time per call in these traces ({us(lo)} to {us(hi)} over every pairing of the recorded "
                f"calls).{vs}")
    widgets.after("09.mlp", show_it)


# --- 09.why-fusion ---------------------------------------------------------------------------------------

SAVE_CHOICES = ["about double (1.7x to 2.3x): the saving follows the bytes", "less than that", "more than that"]
SAVE_EDGES = [1.7, 2.3]
_SAVE_ORDER = [SAVE_CHOICES[1], SAVE_CHOICES[0], SAVE_CHOICES[2]]  # below 1.7, 1.7 to 2.3, above


def saving_growth(m_e, m_c, m2_e, m2_c) -> Spread:
    """Time saved at the larger batch over time saved at the smaller, over every pairing of the four runs' calls."""
    return gpu_calls.pairs(saved_per_call(m2_e, m2_c), saved_per_call(m_e, m_c), lambda x, y: x / y, "x")


def why_fusion_graded(m_e, m_c, m2_e, m2_c, answer=None) -> measure.Graded:
    return measure.grade_choice(answer, saving_growth(m_e, m_c, m2_e, m2_c), SAVE_EDGES, _SAVE_ORDER, fmt=_fmt_x)


def _bytes_of(run, op: str | None, kind: str) -> int | None:
    """HBM bytes one elementwise kernel moves, from the shapes: gelu reads g and writes its result (2 tensors),
    mul reads that and u and writes the product (3), the fused kernel reads g and u and writes the product (3)."""
    one = geglu_traffic(run.workload, run.dtype)["intermediate"]
    if kind == kk.TRITON:
        return 3 * one
    return {"aten::gelu": 2 * one, "aten::mul": 3 * one}.get(op or "")


def configurations(*runs) -> list[dict]:
    """Each elementwise or generated kernel of the runs: its launch configuration as the trace records it, its
    time per call (every recorded call) and the bandwidth it reached on the bytes the shapes say it moves."""
    out = []
    for r in runs:
        t = r.trace
        for k in facts.kernels(t):
            if k.kind not in (kk.ELEMENTWISE, kk.TRITON):
                continue
            idx = [j for j in facts.gpu_work(t) if t.name_of(j) == k.name]
            op = facts.launching_op(t, idx[0]) if idx else None
            times = Spread.of([t.dur[j] for j in idx])
            b = _bytes_of(r, op, k.kind)
            res = k.resources
            out.append({"run": r, "batch": r.workload.p["batch"], "kind": k.kind, "name": k.name,
                        "what": "fused (generated)" if k.kind == kk.TRITON else (op or k.name),
                        "grid": res.grid, "block": res.block, "registers": res.registers_per_thread,
                        "shared": res.shared_memory, "times": times, "bytes": b,
                        "tbs": b / times.median / 1e6 if b and times.n else None})
    return out


def _dims(v) -> str:
    return " x ".join(str(x) for x in v) if v else "-"


def _config_sentence(small: dict, large: dict) -> str:
    """What changed in one kernel's launch between the two sizes, from the trace."""
    changes = [f"{what} {a} to {b}" for what, a, b in (
        ("threads per block", _dims(small["block"]), _dims(large["block"])),
        ("registers per thread", small["registers"], large["registers"]),
        ("shared memory", small["shared"], large["shared"])) if a != b]
    grid = f"its grid went from {_dims(small['grid'])} to {_dims(large['grid'])} blocks"
    bw = (f", its bandwidth from {small['tbs']:.2f} to {large['tbs']:.2f} TB/s" if small["tbs"] and large["tbs"]
          else "")
    if changes:
        return f"its launch configuration changed ({'; '.join(changes)}), {grid}{bw}"
    return f"it kept its launch configuration (threads per block and registers per thread alike), {grid}{bw}"


def _saved_words(s: Spread) -> str:
    """'56.1 us (55.6 us to 57.2 us)': time saved per call and its range, as 09.why-fusion's table prints it."""
    return f"{us(s.median)} ({us(min(s.samples))} to {us(max(s.samples))})"


def why_fusion(m_e, m_c, m2_e, m2_c) -> None:
    """09.why-fusion: with twice the batch, how much more GPU time per call does the fusion save?"""
    growth = saving_growth(m_e, m_c, m2_e, m2_c)

    def reveal(answer):
        g = why_fusion_graded(m_e, m_c, m2_e, m2_c, answer)
        rows = []
        for e, c in ((m_e, m_c), (m2_e, m2_c)):
            s = saved_per_call(e, c)
            rows.append((f"batch {e.workload.p['batch']}", nbytes(geglu_traffic(e.workload, e.dtype)["saved"]),
                         us(_elementwise(e).median), us(_elementwise(c).median),
                         _saved_words(s)))
        show.table(rows, ["", "bytes saved (shapes)", "eager gelu + mul", "fused", "time saved per call (range)"])
        conf = configurations(m_e, m_c, m2_e, m2_c)
        show.table([(f"batch {c['batch']}", c["what"], short(c["name"], 50), _dims(c["grid"]), _dims(c["block"]),
                     c["registers"], c["shared"], c["times"].text(), nbytes(c["bytes"]) if c["bytes"] else "-",
                     f"{c['tbs']:.2f} TB/s" if c["tbs"] else "-") for c in conf],
                   ["", "kernel", "name", "grid", "threads per block", "registers per thread", "shared memory",
                    "time per call (trace)", "bytes (shapes)", "bandwidth"])
        fused = {c["batch"]: c for c in conf if c["kind"] == kk.TRITON}
        sentence = ""
        if len(fused) == 2:
            small, large = (fused[b] for b in sorted(fused))
            sentence = f" The generated kernel, from the table: {_config_sentence(small, large)}."
        if g.actual == SAVE_CHOICES[0]:
            reading = "The saving followed the bytes, which is what memory-bound kernels predict."
        elif g.actual == SAVE_CHOICES[1]:
            reading = ("Less than the bytes predict. Which kernel moved its bytes more slowly at the larger size is in "
                       "the bandwidth column; why (its launch configuration, or data no longer fitting in L2) is a "
                       "hypothesis the table alone cannot settle: a third size would test it.")
        else:
            reading = ("More than the bytes predict. The bandwidth column says which kernels moved their bytes faster "
                       "at the larger size; a fixed cost per kernel weighing more at the smaller size is one "
                       "explanation, which a third size would test.")
        return widgets.grade(
            g, f"Twice the bytes saved, <b>{_fmt_x(growth.median)}</b> the time saved. {reading}{sentence}",
            live=False)

    widgets.ask("09.why-fusion", "With twice the batch, how much more GPU time per call will the fusion save?",
                choices=SAVE_CHOICES, default=SAVE_CHOICES[2], reveal=reveal,
                decides=lambda: [spoilers.Fact("name", f"{growth.median:.2f}x the time saved")]
                + [spoilers.Fact("name", _saved_words(saved_per_call(m2_e, m2_c)))])


# --- 09.perfetto and the exercise --------------------------------------------------------------------------

def perfetto_registers(m_c) -> None:
    """09.perfetto: the generated kernel's registers per thread (asked once 09.mlp is answered: the prompt names
    the Triton kernel)."""
    k = facts.top_kernel(m_c.trace, kk.TRITON)

    def reveal(found):
        if k is None:
            return widgets.verdict(None, "The compiled trace holds no Triton kernel to find.")
        regs = k.resources.registers_per_thread
        return widgets.verdict(found == regs, f"{show.code(k.name)} uses <b>{regs}</b> registers per thread.",
                               actual=regs)

    widgets.after("09.mlp", lambda: widgets.ask(
        "09.perfetto", "In the compiled MLP trace, click the Triton kernel. How many registers per thread does it use?",
        unit="registers", default=0, reveal=reveal, kind="task",
        decides=lambda: [spoilers.value(k.resources.registers_per_thread, "registers")] if k else []))


def exercise_hidden(m_e) -> None:
    """The "wider MLP" exercise: the bytes the fusion saves at hidden 6144, from the shapes."""
    from ..runs.workload import mlp as mlp_workload

    def solution():
        wider = mlp_workload(hidden=6144)
        a, b = geglu_traffic(m_e.workload, m_e.dtype), geglu_traffic(wider, m_e.dtype)
        show.md(f"With hidden 6144 the intermediate is {nbytes(b['intermediate'])} and the fusion saves "
                f"{nbytes(b['saved'])} per call, against {nbytes(a['saved'])} at 3072: the saving is one write and one "
                "read of the intermediate, so it grows with the hidden size, linearly.")

    widgets.exercise("a wider MLP",
                     "With a hidden size of 6144 instead of 3072, how many bytes per call will the fusion save? Work "
                     "it out from the shapes, then ask for the solution.", solution)


# --- the roofline -------------------------------------------------------------------------------------------


def _roof_phrase(p) -> str:
    """'`aten::mm` [[8192,768],[768,3072]] (... TFLOP/s at ... FLOP/byte: ...% of the ... roof there)'."""
    if p.bound == roofline_mod.MEMORY_BOUND:
        got, roof = f"{p.achieved_tbs:.3g} TB/s", "the memory roof"
    else:
        got = f"{p.achieved_tflops:.3g} TFLOP/s"
        roof = f"the {p.roof} roof" if p.bound == roofline_mod.COMPUTE_BOUND else "the roof"
    return (f"<code>{p.op}</code> {p.shape} ({got} over all its calls at {p.intensity:.3g} FLOP/byte: {p.of_roof:.0%} "
            f"of {roof} there)")


def roofline_sentences(r) -> list[str]:
    """One sentence per bound (compute, memory, far below both) naming the groups there, computed from ``r``."""
    if not r.points:
        return [r.note or "Nothing here could be sized."]
    if r.peaks is None:
        return [r.note or "No roofs for this GPU."]
    out = []
    for bound, where in ((roofline_mod.COMPUTE_BOUND, "Near the compute roof"),
                         (roofline_mod.MEMORY_BOUND, "Near the memory roof"),
                         (roofline_mod.FAR_BELOW, "Far below both roofs")):
        ps = [p for p in r.points if p.bound == bound]
        if ps:
            out.append(f"{where}: " + "; ".join(_roof_phrase(p) for p in ps) + ".")
    return out


def roofline(m_e, lin) -> None:
    """The eager MLP's kernels on the GPU's roofline (and the small Linear's), with sentences computed from them."""
    r = roofline_mod.roofline(m_e.trace)
    if not r.points:
        show.md(f"The MLP's trace gives no roofline: {r.note}")
        return
    show.display_figure(plots.roofline(r, title=f"the eager MLP's kernels on the roofline of {r.gpu}"))
    if r.peaks is not None:
        show.md(f"The roofs are the datasheet's ({r.peaks.source}); a kernel is *near* a roof when it reaches at "
                f"least {r.near:.0%} of the roof at its own FLOP per byte.")
    show.md(" ".join(roofline_sentences(r)))
    small = roofline_mod.roofline(lin.trace)
    gemms = [p for p in small.points if p.kind == "gemm"]
    if gemms and small.peaks is not None:
        p = gemms[0]
        where = {roofline_mod.COMPUTE_BOUND: "near the compute roof", roofline_mod.MEMORY_BOUND: "near the memory roof",
                 roofline_mod.FAR_BELOW: "far below both roofs"}[p.bound]
        show.md(f"The single Linear of the first section is another story: its GEMM {p.shape} reaches "
                f"{p.achieved_tflops:.3g} TFLOP/s, {p.of_roof:.0%} of the roof at its {p.intensity:.3g} FLOP/byte: "
                f"{where}. " + ("A hypothesis the roofline cannot prove alone: at this size a kernel ends before it "
                                "can keep the GPU busy, so its time goes to starting and finishing, not to "
                                "arithmetic or memory." if p.bound == roofline_mod.FAR_BELOW else ""))
