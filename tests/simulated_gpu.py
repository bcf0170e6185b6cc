"""Run a notebook headless as if this machine had another GPU (a T4, an L4, an A100), with no GPU at all.

The series decides what to do from what torch says about the GPU: live mode,
the dtype (bf16 from sm_80 on, fp16 below), the SDPA backends, the datasheet
figures. This harness makes torch say it, in the notebook's own kernel, before
any cell runs (an IPython startup file in a temporary ``IPYTHONDIR``):

* ``torch.cuda`` reports the simulated GPU (name, compute capability, memory,
  SM count), so :func:`helpers.runs.mode.environment` says *live*;
* every profiled GPU run (:func:`helpers.runs.runner.run_live` / ``run_fresh`` on
  ``"cuda"``) is served from the recorded reference set: the recording of the
  same workload, copied under the tag the run asked for, with its dtype words
  rewritten to the simulated dtype (``bf16`` -> ``fp16``, ``bfloat16`` ->
  ``float16``, ``c10::BFloat16`` -> ``c10::Half`` ...). So on a T4 any
  ``bf16`` left in a notebook's output comes from the notebook's own prose or
  code, not from a trace;
* an SDPA backend the simulated GPU lacks raises
  :class:`helpers.runs.workload.BackendUnavailable`, as the real probe does;
* what a notebook runs for real on ``"cuda"`` (notebook 01's hand-written
  profiling loop, notebook 11's own model) runs on this CPU instead: tensor
  factories, ``.to()`` and ``.cuda()`` map a CUDA device to the CPU, and the
  profiler drops its CUDA activity (there is no GPU to trace);
* every question (:func:`helpers.lesson.widgets.ask`) is logged with its text, its
  choices and the verdicts its reveal gave, beside the journal.

What is *not* simulated: the kernels. A served trace holds the reference
GPU's kernels, timings and ``deviceProperties`` (an H200's sm_90 kernels
would make no sense against a T4's per-SM limits), so the verdicts are the
reference GPU's; what the simulation tests is whether every question can be
asked, answered and worded for the simulated GPU.

``python tests/simulated_gpu.py table [NOTEBOOK ...]`` runs the notebooks on
every simulated GPU and in recorded mode, and prints which questions differ.
"""

from __future__ import annotations

