"""Notebook 16's questions: a training loop with five problems, fixed one at a time and timed after each fix.

Every step time graded here is unprofiled wall time per step, timed in turn
(:mod:`helpers.runs.comparisons`): ``loop-alone`` times the loop as written
against each fix alone; ``loop-stack`` times the fixes one on top of another
in :data:`~helpers.runs.slow_loop.FIXES` order. Live, :class:`Bench` times each fix
the learner applies against the stage before it, in the order they choose;
recorded, it reads ``loop-stack``. The traces (profiled ``with_stack=True``)
say where a step goes and which line of the loop made each wait.
"""

from __future__ import annotations

import functools
import html
import inspect
import re
import statistics
from dataclasses import dataclass

from ..advice.rulebook import RuleId
from .. import facts
from ..runs import comparisons, slow_loop
from ..advice import diagnose
from ..facts import measure, python_lines, step_facts, kernel_kinds as kk
from ..lesson import plots, show, spoilers, widgets
from ..reader.categories import DRIVER, GPU_ANNOTATION, RUNTIME
from ..reader.spans import covered, difference, merged, total as span_total
from ..runs.comparisons import Comparison, Member
from ..facts.measure import Spread
from ..runs.mode import environment
from ..runs.slow_loop import FIX_WORDS, FIXES
from ..facts.text import us
from . import _shared

AS_WRITTEN = "as written"
LOOP_FILE = "slow_loop.py"

FIRST_CHOICES = [FIX_WORDS[f] for f in FIXES]

WAIT_CHOICES = ["none", "one", "two", "three", "four or more"]

STEP_CHOICES = ["about the same (under 1.1x)", "1.1x to 1.5x shorter", "more than 1.5x shorter"]
STEP_EDGES = [1.1, 1.5]

TOTAL_CHOICES = ["under 2x shorter", "2x to 4x shorter", "more than 4x shorter"]
TOTAL_EDGES = [2, 4]

#: which fix a diagnose rule points at, where one does
RULE_FIX = {RuleId.INPUT_BOUND: "loader", RuleId.PAGEABLE_COPIES: "loader", RuleId.FP32_GEMM: "tf32",
            RuleId.UNFUSED_OPTIMIZER: "fused"}


def _ms(s: Spread) -> Spread:
    return s.scaled(1e-3, "ms")


def _label(fixes: tuple[str, ...] | list[str]) -> str:
    return "+".join(fixes) if fixes else AS_WRITTEN


def _first(run) -> diagnose.Finding | None:
    found = diagnose.diagnose(run.trace)
    return found[0] if found else None


# --- the loop's source --------------------------------------------------------------------------


def _source() -> str:
    return inspect.getsource(slow_loop)


def step_source() -> tuple[int, list[str]]:
    """The loop's step function: its first line number in slow_loop.py, and its lines."""
    lines, start = inspect.getsourcelines(slow_loop._build_loop)
    first = next(n for n, ln in enumerate(lines) if ln.strip().startswith("def step("))
    last = next(n for n in range(first, len(lines)) if lines[n].strip() == "return loss")
    return start + first, [ln.rstrip("\n") for ln in lines[first:last + 1]]


def show_loop() -> None:
    """The loop's step, with slow_loop.py's line numbers (the reveals refer to them)."""
    start, lines = step_source()
    show.pre("\n".join(f"{start + n:4d}  {ln}" for n, ln in enumerate(lines)))


def _gpu_lane_row(table: str, name: str) -> bool:
    """Whether torch's printed table has a row for ``name`` with no CPU time and some Self CUDA: its GPU-lane span."""
    for line in table.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        # Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, Self CUDA, ...
        if len(cells) >= 7 and cells[0] == name and cells[2] in ("0.000us", "0us") and cells[6] not in ("0.000us", "0us"):
            return True
    return False


