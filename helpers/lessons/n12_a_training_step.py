"""Notebook 12's questions: where backward runs and what it costs, AdamW's launches, hidden syncs and what they
cost, TF32 and autocast, and which bound the whole step is.

What the reveals read from the runs (and the figures they draw) is in :mod:`.n12_readings`."""

from __future__ import annotations

import html
import itertools
import statistics

from .. import facts
from ..facts import gemm_table, measure, step_facts
from ..lesson import plots, show, spoilers, widgets
from ..facts.measure import Graded, Spread, Status
from ..facts.text import short, us
from . import _shared
from .n12_readings import (CPU_BOUND, GPU_BOUND, PHASES, UNEXPLAINED, VARIANTS, PerStep, big_gemms, bound_figure,
                           bound_of, device_per_step, gemm_math, gemm_per_step, gemm_rows, gemm_us, launches_figure,
                           longest_wait, phases_per_step, sides, waits, waits_by_line)

TUNING_GUIDE = ("https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html"
                "#avoid-unnecessary-cpu-gpu-synchronization")
TF32_DOCS = "https://docs.pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"


def _ms(v: float) -> str:
    return f"{v / 1e3:.2f} ms"


def _live() -> bool:
    from ..runs.mode import environment

    return environment().live


def every_step(answer, values: list[float], edges: list[float], choices: list[str], what: str, fmt) -> Graded:
    """Grade a choice on a figure read from each recorded step: held or missed only when every step gives the same
    choice (a trace holds a few steps, not the five samples :mod:`helpers.facts.measure` grades a spread on)."""
    picks = [measure.bucket(v, edges, choices) for v in values]
    mid = measure.bucket(statistics.median(values), edges, choices) if values else choices[0]
    shown = ", ".join(fmt(v) for v in values)
    if not values:
        return Graded(Status.INCONCLUSIVE, mid, f"no recorded step holds {what}")
    if len(set(picks)) > 1:
        return Graded(Status.INCONCLUSIVE, mid, f"{what} per recorded step ({shown}) falls in more than one choice")
    return Graded(Status.HELD if answer == mid else Status.MISSED, mid,
                  f"{what} in each of the {len(values)} recorded steps: {shown}, all inside '{mid}'")


# --- 12.thread ------------------------------------------------------------------------------------------------

THREAD_CHOICES = ["on the same CPU thread as forward", "on another CPU thread", "nowhere on the CPU: only GPU kernels"]


def thread(run, cpu_run) -> None:
    """12.thread: on which CPU thread the backward functions run."""
    rows = step_facts.backward_ops(run.trace)
    lanes = sorted({b.lane for b in rows})
    fwd_lanes = sorted({b.forward_lane for b in rows if b.forward_lane})

    def reveal(answer):
        show.table([(short(b.name, 50), b.lane, short(b.forward_op or "-", 40), b.forward_lane or "-", us(b.gpu_us))
                    for b in rows[:12]],
                   ["backward function", "its CPU thread", "its forward op (same sequence number)", "forward's thread",
                    "GPU time it launched"])
        actual = (THREAD_CHOICES[2] if not lanes else THREAD_CHOICES[1] if set(lanes) - set(fwd_lanes)
                  else THREAD_CHOICES[0])
        cpu_rows = step_facts.backward_ops(cpu_run.trace)
        cpu_lanes = sorted({b.lane for b in cpu_rows})
        cpu_fwd = sorted({b.forward_lane for b in cpu_rows if b.forward_lane})
        return widgets.verdict(
            answer == actual,
            f"On this run forward ran on <b>{', '.join(show.code(x) for x in fwd_lanes)}</b> and the backward "
            f"functions on <b>{', '.join(show.code(x) for x in lanes)}</b>. On the CPU-only run of the same loop, "
            f"backward ran on {', '.join(show.code(x) for x in cpu_lanes) or 'no thread'} (forward: "
            f"{', '.join(show.code(x) for x in cpu_fwd) or '-'}). PyTorch's "
            "autograd engine keeps a worker thread per CUDA device for backward work on that device (the note "
            "<i>Allocating GPUs to autograd threads</i> in "
            "<a href='https://github.com/pytorch/pytorch/blob/main/torch/csrc/autograd/engine.cpp'>engine.cpp</a>; its "
            "threads are named <code>pt_autograd_N</code>). Each backward function carries the sequence number of the "
            "forward op that created it, which is how the table pairs them.", actual=actual)

    widgets.ask("12.thread", "On the GPU run, where do the backward functions run?", choices=THREAD_CHOICES,
                default=THREAD_CHOICES[0], reveal=reveal,
                decides=lambda: [spoilers.name(x) for x in set(lanes) - set(fwd_lanes)])


