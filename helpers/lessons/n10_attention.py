"""Notebook 10's questions: where hand-written attention spends its GPU time, what in place saves, SDPA's
backends (GPU time, CPU time unprofiled), what a longer sequence costs, and a fused kernel's occupancy."""

from __future__ import annotations

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import gpu_calls, hardware, measure, kernel_kinds as kk
from ..facts.measure import Spread
from ..facts.text import counts_text, nbytes, short, us
from ..runs.workload import itemsize
from . import _shared


def _said(text: str) -> spoilers.Fact:
    """A fact as the reveal prints it, words included ("masked_fill) takes the most"): a bare figure such as
    12.5% or 357 us also stands for other things elsewhere in the series."""
    return spoilers.Fact("name", text)


# --- 10.naive ----------------------------------------------------------------------------------------------

PART_CHOICES = ["the two matrix multiplies", "the softmax", "the masking (masked_fill)", "the scaling (division)"]
PART_OF_OP = {"aten::matmul": PART_CHOICES[0], "aten::bmm": PART_CHOICES[0], "aten::softmax": PART_CHOICES[1],
              "aten::masked_fill": PART_CHOICES[2], "aten::masked_fill_": PART_CHOICES[2],
              "aten::div": PART_CHOICES[3], "aten::div_": PART_CHOICES[3]}


def parts_per_call(run) -> dict[str, Spread]:
    """GPU time per call by part of the code (the ops directly under the label, grouped), one sample per call."""
    by_op = gpu_calls.by_top_op(run)
    n = max((s.n for s in by_op.values()), default=0)
    parts: dict[str, list[float]] = {}
    for op, s in by_op.items():
        acc = parts.setdefault(PART_OF_OP.get(op, op), [0.0] * n)
        for i, v in enumerate(s.samples):
            acc[i] += v
    return {p: Spread.of(v) for p, v in parts.items()}


def time_by_part(run) -> dict[str, float]:
    """GPU time per call by part (medians over the recorded calls)."""
    return {p: s.median for p, s in parts_per_call(run).items()}


def naive_graded(run, answer=None) -> measure.Graded:
    return gpu_calls.grade_extreme(answer, parts_per_call(run))


def scores_bytes(run) -> int:
    """Bytes of the score matrix: batch x heads x seq x seq values."""
    p = run.workload.p
    return p["batch"] * p["heads"] * p["seq"] * p["seq"] * itemsize(run.dtype)


def _kernel_rows(run) -> list[tuple]:
    """Each piece of GPU work: kind, name, the op that launched it, median time, and (for the steps that read and
    write the score matrix once) the bandwidth that implies."""
    t = run.trace
    sb = scores_bytes(run)
    rows = []
    for k in facts.kernels(t):
        j = next((j for j in facts.gpu_work(t) if t.name_of(j) == k.name), None)
        op = facts.launching_op(t, j) if j is not None else None
        touches = k.kind in (kk.ELEMENTWISE, kk.REDUCTION, kk.COPY) and k.median_us > 0
        rows.append((k.kind, short(k.name, 60), op or "-", us(k.median_us),
                     f"{2 * sb / k.median_us / 1e6:.2f} TB/s" if touches else "-"))
    return rows


def naive(run) -> None:
    """10.naive: which part of one hand-written attention call takes the most GPU time."""
    parts = parts_per_call(run)
    top = max(parts, key=lambda p: parts[p].median)
    total = sum(s.median for s in parts.values())

    def reveal(answer):
        g = naive_graded(run, answer)
        show.display_figure(plots.bars({p: s.median for p, s in parts.items()},
                                       title=f"{run.tag}: GPU time per call, by the op in the code", unit="us"))
        show.table(_kernel_rows(run), ["kind", "kernel", "launched under", "median",
                                       "bandwidth if it reads and writes the scores once"])
        bw = hardware.datasheet_bandwidth_tbs(run.device)
        ceiling = f" (the vendor's datasheet gives {bw} TB/s for this GPU)" if bw else ""
        return widgets.grade(
            g, f"<b>{top[0].upper() + top[1:]}</b> takes the most: {us(parts[top].median)} of the {us(total)} of GPU "
            f"time per call ({parts[top].median / total:.0%}). The multiplies do the arithmetic; the scaling, the "
            f"masking and the softmax each read and write the whole score matrix, {nbytes(scores_bytes(run))} per "
            "call from the shapes, and the "
            f"table's last column is the rate each moved it at{ceiling}. Those near the ceiling are limited by memory "
            "traffic, not arithmetic; the ones far below it move the same bytes more slowly, and a hypothesis for "
            "why (an access pattern, or the mask they read) is where the next experiment would start.", live=False)

    widgets.ask("10.naive", "Which part of one hand-written attention call takes the most GPU time?",
                choices=PART_CHOICES, default=PART_CHOICES[0], reveal=reveal,
                decides=lambda: [_said(f"{us(parts[top].median)} of the {us(total)}")])


