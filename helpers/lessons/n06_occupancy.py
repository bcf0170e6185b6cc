"""Notebook 06's questions (06_occupancy): occupancy queries in the trace, and what limits a kernel's occupancy.

Occupancy here is worked out, not measured: from the registers, shared
memory and block size the trace records for each kernel and the per-SM
limits of :mod:`helpers.facts.hardware` (the CUDA programming guide's table and the
occupancy calculator's allocation rules). The article's A100 figures are
labelled as the article's; its A100's occupancy is computed from the sm_80
row of the same table.
"""

from __future__ import annotations

import html
import math

from .. import facts
from ..lesson import article, plots, show, spoilers, widgets
from ..facts import hardware, kernel_names, kernel_kinds as kk
from ..facts.text import nbytes, short

QUERY_CHOICES = ["yes, before every GEMM", "yes, but only once", "no occupancy query at all"]

WHERE_CHOICES = ["none: the library asked once, while it set itself up, and remembers",
                 "some, fewer than in step #0",
                 "as many as in step #0: it asks every time"]

ADD_CHOICES = ["nothing: every warp slot fills (100%), as the article says",
               "registers", "shared memory", "threads or blocks per SM"]

BEST_PRACTICES = "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#occupancy"
A100 = (8, 0)  # the article's GPU: an A100-SXM4-80GB, compute capability 8.0


def _queries(t) -> dict[str, int]:
    return {c.name: c.count for c in facts.runtime_calls(t) if kk.is_occupancy_query(c.name)}


def query(run) -> None:
    """06.query: in the warm 4096 trace, does an occupancy query come before each GEMM?"""
    t = run.trace
    q = _queries(t)
    nq = sum(q.values())
    gemms = sum(k.count for k in facts.kernels(t) if k.kind == kk.GEMM)
    actual = QUERY_CHOICES[2] if not nq else QUERY_CHOICES[0] if nq >= gemms else QUERY_CHOICES[1]

    def reveal(answer):
        calls = facts.runtime_calls(t)
        show.table([(k.kind, short(k.name, 60), ", ".join(f"{n} x {c}" for c, n in k.launched_by.items()))
                    for k in facts.kernels(t)], ["kind", "kernel", "launched by"])
        show.table([(c.name, c.count) for c in calls], ["runtime/driver call in the recorded steps", "count"])
        show.versus([("occupancy queries in the recorded steps", "one before every GEMM", f"{nq} for {gemms} GEMMs")],
                    note=f"{article.fig('occupancy_query').label(capital=True)}; this GPU: {run.tag}")
        hw = ("This trace has no occupancy query in its recorded steps." if not nq else
              "This GPU's trace asks before launching, as the article's A100 did." if nq >= gemms else
              f"This trace asks fewer times than it launches a GEMM ({html.escape(', '.join(q))}).")
        return widgets.verdict(answer == actual, f"{nq} occupancy queries for {gemms} GEMMs. {hw}", actual=actual)

    widgets.ask("06.query", "In this trace, is each GEMM preceded by an occupancy query on the CPU?",
                choices=QUERY_CHOICES, default=QUERY_CHOICES[0], reveal=reveal,
                decides=lambda: list(q) + ([spoilers.value(nq, "occupancy queries")] if nq else []))