def show_table(slow) -> None:
    """The table torch printed when it recorded the loop, and what its label rows on the GPU's lane are."""
    print(slow.table)
    t = slow.trace
    spans: dict[str, list[int]] = {}
    for i in t.indices([GPU_ANNOTATION]):
        spans.setdefault(t.name_of(i), []).append(i)
    shown = [n for n in spans if _gpu_lane_row(slow.table, n)]
    if not shown:
        return
    # torch gives a label's span on the GPU's lane a row of its own: first to last GPU work under it, idle included
    busy = merged((t.ts[j], t.end_of(j)) for j in facts.gpu_work(t))
    name = max(shown, key=lambda n: sum(t.dur[i] for i in spans[n]))
    span = sum(t.dur[i] for i in spans[name])
    work = sum(covered(busy, t.ts[i], t.end_of(i)) for i in spans[name])
    show.md(f"Rows with no CPU time and a Self CUDA figure ({', '.join(html.escape(n) for n in shown)}) are "
              "labels' spans on the GPU's lane, not kernels: each runs from the first to the last GPU work under "
              "its label, idle time included, and its kernels have rows of their own too, so the Self CUDA column "
              f"adds up to more than 100%. <code>{html.escape(name)}</code>: {us(span)} of span, {us(work)} of GPU "
              "work inside it.")


# --- 16.first: which fix alone shortens the step most -------------------------------------------


def alone_ratios(alone: Comparison) -> dict[str, Spread]:
    """Per fix: the step as written over the step with that fix alone, round by round."""
    return {f: alone.ratio(AS_WRITTEN, f) for f in FIXES if f in alone.labels}


def first_fix(slow, alone: Comparison) -> None:
    """16.first: which single fix shortens the step most."""
    ratios = alone_ratios(alone)
    by_choice = {FIX_WORDS[f]: r for f, r in ratios.items()}

    def reveal(answer):
        g = measure.grade_order(answer, by_choice)
        _shared.spread_figure({k: _ms(alone.spread(k)) for k in alone.labels},
                              title="Wall time per step: the loop as written and each fix alone (no profiler)",
                              unit="ms per step")
        show.table([(AS_WRITTEN, _ms(alone.spread(AS_WRITTEN)).text(), "-")]
                   + [(FIX_WORDS[f], _ms(alone.spread(f)).text(), r.text()) for f, r in ratios.items()],
                   ["the loop", "step, timed without the profiler (median, IQR)", "as written over this, per round"])
        best = next(f for f in FIXES if FIX_WORDS[f] == g.actual)
        f = _first(slow)
        said = ""
        if f is not None:
            points = RULE_FIX.get(f.rule)
            said = (f" <code>diagnose</code>'s first finding on the profiled loop: <b>{html.escape(f.title)}</b>"
                    + (f" ({html.escape(f.amount)})" if f.amount else "")
                    + (", which points at the same fix." if points == best else
                       f", which points at another fix ({html.escape(FIX_WORDS[points])})." if points else "."))
        others = sorted(((r.median, FIX_WORDS[k], r) for k, r in ratios.items() if k != best), reverse=True,
                        key=lambda x: x[0])
        rest = (f" The next best alone: {html.escape(others[0][1])}, {others[0][0]:.2f}x." if others else "")
        if len(others) > 1 and others[0][2].quartiles[0] <= others[1][2].quartiles[1]:
            # second place inside the noise: say so rather than rank them
            rest = (f" Next, {html.escape(others[0][1])} ({others[0][0]:.2f}x) and {html.escape(others[1][1])} "
                    f"({others[1][0]:.2f}x): their IQRs overlap, so which of them comes second is inconclusive here.")
        return widgets.grade(
            g, f"Alone, <b>{html.escape(g.actual)}</b> shortened the step most: {ratios[best].text()} shorter, round "
            f"by round (as written {_ms(alone.spread(AS_WRITTEN)).text()})." + rest + said
            + f" ({html.escape(alone.source)}.)", live=alone.source.startswith("measured now"))

    widgets.ask("16.first", "Which single fix, applied alone, will shorten the step most?", choices=FIRST_CHOICES,
                default=FIRST_CHOICES[-1], reveal=reveal,
                # the winner's ratio as the reveal prints it, spread and all (a bare "1.1x" is in many tables)
                decides=lambda: [spoilers.exact(max(ratios.values(), key=lambda r: r.median).text())])