# --- 12.backward-share ----------------------------------------------------------------------------------------

SHARE_CHOICES = ["under a third", "a third to a half", "a half to three quarters", "more than three quarters"]
SHARE_EDGES = [1 / 3, 0.5, 0.75]


def backward_share(run) -> None:
    """12.backward-share: backward's share of the step's GPU time, with every GEMM of the step beside it."""
    per = phases_per_step(run)
    shares = [d["backward"] / sum(d.values()) for d in per if sum(d.values()) > 0]
    med = {p: statistics.median(d[p] for d in per) for p in PHASES} if per else {p: 0.0 for p in PHASES}
    total = sum(med.values())

    def reveal(answer):
        if not shares:
            return widgets.verdict(None, "This trace holds no recorded step with GPU work.")
        show.display_figure(plots.bars(med, title=f"{run.tag}: GPU time per step, by phase (median of the "
                                                  f"{len(per)} recorded steps)", unit="us"))
        rows = gemm_rows(run)
        show.table([(r.position + 1, r.phase, f"{r.op} < {r.node}" if r.node else r.op, layer,
                     f"{g:.2f}" if g else "-", short(r.kernels[0], 48) + (f" + {len(r.kernels) - 1} more"
                                                                           if len(r.kernels) > 1 else ""),
                     us(r.median_us), f"{g / (r.median_us * 1e-6) / 1e3:.1f}" if g and r.median_us else "-")
                    for r, layer, g in rows],
                   ["#", "phase", "launched by", "layer (model's sizes, paired by sequence number)", "GFLOP",
                    "GEMM kernel(s)", f"GPU time (median of {len(per)} steps)", "TFLOP/s"])
        g = every_step(answer, shares, SHARE_EDGES, SHARE_CHOICES, "backward's share", lambda v: f"{v:.0%}")
        labelled = facts.gpu_time_per_call(run.trace, "backward") or 0.0
        fwd_g = sum(r.median_us for r, _, _ in rows if r.phase == gemm_table.FORWARD)
        bwd_g = sum(r.median_us for r, _, _ in rows if r.phase == gemm_table.BACKWARD)
        n_f = sum(r.phase == gemm_table.FORWARD for r, _, _ in rows)
        n_b = sum(r.phase == gemm_table.BACKWARD for r, _, _ in rows)
        fwd_big, bwd_big = big_gemms(rows)
        top = max((x for _, _, x in rows if x), default=0)
        text = (f"Backward takes <b>{statistics.median(shares):.0%}</b> of the step's GPU time ({us(med['backward'])} "
                f"of {us(total)} per step), forward {med['forward'] / total:.0%}. A trap on the way: under the "
                f"<code>backward</code> label on the main thread the trace finds {us(labelled)} of GPU work, because "
                "the kernels are launched from autograd's thread; the bar counts what the backward functions "
                "launched. ")
        if fwd_big and bwd_big:
            text += (f"By arithmetic, backward runs {n_b} GEMM calls per step to forward's {n_f}, and "
                     f"{len(bwd_big)} of them do the {top:.2f} GFLOP of forward's {len(fwd_big)} largest. ")
            ratio = statistics.median(fwd_big) / statistics.median(bwd_big)
            slow = [(r, layer) for r, layer, x in rows if r.phase == gemm_table.FORWARD and x == top
                    and r.median_us > 1.3 * max(bwd_big)]
            if ratio > 1.3 or slow:
                named = " and ".join(f"#{r.position + 1} ({layer}) took <b>{us(r.median_us)}</b>" for r, layer in slow)
                text += (f"The table shows that equal FLOPs did not take equal time: forward's GEMM {named}, the "
                         f"backward GEMMs of the same FLOPs {us(min(bwd_big))} to {us(max(bwd_big))}, and their "
                         "kernels differ (compare the names). Why cuBLAS picked those kernels is not in the trace. ")
            elif ratio < 1 / 1.3:
                text += (f"The table shows backward's GEMMs slower than forward's of the same FLOPs "
                         f"({us(min(bwd_big))} to {us(max(bwd_big))} against {us(min(fwd_big))} to "
                         f"{us(max(fwd_big))}). ")
            else:
                text += (f"Equal FLOPs took about equal time on both sides ({us(min(fwd_big))} to "
                         f"{us(max(fwd_big))} in forward, {us(min(bwd_big))} to {us(max(bwd_big))} in backward). ")
            text += (f"So backward's GEMMs take {us(bwd_g)} per step against forward's {us(fwd_g)}, "
                     f"{bwd_g / fwd_g:.2f}x rather than the {len(bwd_big) / len(fwd_big):.2f}x that equal times for "
                     f"equal FLOPs would give ({len(bwd_big)} large GEMMs against {len(fwd_big)}); "
                     f"and the optimizer's {us(med['optimizer'])} ({med['optimizer'] / total:.0%}) is GPU time that is "
                     "neither forward nor backward.")
        return widgets.grade(g, text, live=False)

    widgets.ask("12.backward-share", "What share of the step's GPU time goes to backward?", choices=SHARE_CHOICES,
                default=SHARE_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.share(statistics.median(shares)), spoilers.us(med["backward"])]
                if shares else [])


