"""Notebook 14's questions: how busy the GPU is behind a DataLoader, copies from pinned memory, four workers.

The step times the notebook grades come from ``comparisons.measure("input")``:
the three pipelines timed in turn without the profiler (wall time per step,
each block after untimed steps, so that batches the workers prepared during
the other pipelines' turns do not come free). The profiled traces give what
a timing cannot: where the step goes, and whether the GPU has work.
"""

from __future__ import annotations

import html
import statistics

from ..advice.rulebook import RuleId
from .. import facts
from ..runs import comparisons, rounds
from ..advice import diagnose
from ..facts import measure, step_facts
from ..lesson import plots, show, spoilers, widgets
from ..facts.measure import Spread
from ..facts.text import nbytes, us
from . import _shared

PAGEABLE, PINNED, WORKERS = comparisons.GROUPS["input"].labels

BUSY_CHOICES = ["under 10%", "10% to 50%", "more than half"]
BUSY_EDGES = [0.1, 0.5]

COPY_CHOICES = ["about the same speed", "clearly faster (1.5x or more)", "slower"]
COPY_EDGES = [0.9, 1.5]
COPY_ORDER = [COPY_CHOICES[2], COPY_CHOICES[0], COPY_CHOICES[1]]  # the choices from the lowest ratio up

STEP_CHOICES = ["about the same", "up to 2x shorter", "2x to 5x shorter", "more than 5x shorter"]
STEP_EDGES = [1.2, 2, 5]


def _ms(s: Spread) -> Spread:
    return s.scaled(1e-3, "ms")


def _ms_text(v: float) -> str:
    return f"{v / 1e3:.1f} ms"


def step_busy(run) -> list[tuple[str, float, float]]:
    """Per recorded step: (name, GPU busy time inside it, its length), in µs, from the trace."""
    return facts.gpu_busy_per_step(run.trace)


def busy_share(run, timed) -> Spread:
    """The GPU's busy share of a step: its GPU time per step (the trace's median step) over each step timed
    without the profiler (the comparison's rounds for the main process, pageable)."""
    gpu = statistics.median(b for _, b, _ in step_busy(run))
    return Spread.of([gpu / w for w in timed.spread(PAGEABLE).samples if w > 0], "%")


def first_finding(run) -> diagnose.Finding | None:
    found = diagnose.diagnose(run.trace)
    return found[0] if found else None


def busy(one, timed) -> None:
    """14.busy: with the DataLoader in the main process, how busy the GPU is."""
    share = busy_share(one, timed)
    steps = step_busy(one)

    def reveal(answer):
        plain = timed.spread(PAGEABLE)
        gpu = statistics.median(b for _, b, _ in steps)
        spans = step_facts.dataloader_spans(one.trace)
        show.table([(name, f"{b / d:.1%}", next((f"{s.step_share:.0%}" for s in spans if s.step == name), "-"),
                     next((f"{s.gpu_idle_share:.0%}" for s in spans if s.step == name and s.gpu_idle_share
                           is not None), "-")) for name, b, d in steps],
                   ["step (profiled)", "GPU busy", "the DataLoader's __next__: share of the step",
                    "GPU idle during it"])
        show.display_figure(plots.timeline(one.trace, plots.step_window(one.trace, 1, 1),
                                           title=f"{one.tag}: one step (the GPU lane is at the bottom)"))
        g = measure.grade_choice(answer, share, BUSY_EDGES, BUSY_CHOICES)
        loader = statistics.median(s.step_share for s in spans if s.step_share is not None) if spans else None
        f = first_finding(one)
        b = one.summary.balance
        outside = (f" Fewer, bigger kernels (the advice for <i>{html.escape(b.verdict)}</i>, notebook 02's verdict "
                   f"on this trace) could win back at most the {1 - loader:.0%} of the step outside the DataLoader's "
                   "span." if loader is not None and b.verdict else "")
        said = (f" <code>diagnose</code>'s first finding on this trace: <b>{html.escape(f.title)}</b>."
                if f is not None else " <code>diagnose</code> finds nothing to report on this trace.")
        return widgets.grade(
            g, f"The GPU had <b>{us(gpu)}</b> of work per step (the trace's median step) and a step lasted "
            f"{_ms(plain).text()} timed without the profiler: busy <b>{share.median:.1%}</b> of the step (the "
            f"profiled steps, in the table: {min(x / d for _, x, d in steps):.1%} to "
            f"{max(x / d for _, x, d in steps):.1%})."
            + (f" The DataLoader's span took a median {loader:.0%} of each profiled step, and the GPU sat idle "
               "through it: the step waits for its input." if loader is not None else "")
            + outside + said + f" ({timed.source}.)", live=timed.source.startswith("measured now"))

    widgets.ask("14.busy", "With the DataLoader in the main process, how busy is the GPU?", choices=BUSY_CHOICES,
                default=BUSY_CHOICES[2], reveal=reveal,
                # the step's length the share rests on (a share's short form, "2%", is in every other table, and
                # the GPU's ~1 ms of work per step reads "1 ms" in many)
                decides=lambda: [spoilers.us(timed.spread(PAGEABLE).median)])