def where_queries(first) -> None:
    """06.why-query: in the run that records the program's first steps, do the steps after step #0 hold queries?

    Notebook 03 listed the calls of this run's step #0 (its occupancy queries among them, on the H200): the
    question asks about what it did not show, the steps after it.
    """
    by_step = facts.occupancy_queries_by_step(first.trace)
    first_n = sum(by_step[0][1].values()) if by_step else 0
    later = by_step[1:]
    later_n = [sum(q.values()) for _, q in later]
    if not later or all(n == 0 for n in later_n):
        actual = WHERE_CHOICES[0]
    elif all(n >= first_n for n in later_n):
        actual = WHERE_CHOICES[2]
    else:
        actual = WHERE_CHOICES[1]
    later_names = sorted({n for _, q in later for n in q})

    def reveal(answer):
        show.table([(step, ", ".join(f"{n} x {c}" for c, n in q.items()) or "none") for step, q in by_step],
                   [f"step ({first.tag})", "occupancy queries"])
        ops = sorted(facts.ops_around(first.trace, kk.is_occupancy_query))
        names = ", ".join(s for s, _ in later)
        if not first_n and actual == WHERE_CHOICES[0]:
            text = "No step of this run holds a query: on this GPU the launch path does not ask at all."
        elif actual == WHERE_CHOICES[0]:
            text = (f"Step #0 holds {first_n} queries, all under {html.escape(', '.join(ops))}, and the later steps "
                    f"({names}) none. That fits a library that asks once while it sets itself up and keeps the "
                    "answer (a hypothesis: its source would confirm it), so a steady-state trace has nothing to scan "
                    "for.")
        elif actual == WHERE_CHOICES[2]:
            text = (f"Every step asks: {first_n} queries in step #0 and {', '.join(map(str, later_n))} in {names}, "
                    f"under {html.escape(', '.join(ops))}. Here the library asks before its launches, as on the "
                    "article's A100.")
        else:
            text = (f"Step #0 holds {first_n} queries and the later steps {', '.join(map(str, later_n))}: the "
                    "library asks again after setting itself up, but not every time.")
        return widgets.verdict(answer == actual, text, actual=actual)

    widgets.ask("06.why-query", "In the run notebook 03 recorded from the program's first step, how many occupancy "
                "queries will the steps after step #0 hold?", choices=WHERE_CHOICES, default=WHERE_CHOICES[2],
                reveal=reveal, decides=lambda: later_names + [spoilers.value(n, "x") for n in later_n if n])


def memset_before_gemm(run) -> None:
    """Shown once 06.query is answered: the tiny memset before each large GEMM, and a sweep that tests one reading."""
    from ..runs.profiling import profile
    from ..runs.scenarios import SWEEP_SIZES
    from ..runs.workload import matmul_add

    t = run.trace

    def shown():
        fills = [r for r in facts.copies(t) if r.kind == kk.FILL]
        if not fills:
            show.md("This trace has no memset before its GEMMs.")
            return
        sizes = ", ".join(f"{n} x {b} bytes" for b, n in fills[0].sizes.items())
        order = facts.launches(t)
        callers = ", ".join(sorted({f"`{x.call}`" for x in order if x.kind == kk.FILL}))
        n_fill = sum(1 for x in order if x.kind == kk.FILL)
        before = sum(1 for a, b in zip(order, order[1:]) if a.kind == kk.FILL and b.kind == kk.GEMM)
        where = ("each right before a GEMM on the GPU" if before == n_fill else
                 f"{before} of the {n_fill} right before a GEMM on the GPU")
        sweep = [profile(matmul_add(n), warm=True) for n in SWEEP_SIZES]
        rows = [(r.workload.p["size"], short(g.name, 60), facts.work_per_call(r.trace).get(kk.FILL, 0))
                for r in sweep for g in [facts.top_kernel(r.trace, kk.GEMM)] if g]
        show.table(rows, ["size", "GEMM kernel", "memsets per step"])
        by_kernel: dict[str, set] = {}
        for size, name, n in rows:
            by_kernel.setdefault(name, set()).add(n > 0)
        mixed = [name for name, seen in by_kernel.items() if len(seen) > 1]
        test = (f"The table contradicts it as stated: {', '.join(f'`{n}`' for n in mixed)} runs with the memset at "
                "some sizes and without it at others, so the kernel alone does not decide. The size, or how the "
                "library splits the work at that size, may (another hypothesis, which a sweep with finer steps "
                "would test)." if mixed else
                "In the table, each kernel name comes either always with the memset or never, which fits that "
                "explanation without proving it.")
        show.md(f"Here: `{fills[0].name}` launched by {callers}, {sizes}, {where}. A few bytes cannot be "
                "matrix data. One explanation: the GEMM kernels that come with it coordinate their thread blocks "
                "through a small flag or counter in memory, which has to be cleared before each launch. If so, the "
                f"memset should come and go with particular GEMM kernels as the size changes. {test} The article "
                "does not mention a memset, and its compiled trace lists only a copy and the GEMM per step.")

    widgets.after("06.query", shown)


def _limits_text(o) -> str:
    return ", ".join(f"{name}: {v}" for name, v in o.limits.items() if v is not None)


