"""Pictures of traces, drawn with matplotlib from the facts.

Each function returns the matplotlib Figure (the notebook shows it). They
read :mod:`helpers.reader.trace` and :mod:`helpers.facts`; nothing there knows
about them.
"""

from __future__ import annotations

import math
from typing import Sequence

from .. import facts
from ..facts import hardware, kernel_kinds as kk
from ..reader.trace import ANNOTATION, CPU_OP, DRIVER, RUNTIME, Trace, lane_spans

GROUP_COLORS = {ANNOTATION: "#9ecae1", CPU_OP: "#74c476", RUNTIME: "#fd8d3c", DRIVER: "#e6550d"}
KIND_COLORS = {
    kk.GEMM: "#3182bd", kk.ATTENTION: "#6a51a3", kk.TRITON: "#e7298a", kk.COLLECTIVE: "#8c6d31",
    kk.ELEMENTWISE: "#31a354", kk.REDUCTION: "#756bb1", kk.COPY: "#d6616b", kk.FILL: "#bdbdbd",
    kk.OTHER: "#636363",
}


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _scale(span_us: float) -> tuple[float, str]:
    return (1e3, "ms") if span_us > 5e3 else (1.0, "us")


def step_window(trace: Trace, first: int = 0, count: int | None = None) -> tuple[float, float]:
    """From the start of recorded step ``first`` to the end of the GPU work its last step launched."""
    st = facts.steps(trace)
    if not st:
        return facts.window(trace)
    chosen = st[first: first + count if count else None] or st
    lo, end = chosen[0].start_us, chosen[-1].end_us
    hi = end
    for j in facts.gpu_work(trace):
        i = trace.launch_of(j)
        if i >= 0 and lo <= trace.ts[i] < end:  # launched inside the chosen steps (not a later step's work)
            hi = max(hi, trace.end_of(j))
    return lo, hi


