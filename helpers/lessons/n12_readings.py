"""What notebook 12's reveals read from its runs, and the figures they draw.

Each function takes a recorded (or live) run and returns the numbers a
reveal shows: GPU time per phase and per GEMM, the optimizer's launches, the
CPU's waits for the GPU, GEMM time per step, which side sets a variant's
pace. :mod:`.n12_a_training_step` asks the questions and shows these.
"""

from __future__ import annotations

import statistics

from .. import facts
from ..facts import gemm_table, step_facts, kernel_kinds as kk
from ..facts.measure import Spread
from ..lesson import plots, show
from ..reader.trace import ANNOTATION
from . import _shared

PHASES = ("forward", "loss", "backward", "optimizer", "zero_grad")


def phases_per_step(run) -> list[dict[str, float]]:
    """GPU time per phase in each recorded step: backward's from what the backward functions launched (on
    autograd's thread), the others from what ran under their label."""
    t = run.trace
    st = facts.steps(t)
    out = [{p: 0.0 for p in PHASES} for _ in st]

    def at(ts):
        return next((k for k, s in enumerate(st) if s.contains(ts)), None)

    for p in PHASES:
        if p == "backward":
            continue
        for i in t.indices((ANNOTATION,), name=p):
            if t.is_gpu(i):
                continue
            k = at(t.ts[i])
            if k is not None:
                out[k][p] += facts.gpu_time_under(t, i)
    for b in step_facts.backward_ops(t):
        k = next((n for n, s in enumerate(st) if s.name == b.step), None)
        if k is not None:
            out[k]["backward"] += b.gpu_us
    return out


def layers(run) -> list[tuple[str, float]]:
    """The model's Linear layers in forward order, from its sizes: (name, GFLOP of one GEMM at this batch)."""
    p = run.workload.p
    shapes = [(p["dim"], p["hidden"]), (p["hidden"], p["dim"])] * p["layers"] + [(p["dim"], 10)]
    return [(f"Linear {a}→{b}", 2 * p["batch"] * a * b / 1e9) for a, b in shapes]


def gemm_rows(run) -> list[tuple]:
    """The per-GEMM table: each GEMM call of a step, its phase, its launching op, its layer, kernels and time."""
    lay = layers(run)
    rows = []
    for r in gemm_table.typical_step(run.trace):
        layer, gflop = lay[r.forward_position] if r.forward_position is not None and r.forward_position < len(lay) \
            else ("-", None)
        rows.append((r, layer, gflop))
    return rows


def big_gemms(rows) -> tuple[list[float], list[float]]:
    """Forward's and backward's GEMM times among the calls of the largest FLOP count (equal work on both sides)."""
    top = max((g for _, _, g in rows if g), default=None)
    fwd = [r.median_us for r, _, g in rows if g == top and r.phase == gemm_table.FORWARD]
    bwd = [r.median_us for r, _, g in rows if g == top and r.phase == gemm_table.BACKWARD]
    return fwd, bwd


class PerStep:
    """One run's optimizer calls, as medians per step."""

    def __init__(self, r):
        calls = step_facts.optimizer_work(r.trace)
        self.implementation = calls[0].implementation if calls else None
        self.launches = statistics.median(c.launches for c in calls) if calls else 0
        self.gpu_us = statistics.median(c.gpu_us for c in calls) if calls else 0.0
        self.ops = statistics.median(sum(c.ops.values()) for c in calls) if calls else 0


def launches_figure(work: dict) -> None:
    """Launches and GPU time per step, each on its own axis, the same order of rows in both."""
    plt = plots._plt()
    labels = list(work)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 0.5 * len(labels) + 1.6), sharey=True)
    for ax, values, unit, color in ((a, [work[k].launches for k in labels], "launches per step", "#e6550d"),
                                    (b, [work[k].gpu_us for k in labels], "GPU time per step (us)", "#3182bd")):
        ax.barh(range(len(labels)), values, color=color)
        for n, v in enumerate(values):
            ax.text(v, n, f" {v:,.0f}" if unit.startswith("launches") else f" {v:,.1f} us", va="center", fontsize=8)
        ax.set_xlim(0, max(values, default=1) * 1.3 or 1)
        ax.set_xlabel(unit)
        ax.grid(alpha=0.3, axis="x")
    a.set_yticks(range(len(labels)))
    a.set_yticklabels(labels, fontsize=8)
    a.invert_yaxis()
    fig.suptitle("AdamW's step: launches and GPU time, each on its own axis", fontsize=10)
    fig.tight_layout()
    show.display_figure(fig)


def waits(r):
    """The CPU's waits for the GPU inside the recorded steps, less a torch.cuda.synchronize() written on purpose."""
    return [x for x in step_facts.hidden_syncs(r.trace) if not x.explicit]