# --- 12.optimizer -----------------------------------------------------------------------------------------------

OPT_CHOICES = ["about the same as for-each", "a few times fewer", "ten times fewer or better"]
OPT_EDGES = [1.5, 10]


def optimizer(loop, run, fused) -> None:
    """12.optimizer: how many fewer GPU launches fused AdamW makes per step than for-each."""
    work = {label: PerStep(r) for label, r in (("one at a time", loop), ("for-each", run), ("fused", fused))}
    ratio = work["for-each"].launches / max(work["fused"].launches, 1)

    def reveal(answer):
        show.table([(label, w.implementation, f"{w.ops:g}", f"{w.launches:g}", us(w.gpu_us))
                    for label, w in work.items()],
                   ["AdamW", "what its ops say", "ATen ops per step", "GPU launches per step", "GPU time per step"])
        launches_figure(work)
        actual = widgets.bucket(ratio, OPT_EDGES, OPT_CHOICES)
        return widgets.verdict(
            answer == actual,
            f"For-each makes <b>{work['for-each'].launches:g} launches per step</b> (kernels, copies, fills), fused "
            f"<b>{work['fused'].launches:g} launches per step</b>: {ratio:.1f}x fewer; one parameter at a time "
            f"{work['one at a time'].launches:g}. GPU time: {us(work['for-each'].gpu_us)} for-each against "
            f"{us(work['fused'].gpu_us)} fused. Whether that shortens the whole step depends on which side, the CPU "
            "issuing the step or the GPU running it, sets its pace: the last prediction of this notebook measures it.",
            actual=actual)

    widgets.ask("12.optimizer", "How many fewer GPU launches will fused AdamW make per step than for-each?",
                choices=OPT_CHOICES, default=OPT_CHOICES[0], reveal=reveal,
                # the launches as the reveal prints them; the bare ratio ("4x") and times under a millisecond
                # ("0.1 ms") have forms too common in the series' other text to tell a leak from a coincidence
                decides=lambda: [spoilers.value(work["for-each"].launches, "launches per step"),
                                 spoilers.value(work["fused"].launches, "launches per step")])


# --- 12.syncs ---------------------------------------------------------------------------------------------------