def batch_copies(run) -> list[tuple[float, int]]:
    """The batch's image copies to the GPU (the largest host-to-device copies of the run): (µs, bytes) each."""
    t = run.trace
    found = []
    for j in facts.gpu_work(t):
        b = t.args.get(j, {}).get("bytes")
        if "HtoD" in t.name_of(j) and isinstance(b, int) and not isinstance(b, bool):
            found.append((t.dur[j], b))
    top = max((b for _, b in found), default=0)
    return [(d, b) for d, b in found if b == top and top > 0]


def copy_speeds(run) -> Spread:
    """GB/s of each image copy."""
    return Spread.of([b / d / 1e3 for d, b in batch_copies(run) if d > 0], "GB/s")


def copy(one, pinned) -> None:
    """14.copy: whether a copy from pinned memory is faster than from pageable memory."""
    slow, fast = copy_speeds(one), copy_speeds(pinned)
    ratio = measure.ratio_range(fast, slow)

    def reveal(answer):
        rows = []
        for r in (one, pinned):
            for c in step_facts.h2d_copies(r.trace):
                rows.append((r.tag, c.memory, c.count, nbytes(c.bytes) if c.bytes else "-", us(c.total_us),
                             f"{c.gb_per_s:.1f} GB/s" if c.gb_per_s else "-"))
        show.table(rows, ["run", "copies from", "count (images and labels)", "bytes in all", "GPU time in all",
                          "achieved"])
        g = measure.grade_choice(answer, ratio, COPY_EDGES, COPY_ORDER)
        size = batch_copies(one)[0][1] if batch_copies(one) else 0
        copies_us = sum(c.total_us for c in step_facts.h2d_copies(one.trace))
        loader_us = sum(s.dur_us for s in step_facts.dataloader_spans(one.trace))
        cost = (f" But the copy was never the big cost in this step: the pageable copies took {us(copies_us)} of GPU "
                f"time in all, {copies_us / loader_us:.1%} of the time the main thread spent in the DataLoader's "
                "spans." if loader_us > 0 else "")
        return widgets.grade(
            g, f"Each {nbytes(size)} batch of images copied at <b>{fast.median:.1f} GB/s</b> (median) from pinned "
            f"memory against <b>{slow.median:.1f} GB/s</b> from pageable memory: <b>{ratio.median:.1f}x</b> (every "
            f"pairing of the {fast.n} and {slow.n} copies: {min(ratio.samples):.1f}x to {max(ratio.samples):.1f}x; "
            "the table's rate counts the labels' small copies too). A "
            "pageable copy goes through a staging buffer the driver pins for it; a pinned one goes straight "
            "(NVIDIA's <a href='https://developer.nvidia.com/blog/how-optimize-data-transfers-cuda-cc/'>data "
            "transfer guide</a>)." + cost, live=False)

    widgets.ask("14.copy", "Copied from pinned memory, will the host-to-device copy be faster than from pageable "
                "memory?", choices=COPY_CHOICES, default=COPY_CHOICES[0], reveal=reveal,
                # the rates (a ratio's short form, "2x", is in every notebook)
                decides=lambda: [spoilers.value(round(fast.median, 1), "GB/s"),
                                 spoilers.value(round(slow.median, 1), "GB/s")])


