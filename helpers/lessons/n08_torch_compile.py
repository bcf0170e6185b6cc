"""Notebook 08's questions: what compile runs on the GPU, where the copy comes from, what compile costs the CPU
(at 4096 against the article, at 64 against eager and reduce-overhead), and what a recompile looks like."""

from __future__ import annotations

import html

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import measure, kernel_kinds as kk
from ..facts.measure import Estimate
from ..runs.mode import environment
from ..facts.text import chain_text, counts_text, nbytes, short, us
from . import _shared

# --- 08.gpu-work -------------------------------------------------------------------------------------------

WORK_CHOICES = ["one kernel: the matmul and the add fused", "a GEMM and an elementwise add, as in eager",
                "a GEMM and a memory copy", "a Triton kernel and a GEMM"]


def compiled_choice(work: dict) -> str | None:
    """The choice a step's GPU work (by kind) falls in."""
    if work.get(kk.TRITON):
        return WORK_CHOICES[3]
    if work.get(kk.GEMM) and work.get(kk.COPY) and not work.get(kk.ELEMENTWISE):
        return WORK_CHOICES[2]
    if work.get(kk.GEMM) and work.get(kk.ELEMENTWISE):
        return WORK_CHOICES[1]
    return WORK_CHOICES[0] if sum(v for k, v in work.items() if k != kk.FILL) == 1 else None


def _copy(run) -> facts.CopyStat | None:
    return next((r for r in facts.copies(run.trace) if r.kind == kk.COPY), None)


def _copy_words(copy: facts.CopyStat) -> str:
    """'32.0 MiB each, 15.6 us': the copy's size and time per call, as 08.gpu-work's reveal prints them."""
    return f"{nbytes(max(copy.sizes, key=copy.sizes.get))} each, {us(copy.total_us / copy.count)}"


def has_copy(run) -> bool:
    return bool(facts.work_per_call(run.trace).get(kk.COPY))


def copy_launched_by(run) -> str | None:
    """The ATen op around the call that launched the run's first device-to-device copy."""
    t = run.trace
    j = next((j for j in facts.gpu_work(t) if facts.kind_of(t, j) == kk.COPY), None)
    return facts.launching_op(t, j) if j is not None else None


def gpu_work(eager, compiled) -> None:
    """08.gpu-work: what the GPU runs per call at 4096 after torch.compile. Its reveal says what runs and which
    op launches it, not why (08.why-copy and 08.addmm ask that)."""
    c = facts.work_per_call(compiled.trace)
    copy = _copy(compiled)
    eg, cg = facts.top_kernel(eager.trace, kk.GEMM), facts.top_kernel(compiled.trace, kk.GEMM)

    def reveal(answer):
        e = facts.work_per_call(eager.trace)
        show.table([("eager", counts_text(e)), ("compiled", counts_text(c))], ["", "GPU work per step"])
        show.table([(k.kind, short(k.name, 80), k.count) for k in facts.kernels(compiled.trace)],
                   ["kind", "compiled run", "count"])
        copy_text = (f"The copy is {show.code(copy.name)}, {_copy_words(copy)}: the size of the 4096 × 4096 bias "
                     "<code>b</code>. " if copy else "")
        names = ("The GEMM kernel is the very same as in eager mode. " if eg.name == cg.name else
                 f"The GEMM kernel's name changed too, from {show.code(eg.name, 60)} to {show.code(cg.name, 60)}. ")
        chain = facts.dispatch_chain(compiled.trace).names()
        by = copy_launched_by(compiled)
        cpu = ("The CPU side (the chain below) shows where it comes from: inside the compiled graph, Inductor calls "
               "one <code>aten::addmm(b, x, w)</code>, the library's op rather than a kernel it generated"
               + (", and the copy is launched from inside that <code>aten::addmm</code>. "
                  if by == "aten::addmm" else ". ")
               if "aten::addmm" in chain else "The chain below shows which ops the compiled graph calls. ")
        cp = article.fig("compile_copy")
        return widgets.verdict(
            answer == compiled_choice(c),
            f"The compiled step runs <b>{counts_text(c)}</b>. {copy_text}{names}{cpu}"
            + ("Whether compile is to blame for the copy is what the next two experiments test. " if copy else "")
            + f"{cp.label(capital=True)}: the same kind of copy, {cp.text()}, and {article.fig('compile_gemm').value}.",
            actual=compiled_choice(c))

    widgets.ask("08.gpu-work", "After torch.compile, what will the GPU run for each call at 4096 x 4096?",
                choices=WORK_CHOICES, default=WORK_CHOICES[0], reveal=reveal,
                decides=lambda: [spoilers.name(cg.name)] + ([spoilers.Fact("name", _copy_words(copy))] if copy else []))


