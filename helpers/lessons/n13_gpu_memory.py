"""Notebook 13's questions: a training step's peak memory, allocated against reserved, what activation checkpointing
buys and what it recomputes, and where in the step the peak sits."""

from __future__ import annotations

import html

from .. import facts
from ..facts import gemm_table, memory
from ..lesson import plots, show, spoilers, widgets
from ..facts.text import nbytes, short, us
from ..reader.trace import CPU_OP

MIB = 2 ** 20
MEMORY_DOCS = "https://docs.pytorch.org/docs/stable/notes/cuda.html#memory-management"
CHECKPOINT_DOCS = "https://docs.pytorch.org/docs/stable/checkpoint.html"


def states_bytes(sizes: dict) -> int:
    """Weights, gradients and AdamW's two moments: fixed by the model."""
    return sizes["parameters"] + sizes["gradients"] + sizes["optimizer state"]


def _mib(b: int) -> float:
    """Bytes in MiB, as :func:`helpers.facts.text.nbytes` prints them (one decimal)."""
    return round(b / MIB, 1)


def _timeline(run, title: str, reserved: bool = True) -> None:
    fig = plots.memory_timeline(memory.memory_timeline(run.trace), facts.steps(run.trace), title=title)
    if not reserved:  # the allocated line alone: reserved is the next question's answer
        ax = fig.axes[0]
        for line in list(ax.lines):
            if line.get_label() == "reserved":
                line.remove()
        ax.relim()
        ax.autoscale_view()
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="lower right")
    show.display_figure(fig)


# --- 13.peak ------------------------------------------------------------------------------------------------------


def peak(run, sizes) -> None:
    """13.peak: the peak allocated memory of one training step, from its memory events."""
    gpu = memory.memory_peaks(run.trace)[0] if memory.memory_peaks(run.trace) else None

    def reveal(answer_mib):
        if gpu is None:
            return widgets.verdict(None, "This trace holds no memory events: profile_memory was off.")
        _timeline(run, f"{run.tag}: allocated memory, recorded steps marked", reserved=False)
        states = states_bytes(sizes)
        show.table([("parameters + gradients + AdamW state (sizes)", nbytes(states)),
                    ("the rest of the peak (peak minus the above)",
                     nbytes(gpu.peak_allocated - states)),
                    ("peak allocated (trace)", nbytes(gpu.peak_allocated))], ["", "bytes"])
        torch_peak = run.peak_allocated
        match = ""
        if torch_peak:
            apart = ("the same" if torch_peak == gpu.peak_allocated
                     else f"{(gpu.peak_allocated - torch_peak) / MIB:+.1f} MiB apart")
            match = (f" torch's own <code>torch.cuda.max_memory_allocated()</code> over the same recorded steps: "
                     f"{nbytes(torch_peak)}, {apart}.")
        return widgets.verdict(
            widgets.within(answer_mib, gpu.peak_allocated / MIB, factor=1.25),
            f"The trace's peak allocated is <b>{nbytes(gpu.peak_allocated)}</b>, read from its memory events alone."
            f"{match} Within 25% counts. The states (sizes above) are fixed by the model; the rest of the peak is "
            "everything else the step holds at that moment.", actual=gpu.peak_allocated / MIB)

    widgets.ask("13.peak", "What peak allocated memory will one training step reach?", unit="MiB", default=1000,
                reveal=reveal, decides=lambda: [spoilers.value(_mib(gpu.peak_allocated), "MiB")] if gpu else [])


# --- 13.reserved --------------------------------------------------------------------------------------------------

RES_CHOICES = ["it falls back when activations are freed", "it stays up, at or near its peak"]


def reserved_in_last_step(run) -> tuple[str, int, int, int] | None:
    """The last recorded step: its name, the lowest allocated, and the lowest and highest reserved inside it."""
    st = facts.steps(run.trace)
    if not st:
        return None
    last = st[-1]
    inside = [s for s in memory.memory_timeline(run.trace) if last.contains(s.ts_us)]
    if not inside:
        return None
    return (last.name, min(s.allocated for s in inside), min(s.reserved for s in inside),
            max(s.reserved for s in inside))