# --- 16.waits: the lines that make the CPU wait ----------------------------------------------------


@dataclass
class WaitSite:
    """Where, in the loop's code, the CPU waited for the GPU: a function, the call it made there, and its lines."""

    frame: python_lines.Frame
    call: str | None
    op: str | None  # the innermost ATen op around the wait (aten::copy_ for a copy)
    calls: list[str]  # the runtime calls at the wait, in order (cudaMemcpyAsync, cudaStreamSynchronize)
    lines: list[int]
    waits: list[float]  # µs, one per wait in the recorded steps
    idle_after: list[float]  # µs of GPU idle after each wait (where there was more GPU work)


def _calls_in(t, start: float, end: float, calls: list[int]) -> list[int]:
    return [i for i in calls if start - 1e-3 <= t.ts[i] <= end + 1e-3]


def wait_sites(run) -> tuple[list[WaitSite], int]:
    """Each place of the loop's code where the CPU waited, read from the trace's stacks; and the steps recorded."""
    t = run.trace
    src = _source()
    calls = sorted(t.indices((RUNTIME, DRIVER)), key=lambda i: t.ts[i])
    sites: dict[tuple, WaitSite] = {}
    # the next batch's loading is the DataLoader's time, not the wait's: left out of the idle after it
    loading = merged((x.start_us, x.start_us + x.dur_us) for x in step_facts.dataloader_spans(t))
    for s in step_facts.hidden_syncs(t):
        here = _calls_in(t, s.start_us, s.start_us + s.dur_us, calls)
        sync = [i for i in here if kk.is_synchronize(t.name_of(i))] or here
        o = python_lines.origin(t, sync[0], LOOP_FILE) if sync else None
        if o is None:
            continue
        key = (o.frame, o.call)
        if key not in sites:
            lines = python_lines.call_lines(src, o.frame.line, o.call) if o.call else []
            sites[key] = WaitSite(o.frame, o.call, s.op, list(s.calls), lines, [], [])
        sites[key].waits.append(s.dur_us)
        if s.gpu_idle_after_us is not None:
            end = s.start_us + s.dur_us
            after = [(end, end + s.gpu_idle_after_us)]
            sites[key].idle_after.append(span_total(difference(after, loading)))
    return list(sites.values()), len(facts.steps(t))


def wait_lines(run) -> list[int]:
    """The distinct lines of the loop that made the CPU wait."""
    sites, _ = wait_sites(run)
    return sorted({n for s in sites for n in s.lines})


def _count_choice(n: int) -> str:
    return WAIT_CHOICES[min(n, len(WAIT_CHOICES) - 1)]


def source_matches(run, sites: list[WaitSite] | None = None) -> bool:
    """Whether every frame of the loop in the trace still starts a function of this slow_loop.py (a recorded trace
    of an older source would point at other lines). ``sites``: :func:`wait_sites` of ``run``, when read already."""
    src = _source()
    sites = wait_sites(run)[0] if sites is None else sites
    return all(python_lines.starts_function(src, s.frame.line, s.frame.function) for s in sites)