def compiled_chain(compiled) -> None:
    """The compiled call's dispatch chain, once 08.gpu-work is answered."""
    widgets.after("08.gpu-work", lambda: print(chain_text(facts.dispatch_chain(compiled.trace))))


def one_step_each(eager, compiled) -> None:
    """One step of each run on one time scale, once 08.vs-tax is answered."""
    def draw():
        show.display_figure(plots.timelines([(eager.tag, eager.trace, plots.step_window(eager.trace, 1, 1)),
                                             (compiled.tag, compiled.trace, plots.step_window(compiled.trace, 1, 1))],
                                            title="One step, eager against compiled (same time scale)"))
    widgets.after("08.vs-tax", draw)


# --- why the copy: 08.why-copy, 08.addmm, 08.bias1d --------------------------------------------------------

WHY_COPY = ["compile adds it: eager addmm does not copy", "addmm copies a full-matrix b, compiled or not",
            "the profiler adds it"]
COPY_CHOICES = ["yes, it copies b first", "no copy"]
#: what the reveals of 08.addmm and 08.bias1d say about the copy's cause: nothing before them may say it
_CAUSE = [spoilers.name("copies b into the output"), spoilers.name("addmm_out_cuda_impl")]


def why_copy() -> None:
    """08.why-copy: a bet, graded by the two experiments that follow (08.bias1d's reveal says which survives).

    This question and the next two (and the Perfetto task) name the copy in their prompts: they appear once
    08.gpu-work is answered, so that Run All does not show them before it.
    """
    widgets.after("08.gpu-work", lambda: widgets.ask(
        "08.why-copy", "Which explanation of the copy do you bet on?", choices=WHY_COPY, default=WHY_COPY[0],
        reveal=lambda a: widgets.verdict(None, "Noted. The two experiments below decide; the second one's reveal "
                                               "says which explanation survives."),
        decides=lambda: _CAUSE))


def addmm(by_hand, eager) -> None:
    """08.addmm: does eager torch.addmm with a full-matrix b copy it first?"""
    actual = COPY_CHOICES[0 if has_copy(by_hand) else 1]

    def reveal(answer):
        show.table([(k.kind, short(k.name, 80), k.count) for k in facts.kernels(by_hand.trace)],
                   ["kind", "torch.addmm, eager", "count"])
        work = counts_text(facts.work_per_call(by_hand.trace))
        if not has_copy(by_hand):
            return widgets.verdict(answer == actual, f"Eager <code>torch.addmm</code> runs <b>{work}</b> per call: no "
                                   "copy here, so the compiled run's copy came from somewhere else: compare the two "
                                   "chains.", actual=actual)
        eg, ag = facts.top_kernel(eager.trace, kk.GEMM), facts.top_kernel(by_hand.trace, kk.GEMM)
        names = (" One reading of the GEMM's names: <code>bz</code> (eager matmul + add's GEMM) as β = 0, the GEMM "
                 "ignoring what is in its output, against <code>badd</code> (addmm's) as adding onto it; the names are "
                 "the library's own and undocumented, so take that as a hypothesis."
                 if eg and ag and "_bz_" in eg.name and "_badd_" in ag.name else "")
        return widgets.verdict(
            answer == actual,
            f"Eager <code>torch.addmm</code> runs <b>{work}</b> per call: the copy is addmm's own, not something "
            "compile added. The source says why: <code>addmm</code> computes β·b + α·(x @ w) "
            "(<a href='https://docs.pytorch.org/docs/stable/generated/torch.addmm.html'>torch.addmm</a>), and on CUDA, "
            "with a full-matrix <code>b</code>, ATen copies b into the output and has the GEMM add its product onto "
            "it, β = 1 (<a href='https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/Blas.cpp'>"
            "<code>addmm_out_cuda_impl</code></a>). So under compile the add did not vanish: it became a copy plus a "
            "GEMM that reads its output before writing it." + names, actual=actual)

    widgets.after("08.gpu-work", lambda: widgets.ask(
        "08.addmm", "Eager torch.addmm(b, x, w) with a 4096 x 4096 b: does the GPU copy b first?",
        choices=COPY_CHOICES, default=COPY_CHOICES[1], reveal=reveal,
        decides=lambda: _CAUSE + [spoilers.name("addmm's own")]))