def reserved(run) -> None:
    """13.reserved: what reserved memory does within a step while activations are freed."""
    found = reserved_in_last_step(run)

    def reveal(answer):
        if found is None:
            return widgets.verdict(None, "This trace holds no memory events inside its steps.")
        name, lo_alloc, lo_res, hi_res = found
        _timeline(run, f"{run.tag}: allocated and reserved, recorded steps marked")
        gpu = memory.memory_peaks(run.trace)[0]
        show.table([("peak allocated (trace)", nbytes(gpu.peak_allocated)),
                    ("peak reserved (trace)", nbytes(gpu.peak_reserved)),
                    (f"lowest allocated in {name}", nbytes(lo_alloc)),
                    (f"reserved in {name}, lowest to highest", f"{nbytes(lo_res)} to {nbytes(hi_res)}")], ["", "bytes"])
        stays = hi_res > 0 and lo_res >= 0.9 * hi_res
        actual = RES_CHOICES[1] if stays else RES_CHOICES[0]
        why = ("PyTorch's caching allocator keeps the blocks that tensors give back for later, instead of returning "
               f"them to CUDA (<a href='{MEMORY_DOCS}'>CUDA memory management</a>), for the next allocations. "
               "That is why <code>nvidia-smi</code> shows a process holding more than its tensors use, and why "
               "<code>torch.cuda.memory_reserved()</code> is the figure to compare with the GPU's capacity."
               if stays else
               "Reserved memory fell inside the step: the allocator returned blocks to CUDA here (it does so when "
               "asked with <code>torch.cuda.empty_cache()</code>, "
               f"<a href='{MEMORY_DOCS}'>CUDA memory management</a>).")
        where = (f"stays at <b>{nbytes(hi_res)}</b>" if lo_res == hi_res else
                 f"stays between <b>{nbytes(lo_res)}</b> and <b>{nbytes(hi_res)}</b>" if stays else
                 f"moves between <b>{nbytes(lo_res)}</b> and <b>{nbytes(hi_res)}</b>")
        return widgets.verdict(
            answer == actual,
            f"In {html.escape(name)}, allocated goes as low as {nbytes(lo_alloc)}, while reserved {where}. {why}",
            actual=actual)

    widgets.ask("13.reserved", "Within a step, what does reserved memory do when activations are freed?",
                choices=RES_CHOICES, default=RES_CHOICES[0], reveal=reveal,
                decides=lambda: ([spoilers.value(_mib(found[2]), "MiB"), spoilers.value(_mib(found[3]), "MiB"),
                                  spoilers.value(_mib(found[1]), "MiB")] if found else []))


# --- 13.checkpoint ------------------------------------------------------------------------------------------------

CKPT_CHOICES = ["under 10% lower", "10% to 40% lower", "more than 40% lower"]
CKPT_EDGES = [0.1, 0.4]


def checkpoint(run, ckpt, sizes) -> None:
    """13.checkpoint: how much lower the peak is with every block checkpointed."""
    a, b = (memory.memory_peaks(r.trace)[0] for r in (run, ckpt))
    drop = 1 - b.peak_allocated / a.peak_allocated

    def reveal(answer):
        states = states_bytes(sizes)
        show.table([(r.tag, nbytes(states), nbytes(p.peak_allocated - states), nbytes(p.peak_allocated))
                    for r, p in ((run, a), (ckpt, b))],
                   ["run", "states (sizes: the same model)", "the rest (peak minus states)", "peak allocated (trace)"])
        _timeline(ckpt, f"{ckpt.tag}: allocated and reserved")
        rest = 1 - (b.peak_allocated - states) / (a.peak_allocated - states)
        actual = widgets.bucket(drop, CKPT_EDGES, CKPT_CHOICES)
        return widgets.verdict(
            answer == actual,
            f"Checkpointing lowered the peak by <b>{drop:.0%}</b> ({nbytes(a.peak_allocated)} to "
            f"{nbytes(b.peak_allocated)}). The states are the same model's in both runs ({nbytes(states)}); the rest "
            f"of the peak (peak minus states) fell by {rest:.0%}. Checkpointing changes which activations forward "
            "keeps for backward; the weights, gradients and AdamW's moments are the model's, in both runs.",
            actual=actual)

    widgets.ask("13.checkpoint", "With every block checkpointed, how much lower will the peak allocated memory be?",
                choices=CKPT_CHOICES, default=CKPT_CHOICES[2], reveal=reveal,
                # the peaks as printed; the drop's share ("21%") is a figure of notebook 02's tables too
                decides=lambda: [spoilers.value(_mib(b.peak_allocated), "MiB")])


# --- 13.recompute -------------------------------------------------------------------------------------------------