# --- 10.inplace --------------------------------------------------------------------------------------------

SAVE_CHOICES = ["nothing", "under 10%", "10% to 30%", "more than 30%"]
SAVE_EDGES = [0.005, 0.1, 0.3]


def saved_share(naive_run, inplace_run) -> Spread:
    """1 - in place / out of place, GPU time per call, over every pairing of the two runs' recorded calls."""
    return gpu_calls.pairs(gpu_calls.per_call(inplace_run), gpu_calls.per_call(naive_run), lambda a, b: 1 - a / b, "%")


def inplace_graded(naive_run, inplace_run, answer=None) -> measure.Graded:
    return measure.grade_choice(answer, saved_share(naive_run, inplace_run), SAVE_EDGES, SAVE_CHOICES,
                                fmt=lambda v: f"{v:.1%}")


def inplace(naive_run, inplace_run) -> None:
    """10.inplace: how much GPU time per call the in-place version saves."""
    share = saved_share(naive_run, inplace_run)

    def reveal(answer):
        g = inplace_graded(naive_run, inplace_run, answer)
        a, b = facts.work_per_call(naive_run.trace), facts.work_per_call(inplace_run.trace)
        ga, gb = gpu_calls.per_call(naive_run), gpu_calls.per_call(inplace_run)
        show.table([("out of place", counts_text(a), ga.text()), ("in place", counts_text(b), gb.text())],
                   ["", "GPU work per call", "GPU time per call (each recorded call)"])
        fewer = a.get(kk.COPY, 0) - b.get(kk.COPY, 0)
        inside = [n for n in facts.child_ops(naive_run.trace, "aten::masked_fill") if n != "aten::expand"]
        why = (f"The in-place version runs {fewer} copy fewer per call. The out-of-place chain shows why: "
               f"<code>aten::masked_fill</code> calls {', then '.join(f'<code>{n}</code>' for n in inside)}: it copies "
               "the scores into a new tensor and fills that; in place, <code>masked_fill_</code> fills "
               "<code>scores</code> itself." if fewer > 0
               else "The copies per call did not change here; compare the kernels of the two runs.")
        hw, mk = article.fig("handwritten_kernels"), article.fig("math_kernels")
        return widgets.grade(
            g, f"In place, one call takes <b>{us(gb.median)}</b> of GPU time against {us(ga.median)}: "
            f"<b>{share.median:.0%} less</b>. {why} For comparison, {hw.label()} counts {hw.text()} kernels for the "
            f"hand-written version against {mk.text()} for SDPA's math backend; here, "
            f"{sum(a.values())} pieces of GPU work out of place and {sum(b.values())} in place.", live=False)

    widgets.ask("10.inplace", "How much GPU time per call will the in-place version save?",
                choices=SAVE_CHOICES, default="nothing", reveal=reveal,
                decides=lambda: [_said(f"{share.median:.0%} less")])


# --- 10.backends -------------------------------------------------------------------------------------------

def pieces(run) -> int:
    return sum(facts.work_per_call(run.trace).values())


def backends_graded(ok: dict, answer=None) -> measure.Graded:
    """The fastest backend by GPU time per call, over every pairing of the leader's and runner-up's calls."""
    return gpu_calls.grade_extreme(answer, {b: gpu_calls.per_call(r) for b, r in ok.items()}, largest=False)


def cpu_pairs(ok: dict, timed) -> list[tuple[str, str, str, Spread]]:
    """Each pair of backends where the first runs fewer pieces of GPU work: whether, unprofiled and round by round,
    it cost the CPU less ("cheaper"), more ("dearer"), or the spread cannot tell ("unclear")."""
    have = [b for b in ok if b in timed.labels]
    out = []
    for a in have:
        for b in have:
            if pieces(ok[a]) < pieces(ok[b]):
                r = timed.ratio(a, b)
                lo, hi = r.quartiles
                out.append((a, b, "dearer" if lo > 1 else "cheaper" if hi < 1 else "unclear", r))
    return out