def timeline(trace: Trace, window: tuple[float, float] | None = None, *, arrows: bool = True,
             max_depth: int = 7, title: str | None = None, label_min: float = 0.06, ax=None):
    """CPU lane with its nesting, GPU lane(s), launch-to-kernel arrows, idle GPU time shaded."""
    plt = _plt()
    lo, hi = window or step_window(trace)
    span = max(hi - lo, 1e-9)
    k, unit = _scale(span)
    main = facts.main_thread(trace)
    cpu = [i for i in range(len(trace)) if trace.lane[i] == main and trace.end_of(i) >= lo and trace.ts[i] <= hi
           and trace.group_of(i) in GROUP_COLORS]
    # nesting among the drawn events only: a trace with Python stacks (with_stack) nests every op in many frames
    depth = {i: sum(1 for a in trace.ancestors(i) if trace.group_of(a) in GROUP_COLORS) for i in cpu}
    cpu = [i for i in cpu if depth[i] < max_depth]
    rows = max(depth.values(), default=-1) + 1
    rows = min(rows, max_depth)
    gpu_lanes = sorted({trace.lane[j] for j in facts.gpu_work(trace)})
    work = [j for j in facts.gpu_work(trace) if trace.end_of(j) >= lo and trace.ts[j] <= hi]
    gpu_row = {ln: rows + 1 + n for n, ln in enumerate(gpu_lanes)}
    total_rows = rows + 1 + len(gpu_lanes)
    if ax is None:
        fig, ax = plt.subplots(figsize=(12, 0.45 * total_rows + 1.6))
    else:
        fig = ax.figure

    def x(t: float) -> float:
        return (t - lo) / k

    # One set of bars per row and colour, not one per event: a step of a training trace holds thousands of
    # events, and matplotlib lays out and draws each artist on its own (notebook 17 spent most of its time there).
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for i in cpu:
        y = depth[i]
        bars.setdefault((y, GROUP_COLORS[trace.group_of(i)]), []).append((x(trace.ts[i]), trace.dur[i] / k))
        if trace.dur[i] / span > label_min:
            name = trace.name_of(i)
            ax.text(x(trace.ts[i]) + 0.004 * span / k, y, name if len(name) < 40 else name[:37] + "...",
                    va="center", ha="left", fontsize=7, clip_on=True)
    for (y, color), xs in bars.items():
        ax.broken_barh(xs, (y - 0.4, 0.8), facecolors=color, edgecolors="white", linewidth=0.5)
    for ln in gpu_lanes:
        y = gpu_row[ln]
        mine = [j for j in work if trace.lane[j] == ln]
        idle = [(x(s), (e - s) / k) for s, e in _gaps(lane_spans(trace, mine), lo, hi)]
        if idle:
            ax.broken_barh(idle, (y - 0.45, 0.9), facecolors="#fde0dd", hatch="///", edgecolors="#fbb4ae",
                           linewidth=0)
        by_kind: dict[str, list[tuple[float, float]]] = {}
        for j in mine:
            by_kind.setdefault(facts.kind_of(trace, j), []).append(
                (x(trace.ts[j]), max(trace.dur[j], span * 0.002) / k))
        for kind, xs in by_kind.items():
            ax.broken_barh(xs, (y - 0.4, 0.8), facecolors=KIND_COLORS.get(kind, "#636363"), edgecolors="black",
                           linewidth=0.3)
    if arrows:
        for j in work:
            i = trace.launch_of(j)
            if i >= 0 and i in depth and depth[i] < max_depth:
                ax.annotate("", xy=(x(trace.ts[j]), gpu_row[trace.lane[j]] - 0.4),
                            xytext=(x(trace.ts[i]), depth[i] + 0.4),
                            arrowprops=dict(arrowstyle="->", color="#555", lw=0.7, shrinkA=0, shrinkB=0))
    ax.set_ylim(total_rows - 0.4, -0.6)
    ax.set_xlim(0, span / k)
    ticks = list(range(rows)) + [gpu_row[ln] for ln in gpu_lanes]
    labels = [f"CPU depth {d}" for d in range(rows)] + [trace.lanes[ln].label for ln in gpu_lanes]
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel(f"time ({unit}) from the start of the window")
    from matplotlib.patches import Patch

    handles = [Patch(color=c, label=g) for g, c in GROUP_COLORS.items()]
    kinds = sorted({facts.kind_of(trace, j) for j in work}, key=kk.KINDS.index)
    handles += [Patch(color=KIND_COLORS[kd], label=f"GPU {kd}") for kd in kinds]
    if gpu_lanes:
        handles.append(Patch(facecolor="#fde0dd", edgecolor="#fbb4ae", hatch="///", label="GPU idle"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.18 - 0.02 * (8 / total_rows)),
              ncol=min(len(handles), 6), fontsize=7, frameon=False)
    ax.set_title(title or trace.path.name, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def timelines(runs: Sequence[tuple[str, Trace, tuple[float, float]]], *, title: str = "", **kw):
    """Several timelines one above the other, on one time scale: (label, trace, window) each."""
    plt = _plt()
    heights = []
    for _label, trace, _w in runs:
        gpu_lanes = len({trace.lane[j] for j in facts.gpu_work(trace)})
        heights.append(min(kw.get("max_depth", 7), 7) + 1 + gpu_lanes)
    fig, axes = plt.subplots(len(runs), 1, figsize=(12, 0.45 * sum(heights) + 2.2 * len(runs)),
                             gridspec_kw={"height_ratios": heights})
    axes = list(axes) if len(runs) > 1 else [axes]
    spans = []
    for ax, (label, trace, window) in zip(axes, runs):
        timeline(trace, window, title=label, ax=ax, **kw)
        spans.append(window[1] - window[0])
    k, _unit = _scale(max(spans))
    for ax in axes:
        ax.set_xlim(0, max(spans) / k)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def _gaps(spans: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    out, cur = [], lo
    for s, e in spans:
        if s > cur:
            out.append((cur, min(s, hi)))
        cur = max(cur, e)
        if cur >= hi:
            break
    if cur < hi:
        out.append((cur, hi))
    return [(s, e) for s, e in out if e > s]


def size_axes(ax, sizes: Sequence[int]) -> None:
    """A size sweep's axes: matrix sizes on a log-2 axis, one tick each, times on a log axis (notebooks 02, 04)."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(sizes))
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("matrix size n (n x n)")
    ax.set_ylabel("time over the recorded steps (us)")


def sweep(sizes: Sequence[int], cpu_us: Sequence[float], gpu_us: Sequence[float], *,
          threshold: float = facts.GPU_BOUND_RATIO, title: str = "", ax=None,
          cpu_without_sync_us: Sequence[float] | None = None):
    """Self CPU time and GPU time against matrix size, with the crossover marked.

    ``cpu_without_sync_us`` adds a dashed CPU curve with the final synchronize taken out: the CPU's own work,
    without the time it spent waiting for the GPU.
    """
    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 4.2))
    else:
        fig = ax.figure
    ax.plot(sizes, cpu_us, "o-", color="#e6550d", label="self CPU time")
    if cpu_without_sync_us is not None:
        ax.plot(sizes, cpu_without_sync_us, "o--", color="#fdae6b", label="self CPU time without the final synchronize")
    ax.plot(sizes, gpu_us, "s-", color="#3182bd", label="GPU time (kernels)")
    size_axes(ax, sizes)
    cross = crossover(sizes, cpu_us, gpu_us, threshold)
    if cross is not None:
        ax.axvline(cross, color="#555", ls="--", lw=1)
        ax.text(cross, ax.get_ylim()[1], f" GPU-bound from about n={cross:.0f}", va="top", fontsize=8)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def crossover(sizes: Sequence[int], cpu_us: Sequence[float], gpu_us: Sequence[float],
              threshold: float = facts.GPU_BOUND_RATIO) -> float | None:
    """The size where GPU time reaches ``threshold`` of CPU time (log-interpolated), or None."""
    r = [g / c if c else math.inf for g, c in zip(gpu_us, cpu_us)]
    for n in range(1, len(sizes)):
        if r[n - 1] < threshold <= r[n]:
            a, b = math.log(r[n - 1]), math.log(r[n])
            f = (math.log(threshold) - a) / (b - a) if b != a else 0.0
            return 2 ** (math.log2(sizes[n - 1]) + f * (math.log2(sizes[n]) - math.log2(sizes[n - 1])))
    return sizes[0] if r and r[0] >= threshold else None


def distribution(durations_us: Sequence[float], *, title: str = "", unit_label: str = "kernel duration (us)",
                 ax=None, log: bool = False):
    """Each duration as a dot in run order, plus a histogram, with mean and median lines.

    ``log=True`` draws the durations on a log axis (and no histogram), so that one slow value does not flatten
    all the others.
    """
    plt = _plt()
    import statistics

    if ax is None:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [2, 1]})
    else:
        fig, a1, a2 = ax.figure, ax, None
    mean, med = statistics.fmean(durations_us), statistics.median(durations_us)
    a1.plot(range(len(durations_us)), durations_us, "o-", color="#3182bd", ms=4, lw=0.8)
    a1.axhline(mean, color="#e6550d", lw=1.2, label=f"mean {mean:.1f}")
    a1.axhline(med, color="#31a354", lw=1.2, ls="--", label=f"median {med:.1f}")
    a1.set_xlabel("run (in trace order)")
    from matplotlib.ticker import MaxNLocator

    a1.xaxis.set_major_locator(MaxNLocator(integer=True))  # runs are counted: no tick at 2.5
    a1.set_ylabel(unit_label + (", log scale" if log else ""))
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3, which="both")
    if log:
        a1.set_yscale("log")
        if a2 is not None:
            a2.remove()
            a2 = None
    if a2 is not None:
        a2.hist(durations_us, bins=min(20, max(5, len(durations_us) // 2)), color="#9ecae1", edgecolor="#3182bd",
                orientation="horizontal")
        a2.axhline(mean, color="#e6550d", lw=1.2)
        a2.axhline(med, color="#31a354", lw=1.2, ls="--")
        a2.set_xlabel("count")
        a2.set_ylim(a1.get_ylim())
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def resources(kernels: Sequence[tuple[str, facts.Resources]], device: dict, *, title: str = "",
              occupancy: bool = True):
    """Each kernel's registers, shared memory, block size and blocks per SM, next to the GPU's limits.

    The limits come from :mod:`helpers.facts.hardware`; on an architecture it does
    not know, the bars are drawn without limit lines and the title says why.
    ``occupancy=False`` leaves out the blocks-per-SM panel (drawn before a
    learner predicts it).
    """
    plt = _plt()
    try:
        arch = hardware.device_architecture(device)
    except hardware.UnknownArchitecture as e:
        arch, title = None, f"{title}\n(no limits shown: {e})".strip()
    limits = [
        ("registers per thread", lambda r: r.registers_per_thread, arch and arch.max_registers_per_thread),
        ("shared memory per block (KiB)", lambda r: (r.shared_memory or 0) / 1024,
         arch and arch.shared_memory_per_block / 1024),
        ("threads per block", lambda r: r.threads_per_block, arch and arch.max_threads_per_block),
        ("blocks per SM (theoretical)", lambda r: _blocks(r, device), arch and arch.max_blocks_per_sm),
    ][: 4 if occupancy else 3]
    fig, axes = plt.subplots(1, len(limits), figsize=(13, 0.55 * len(kernels) + 1.8), sharey=True)
    labels = [k for k, _ in kernels]
    for ax, (name, get, limit) in zip(axes, limits):
        vals = [get(r) or 0 for _, r in kernels]
        ax.barh(range(len(kernels)), vals, color="#3182bd")
        if limit:
            ax.axvline(limit, color="#b00", ls="--", lw=1)
            ax.text(limit, len(kernels) - 0.55, f"limit {limit:.0f} ", color="#b00", fontsize=7, ha="right",
                    va="bottom")
        for n, v in enumerate(vals):
            ax.text(v, n, f" {v:.0f}" if v >= 10 else f" {v:.2g}", va="center", fontsize=7)
        ax.set_title(name, fontsize=8)
        ax.set_xlim(0, max([limit or 0] + vals) * 1.25 or 1)
    axes[0].set_yticks(range(len(kernels)))
    axes[0].set_yticklabels(labels, fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _blocks(r: facts.Resources, device: dict) -> int | None:
    if not (r.registers_per_thread and r.threads_per_block):
        return None
    return facts.theoretical_occupancy(r.registers_per_thread, r.shared_memory or 0, r.threads_per_block,
                                       device).blocks_per_sm


def bars(values: dict[str, float], *, title: str = "", unit: str = "us", ax=None):
    """One horizontal bar per label, longest first, each with its value."""
    plt = _plt()
    items = sorted(values.items(), key=lambda kv: -kv[1])
    if ax is None:
        fig, ax = plt.subplots(figsize=(8, 0.5 * len(items) + 1.4))
    else:
        fig = ax.figure
    labels, vals = [k for k, _ in items], [v for _, v in items]
    ax.barh(range(len(items)), vals, color="#3182bd")
    for n, v in enumerate(vals):
        ax.text(v, n, f" {v:,.1f} {unit}", va="center", fontsize=8)
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(vals, default=1) * 1.3 or 1)
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def paired_bars(values: dict[str, tuple[float, float]], names: tuple[str, str], *, title: str = "", unit: str = "us",
                ax=None):
    """Two bars per label (say CPU and GPU time per call), side by side."""
    plt = _plt()
    labels = list(values)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(labels) + 2), 3.8))
    else:
        fig = ax.figure
    x = range(len(labels))
    for side, (name, color) in enumerate(zip(names, ("#e6550d", "#3182bd"))):
        vals = [values[k][side] or 0 for k in labels]
        pos = [i + (side - 0.5) * 0.38 for i in x]
        ax.bar(pos, vals, width=0.38, color=color, label=name)
        for p, v in zip(pos, vals):
            ax.text(p, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel(unit)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def observer(rows: Sequence[tuple[str, float, float]], *, title: str = "", ax=None):
    """For each run: CPU time per call with the profiler on (from the trace) against off (timed plainly)."""
    return paired_bars({label: (plain, profiled) for label, profiled, plain in rows},
                       ("unprofiled", "profiled"), title=title, unit="us per call", ax=ax)


def spreads(groups: dict[str, Sequence[float]], *, title: str = "", unit: str = "us per call", log: bool = False,
            ax=None):
    """Every sample of each measurement as a dot, its median as a bar and its interquartile range as a band.

    The picture the series shows beside a timing it grades: two bands that
    overlap are two figures the machine's noise cannot tell apart.
    """
    import statistics

    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 0.7 + 0.55 * max(len(groups), 1)))
    else:
        fig = ax.figure
    for y, (label, values) in enumerate(groups.items()):
        v = sorted(float(x) for x in values)
        if not v:
            continue
        q1, q3 = (statistics.quantiles(v, n=4, method="inclusive")[::2] if len(v) >= 4 else (v[0], v[-1]))
        ax.fill_betweenx([y - 0.28, y + 0.28], q1, q3, color="#9ecae1", alpha=0.6, lw=0)
        ax.plot([statistics.median(v)] * 2, [y - 0.32, y + 0.32], color="#08519c", lw=2)
        jitter = [((i * 7919) % 13 - 6) / 30 for i in range(len(v))]  # spread the dots without randomness
        ax.scatter(v, [y + j for j in jitter], s=9, color="#333", alpha=0.7, zorder=3)
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels(list(groups))
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(unit)
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(title + ("\n" if title else "") + "dots: samples; line: median; band: middle half (IQR)", fontsize=9)
    fig.tight_layout()
    return fig


def waterfall(stages: Sequence[tuple[str, Sequence[float]]], *, title: str = "", unit: str = "ms per step", ax=None,
              factors: Sequence[float] | None = None):
    """Step time stage by stage (a fix applied at each): a bar per stage at its median, a whisker over the middle
    half of its samples, and the change from the stage before written between them (``factors``: those changes as
    measured, one per stage after the first, e.g. the medians of round-by-round ratios; else the medians' ratio)."""
    import statistics

    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.0, 1.25 * len(stages) + 1.5), 3.9))
    else:
        fig = ax.figure
    meds = []
    for x, (label, values) in enumerate(stages):
        v = sorted(float(s) for s in values)
        if not v:
            meds.append(None)
            continue
        m = statistics.median(v)
        q1, q3 = (statistics.quantiles(v, n=4, method="inclusive")[::2] if len(v) >= 4 else (v[0], v[-1]))
        ax.bar(x, m, width=0.6, color="#3182bd" if x else "#969696")
        ax.plot([x, x], [q1, q3], color="#08306b", lw=2)
        ax.text(x, q3, f"{m:.3g}", ha="center", va="bottom", fontsize=8)
        if x and meds[-1]:
            change = factors[x - 1] if factors is not None and x - 1 < len(factors) else meds[-1] / m
            ax.annotate(f"{change:.2f}x", ((x - 0.5), max(meds[-1], m) * 1.12), ha="center", fontsize=8,
                        color="#e6550d")
        meds.append(m)
    ax.set_xticks(range(len(stages)))
    ax.set_xticklabels([label for label, _ in stages], fontsize=8, rotation=15, ha="right")
    ax.set_ylabel(unit)
    ax.set_ylim(0, max((m for m in meds if m), default=1) * 1.3)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title + ("\n" if title else "") + "bar: median; whisker: middle half of the samples; orange: "
                 "the stage before over this one", fontsize=9)
    fig.tight_layout()
    return fig