import html
import json
import os
import queue
import re
import sys
import threading
import tempfile
import time
import warnings
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def notebook_paths() -> list[Path]:
    """Every notebook of the series, in order: new ones are picked up by the glob."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@dataclass(frozen=True)
class SimulatedGPU:
    """What torch reports about one GPU; the figures are what torch prints on the real card."""

    key: str  # short name for test ids: "T4"
    name: str  # torch.cuda.get_device_properties(0).name
    capability: tuple[int, int]
    memory_gib: float  # total_memory / 2**30
    sm_count: int

    @property
    def dtype(self) -> str:
        """The series' dtype on this GPU (helpers.runs.workload.pick_dtype's rule)."""
        from helpers.runs.workload import pick_dtype

        return pick_dtype("cuda", self.capability)


#: the GPUs a Colab learner meets (Colab's A100 is the 40 GB card; the article's was the 80 GB one)
GPUS: dict[str, SimulatedGPU] = {g.key: g for g in (
    SimulatedGPU("T4", "Tesla T4", (7, 5), 14.6, 40),
    SimulatedGPU("L4", "NVIDIA L4", (8, 9), 22.2, 58),
    SimulatedGPU("A100", "NVIDIA A100-SXM4-40GB", (8, 0), 39.6, 108),
)}


# --- SDPA backends ------------------------------------------------------------------------------

# PyTorch's rules, from aten/src/ATen/native/transformers/cuda/sdp_utils.cpp (pytorch/pytorch, read at
# commit 001f694aef6f922b4fdf6d27d59162d27bf3df58):
# * check_flash_attention_hardware_support: flash only on check_sm_version<sm80, sm121> (FlashAttention-2
#   needs sm_80 or newer), so not on a T4 (sm_75); an L4 (sm_89) and an A100 (sm_80) pass. The sm_86-sm_89
#   restriction in check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120 only applies with
#   gradients and head_dim > 192: the series' attention runs without gradients at head_dim 64.
# * check_cudnn_hardware_support: cuDNN attention also only on [sm80, sm121] ("cuDNN MHA only supports gpu
#   architectures in the range [sm80, sm121]"), so not on a T4; on sm_89 its head_dim limit is 128 (256
#   only on sm_90/sm_10x), and the series uses 64.
# * check_mem_efficient_hardware_support: memory-efficient attention on [sm50, sm121], in fp16 or fp32 below
#   sm_80: the T4 has it in the series' fp16.
# * math is always there.
# * priority_order: cuDNN goes first only where check_prefer_cudnn_attention says so (sm_90 / sm_10x with
#   cuDNN newer than 9.15); otherwise flash, then efficient, then math. That is what "auto" picks.
_SM80, _SM121, _SM50 = (8, 0), (12, 1), (5, 0)

_NO_BACKEND_REASON = {
    "flash": "Flash attention only supports gpu architectures in the range [sm80, sm121]. "
             "Attempting to run on a sm {major}.{minor} gpu.",
    "cudnn": "cuDNN MHA only supports gpu architectures in the range [sm80, sm121]. "
             "Attempting to run on a sm {major}.{minor} gpu.",
    "efficient": "Mem Efficient Attention only supports gpu architectures in the range [sm50, sm121]. "
                 "Attempting to run on a sm {major}.{minor} gpu.",
}


def sdpa_unavailable(backend: str, capability: tuple[int, int]) -> str | None:
    """Why PyTorch refuses an SDPA backend on this compute capability, or None when it runs."""
    lowest = {"flash": _SM80, "cudnn": _SM80, "efficient": _SM50}.get(backend)
    if lowest is None or lowest <= tuple(capability) <= _SM121:
        return None
    return _NO_BACKEND_REASON[backend].format(major=capability[0], minor=capability[1])


def sdpa_auto(capability: tuple[int, int]) -> str:
    """The backend SDPA picks unrestricted on this GPU, for the series' shapes and dtype."""
    prefer_cudnn = capability[0] in (9, 10)
    order = ("cudnn", "flash", "efficient", "math") if prefer_cudnn else ("flash", "efficient", "cudnn", "math")
    return next(b for b in order if sdpa_unavailable(b, capability) is None)


# --- dtype words ------------------------------------------------------------------------------

#: how each dtype is spelled in a trace, a table and a tag, longest first, in matching order across dtypes
DTYPE_SPELLINGS: dict[str, tuple[str, ...]] = {
    "bf16": ("__nv_bfloat16", "cutlass::bfloat16_t", "BFloat16", "bfloat16", "BF16", "bf16"),
    "fp16": ("__half", "cutlass::half_t", "Half", "float16", "FP16", "fp16"),
}


def rewrite_dtype(text: str, recorded: str, wanted: str) -> str:
    """``text`` with every spelling of dtype ``recorded`` replaced by the same spelling of ``wanted``."""
    if recorded == wanted:
        return text
    if recorded not in DTYPE_SPELLINGS or wanted not in DTYPE_SPELLINGS:
        raise ValueError(f"cannot rewrite {recorded} as {wanted}: known are {', '.join(DTYPE_SPELLINGS)}")
    pairs = dict(zip(DTYPE_SPELLINGS[recorded], DTYPE_SPELLINGS[wanted]))
    pattern = re.compile("|".join(re.escape(s) for s in pairs))  # one pass: a replacement is never replaced again
    return pattern.sub(lambda m: pairs[m.group(0)], text)


# --- inside the kernel ------------------------------------------------------------------------


def _is_cuda(device: Any) -> bool:
    return (isinstance(device, str) and device.split(":")[0] == "cuda") or getattr(device, "type", None) == "cuda"


def _cpu_instead(value: Any) -> Any:
    return "cpu" if _is_cuda(value) else value