def syncs(syncing) -> None:
    """12.syncs: how many times per step the CPU waits for the GPU in the bookkeeping block."""
    found = waits(syncing)
    steps = max(len(facts.steps(syncing.trace)), 1)
    per_step = len(found) / steps

    def reveal(answer):
        groups = waits_by_line(syncing)
        show.table([(g["op"], len(g["waited"]),
                     f"{len(g['waited']) / steps:g}", g["calls"], us(statistics.median(g["waited"])),
                     us(statistics.median(g["idle"])) if g["idle"] else "-") for g in groups],
                   ["op that needed the value", f"waits in {steps} steps", "per step", "calls",
                    "CPU waited (median)", "GPU idle after (median)"])
        lines = "".join(f"<li>{show.code(g['op'])}: {html.escape(g['cause'] or 'no usual Python known')}</li>"
                        for g in groups)
        return widgets.verdict(
            widgets.within(answer, per_step, factor=1.01),
            f"<b>{per_step:g} waits per step</b>, one group per op that needed a value from the GPU (each inside "
            f"the <code>{html.escape(str(groups[0]['annotation']) if groups else '-')}</code> label). The Python "
            f"that usually calls each op:<ul>{lines}</ul>While the CPU waits, it queues nothing, so after each wait "
            "the GPU sits idle until the CPU catches up: the last column.", actual=per_step)

    widgets.ask("12.syncs", "How many times per step will the CPU wait for the GPU in the bookkeeping block?",
                unit="waits", default=0, reveal=reveal,
                decides=lambda: [spoilers.value(per_step, "waits per step")])


# --- 12.sync-cost -----------------------------------------------------------------------------------------------

COST_CHOICES = ["about the same (within 10%)", "10% to 50% longer", "more than 50% longer"]
COST_EDGES = [1.1, 1.5]
CLEAN, LINES = "fp32", "four syncing lines"


def _where(timed) -> str:
    """Where and how the comparison was timed, in one sentence."""
    c = timed.measured.conditions
    parts = [f"{c.threads} thread{'s' if c.threads != 1 else ''}"] if c.threads else []
    if c.load is not None and c.cpus:
        parts.append(f"load {c.load * c.cpus:.1f} on {c.cpus} cores" + (", busy" if c.busy else ""))
    src = timed.source[:1].upper() + timed.source[1:]
    return html.escape(src + (f" ({', '.join(parts)})" if parts else "") + ".")


def sync_cost(timed, run, syncing) -> None:
    """12.sync-cost: how much longer a step with the four lines is, timed without the profiler, round by round."""
    have = CLEAN in timed.labels and LINES in timed.labels
    ratio = timed.ratio(LINES, CLEAN) if have else Spread.of([], "x")

    def reveal(answer):
        if not have:
            return widgets.verdict(None, f"This comparison could not time both steps here ({timed.unavailable}).")
        a, b = timed.spread(CLEAN), timed.spread(LINES)
        _shared.spread_figure({"clean step (fp32)": a.scaled(1e-3, "ms"), "with the four lines": b.scaled(1e-3, "ms")},
                              title="one training step, timed without the profiler, in turn", unit="ms per step")
        traced = [facts.median_step_us(r.trace) for r in (run, syncing)]
        show.table([("clean (fp32)", a.text(_ms), _ms(traced[0])),
                    ("with the four lines", b.text(_ms), _ms(traced[1])),
                    ("lines / clean, round by round", ratio.text(), f"{traced[1] / traced[0]:.2f}x")],
                   ["", "unprofiled, in turn", "the trace's median step (profiled)"])
        g = measure.grade_choice(answer, ratio, COST_EDGES, COST_CHOICES, fmt=lambda v: f"{v:.2f}x")
        return widgets.grade(
            g, f"With the four lines a step takes <b>{ratio.median:.2f}x</b> the clean one, round by round "
            f"({_ms(b.median)} against {_ms(a.median)}, medians of {a.n} rounds). The trace's median steps say "
            f"{traced[1] / traced[0]:.2f}x: under the profiler the clean step itself takes {_ms(traced[0])}, "
            f"{traced[0] / a.median:.1f}x its unprofiled time, because the profiler pays a cost on the CPU for every "
            "op (notebook 00), and the ratio of two profiled steps is not the program's. Use the trace to see "
            "<i>why</i>, and an unprofiled timer, in turn, to see <i>how much</i>. " + _where(timed), live=_live())

    widgets.ask("12.sync-cost", "Timed without the profiler, how much longer is a step with the four lines?",
                choices=COST_CHOICES, default=COST_CHOICES[0], reveal=reveal,
                # the step with the lines, as printed; the ratio's short forms ("1.2x") are choices elsewhere
                decides=lambda: [spoilers.us(timed.spread(LINES).median)] if have else [])