def bias1d(by_hand, vec_eager, vec_compiled, compiled) -> None:
    """08.bias1d: compiled, with a 1-D bias, does the GPU still copy the bias first? Then which explanation survives."""
    actual = COPY_CHOICES[0 if has_copy(vec_compiled) else 1]
    g = facts.top_kernel(vec_compiled.trace, kk.GEMM)

    def reveal(answer):
        rows = [(r.tag, counts_text(facts.work_per_call(r.trace)), short(facts.top_kernel(r.trace, kk.GEMM).name, 70))
                for r in (vec_eager, vec_compiled, compiled)]
        show.table(rows, ["run", "GPU work per step", "GEMM kernel"])
        ops = [n for n in facts.dispatch_chain(vec_compiled.trace).names() if n.startswith("aten::")]
        survives = (WHY_COPY[1] if has_copy(by_hand) and not has_copy(vec_compiled) else
                    WHY_COPY[0] if not has_copy(by_hand) else None)
        bet = widgets.answer_to("08.why-copy")
        verdict_text = (f" Together with eager addmm's {'copy' if has_copy(by_hand) else 'lack of one'}, the "
                        f"explanation that survives: <b>{survives}</b>" + (f" (you bet on: {html.escape(bet)})."
                                                                              if bet else ".")
                        if survives else " The two experiments do not single out one explanation here.")
        return widgets.verdict(
            answer == actual,
            f"With a 1-D bias the compiled call runs <b>{counts_text(facts.work_per_call(vec_compiled.trace))}</b> "
            f"(ATen ops: {', '.join(ops)}). "
            + ("No copy: ATen's CUDA addmm hands a 1-D bias to cuBLASLt's bias epilogue instead of copying it into the "
               "output (the same <code>addmm_out_cuda_impl</code> linked above), so the GEMM writes x @ w + b in one "
               f"pass; its kernel is {show.code(g.name, 70)}. The copy in the first compiled run came from the bias "
               "being a full matrix, not from compile." if not has_copy(vec_compiled) else
               "It still copies here: on this GPU and library the 1-D bias path also writes the bias into the output "
               "first.") + verdict_text, actual=actual)

    widgets.after("08.gpu-work", lambda: widgets.ask(
        "08.bias1d", "Compiled, with a 1-D bias of shape (4096,): does the GPU still copy the bias first?",
        choices=COPY_CHOICES, default=COPY_CHOICES[0], reveal=reveal,
        decides=lambda: [spoilers.name(g.name), spoilers.name("bias epilogue")]))


# --- 08.vs-tax: the article's 2x against this GPU ----------------------------------------------------------

VERSUS_CHOICES = widgets.VERSUS_CHOICES


def _fmt_x(v: float) -> str:
    return f"{v:.2f}x"


def _ratio_facts(v: float) -> list:
    """A graded ratio as the reveals print it, with the words that say what it is ("2.35x the CPU time"): a bare
    ratio such as 1.36x also stands for other things elsewhere in the series (03 prints a step ratio of 1.36x)."""
    return [spoilers.Fact("name", f"{v:.2f}x the CPU time")]


