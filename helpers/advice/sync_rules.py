"""The rule about the CPU's waits for the GPU inside the step (notebook 12): hidden synchronizations.

A wait (a blocking copy, ``.item()``, a synchronize) that the user's code did not ask for by name: grouped by its
cause, each cause sized alone (:class:`helpers.advice.findings.Part`) and the whole claimed on the ledger, with the
idle time in and after the waits and, where the waits sit in small labelled blocks of their own, in those blocks.
A wait inside a distributed library's own exchange is the library's, not a line of the user's.
"""

from __future__ import annotations

import bisect
import re
import statistics

from ..facts import step_facts as sf
from ..facts.collectives import pipeline_labels
from ..facts.text import nbytes, us
from ..reader.spans import Spans, difference, intersection, merged, total
from ..reader.trace import ANNOTATION, MEMCPY
from .findings import Context, Finding, Part, Severity
from .ledger import Side, Speedup
from .rulebook import RuleId

SYNC_DEBUG = "https://docs.pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html"


# --- waits for the GPU (12) ---------------------------------------------------------------------------------


def syncs(c: Context) -> list[sf.Sync]:
    return c.once("syncs", lambda: sf.hidden_syncs(c.trace))


#: the labels a distributed library puts around its own collective exchanges (TorchRec's '## ... ##' blocks: its
#: all-to-all awaitables, its input distribution, its sparse-data-dist 'sdd_' steps): a wait inside one is the
#: library's, not a line of the user's
_LIBRARY_EXCHANGE = re.compile(r"(?i)all_?to_?all|all2all|awaitable|input_dist|data_dist|output_dist|\bsdd_")
TORCHREC_PIPELINE = ("https://github.com/meta-pytorch/torchrec/blob/main/torchrec/distributed/train_pipeline/"
                     "train_pipelines.py")


def library_exchange(annotation: str | None) -> bool:
    """Whether this label is a distributed library's collective exchange (see :data:`_LIBRARY_EXCHANGE`)."""
    return bool(annotation) and _LIBRARY_EXCHANGE.search(annotation) is not None


def library_own(s: sf.Sync) -> bool:
    """Whether a wait is a library's own: inside its collective exchange (its label), or with no ATen op around it
    under DistributedDataParallel's label (DDP's own C++ code waits there: HTA's NCCL trace's cudaEventSynchronize)."""
    return library_exchange(s.annotation) or (s.op is None and (s.annotation or "").startswith("DistributedDataParallel"))


def _group_text(group: list[sf.Sync], idle_us: float) -> str:
    s = group[0]
    what = s.cause_op or s.op or s.calls[-1]
    where = f" under '{s.annotation}'" if s.annotation else ""
    copy = ""
    if s.copy:
        sizes = sorted({x.copy_bytes for x in group if x.copy_bytes is not None})
        size = "" if not sizes else f" of {nbytes(sizes[0])}" + (f" to {nbytes(sizes[-1])}" if len(sizes) > 1 else "")
        copy = f", {s.copy}{size}"
    waited = sum(x.dur_us for x in group)
    longest = max(x.dur_us for x in group)
    usual = f" (usually {s.cause})" if s.cause else ""
    if library_exchange(s.annotation):
        usual = " (inside a distributed library's own exchange, as its label says: the library waits here, not a line of yours)"
    elif library_own(s):
        usual = (" (no ATen op around them, under DistributedDataParallel's label: its own code waits here, not a "
                 "line of yours)")
    return (f"{len(group)} x {what}{where}: {' + '.join(s.calls)}{copy}, {us(waited)} in all (the longest "
            f"{us(longest)}); the GPU idle {us(idle_us)} in and after them, waiting for the CPU{usual}")


def _wait_spans(c: Context, s: sf.Sync) -> Spans:
    """Where a wait costs the GPU. A long wait while the GPU ran means the CPU was ahead: the wait threw that lead
    away, and the GPU then idles until the CPU launches again (without the wait, the CPU's lead would have covered
    that stretch): the call and the idle stretch after it, to the next GPU work. A short wait on an idle GPU (the CPU
    was not ahead) costs the call itself and, after it, as long again."""
    end = s.start_us + s.dur_us
    b = c.budget
    ran = total(intersection([(s.start_us, end)], b.busy))
    if s.dur_us >= b.late_us and ran >= 0.5 * s.dur_us:
        k = bisect.bisect_left(b.busy, (end, end))
        nxt = next((x for x, _ in b.busy[k:] if x >= end), None)
        # (busy spans that straddle the end keep the GPU busy: the stretch starts where they stop)
        return [(s.start_us, nxt if nxt is not None else b.hi)]  # (no work after it: to the window's end)
    return [(s.start_us, s.start_us + 2 * s.dur_us)]


