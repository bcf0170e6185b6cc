"""Our rank comparison against Holistic Trace Analysis, on the same folders of rank traces.

    .venv/bin/pip install -e '.[bench]' --config-settings editable_mode=compat
    .venv/bin/python benchmarks/bench_ranks.py              # every folder, 3 runs a side
    .venv/bin/python benchmarks/bench_ranks.py --runs 1 FOLDER...

For each folder (one trace per rank), each side runs in a fresh Python
process, the sides taking turns, and the fastest run of each is kept:

* ours: ``helpers.facts.ranks.read_ranks(folder)``: reads every rank's trace
  and computes what ``python -m helpers summarize FOLDER`` prints (rows,
  overlap, matching, straggler);
* HTA: ``TraceAnalysis(trace_dir=folder)``, then ``get_comm_comp_overlap()``
  and ``get_temporal_breakdown()``, each timed, with HTA's defaults;
* HTA, last step kept: the same with ``include_last_profiler_step=True``;
* HTA, no ns rounding: the defaults, with ``HTA_DISABLE_NS_ROUNDING=1`` (HTA
  otherwise rounds a trace's nanosecond timestamps inward to whole
  microseconds: starts up, ends down);
* ours, HTA's way: our reader, with HTA's choice of events and its
  definitions (see benchmarks/README.md), to show that the two sides'
  figures differ only by those choices.

The clock starts after the imports. Every figure printed comes from these
runs; benchmarks/README.md explains the differences.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL = ROOT.parent / "shared" / "external-traces"
FOLDERS = [EXTERNAL / "hta_trace_filter"] + [ROOT / "traces" / "ranks" / f"h200x2-{m}"
                                            for m in ("ddp", "straggler", "manual")]
SIDES = ["ours", "hta", "hta-last", "hta-ns", "ours-hta"]
LABELS = {"ours": "ours: read_ranks", "hta": "HTA (defaults)", "hta-last": "HTA, last step kept",
          "hta-ns": "HTA, no ns rounding", "ours-hta": "ours, HTA's way"}

# HTA's kernel types (hta/utils/utils.py, version 0.5.0), applied with re.match as HTA does
_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def _ours(folder: str) -> dict:
    from helpers.facts.ranks import read_ranks

    r = read_ranks(folder)
    return {"ranks": {x.rank: {"overlap_pct": x.overlap_pct, "idle_pct": x.idle_pct, "window_us": x.window_us,
                               "busy_us": x.gpu_busy_us, "compute_us": x.compute_us, "collective_us": x.collective_us,
                               "exposed_us": x.exposed_us, "verdict": x.verdict} for x in r.ranks},
            "straggler": r.straggler.rank, "matched": len(r.matched)}


def _ours_hta_way(folder: str, include_last: bool = False) -> dict:
    """HTA's two analyses computed with our reader: HTA's events, HTA's definitions."""
    from helpers import facts
    from helpers.facts.collectives import rank_of
    from helpers.facts.ranks import read_ranks
    from helpers.reader.spans import intersection_us, lane_spans
    from helpers.reader.trace import read_trace

    ranks = {}
    for p in sorted(Path(folder).iterdir()):
        if not p.name.endswith((".json", ".json.gz")):
            continue
        t = read_trace(p)
        work = facts.gpu_work(t)
        # HTA keeps GPU work launched before the last step starts (or ends, with the flag). Its last step is
        # the latest event named ProfilerStep#N: HTA 0.5 takes the copy Kineto writes on the GPU timeline
        # (category gpu_user_annotation, no stream in its args) for a CPU event, and it starts later.
        st = [i for i in t.indices(prefix="ProfilerStep#")]
        if len({t.name_of(i) for i in st}) >= 2:
            last = max(st, key=lambda i: (t.ts[i], t.dur[i]))
            limit = t.ts[last] + t.dur[last] if include_last else t.ts[last]
            keep = []
            for j in work:
                i = t.launch_of(j)
                if i >= 0 and (t.ts[i] <= limit if include_last else t.ts[i] < limit):
                    keep.append(j)
            work = keep
        comm = [j for j in work if _HTA_COMM.match(t.name_of(j))]
        comp = [j for j in work if not _HTA_NOT_COMPUTE.match(t.name_of(j))]
        comm_s, comp_s, all_s = lane_spans(t, comm), lane_spans(t, comp), lane_spans(t, work)
        comm_t = sum(e - s for s, e in comm_s)
        kernel_time = all_s[-1][1] - all_s[0][0] if all_s else 0.0
        busy = sum(e - s for s, e in all_s)
        compute = sum(e - s for s, e in comp_s)
        ranks[rank_of(t)] = {"overlap_pct": 100 * intersection_us(comm_s, comp_s) / comm_t if comm_t else None,
                             "kernel_time_us": kernel_time, "idle_us": kernel_time - busy, "compute_us": compute,
                             "non_compute_us": busy - compute,
                             "idle_pct": 100 * (kernel_time - busy) / kernel_time if kernel_time else None}
    del read_ranks
    return {"ranks": ranks}


