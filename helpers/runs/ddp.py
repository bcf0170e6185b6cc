"""Start notebook 15's two-rank runs, or find their recordings.

:func:`run` starts ``torchrun`` with :mod:`helpers.runs.ddp_train` in a subprocess,
shows its progress line by line, and waits: on two GPUs over NCCL when this
machine has them, otherwise on the CPU over gloo (two processes on this
machine), so that the distributed code always runs somewhere. :func:`recorded`
returns the pair recorded on two H200s (``traces/reference/<set>/ddp/<name>/``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import ROOT
from .reference import NotRecorded, reference_set
from .stopwatch import phase

RUNS = ROOT / "traces" / "runs" / "ddp"

#: the runs notebook 15 asks about: name -> the script's options
SCENARIOS: dict[str, list[str]] = {
    "base": [],
    "bucket100": ["--bucket-mb", "100"],
    "straggler": ["--straggle-ms", "5"],
    "nosync4": ["--accumulate", "4"],
}

#: what a scenario changes over gloo on the CPU: the planted straggler sleeps longer there. Two processes on a CPU
#: shared with other work can drift milliseconds apart with nothing planted (the gloo base run's entry gaps,
#: :func:`balance`, say how far on a given machine); 50 ms stands far above that, 5 ms often does not
CPU_OPTIONS: dict[str, list[str]] = {"straggler": ["--straggle-ms", "50"]}


# torchrun's banner, warnings torch prints in every rank, and Kineto asking for GPUs on a gloo run: kept in the
# error message when a run fails, left out of the progress lines
_NOISE = re.compile(r"^(USDT|INFO)|run\.py:\d+\]|UserWarning|_warn_once\(|return func\(|^\s*\*+\s*$|"
                    r"OMP_NUM_THREADS|gpuGetDeviceCount|DeviceProperties\.cpp|^\s*$")


class LaunchFailed(RuntimeError):
    """torchrun exited with an error; the message holds the last lines it printed."""


@dataclass
class RankRun:
    """A folder of rank traces and where it came from."""

    name: str
    folder: Path
    source: str  # in words: "recorded now on 2 x NVIDIA H200 (nccl)" / "recorded on ..."
    backend: str


def _torchrun() -> list[str]:
    exe = shutil.which("torchrun")
    return [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]


def run(name: str = "base", *, gpus: int | None = None, out_root: Path | None = None, quiet: bool = False,
        timeout: float = 600) -> RankRun:
    """Run scenario ``name`` with two ranks here and wait for it; NCCL on two GPUs, else gloo on the CPU.

    The pair goes under ``out_root`` (by default :data:`RUNS`, read when the run starts)."""
    import torch  # to count and name GPUs: the ranks run in their own processes

    if name not in SCENARIOS:
        raise ValueError(f"no run {name!r}: there are {', '.join(SCENARIOS)}")
    have = gpu_count() if gpus is None else gpus
    nproc = 2
    backend = "nccl" if have >= nproc else "gloo"
    out = (out_root or RUNS) / (name if backend == "nccl" else f"{name}-cpu")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if backend == "gloo":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the ranks must not pick up a single GPU between them
        extra = ["--width", "512", "--batch", "64"] + CPU_OPTIONS.get(name, [])  # a smaller model, same structure
    else:
        extra = []
    cmd = _torchrun() + ["--standalone", f"--nproc_per_node={nproc}", "-m", "helpers.runs.ddp_train",
                         "--out", str(out)] + SCENARIOS[name] + extra
    t0 = time.perf_counter()
    lines: list[str] = []
    with phase("two-process run", f"{name} ({backend})"):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if not quiet and not _NOISE.search(line):
                print(f"  [{time.perf_counter() - t0:5.1f} s] {line.rstrip()}", flush=True)
        proc.stdout.close()
        code = proc.wait(timeout=timeout)
    if code != 0 or not (out / "rank0.json").is_file():
        tail = "\n".join(lines[-8:]) or "no output"
        raise LaunchFailed(f"torchrun exited with status {code} for run {name!r}:\n{tail}")
    if not quiet:
        print(f"  done in {time.perf_counter() - t0:.1f} s: {', '.join(p.name for p in sorted(out.glob('rank*.json')))}")
    where = f"2 x {torch.cuda.get_device_name(0)}" if backend == "nccl" else "this CPU, 2 processes"
    return RankRun(name, out, f"recorded now on {where} ({backend})", backend)


def recorded(name: str = "base") -> RankRun:
    """The pair recorded on two GPUs for scenario ``name``, from the reference set."""
    ref = reference_set()
    folder = ref.path / "ddp" / name
    if not (folder / "rank0.json").is_file():
        raise NotRecorded(f"The reference set {ref.path.name} has no two-GPU recording of {name!r} "
                          f"(looked in {folder}). Record it on a machine with two GPUs: "
                          "python -m helpers.runs.ddp record")
    return RankRun(name, folder, f"recorded on 2 x {ref.gpu} (nccl), {ref.date}", "nccl")


def run_info(r: RankRun) -> dict:
    """What the run recorded about itself (``run.json``: model size, gradient bytes, bucket cap, backend, versions)."""
    import json

    path = r.folder / "run.json"
    if not path.is_file():
        raise NotRecorded(f"{r.folder} has no run.json: record the pair again (python -m helpers.runs.ddp record)")
    return json.loads(path.read_text())


def gpu_count() -> int:
    """GPUs this process can see (0 without torch's CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pairs_now() -> bool:
    """Whether notebook 15's pairs run now: the series runs live and this machine has two GPUs."""
    from .mode import environment

    return environment().live and gpu_count() >= 2


def where_traces_come_from() -> str | None:
    """For the banner, live on fewer than two GPUs: the pairs are the recorded ones (None when they run now)."""
    from .mode import environment

    if not environment().live or pairs_now():
        return None
    n = gpu_count()
    return (f"This machine has {n} GPU{'s' if n != 1 else ''}, not two: the two-rank traces below are the pair "
            "recorded on two GPUs (each says where and when), and the gloo run happens now, on this CPU.")


def pair(name: str = "base") -> RankRun:
    """Notebook 15's two ranks: run now on two GPUs when the series runs live and has them, else the recorded pair."""
    return run(name) if pairs_now() else recorded(name)


#: the base run counts as balanced when, in the median matched collective, the last rank entered this soon after
#: the first (a planted straggler's 5 ms is fifty times more)
BALANCE_MARGIN_US = 100.0


def entry_gaps_us(folder: Path) -> list[float]:
    """Per collective matched across the ranks: how long after the first rank the last one entered it (µs)."""
    from ..facts.ranks import read_ranks

    return [max(m.starts_us) - min(m.starts_us) for m in read_ranks(folder).matched]


def balance(folder: Path, margin_us: float = BALANCE_MARGIN_US) -> tuple[bool, str]:
    """Whether the ranks of a run enter their collectives together: no straggler named, and the median entry gap
    within ``margin_us``; and the figures, in words."""
    import statistics

    from ..facts.ranks import read_ranks

    r = read_ranks(folder)
    gaps = [max(m.starts_us) - min(m.starts_us) for m in r.matched]
    if not gaps:
        return False, "no collective matched across the ranks"
    med = statistics.median(gaps)
    ok = r.straggler.rank is None and med <= margin_us
    return ok, (f"{len(gaps)} matched collectives, the last rank entering a median {med:.0f} us after the first "
                f"(max {max(gaps):.0f} us); straggler: {'none' if r.straggler.rank is None else r.straggler.rank}")


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.runs.ddp record``: record every scenario on this machine's GPUs into the reference set."""
    import json

    import torch

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["record"]:
        print("usage: python -m helpers.runs.ddp record", file=sys.stderr)
        return 2
    if gpu_count() < 2:
        print(f"ddp record: two GPUs are needed for the reference pair; this machine has {gpu_count()}.",
              file=sys.stderr)
        return 2
    from .tags import slug

    dest = ROOT / "traces" / "reference" / slug(torch.cuda.get_device_name(0)) / "ddp"
    unbalanced = False
    for name in SCENARIOS:
        for attempt in range(1, 4):
            r = run(name, out_root=dest)
            ok, how = balance(r.folder)
            if name != "base" or ok:
                break
            print(f"ddp record: the base run is not balanced ({how}); recording it again ({attempt} of 3)",
                  file=sys.stderr)
        else:
            unbalanced = True
            print("ddp record: the base run stayed unbalanced after three tries: look at the machine "
                  "(another job on a GPU?) before using these traces.", file=sys.stderr)
        print(json.dumps({"recorded": name, "folder": str(r.folder), "balanced": ok, "balance": how}))
    return 1 if unbalanced else 0


if __name__ == "__main__":
    sys.exit(main())
