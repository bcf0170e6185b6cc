"""Record notebook 17's exam traces on this GPU (a maintainer's tool: the notebooks never import it).

    python tools/record_exam.py                 # into traces/exam/<gpu>/
    python tools/record_exam.py --out DIR --only exam-3

Each exam trace is a small program the series never shows, profiled the
series' way (``wait=1, warmup=1, active=3``, each step under a
``record_function("step")`` label). Their file names and manifest entries
are neutral on purpose: which program made which trace is written only here,
so that a learner who opens the notebook or the folder finds no answer; the
notebook's reveals come from ``diagnose`` on the trace. The last one is two
processes over gloo on the CPU (``torchrun``), so it needs no second GPU.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.runs.record import _versions
from helpers.runs.runner import profile_callable
from helpers.runs.tags import ARTICLE, slug

Program = Callable[[], tuple[Callable[[], Any], dict]]  # -> (step, profile options)


def _small_ops():
    """A hand-written norm and gate over a tiny batch: dozens of small elementwise kernels per step."""
    import torch

    x = torch.randn(4, 32, 128, device="cuda", dtype=torch.bfloat16)
    g = torch.ones(128, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)

    def step():
        h = x
        for _ in range(4):
            rms = h.float().pow(2).mean(-1, keepdim=True).add(1e-6).rsqrt()
            h = (h.float() * rms).to(h.dtype) * g
            a, b = (h @ w).chunk(2, dim=-1)
            h = torch.cat([a * torch.sigmoid(a) * b, b], dim=-1) + x
        return h
    return step, {"no_grad": True}


def _big_gemms():
    """Forward and backward of a wide MLP in bf16 at a large batch."""
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4096, 16384), nn.GELU(), nn.Linear(16384, 4096)).cuda().bfloat16()
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)

    def step():
        model(x).float().square().mean().backward()
    return step, {"no_grad": False}


def _elementwise():
    """An unfused chain of elementwise ops over a large tensor."""
    import torch

    x = torch.randn(2**28, device="cuda", dtype=torch.bfloat16)

    def step():
        y = x * 1.5 + 0.25
        y = torch.sigmoid(y) * x
        return torch.tanh(y) + y
    return step, {"no_grad": True}


class _Records:
    """Text records, each parsed and hashed in Python before it becomes a batch of token ids."""

    def __init__(self, batch: int = 64, length: int = 256, n: int = 10_000):
        self.batch, self.length, self.n = batch, length, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        words = [f"w{(i * 7919 + k * 104729) % 50021}" for k in range(self.length * 4)]
        ids = [hash(w) % 32000 for w in words][: self.length]
        return torch.tensor(ids), i % 4


def _token_loader():
    """A bag-of-embeddings classifier trained on batches a single-process DataLoader builds from text."""
    import itertools

    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    loader = DataLoader(_Records(), batch_size=64, num_workers=0)
    batches = itertools.chain.from_iterable(iter(loader) for _ in itertools.count())
    emb = nn.EmbeddingBag(32000, 512, device="cuda")
    head = nn.Linear(512, 4, device="cuda")
    opt = torch.optim.AdamW(list(emb.parameters()) + list(head.parameters()), lr=1e-3)

    def step():
        ids, labels = next(batches)
        ids, labels = ids.cuda(), labels.cuda()
        loss = nn.functional.cross_entropy(head(emb(ids)), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, {"no_grad": False}


def _metrics_in_python():
    """An evaluation loop that reads its accuracy back every batch and post-processes it in Python."""
    import torch

    w1 = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    history: list[float] = []

    def step():
        h = x
        for _ in range(4):
            h = torch.relu(h @ w1)
        score = h.float().mean().item()  # a Python float: waits for the GPU
        history.append(score)
        smooth = history[0]
        for k in range(30_000):  # bookkeeping in pure Python, while the GPU has nothing to do
            smooth = 0.99 * smooth + 0.01 * math.tanh(score + k * 1e-6)
        return smooth
    return step, {"no_grad": True}


def _changing_shapes():
    """A compiled function fed a sequence length that changes every step, compiled for static shapes."""
    import torch

    w = torch.randn(512, 512, device="cuda")

    def fn(x):
        return torch.nn.functional.gelu(x @ w).softmax(-1).sum(0)

    compiled = torch.compile(fn, dynamic=False)
    lengths = iter(range(64, 64 + 64 * 100, 64))

    def step():
        return compiled(torch.randn(next(lengths), 512, device="cuda"))
    return step, {"no_grad": True, "warm": False}


def _pairwise():
    """Pairwise squared distances by broadcasting: a temporary far larger than the inputs and the result."""
    import torch

    x = torch.randn(4096, 256, device="cuda")

    def step():
        d = (x[:, None, :] - x[None, :, :]).pow(2).sum(-1)
        return d.topk(8, largest=False).indices
    return step, {"no_grad": True, "memory": True}


def _fp32_training():
    """A float32 training step of a deep, narrow MLP at a large batch."""
    import torch
    from torch import nn

    torch.backends.cuda.matmul.allow_tf32 = False
    layers: list[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(2048, 2048), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(2048, 100)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(8192, 2048, device="cuda")
    y = torch.randint(0, 100, (8192,), device="cuda")

    def step():
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, {"no_grad": False}


#: the exam's programs, by neutral name, in the order the notebook shows them (not the order the series teaches)
PROGRAMS: dict[str, Program] = {
    "exam-1": _elementwise,
    "exam-2": _token_loader,
    "exam-3": _small_ops,
    "exam-4": _pairwise,
    "exam-5": _metrics_in_python,
    "exam-6": _big_gemms,
    "exam-7": _changing_shapes,
    "exam-8": _fp32_training,
}
#: the two-process run over gloo: rank 0 starts every step late
RANKS = "exam-9"
RANK_OPTIONS = ["--width", "768", "--layers", "3", "--batch", "128", "--straggle-ms", "40", "--straggler", "0",
                "--straggle-label", ""]


def record_program(name: str, out: Path) -> dict:
    import torch

    t0 = time.perf_counter()
    step, opts = PROGRAMS[name]()
    profile_callable(step, (), label="step", tag=name, out_dir=out, cuda=True, warm=opts.get("warm", True),
                     schedule=ARTICLE, no_grad=opts["no_grad"], memory=opts.get("memory", False), timing=False)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch._dynamo.reset()
    for extra in (out / f"{name}.txt", out / f"{name}.timing.json"):  # the learner reads the trace, nothing beside it
        extra.unlink(missing_ok=True)
    print(f"{time.perf_counter() - t0:.1f} s", flush=True)
    return {"trace": f"{name}.json"}


def record_ranks(out: Path) -> dict:
    folder = out / RANKS
    shutil.rmtree(folder, ignore_errors=True)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
                    "helpers.runs.ddp_train", "--out", str(folder)] + RANK_OPTIONS, env=env, cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    (folder / "run.json").unlink(missing_ok=True)  # it names the planted delay
    print(f"{time.perf_counter() - t0:.1f} s", flush=True)
    return {"folder": RANKS, "backend": "gloo"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="folder (default: traces/exam/<gpu>)")
    ap.add_argument("--only", default=None, help="record only this one")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("record_exam: no CUDA GPU is visible; the exam traces come from a real GPU.", file=sys.stderr)
        return 2
    info = _versions()
    out = Path(a.out) if a.out else ROOT / "traces" / "exam" / slug(info["gpu"]["name"])
    out.mkdir(parents=True, exist_ok=True)
    mf = out / "manifest.json"
    entries = json.loads(mf.read_text())["traces"] if mf.exists() else {}
    for name in [*PROGRAMS, RANKS]:
        if a.only and name != a.only:
            continue
        print(f"{name} ...", end=" ", flush=True)
        # no time per entry: a long recording (a compile) would say which is which
        entries[name] = record_ranks(out) if name == RANKS else record_program(name, out)
    mf.write_text(json.dumps({**info, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                              "command": "python tools/record_exam.py", "traces": dict(sorted(entries.items()))},
                             indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