def scatter(points: Sequence[tuple[str, float, float]], *, xlabel: str, ylabel: str, title: str = "",
            diagonal: bool = True, ax=None):
    """Labelled points (label, x, y) on log axes, with the line y = x to read "the same" against."""
    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
    else:
        fig = ax.figure
    xs, ys = [p[1] for p in points], [p[2] for p in points]
    ax.scatter(xs, ys, color="#3182bd")
    for label, x, y in points:
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    if diagonal and points:
        lo, hi = min(xs + ys), max(xs + ys)
        ax.plot([lo, hi], [lo, hi], ls="--", color="#999", lw=1, label="y = x")
        ax.legend(fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def lines(series: dict[str, Sequence[float]], *, title: str = "", ylabel: str = "us", xlabel: str = "in trace order",
          ax=None):
    """One line per labelled series of values, against their position: runs compared step by step."""
    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 3.6))
    else:
        fig = ax.figure
    for (label, ys), marker in zip(series.items(), "osd^v<>"):
        ax.plot(range(len(ys)), ys, marker + "-", ms=4, lw=0.8, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def memory_timeline(samples: Sequence, steps: Sequence = (), *, title: str = "", ax=None):
    """Allocated and reserved memory after each allocator event (``.ts_us .allocated .reserved``), steps shaded."""
    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(11, 3.8))
    else:
        fig = ax.figure
    if not samples:
        ax.text(0.5, 0.5, "this trace holds no memory events (profile_memory was off?)", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_title(title, fontsize=10)
        return fig
    t0 = samples[0].ts_us
    ts = [(s.ts_us - t0) / 1e3 for s in samples]
    mib = 2 ** 20
    ax.step(ts, [s.allocated / mib for s in samples], where="post", lw=1, color="#3182bd", label="allocated")
    ax.step(ts, [s.reserved / mib for s in samples], where="post", lw=1.2, color="#e6550d", label="reserved")
    for n, st in enumerate(steps):
        lo, hi = (st.start_us - t0) / 1e3, (st.end_us - t0) / 1e3
        if hi < ts[0] or lo > ts[-1]:
            continue
        ax.axvspan(lo, hi, color="#bbbbbb" if n % 2 else "#dddddd", alpha=0.35, lw=0)
    ax.set_xlabel("time (ms) from the first memory event; grey bands are profiler steps")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


RANK_ANNOTATIONS = ("forward", "backward", "optimizer", "straggle")


def ranks(traces: Sequence[Trace], shifts_us: Sequence[float], window: tuple[float, float] | None = None, *,
          title: str = "", ax=None):
    """Every rank on one clock: its step's phases (CPU annotations) above its GPU streams, collectives in brown.

    ``shifts_us[r]`` moves rank r's times onto the shared clock (its clock origin minus the earliest);
    ``window`` is on that clock; by default the second recorded step of rank 0 and the GPU work it launched.
    """
    plt = _plt()
    if window is None:
        lo, hi = step_window(traces[0], 1, 1)
        window = (lo + shifts_us[0], hi + shifts_us[0])
    lo, hi = window
    k, unit = _scale(hi - lo)
    rows: list[str] = []
    if ax is None:
        n_rows = sum(1 + len({t.lane[j] for j in facts.gpu_work(t)}) for t in traces)
        fig, ax = plt.subplots(figsize=(12, 0.55 * n_rows + 1.8))
    else:
        fig = ax.figure
    phase_colors = {"forward": "#c7e9c0", "backward": "#fdd0a2", "optimizer": "#dadaeb", "straggle": "#fc9272"}
    drawn: set[str] = set()  # the legend names what the picture shows, nothing else
    for r, (t, shift) in enumerate(zip(traces, shifts_us)):
        y = len(rows)
        rows.append(f"rank {r}: CPU phases")
        for i in range(len(t)):
            name = t.name_of(i)
            if name in phase_colors and not t.is_gpu(i):
                s, e = t.ts[i] + shift, t.end_of(i) + shift
                if e >= lo and s <= hi:
                    drawn.add(name)
                    ax.broken_barh([((s - lo) / k, t.dur[i] / k)], (y - 0.4, 0.8), facecolors=phase_colors[name],
                                   edgecolors="white")
                    if t.dur[i] / (hi - lo) > 0.05:
                        ax.text((max(s, lo) - lo) / k, y, " " + name, va="center", fontsize=7, clip_on=True)
        work = facts.gpu_work(t)
        coll = set(facts.collective_work(t, work))
        for ln in sorted({t.lane[j] for j in work}):
            y = len(rows)
            rows.append(f"rank {r}: {t.lanes[ln].label}")
            bars: dict[str, list[tuple[float, float]]] = {}  # one set of bars per colour (timeline says why)
            for j in work:
                if t.lane[j] != ln:
                    continue
                s = t.ts[j] + shift
                if t.end_of(j) + shift < lo or s > hi:
                    continue
                color = KIND_COLORS[kk.COLLECTIVE] if j in coll else "#3182bd"
                drawn.add("collective" if j in coll else "GPU compute")
                bars.setdefault(color, []).append(((s - lo) / k, max(t.dur[j], (hi - lo) * 0.002) / k))
            for color, xs in bars.items():
                ax.broken_barh(xs, (y - 0.4, 0.8), facecolors=color, edgecolors="black", linewidth=0.2)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlim(0, (hi - lo) / k)
    ax.set_xlabel(f"time ({unit}) on the ranks' shared clock, from the start of the window")
    from matplotlib.patches import Patch

    handles = [Patch(color=c, label=n) for n, c in phase_colors.items() if n in drawn]
    handles += [Patch(color=c, label=n) for n, c in (("GPU compute", "#3182bd"),
                                                     ("collective", KIND_COLORS[kk.COLLECTIVE])) if n in drawn]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=6, fontsize=7, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


_ROOFLINE_KIND_COLORS = {"gemm": KIND_COLORS[kk.GEMM], "conv": KIND_COLORS[kk.GEMM],
                         "elementwise": KIND_COLORS[kk.ELEMENTWISE], "reduction": KIND_COLORS[kk.REDUCTION],
                         "copy": KIND_COLORS[kk.COPY], "fill": KIND_COLORS[kk.FILL]}
_ROOF_STYLES = ("-", "--", ":")


def roofline(r, *, labels: int = 8, title: str = "", ax=None):
    """The classic log-log roofline of a :class:`helpers.facts.roofline.Roofline`: achieved TFLOP/s against FLOP/byte.

    The roofs (from :mod:`helpers.facts.hardware`, through ``r.peaks``) are lines:
    the memory roof (bandwidth x intensity) up to each compute peak. Each
    kernel group is a point, its area in proportion to its GPU time, coloured
    by kind; the ``labels`` longest are named. Groups that do no arithmetic
    (copies, fills) have no place on a FLOP/s axis: the legend counts them.
    """
    from ..facts.roofline import short_name

    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 5))
    else:
        fig = ax.figure
    drawn = [p for p in r.points if p.flops > 0 and p.achieved_tflops > 0 and math.isfinite(p.intensity)]
    left_out = len(r.points) - len(drawn)
    xs = [p.intensity for p in drawn]
    lo_x = min(xs + [0.1]) / 3
    hi_x = max(xs + [2000.0]) * 30  # room for the labels on the right
    if r.peaks is not None:
        bw = r.peaks.bandwidth_tbs
        for (name, peak), style in zip(sorted(r.peaks.compute_tflops.items(), key=lambda kv: -kv[1]),
                                       _ROOF_STYLES * 3):
            ridge = peak / bw
            ax.plot([lo_x, ridge, hi_x], [lo_x * bw, peak, peak], color="#444", ls=style, lw=1.2,
                    label=f"{name}: {peak:g} TFLOP/s (ridge {ridge:.0f} FLOP/B)")
        ax.plot([], [], color="none", label=f"memory: {bw:g} TB/s ({r.peaks.gpu}, datasheet)")
    else:
        ax.text(0.02, 0.98, r.note or "no roofs: unknown GPU", transform=ax.transAxes, va="top", fontsize=8)
    total = max((p.time_us for p in drawn), default=1.0)
    for kind in dict.fromkeys(p.kind for p in drawn):
        ps = [p for p in drawn if p.kind == kind]
        ax.scatter([p.intensity for p in ps], [p.achieved_tflops for p in ps],
                   s=[20 + 400 * p.time_us / total for p in ps], alpha=0.7,
                   color=_ROOFLINE_KIND_COLORS.get(kind, KIND_COLORS[kk.OTHER]), edgecolor="k", lw=0.5, label=kind)
    named: set[str] = set()
    for p in sorted(drawn, key=lambda p: -p.time_us):
        text = f"{short_name(p.kernel, 28)} ({p.op.removeprefix('aten::')})"
        if len(named) >= labels or text in named:
            continue
        # alternate above and below: groups of one kernel often sit close together
        ax.annotate(text, (p.intensity, p.achieved_tflops), textcoords="offset points",
                    xytext=(6, 5 if len(named) % 2 == 0 else -11), fontsize=7)
        named.add(text)
    if left_out:
        ax.plot([], [], color="none", label=f"{left_out} copy/fill group(s): 0 FLOPs, not drawn")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo_x, hi_x)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title or f"roofline: {r.gpu or 'no GPU named'} (near = {r.near:.0%} of the roof)", fontsize=10)
    fig.tight_layout()
    return fig