def cpu_against_kernels(ok: dict, timed) -> str:
    """What the unprofiled CPU times say about fewer kernels and less CPU time, pair by pair, with spreads."""
    pairs = cpu_pairs(ok, timed)
    f = lambda v: f"{v:.2f}x"  # noqa: E731
    inverted = [p for p in pairs if p[2] == "dearer"]
    unclear = [p for p in pairs if p[2] == "unclear"]
    if inverted:
        a, b, _, r = inverted[0]
        return (f"without the profiler, {a} runs fewer pieces of GPU work than {b} ({pieces(ok[a])} against "
                f"{pieces(ok[b])}) and still costs the CPU more ({a} over {b}: {r.text(f)}): fewer kernels do not "
                "always mean less CPU time.")
    if not pairs:
        return "no two backends here differ in their pieces of GPU work."
    a, b, _, r = min(pairs, key=lambda p: abs(p[3].median - 1))  # the closest pair says the most
    text = ("without the profiler, each backend with fewer pieces of GPU work cost the CPU less than each with more "
            f"(the closest pair, {a} over {b}: {r.text(f)})")
    if unclear:
        a, b, _, r = unclear[0]
        text = ("without the profiler, no backend with fewer pieces of GPU work cost the CPU measurably more than one "
                f"with more; {a} against {b} this measurement cannot tell apart ({a} over {b}: {r.text(f)})")
    return text + "."


def backends(runs: dict, ok: dict, naive_run, timed) -> None:
    """10.backends: which SDPA backend is the fastest by GPU time per call; then their CPU time, unprofiled."""
    per = {b: gpu_calls.per_call(r) for b, r in ok.items()}
    fastest = min(per, key=lambda b: per[b].median) if per else None

    def reveal(answer):
        g = backends_graded(ok, answer)
        rows = []
        for b, r in runs.items():
            if b not in ok:
                rows.append((b, "unavailable", "", "", "", "", str(r)[:90]))
                continue
            rows.append((b, pieces(r), *_shared.against_timed(r, timed, b), per[b].text(),
                         counts_text(facts.work_per_call(r.trace))))
        show.table(rows, ["backend", "GPU work per call", "CPU per call, profiled (trace)",
                          "CPU per call, unprofiled (timed in turn)", "profiled / unprofiled",
                          "GPU per call (each recorded call)", "what runs"])
        show.display_figure(plots.paired_bars(
            {b: (timed.spread(b).median if b in timed.labels else 0.0, per[b].median) for b in ok},
            ("CPU per call, unprofiled", "GPU per call"), unit="us",
            title=f"SDPA backends on {naive_run.device}: time per call"))
        _shared.spread_figure({b: timed.spread(b) for b in ok if b in timed.labels and b != "math"},
                              title="The fused backends: CPU time per call, timed in turn without the profiler")
        theirs = ", ".join(f"{b} {article.fig('cpu_' + b).text()}" for b in ("efficient", "flash", "cudnn"))
        names = facts.dispatch_chain(ok["math"].trace).names() if "math" in ok else []
        math_text = (" The math backend shows why it is the slow reference: its chain builds the causal mask on every "
                     f"call ({'aten::tril' if 'aten::tril' in names else 'no aten::tril here'}), guards softmax "
                     "against rows that are all masked "
                     f"({'aten::_safe_softmax' if 'aten::_safe_softmax' in names else 'not here'}), and converts its "
                     "inputs with <code>aten::to</code> before multiplying, all as separate kernels."
                     if names else "")
        show.versus([("fastest backend (GPU time per call)", article.fig("fastest_backend").value, fastest),
                     ("math backend: kernels per call (this GPU: pieces of GPU work)", article.fig("math_kernels").text(),
                      str(pieces(ok["math"])) if "math" in ok else "-")]
                    + [(f"{b}: CPU time (the review's; this GPU: per call)", article.fig("cpu_" + b).text(),
                        f"{us(ok[b].cpu_per_call_us)} profiled, {us(timed.spread(b).median)} unprofiled"
                        if b in timed.labels else us(ok[b].cpu_per_call_us))
                       for b in ("efficient", "flash", "cudnn") if b in ok],
                    note="the article's run as the series review reports it (its shapes and GPU not given); this GPU: the runs above "
                         f"and the unprofiled comparison ({timed.source})")
        return widgets.grade(
            g, f"On this GPU <b>{fastest}</b> is the fastest by GPU time per call ({us(per[fastest].median)}). "
            f"The series review reports the article's run (its shapes not given) differently: "
            f"{article.fig('fastest_backend').value} the fastest, and CPU times of {theirs}. On the CPU "
            f"side here, {cpu_against_kernels(ok, timed)}{math_text}", live=False)

    widgets.ask("10.backends", "Which SDPA backend will be the fastest on this GPU (GPU time per call)?",
                choices=list(ok) or ["math"], default=next((b for b in ("flash", "efficient", "cudnn") if b in ok),
                                                           next(iter(ok), "math")),
                reveal=reveal, decides=lambda: [_said(f"{fastest} is the fastest")] if fastest else [])


