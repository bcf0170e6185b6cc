"""The live profiling loop: a workload (or any callable) under ``torch.profiler``, the article's way.

Warm-up calls if asked, then ``wait + warmup + active`` steps, each inside
``record_function(label)``; writes the table (``<tag>.txt``, sorted by device
time) and the Chrome trace (``<tag>.json``). A *cold* run goes to a fresh
Python process (:func:`run_fresh`), because a process that has touched the
GPU before is no longer cold.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from .. import ROOT
from .stopwatch import phase, spawn_env, started_by_parent
from .tags import ARTICLE, Schedule, tag_for
from .timing import note_profiled, timing_path, unprofiled, write as write_measured
from .workload import BackendUnavailable, NotEnoughMemory, Workload, WorkloadError

#: where live runs write, one folder per device
RUNS = ROOT / "traces" / "runs"


@contextlib.contextmanager
def native_log_filter():
    """Hide Kineto's start/stop log lines, which it writes straight to file descriptor 2.

    Some torch builds print ``USDT: ... profiler_start`` lines around every
    profiled region; in a notebook they land in the cell's output. Anything
    else written to fd 2 meanwhile is passed through. The profiler's warning
    that it "clears events at the end of each cycle" (torch 2.11 gives it for
    every schedule; one cycle is all the series records) is left out too.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*[Pp]rofiler clears events at the end of each cycle")
        with _fd2_filtered():
            yield


@contextlib.contextmanager
def _fd2_filtered():
    try:
        saved = os.dup(2)
    except OSError:  # no usable fd 2 (some hosted kernels): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            keep = [ln for ln in tmp.read().splitlines(keepends=True)
                    if not ln.startswith((b"USDT:", b"INFO:"))]
            if keep:
                os.write(2, b"".join(keep))


def run_live(w: Workload, device: str, dtype: str, *, warm: bool, compile: bool,
             compile_mode: str | None, schedule: Schedule, out_dir: Path,
             timing: bool | None = True) -> tuple[str, Path, float]:
    """Profile ``w`` in this process; returns the table, the trace path and the seconds taken.

    ``timing=False`` leaves the unprofiled timing to someone else (the recorder times in a fresh process);
    ``timing=None`` wants none (the lesson reads only the trace). Then, and for a workload whose kind is not timed
    (``Kind.timed``), the run is not timed and a timing an earlier run of the tag left is removed.
    """
    with phase("import torch"):
        import torch

    t_start = time.perf_counter()
    with phase("build", w.label):  # in a fresh process this is where the CUDA context starts
        fn, args = w.build(device, dtype)
    if compile:
        torch._dynamo.reset()  # each scenario gets its own static-shape graph, as in the article
        fn = torch.compile(fn, mode=compile_mode)
    tag = tag_for(w, dtype, warm, compile, schedule, compile_mode)
    if timing is None or not w.timed:
        timing = False
        timing_path(out_dir / f"{tag}.json").unlink(missing_ok=True)
    table, path = profile_callable(fn, args, label=w.label, tag=tag, out_dir=out_dir, cuda=device == "cuda",
                                   warm=warm, schedule=schedule, no_grad=w.no_grad, memory=bool(w.p.get("memory")),
                                   timing=timing, stack=w.with_stack)
    return table, path, time.perf_counter() - t_start


