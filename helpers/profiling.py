"""Run a workload under ``torch.profiler`` the way the article does, or fetch its recording.

:func:`profile` is the one call the notebooks make. Live, it optionally warms
up, runs ``wait + warmup + active`` steps under ``torch.profiler.profile``
with each step inside ``record_function(label)``, and writes the table
(``<tag>.txt``, sorted by device time) and the Chrome trace (``<tag>.json``).
Recorded, it returns the reference trace of the same scenario instead. Either
way you get a :class:`ProfileRun` with the table, the path and the parsed trace.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from . import env as _env
from .facts import Summary, summarize
from .trace import Trace, read_trace
from .workload import BackendUnavailable, Workload, check_fits, fit, pick_dtype


@dataclass(frozen=True)
class Schedule:
    """``torch.profiler.schedule(wait, warmup, active, repeat=1)``."""

    wait: int = 1
    warmup: int = 1
    active: int = 3

    @property
    def steps(self) -> int:
        return self.wait + self.warmup + self.active

    @property
    def first_recorded(self) -> int:
        """The number of the first ``ProfilerStep#N`` in the trace."""
        return self.wait + self.warmup

    def __str__(self) -> str:
        return f"wait={self.wait}, warmup={self.warmup}, active={self.active}"


#: the article's schedule
ARTICLE = Schedule(1, 1, 3)


def tag_for(w: Workload, dtype: str, warm: bool, compile: bool, schedule: Schedule = ARTICLE,
            compile_mode: str | None = None) -> str:
    """The article's file naming ``{size}_{dtype}_{cold|warm}_{eager|compile}``, plus what differs.

    A schedule other than the article's adds ``_s<wait>-<warmup>-<active>``;
    a compile mode adds ``-<mode>``.
    """
    tag = f"{w.stem}_{dtype}_{'warm' if warm else 'cold'}_{'compile' if compile else 'eager'}"
    if compile and compile_mode:
        tag += f"-{compile_mode}"
    if schedule != ARTICLE:
        tag += f"_s{schedule.wait}-{schedule.warmup}-{schedule.active}"
    return tag


def scenario_key(w: Workload, warm: bool, compile: bool, schedule: Schedule = ARTICLE,
                 compile_mode: str | None = None) -> str:
    """The tag without its dtype: how recorded mode finds the same scenario on any GPU's set."""
    return tag_for(w, "*", warm, compile, schedule, compile_mode)


@dataclass
class ProfileRun:
    """What one profiled run left behind."""

    tag: str
    mode: str  # "live" (this GPU), "cpu" (this CPU) or "recorded" (a reference set)
    device: str  # the GPU's name, or "cpu"
    dtype: str
    workload: Workload
    warm: bool
    compile: bool
    compile_mode: str | None
    schedule: Schedule
    table: str
    trace_path: Path
    source: str  # where the trace comes from, in words
    notes: list[str] = field(default_factory=list)
    seconds: float | None = None

    @cached_property
    def trace(self) -> Trace:
        return read_trace(self.trace_path)

    @cached_property
    def summary(self) -> Summary:
        return summarize(self.trace)

    @property
    def live(self) -> bool:
        return self.mode != "recorded"

    def totals(self) -> dict[str, str]:
        """The table's closing lines ('Self CPU time total: 2.314ms', ...), by name."""
        out = {}
        for line in self.table.splitlines():
            if " time total:" in line:
                k, v = line.split(":", 1)
                out[k.strip()] = v.strip()
        return out

    def __repr__(self) -> str:
        return f"<ProfileRun {self.tag} ({self.mode}, {self.device})>"


@contextlib.contextmanager
def native_log_filter():
    """Hide Kineto's start/stop log lines, which it writes straight to file descriptor 2.

    Some torch builds print ``USDT: ... profiler_start`` lines around every
    profiled region; in a notebook they land in the cell's output. Anything
    else written to fd 2 meanwhile is passed through.
    """
    import tempfile

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


def _sort_key(cuda: bool) -> str:
    return "cuda_time_total" if cuda else "cpu_time_total"