def waits(slow) -> None:
    """16.waits: how many lines of the loop make the CPU wait for the GPU."""
    sites, steps = wait_sites(slow)
    lines = sorted({n for s in sites for n in s.lines})

    def reveal(answer):
        if not python_lines.has_stacks(slow.trace):
            return widgets.verdict(None, "This trace holds no Python stacks (it was profiled without "
                                   "<code>with_stack=True</code>): it cannot say which lines waited.")
        if not source_matches(slow, sites):
            return widgets.verdict(None, "This trace was recorded from an older slow_loop.py: its line numbers no "
                                   "longer point at this source. Record it again (<code>python -m helpers.runs.record "
                                   "--parts 6</code>).")
        start, body = step_source()
        text = {start + n: ln.strip() for n, ln in enumerate(body)}
        rows = []
        for s in sorted(sites, key=lambda s: -sum(s.waits)):
            rows.append((", ".join(str(n) for n in s.lines) or "-",
                         " | ".join(text.get(n, "") for n in s.lines) or "-",
                         f"{s.frame.function}() -> {s.call}", s.op or "-", " + ".join(s.calls),
                         f"{len(s.waits) / max(steps, 1):g}",
                         us(statistics.median(s.waits)),
                         us(statistics.median(s.idle_after)) if s.idle_after else "-"))
        show.display_figure(plots.timeline(slow.trace, plots.step_window(slow.trace, 1, 1),
                                           title=f"{slow.tag}: one step (the GPU lane is at the bottom)"))
        show.table(rows, ["line(s)", "code", "the trace's frames", "op around the wait", "runtime calls", "waits per step",
                          "each wait (median)",
                          "GPU idle from its end to the GPU's next work, the DataLoader's time left out (median; "
                          "not all of it the wait's: what the CPU ran next counts too)"])
        frame = sites[0].frame if sites else None
        longest = max(sites, key=lambda s: statistics.median(s.waits)) if sites else None
        how = ""
        if frame is not None:
            named = show.code(f"{frame.file}({frame.line}): {frame.function}")
            how = (f"The trace names the function by the line it starts on ({named}, the line "
                   f"<code>{html.escape(text.get(frame.line, ''))}</code>) and the built-in it called; the lines are "
                   "those of that function that make the call. ")
        long = (f"The longest wait: line {', '.join(map(str, longest.lines))}, "
                f"{us(statistics.median(longest.waits))} a step. " if longest and longest.lines else "")
        return widgets.verdict(answer == _count_choice(len(lines)),
                               f"<b>{len(lines)}</b> lines of the loop made the CPU wait for the GPU in every "
                               f"recorded step. " + how + long +
                               "Each wait is the runtime calls the table names, inside its op: a copy between the "
                               "CPU and the GPU made without <code>non_blocking=True</code> ends by synchronizing the "
                               "stream, and <code>torch.tensor(..., device=...)</code> from a Python list is made by "
                               "such a copy (its op is <code>aten::copy_</code>): the CPU waits until the copy, and "
                               "whatever was queued before it on the stream, is done. A wait in the table runs from the "
                               "copy call's start to the synchronize call's end, the copy's own time included.",
                               actual=_count_choice(len(lines)))

    widgets.ask("16.waits", "How many lines of this loop make the CPU wait for the GPU in every step?",
                choices=WAIT_CHOICES, default=WAIT_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.exact(f"{len(lines)} lines of the loop made the CPU wait")])


def slowest_kernel(slow) -> None:
    """The kernel with the most GPU time in one launch, traced back through the stack to the loop's code."""
    t = slow.trace
    work = [j for j in facts.gpu_work(t) if t.group_of(j) == "kernel"]
    if not work:
        show.md("This trace holds no kernel.")
        return
    j = max(work, key=lambda j: t.dur[j])
    launch = t.launch_of(j)
    o = python_lines.origin(t, launch, LOOP_FILE) if launch >= 0 else None
    head = f"The longest kernel launch: {show.code(t.name_of(j), 90)}, {us(t.dur[j])}."
    if o is None:
        show.md(head + " Its launch has no Python frame around it: it was launched from autograd's backward "
                "thread, which runs no Python, so with_stack cannot name a line for it.")
        return
    show.md(head + " Its launch, from the loop's function inwards:")
    show.pre("\n".join(("  " * n) + name for n, name in enumerate(o.chain)))


# --- 16.tf32-alone and 16.tf32-last ----------------------------------------------------------------------------


def _gpu_per_step(run) -> float:
    """The GPU's busy time per recorded step (median), in µs."""
    busy = facts.gpu_busy_per_step(run.trace)
    return statistics.median(b for _, b, _ in busy) if busy else 0.0