# --- 12.why-sync ------------------------------------------------------------------------------------------------

WHY_SYNC = ["mostly more GPU work: the lines' own kernels", "mostly GPU idle time after each wait"]


def why_sync(run, syncing) -> None:
    """12.why-sync: whether the four lines add GPU work or GPU idle time, step by step."""
    found = waits(syncing)
    clean = statistics.median(device_per_step(run) or [0.0])
    names = [s.name for s in facts.steps(syncing.trace)]
    extra = [max(d - clean, 0.0) for d in device_per_step(syncing)]
    idle = [sum(x.gpu_idle_after_us or 0 for x in found if x.step == n) for n in names]

    def reveal(answer):
        e, i = statistics.median(extra or [0.0]), statistics.median(idle or [0.0])
        show.display_figure(plots.bars({"more GPU work per step": e, "GPU idle after the waits, per step": i},
                                       title="what the four lines add, per step (trace, median of the steps)",
                                       unit="us"))
        picks = {WHY_SYNC[1] if a > b else WHY_SYNC[0] for a, b in zip(idle, extra)}
        actual = WHY_SYNC[1] if i > e else WHY_SYNC[0]
        per = "; ".join(f"{n}: {us(b)} of work, {us(a)} idle" for n, a, b in zip(names, idle, extra))
        text = (f"Per step the four lines add {us(e)} of GPU work and leave the GPU idle for <b>{us(i)}</b> after "
                f"their waits ({per}). ")
        if len(picks) > 1:
            return widgets.inconclusive(text + "The recorded steps disagree on which is larger.", actual=actual,
                                        rerun=False)
        return widgets.verdict(
            answer == actual,
            text + f"In every recorded step the same explanation survives: {actual}. What usually helps "
            "(<a href='" + TUNING_GUIDE + "'>PyTorch's performance tuning guide</a>, <i>avoid unnecessary CPU-GPU "
            "synchronization</i>): keep values on the GPU (accumulate the loss in a tensor and read it every N "
            "steps), avoid data-dependent shapes in the hot loop, and move copies to the CPU out of it.",
            actual=actual)

    widgets.ask("12.why-sync", "What do the four lines add to the step, mostly?", choices=WHY_SYNC, default=WHY_SYNC[0],
                reveal=reveal,
                decides=lambda: [spoilers.us(statistics.median(idle or [0.0]))])


# --- 12.precision -----------------------------------------------------------------------------------------------


def prec_choices(dtype: str) -> list[str]:
    return [f"TF32 faster, {dtype} autocast faster still", "TF32 faster, autocast about the same",
            "neither changes much"]


def _prec_pick(t32: float, t_tf: float, t_amp: float, choices: list[str]) -> str:
    return (choices[0] if t_tf < 0.8 * t32 and t_amp < 0.8 * t_tf else
            choices[1] if t_tf < 0.8 * t32 else choices[2])


