"""Our trace reader against Holistic Trace Analysis and plain JSON parsers, on the same files.

    .venv/bin/pip install -e '.[bench]' --config-settings editable_mode=compat
    .venv/bin/python benchmarks/bench_reader.py            # every file, every side
    .venv/bin/python benchmarks/bench_reader.py --quick    # the 35 MB files only

For each file, each side runs in a fresh Python process, the sides taking turns:

* ours: ``helpers.reader.trace.read_trace`` plus ``helpers.facts.summarize``, the
  full facts summary that ``python -m helpers summarize`` prints; and, apart,
  ``read_trace`` alone;
* HTA: ``hta.trace_analysis.TraceAnalysis(trace_dir=...)``, which loads and
  parses the trace into pandas frames (and nothing more);
* json.load, orjson.loads, msgspec (a typed decode that keeps ph, name, cat,
  pid, tid, ts, dur and leaves args as raw bytes) and ijson (streaming the
  events one by one, counting them): what each parser alone costs to load the
  file, with no facts computed.

Every side imports its libraries first; the clock and the memory count start
just before the load. Time is wall time. Memory is the peak resident set size
during the load minus the resident size just before it: the kernel's peak
counter (VmHWM) is reset first through /proc/self/clear_refs, so what the
imports took is not counted for any side.

The files, each reported apart (see benchmarks/README.md):

* torch layout, 35, 150 and 300 MB: an H200 reference trace as torch.profiler
  wrote it (a leading newline, indented events over several lines), grown with
  benchmarks/grow.py, which keeps its layout byte for byte;
* HTA's 35 MB training trace from its test data, as it is (gzip, one event a line);
* compact, 150 MB: that trace's events repeated, one event a line without spaces.

The grown files are written once into .cache/bench/ (git-ignored).
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
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL = ROOT.parent / "shared" / "external-traces"
SOURCE = EXTERNAL / "hta_trace_diff_control_control.json.gz"
TORCH_SOURCE = ROOT / "traces" / "reference" / "nvidia-h200" / "block8x256x512_bf16_warm_eager.json"
CACHE = ROOT / ".cache" / "bench"
SYNTHETIC_VERSION = 1  # bump when the generator changes, to write the file again
SIDES = ["ours", "read", "roofline", "summarize", "diagnose", "hta", "json", "orjson", "msgspec", "ijson"]
LABELS = {"ours": "ours: read + summary", "read": "ours: read only", "roofline": "ours: + roofline",
          "summarize": "ours: python -m helpers summarize (the whole process)",
          "diagnose": "ours: python -m helpers diagnose (the whole process)", "hta": "HTA TraceAnalysis",
          "json": "json.load", "orjson": "orjson.loads", "msgspec": "msgspec, typed", "ijson": "ijson, streamed"}


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


def _read_bytes(target: str) -> bytes:
    path = Path(target)
    return gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()


def _open(target: str):
    path = Path(target)
    return gzip.open(path) if path.suffix == ".gz" else open(path, "rb")


def _command(side: str, target: str) -> None:
    """The whole command as a user runs it: a fresh interpreter, its imports, the read, the facts, the printing.

    Time is the process's wall time; memory its peak resident size (the interpreter and imports included, so an
    upper bound on what the trace cost), both taken from here, the parent that waits for it.
    """
    import resource

    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "helpers", side, target], capture_output=True, cwd=ROOT)
    seconds = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"python -m helpers {side} {target} failed (exit {p.returncode}):\n{p.stderr.decode()[-3000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    print("RESULT " + json.dumps({"events": None, "seconds": seconds, "peak_growth": peak, "peak_reset": False,
                                  "whole_process": True, "output_lines": p.stdout.count(b"\n")}))


def _child(side: str, target: str) -> None:
    if side in ("summarize", "diagnose"):
        return _command(side, target)
    if side == "ours":
        sys.path.insert(0, str(ROOT))
        from helpers.facts import summarize
        from helpers.reader.trace import PARSER, read_trace

        def load():
            t = read_trace(target)
            s = summarize(t)
            return {"events": s.events, "kernels": sum(k.count for k in s.kernels), "parser": PARSER,
                    "verdict": s.verdict, **t.read_by}
    elif side == "roofline":
        sys.path.insert(0, str(ROOT))
        from helpers.facts import summarize
        from helpers.facts.roofline import roofline
        from helpers.reader.trace import PARSER, read_trace

        def load():  # all that `python -m helpers summarize` does: read, summary, then the roofline
            t = read_trace(target)
            s = summarize(t)
            t1 = time.perf_counter()
            r = roofline(t)
            return {"events": s.events, "roofline_seconds": time.perf_counter() - t1, "points": len(r.points),
                    "sized_share": r.sized_share, **t.read_by}
    elif side == "read":
        sys.path.insert(0, str(ROOT))
        from helpers.reader.trace import read_trace

        def load():
            t = read_trace(target)
            return {"events": len(t), **t.read_by}
    elif side == "hta":
        from hta.trace_analysis import TraceAnalysis

        def load():
            ta = TraceAnalysis(trace_dir=target)
            df = next(iter(ta.t.traces.values()))
            return {"events": int(len(df))}
    elif side == "json":
        def load():
            with _open(target) as f:
                return {"events": len(json.load(f)["traceEvents"])}
    elif side == "orjson":
        import orjson

        def load():
            return {"events": len(orjson.loads(_read_bytes(target))["traceEvents"])}
    elif side == "msgspec":
        from typing import Any

        import msgspec

        fields = [("ph", str, "")] + [(k, Any, None) for k in ("name", "cat", "pid", "tid", "ts", "dur")]
        event = msgspec.defstruct("Event", fields + [("args", msgspec.Raw, msgspec.Raw(b"{}"))], gc=False)
        Doc = msgspec.defstruct("Doc", [("traceEvents", list[event])])
        decoder = msgspec.json.Decoder(Doc)

        def load():
            return {"events": len(decoder.decode(_read_bytes(target)).traceEvents)}
    else:
        import ijson

        def load():
            with _open(target) as f:
                return {"events": sum(1 for _ in ijson.items(f, "traceEvents.item", use_float=True)),
                        "backend": ijson.backend}

    gc.collect()
    before = _status()["VmRSS"]
    reset = _reset_peak()
    t = time.perf_counter()
    info = load()
    seconds = time.perf_counter() - t
    peak = _status()["VmHWM"]
    # the reader's forked workers (helpers/reader/parts.py) report their own peak growth: added, as if
    # every process had peaked at the same moment (an upper bound on what the read cost at once)
    info.update(seconds=seconds, peak_growth=max(0, peak - before) + info.pop("worker_peak_bytes", 0),
                peak_reset=reset)
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
    """HTA's trace repeated to about ``size_mb`` MB, one event a line without spaces."""
    target = CACHE / f"synthetic-{size_mb}mb" / f"synthetic_{size_mb}mb.pt.trace.json"
    stamp = target.with_name("version")
    if not target.exists() or not stamp.exists() or stamp.read_text() != f"{SYNTHETIC_VERSION} {SOURCE.stat().st_size}":
        print(f"writing a compact {size_mb} MB trace to {target.relative_to(ROOT)} ...", flush=True)
        write_synthetic(SOURCE, target, size_mb * 1_000_000)
        stamp.write_text(f"{SYNTHETIC_VERSION} {SOURCE.stat().st_size}")
    return target


