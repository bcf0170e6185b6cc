"""Facts as readable text: for the command line and for notebook cells."""

from __future__ import annotations

from . import kernel_kinds as kk, Node, Summary
from .kernel_names import decode


def part_of(x: float, whole: str) -> str:
    """``x`` (a ratio to ``whole``) in words: "2.0% of the CPU time" below one, "4.7 times the CPU time" above (a
    GPU time 47 times the CPU's is no share, and "4677.6% of" reads as one)."""
    return f"{x:.1%} of {whole}" if x < 1 else f"{x:.1f} times {whole}"


def us(x: float | None) -> str:
    """A duration in microseconds, in the unit that reads best."""
    if x is None:
        return "-"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.2f} s"
    if abs(x) >= 1e3:
        return f"{x / 1e3:.2f} ms"
    return f"{x:.1f} us"


def nbytes(b: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:,} B" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return str(b)


def _exact(b: int) -> str:
    """Bytes in the unit that reads best, with the exact count beside it when that unit rounds."""
    return nbytes(b) if abs(b) < 1024 else f"{nbytes(b)} ({b:,} B)"


def counts_text(counts: dict[str, int]) -> str:
    """``{"gemm": 1, "fill": 1}`` as "1 gemm, 1 fill" ("nothing" when empty)."""
    return ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "nothing"


def short(name: str, width: int = 70) -> str:
    """Long C++ kernel names, cut to something that fits a line."""
    return name if len(name) <= width else name[: width - 3] + "..."


def chain_text(node: Node | None, gpu: bool = True) -> str:
    """A dispatch chain as an indented tree, with the GPU work each launch started."""
    if node is None:
        return "(no annotation found)"
    lines = []
    for depth, n in node.walk():
        lines.append(f"{'  ' * depth}{n.name}  [{n.group}, {us(n.dur_us)}]")
        if gpu:
            for g in n.gpu:
                lines.append(f"{'  ' * (depth + 1)}-> GPU {g.kind}: {short(g.name, 60)}"
                             f"  ({us(g.dur_us)}, starts {us(g.latency_us)} after the call)")
    return "\n".join(lines)


def _balance_lines(s: Summary, top: int) -> list[str]:
    """CPU against GPU, and the verdict."""
    out: list[str] = []
    b = s.balance
    out.append("")
    out.append("CPU against GPU:")
    out.append(f"  self CPU time      {us(b.self_cpu_us):>10}")
    if b.verdict is None and s.counter_ranges is not None:
        out.append("  no kernel, copy or fill recorded, only counter ranges (below), which are not GPU time: "
                   "no verdict")
    elif b.verdict is None:
        out.append("  no GPU work in this trace: no verdict")
    else:
        share = part_of(b.ratio, "the CPU time") if b.self_cpu_us > 0 else "no CPU time recorded"
        left_out = ", collectives left out" if b.collective_us else ""
        out.append(f"  GPU time           {us(b.device_us):>10}  ({share}{left_out})")
        if b.collective_us:
            out.append(f"  collectives        {us(b.collective_us):>10}  (communication, not compute; "
                       f"{us(b.collective_exposed_us)} of it with no other GPU work running)")
        shares = (f"({b.gpu_busy_share:.1%} busy, {b.gpu_idle_share:.1%} idle)" if b.gpu_busy_share is not None
                  else "(every event at one instant: no share to give)")
        out.append(f"  GPU busy           {us(b.gpu_busy_us):>10}  of a {us(b.window_us)} window {shares}")
        if b.verdict == "inside collectives":
            out.append(f"  verdict            {b.verdict}: most of the GPU's busy time is in collectives, waiting for "
                       "other ranks or the network; diagnose the folder of every rank's trace")
        else:
            out.append(f"  verdict            {b.verdict} (GPU-bound when GPU time >= {b.threshold:.0%} of CPU time)")
    return out


def _gpu_work_lines(s: Summary, top: int) -> list[str]:
    """GPU work by kind and by name."""
    out: list[str] = []
    if s.kinds:
        out.append("")
        out.append("GPU work by kind:")
        for k in s.kinds:
            out.append(f"  {k.kind:<12} {k.count:>7}  total {us(k.total_us):>10}  median {us(k.median_us):>9}"
                       f"  {kk.DESCRIPTION[k.kind]}")
        out.append("")
        out.append(f"GPU work by name (top {min(top, len(s.kernels))} of {len(s.kernels)}):")
        for k in s.kernels[:top]:
            r = k.resources
            res = ""
            if r.registers_per_thread is not None:
                res = (f"  [{r.registers_per_thread} regs, {r.shared_memory} B smem, block {r.block}, "
                       f"grid {r.grid}]")
            out.append(f"  {k.count:>6} x {short(k.name, 60):<60} {k.kind:<11} median {us(k.median_us)}{res}")
            out.append(f"           the name says: {decode(k.name).text()}")
    return out