def tf32_alone(slow, tf32, alone: Comparison) -> None:
    """16.tf32-alone: TF32 alone on the loop as written."""
    ratio = alone.ratio(AS_WRITTEN, "tf32")

    def reveal(answer):
        g = measure.grade_choice(answer, ratio, STEP_EDGES, STEP_CHOICES)
        _shared.spread_figure({AS_WRITTEN: _ms(alone.spread(AS_WRITTEN)), "TF32 alone": _ms(alone.spread("tf32"))},
                              title="Wall time per step (no profiler)", unit="ms per step")
        gpu_a, gpu_b = _gpu_per_step(slow), _gpu_per_step(tf32)
        saved_gpu = gpu_a - gpu_b
        saved_step = alone.spread(AS_WRITTEN).median - alone.spread("tf32").median
        if saved_gpu <= 0.05 * gpu_a:
            return widgets.grade(g, f"TF32 alone: the step {ratio.text()} shorter, round by round. TF32 did not change "
                                 f"the GPU's busy time per step ({us(gpu_a)} against {us(gpu_b)}, the traces' median "
                                 "steps): this GPU has no TF32 tensor cores, or its GEMMs did not use them; the GEMM "
                                 f"kernels' names in the two traces say which. ({html.escape(alone.source)}.)",
                                 live=alone.source.startswith("measured now"))
        why = (f" TF32 cut the GPU's busy time per step from {us(gpu_a)} to {us(gpu_b)} (the traces' median steps), "
               f"{us(saved_gpu)} less; the unprofiled step changed by {us(saved_step)} (medians)")
        why += (": the spread is too wide to say how much of the GPU time saved came off the step."
                if not g.conclusive else
                ": most of the GPU time saved did not come off the step, so something else sets its pace."
                if saved_step < saved_gpu / 2 else
                ": about as much as the GPU saved came off the step. A hypothesis: waits in the loop (16.waits, "
                "below, counts them) keep the CPU from running ahead of the GPU, so the GPU's work sits on the "
                "step's path; the bench further down removes them one at a time.")
        return widgets.grade(g, f"TF32 alone: the step {ratio.text()} shorter, round by round." + why
                             + f" ({html.escape(alone.source)}.)", live=alone.source.startswith("measured now"))

    widgets.ask("16.tf32-alone", "TF32 alone, on the loop as written: how much shorter will the step be?",
                choices=STEP_CHOICES, default=STEP_CHOICES[0], reveal=reveal,
                decides=lambda: [spoilers.exact(ratio.text())])


# --- the bench: one fix at a time ------------------------------------------------------------------------------


