"""Record the reference traces of every scenario on this GPU.

    python -m helpers.runs.record                # all parts, into traces/reference/<gpu>/
    python -m helpers.runs.record --parts 1      # only the article's Part 1
    python -m helpers.runs.record --only 64_*    # scenarios whose key matches a pattern

Writes ``<tag>.json``, ``<tag>.txt`` and ``<tag>.timing.json`` (the same call
timed without the profiler) per scenario and a ``manifest.json``
naming the GPU, driver, torch, CUDA, cuDNN, the date and this command. Run it
on any GPU (a Colab A100, a T4...) to add a reference set for that GPU.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .reference import REFERENCE, BrokenManifest, read_manifest
from .runner import run_fresh, run_live
from .scenarios import all_scenarios
from .tags import slug, tag_for
from .workload import WorkloadError, check_fits, pick_dtype


def _driver_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict:
    import torch

    p = torch.cuda.get_device_properties(0)
    try:
        import triton

        triton_v = triton.__version__
    except ImportError:
        triton_v = None
    return {
        "gpu": {"name": p.name, "capability": f"{p.major}.{p.minor}", "memory_gib": round(p.total_memory / 2**30, 1),
                "sm_count": p.multi_processor_count},
        "driver": _driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": str(torch.backends.cudnn.version()),
        "triton": triton_v,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _time_unprofiled(scenarios, dtype: str, out: Path) -> None:
    """Time every warm scenario without the profiler, in a fresh process that profiles nothing.

    The profiler leaves a cost behind in a process once it has run (:mod:`helpers.runs.timing`), so the timings
    kept beside the reference traces come from a process of their own, before any profiling.
    """
    specs = [{"workload": {"kind": s.workload.kind, "params": s.workload.p, "label": s.workload.label,
                           "no_grad": s.workload.no_grad},
              "device": "cuda", "dtype": dtype, "compile": s.compile, "compile_mode": s.compile_mode, "out_dir": str(out),
              "tag": tag_for(s.workload, dtype, s.warm, s.compile, s.schedule, s.compile_mode)} for s in scenarios]
    if not specs:
        return
    for spec in specs:  # what an earlier recording kept beside the trace is replaced
        (out / f"{spec['tag']}.timing.json").unlink(missing_ok=True)
    _fresh("timing", [json.dumps(specs)], f"timing {len(specs)} warm scenarios without the profiler")


#: the package of the modules _fresh runs by name (timing, comparisons, idle_gpu)
FRESH_PACKAGE = "helpers.runs"
#: every module the recorder runs in a process of its own
FRESH_MODULES = ("timing", "comparisons", "idle_gpu")


def _fresh(module: str, args: list[str], what: str) -> None:
    """Run ``python -m helpers.runs.<module> ARGS`` in a process of its own, before this one profiles anything."""
    print(f"{what}, in a fresh process ...", flush=True)
    root = str(Path(__file__).resolve().parent.parent)
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", f"{FRESH_PACKAGE}.{module}", *args], text=True, env=environ)
    if proc.returncode != 0:
        print(f"record: {what} failed (helpers.{module}); the set is recorded without it.", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.runs.record", description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="1,2,3,4,5,6", help="comma-separated parts to record (default: all)")
    ap.add_argument("--only", default=None, help="record only scenario keys matching this pattern")
    ap.add_argument("--out", default=None, help="folder (default: traces/reference/<gpu>)")
    ap.add_argument("--no-comparisons", action="store_true",
                    help="skip the interleaved comparisons and the idle-GPU experiment")
    a = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("record: no CUDA GPU is visible; reference traces must come from a real GPU.", file=sys.stderr)
        return 2
    info = _versions()
    out = Path(a.out) if a.out else REFERENCE / slug(info["gpu"]["name"])
    out.mkdir(parents=True, exist_ok=True)
    mf_path = out / "manifest.json"
    try:  # the scenarios recorded before stay in the manifest
        old = read_manifest(mf_path).get("scenarios", {}) if mf_path.exists() else {}
    except BrokenManifest as e:
        print(f"record: {e}; restore it (git checkout -- {mf_path}) or move it aside, then run again.",
              file=sys.stderr)
        return 2
    dtype = pick_dtype("cuda")
    parts = tuple(int(x) for x in a.parts.split(","))
    todo = [s for s in all_scenarios(parts) if not a.only or fnmatch.fnmatch(s.key, a.only)]
    scenarios = dict(old)
    t_all = time.perf_counter()
    _time_unprofiled([s for s in todo if s.warm and s.workload.timed], dtype, out)
    if not a.no_comparisons and not a.only:
        from .comparisons import GROUPS

        _fresh("comparisons", [str(out)], f"timing {len(GROUPS)} comparisons in turn, without the profiler")
        _fresh("idle_gpu", [str(out), dtype], "the idle-GPU experiment (notebook 07)")
    for n, s in enumerate(todo, 1):
        tag = tag_for(s.workload, dtype, s.warm, s.compile, s.schedule, s.compile_mode)
        entry = {"tag": tag, "trace": f"{tag}.json", "table": f"{tag}.txt", "timing": f"{tag}.timing.json",
                 "dtype": dtype, "part": s.part,
                 "recorded": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                 "workload": {"kind": s.workload.kind, "params": s.workload.p, "label": s.workload.label,
                              "description": s.workload.description},
                 "warm": s.warm, "compile": s.compile, "compile_mode": s.compile_mode,
                 "schedule": [s.schedule.wait, s.schedule.warmup, s.schedule.active]}
        print(f"[{n}/{len(todo)}] {tag} ...", end=" ", flush=True)
        try:
            check_fits(s.workload, dtype)
            if s.warm:  # timed already, in a process that had not profiled
                _, _, secs = run_live(s.workload, "cuda", dtype, warm=True, compile=s.compile,
                                      compile_mode=s.compile_mode, schedule=s.schedule, out_dir=out, timing=False)
            else:  # a cold run is a process's first call
                _, _, secs = run_fresh(s.workload, "cuda", dtype, warm=False, compile=s.compile,
                                       compile_mode=s.compile_mode, schedule=s.schedule, out_dir=out)
            entry.update(status="ok", seconds=round(secs, 2))
            print(f"{secs:.1f} s", flush=True)
        except WorkloadError as e:  # an SDPA backend this GPU lacks, a size that does not fit
            entry.update(status="unavailable", reason=str(e))
            print(f"unavailable: {e}", flush=True)
        scenarios[s.key] = entry
        torch.cuda.empty_cache()
    manifest = {**info, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "command": "python -m helpers.runs.record " + " ".join(argv if argv is not None else sys.argv[1:]),
                "seconds": round(time.perf_counter() - t_all, 1), "scenarios": dict(sorted(scenarios.items()))}
    mf_path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(todo)} scenarios and {mf_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