def precision(run, tf32, amp) -> None:
    """12.precision: what TF32 and autocast do to the step's GEMM time (every combination of recorded steps)."""
    choices = prec_choices(amp.dtype)
    t32, t_tf, t_amp = gemm_us(run), gemm_us(tf32), gemm_us(amp)

    def reveal(answer):
        rows = []
        for label, r in (("fp32 (highest)", run), ("TF32 (high)", tf32), (f"autocast ({amp.dtype})", amp)):
            math, share, name = gemm_math(r)
            rows.append((label, short(name, 60), f"{math} ({share:.0%} of GEMM time)", us(gemm_us(r)),
                         ", ".join(us(v) for v in gemm_per_step(r))))
        show.table(rows, ["", "longest GEMM kernel of the main kind", "what the names say", "GEMM time per step",
                          "each recorded step"])
        picks = {_prec_pick(a, b, c, choices)
                 for a, b, c in itertools.product(gemm_per_step(run), gemm_per_step(tf32), gemm_per_step(amp))}
        actual = _prec_pick(t32, t_tf, t_amp, choices)
        g = (Graded(Status.INCONCLUSIVE, actual,
                    "the recorded steps, taken in every pairing, fall in more than one choice")
             if len(picks) > 1 else
             Graded(Status.HELD if answer == actual else Status.MISSED, actual,
                    "every pairing of the recorded steps gives the same choice (faster: under 80% of the time before)"))
        return widgets.grade(
            g, f"GEMM time per step: {us(t32)} in fp32, <b>{us(t_tf)}</b> with TF32 ({t32 / t_tf:.1f}x faster), "
            f"<b>{us(t_amp)}</b> with autocast ({t32 / t_amp:.1f}x). The kernel names say why: read the middle column. "
            "TF32 keeps float32 storage and range but rounds the multiply's inputs to a 10-bit mantissa, which is what "
            f"the tensor cores take (<a href='{TF32_DOCS}'>TF32 in PyTorch</a>, which also says it needs an Ampere or "
            "later GPU: on an older one the first two rows match).", live=False)

    widgets.ask("12.precision", f"Against fp32, what will TF32 and {amp.dtype} autocast do to the step's GEMM time?",
                choices=choices, default=choices[2], reveal=reveal,
                # fp32's and TF32's GEMM times and the kernels' names; the ratios' short forms ("4x", "10x") are
                # choices elsewhere, and autocast's time reads "0.1 ms" at one digit, as other notebooks' figures do
                decides=lambda: [spoilers.us(t32), spoilers.us(t_tf),
                                 spoilers.name(gemm_math(tf32)[2]), spoilers.name(gemm_math(amp)[2])])


# --- 12.step-time -----------------------------------------------------------------------------------------------

STEP_CHOICES = ["shorter by 40% or more", "10% to 40% shorter", "less than 10% shorter, or longer"]
STEP_EDGES = [0.6, 0.9]