def _profiled_steps_text(run) -> str:
    d = [s.dur_us for s in facts.steps(run.trace)]
    return ", ".join(_ms_text(x) for x in d) if d else "-"


def workers(one, pinned, four, timed) -> None:
    """14.workers: how much shorter a step is with four DataLoader workers, timed without the profiler."""
    state = {"timed": timed}

    def reveal(answer):
        cmp = state.pop("timed", None) or comparisons.measure("input")  # a rerun measures again (live only)
        ratio = cmp.ratio(PAGEABLE, WORKERS)
        pin = cmp.ratio(PAGEABLE, PINNED)
        runs = [(PAGEABLE, one), (PINNED, pinned), (WORKERS, four)]
        _shared.spread_figure({label: _ms(cmp.spread(label)) for label, _ in runs},
                              title="Wall time per step, the three pipelines timed in turn (no profiler)",
                              unit="ms per step")
        show.table([(label, _ms(cmp.spread(label)).text(), _profiled_steps_text(r),
                     f"{r.summary.balance.gpu_busy_share:.0%}") for label, r in runs],
                   ["", "step, timed without the profiler (median, IQR)", "the profiled steps", "GPU busy (trace)"])
        g = measure.grade_choice(answer, ratio, STEP_EDGES, STEP_CHOICES)
        prof = [s.dur_us for s in facts.steps(four.trace)]
        spans = step_facts.dataloader_spans(four.trace)
        quick = [s for s in spans if s.step_share is not None and s.step_share < 0.1]
        waited = [s for s in spans if s not in quick]
        prefetch = ""
        if prof and quick and waited:
            prefetch = (f" The profiled steps cannot say it: with four workers they ranged {_ms_text(min(prof))} to "
                        f"{_ms_text(max(prof))}; in {len(quick)} of {len(spans)} of them the DataLoader handed over a "
                        f"batch prepared ahead ({us(max(s.dur_us for s in quick))} or less), in the other "
                        f"{len(waited)} the main thread waited up to {us(max(s.dur_us for s in waited))} for one. "
                        "Workers prepare <code>prefetch_factor</code> batches each ahead of time (2 by default: "
                        "<a href='https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader'>"
                        "DataLoader</a>), so a few steps after a pause look faster than the workers can sustain; the "
                        "timing above starts each block after untimed steps, so those batches do not come free.")
        pin_text = (f"Pinned, non-blocking copies alone, round by round: the step {pin.text()} shorter, "
                    + ("about the same: a copy 14.copy found faster did not shorten the step, so the copy is not what "
                       "holds it up. " if 0.8 <= pin.median < 1.2 else
                       "a change larger than the copy's own share of the step would explain: a question for the "
                       "trace. "))
        bound = four.summary.balance.gpu_busy_share
        f = first_finding(four)
        still = (f" Four workers leave the GPU busy {bound:.0%} of the profiled window"
                 + (f", and <code>diagnose</code>'s first finding on their trace is still <b>{html.escape(f.title)}"
                    f"</b> ({html.escape(f.evidence[0])})" if f is not None else
                    ", and <code>diagnose</code> finds nothing to report on their trace")
                 + (": the step is still input-bound. " if f is not None and f.rule == RuleId.INPUT_BOUND else ". "))
        why = ("Four workers did not make the step four times shorter. Hypotheses to test: the workers compete for "
               "the CPU's cores with each other and with the main process, or handing a batch from a worker to the "
               "main process costs time of its own; timing more workers, or one worker's batch alone, would tell "
               "them apart." if ratio.median < 3.5 else "")
        return widgets.grade(
            g, f"Timed without the profiler, round by round, four workers made the step <b>{ratio.text()}</b> "
            f"shorter than the main process with pageable copies (medians "
            f"{_ms_text(cmp.spread(PAGEABLE).median)} and {_ms_text(cmp.spread(WORKERS).median)})."
            + prefetch + " " + pin_text + still + why + f" ({cmp.source}; {html.escape(cmp.conditions_text())}.)",
            live=cmp.source.startswith("measured now"))

    widgets.ask("14.workers", "With four DataLoader workers (and pinned, non-blocking copies), how much shorter will "
                "a step be?", choices=STEP_CHOICES, default=STEP_CHOICES[0], reveal=reveal,
                decides=lambda: [spoilers.exact(f"{timed.ratio(PAGEABLE, WORKERS).median:.2f}x"),
                                 spoilers.us(timed.spread(WORKERS).median)])