def _against(a, b) -> spoilers.Fact:
    """Two medians as the reveals print them ("46.5 us against 20.6 us"): a bare time such as 19.3 us can turn up
    anywhere in a chain of ops timed live on this CPU."""
    return spoilers.Fact("name", f"{us(a.median)} against {us(b.median)}")


def _live() -> bool:
    return environment().live


def vs_tax_graded(timed, answer=None) -> measure.Graded:
    """Compiled over eager at 4096, unprofiled and round by round, against half and twice the article's ratio."""
    a = float(article.fig("compile_cpu_cost").value)
    return measure.grade_choice(answer, timed.ratio("compiled", "eager"), [a / 2, a * 2], VERSUS_CHOICES,
                                fmt=_fmt_x)


def profiled_ratio(compiled, eager) -> Estimate | None:
    """Compiled over eager in the traces: steady steps' CPU time per call (shown beside, never graded)."""
    if not (compiled.cpu_per_call.n and eager.cpu_per_call.n):
        return None
    return Estimate.of(compiled.cpu_per_call) / Estimate.of(eager.cpu_per_call)


def vs_tax(eager, compiled, timed) -> None:
    """08.vs-tax: compiled over eager, CPU time per call at 4096, against the article's 2x (ratios compared)."""
    fig = article.fig("compile_cpu_cost")
    ratio = timed.ratio("compiled", "eager")
    prof = profiled_ratio(compiled, eager)

    def reveal(answer):
        g = vs_tax_graded(timed, answer)
        pe, pc = timed.spread("eager"), timed.spread("compiled")
        show.versus([("compiled over eager, unprofiled (graded)", fig.text(), _fmt_x(ratio.median)),
                     ("compiled over eager, profiled (the traces)", fig.text(),
                      _fmt_x(prof.mid) if prof else "-")],
                    note=f"{fig.label(capital=True)}; this GPU: {timed.source}")
        _shared.spread_figure({f"eager ({pe.n} rounds)": pe, f"compiled ({pc.n} rounds)": pc},
                              title="4096 x 4096: one call's CPU time, eager and compiled timed in turn, no profiler")
        half, twice = fig.value / 2, fig.value * 2
        where = ("about the article's figure" if g.actual == VERSUS_CHOICES[1] else
                 "well under the article's figure" if g.actual == VERSUS_CHOICES[0] else "well above the article's")
        prof_text = ""
        if prof is not None:
            prof_choice = measure.bucket(prof.mid, [half, twice], VERSUS_CHOICES)
            prof_text = (f" In the traces, with the profiler on, the same ratio is {_fmt_x(prof.mid)} ("
                         f"{us(compiled.cpu_per_call_us)} against {us(eager.cpu_per_call_us)}, {eager.cpu_per_call.n} "
                         "steady steps each: shown, not graded), "
                         + ("the same answer" if prof_choice == g.actual else f"which alone would say '{prof_choice}'")
                         + f": {_stretched([('compiled', compiled), ('eager', eager)], timed)}. ")
        return widgets.grade(
            g, f"Without the profiler, eager and compiled timed in turn ({timed.source}), one compiled call costs "
            f"<b>{_fmt_x(ratio.median)}</b> the CPU time of an eager one ({us(pc.median)} against {us(pe.median)}, "
            f"the ratio taken round by round): {where}, {fig.text()} (half of it is {half:g}×, twice {twice:g}×)."
            f"{prof_text}The article does not say whether its figure was timed under the profiler; if it was, the "
            "profiled ratio is the closer comparison. The unprofiled one is what compile costs with nobody watching.",
            live=_live())

    widgets.ask("08.vs-tax", f"Compiled over eager, CPU time per call at 4096: {fig.quote()}. On this GPU, will it "
                "be...", choices=VERSUS_CHOICES, default=VERSUS_CHOICES[1], reveal=reveal,
                decides=lambda: _ratio_facts(ratio.median) + [_against(timed.spread("compiled"), timed.spread("eager"))])


