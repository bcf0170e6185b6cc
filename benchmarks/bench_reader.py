"""Our trace reader against Holistic Trace Analysis, on the same trace files.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/bench_reader.py            # both files
    .venv/bin/python benchmarks/bench_reader.py --quick    # the 35 MB trace only

For each file, each side runs in a fresh Python process:

* ours: ``helpers.trace.read_trace`` plus ``helpers.facts.summarize``, the
  full facts summary that ``python -m helpers summarize`` prints;
* HTA: ``hta.trace_analysis.TraceAnalysis(trace_dir=...)``, which loads and
  parses the trace into pandas frames (and nothing more).

Both import their libraries first; the clock and the memory count start just
before the load. Time is wall time. Memory is the peak resident set size
during the load minus the resident size just before it: the kernel's peak
counter (VmHWM) is reset first through /proc/self/clear_refs, so what the
imports took is not counted for either side.

The files: the 35 MB (uncompressed) training trace from HTA's own test data,
and a synthetic trace of about 300 MB that this script writes once into
.cache/bench/ (git-ignored) by repeating that trace's events: each copy is
shifted in time, its correlation, flow and External ids are shifted past the
previous copy's, and its ProfilerStep#N numbers continue the previous copy's,
so the result is one valid, longer recording.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL = ROOT.parent / "shared" / "external-traces"
SOURCE = EXTERNAL / "hta_trace_diff_control_control.json.gz"
CACHE = ROOT / ".cache" / "bench"
SYNTHETIC_VERSION = 1  # bump when the generator changes, to write the file again


# --- measuring, inside the child process ------------------------------------------


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) * 1024
    return out


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def _child(side: str, target: str) -> None:
    if side == "ours":
        sys.path.insert(0, str(ROOT))
        from helpers.facts import summarize
        from helpers.trace import PARSER, read_trace

        def load():
            s = summarize(read_trace(target))
            return {"events": s.events, "kernels": sum(k.count for k in s.kernels), "parser": PARSER,
                    "verdict": s.verdict}
    else:
        from hta.trace_analysis import TraceAnalysis

        def load():
            ta = TraceAnalysis(trace_dir=target)
            df = next(iter(ta.t.traces.values()))
            return {"events": int(len(df))}

    gc.collect()
    before = _status()["VmRSS"]
    reset = _reset_peak()
    t = time.perf_counter()
    info = load()
    seconds = time.perf_counter() - t
    peak = _status()["VmHWM"]
    info.update(seconds=seconds, peak_growth=max(0, peak - before), peak_reset=reset)
    print("RESULT " + json.dumps(info))


def _measure(side: str, target: Path) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", side, str(target)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.exit(f"the {side} run on {target} failed (exit {p.returncode}):\n{p.stderr[-3000:]}")


# --- the synthetic trace ------------------------------------------------------------


def _json_size(path: Path) -> int:
    if path.suffix == ".gz":
        with gzip.open(path) as f:
            return sum(len(b) for b in iter(lambda: f.read(1 << 24), b""))
    return path.stat().st_size


def write_synthetic(source: Path, target: Path, size: int) -> None:
    """Repeat the events of ``source`` until the JSON is about ``size`` bytes."""
    import orjson

    doc = orjson.loads(gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes())
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    rest = [e for e in events if e.get("ph") != "M"]
    timed = [e for e in rest if isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + e.get("dur", 0) for e in timed)
    period = int(math.ceil(hi - lo)) + 1000  # each copy starts 1 ms after the previous one ends
    ids = [e["id"] for e in rest if isinstance(e.get("id"), int)]
    for e in rest:
        a = e.get("args")
        if isinstance(a, dict):
            ids += [a[k] for k in ("correlation", "External id") if isinstance(a.get(k), int)]
    id_shift = 10 ** len(str(max(ids) + 1))
    steps = [int(e["name"][13:]) for e in rest if str(e.get("name", "")).startswith("ProfilerStep#")]
    step_shift = max(steps) - min(steps) + 1 if steps else 0

    def copy(r: int) -> bytes:
        out = []
        for e in rest:
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = e["ts"] + r * period
            if isinstance(e.get("id"), int):
                e["id"] = e["id"] + r * id_shift
            name = e.get("name")
            if isinstance(name, str) and name.startswith("ProfilerStep#"):
                e["name"] = f"ProfilerStep#{int(name[13:]) + r * step_shift}"
            a = e.get("args")
            if isinstance(a, dict) and ("correlation" in a or "External id" in a):
                a = e["args"] = dict(a)
                for k in ("correlation", "External id"):
                    if isinstance(a.get(k), int):
                        a[k] += r * id_shift
            out.append(orjson.dumps(e))
        return b",\n".join(out)

    first = copy(0)
    copies = max(1, round(size / len(first)))
    # The header as the profiler writes it, one field a line: HTA finds the rank with '"rank":\s+(\d+)'.
    header = "{\n" + "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in doc.items())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    with open(tmp, "wb") as f:
        f.write(header.encode() + b'  "traceEvents": [\n')
        f.write(b",\n".join(orjson.dumps(e) for e in meta) + b",\n")
        f.write(first)
        for r in range(1, copies):
            f.write(b",\n")
            f.write(copy(r))
        f.write(b"\n  ]\n}\n")
    tmp.replace(target)


def synthetic(size_mb: int) -> Path:
    target = CACHE / f"synthetic-{size_mb}mb" / f"synthetic_{size_mb}mb.pt.trace.json"
    stamp = target.with_name("version")
    if not target.exists() or not stamp.exists() or stamp.read_text() != f"{SYNTHETIC_VERSION} {SOURCE.stat().st_size}":
        print(f"writing a synthetic {size_mb} MB trace to {target.relative_to(ROOT)} ...", flush=True)
        t = time.perf_counter()
        write_synthetic(SOURCE, target, size_mb * 1_000_000)
        stamp.write_text(f"{SYNTHETIC_VERSION} {SOURCE.stat().st_size}")
        print(f"  done in {time.perf_counter() - t:.0f} s", flush=True)
    return target


# --- the table ---------------------------------------------------------------------------


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the ~300 MB synthetic trace")
    ap.add_argument("--size-mb", type=int, default=300, help="size of the synthetic trace (default 300)")
    ap.add_argument("--runs", type=int, default=5, help="runs per side on the 35 MB trace, median kept (default 5)")
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(*a.child)
        return 0
    if not SOURCE.is_file():
        print(f"{SOURCE} is absent: the benchmark needs HTA's 35 MB test trace there", file=sys.stderr)
        return 1
    try:
        import hta  # noqa: F401
    except ImportError:
        print("Holistic Trace Analysis is not installed: .venv/bin/pip install -e '.[bench]'", file=sys.stderr)
        return 1
    from importlib.metadata import version

    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    print(f"machine: {platform.machine()}, {cores} cores ({usable} usable), Python {platform.python_version()}, "
          f"HolisticTraceAnalysis {version('HolisticTraceAnalysis')}, {date.today()}")

    files = [(SOURCE, a.runs)]
    if not a.quick:
        files.append((synthetic(a.size_mb), 1))
    rows = []
    work = Path(tempfile.mkdtemp(prefix="bench-reader-"))
    try:
        for path, runs in files:
            # HTA reads every trace in a folder: give it a folder holding only this one.
            folder = work / path.name.split(".")[0]
            folder.mkdir()
            (folder / path.name).symlink_to(path)
            size = _json_size(path)
            print(f"{path.name}: {mb(size)} of JSON, {runs} run(s) a side ...", flush=True)
            ours, theirs = [], []
            for _ in range(runs):  # in turns, so that a busy moment costs both sides alike
                ours.append(_measure("ours", path))
                theirs.append(_measure("hta", folder))
            print("  ours: " + ", ".join(f"{r['seconds']:.2f} s" for r in ours)
                  + "; HTA: " + ", ".join(f"{r['seconds']:.2f} s" for r in theirs), flush=True)
            o_t = statistics.median(r["seconds"] for r in ours)
            h_t = statistics.median(r["seconds"] for r in theirs)
            o_m = max(r["peak_growth"] for r in ours)
            h_m = max(r["peak_growth"] for r in theirs)
            rows.append((path.name, size, ours[0]["events"], theirs[0]["events"], o_t, h_t, o_m, h_m, ours[0]["parser"],
                         all(r["peak_reset"] for r in ours + theirs)))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    head = ("file", "JSON", "our time", "HTA time", "HTA/ours", "our peak", "HTA peak", "our peak/JSON")
    table = [head] + [(name[:44], mb(size), f"{o_t:.2f} s", f"{h_t:.2f} s", f"{h_t / o_t:.1f}x", mb(o_m), mb(h_m),
                       f"{o_m / size:.2f}x") for name, size, _, _, o_t, h_t, o_m, h_m, _, _ in rows]
    widths = [max(len(r[c]) for r in table) for c in range(len(head))]
    for k, r in enumerate(table):
        print("  ".join(x.ljust(w) if c == 0 else x.rjust(w) for c, (x, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print()
    print(f"cores: {cores}; our parser: {rows[0][8]}; events read (ours / HTA's frame): "
          + ", ".join(f"{r[2]:,} / {r[3]:,}" for r in rows))
    if not all(r[9] for r in rows):
        print("note: the peak counter could not be reset, so peaks may include what the imports took")
    ok = all(h_t / o_t >= 4 and o_m <= 3 * size for _, size, _, _, o_t, h_t, o_m, _, _, _ in rows)
    print("targets (at least 4x faster than HTA, peak at most 3x the JSON):", "met" if ok else "NOT met")
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