def occupancy(gemm, kernels, device, device_name: str) -> None:
    """06.occupancy: the 4096 GEMM's theoretical occupancy, from its resources and this GPU's limits."""
    o = facts.occupancy(gemm, device)

    def reveal(answer_pct):
        if o is None or o.unknown:
            return widgets.verdict(None, "No theoretical occupancy can be worked out here: "
                                   + html.escape(o.unknown if o else "the trace records no registers for this GEMM")
                                   + ".")
        said = kernel_names.decode(gemm.name)  # tensor cores or not, as the name says (or does not)
        show.table([(gemm.kind, o.blocks_per_sm, f"{o.warps_per_sm} of {o.max_warps_per_sm}", f"{o.occupancy:.0%}",
                     o.limited_by, _limits_text(o))],
                   ["kernel", "blocks per SM", "warps", "theoretical occupancy", "limited by",
                    "blocks allowed by each resource"])
        show.display_figure(plots.resources([(f"{gemm.kind}: {gemm.name[:28]}", gemm.resources)], device,
                                            title=f"the GEMM's resources on {device_name}"))
        return widgets.verdict(
            widgets.within(answer_pct, 100 * o.occupancy, factor=2),
            f"The GEMM fits <b>{o.blocks_per_sm}</b> block(s) per SM, {o.warps_per_sm} of {o.max_warps_per_sm} "
            f"warps: <b>{o.occupancy:.0%}</b> theoretical occupancy, limited by {o.limited_by}. Low occupancy is not "
            f"a defect in itself (<a href='{BEST_PRACTICES}'>CUDA's best-practices guide</a>: higher occupancy does "
            "not always mean higher performance): a GEMM keeps its tiles in registers and shared memory and feeds "
            + ("the tensor cores" if said.tensor_cores else "its arithmetic units")
            + " from there, so judge it by its throughput (notebook 07), not by how many warps wait on an SM. "
            f"What its name says: {html.escape(said.text())}.", actual=100 * o.occupancy)

    widgets.ask("06.occupancy", "What theoretical occupancy do you expect for the 4096 x 4096 GEMM kernel?",
                unit="%", default=50, reveal=reveal,
                decides=lambda: ([spoilers.share(o.occupancy), spoilers.name(o.limited_by)]
                                 if o and not o.unknown else []))


def _add_choice(o) -> str:
    if o.occupancy >= 1:
        return ADD_CHOICES[0]
    first = o.limited_by.split(" and ")[0]
    return {"registers": ADD_CHOICES[1], "shared memory": ADD_CHOICES[2]}.get(first, ADD_CHOICES[3])


def add_occupancy(add, device) -> tuple:
    """The add kernel's occupancy here, and on the article's A100 with the article's 32 registers (sm_80 limits)."""
    if add is None:
        return None, None
    here = facts.occupancy(add, device)
    regs = article.fig("add_registers").value
    a100 = facts.theoretical_occupancy(regs, 0, add.resources.threads_per_block,
                                       {"computeMajor": A100[0], "computeMinor": A100[1]})
    return here, a100