# --- 08.tax and 08.graphs: tiny work ------------------------------------------------------------------------

TAX_CHOICES = ["cheaper than eager", "about the same", "clearly dearer than eager"]
TAX_EDGES = [0.9, 1.2]
GRAPH_CHOICES = ["cheaper than the default compile", "about the same", "dearer than the default compile"]
GRAPH_EDGES = [0.9, 1.1]


def tax_graded(timed, answer=None) -> measure.Graded:
    return measure.grade_choice(answer, timed.ratio("compiled", "eager"), TAX_EDGES, TAX_CHOICES, fmt=_fmt_x)


def graphs_graded(timed, answer=None) -> measure.Graded:
    return measure.grade_choice(answer, timed.ratio("reduce-overhead", "compiled"), GRAPH_EDGES, GRAPH_CHOICES,
                                fmt=_fmt_x)


def _stretch(run, timed, label: str) -> float | None:
    """Profiled (the trace's steady steps) over unprofiled (the timed group) CPU time per call: the profiler's share."""
    if label not in timed.labels or not run.cpu_per_call.n:
        return None
    return run.cpu_per_call_us / timed.spread(label).median


def _rows(pairs, timed) -> list[tuple]:
    """(run, profiled per call, unprofiled per call, profiled / unprofiled) for (label, run) pairs."""
    out = []
    for label, r in pairs:
        s = _stretch(r, timed, label)
        out.append((r.tag, us(r.cpu_per_call_us), timed.spread(label).text() if label in timed.labels else "-",
                    f"{s:.1f}x" if s else "-"))
    return out


_ROW_HEAD = ["run", "CPU time per call, profiled (trace)", "unprofiled, timed in turn", "profiled / unprofiled"]


def _stretched(pairs, timed) -> str:
    """'the profiler stretched the compiled call about 6.6x and the eager one 2.6x' (as the table says)."""
    parts = [f"the {label} call about {s:.1f}x" for label, r in pairs if (s := _stretch(r, timed, label))]
    return "the profiler stretched " + " and ".join(parts) if parts else ""


def tax(small_eager, small_compiled, timed) -> None:
    """08.tax: at 64 x 64, is a compiled call cheaper or dearer on the CPU than an eager one?"""
    ratio = timed.ratio("compiled", "eager")

    def reveal(answer):
        g = tax_graded(timed, answer)
        pairs = [("eager", small_eager), ("compiled", small_compiled)]
        show.table(_rows(pairs, timed), _ROW_HEAD)
        _shared.spread_figure({"eager": timed.spread("eager"), "compiled": timed.spread("compiled")},
                              title="64 x 64: one call's CPU time, timed in turn without the profiler")
        e, c = small_eager.cpu_per_call_us, small_compiled.cpu_per_call_us
        prof_choice = measure.bucket(c / e, TAX_EDGES, TAX_CHOICES)
        cost = article.fig("compile_cpu_cost")
        return widgets.grade(
            g, f"Without the profiler ({timed.source}), one compiled call at 64 × 64 costs <b>{_fmt_x(ratio.median)}"
            f"</b> the CPU time of an eager one ({us(timed.spread('compiled').median)} against "
            f"{us(timed.spread('eager').median)}). In the traces the same calls take {us(c)} against {us(e)} "
            f"({c / e:.1f}x), " + ("the same verdict" if prof_choice == g.actual else
                                   f"which alone would say '{prof_choice}'")
            + f": {_stretched(pairs[::-1], timed)}, so a ratio read from the trace is not the ratio without it. "
            f"For comparison, {cost.label()} found compile about {cost.text()} dearer per step. One reading, a "
            "hypothesis: the compiled call's fixed cost (guards, the wrapper) is shared out over many ops in a large "
            "graph; on a single op there is nothing to share it with (notebook 11 tries a transformer block).",
            live=_live())

    widgets.ask("08.tax", "At 64 x 64, is a compiled call cheaper or dearer on the CPU than an eager one?",
                choices=TAX_CHOICES, default="cheaper than eager", reveal=reveal,
                decides=lambda: _ratio_facts(ratio.median) + [_against(timed.spread("compiled"), timed.spread("eager"))])