def step_time(timed, run, tf32, amp, fused) -> None:
    """12.step-time: what autocast, which made the GEMMs several times faster, does to the whole step, unprofiled."""
    s = sides(timed, run, tf32, amp, fused)
    a32, tf, am, fu = (s[k] for k in VARIANTS)
    have = am.ratio.n > 0

    def reveal(answer):
        if not have:
            return widgets.verdict(None, f"This comparison could not time autocast here ({timed.unavailable}).")
        bound_figure(s)
        show.table([(k, x.step.text(_ms), x.ratio.text() if k != "fp32" else "-", us(x.gemm), us(x.gpu),
                     x.host.text(_ms) if x.host else "not timed") for k, x in s.items() if x.step.n],
                   ["", "step, unprofiled, in turn", "against fp32, round by round", "GEMM time per step (trace)",
                    "all GPU work per step (trace)",
                    "CPU time to issue a step (unprofiled, timed apart: compare loosely)"])
        g = measure.grade_choice(answer, am.ratio, STEP_EDGES, STEP_CHOICES, fmt=lambda v: f"{v:.2f}x")
        text = (f"Autocast cut the GEMM time per step {a32.gemm / am.gemm:.1f}x ({us(a32.gemm)} to {us(am.gemm)}); "
                f"the whole step went from {_ms(a32.step.median)} to {_ms(am.step.median)}, "
                f"<b>{am.ratio.median:.2f}x</b> round by round. ")
        bound, share, host = bound_of(am)
        h32 = a32.host.median if a32.host else None
        if h32 is not None and a32.gpu >= 0.85 * a32.step.median and h32 >= 0.85 * a32.step.median:
            text += (f"In fp32 both sides fill the step: the GPU's work ({us(a32.gpu)} per step, trace) and the CPU's "
                     f"time to issue it ({_ms(h32)}, unprofiled) are each near the step's {_ms(a32.step.median)}. "
                     "Faster GEMMs shrink the GPU's side only. ")
        if bound == CPU_BOUND:
            text += (f"The GPU has work for only {share:.0%} of an autocast step ({us(am.gpu)} of kernels, copies and "
                     f"fills per step in the trace), while the CPU takes {_ms(host)} to issue one step without the "
                     "profiler: the CPU sets the pace. The step is <b>CPU-bound</b>, so faster kernels only lengthen "
                     "the GPU's idle gaps. ")
        elif bound == UNEXPLAINED:
            text += (f"The GPU has work for only {share:.0%} of an autocast step ({us(am.gpu)}), and the CPU's own "
                     f"time to issue one ({_ms(host) if host else 'not timed here'}) does not fill it either: "
                     "something else waits, which the trace's gaps would show. ")
        elif bound == GPU_BOUND:
            text += (f"The GPU's work fills {share:.0%} of an autocast step ({us(am.gpu)}): the step is GPU-bound "
                     "here, and what its kernels save, it saves. ")
        else:
            text += (f"The GPU has work for {share:.0%} of an autocast step ({us(am.gpu)}), and the CPU takes "
                     f"{_ms(host) if host else 'an untimed while'} to issue one: neither side alone sets the pace. ")
        if fu.ratio.n:
            lo, hi = fu.ratio.quartiles
            if hi < 1:
                # Each side's change is said as the data gives it: the CPU's issue times were taken apart (each before
                # its own trace), so only a change beyond both spreads counts as one.
                cpu_side = ""
                if a32.host and fu.host:
                    (a_lo, a_hi), (f_lo, f_hi) = a32.host.quartiles, fu.host.quartiles
                    moved = ("fell" if f_hi < a_lo else "rose" if f_lo > a_hi else "stayed within its spread")
                    cpu_side = (f" The CPU's time to issue a step {moved}: {_ms(a32.host.median)} against "
                                f"{_ms(fu.host.median)}, timed apart ({PerStep(run).ops:g} optimizer ops per step "
                                f"become {PerStep(fused).ops:g}: 12.optimizer's table).")
                gpu_side = ("cut" if fu.gpu < a32.gpu else "did not cut")
                text += (f"Fused AdamW changes no GEMM, and it shortened the step to {_ms(fu.step.median)} "
                         f"({fu.ratio.median:.2f}x round by round, IQR {lo:.2f}x to {hi:.2f}x). It {gpu_side} the GPU's "
                         f"work per step from {us(a32.gpu)} to {us(fu.gpu)}.{cpu_side} ")
            elif lo > 1:
                text += f"Fused AdamW made the step longer here ({fu.ratio.text()}). "
            else:
                text += f"Fused AdamW did not measurably change the step here ({fu.ratio.text()}). "
        if tf.ratio.n:
            lo, hi = tf.ratio.quartiles
            if hi < 1:
                text += (f"TF32 shortened the step by {us(a32.step.median - tf.step.median)} (medians), while it "
                         f"shortened the GEMMs by {us(a32.gemm - tf.gemm)} ({tf.ratio.median:.2f}x per round, IQR "
                         f"{lo:.2f}x to {hi:.2f}x). ")
            elif lo > 1:
                text += f"TF32 made the step longer here ({tf.ratio.text()}). "
            else:
                text += f"TF32 did not measurably change the step here ({tf.ratio.text()}). "
        text += ("Which bound are you? Set the GPU's work per step beside the step's unprofiled time before making "
                 "kernels faster. " + _where(timed) + show.timing_caveat(run, tf32, amp, fused))
        return widgets.grade(g, text, live=_live())

    widgets.ask("12.step-time", "Against fp32, what does autocast do to the whole training step, timed without the "
                "profiler?",
                choices=STEP_CHOICES, default=STEP_CHOICES[1], reveal=reveal,
                # the times the reveal prints; ratios near 1 have a form ("1x") found in kernel names
                decides=lambda: ([spoilers.us(am.step.median), spoilers.us(am.gpu), spoilers.us(fu.step.median)]
                                 + ([spoilers.us(am.host.median)] if am.host else [])) if have else [])