# --- 10.why-seq --------------------------------------------------------------------------------------------

def seq_choices(fused: str | None) -> list[str]:
    return [f"the hand-written one grows about 4x, {fused or 'the fused one'} clearly less", "both grow about 4x",
            "both grow about 2x"]


def _seq_choice(g_naive: float, g_fused: float, choices: list[str]) -> str | None:
    return (choices[0] if g_naive >= 3.3 and g_fused < 0.85 * g_naive else
            choices[1] if min(g_naive, g_fused) >= 3.3 else choices[2] if max(g_naive, g_fused) < 2.7 else None)


def growths(naive_run, longer: dict, ok: dict, fused: str | None) -> dict[str, Spread]:
    """GPU time per call at seq 2048 over seq 1024, every pairing of the two runs' calls, by version."""
    out = {"hand-written": gpu_calls.pairs(gpu_calls.per_call(longer["naive"]), gpu_calls.per_call(naive_run),
                                           lambda a, b: a / b, "x")}
    if fused and fused in ok and f"sdpa-{fused}" in longer:
        out[fused] = gpu_calls.pairs(gpu_calls.per_call(longer[f"sdpa-{fused}"]), gpu_calls.per_call(ok[fused]),
                                     lambda a, b: a / b, "x")
    return out


def why_seq_graded(naive_run, longer, ok, fused, answer=None) -> measure.Graded | None:
    g = growths(naive_run, longer, ok, fused)
    if len(g) < 2:
        return None
    choices = seq_choices(fused)
    combos = [(a, b) for a in g["hand-written"].samples for b in g[fused].samples]
    return gpu_calls.grade_each(answer, combos, lambda ab: _seq_choice(ab[0], ab[1], choices),
                                "the two growth ratios, every pairing of the runs' calls")


def why_seq(naive_run, longer: dict, ok: dict, fused: str | None) -> None:
    """10.why-seq: with the sequence doubled, how does each version's GPU time per call grow?"""
    choices = seq_choices(fused)
    g = growths(naive_run, longer, ok, fused)

    def reveal(answer):
        rows = []
        pairs = [("hand-written", naive_run, longer["naive"])] + (
            [(fused, ok[fused], longer[f"sdpa-{fused}"])] if fused in g else [])
        for label, a, b in pairs:
            rows.append((label, gpu_calls.per_call(a).text(), gpu_calls.per_call(b).text(),
                         g[label].text(lambda v: f"{v:.2f}x")))
        show.table(rows, ["", "seq 1024, GPU per call", "seq 2048", "growth (every pairing of calls)"])
        graded = why_seq_graded(naive_run, longer, ok, fused, answer)
        if graded is None:
            return widgets.verdict(None, "No fused SDPA backend runs here, so there is nothing to compare with.")
        gn, gf = g["hand-written"].median, g[fused].median
        return widgets.grade(
            graded, f"The hand-written attention's GPU time grew <b>{gn:.1f}x</b>, the {fused} backend's "
            f"<b>{gf:.1f}x</b>. The score matrix is sequence × sequence per head, so it holds four times the values: "
            "four times the bytes for the hand-written version's elementwise steps. A causal fused kernel does about "
            "four times the arithmetic too, but never writes the scores out; a longer sequence gives each of its "
            "blocks more work to amortize its fixed costs, one explanation (a hypothesis, for a third length to "
            "test) for growing by less than 4x.", live=False)

    widgets.ask("10.why-seq", "With the sequence doubled from 1024 to 2048, how will the GPU time per call grow?",
                choices=choices, default=choices[1], reveal=reveal,
                decides=lambda: [_said(f"grew {g['hand-written'].median:.1f}x")]
                + ([_said(f"backend's {g[fused].median:.1f}x")] if fused in g else []))


# --- 10.flash, 10.perfetto, the exercise -------------------------------------------------------------------

