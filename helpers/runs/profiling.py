"""Profile a workload the way the article does, or fetch its recording: the notebooks' one entry point.

:func:`profile` runs live on this GPU (or on the CPU, :mod:`helpers.runs.runner`)
or, in recorded mode, returns the reference set's trace of the same scenario
(:mod:`helpers.runs.reference`). Either way you get a :class:`ProfileRun` with the
table, the path and the parsed trace. :func:`profile_model` does the same for
your own model.

``Schedule``, ``ARTICLE``, ``tag_for`` and ``native_log_filter`` are here too,
for the notebooks that show them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from . import runner
from ..facts import Summary, gpu_time_per_call, ops_per_call, per_call_us, steady_spans, summarize
from ..facts.measure import Spread
from .mode import ModeError, environment
from .reference import ReferenceSet, reference_set
from .runner import native_log_filter
from .stopwatch import phase
from .tags import ARTICLE, Schedule, scenario_key, slug, tag_for
from .timing import Timing
from ..reader.trace import Trace, read_trace
from .workload import Workload, check_fits, custom, fit, pick_dtype

__all__ = ["ARTICLE", "ProfileRun", "Schedule", "native_log_filter", "profile", "profile_model", "recorded",
           "tag_for"]


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
        with phase("read trace", self.tag):
            return read_trace(self.trace_path)

    @cached_property
    def summary(self) -> Summary:
        return summarize(self.trace)

    @cached_property
    def timing(self) -> Timing | None:
        """The same call timed without the profiler (recorded beside the trace), or None."""
        return Timing.load(self.trace_path)

    @property
    def peak_allocated(self) -> int | None:
        """``torch.cuda.max_memory_allocated()`` over the recorded steps, when the run profiled memory."""
        return Timing.measured(self.trace_path).get("max_memory_allocated")

    @property
    def cpu_per_call_us(self) -> float | None:
        """CPU time of one call in the trace: the median span of the workload's label over the steady steps."""
        return per_call_us(self.trace, self.workload.label)

    @property
    def cpu_per_call(self) -> Spread:
        """The label's spans over the steady steps (every recorded step but the first), as a spread."""
        return Spread.of(steady_spans(self.trace, self.workload.label))

    @property
    def ops_per_call(self) -> float | None:
        """ATen ops (all levels) one call dispatches, averaged over the recorded calls."""
        return ops_per_call(self.trace, self.workload.label)

    @property
    def gpu_per_call_us(self) -> float | None:
        """GPU time (kernels, copies, fills) one call launched, averaged over the recorded calls."""
        return gpu_time_per_call(self.trace, self.workload.label)

    def __repr__(self) -> str:
        return f"<ProfileRun {self.tag} ({self.mode}, {self.device})>"


def profile(w: Workload, *, warm: bool = False, compile: bool = False, compile_mode: str | None = None,
            schedule: Schedule = ARTICLE, on: str = "auto", out_dir: str | os.PathLike | None = None,
            step_down: bool = True, threads: int | None = 1, timed: bool = True) -> ProfileRun:
    """Profile a workload: live on this GPU, live on the CPU, or from the reference set.

    ``on="auto"`` follows the mode (live with a GPU, recorded without);
    ``on="cpu"`` always runs live on this machine's CPU (the CPU-side lessons
    do that in either mode), on ``threads`` of torch's threads (one by
    default: a small op spread over every core waits for the slowest, and on
    a laptop doing other work that one is often busy; ``None`` keeps torch's
    setting). A workload too large for the free GPU memory steps down to one
    that fits, with a note, unless ``step_down=False``. A warm run made here is first timed without the
    profiler (:mod:`helpers.runs.timing`), unless ``timed=False``: for a run whose trace is all the lesson
    reads, that timing is time spent for nothing (on one CPU thread, seconds for a large multiply).
    """
    if on not in ("auto", "cpu", "gpu"):
        raise ValueError("on= must be 'auto', 'cpu' or 'gpu'")
    if on == "cpu":
        import torch

        before = torch.get_num_threads()
        if threads:
            torch.set_num_threads(threads)
        try:
            return _profile_here(w, "cpu", warm, compile, compile_mode, schedule, out_dir, step_down, timed)
        finally:
            torch.set_num_threads(before)
    if environment().live:
        return _profile_here(w, "cuda", warm, compile, compile_mode, schedule, out_dir, step_down, timed)
    if on == "gpu":
        raise ModeError("This cell needs a CUDA GPU, and torch sees none here.")
    return recorded(w, warm=warm, compile=compile, compile_mode=compile_mode, schedule=schedule)


def _profile_here(w, device, warm, compile, compile_mode, schedule, out_dir, step_down, timed=True) -> ProfileRun:
    notes: list[str] = []
    if device == "cuda":
        e = environment()
        dtype, name = pick_dtype("cuda", e.capability), e.gpu or "cuda"
        if step_down:
            w, note = fit(w, dtype)
            if note:
                notes.append(note)
                print(note)  # the learner must see that the size changed
        else:
            check_fits(w, dtype)
    else:
        dtype, name = "fp32", "cpu"
    out = Path(out_dir) if out_dir else runner.RUNS / slug(name)
    fresh = device == "cuda" and not warm
    run = runner.run_fresh if fresh else runner.run_live
    extra = {} if fresh or timed else {"timing": None}  # a cold run in a fresh process is never timed
    kind = "cold run (fresh process)" if fresh else f"{'warm' if warm else 'cold'} run on the {device.upper()}"
    with phase(kind, f"{w.label}{' compiled' if compile else ''}"):
        table, path, secs = run(w, device, dtype, warm=warm, compile=compile, compile_mode=compile_mode,
                                schedule=schedule, out_dir=out, **extra)
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
    device = (environment().gpu or "cuda") if cuda else "cpu"
    dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(tensors[0].dtype, "fp32") if tensors else "fp32"
    out = Path(out_dir) if out_dir else runner.RUNS / slug(device)
    tag = f"{name}_{dtype}_{'warm' if warm else 'cold'}_eager"
    t0 = time.perf_counter()
    with phase(f"{'warm' if warm else 'cold'} run on the {'GPU' if cuda else 'CPU'}", name):
        table, path = runner.profile_callable(model, tuple(inputs), label=name, tag=tag, out_dir=out, cuda=cuda,
                                              warm=warm, schedule=schedule, no_grad=no_grad)
    return ProfileRun(tag, "live" if cuda else "cpu", device, dtype, custom(name, no_grad), warm, False, None,
                      schedule, table, path, f"recorded now on {device}", [], time.perf_counter() - t0)


def recorded(w: Workload, *, warm: bool = False, compile: bool = False, compile_mode: str | None = None,
             schedule: Schedule = ARTICLE, reference: ReferenceSet | None = None) -> ProfileRun:
    """The reference set's recording of this scenario (:meth:`ReferenceSet.recording` says when there is none)."""
    ref = reference or reference_set()
    entry = ref.recording(scenario_key(w, warm, compile, schedule, compile_mode))
    return ProfileRun(entry["tag"], "recorded", ref.gpu, entry["dtype"], w, warm, compile, compile_mode, schedule,
                      (ref.path / entry["table"]).read_text(), ref.path / entry["trace"],
                      f"recorded on {ref.short()}")