def _pair(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[Comparison, str, str]:
    """The loop with ``before`` against the loop with ``after``, timed in turn now on this GPU (the loop groups'
    rounds and blocks)."""
    a, b = _label(before), _label(after)
    how = comparisons.GROUPS["loop-stack"]
    cmp = comparisons.adhoc("loop-pair", {a: Member(slow_loop.slow_loop(before)), b: Member(slow_loop.slow_loop(after))},
                            rounds=how.rounds, settle=how.settle, max_per_block=how.max_per_block, block_s=how.block_s)
    return cmp, a, b


def _gated(qids: tuple[str, ...], show_it) -> None:
    """Show what ``show_it`` displays once every question in ``qids`` is answered (:func:`widgets.after`)."""
    if not qids:
        show_it()
        return
    widgets.after(qids[0], lambda: _gated(qids[1:], show_it))


#: the questions a stage of the bench would answer: its bars give the fixes' effects away
BENCH_AFTER = ("16.first", "16.tf32-alone", "16.total")
LAST_AFTER = BENCH_AFTER + ("16.last",)


class Bench:
    """The loop's step time, stage by stage, as fixes are applied; draws the waterfall after each."""

    def __init__(self) -> None:
        self.live = environment().live
        self.calls = 0
        self.applied: list[str] = []
        self.stages: list[tuple[str, Spread]] = []
        self.ratios: list[Spread] = []
        self.stack = None if self.live else comparisons.recorded("loop-stack")
        self.source = "measured now" if self.live else self.stack.source
        if self.stack is not None:
            self.stages.append((AS_WRITTEN, self.stack.spread(AS_WRITTEN)))

    def apply(self, fix: str) -> None:
        """Apply ``fix`` on top of the fixes applied so far, time the step before and after, draw the waterfall.

        Shown once the questions above are answered: each stage gives a fix's effect away.
        """
        self.calls += 1
        _gated(LAST_AFTER if self.calls >= len(FIXES) else BENCH_AFTER, lambda: self._apply(fix))

    def _apply(self, fix: str) -> None:
        if fix not in FIXES:
            show.md(f"No fix named {html.escape(repr(fix))}: the fixes are {', '.join(FIXES)}.")
            return
        if fix in self.applied:
            show.md(f"{html.escape(fix)} is applied already; pick another of "
                    f"{', '.join(f for f in FIXES if f not in self.applied)}.")
            return
        if not self.live:
            nxt = FIXES[len(self.applied)]
            if fix != nxt:
                show.md(f"Recorded mode follows the order the reference set was recorded in: next is "
                        f"<b>{nxt}</b>, applied here instead of {html.escape(fix)} (on a GPU, the order is yours).")
                fix = nxt
        before = tuple(self.applied)
        self.applied.append(fix)
        after = tuple(self.applied)
        if self.live:
            cmp, a, b = _pair(before, after)
            if not self.stages:
                self.stages.append((AS_WRITTEN, cmp.spread(a)))
        else:
            cmp, a, b = self.stack, _label(before), _label(after)
        spread, ratio = cmp.spread(b), cmp.ratio(a, b)
        self.stages.append((f"+ {fix}", spread))
        self.ratios.append(ratio)
        g = measure.grade_choice(None, ratio, STEP_EDGES, STEP_CHOICES)
        show.display_figure(plots.waterfall([(k, _ms(v).samples) for k, v in self.stages],
                                            factors=[r.median for r in self.ratios],
                                            title="Wall time per step, fix by fix (no profiler; the factors: the "
                                                  "median of the round-by-round ratios, as the text gives them)"))
        show.md(f"<b>+ {html.escape(FIX_WORDS[fix])}</b>: the step {_ms(spread).text()}, {ratio.text()} shorter than "
                f"the stage before, round by round: "
                + (f"<b>{html.escape(g.actual)}</b>." if g.conclusive else
                   f"inconclusive here ({html.escape(g.why)}).") + f" ({html.escape(cmp.source)}.)")

    @property
    def total(self) -> Spread | None:
        """The first stage over the last, from their medians' samples paired round by round where they can be."""
        if len(self.stages) < 2:
            return None
        if not self.live:
            return self.stack.ratio(AS_WRITTEN, _label(self.applied))
        return measure.ratio_range(self.stages[0][1], self.stages[-1][1])


def _stack_ratio(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[Spread, str, bool]:
    """The loop with ``before`` over the loop with ``after``, round by round: timed in turn now (live) or read from
    loop-stack (recorded); with the measurement's source, and whether measuring again could change it."""
    if environment().live:
        cmp, a, b = _pair(before, after)
        return cmp.ratio(a, b), cmp.source, True
    stack = comparisons.recorded("loop-stack")
    return stack.ratio(_label(before), _label(after)), stack.source, False


def total() -> None:
    """16.total: all five fixes against the loop as written."""
    measured = functools.cache(lambda: _stack_ratio((), FIXES))  # the reveal and the leak check read it once

    def reveal(answer):
        r, source, live = measured()
        g = measure.grade_choice(answer, r, TOTAL_EDGES, TOTAL_CHOICES)
        return widgets.grade(g, f"All five fixes made the step <b>{r.text()}</b> shorter than the loop as written, "
                             f"round by round ({html.escape(source)}). The bench below shows where that came from.",
                             live=live)

    widgets.ask("16.total", "All five fixes together: how much shorter will the step be than the loop as written?",
                choices=TOTAL_CHOICES, default=TOTAL_CHOICES[1], reveal=reveal,
                decides=lambda: [spoilers.exact(measured()[0].text())])


def last_fix(four, alone: Comparison) -> None:
    """16.last: the last fix of FIXES (TF32), applied on top of the other four."""
    last = FIXES[-1]
    measured = functools.cache(lambda: _stack_ratio(FIXES[:-1], FIXES))

    def reveal(answer):
        r, source, live = measured()
        g = measure.grade_choice(answer, r, STEP_EDGES, STEP_CHOICES)
        before = alone.ratio(AS_WRITTEN, last)
        # the two effects, each a ratio of its own rounds, set against each other in every pairing
        d = measure.ratio_range(r, before)
        lo, hi = d.quartiles
        if lo > STEP_EDGES[0]:
            order = (f" Alone it was {before.text()}: applied last, the same fix did more ({d.text()} its effect "
                     "alone, every pairing of the two), because what else held the step had changed.")
        elif hi < 1 / STEP_EDGES[0]:
            order = (f" Alone it was {before.text()}: applied last, the same fix did less ({d.text()} its effect "
                     "alone, every pairing of the two).")
        else:
            order = f" Alone it was {before.text()}: the spreads do not tell the two apart here."
        f = _first(four)
        gpu = four.summary.balance
        trace = (f" The profiled trace of the four-fix loop: GPU busy {gpu.gpu_busy_share:.0%} of the window, and "
                 f"<code>diagnose</code>'s first finding <b>{html.escape(f.title)}</b>." if f is not None and
                 gpu.gpu_busy_share is not None else "")
        gap = ""
        if (f is not None and f.rule in (RuleId.FP32_GEMM, RuleId.GPU_BOUND) and g.conclusive
                and g.actual == STEP_CHOICES[0]):
            gap = (" The trace says the GPU sets the pace, yet the unprofiled step did not get shorter: the trace "
                   "covers three steps right after warm-up, when the DataLoader's workers still hold batches they "
                   "prepared ahead (notebook 14). A hypothesis: over many steps the workers set the pace. The test: "
                   "time the loader alone, over many steps, against the step.")
        if (f is not None and f.rule in (RuleId.CPU_BOUND, RuleId.TINY_KERNELS) and g.conclusive
                and g.actual != STEP_CHOICES[0]):
            gap = (" The trace reads CPU-bound, yet the unprofiled step got shorter: a hypothesis is that the "
                   "profiler, which lengthens the CPU's side of a profiled step, hides that without it the GPU's "
                   "work sets more of this loop's pace, so a GPU-side fix still counts.")
        return widgets.grade(g, f"{html.escape(FIX_WORDS[last])}, on top of the other four: the step {r.text()} "
                             f"shorter, round by round ({html.escape(source)})." + order + trace + gap, live=live)

    widgets.ask("16.last", f"Applied last, on top of the other four: how much shorter will {FIX_WORDS[last]} make the "
                "step?", choices=STEP_CHOICES, default=STEP_CHOICES[0], reveal=reveal,
                decides=lambda: [spoilers.exact(measured()[0].text())])


FEED = ("all five fixes", "its input alone")


def feed() -> Comparison:
    """The fixed loop against its input alone, timed in turn: live on this GPU, or the reference set's."""
    return comparisons.measure("loop-feed")


def what_is_left(bench: Bench, final, fed: Comparison, alone: Comparison | None = None) -> None:
    """Before and after, what the fixed loop's trace says, and the test of whether its input sets the pace
    (``alone``: the first group's timing of the loop as written, for the whole gain's range)."""
    _gated(LAST_AFTER, lambda: _left(bench, final, fed, alone))


def _left(bench: Bench, final, fed: Comparison, alone: Comparison | None = None) -> None:
    if len(bench.stages) < 2:
        show.md("Apply the fixes above first.")
        return
    (_, first), (_, last) = bench.stages[0], bench.stages[-1]
    t = bench.total
    show.table([(AS_WRITTEN, _ms(first).text()), (f"after {len(bench.applied)} fixes ({', '.join(bench.applied)})",
                                                   _ms(last).text())]
               + [(f"{k} (timed in turn with each other)", _ms(fed.spread(k)).text()) for k in FEED
                  if k in fed.labels],
               ["the loop", "step, timed without the profiler (median, IQR)"])
    found = diagnose.diagnose(final.trace)
    b = final.summary.balance
    profiled = facts.median_step_us(final.trace)
    inflated = (f" The profiled steps took a median {profiled / 1e3:.1f} ms against {_ms(last).median:.1f} ms "
                "unprofiled: the profiler, recording every op with its Python stack, adds CPU time of its own "
                "(notebook 01 measured that cost), so part of the CPU side this trace shows is the profiler's."
                if profiled > 1.2 * last.median else "")
    test, why, drift = "", "", ""
    if FEED[0] in fed.labels:
        # the same fixed loop in two groups of rounds: where they disagree beyond their IQRs, one group's spread
        # understates the uncertainty of the whole gain
        a, o = _ms(last), _ms(fed.spread(FEED[0]))
        if a.quartiles[0] > o.quartiles[1] or o.quartiles[0] > a.quartiles[1]:
            lo_ms, hi_ms = sorted((a.median, o.median))
            written = [_ms(first).median] + ([_ms(alone.spread(AS_WRITTEN)).median]
                                             if alone is not None and AS_WRITTEN in alone.labels else [])
            also = (f", and the loop as written {written[0]:.1f} ms and {written[1]:.1f} ms in two groups"
                    if len(written) > 1 else "")
            drift = (f"<p>The fixed loop was timed in two groups of rounds: {a.median:.1f} ms and {o.median:.1f} ms "
                     f"a step, further apart than either group's IQR{also}, so the time drifts between groups more "
                     f"than one group's spread shows: the whole gain is about {min(written) / hi_ms:.1f}x to "
                     f"{max(written) / lo_ms:.1f}x.</p>")
    if all(k in fed.labels for k in FEED):
        r = fed.ratio(FEED[1], FEED[0])  # the input's time per step over the whole step's, round by round
        lo, hi = r.quartiles
        if lo > 1.1:
            verdict = "inconclusive here: the input alone took longer per step than the whole step"
            why = ("A part of the step cannot take longer than the step when both are timed the same way: either "
                   "running the input alone changes how it runs, or the timings drift between groups of rounds "
                   "(hypotheses, not measured). So this timing cannot say whether the input sets the "
                   "fixed loop's pace; timing the loop with more workers would: if the step shortens, the input "
                   "was setting it.")
        elif lo >= 0.8:
            verdict = ("the input alone takes about as long as the whole step: the input sets the pace, and the next "
                       "fix is on its side (more workers, cheaper batches)")
        elif hi <= 0.5:
            verdict = "the input alone is well under the whole step: the input does not set the pace"
        else:
            verdict = "inconclusive here: the spread spans both readings"
        test = (f"<p>The test: the input alone (each step only fetches and copies its batch) takes {r.text()} of "
                f"the whole step's time, round by round: {verdict}.</p>")
        why += f" ({html.escape(fed.source)}.)"
        if found and found[0].rule in (RuleId.CPU_BOUND, RuleId.TINY_KERNELS):
            # the trace's first finding reads the profiled step; the timing says (or cannot) what sets it without
            if 0.8 <= lo <= 1.1:
                test += ("<p>So diagnose's first line above reads the profiled trace, whose CPU side the profiler "
                         "lengthens: without the profiler, the input sets the pace, and a fix on the CPU's launches "
                         "alone would gain little until the input is faster.</p>")
            elif lo > 1.1:
                why += (" diagnose's first line reads the profiled trace, whose CPU side the profiler lengthens; "
                        "which side sets the pace without the profiler, this timing leaves open.")
    show.md(f"<p>From {_ms(first).median:.1f} ms to {_ms(last).median:.1f} ms a step"
            + (f" ({t.text()} shorter)" if t is not None else "") + ". What the trace of the fixed loop says now: "
            + html.escape(diagnose.first_line(found, with_gain=not inflated))
            + (f" Verdict: <b>{html.escape(b.verdict)}</b>, GPU busy {b.gpu_busy_share:.0%} of the window."
               if b.verdict and b.gpu_busy_share is not None else "") + "</p>"
            + (f"<p>{inflated.strip()} So the gain diagnose gives for it is left out here: read from the profiled "
               "trace, it sizes a CPU side the profiler lengthened, and may overstate what a CPU-side fix wins "
               "without the profiler.</p>" if inflated else "") + drift + test
            + (f"<details><summary>How this was measured</summary><p>{why.strip()}</p></details>"
               if why.strip() else ""))