def launches_by_graph(run) -> bool:
    """Whether the run's GPU work is launched by a CUDA graph launch (for the checkpoint)."""
    return any(c.name == "cudaGraphLaunch" for c in facts.runtime_calls(run.trace))


def graphs(small_eager, small_compiled, graphs_run, timed) -> None:
    """08.graphs: at 64 x 64, does a reduce-overhead call cost less CPU time than a default compiled call?"""
    ratio = timed.ratio("reduce-overhead", "compiled")

    def reveal(answer):
        g = graphs_graded(timed, answer)
        print(chain_text(facts.dispatch_chain(graphs_run.trace)))
        pairs = [("eager", small_eager), ("compiled", small_compiled), ("reduce-overhead", graphs_run)]
        show.table([row + (", ".join(f"{c.count} x {c.name}" for c in facts.runtime_calls(r.trace)
                                     if c.launches_gpu_work),)
                    for row, (_, r) in zip(_rows(pairs, timed), pairs)], _ROW_HEAD + ["launch calls (3 steps)"])
        _shared.spread_figure({k: timed.spread(k) for k in ("compiled", "reduce-overhead")},
                              title="64 x 64: one call's CPU time, timed in turn without the profiler")
        pg, pc = graphs_run.cpu_per_call_us, small_compiled.cpu_per_call_us
        prof_choice = measure.bucket(pg / pc, GRAPH_EDGES, GRAPH_CHOICES)
        names = facts.dispatch_chain(graphs_run.trace).names()
        launches = {c.name: c.count for c in facts.runtime_calls(graphs_run.trace) if c.launches_gpu_work}
        extra = (" Its chain above shows what else it does per call: <code>aten::_foreach_copy_</code> copies the "
                 "inputs into the graph's static buffers, with a kernel launch of its own, before the graph launch."
                 if "aten::_foreach_copy_" in names else "")
        return widgets.grade(
            g, f"Without the profiler ({timed.source}), a reduce-overhead call costs <b>{_fmt_x(ratio.median)}</b> "
            f"the CPU time of a default compiled one ({us(timed.spread('reduce-overhead').median)} against "
            f"{us(timed.spread('compiled').median)}). Its launches over the recorded steps: "
            f"{', '.join(f'{n} x {html.escape(k)}' for k, n in launches.items())}: one graph launch per call replays "
            f"every kernel the graph holds, so the launch calls no longer grow with the number of kernels.{extra} In "
            f"the traces: {us(pg)} against {us(pc)} ({pg / pc:.2f}x), "
            + ("the same verdict." if prof_choice == g.actual else
               f"which alone would say '{prof_choice}': {_stretched(pairs[1:], timed)} (the table's fourth column). "
               "The profiler does not slow every kind of call alike, so the unprofiled figure is the one to trust."),
            live=_live())

    widgets.ask("08.graphs", "At 64 x 64, will a reduce-overhead call cost less CPU time than a default compiled call?",
                choices=GRAPH_CHOICES, default=GRAPH_CHOICES[0], reveal=reveal,
                decides=lambda: _ratio_facts(ratio.median)
                + [_against(timed.spread("reduce-overhead"), timed.spread("compiled")), spoilers.name("cudaGraphLaunch")])


# --- 08.recompile, 08.perfetto, the exercise ----------------------------------------------------------------

RECOMPILE_CHOICES = ["only Torch-Compiled Region: 0/0", "0/0, then 0/1 for the new shape",
                     "0/0, then 1/0 for the new shape", "no compiled region for the new shape"]


def recompile_choice(regions: dict) -> str:
    ids = {k.split(": ")[-1] for k in regions}
    return (RECOMPILE_CHOICES[1] if {"0/0", "0/1"} <= ids else
            RECOMPILE_CHOICES[0] if set(regions) == {"Torch-Compiled Region: 0/0"} else
            RECOMPILE_CHOICES[2] if any(k.endswith("1/0") for k in regions) else RECOMPILE_CHOICES[3])