def hidden_sync(c: Context) -> Finding | None:
    found = [s for s in syncs(c) if not s.explicit]
    if not found:
        return None
    groups: dict[tuple, list[sf.Sync]] = {}
    for s in found:
        groups.setdefault((s.cause_op or s.op or s.calls[-1], s.annotation, s.copy), []).append(s)
    # (not the queue filling before the first GPU work: a steady loop's CPU is ahead there, so no step pays it)
    free = c.ledger.left(Side.CPU, filling=False)
    spans_of = {k: merged(sp for x in g for sp in _wait_spans(c, x)) for k, g in groups.items()}
    idle_of = {k: total(intersection(free, spans_of[k])) for k in groups}
    ordered = sorted(groups, key=lambda k: -idle_of[k])
    steps_with = {s.step for s in found if s.step}
    if c.summary.steps:
        head = (f"{len(found)} wait{'s' if len(found) != 1 else ''} for the GPU inside the recorded steps "
                f"(in {len(steps_with)} of {len(c.summary.steps)} steps)")
    else:  # no ProfilerStep#N: the waits are counted over the whole trace, the profiler's closing one left out
        head = f"{len(found)} wait{'s' if len(found) != 1 else ''} for the GPU in the trace (it has no profiler steps to place them in)"
    ev = [head + f", {us(sum(s.dur_us for s in found))} in the calls that wait"]
    ev += [_group_text(groups[k], idle_of[k]) for k in ordered[:5]]
    if len(ordered) > 5:  # the rest said, not dropped: a cause with little GPU idle can hold long waits
        rest = ordered[5:]
        n = sum(len(groups[k]) for k in rest)
        waited_rest = sum(x.dur_us for k in rest for x in groups[k])
        big = max(rest, key=lambda k: sum(x.dur_us for x in groups[k]))
        ev.append(f"{len(rest)} more cause{'s' if len(rest) != 1 else ''}, {n} wait{'s' if n != 1 else ''}, {us(waited_rest)} in the calls "
                  f"that wait (the most: {_group_text(groups[big], idle_of[big])})")
    # the tips in the order of the groups' cost: the costliest waits' fix first
    tips: list[str] = []
    piped = pipeline_labels(c.trace)

    def tip(g: list[sf.Sync]) -> str | None:
        s = g[0]
        if library_exchange(s.annotation):
            if piped:
                return (f"the waits in a library's exchange (its '## ... ##' labels) are the library's, and this "
                        f"trace's labels ({', '.join(repr(n) for n in piped)}) show its pipelined training loop "
                        f"running already ({TORCHREC_PIPELINE}): what is left is to wait less often (fewer, larger "
                        "exchanges) or to find why the pipeline still waits here")
            return ("the waits in a library's exchange (its '## ... ##' labels) are the library's: its pipelined "
                    "training loop, if it has one, may hide them behind compute (TorchRec's TrainPipelineSparseDist, "
                    "for one, overlaps the next batch's input distribution with this batch's forward and backward: "
                    f"{TORCHREC_PIPELINE})")
        if s.cause_op in ("aten::_local_scalar_dense", "aten::is_nonzero"):
            return ("keep values such as the loss on the GPU and read them (.item()) every N steps, not every step; "
                    "decide with tensor ops (torch.where) instead of `if tensor:`")
        if s.cause_op in ("aten::nonzero", "aten::masked_select"):
            return ("replace boolean-mask indexing, whose output size only the GPU knows, by fixed-size ops "
                    "(torch.where, multiplying by the mask)")
        if s.copy and sf._host_memory(s.copy) is not None:
            return ("copy to the GPU from pinned memory with .to(device, non_blocking=True); make constants such as "
                    "torch.tensor(list, device=...) once, before the loop")
        if library_own(s):
            return ("the waits with no ATen op around them under DistributedDataParallel's label are DDP's own, not "
                    "a line of yours")
        if s.copy and sf._is_to_host(s.copy) and len(g) <= max(len(c.summary.steps), 1):
            # one copy back a step (a generated image, a step's result): it cannot be made rarer, only not waited for
            return ("one copy to the CPU a step (most likely the step's result, which has to come back): copied into pinned memory with "
                    "non_blocking=True and read after a later synchronize, it lets the CPU launch the next step's "
                    "work first")
        if s.copy and sf._is_to_host(s.copy):
            return ("copy results to the CPU less often, or into pinned memory with non_blocking=True and read them "
                    "after a later synchronize")
        return None
    for k in ordered:
        t_ = tip(groups[k])
        if t_ is not None and t_ not in tips:
            tips.append(t_)
    if not all(library_own(x) for x in found):  # (a library's own waits are no line of the user's to name)
        tips.append(f"torch.cuda.set_sync_debug_mode('warn') names each line that synchronizes ({SYNC_DEBUG}; "
                    f"when a copy call waits: {sf.SYNC_BEHAVIOUR})")
    where = " inside the step" if c.summary.steps else ""  # no steps: no step to say it is in
    f = Finding(RuleId.HIDDEN_SYNC, f"Hidden synchronizations: the CPU waits for the GPU{where}", Severity.ISSUE, ev,
                "; ".join(tips))
    spans = merged(sp for v in spans_of.values() for sp in v)
    blocks = _sync_blocks(c, found)
    basis = "without the waits the CPU launches the next work sooner, by up to each wait's length"
    what = "the GPU idle in and after the waits, waiting for the CPU"
    if blocks:  # the waits sit in labelled blocks of their own: a fix that moves the waits shortens those too
        held = merged(sp for b in blocks.values() for sp in b)
        beyond = total(intersection(free, difference(held, spans)))
        inside = [x for x in found if x.annotation in blocks]
        which = ("the waits sit" if len(inside) == len(found) else
                 f"{len(inside)} of the {len(found)} waits ({us(sum(x.dur_us for x in inside))} of the "
                 f"{us(sum(x.dur_us for x in found))} in the calls that wait) sit")
        ev.append(f"{which} in the record_function block{'s' if len(blocks) > 1 else ''} "
                  f"{', '.join(repr(n) for n in sorted(blocks))}, "
                  f"{us(total(held))} of CPU time in all, a small part of each step; the GPU idle {us(beyond)} in "
                  "them beyond the waits' own stretches, counted here too: a fix that removes the waits (or reads "
                  "the values every N steps) is assumed to shorten these blocks as well (it did in notebook 12's "
                  "timed training step; whether it does here, only a timing of the fix can say)")
        spans = merged(list(spans) + list(held))
        what = "the GPU idle in and after the waits and in the blocks around them, waiting for the CPU"
        basis = ("without the waits and the labelled blocks they sit in; the low end: half of that")
    # while the CPU waited, the GPU ran the work it waited for; a copy among that work is the value the CPU asked
    # for, which stays when the wait goes (a blocking copy from pageable memory: the wait is mostly the copy itself)
    t = c.trace
    waits = merged((s.start_us, s.start_us + s.dur_us) for s in found)
    copies = merged((t.ts[j], t.end_of(j)) for j in t.indices((MEMCPY,)) if t.is_gpu(j))
    # each cause alone (a fix may remove some of the waits only: no .item() leaves the copies' waits), sized
    # before this finding claims the time, on what the findings before it left
    parts = []
    for k in ordered:
        g = groups[k]
        own = merged(list(spans_of[k]) + list(blocks.get(k[1] or "", [])))
        got = total(intersection(free, own))
        w = merged((x.start_us, x.start_us + x.dur_us) for x in g)
        w = difference(w, copies) if copies else w
        waited = c.waited_us(w)
        parts.append(Part(k[0], k[1], c.ledger.gain(basis, cpu_us=got, cpu=Speedup.gone(low=2.0),
                                                    wait_us=waited if c.budget.cpu_paced else 0.0)))
    f.parts = parts
    # most of the waited time in copies to the GPU (pageable uploads behind a busy stream): nothing is read back
    up = sum(x.dur_us for x in found if x.copy and "-> Device" in x.copy and "Device ->" not in x.copy)
    return c.claimed(f, what,
                     basis,
                     cpu=difference(spans, c.budget.filling), cpu_speedup=Speedup.gone(low=2.0),
                     wait=difference(waits, copies) if copies else waits,
                     uploads=up > 0.5 * sum(x.dur_us for x in found))


#: a record_function block around the waits counts as the lines that read values when its median span is at most
#: this share of the median step (a block the size of the step is the step, not a few lines in it)
SYNC_BLOCK_SHARE = 0.25


def _sync_blocks(c: Context, found: list[sf.Sync]) -> dict[str, list[tuple[float, float]]]:
    """The record_function blocks that hold the waits, by label, where each is a small part of its step."""
    t, st = c.trace, c.summary.steps
    if not st:
        return {}
    step_us = statistics.median(x.dur_us for x in st)
    out: dict[str, list[tuple[float, float]]] = {}
    # (not a library's exchange: nothing says a fix of the user's shortens the library's own blocks)
    for name in {s.annotation for s in found if s.annotation and not s.annotation.startswith("ProfilerStep#")
                 and not library_exchange(s.annotation)}:
        ev = [i for i in t.indices((ANNOTATION,), name=name) if not t.is_gpu(i)]
        held = [i for i in ev if any(t.ts[i] <= s.start_us <= t.end_of(i) for s in found if s.annotation == name)]
        if held and statistics.median(t.dur[i] for i in held) <= SYNC_BLOCK_SHARE * step_us:
            out[name] = [(t.ts[i], t.end_of(i)) for i in held]
    return out