def _hta(folder: str, include_last: bool) -> dict:
    import logging

    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    times = {}
    t = time.perf_counter()
    ta = TraceAnalysis(trace_dir=folder, include_last_profiler_step=include_last)
    times["load"] = time.perf_counter() - t
    t = time.perf_counter()
    ov = ta.get_comm_comp_overlap(visualize=False)
    times["overlap"] = time.perf_counter() - t
    t = time.perf_counter()
    tb = ta.get_temporal_breakdown(visualize=False)
    times["breakdown"] = time.perf_counter() - t
    ranks: dict[int, dict] = {}
    for row in ov.to_dict("records"):
        v = row["comp_comm_overlap_pctg"]
        ranks.setdefault(int(row["rank"]), {})["overlap_pct"] = None if v != v else float(v)  # NaN: no collectives
    for row in tb.to_dict("records"):
        ranks.setdefault(int(row["rank"]), {}).update(
            kernel_time_us=float(row["kernel_time(us)"]), idle_us=float(row["idle_time(us)"]),
            compute_us=float(row["compute_time(us)"]), non_compute_us=float(row["non_compute_time(us)"]),
            idle_pct=float(row["idle_time_pctg"]))
    return {"ranks": ranks, "times": times}


def _child(side: str, folder: str) -> None:
    sys.path.insert(0, str(ROOT))
    if side == "ours":
        import helpers.facts.ranks

        run = lambda: _ours(folder)  # noqa: E731
    elif side == "ours-hta":
        import helpers.facts.ranks

        run = lambda: _ours_hta_way(folder)  # noqa: E731
    else:
        import hta.trace_analysis  # noqa: F401
        import pandas  # noqa: F401

        run = lambda: _hta(folder, side == "hta-last")  # noqa: E731  (hta-ns: the parent set the variable)
    t = time.perf_counter()
    try:
        out = run()
    except Exception as e:  # a side that cannot read a folder says so in the table
        out = {"error": f"{type(e).__name__}: {e}"[:300]}
    out["seconds"] = time.perf_counter() - t
    print("RESULT " + json.dumps(out))


def _measure(side: str, folder: Path) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", side, str(folder)]
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1" if side == "hta-ns" else "0"}
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}",
            "seconds": float("nan")}


def _table(rows: list[tuple]) -> None:
    widths = [max(len(str(r[c])) for r in rows) for c in range(len(rows[0]))]
    for k, r in enumerate(rows):
        print("  " + "  ".join(str(x).ljust(w) if c == 0 else str(x).rjust(w) for c, (x, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  " + "  ".join("-" * w for w in widths))


def _f(x, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def _ms(x) -> str:
    return "-" if x is None else f"{x / 1000:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, help="folders of rank traces (default: HTA's pair and ours)")
    ap.add_argument("--runs", type=int, default=3, help="runs per side (default 3); the fastest is kept")
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "FOLDER"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(*a.child)
        return 0
    try:
        from importlib.metadata import version

        hta_version = version("HolisticTraceAnalysis")
    except Exception:
        print("HTA is not installed: .venv/bin/pip install -e '.[bench]' --config-settings editable_mode=compat",
              file=sys.stderr)
        return 1
    folders = [f for f in (a.folders or FOLDERS) if f.is_dir()]
    missing = [f for f in (a.folders or FOLDERS) if not f.is_dir()]
    for f in missing:
        print(f"absent, left out: {f}")
    cores = os.cpu_count()
    print(f"machine: {platform.machine()}, {cores} cores, Python {platform.python_version()}, "
          f"HolisticTraceAnalysis {hta_version}, {date.today()}; best of {a.runs} run(s), each in a fresh process")
    for folder in folders:
        got: dict[str, list[dict]] = {s: [] for s in SIDES}
        for _ in range(a.runs):
            for side in SIDES:
                got[side].append(_measure(side, folder))
        best = {s: min(rs, key=lambda r: r["seconds"] if r["seconds"] == r["seconds"] else float("inf"))
                for s, rs in got.items()}
        print()
        print(folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else
              Path("..") / folder.relative_to(ROOT.parent) if folder.is_relative_to(ROOT.parent) else folder)
        rows = [("side", "time", "of which")]
        for s in SIDES:
            r = best[s]
            detail = ", ".join(f"{k} {v:.3f} s" for k, v in r.get("times", {}).items())
            rows.append((LABELS[s], f"{r['seconds']:.3f} s", r.get("error", detail) or "-"))
        _table(rows)
        ours = best["ours"].get("ranks", {})
        print()
        rows = [("rank", "overlap ours", "HTA", "HTA last", "HTA no-round", "ours HTA's way", "idle ours", "HTA",
                 "HTA no-round", "ours HTA's way", "compute ms ours", "HTA", "HTA no-round", "ours HTA's way",
                 "verdict ours")]
        for rank in sorted(ours, key=int):
            o = ours[rank]
            h = best["hta"].get("ranks", {}).get(str(rank), {})
            hl = best["hta-last"].get("ranks", {}).get(str(rank), {})
            hn = best["hta-ns"].get("ranks", {}).get(str(rank), {})
            oh = best["ours-hta"].get("ranks", {}).get(str(rank), {})
            rows.append((rank, _f(o["overlap_pct"]), _f(h.get("overlap_pct")), _f(hl.get("overlap_pct")),
                         _f(hn.get("overlap_pct")), _f(oh.get("overlap_pct")), _f(o["idle_pct"]), _f(h.get("idle_pct")),
                         _f(hn.get("idle_pct")), _f(oh.get("idle_pct")), _ms(o["compute_us"]),
                         _ms(h.get("compute_us")), _ms(hn.get("compute_us")), _ms(oh.get("compute_us")),
                         o["verdict"]))
        _table(rows)
        print(f"  (overlap and idle in %; ours: straggler {best['ours'].get('straggler')}, "
              f"{best['ours'].get('matched')} collectives matched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