# --- 12.perfetto --------------------------------------------------------------------------------------------------


def perfetto_wait(syncing) -> None:
    """12.perfetto: the longest cudaStreamSynchronize inside the recorded steps, found in Perfetto."""
    found = longest_wait(syncing)

    def reveal(answer):
        if found is None:
            return widgets.verdict(None, "This trace holds no cudaStreamSynchronize inside its steps.")
        dur, op = found
        return widgets.verdict(widgets.within(answer, dur, factor=1.2),
                               f"The longest <code>cudaStreamSynchronize</code> inside the recorded steps lasts "
                               f"<b>{us(dur)}</b>, under {show.code(op)}. Within 20% counts.", actual=dur)

    widgets.ask("12.perfetto", "In the trace with the four lines, find the longest cudaStreamSynchronize inside the "
                "recorded steps. How long is it?", unit="us", default=0, reveal=reveal, kind="task",
                # its answer, a few tens of µs, is written the same way in unrelated text of earlier notebooks
                # (04: "26 µs of GPU work"); no earlier reveal shows this call's duration
                decides=lambda: [])


# --- the exercise -------------------------------------------------------------------------------------------------


def exercise_optimizer_ops(cpu_run) -> None:
    """For-each against one parameter at a time, in ATen ops per step, on this CPU."""
    from ..runs.profiling import profile
    from ..runs.training import train_step

    def solution():
        a = profile(train_step(batch=64, dim=256, hidden=512, optimizer="loop"), warm=True, on="cpu", timed=False)
        oa, ob = PerStep(a), PerStep(cpu_run)
        t = cpu_run.trace
        first = next((i for i in range(len(t)) if t.name_of(i).startswith("aten::_foreach_")), None)
        inside = ""
        if first is not None:
            kids: dict[str, int] = {}
            for d in t.descendants(first):
                kids[t.name_of(d)] = kids.get(t.name_of(d), 0) + 1
            inside = (f" Inside one <code>{t.name_of(first)}</code>: "
                      + ", ".join(f"{n} x {show.code(k)}" for k, n in sorted(kids.items(), key=lambda kv: -kv[1])[:4])
                      + ".")
        show.md(f"On this CPU one optimizer step dispatches {oa.ops:g} ATen ops one parameter at a time and {ob.ops:g} "
                f"for-each ({ob.ops / max(oa.ops, 1):.2f}x).{inside} What the trace suggests, as a hypothesis: on the "
                "CPU the for-each ops run a per-tensor version inside, so they save no dispatches there; their saving "
                "is on the GPU, in launches.")

    widgets.exercise("the optimizer on the CPU",
                     "On the CPU, will for-each AdamW (<code>foreach=True</code>) dispatch fewer ATen ops per step "
                     "than one parameter at a time? Write down a factor, then ask for the solution (it runs on this "
                     "CPU).",
                     solution)


# --- for the checkpoint -------------------------------------------------------------------------------------------


def sync_cost_reading(timed) -> list:
    """The choice 12.sync-cost's per-round ratios give, and whether they give it conclusively."""
    if CLEAN not in timed.labels or LINES not in timed.labels:
        return ["not measured", False]
    g = measure.grade_choice(None, timed.ratio(LINES, CLEAN), COST_EDGES, COST_CHOICES)
    return [g.actual, g.conclusive]


def step_time_reading(timed, run, tf32, amp, fused) -> list:
    """12.step-time's choice for autocast, whether conclusive, and which side sets autocast's pace."""
    am = sides(timed, run, tf32, amp, fused)["autocast"]
    if not am.ratio.n:
        return ["not measured", False, None]
    g = measure.grade_choice(None, am.ratio, STEP_EDGES, STEP_CHOICES)
    return [g.actual, g.conclusive, bound_of(am)[0]]


def equal_flops_ratio(run) -> float | None:
    """Forward's largest GEMMs over backward's of the same FLOPs (medians): 1 when equal work takes equal time."""
    fwd, bwd = big_gemms(gemm_rows(run))
    return round(statistics.median(fwd) / statistics.median(bwd), 1) if fwd and bwd else None