def waits_by_line(r) -> list[dict]:
    """The waits grouped by the op that needed a GPU value (one group per line of Python), in first-seen order."""
    groups: dict[str, dict] = {}
    for s in waits(r):
        key = s.cause_op or s.op or "-"
        g = groups.setdefault(key, {"op": key, "cause": s.cause, "calls": " + ".join(s.calls), "annotation":
                                    s.annotation, "waited": [], "idle": []})
        g["waited"].append(s.dur_us)
        if s.gpu_idle_after_us is not None:
            g["idle"].append(s.gpu_idle_after_us)
    return list(groups.values())


def device_per_step(r) -> list[float]:
    t = r.trace
    work = facts.gpu_work(t)
    return [sum(t.dur[j] for j in work if s.contains(t.ts[j])) for s in facts.steps(t)]


def gemm_per_step(r) -> list[float]:
    """GEMM-kind GPU time in each recorded step."""
    t = r.trace
    out = []
    for s in facts.steps(t):
        out.append(sum(t.dur[j] for j in facts.gpu_work(t)
                       if s.contains(t.ts[j]) and facts.kind_of(t, j) == kk.GEMM))
    return out


def gemm_us(r) -> float:
    """GEMM time per step: the median of the recorded steps."""
    v = gemm_per_step(r)
    return statistics.median(v) if v else 0.0


def gemm_math(r):
    top = step_facts.gemm_precision(r.trace)
    return (top[0].math or "the name does not say", top[0].share, top[0].names[0]) if top else ("no GEMM", 0.0, "-")


VARIANTS = ("fp32", "TF32", "autocast", "fused AdamW")  # comparisons.GROUPS["train-step"]'s labels


class Side:
    """One variant of the step: its unprofiled step time (in turn), its GEMM and GPU work (trace), its CPU time."""

    def __init__(self, label: str, timed, r):
        self.label = label
        self.step = timed.spread(label) if label in timed.labels else Spread.of([])
        self.ratio = timed.ratio(label, "fp32") if label in timed.labels and "fp32" in timed.labels \
            else Spread.of([], "x")
        self.gemm = gemm_us(r)
        self.gpu = statistics.median(device_per_step(r) or [0.0])
        self.host = _shared.unprofiled(r)
        self.run = r


def sides(timed, run, tf32, amp, fused) -> dict[str, Side]:
    return {label: Side(label, timed, r) for label, r in zip(VARIANTS, (run, tf32, amp, fused))}


CPU_BOUND, GPU_BOUND, BETWEEN, UNEXPLAINED = "CPU-bound", "GPU-bound", "between the two", "neither side fills it"


def bound_of(x: Side) -> tuple[str, float, float | None]:
    """Which side sets a variant's pace: its GPU work (trace) and CPU time to issue (unprofiled) against its step."""
    share = x.gpu / x.step.median if x.step.n else float("nan")
    host = x.host.median if x.host else None
    if share < 0.6:
        return (CPU_BOUND if host is not None and host >= 0.8 * x.step.median else UNEXPLAINED), share, host
    return (GPU_BOUND if share >= 0.85 else BETWEEN), share, host


def bound_figure(s: dict[str, Side]) -> None:
    """Left: each variant's step time, every round; right: its GEMM time, all its GPU work and its CPU time."""
    plt = plots._plt()
    labels = [k for k in s if s[k].step.n]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 0.7 * len(labels) + 2.0), sharey=True)
    plots.spreads({k: [v / 1e3 for v in s[k].step.samples] for k in labels},
                  title="the step, timed without the profiler, in turn", unit="ms per step", ax=a)
    bars = (("GEMM time (trace)", "gemm", "#3182bd"), ("all GPU work (trace)", "gpu", "#9ecae1"),
            ("CPU time to issue a step (unprofiled)", "host", "#e6550d"))
    for n, (name, attr, color) in enumerate(bars):
        vals = [(s[k].host.median if s[k].host else 0.0) / 1e3 if attr == "host" else getattr(s[k], attr) / 1e3
                for k in labels]
        pos = [y + (n - 1) * 0.26 for y in range(len(labels))]
        b.barh(pos, vals, height=0.24, color=color, label=name)
    b.set_xlabel("ms per step")
    b.grid(alpha=0.3, axis="x")
    b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3)
    b.set_title("what each side needs per step (same scale)", fontsize=9)
    top = max([a.get_xlim()[1], b.get_xlim()[1]])
    a.set_xlim(0, top)
    b.set_xlim(0, top)
    fig.tight_layout()
    show.display_figure(fig)


def longest_wait(syncing) -> tuple[float, str] | None:
    t = syncing.trace
    lo, hi = plots.step_window(t)
    calls = [i for i in range(len(t)) if t.name_of(i) == "cudaStreamSynchronize" and lo <= t.ts[i] <= hi]
    if not calls:
        return None
    i = max(calls, key=t.dur.__getitem__)
    return t.dur[i], next((t.name_of(p) for p in t.ancestors(i) if t.name_of(p).startswith("aten::")), "?")