def _copies_calls_lines(s: Summary, top: int) -> list[str]:
    """Copies and fills, runtime and driver calls, launch latency, annotation gaps."""
    out: list[str] = []
    if s.copies:
        out.append("")
        out.append("copies and fills:" if len(s.copies) <= top else f"copies and fills (top {top} of {len(s.copies)}):")
        for c in s.copies[:top]:
            # ROCm puts a copy's size on its runtime call only: none recorded is "unknown", not 0 B
            size = f"{nbytes(c.bytes)} in all" if c.sizes else "size unknown (not in the trace)"
            out.append(f"  {c.count:>6} x {c.name:<32} {size}")
    if s.calls:
        out.append("")
        out.append(f"runtime and driver calls (top {min(top, len(s.calls))} of {len(s.calls)}):")
        for c in s.calls[:top]:
            launch = f"  (started GPU work {c.launches_gpu_work}x)" if c.launches_gpu_work else ""
            out.append(f"  {c.count:>6} x {c.name:<48} {us(c.total_us):>10}{launch}")
    if s.latency:
        L = s.latency
        out.append("")
        out.append(f"launch to start on the GPU: median {us(L.median_us)} (min {us(L.min_us)}, max {us(L.max_us)},"
                   f" {L.count} launches)")
    if s.gaps:
        out.append("")
        out.append("annotation to its first op:")
        for g in s.gaps[:top]:
            out.append(f"  {g.step or '-':<18} {g.annotation:<20} {us(g.gap_us):>10} before {g.first_op}")
    return out


def _artifacts_lines(s: Summary, top: int) -> list[str]:
    """What the profiler itself left in the trace."""
    out: list[str] = []
    a = s.artifacts
    if a.buffer_requests or a.closing_sync:
        out.append("")
        out.append("profiler artefacts:")
        for r in a.buffer_requests[:top]:
            out.append(f"  {r.name} on {r.lane}: {us(r.dur_us)}")
        if len(a.buffer_requests) > top:
            out.append(f"  ... and {len(a.buffer_requests) - top} more buffer requests "
                       f"({us(sum(r.dur_us for r in a.buffer_requests))} in all)")
        if a.closing_sync:
            c = a.closing_sync
            idle = f", GPU idle {c.idle_share:.0%} of it" if c.idle_share is not None else ""
            out.append(f"  last {c.name}: {us(c.dur_us)}{idle}")
    return out


def _memory_lines(s: Summary, top: int) -> list[str]:
    """Peak memory per device, from the [memory] events."""
    out: list[str] = []
    if s.memory:
        out.append("")
        out.append("memory (from the profiler's [memory] events):")
        for m in s.memory[:top]:
            where = ", ".join(x for x in (m.peak_allocated_step, f"in {m.peak_allocated_in}" if m.peak_allocated_in
                                          else None) if x)
            out.append(f"  {m.device:<8} peak allocated {_exact(m.peak_allocated)} at "
                       f"{us(m.peak_allocated_us)}" + (f" ({where})" if where else ""))
            out.append(f"  {'':<8} peak reserved  {_exact(m.peak_reserved)}; "
                       f"{m.events:,} events")
    return out


def _counter_lines(s: Summary, top: int) -> list[str]:
    """CUPTI's range profiler: its ranges and their counters, apart from GPU time."""
    out: list[str] = []
    r = s.counter_ranges
    if r is not None:
        out.append("")
        out.append("counter ranges (CUPTI's range profiler: hardware counters per kernel; a range spans the "
                   "collection window, not the kernel's time):")
        out.append(f"  {r.count:,} ranges of {r.kernels:,} kernels on {', '.join(r.lanes)}, "
                   f"median span {us(r.median_us)}")
        if r.counters:
            head = "counters, summed over the ranges"
            out.append(f"  {head}:" if len(r.counters) <= top else f"  {head} (first {top} of {len(r.counters)}):")
            width = min(60, max(len(k) for k in list(r.counters)[:top]))
            for k, v in list(r.counters.items())[:top]:
                out.append(f"    {short(k, 60):<{width}}  {v:>22,}" if isinstance(v, int) else
                           f"    {short(k, 60):<{width}}  {v:>22,.6g}")
    return out


def _compile_lines(s: Summary, top: int) -> list[str]:
    """torch.compile's regions and graphs."""
    out: list[str] = []
    if s.compiled.any:
        out.append("")
        out.append("torch.compile:")
        for k, v in list(s.compiled.regions.items())[:top]:
            out.append(f"  {v:>4} x {k}")
        for h, v in list(s.compiled.graph_hashes.items())[:top]:
            out.append(f"  {v:>4} x CompiledFxGraph {h}")
    return out


def summary_text(s: Summary, top: int = 10) -> str:
    """The whole summary, as the command line prints it."""
    out = [f"trace: {s.path}", f"events: {s.events:,} (parsed with {s.parser})", f"GPU: {s.device or 'none named'}"]
    if s.steps:
        out.append("")
        out.append("profiler steps:" if len(s.steps) <= top else f"profiler steps (first {top} of {len(s.steps)}):")
        out += [f"  {st.name:<18} {us(st.dur_us):>10}" for st in s.steps[:top]]
    for section in (_balance_lines, _gpu_work_lines, _counter_lines, _copies_calls_lines, _artifacts_lines,
                    _memory_lines, _compile_lines):
        out += section(s, top)
    return "\n".join(out)