def _span(one):
    spans = step_facts.dataloader_spans(one.trace)
    return (spans[1] if len(spans) > 1 else spans[0]) if spans else None


def perfetto_span(one) -> None:
    """14.perfetto: the DataLoader's __next__ span in one step, found in Perfetto."""
    s = _span(one)
    if s is None:
        show.md("This trace holds no DataLoader span: nothing to find.")
        return

    def reveal(found):
        return widgets.verdict(widgets.within(found, s.dur_us / 1e3, factor=1.1),
                               f"In {html.escape(str(s.step))} the DataLoader's span lasts <b>{us(s.dur_us)}</b>. "
                               "Within 10% counts.", actual=s.dur_us / 1e3)

    widgets.ask("14.perfetto", f"Find the DataLoader's __next__ span in {s.step}. How long is it (in ms)?",
                unit="ms", default=0, reveal=reveal, kind="task", decides=lambda: [spoilers.us(s.dur_us)])


def exercise_lighter(cpu_run) -> None:
    """The "lighter samples" exercise: half the CPU work per sample, on this CPU, timed in turn without the profiler."""
    from ..runs.training import input_pipeline

    def solution():
        labels = {"work=5000": input_pipeline(batch=8, size=64, work=5000),
                  "work=2500": input_pipeline(batch=8, size=64, work=2500)}
        with rounds.one_thread():
            calls = {k: w.build("cpu", "fp32") for k, w in labels.items()}
            m = rounds.interleave(calls, device="cpu", rounds=8, max_per_block=3, host=False, wall=True,
                                  where="this CPU")
        a, b = m.wall["work=5000"], m.wall["work=2500"]
        r = measure.per_round(a, b)
        share = step_facts.dataloader_share(cpu_run.trace)
        expected = 1 / (1 - share / 2)
        lo, hi = r.quartiles
        _shared.spread_figure({k: _ms(v) for k, v in m.wall.items()}, title="One step on this CPU, timed in turn",
                              unit="ms per step")
        verdict = ("inside the measured spread: Amdahl's law accounts for it" if lo <= expected <= hi else
                   "outside the measured spread: the DataLoader's share, read from three profiled steps, or the "
                   "profiler's own cost on the rest of the step, is off; a share read from more steps would tell")
        show.md(f"With half the work per sample the step went from {_ms(a).text()} to {_ms(b).text()}: "
                f"{r.text()} shorter, round by round. The DataLoader took {share:.0%} of the profiled step, so halving "
                f"only its work predicts about {expected:.2f}x (Amdahl's law: the rest of the step does not change); "
                f"that prediction is {verdict}. ({html.escape(m.conditions.text())}.)")

    widgets.exercise("lighter samples",
                     "Halve the CPU work per sample (<code>work=2500</code>) in the CPU version above, with no worker. "
                     "How much shorter will the step be? Write down a factor, then ask for the solution (it times "
                     "both on this CPU, in turn, without the profiler).", solution)