def recompile(regions: dict) -> None:
    """08.recompile: which compiled regions three calls (one shape, then another) leave in a CPU trace."""
    actual = recompile_choice(regions)

    def reveal(answer):
        show.table(sorted(regions.items()), ["region", "calls"])
        return widgets.verdict(
            answer == actual,
            f"The trace holds {', '.join(f'{n} x {k}' for k, n in sorted(regions.items()))}. The second number counts "
            "compiles of the same frame: a new shape failed the guards of compile 0, so Dynamo compiled frame 0 again "
            "(see <a href='https://docs.pytorch.org/docs/stable/compile/programming_model.recompilation.html'>"
            "recompilations</a>; <code>TORCH_LOGS=recompiles</code> says why). A new first number would mean a new "
            "frame, which is what a graph break produces. So the direct sign of a recompile in a trace is a region "
            "whose second number is above 0; several <code>CompiledFxGraph</code> hashes alone can also come from "
            "graph breaks." if actual == RECOMPILE_CHOICES[1] else
            f"The trace holds {', '.join(f'{n} x {k}' for k, n in sorted(regions.items()))}: not the recompile this "
            "cell was written to show; <code>TORCH_LOGS=recompiles</code> says what Dynamo did here.", actual=actual)

    widgets.ask("08.recompile", "Which compiled regions will the trace of those three calls hold?",
                choices=RECOMPILE_CHOICES, default=RECOMPILE_CHOICES[0], reveal=reveal,
                decides=lambda: [spoilers.name(k) for k in regions if not k.endswith("0/0")])


def perfetto_copy(compiled) -> None:
    """08.perfetto: the bytes the compiled trace's device-to-device copy moves."""
    copy = _copy(compiled)
    b = max(copy.sizes, key=copy.sizes.get) if copy else None

    def reveal(found):
        if copy is None:
            return widgets.verdict(None, "This trace holds no copy to find.")
        return widgets.verdict(found == b, f"The copy moves <b>{b:,}</b> bytes ({nbytes(b)}): 4096 × 4096 values of "
                               f"{b // (4096 * 4096)} bytes, the whole of <code>b</code>.", actual=b)

    widgets.after("08.gpu-work", lambda: widgets.ask(
        "08.perfetto", "In the compiled trace, click the Memcpy DtoD on the GPU lane. How many bytes does it move?",
        unit="bytes", default=0, reveal=reveal, kind="task", decides=lambda: [spoilers.value(b, "bytes")] if b else []))


def exercise_dynamic(fn, small_in, other_in) -> None:
    """The "dynamic shapes" exercise: the same three calls compiled with dynamic=True, on this CPU."""
    import torch

    from ..runs.profiling import native_log_filter

    def solution():
        torch._dynamo.reset()
        dyn = torch.compile(fn, backend="aot_eager", dynamic=True)
        dyn(*small_in)
        with native_log_filter(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
            dyn(*small_in)
            dyn(*other_in)
            dyn(*other_in)
        found = facts.compiled_region_counts([e.name for e in p.events()])
        listed = ", ".join(f"{n} x `{k}`" for k, n in sorted(found.items()))
        if not facts.recompiles(found):
            show.md(f"With `dynamic=True`: {listed}. The graph was compiled for symbolic shapes from the start, so "
                    "the new shape passed its guards: no second compile.")
        else:
            show.md(f"With `dynamic=True`: {listed}. A compile count above 0 is still there: this torch compiled "
                    "again despite `dynamic=True`; `TORCH_LOGS=recompiles` says which guard failed.")

    widgets.exercise("dynamic shapes",
                     "Compile <code>fn</code> with <code>dynamic=True</code> and repeat the three calls (one 64 × 64, "
                     "two 96 × 96). Which compiled regions will the trace hold now? Write it down, then ask for the "
                     "solution (it runs on this CPU).", solution)