def _arithmetic(regs: int, threads: int, arch) -> str:
    """The register limit worked out, step by step, for one kernel on one architecture."""
    per_warp = regs * arch.warp_size
    alloc = -(-per_warp // arch.register_allocation_unit) * arch.register_allocation_unit
    warps = arch.registers_per_sm // alloc
    usable = warps - warps % arch.warp_allocation_granularity
    per_block = -(-threads // arch.warp_size)
    rounded = f", rounded up to {alloc:,} (registers go to a warp in units of {arch.register_allocation_unit})" \
        if alloc != per_warp else ""
    kept = f", {usable} in whole groups of {arch.warp_allocation_granularity}" if usable != warps else ""
    return (f"{regs} registers × {arch.warp_size} threads = {per_warp:,} per warp{rounded}; {arch.registers_per_sm:,} "
            f"registers per SM / {alloc:,} = {warps} warps{kept}; blocks of {per_block} warps: {usable // per_block} "
            f"blocks, {usable // per_block * per_block} of {arch.max_warps_per_sm} warp slots")


def add_limit(add, device, device_name: str) -> None:
    """06.add: the article says nothing limits the add kernel's occupancy; does anything here?"""
    here, a100 = add_occupancy(add, device)
    fig = article.fig("add_registers")
    ok = here is not None and not here.unknown

    def reveal(answer):
        if not ok:
            return widgets.verdict(None, "No theoretical occupancy can be worked out for the add here: "
                                   + html.escape(here.unknown if here else "the trace has no add kernel with "
                                                 "registers") + ".")
        r = add.resources
        arch = hardware.device_architecture(device)
        a100_arch = hardware.architecture(A100)
        rows = [(f"this GPU ({device_name}, {arch.name}), from the trace", r.registers_per_thread,
                 r.threads_per_block, here.blocks_per_sm, f"{here.occupancy:.0%}", here.limited_by)]
        swapped = {}
        if a100 is not None and not a100.unknown:
            rows.append((f"the article's A100 ({a100_arch.name}): the article's {fig.value} registers, this "
                         "trace's block", fig.value, r.threads_per_block, a100.blocks_per_sm, f"{a100.occupancy:.0%}",
                         a100.limited_by))
            swaps = [] if r.registers_per_thread == fig.value else [
                (f"{a100_arch.name} with this GPU's {r.registers_per_thread} registers", r.registers_per_thread,
                 {"computeMajor": A100[0], "computeMinor": A100[1]}),
                (f"{arch.name} with the article's {fig.value} registers", fig.value, device)]
            for label, regs, dev in swaps:
                o = facts.theoretical_occupancy(regs, 0, r.threads_per_block, dev)
                if not o.unknown:
                    swapped[label] = o
                    rows.append((label, regs, r.threads_per_block, o.blocks_per_sm, f"{o.occupancy:.0%}",
                                 o.limited_by))
        show.table(rows, ["add kernel", "registers per thread", "threads per block", "blocks per SM",
                          "theoretical occupancy", "limited by"])
        show.display_figure(plots.resources([(f"{add.kind}: {add.name[:28]}", r)], device,
                                            title=f"the add's resources on {device_name}"))
        actual = _add_choice(here)
        head = (f"Here the add kernel uses <b>{r.registers_per_thread}</b> registers per thread, against the "
                f"article's {fig.value}, and fits "
                f"<b>{here.blocks_per_sm}</b> blocks per SM: <b>{here.occupancy:.0%}</b> theoretical occupancy, "
                f"limited by {here.limited_by}. ")
        work = f"On this GPU: {_arithmetic(r.registers_per_thread, r.threads_per_block, arch)}. "
        if a100 is not None and not a100.unknown:
            work += (f"With {fig.quote()}, by {a100_arch.name}'s limits: "
                     f"{_arithmetic(fig.value, r.threads_per_block, a100_arch)}, so "
                     + (f"nothing stops every warp slot from filling, as the article says (with this trace's block "
                        f"of {r.threads_per_block} threads: the article does not give the A100's). "
                        if a100.occupancy >= 1 else
                        f"{a100.occupancy:.0%}: by these limits something limits it there too. "))
        swap = ""
        if len(swapped) == 2:
            a, b = swapped.values()
            if a.occupancy == here.occupancy and b.occupancy == a100.occupancy:
                swap = (f"Swap the register counts and the verdicts swap ({a.occupancy:.0%} and {b.occupancy:.0%} in "
                        "the table): what differs is the register count of the kernel each GPU ran, not the GPUs' "
                        "limits. ")
                if a100.occupancy >= 1 > here.occupancy:
                    swap += (f"{r.registers_per_thread - fig.value} more registers per thread cost "
                             f"{1 - here.occupancy:.0%} of the warp slots: occupancy moves in steps, not smoothly.")
            else:
                swap = "The last two rows show what the register count alone changes on each architecture. "
        return widgets.verdict(answer == actual, head + work + swap, actual=actual)

    widgets.ask("06.add", f"The article's add kernel used {fig.value} registers per thread and no shared memory, and "
                "the article concluded that nothing limits its occupancy. This GPU's add kernel uses the registers "
                "in the table above. What limits its theoretical occupancy here?", choices=ADD_CHOICES,
                default=ADD_CHOICES[0], reveal=reveal,
                decides=lambda: ([spoilers.share(here.occupancy), spoilers.value(here.blocks_per_sm, "blocks per SM")]
                                 if ok else []))


def perfetto_estimate(t) -> None:
    """06.perfetto: Kineto's est. achieved occupancy % for the GEMM, read in Perfetto."""
    g = facts.top_kernel(t, kk.GEMM)
    est = g.resources.est_achieved_occupancy_pct if g else None

    def reveal(found):
        return widgets.verdict(found == est, f"Kineto's <i>est. achieved occupancy %</i> for the GEMM is <b>{est}</b>, "
                               "beside the theoretical occupancy worked out above. The next cell says where Kineto's "
                               "figure comes from.", actual=est)

    widgets.ask("06.perfetto", "Click the GEMM kernel. What 'est. achieved occupancy %' does its detail show?",
                unit="%", default=50, reveal=reveal, kind="task",
                decides=lambda: [spoilers.percent(est)] if est else [])


def trace_figures(t, device) -> None:
    """Shown once 06.perfetto is answered: Kineto's blocks per SM and occupancy estimate for every kernel."""

    def shown():
        limit = device.get("sharedMemPerBlock")
        show.table([(k.kind, short(k.name, 50), k.resources.grid, k.resources.blocks_per_sm,
                     nbytes(k.resources.shared_memory or 0), k.resources.est_achieved_occupancy_pct)
                    for k in facts.kernels(t) if k.resources.block],
                   ["kind", "kernel", "grid", "Kineto's blocks per SM (grid / SMs)", "shared memory",
                    "Kineto's est. achieved occupancy %"])
        split = facts.estimate_by_shared_memory(t, limit) if limit else None
        if split and split.above:
            clean = split.above_zero == split.above and split.within_nonzero == split.within
            show.md(f"In this trace, {split.above_zero} of the {split.above} kernels that use more than "
                    f"`sharedMemPerBlock` ({nbytes(limit)}) of shared memory have an estimate of 0, and "
                    f"{split.within_nonzero} of the {split.within} others whose grid fills the SMs have a non-zero one. "
                    + ("That split fits the way Kineto calls the calculator: a block that needs more shared memory "
                       "than that only runs after an explicit opt-in, which Kineto does not pass, so the calculator "
                       "fits none of them (a likely reason, read from the source, not measured). Read such a 0 as "
                       "*not estimated*; the theoretical occupancy above is the figure to use." if clean else
                       "The split is not clean here, so shared memory alone does not explain the zeros; compute the "
                       "theoretical occupancy above rather than reading the estimate."))

    widgets.after("06.perfetto", shown)


def exercise_small_gemm(gemm, t) -> None:
    """The "64 x 64 GEMM" exercise: the small GEMM's occupancy, and how many SMs its grid can use."""
    from ..runs.profiling import profile
    from ..runs.workload import matmul_add

    def solution():
        small = profile(matmul_add(64))
        g = facts.top_kernel(small.trace, kk.GEMM)
        o = facts.occupancy(g, small.trace.devices[0]) if small.trace.devices else None
        show.table([(short(k.name, 50), k.resources.registers_per_thread, nbytes(k.resources.shared_memory or 0),
                     k.resources.block, k.resources.grid) for k in (g, gemm)],
                   ["GEMM", "registers/thread", "shared memory", "block", "grid"])
        if o is None or o.unknown:
            show.md("No theoretical occupancy can be worked out for it here.")
            return
        sms = t.devices[0].get("numSms") if t.devices else None
        blocks = math.prod(g.resources.grid)
        use = (f"Its grid has {blocks} blocks for the GPU's {sms} SMs: at that size most SMs have nothing to do, "
               "whatever the occupancy." if sms and blocks < sms else
               f"Its grid has {blocks} blocks for the GPU's {sms or '?'} SMs.")
        show.md(f"At 64 × 64 the GEMM is {show.code(g.name, 60)}: {o.blocks_per_sm} block(s) per SM, "
                f"{o.occupancy:.0%} theoretical occupancy, limited by {o.limited_by}. {use}")

    widgets.exercise("the 64 x 64 GEMM",
                     "At 64 × 64 the library picks another GEMM kernel. Will its theoretical occupancy be higher or "
                     "lower than the 4096 × 4096 one's, and does it matter at that size? Write it down, then ask for "
                     "the solution.", solution)