def _redirect_cuda_to_cpu(torch: Any) -> None:
    """Tensors and modules asked for on "cuda" are made on the CPU: there is no GPU to hold them."""
    import functools

    def factory(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if "device" in kwargs:
                kwargs["device"] = _cpu_instead(kwargs["device"])
            return fn(*args, **kwargs)
        return wrapper

    for name in ("randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange", "linspace",
                 "eye", "tensor", "as_tensor", "empty_strided", "zeros_like", "ones_like", "empty_like",
                 "randn_like", "rand_like", "full_like"):
        setattr(torch, name, factory(getattr(torch, name)))

    def moved(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            args = tuple(_cpu_instead(a) for a in args)
            if "device" in kwargs:
                kwargs["device"] = _cpu_instead(kwargs["device"])
            return fn(self, *args, **kwargs)
        return wrapper

    torch.Tensor.to = moved(torch.Tensor.to)
    torch.nn.Module.to = moved(torch.nn.Module.to)
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self


def _profiler_without_cuda(torch: Any) -> None:
    """The profiler's CUDA activity is dropped: CUPTI has no GPU here, and the CPU build warns on every event."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profiler as prof

    original = prof._KinetoProfile.__init__

    def init(self, *args, activities=None, **kwargs):
        if isinstance(activities, dict):
            activities = {a: f for a, f in activities.items() if a != ProfilerActivity.CUDA}
        elif activities is not None:
            activities = [a for a in activities if a != ProfilerActivity.CUDA]
        original(self, *args, activities=activities, **kwargs)

    prof._KinetoProfile.__init__ = init


def _fake_cuda(torch: Any, gpu: SimulatedGPU) -> None:
    """torch.cuda answers for ``gpu``; anything that would touch a device does nothing."""
    import types

    total = int(gpu.memory_gib * 2**30)
    props = types.SimpleNamespace(name=gpu.name, major=gpu.capability[0], minor=gpu.capability[1],
                                  total_memory=total, multi_processor_count=gpu.sm_count)
    cuda = torch.cuda
    real_available, real_count = cuda.is_available, cuda.device_count

    def torch_asks() -> bool:
        # torch's own code gets the truth: TorchDynamo, for one, saves the CUDA RNG state when CUDA is available,
        # and that needs a real device; the series and the notebooks get the simulated GPU
        return sys._getframe(2).f_globals.get("__name__", "").split(".")[0] == "torch"

    cuda.is_available = lambda: real_available() if torch_asks() else True
    cuda.device_count = lambda: real_count() if torch_asks() else 1
    cuda.current_device = lambda: 0
    cuda.get_device_properties = lambda device=None: props
    cuda.get_device_capability = lambda device=None: gpu.capability
    cuda.get_device_name = lambda device=None: gpu.name
    cuda.mem_get_info = lambda device=None: (int(total * 0.95), total)  # a fresh kernel on an empty card
    cuda.is_bf16_supported = lambda including_emulation=True: including_emulation or gpu.capability >= _SM80
    cuda.synchronize = lambda device=None: None
    cuda.empty_cache = lambda: None
    cuda.reset_peak_memory_stats = lambda device=None: None
    cuda.max_memory_allocated = lambda device=None: 0
    cuda.max_memory_reserved = lambda device=None: 0
    cuda.memory_allocated = lambda device=None: 0
    torch.backends.cudnn.version = lambda: 91002  # the cuDNN 9 that Colab's CUDA wheels bring


def _serve_from_reference(gpu: SimulatedGPU, runner: Any) -> None:
    """GPU runs come from the reference set, in this GPU's dtype; CPU runs stay live."""
    from helpers.runs import tags
    from helpers.runs.reference import reference_set
    from helpers.runs.workload import BackendUnavailable, Workload

    live = {"run_live": runner.run_live, "run_fresh": runner.run_fresh}

    def serve(which: str):
        def run(w, device, dtype, *, warm, compile, compile_mode, schedule, out_dir, **kw):
            if device != "cuda":
                return live[which](w, device, dtype, warm=warm, compile=compile, compile_mode=compile_mode,
                                   schedule=schedule, out_dir=out_dir, **kw)
            recorded_w = w
            if w.kind == "attention" and w.p["variant"].startswith("sdpa-"):
                backend = w.p["variant"].split("-", 1)[1]
                if backend == "auto":  # what SDPA would pick here, not what it picked on the reference GPU
                    params = {**w.p, "variant": f"sdpa-{sdpa_auto(gpu.capability)}"}
                    recorded_w = Workload(w.kind, tuple(sorted(params.items())), w.label, w.no_grad)
                elif (why := sdpa_unavailable(backend, gpu.capability)) is not None:
                    # what the real probe shows: PyTorch's warning, then no kernel (workload.probe_failure's words)
                    warnings.warn(why, UserWarning, stacklevel=2)
                    raise BackendUnavailable(f"SDPA backend '{backend}' is not available here: "
                                             "No available kernel. Aborting execution.")
            ref = reference_set()
            entry = ref.recording(tags.scenario_key(recorded_w, warm, compile, schedule, compile_mode))
            tag = tags.tag_for(w, dtype, warm, compile, schedule, compile_mode)
            out_dir = Path(out_dir)
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"{tag}.json"
            for key, dest in (("trace", path), ("table", path.with_suffix(".txt")),
                              ("timing", path.with_suffix(".timing.json"))):
                src = ref.path / entry[key] if entry.get(key) else None
                if src is not None and src.is_file():
                    dest.write_text(rewrite_dtype(src.read_text(), entry["dtype"], dtype))
                else:
                    dest.unlink(missing_ok=True)
            return path.with_suffix(".txt").read_text(), path, 0.0
        return run

    runner.run_live = serve("run_live")
    runner.run_fresh = serve("run_fresh")


def _log_questions(log: Path) -> None:
    """Every question asked, with its text, its choices and the verdicts its reveal gave, one JSON line each."""
    from helpers.lesson import widgets

    ask, verdict, inconclusive = widgets.ask, widgets.verdict, widgets.inconclusive
    given: list[list[Any]] = []

    def logged_verdict(hit, explanation, actual=None, **kw):
        given.append([hit, explanation])
        return verdict(hit, explanation, actual=actual, **kw)

    def logged_inconclusive(explanation, actual=None, **kw):
        given.append(["inconclusive", explanation])
        return inconclusive(explanation, actual=actual, **kw)

    def logged_ask(qid, prompt, *, reveal, default, choices=None, unit=None, kind="predict", **kw):
        given.clear()
        returned: list[Any] = []

        def kept(answer):
            returned.append(reveal(answer))
            return returned[-1]

        try:
            ask(qid, prompt, reveal=kept, default=default, choices=choices, unit=unit, kind=kind, **kw)
        finally:
            entry = {"qid": qid, "prompt": prompt, "choices": choices, "default": default, "unit": unit,
                     "kind": kind, "hit": returned[-1].hit if returned else None, "revealed": bool(returned),
                     "verdicts": list(given)}
            with open(log, "a") as f:
                f.write(json.dumps(entry, default=str) + "\n")

    widgets.verdict = logged_verdict  # the module's globals: versus() and ask() inside widgets use these too
    widgets.inconclusive = logged_inconclusive
    widgets.ask = logged_ask


def _measurements_from_reference(gpu: SimulatedGPU) -> None:
    """Timings compared in turn and the idle-GPU experiment come from the reference set: there is no GPU to time.

    Their source says so: the figures are the reference GPU's, not the simulated one's.
    """
    from helpers.runs import comparisons, idle_gpu
    from helpers.runs.reference import reference_set

    measure = comparisons.measure

    def served(name, *, on="auto"):
        return measure(name, on="cpu") if on == "cpu" else comparisons.recorded(name)

    def idle():
        ref = reference_set()
        return json.loads((ref.path / "idle_gpu.json").read_text()), f"measured on {ref.short()} (simulated {gpu.name})"

    def served_adhoc(name, members, what="wall", **how):
        # calls timed now in an order of the learner's: the recorded group that holds them all stands in
        labels = set(members)
        for group in comparisons.GROUPS.values():
            if labels <= set(group.labels):
                return comparisons.recorded(group.name)
        raise comparisons.WorkloadError(f"no recorded group holds {sorted(labels)}: the simulation cannot time them")

    comparisons.measure = served
    comparisons.adhoc = served_adhoc
    idle_gpu.measure = idle


def install(spec: dict[str, Any]) -> None:
    """Called by the kernel's startup file, before the first cell: simulate ``spec["gpu"]`` (None: recorded)."""
    root = spec["root"]
    if root not in sys.path:
        sys.path.insert(0, root)  # what the notebook's first cell does: this clone's helpers, nothing else
    import torch

    from helpers.runs import ddp, mode, runner

    # Scratch folders, not the clone's traces/runs: nbval runs the same notebooks beside these runs in make test,
    # and notebook 15's pairs over gloo would otherwise be written to, and removed from, one folder by both.
    runner.RUNS = Path(spec["runs"])
    ddp.RUNS = Path(spec["runs"]) / "ddp"
    _log_questions(Path(spec["questions"]))
    if spec["gpu"] is not None:
        gpu = SimulatedGPU(**{**spec["gpu"], "capability": tuple(spec["gpu"]["capability"])})
        _fake_cuda(torch, gpu)
        _redirect_cuda_to_cpu(torch)
        _profiler_without_cuda(torch)
        _serve_from_reference(gpu, runner)
        _measurements_from_reference(gpu)
    mode.environment.cache_clear()
    e = mode.environment()
    want = "live" if spec["gpu"] is not None else "recorded"
    if e.mode != want:
        raise RuntimeError(f"simulation not installed: the series says {e.mode}, expected {want}")
    Path(spec["installed"]).write_text(json.dumps({"mode": e.mode, "gpu": e.gpu, "python": sys.executable}))


_STARTUP = """\
# Written by tests/simulated_gpu.py: simulate a GPU before the notebook's first cell.
import importlib.util as _u, json as _j, sys as _s
_spec = _u.spec_from_file_location("simulated_gpu", {module!r})
_m = _s.modules["simulated_gpu"] = _u.module_from_spec(_spec)  # registered first: its dataclasses look it up
try:
    _spec.loader.exec_module(_m)
    _m.install(_j.loads({spec!r}))
except BaseException:  # IPython would only say "Unknown error in handling startup files"
    import traceback
    traceback.print_exc()
    raise
del _u, _j, _s, _spec, _m
"""


# --- running a notebook -----------------------------------------------------------------------


@dataclass
class NotebookRun:
    """What one headless run of one notebook left: the executed notebook, the journal, the questions asked."""

    path: Path
    gpu: str  # a key of GPUS, or "recorded"
    notebook: Any  # the executed nbformat notebook
    journal: dict[str, dict[str, Any]]
    questions: list[dict[str, Any]]
    error: str | None  # the failing cell's error, when a cell failed
    seconds: float
    installed: dict[str, Any] = field(default_factory=dict)
    workdir: Path | None = None  # the run's scratch folder (its runs/ hold what the notebook recorded)

    @property
    def name(self) -> str:
        return self.path.name


def run_notebook(path: Path, gpu: SimulatedGPU | None, workdir: Path, timeout: int = 900) -> NotebookRun:
    """Execute ``path`` headless in a fresh kernel of this Python, on ``gpu`` (None: recorded mode)."""
    import nbclient
    import nbformat

    workdir.mkdir(parents=True, exist_ok=True)
    journal, questions, installed = workdir / "journal.json", workdir / "questions.jsonl", workdir / "installed.json"
    for p in (journal, questions, installed):
        p.unlink(missing_ok=True)
    startup = workdir / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    spec = {"gpu": asdict(gpu) if gpu else None, "root": str(ROOT), "runs": str(workdir / "runs"),
            "questions": str(questions), "installed": str(installed)}
    (startup / "00-simulated-gpu.py").write_text(_STARTUP.format(module=str(Path(__file__).resolve()),
                                                                 spec=json.dumps(spec)))
    from helpers.classroom.lab_setup import quiet_profile

    quiet_profile(workdir / "ipython")  # kernel log lines below errors left out, as in make test
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROFILING_MODE", "PROFILING_JOURNAL", "PROFILING_HEADLESS", "PROFILING_CHECKPOINT")}
    env.update(PROFILING_HEADLESS="1", PROFILING_JOURNAL=str(journal), IPYTHONDIR=str(workdir / "ipython"),
               MPLBACKEND="Agg", PYDEVD_DISABLE_FILE_VALIDATION="1")
    if gpu is None:
        env["PROFILING_MODE"] = "recorded"
    nb = nbformat.read(path, as_version=4)
    # "python3" is this Python: jupyter_client starts a kernel spec whose argv[0] is "python" with sys.executable
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    error, t0 = None, time.perf_counter()
    try:
        client.execute(env=env)
    except nbclient.exceptions.CellExecutionError as e:
        error = str(e)
    except nbclient.exceptions.CellTimeoutError as e:
        error = f"timed out: {e}"
    seconds = time.perf_counter() - t0
    nbformat.write(nb, workdir / path.name)  # the executed notebook, outputs and all, to read when a test fails
    done = json.loads(installed.read_text()) if installed.is_file() else {}
    if not done and error is None:
        error = "the simulation was not installed: the kernel's startup file failed (see the kernel's log)"
    return NotebookRun(path, gpu.key if gpu else "recorded", nb,
                       json.loads(journal.read_text()) if journal.is_file() else {},
                       [json.loads(line) for line in questions.read_text().splitlines()] if questions.is_file() else [],
                       error, seconds, done, workdir)


# --- reading a run --------------------------------------------------------------------------------

_SCRIPT = re.compile(r"<script\b.*?</script>", re.S | re.I)
_BLOB = re.compile(r"[A-Za-z0-9+/=]{120,}")  # base64 (embedded traces, images): random letters, not prose


def _plain(text: str) -> str:
    return html.unescape(_BLOB.sub(" ", _SCRIPT.sub(" ", text)))


def output_texts(run: NotebookRun) -> list[tuple[str, str]]:
    """(where, text) for every markdown cell and every text output of the executed notebook."""
    out = []
    for i, cell in enumerate(run.notebook.cells):
        if cell.cell_type == "markdown":
            out.append((f"cell {i} (markdown)", _plain(cell.source)))
            continue
        if cell.cell_type != "code":
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append((f"cell {i} ({o.get('name')})", _plain(o.get("text", ""))))
            elif o.get("output_type") in ("display_data", "execute_result"):
                for mime, data in o.get("data", {}).items():
                    if mime.startswith("text/"):
                        out.append((f"cell {i} ({mime})", _plain(data if isinstance(data, str) else "".join(data))))
            elif o.get("output_type") == "error":
                out.append((f"cell {i} (error)", _plain("\n".join(o.get("traceback", [])))))
    return out


BF16 = re.compile(r"bf16|bfloat16", re.I)


def attributed_elsewhere(gpu: SimulatedGPU | None) -> list[str]:
    """Text that may name bf16 on any GPU because it says so of someone else's run, longest first.

    The article's figures (helpers.lesson.article: its A100 ran bf16) and the banner's dtype note (which says this
    GPU has *no* bf16) come from the helpers, each attributed; a notebook's own words are not in this list.
    """
    from helpers.lesson import article
    from helpers.runs.workload import dtype_note

    words: set[str] = set()
    for f in article.FIGURES.values():
        words.update({f.label(), f.label(capital=True), f.quote(), f.text(), str(f.value), f.run})
    if gpu is not None:
        words.add(dtype_note("cuda", gpu.capability) or "")
    # only what names bf16 itself: stripping a bare "2" or "flash" would cut words the check must still see
    return sorted((w for w in words if BF16.search(w)), key=len, reverse=True)


def bf16_mentions(run: NotebookRun, gpu: SimulatedGPU | None) -> list[str]:
    """Every place where the notebook's markdown or outputs say bf16 of this run, with its context."""
    allowed = attributed_elsewhere(gpu)
    found = []
    for where, text in output_texts(run):
        for a in allowed:
            text = text.replace(a, " ")
        for m in BF16.finditer(text):
            found.append(f"{where}: ...{text[max(0, m.start() - 80):m.end() + 80]}...".replace("\n", " "))
    return found


# --- the table across GPUs -------------------------------------------------------------------------


def question_table(runs: dict[str, list[NotebookRun]]) -> list[tuple[str, str, str]]:
    """For each question key: whether its text or choices differ between the configurations, and how.

    ``runs`` maps a configuration ("recorded", "T4", ...) to its notebook runs. Returns rows of
    (key, what differs, how).
    """
    seen: dict[str, dict[str, dict[str, Any]]] = {}
    for config, nb_runs in runs.items():
        for r in nb_runs:
            for q in r.questions:
                seen.setdefault(q["qid"], {})[config] = q
    rows = []
    configs = list(runs)
    for qid in seen:  # in the order the notebooks ask them
        by = seen[qid]
        missing = [c for c in configs if c not in by]
        parts, how = [], []
        for attr in ("prompt", "choices"):
            values: dict[str, list[str]] = {}
            for c, q in by.items():
                values.setdefault(json.dumps(q[attr]), []).append(c)
            if len(values) > 1:
                parts.append("question text" if attr == "prompt" else "choices")
                how.append("; ".join(f"{'/'.join(cs)}: {json.loads(v)!r}" for v, cs in values.items()))
        if missing:
            parts.append("asked")
            how.append(f"not asked on {'/'.join(missing)}")
        rows.append((qid, ", ".join(parts) or "same everywhere", " | ".join(how)))
    return rows


def _main(argv: list[str]) -> None:
    if not argv or argv[0] != "table":
        print(__doc__)
        return
    names = argv[1:]
    paths = [p for p in notebook_paths() if not names or any(n in p.name for n in names)]
    base = Path(tempfile.mkdtemp(prefix="simulated-gpus-"))
    runs: dict[str, list[NotebookRun]] = {}
    for config in ["recorded", *GPUS]:
        for p in paths:
            r = run_notebook(p, GPUS.get(config), base / config / p.stem)
            runs.setdefault(config, []).append(r)
            unanswered = [q["qid"] for q in r.questions if q["hit"] is None]
            print(f"{config:8} {p.name:36} {r.seconds:6.1f} s  {'FAILED ' + r.error.splitlines()[0] if r.error else 'ok'}"
                  f"  no verdict: {', '.join(unanswered) or '-'}", file=sys.stderr, flush=True)
    (base / "questions.json").write_text(json.dumps({c: [q for r in rs for q in r.questions] for c, rs in runs.items()},
                                                    indent=1, default=str))
    print("| question | differs | how |\n| --- | --- | --- |")
    for qid, what, how in question_table(runs):
        print(f"| `{qid}` | {what} | {how.replace('|', '/')} |")
    print(f"\n(logs under {base})", file=sys.stderr)


if __name__ == "__main__":
    _main(sys.argv[1:])


class Runs:
    """Simulated notebook runs, started ahead in the order the tests will ask for them, on worker threads.

    The session starts them with one worker as soon as the tests are collected, so that the runs use the second
    core while the rest of the suite runs on the first; :meth:`widen` adds a worker when the tests that wait for
    them begin (they run last: tests/conftest.py orders them so).
    """

    def __init__(self, wanted: list[tuple[str, Path]], base: Path, workers: int = 1):
        self._base = base
        self._queue: queue.Queue = queue.Queue()
        self._futures: dict = {}
        self._threads: list = []
        for key in wanted:
            self._add(key)
        self.widen(workers)

    def _add(self, key: tuple[str, Path]):
        if key not in self._futures:
            self._futures[key] = Future()
            self._queue.put(key)
        return self._futures[key]

    def _work(self) -> None:
        while True:
            key = self._queue.get()
            if key is None:
                return
            fut = self._futures[key]
            if not fut.set_running_or_notify_cancel():
                continue
            gpu, path = key
            try:
                fut.set_result(run_notebook(path, GPUS[gpu], self._base / gpu / path.stem))
            except BaseException as e:  # the test that asks for this run reports it
                fut.set_exception(e)

    def widen(self, workers: int = 1) -> None:
        """Start ``workers`` more worker threads."""
        for _ in range(workers):
            t = threading.Thread(target=self._work, daemon=True)
            t.start()
            self._threads.append(t)

    @property
    def workers(self) -> int:
        return len(self._threads)

    def get(self, gpu: str, path: Path) -> NotebookRun:
        return self._add((gpu, path)).result()

    def close(self) -> None:
        for fut in self._futures.values():
            fut.cancel()
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join()


SIMULATED_TEST = "test_notebook_on_a_simulated_gpu"


def start_runs(items: list) -> Runs:
    """The runs the collected simulated-GPU tests will ask for, started now on one worker."""
    wanted = [(it.callspec.params["gpu"], it.callspec.params["path"]) for it in items
              if getattr(it, "originalname", None) == SIMULATED_TEST]
    return Runs(wanted, Path(tempfile.mkdtemp(prefix="simulated-gpus-")), workers=1)