def flash(runs: dict, ok: dict, fused: str | None) -> None:
    """10.flash: the fused attention kernel's theoretical occupancy, from its registers and block size."""
    k = facts.top_kernel(ok[fused].trace, kk.ATTENTION) if fused else None
    o = facts.occupancy(k, ok[fused].trace.devices[0]) if k else None

    def reveal(answer_pct):
        if fused is None:
            return widgets.verdict(None, "No fused SDPA backend runs here: " + "; ".join(str(e) for e in runs.values()))
        if o is None or o.unknown:
            return widgets.verdict(None, "No theoretical occupancy can be worked out here: "
                                   + (o.unknown if o else "the trace records no registers for this kernel") + ".")
        res = k.resources
        show.table([(short(k.name, 70), res.registers_per_thread, res.threads_per_block, res.shared_memory,
                     o.blocks_per_sm, f"{o.occupancy:.1%}", o.limited_by)],
                   ["kernel", "registers/thread", "threads/block", "shared memory", "blocks per SM", "occupancy",
                    "limited by"])
        occ = article.fig("flash_occupancy")
        return widgets.verdict(
            widgets.within(answer_pct, 100 * o.occupancy, factor=1.5),
            f"{res.threads_per_block} threads x {res.registers_per_thread} registers per block: <b>{o.blocks_per_sm}"
            f"</b> blocks fit on an SM, <b>{o.occupancy:.1%} theoretical occupancy</b>, limited by {o.limited_by}. "
            f"For comparison: {occ.quote()}. The series review reads the low figure as a design choice: occupancy "
            "hides memory latency with many warps, and flash attention removes much of the memory traffic instead. "
            "Whether it pays shows in the backends' GPU times above, not in the occupancy figure.",
            actual=100 * o.occupancy)

    widgets.ask("10.flash", f"What theoretical occupancy does the {fused or 'fused'} attention kernel have on this GPU?",
                unit="%", default=50, reveal=reveal,
                decides=lambda: [_said(f"{o.occupancy:.1%} theoretical occupancy")] if o and not o.unknown else [])


def _fill_kernel(run):
    """The kernel launched under aten::masked_fill_ in the run, as a KernelStat, or None."""
    t = run.trace
    j = next((j for j in facts.gpu_work(t) if facts.launching_op(t, j) == "aten::masked_fill_"), None)
    if j is None:
        return None
    return next((k for k in facts.kernels(t) if k.name == t.name_of(j)), None)


def perfetto_fill(run) -> None:
    """10.perfetto: the registers per thread of the kernel aten::masked_fill_ launches (its time is in 10.naive's
    table already)."""
    k = _fill_kernel(run)
    regs = k.resources.registers_per_thread if k else None

    def reveal(found):
        if regs is None:
            return widgets.verdict(None, "This trace records no kernel under aten::masked_fill_ with its registers.")
        return widgets.verdict(found == regs, f"The kernel that <code>aten::masked_fill_</code> launches uses "
                               f"<b>{regs}</b> registers per thread ({show.code(k.name, 70)}).", actual=regs)

    widgets.ask("10.perfetto", "In the hand-written trace, find the kernel launched under aten::masked_fill_. How many "
                "registers per thread does it use?", unit="registers", default=0, reveal=reveal, kind="task",
                decides=lambda: [_said(f"aten::masked_fill_ launches uses {regs} registers")] if regs else [])


def exercise_seq2048(ok: dict) -> None:
    """The "longer sequence" exercise: the fused backends at seq 2048."""
    from ..runs.profiling import profile
    from ..runs.workload import attention

    def solution():
        more = {b: profile(attention(f"sdpa-{b}", seq=2048), warm=True) for b in ("efficient", "flash", "cudnn")
                if b in ok}
        per = {b: gpu_calls.per_call(r) for b, r in more.items()}
        show.table([(b, per[b].text(), us(r.cpu_per_call_us)) for b, r in more.items()],
                   ["backend, seq 2048", "GPU per call (each recorded call)", "CPU per call (profiled)"])
        g = gpu_calls.grade_extreme(None, per, largest=False)
        show.md(f"At sequence 2048 the fastest is **{g.actual}** ({g.why}). A ranking measured at one shape is a "
                "fact about that shape." if g.conclusive else
                f"At sequence 2048 the two fastest cannot be told apart here ({g.why}).")

    widgets.exercise("a longer sequence",
                     "At sequence 2048, which fused backend will be the fastest on this GPU? Write it down, then ask "
                     "for the solution.", solution)