def run_live(w: Workload, device: str, dtype: str, *, warm: bool, compile: bool,
             compile_mode: str | None, schedule: Schedule, out_dir: Path) -> tuple[str, Path, float]:
    """Profile ``w`` on this machine; returns the table, the trace path and the seconds taken."""
    import torch

    t_start = time.perf_counter()
    fn, args = w.build(device, dtype)
    if compile:
        torch._dynamo.reset()  # each scenario gets its own static-shape graph, as in the article
        fn = torch.compile(fn, mode=compile_mode)
    tag = tag_for(w, dtype, warm, compile, schedule, compile_mode)
    table, path = profile_callable(fn, args, label=w.label, tag=tag, out_dir=out_dir, cuda=device == "cuda",
                                   warm=warm, schedule=schedule, no_grad=w.no_grad)
    return table, path, time.perf_counter() - t_start


def profile_callable(fn, args: tuple, *, label: str, tag: str, out_dir: Path, cuda: bool, warm: bool = True,
                     schedule: Schedule = ARTICLE, no_grad: bool = True) -> tuple[str, Path]:
    """The article's profiling loop around any callable; writes ``<tag>.txt`` and ``<tag>.json``."""
    import torch
    from torch.profiler import ProfilerActivity, record_function

    def step():
        with record_function(label):
            return fn(*args)

    grad = torch.no_grad() if no_grad else contextlib.nullcontext()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with grad:
        if warm:  # the article's --warmup: three untimed calls, then wait for the GPU
            for _ in range(3):
                fn(*args)
            if cuda:
                torch.cuda.synchronize()
        with warnings.catch_warnings():  # warmup=0 is what notebook 03 wants to show
            warnings.filterwarnings("ignore", message=".*won't be using warmup.*")
            sched = torch.profiler.schedule(wait=schedule.wait, warmup=schedule.warmup,
                                            active=schedule.active, repeat=1)
        with native_log_filter(), torch.profiler.profile(activities=activities, schedule=sched) as prof:
            for _ in range(schedule.steps):
                step()
                prof.step()
    table = prof.key_averages().table(sort_by=_sort_key(cuda), row_limit=15)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{tag}.json"
    prof.export_chrome_trace(str(path))
    (out_dir / f"{tag}.txt").write_text(table + "\n")
    return table, path


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
    root = str(Path(__file__).resolve().parent.parent)
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "helpers.profiling", json.dumps(spec)], capture_output=True,
                          text=True, env=environ)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the fresh profiling process failed: {tail[0]}")
    res = json.loads(lines[-1])
    if "error" in res:
        raise BackendUnavailable(res["error"]) if res.get("unavailable") else RuntimeError(res["error"])
    return Path(res["table"]).read_text(), Path(res["trace"]), res["seconds"]


def _main(spec_json: str) -> None:
    from .workload import WorkloadError

    spec = json.loads(spec_json)
    wd = spec["workload"]
    w = Workload(wd["kind"], tuple(sorted(wd["params"].items())), wd["label"], wd["no_grad"])
    try:
        _table, path, secs = run_live(w, spec["device"], spec["dtype"], warm=spec["warm"], compile=spec["compile"],
                                      compile_mode=spec["compile_mode"], schedule=Schedule(*spec["schedule"]),
                                      out_dir=Path(spec["out_dir"]))
    except WorkloadError as e:
        print(json.dumps({"error": str(e), "unavailable": isinstance(e, BackendUnavailable)}))
        return
    print(json.dumps({"table": str(path.with_suffix(".txt")), "trace": str(path), "seconds": secs}))


def profile(w: Workload, *, warm: bool = False, compile: bool = False, compile_mode: str | None = None,
            schedule: Schedule = ARTICLE, on: str = "auto", out_dir: str | os.PathLike | None = None,
            step_down: bool = True) -> ProfileRun:
    """Profile a workload: live on this GPU, live on the CPU, or from the reference set.

    ``on="auto"`` follows the mode (live with a GPU, recorded without);
    ``on="cpu"`` always runs live on this machine's CPU (the CPU-side lessons
    do that in either mode). A workload too large for the free GPU memory
    steps down to one that fits, with a note, unless ``step_down=False``.
    """
    if on not in ("auto", "cpu", "gpu"):
        raise ValueError("on= must be 'auto', 'cpu' or 'gpu'")
    if on == "cpu":
        return _profile_here(w, "cpu", warm, compile, compile_mode, schedule, out_dir, step_down)
    e = _env.environment()
    if e.live:
        return _profile_here(w, "cuda", warm, compile, compile_mode, schedule, out_dir, step_down)
    if on == "gpu":
        raise _env.ModeError("This cell needs a CUDA GPU, and torch sees none here.")
    return recorded(w, warm=warm, compile=compile, compile_mode=compile_mode, schedule=schedule)