def recomputed_ops(trace) -> list[dict]:
    """The forward ops run inside backward nodes in the first recorded step (what checkpointing reruns), in order,
    each with the GEMM-kind kernels and the GPU time it launched."""
    from ..facts import kernel_kinds as kk

    st = facts.steps(trace)
    if not st:
        return []
    first = st[0]
    out = []
    for i in sorted(trace.indices((CPU_OP,)), key=trace.ts.__getitem__):
        if trace.is_gpu(i) or not first.contains(trace.ts[i]):
            continue
        name = trace.name_of(i)
        if not name.startswith("aten::") or trace.sequence_of(i) is None:
            continue
        nodes = [trace.name_of(p) for p in trace.ancestors(i) if trace.name_of(p).startswith(gemm_table.BACKWARD_NODE)]
        if not nodes:
            continue
        if any(trace.group_of(p) == CPU_OP and trace.sequence_of(p) is not None
               and trace.name_of(p).startswith("aten::") for p in trace.ancestors(i)):
            continue  # inside another recomputed op (aten::addmm inside aten::linear): its parent's row counts it
        work = [j for d in [i] + trace.descendants(i) for j in trace.gpu_work_of(d)]
        out.append({"op": name, "node": nodes[0][len(gemm_table.BACKWARD_NODE):],
                    "gemms": [trace.name_of(j) for j in work if facts.kind_of(trace, j) == kk.GEMM],
                    "kernels": len(work), "gpu_us": sum(trace.dur[j] for j in work)})
    return out


def gpu_per_step(r) -> float:
    return r.summary.balance.device_us / max(len(facts.steps(r.trace)), 1)


def recompute(run, ckpt) -> None:
    """13.recompute: how many more GEMM kernels a step launches with every block checkpointed (the trace counts)."""
    plain = gemm_table.kernels_per_step(run.trace)
    again = gemm_table.kernels_per_step(ckpt.trace)
    extra = (again[-1][1] - plain[-1][1]) if plain and again else 0
    ga, gb = gpu_per_step(run), gpu_per_step(ckpt)

    def reveal(answer):
        show.table([(r.tag, ", ".join(f"{n}" for _, n in counts)) for r, counts in ((run, plain), (ckpt, again))],
                   ["run", "GEMM kernels in each recorded step"])
        rows = recomputed_ops(ckpt.trace)
        forward_kernels: dict[tuple, list[str]] = {}
        for r in gemm_table.typical_step(ckpt.trace):
            if r.phase == gemm_table.FORWARD:
                forward_kernels.setdefault(tuple(r.kernels), []).append(f"#{r.position + 1}")
        show.table([(x["op"], x["node"], len(x["gemms"]) or "none",
                     ", ".join(short(k, 40) for k in x["gemms"]) or "-",
                     " and ".join(forward_kernels.get(tuple(x["gemms"]), [])) or "-",
                     us(x["gpu_us"])) for x in rows],
                   ["forward op run again in backward (first recorded step)", "inside the backward node",
                    "GEMM kernels it launched", "which", "same kernel as forward's GEMM", "GPU time it launched"])
        linear = [x for x in rows if x["op"] in ("aten::linear", "aten::addmm")]
        launched = [x for x in linear if x["gemms"]]
        idle = [x for x in linear if not x["gemms"]]
        again_us = sum(x["gpu_us"] for x in rows)
        text = (f"The checkpointed run launches <b>{extra} more GEMM kernel{'s' if extra != 1 else ''} per step</b> "
                f"({plain[-1][1]} to {again[-1][1]}). ")
        if idle:
            text += (f"In backward the trace shows {len(linear)} Linear ops of the checkpointed blocks run again, but "
                     f"only {len(launched)} of them launched a GEMM: the other {len(idle)} started and launched "
                     "nothing (the table). Non-reentrant checkpointing, the one this model uses "
                     "(<code>use_reentrant=False</code>), stops recomputing as soon as every activation backward needs "
                     f"has been recomputed (<a href='{CHECKPOINT_DOCS}'>torch.utils.checkpoint</a>): here that point "
                     "came before each block's second multiply. ")
        else:
            text += (f"In backward the trace shows {len(linear)} Linear ops of the checkpointed blocks run again, each "
                     "with its GEMM: the whole of each block's forward was recomputed. ")
        text += (f"The recomputation cost GPU time: {us(gb)} per step against {us(ga)} ({gb / ga - 1:+.0%}, "
                 f"{us(gb - ga)} more); the ops run again launched {us(again_us)} of GPU work in the first recorded "
                 "step.")
        return widgets.verdict(answer == extra, text, actual=extra)

    widgets.ask("13.recompute", "With every block checkpointed, how many more GEMM kernels per step will the trace "
                "show?", unit="GEMMs", default=4, reveal=reveal,
                decides=lambda: [spoilers.value(extra, "more GEMM kernels per step"), spoilers.us(gb),
                                 spoilers.percent(round((gb / ga - 1) * 100)) if ga else None])


# --- 13.perfetto --------------------------------------------------------------------------------------------------

PHASE_CHOICES = ["forward", "loss", "backward", "optimizer", "zero_grad"]


def _op_at(trace, ts: float) -> str | None:
    """The innermost ATen op, on any CPU thread, whose span holds ``ts``."""
    best, shortest = None, float("inf")
    for i in trace.indices((CPU_OP,)):
        if not trace.is_gpu(i) and trace.ts[i] <= ts <= trace.ts[i] + trace.dur[i] and trace.dur[i] < shortest:
            best, shortest = trace.name_of(i), trace.dur[i]
    return best