def profile_callable(fn, args: tuple, *, label: str, tag: str, out_dir: Path, cuda: bool, warm: bool = True,
                     schedule: Schedule = ARTICLE, no_grad: bool = True, memory: bool = False,
                     timing: bool = True, stack: bool = False) -> tuple[str, Path]:
    """The article's profiling loop around any callable; writes ``<tag>.txt``, ``<tag>.json`` and beside them
    ``<tag>.timing.json``: for a warm run (and ``timing``), the same call timed without the profiler, before it
    is profiled (:mod:`helpers.runs.timing` says why); with ``stack``, each op's Python stack (``with_stack``) and a
    second table grouped by it; with ``memory``, the allocator's peaks over the recorded steps
    (``torch.cuda.max_memory_allocated``), to set beside what the trace's memory events say.
    """
    import torch
    from torch.profiler import ProfilerActivity, record_function

    def step():
        with record_function(label):
            return fn(*args)

    grad = torch.no_grad() if no_grad else contextlib.nullcontext()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    peaks: dict[str, int] = {}
    with grad:
        plain = None
        if warm:  # the article's --warmup: three untimed calls, then wait for the GPU
            with phase("warm-up calls", tag):  # a compiled call compiles here
                for _ in range(3):
                    fn(*args)
                if cuda:
                    torch.cuda.synchronize()
            if timing:  # before the profiler runs: afterwards the process carries its cost
                with phase("unprofiled timing", tag):
                    plain = unprofiled(fn, args, device="cuda" if cuda else "cpu")
        with warnings.catch_warnings():  # warmup=0 is what notebook 03 wants to show
            warnings.filterwarnings("ignore", message=".*won't be using warmup.*")
            sched = torch.profiler.schedule(wait=schedule.wait, warmup=schedule.warmup,
                                            active=schedule.active, repeat=1)
        # record_shapes: each op's Input Dims and types, from which the roofline sizes its kernels' work
        with phase("profiled steps", tag), native_log_filter(), torch.profiler.profile(activities=activities, schedule=sched,
                                                         profile_memory=memory, record_shapes=True,
                                                         with_stack=stack) as prof:
            first_active = schedule.wait + schedule.warmup

            def reset_peaks() -> None:  # the peak over the recorded steps only; outside them, not a wait inside one
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()

            if memory and cuda and first_active == 0:
                reset_peaks()
            for n in range(schedule.steps):
                step()
                if cuda and n + 1 == first_active:
                    # The GPU finishes the unrecorded steps' work before recording starts, so that no kernel
                    # launched before the window runs inside it without its launch (notebooks 02 and 04).
                    if memory:
                        reset_peaks()
                    else:
                        torch.cuda.synchronize()
                prof.step()
        note_profiled()
        if memory and cuda:
            peaks = {"max_memory_allocated": torch.cuda.max_memory_allocated(),
                     "max_memory_reserved": torch.cuda.max_memory_reserved()}
    with phase("table and export", tag):
        table, path = _write_out(prof, tag, out_dir, cuda, stack)
    if timing or peaks:
        if timing:  # a run that times itself replaces what an earlier run kept beside the trace
            timing_path(path).unlink(missing_ok=True)
        write_measured(path, **(plain.to_json() if plain else {}), **peaks)
    return table, path


def _write_out(prof, tag: str, out_dir: Path, cuda: bool, stack: bool) -> tuple[str, Path]:
    """The profiler's table (and, with stacks, the table by stack) and its Chrome trace, written to ``out_dir``."""
    sort = "cuda_time_total" if cuda else "cpu_time_total"
    table = prof.key_averages().table(sort_by=sort, row_limit=15)
    if stack:  # the same ops grouped by the Python lines that called them (group_by_stack_n)
        table += ("\n\nGrouped by the innermost five Python frames (group_by_stack_n=5):\n"
                  + prof.key_averages(group_by_stack_n=5).table(sort_by=sort, row_limit=10))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{tag}.json"
    prof.export_chrome_trace(str(path))
    (out_dir / f"{tag}.txt").write_text(table + "\n")
    return table, path


def _workload_error(kind: str | None, message: str) -> WorkloadError:
    """The WorkloadError a fresh process reported by its class name, raised again here as that class."""
    if kind == NotEnoughMemory.__name__:
        return NotEnoughMemory(message, None)
    return BackendUnavailable(message) if kind == BackendUnavailable.__name__ else WorkloadError(message)


def run_fresh(w: Workload, device: str, dtype: str, *, warm: bool, compile: bool,
              compile_mode: str | None, schedule: Schedule, out_dir: Path) -> tuple[str, Path, float]:
    """:func:`run_live` in a new Python process.

    A *cold* run means the process's first call: cuBLAS has no handle yet,
    kernels are not loaded. A notebook kernel (or the recorder) that has run
    anything on the GPU before is no longer cold, so cold runs get a process
    of their own.
    """
    spec = {"workload": {"kind": w.kind, "params": w.p, "label": w.label, "no_grad": w.no_grad},
            "device": device, "dtype": dtype, "warm": warm, "compile": compile, "compile_mode": compile_mode,
            "schedule": [schedule.wait, schedule.warmup, schedule.active], "out_dir": str(out_dir)}
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "helpers.runs.runner", json.dumps(spec)], capture_output=True,
                          text=True, env=spawn_env(environ))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the fresh profiling process failed: {tail[0]}")
    res = json.loads(lines[-1])
    if "error" in res:
        raise _workload_error(res.get("type"), res["error"])
    return Path(res["table"]).read_text(), Path(res["trace"]), res["seconds"]


def _main(spec_json: str) -> None:
    started_by_parent("fresh process start-up", "interpreter and helpers")
    spec = json.loads(spec_json)
    wd = spec["workload"]
    w = Workload(wd["kind"], tuple(sorted(wd["params"].items())), wd["label"], wd["no_grad"])
    try:
        _table, path, secs = run_live(w, spec["device"], spec["dtype"], warm=spec["warm"], compile=spec["compile"],
                                      compile_mode=spec["compile_mode"], schedule=Schedule(*spec["schedule"]),
                                      out_dir=Path(spec["out_dir"]))
    except WorkloadError as e:
        print(json.dumps({"error": str(e), "type": type(e).__name__}))
        return
    print(json.dumps({"table": str(path.with_suffix(".txt")), "trace": str(path), "seconds": secs}))


if __name__ == "__main__":
    _main(sys.argv[1])