def torch_layout(size_mb: int) -> Path:
    """An H200 reference trace grown to about ``size_mb`` MB, in torch's own layout."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from grow import grow

    target = CACHE / f"torch-{size_mb}mb" / f"torch_layout_{size_mb}mb.pt.trace.json"
    stamp = target.with_name("version")
    want = f"{(Path(__file__).parent / 'grow.py').stat().st_size} {TORCH_SOURCE.stat().st_size}"
    if not target.exists() or not stamp.exists() or stamp.read_text() != want:
        print(f"writing a {size_mb} MB trace in torch's layout to {target.relative_to(ROOT)} ...", flush=True)
        grow(TORCH_SOURCE, target, size_mb * 1_000_000)
        stamp.write_text(want)
    return target


# --- the table ---------------------------------------------------------------------------


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def _print_table(rows: list[tuple]) -> None:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for k, r in enumerate(rows):
        print("  ".join(x.ljust(w) if c == 0 else x.rjust(w) for c, (x, w) in enumerate(zip(r, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the 35 MB files only")
    ap.add_argument("--runs", type=int, default=5, help="runs per side on the 35 MB files (default 5)")
    ap.add_argument("--big-runs", type=int, default=2, help="runs per side on the larger files (default 2)")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"which sides (default: {','.join(SIDES)})")
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(*a.child)
        return 0
    if not SOURCE.is_file():
        print(f"{SOURCE} is absent: the benchmark needs HTA's 35 MB test trace there", file=sys.stderr)
        return 1
    sides = [x for x in a.sides.split(",") if x]
    missing = []
    for side, module in (("hta", "hta"), ("orjson", "orjson"), ("msgspec", "msgspec"), ("ijson", "ijson")):
        if side in sides:
            try:
                __import__(module)
            except ImportError:
                missing.append(module)
    if missing:
        print(f"not installed: {', '.join(missing)}: .venv/bin/pip install -e '.[bench]' "
              "--config-settings editable_mode=compat", file=sys.stderr)
        return 1
    from importlib.metadata import version

    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    libs = ", ".join(f"{d} {version(d)}" for d in ("HolisticTraceAnalysis", "msgspec", "orjson", "ijson")
                     if _installed(d))
    print(f"machine: {platform.machine()}, {cores} cores ({usable} usable), Python {platform.python_version()}, "
          f"{libs}, {date.today()}")

    files = [("torch", torch_layout(35), a.runs), ("HTA test data", SOURCE, a.runs)]
    if not a.quick:
        files += [("torch", torch_layout(150), a.big_runs), ("torch", torch_layout(300), a.big_runs),
                  ("compact", synthetic(150), a.big_runs)]
    results: list[tuple[str, Path, int, dict[str, dict]]] = []
    work = Path(tempfile.mkdtemp(prefix="bench-reader-"))
    try:
        for layout, path, runs in files:
            folder = work / path.name.split(".")[0]  # HTA reads every trace in a folder: one holding only this one
            folder.mkdir()
            (folder / path.name).symlink_to(path)
            size = _json_size(path)
            print(f"{path.name} ({layout} layout): {mb(size)} of JSON, {runs} run(s) a side ...", flush=True)
            got: dict[str, list[dict]] = {side: [] for side in sides}
            for _ in range(runs):  # in turns, so that a busy moment costs every side alike
                for side in sides:
                    got[side].append(_measure(side, folder if side == "hta" else path))
            for side in sides:
                print(f"  {LABELS[side]}: " + ", ".join(f"{r['seconds']:.2f} s" for r in got[side]), flush=True)
            # The fastest run of each side: on a shared machine, the one least slowed by other work.
            summary = {side: {"seconds": min(r["seconds"] for r in rs),
                              "roofline_seconds": min(r.get("roofline_seconds", math.inf) for r in rs),
                              "peak": max(r["peak_growth"] for r in rs), "events": rs[0]["events"],
                              "reset": all(r["peak_reset"] for r in rs), "extra": rs[0]}
                       for side, rs in got.items()}
            results.append((layout, path, size, summary))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    for layout, path, size, summary in results:
        ours = summary.get("ours")
        print(f"{path.name}: {layout} layout, {mb(size)} of JSON")
        rows = [("side", "time", "vs ours", "peak memory", "peak/JSON", "events")]
        for side in sides:
            r = summary[side]
            rows.append((LABELS[side], f"{r['seconds']:.2f} s",
                         f"{r['seconds'] / ours['seconds']:.1f}x" if ours else "-",
                         mb(r["peak"]), f"{r['peak'] / size:.2f}x", f"{r['events']:,}" if r["events"] is not None else "-"))
        _print_table(rows)
        print()
    if "ours" not in sides:
        return 0
    print("targets: peak at most 3x the JSON, at least 10x faster than HTA's load, faster than json.load")
    rows = [("file", "layout", "JSON", "ours", "processes", "HTA/ours", "json.load/ours", "peak/JSON", "met")]
    all_met = True
    for layout, path, size, summary in results:
        o = summary["ours"]
        hta = summary.get("hta", {}).get("seconds")
        js = summary.get("json", {}).get("seconds")
        met = o["peak"] <= 3 * size and (hta is None or hta >= 10 * o["seconds"]) and (js is None or js > o["seconds"])
        all_met &= met
        rows.append((path.name[:40], layout, mb(size), f"{o['seconds']:.2f} s", str(o["extra"].get("processes", 1)),
                     f"{hta / o['seconds']:.1f}x" if hta else "-", f"{js / o['seconds']:.1f}x" if js else "-",
                     f"{o['peak'] / size:.2f}x", "yes" if met else "NO"))
    _print_table(rows)
    print(f"our parser: {results[0][3]['ours']['extra']['parser']}")
    if "roofline" in sides:
        # the roofline's own cost (the ops' shapes come from the reader's one pass), apart
        rows = [("file", "read only", "read + summary", "roofline alone", "read + summary + roofline", "its peak/JSON",
                 "groups", "sized")]
        for layout, path, size, summary in results:
            r = summary["roofline"]
            rows.append((path.name[:40], f"{summary['read']['seconds']:.2f} s" if "read" in summary else "-",
                         f"{summary['ours']['seconds']:.2f} s", f"{r['roofline_seconds']:.2f} s",
                         f"{r['seconds']:.2f} s", f"{r['peak'] / size:.2f}x", str(r["extra"]["points"]),
                         f"{r['extra']['sized_share']:.0%}"))
        _print_table(rows)
        sys.path.insert(0, str(ROOT))
        from helpers.facts.roofline import roofline
        from helpers.reader.trace import read_trace

        ref = read_trace(TORCH_SOURCE)
        t1 = time.perf_counter()
        roofline(ref)
        print(f"roofline alone on the reference trace {TORCH_SOURCE.name} ({mb(TORCH_SOURCE.stat().st_size)}): "
              f"{time.perf_counter() - t1:.3f} s (in this process, one run)")
    if {"summarize", "hta"} <= set(sides):
        # issue 34's targets for the whole commands: summarize at least 5x quicker than HTA's load on HTA's gzip
        # trace and 10x on torch's layout; what summarize holds (read + summary + roofline) under 1.5x the JSON
        print("\ncommands, as a user runs them (a fresh interpreter each; time and peak of the whole process):")
        rows = [("file", "layout", "JSON", "HTA load", "summarize", "HTA/summarize", "diagnose", "HTA/diagnose",
                 "process peak", "summarize's growth/JSON", "met")]
        for layout, path, size, summary in results:
            hta, sm = summary["hta"]["seconds"], summary["summarize"]["seconds"]
            dg = summary.get("diagnose", {}).get("seconds")
            growth = summary["roofline"]["peak"] / size if "roofline" in summary else None
            want = 5 if layout == "HTA test data" else 10
            met = hta >= want * sm and (growth is None or growth <= 1.5)
            all_met &= met
            rows.append((path.name[:40], layout, mb(size), f"{hta:.2f} s", f"{sm:.2f} s", f"{hta / sm:.1f}x",
                         f"{dg:.2f} s" if dg else "-", f"{hta / dg:.1f}x" if dg else "-",
                         mb(summary["summarize"]["peak"]), f"{growth:.2f}x" if growth is not None else "-",
                         "yes" if met else "NO"))
        _print_table(rows)
    if not all(s["reset"] for *_, summary in results for s in summary.values()):
        print("note: the peak counter could not be reset, so peaks may include what the imports took")
    print("targets:", "met on every file" if all_met else "NOT met")
    return 0 if all_met else 3


def _installed(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(dist)
        return True
    except PackageNotFoundError:
        return False


if __name__ == "__main__":
    sys.exit(main())