def peak_place(run) -> dict | None:
    """Where the peak sits: its step and label, allocated at the end of forward in that step, the events before it."""
    peaks = memory.memory_peaks(run.trace)
    if not peaks:
        return None
    p = peaks[0]
    samples = memory.memory_timeline(run.trace)
    st = next((s for s in facts.steps(run.trace) if s.name == p.peak_allocated_step), None)
    fwd = [i for i in run.trace.indices(name="forward") if not run.trace.is_gpu(i) and st is not None
           and st.contains(run.trace.ts[i])]
    end_fwd = max((run.trace.end_of(i) for i in fwd), default=None)
    at_end = max((s for s in samples if end_fwd is not None and s.ts_us <= end_fwd), key=lambda s: s.ts_us,
                 default=None)
    k = next(n for n, s in enumerate(samples) if s.ts_us == p.peak_allocated_us and s.allocated == p.peak_allocated)
    before = [s for s in samples[max(0, k - 7):k + 1] if end_fwd is None or s.ts_us > end_fwd]
    start = next((b for name, b, _ in memory.allocated_by_step(run.trace) if name == p.peak_allocated_step), None)
    return {"peak": p, "label": p.peak_allocated_in, "step": p.peak_allocated_step, "at_start": start,
            "at_end_of_forward": at_end.allocated if at_end else None,
            "before": [(s.ts_us - (st.start_us if st else 0), s.bytes, s.allocated, _op_at(run.trace, s.ts_us))
                       for s in before]}


def perfetto_peak(run) -> None:
    """13.perfetto: in which phase of the step the largest 'Total Allocated' sits, found in Perfetto."""
    place = peak_place(run)

    def reveal(answer):
        if place is None:
            return widgets.verdict(None, "This trace holds no memory events.")
        p = place["peak"]
        show.table([(f"{t:.1f}", nbytes(b) if b >= 0 else "-" + nbytes(-b), nbytes(a), op or "-")
                    for t, b, a, op in place["before"]],
                   ["us from the step's start", "bytes (+ allocated, - freed)", "Total Allocated after it",
                    "innermost op at that moment (any thread)"])
        end = place["at_end_of_forward"]
        run_up = []  # the allocations that end at the peak, latest first
        for _t, b, _a, op in reversed(place["before"]):
            if b <= 0:
                break
            run_up.append(op or "?")
        rise = ""
        if end is not None and p.peak_allocated > end:
            start = place["at_start"]
            began = f" (it was {nbytes(start)} when the step began)" if start is not None else ""
            rise = (f" At the end of forward in {html.escape(str(place['step']))}, allocated was {nbytes(end)}"
                    f"{began}. The peak is {nbytes(p.peak_allocated - end)} higher")
            rise += (f": the {len(run_up)} allocations just before it, with no free between them, came from "
                     + ", ".join(show.code(x) for x in dict.fromkeys(reversed(run_up))) + " (the table)."
                     if len(run_up) > 1 else ".")
        actual = place["label"] if place["label"] in PHASE_CHOICES else None
        return widgets.verdict(
            answer == actual if actual else None,
            f"The largest <i>Total Allocated</i>, {nbytes(p.peak_allocated)}, sits inside the "
            f"<b>{html.escape(str(place['label']))}</b> label of {html.escape(str(place['step']))}.{rise}",
            actual=actual)

    widgets.ask("13.perfetto", "In Perfetto, find the [memory] event with the largest 'Total Allocated'. Inside which "
                "label of the step does it sit?", choices=PHASE_CHOICES, default=PHASE_CHOICES[0], reveal=reveal,
                kind="task",
                decides=lambda: ([spoilers.value(_mib(place["at_end_of_forward"]), "MiB")]
                                 if place and place["at_end_of_forward"] else []))


# --- the exercise -------------------------------------------------------------------------------------------------


def exercise_half_batch(run, sizes) -> None:
    """Half the batch: a model of the peak from the sizes, not a measurement."""

    def solution():
        gpu = memory.memory_peaks(run.trace)[0]
        states = states_bytes(sizes)
        estimate = states + (gpu.peak_allocated - states) / 2
        show.md(f"A model of it, not a measurement: the states stay at {nbytes(states)}, and if everything else scales "
                f"with the batch, half the batch gives about {nbytes(int(estimate))} against "
                f"{nbytes(gpu.peak_allocated)} now. Record it to see where the model is wrong (one place it may be: "
                "not every temporary scales with the batch).")

    widgets.exercise("half the batch",
                     "At batch 2048 instead of 4096, what peak do you expect? Work it out from the sizes and the peak "
                     "above, then ask for the solution.", solution)