def _profile_here(w, device, warm, compile, compile_mode, schedule, out_dir, step_down) -> ProfileRun:
    notes: list[str] = []
    if device == "cuda":
        e = _env.environment()
        dtype = pick_dtype("cuda", e.capability)
        if step_down:
            w, note = fit(w, dtype)
            if note:
                notes.append(note)
                print(note)  # the learner must see that the size changed
        else:
            check_fits(w, dtype)
        name = e.gpu or "cuda"
        default_dir = _env.RUNS / _env.slug(name)
    else:
        dtype, name = "fp32", "cpu"
        default_dir = _env.RUNS / "cpu"
    out = Path(out_dir) if out_dir else default_dir
    runner = run_fresh if device == "cuda" and not warm else run_live
    table, path, secs = runner(w, device, dtype, warm=warm, compile=compile, compile_mode=compile_mode,
                                 schedule=schedule, out_dir=out)
    return ProfileRun(path.stem, "live" if device == "cuda" else "cpu", name, dtype, w, warm, compile,
                      compile_mode, schedule, table, path, f"recorded now on {name}", notes, secs)


def profile_model(model, inputs: tuple, *, name: str = "my_model", warm: bool = True,
                  schedule: Schedule = ARTICLE, no_grad: bool = True, out_dir: str | os.PathLike | None = None
                  ) -> ProfileRun:
    """Profile your own model (or any callable) the same way, on the device its inputs live on.

    There is no recording of your model, so this always runs live: on the GPU
    when the inputs are CUDA tensors, on the CPU otherwise.
    """
    import torch

    tensors = [a for a in inputs if isinstance(a, torch.Tensor)]
    cuda = bool(tensors) and tensors[0].is_cuda
    device = (_env.environment().gpu or "cuda") if cuda else "cpu"
    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(tensors[0].dtype, "fp32") if tensors else "fp32"
    out = Path(out_dir) if out_dir else _env.RUNS / _env.slug(device)
    tag = f"{name}_{dtype}_{'warm' if warm else 'cold'}_eager"
    t0 = time.perf_counter()
    table, path = profile_callable(model, tuple(inputs), label=name, tag=tag, out_dir=out, cuda=cuda, warm=warm,
                                   schedule=schedule, no_grad=no_grad)
    from .workload import _make

    w = _make("custom", name, no_grad, name=name)
    return ProfileRun(tag, "live" if cuda else "cpu", device, dtype, w, warm, False, None, schedule, table, path,
                      f"recorded now on {device}", [], time.perf_counter() - t0)


def recorded(w: Workload, *, warm: bool = False, compile: bool = False, compile_mode: str | None = None,
             schedule: Schedule = ARTICLE, reference: _env.ReferenceSet | None = None) -> ProfileRun:
    """The reference set's recording of this scenario."""
    ref = reference or _env.reference_set()
    key = scenario_key(w, warm, compile, schedule, compile_mode)
    entry = ref.manifest.get("scenarios", {}).get(key)
    if entry is None:
        have = ", ".join(sorted(ref.manifest.get("scenarios", {})))
        raise _env.ModeError(f"The reference set {ref.path.name} has no recording of {key}. "
                             f"Record it on a GPU with `python -m helpers.record` (recorded: {have}).")
    if entry.get("status") != "ok":
        raise BackendUnavailable(f"{entry.get('reason', 'not recorded')} (on {ref.gpu}, where the set was recorded)")
    table_path = ref.path / entry["table"]
    return ProfileRun(entry["tag"], "recorded", ref.gpu, entry["dtype"], w, warm, compile, compile_mode, schedule,
                      table_path.read_text(), ref.path / entry["trace"], f"recorded on {ref.describe()}")


if __name__ == "__main__":
    _main(sys.argv[1])
