"""Volume two's workloads: a training step, and an input pipeline that feeds one.

Each step runs inside named ``record_function`` spans (``forward``, ``loss``,
``backward``, ``optimizer``, ``zero_grad``, and ``data`` for the input
pipeline), so that a trace reads like the loop that made it. The kinds
register themselves in :data:`helpers.runs.workload.KINDS`, like every workload.

Precision: ``fp32`` keeps every matrix multiply in float32 (PyTorch's default,
``torch.get_float32_matmul_precision() == "highest"``); ``tf32`` allows
TensorFloat-32 for them (``"high"``); ``amp`` runs the forward under
``torch.autocast`` in the series' dtype (bf16, fp16 on GPUs without it).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from .workload_core import KINDS, Kind, Params, Workload, _halve, _make

PRECISIONS = ("fp32", "tf32", "amp")
OPTIMIZERS = ("foreach", "fused", "loop")


def train_step(batch: int = 512, dim: int = 1024, hidden: int = 4096, layers: int = 2, precision: str = "fp32",
               optimizer: str = "foreach", syncs: bool = False, memory: bool = False,
               checkpoint: bool = False) -> Workload:
    """One training step of an MLP (``layers`` blocks of Linear, GELU, Linear) with AdamW.

    ``syncs=True`` adds four lines a training loop often has, each of which
    makes the CPU wait for the GPU (``loss.item()``, ``if tensor:``, a
    boolean mask, ``.cpu()``). ``memory=True`` profiles allocations too;
    ``checkpoint=True`` recomputes each block's activations in backward.
    """
    if precision not in PRECISIONS or optimizer not in OPTIMIZERS:
        raise ValueError(f"precision one of {PRECISIONS}, optimizer one of {OPTIMIZERS}")
    return _make("train", "train_step", no_grad=False, batch=batch, dim=dim, hidden=hidden, layers=layers,
                 precision=precision, optimizer=optimizer, syncs=syncs, memory=memory, checkpoint=checkpoint)


def _mlp(dim: int, hidden: int, layers: int, device: str):
    from torch import nn

    blocks = [nn.Sequential(nn.Linear(dim, hidden, device=device), nn.GELU(), nn.Linear(hidden, dim, device=device))
              for _ in range(layers)]
    return nn.Sequential(*blocks, nn.Linear(dim, 10, device=device))


def _optimizer(params, kind: str, device: str):
    import torch

    if kind == "fused":
        return torch.optim.AdamW(params, lr=1e-4, fused=device == "cuda")
    return torch.optim.AdamW(params, lr=1e-4, foreach=kind == "foreach")


def _build_train(device, dtype, batch, dim, hidden, layers, precision, optimizer, syncs, memory, checkpoint):
    import torch
    from torch.profiler import record_function
    from torch.utils.checkpoint import checkpoint_sequential

    tf32 = precision == "tf32"  # explicit: "fp32" must mean no TF32
    model = _mlp(dim, hidden, layers, device)
    opt = _optimizer(model.parameters(), optimizer, device)
    x = torch.randn(batch, dim, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    amp = torch.autocast(device, dtype=dtype) if precision == "amp" else None
    kept: list[Any] = []

    def forward():
        if checkpoint:
            return checkpoint_sequential(model, layers + 1, x, use_reentrant=False)
        return model(x)

    def step():
        # Set on every step, not once: steps of two precisions timed in turn (helpers.facts.measure) must each get theirs.
        torch.backends.cuda.matmul.allow_tf32 = tf32
        with record_function("forward"):
            if amp is None:
                logits = forward()
            else:
                with amp:
                    logits = forward()
        with record_function("loss"):
            loss = torch.nn.functional.cross_entropy(logits.float(), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
        with record_function("zero_grad"):
            opt.zero_grad(set_to_none=True)
        if syncs:
            with record_function("bookkeeping"):
                kept.append(loss.item())  # a Python float: waits for the loss
                if (logits.argmax(-1) == y).any():  # `if tensor:` waits for the answer
                    kept.append(logits[logits > 0].numel())  # a boolean mask: its size is only known on the GPU
                kept.append(y.cpu())  # a copy to the CPU waits too
                del kept[:-4]
        return loss

    return step, ()


def _train_bytes(p: Params, s: int) -> int:
    weights = p["layers"] * 2 * p["dim"] * p["hidden"] + 10 * p["dim"]
    acts = p["batch"] * (p["dim"] + 2 * p["hidden"]) * p["layers"] * 2
    return 4 * (4 * weights + acts)  # weights, grads, two AdamW moments; activations, all float32


KINDS["train"] = Kind(
    _build_train,
    describe=lambda p: (f"a training step of a {p['layers']}-block MLP ({p['dim']} to {p['hidden']}), batch "
                        f"{p['batch']}, {p['precision']}, AdamW {p['optimizer']}"
                        + (", with four syncing lines" if p.get("syncs") else "")
                        + (", allocations profiled" if p.get("memory") else "")
                        + (", activation checkpointing" if p.get("checkpoint") else "")),
    stem=lambda p: (f"train-{p['precision']}-{p['optimizer']}" + ("-syncs" if p.get("syncs") else "")
                    + ("-mem" if p.get("memory") else "") + ("-ckpt" if p.get("checkpoint") else "")
                    + (f"-b{p['batch']}" if p["batch"] != 512 else "")),
    bytes_needed=_train_bytes,
    smaller=_halve("batch", above=8),
)


# --- the input pipeline ------------------------------------------------------------------


class SlowImages:
    """A dataset whose every sample costs the CPU some work, like decoding and augmenting an image."""

    def __init__(self, n: int = 4096, size: int = 128, work: int = 20_000):
        self.n, self.size, self.work = n, size, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        acc = 0.0
        for k in range(self.work):  # pure Python: the GIL-bound part of a decode
            acc += math.sqrt(k + i)
        g = torch.Generator().manual_seed(i)
        return torch.rand(3, self.size, self.size, generator=g) * (acc > 0), i % 10


def input_pipeline(workers: int = 0, pin: bool = False, non_blocking: bool = False, batch: int = 32,
                   size: int = 128, work: int = 20_000) -> Workload:
    """A small CNN trained on batches from a DataLoader whose samples cost CPU time.

    ``workers`` are DataLoader worker processes (0: the main process loads),
    ``pin`` pins the batches in page-locked memory, ``non_blocking`` copies
    them to the GPU without waiting.
    """
    return _make("input", "train_step", no_grad=False, workers=workers, pin=pin, non_blocking=non_blocking,
                 batch=batch, size=size, work=work)


def _cnn(device: str):
    from torch import nn

    return nn.Sequential(nn.Conv2d(3, 64, 7, stride=4, device=device), nn.ReLU(), nn.Conv2d(64, 128, 3, device=device),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10, device=device))


def _build_input(device, dtype, workers, pin, non_blocking, batch, size, work):
    import torch
    from torch.profiler import record_function
    from torch.utils.data import DataLoader

    loader = DataLoader(SlowImages(size=size, work=work), batch_size=batch, shuffle=False, num_workers=workers,
                        pin_memory=pin and device == "cuda", persistent_workers=workers > 0)
    batches = _forever(loader)
    model = _cnn(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        images, labels = next(batches)  # the DataLoader's own span: enumerate(DataLoader)#...__next__
        with record_function("to_device"):
            images = images.to(device, non_blocking=non_blocking)
            labels = labels.to(device, non_blocking=non_blocking)
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        return loss

    return step, ()


def _forever(loader) -> Any:
    """The loader's batches, epoch after epoch, from one iterator object per epoch."""
    return itertools.chain.from_iterable(iter(loader) for _ in itertools.count())


KINDS["input"] = Kind(
    _build_input,
    describe=lambda p: (f"a small CNN on {p['batch']} images of {p['size']}x{p['size']} per step from a DataLoader with "
                        f"{p['workers']} worker(s)" + (", pinned memory" if p["pin"] else "")
                        + (", non-blocking copies" if p["non_blocking"] else "")),
    stem=lambda p: (f"input-w{p['workers']}" + ("-pin" if p["pin"] else "") + ("-nb" if p["non_blocking"] else "")
                    + (f"-{p['size']}" if p["size"] != 128 else "")),
    bytes_needed=lambda p, s: 8 * p["batch"] * 3 * p["size"] ** 2 * 4 + 50_000_000,
    smaller=_halve("batch", above=1),
    timed=False,
)


def parameter_bytes(w: Workload) -> dict[str, int]:
    """What a training step's state costs, from its sizes (float32): weights, gradients, AdamW's two moments."""
    p = w.p
    n = p["layers"] * (2 * p["dim"] * p["hidden"] + p["dim"] + p["hidden"]) + 10 * p["dim"] + 10
    return {"parameters": 4 * n, "gradients": 4 * n, "optimizer state": 8 * n, "count": n}

