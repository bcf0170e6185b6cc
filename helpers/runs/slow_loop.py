"""Notebook 16's training loop: five problems planted together, each with a fix that can be switched on alone.

The loop trains an MLP on batches from a DataLoader whose batches cost the CPU
work, as decoding and augmenting real data would. As written it has five
problems, each a kind the series taught, or one it did not name:

``loader``    the DataLoader loads in the main process, from pageable memory
              (fix: four worker processes, pinned memory, non-blocking copies);
``sync``      ``loss.item()`` every step, for a running loss (fix: keep the
              loss on the GPU and read it once at the end);
``constant``  the loss's class weights are built as a new tensor every step,
              from a Python list (fix: build them once, before the loop);
``tf32``      float32 matrix multiplies without TensorFloat-32 (fix: allow it);
``fused``     AdamW one parameter at a time (fix: ``fused=True``).

A workload names the fixes applied (:func:`slow_loop`), so that each
combination is a scenario of its own: recorded with the reference set and
timed without the profiler like every other. Its steps are profiled with
``with_stack=True``, so that the trace maps each op back to the line that ran it.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

from .workload_core import KINDS, Kind, Params, Workload, _halve, _make

#: the fixes, in the order the reference set applies them one on top of another
FIXES = ("loader", "sync", "constant", "fused", "tf32")

#: each fix in words, as the notebook offers it
FIX_WORDS = {
    "loader": "four DataLoader workers, pinned memory, non-blocking copies",
    "sync": "no loss.item() in the loop",
    "constant": "the class weights built once, before the loop",
    "fused": "fused AdamW",
    "tf32": "TF32 for float32 matrix multiplies",
}

#: the loss's class weights: a constant the loop as written rebuilds every step
CLASS_WEIGHTS = [1.0, 1.2, 0.8, 1.0, 1.5, 0.9, 1.1, 1.0, 0.7, 1.3]

WORKERS = 4


def slow_loop(fixes: tuple[str, ...] | list[str] = (), batch: int = 1024, dim: int = 1024, hidden: int = 4096, layers: int = 4,
              work: int = 40_000, feed_only: bool = False) -> Workload:
    """The loop with ``fixes`` applied (any of :data:`FIXES`); the rest of its problems stay.

    ``feed_only`` keeps only the loop's input: each step takes the next batch and copies it to the device, and
    trains nothing. Timed beside the whole step, it says whether the input sets the step's pace.
    """
    unknown = set(fixes) - set(FIXES)
    if unknown:
        raise ValueError(f"unknown fixes {sorted(unknown)}: the loop's fixes are {', '.join(FIXES)}")
    flags = {f: f in tuple(fixes) for f in FIXES}
    extra = {"feed_only": True} if feed_only else {}  # absent when False: the recorded scenarios' keys stay
    return _make("loop", "train_step", no_grad=False, batch=batch, dim=dim, hidden=hidden, layers=layers, work=work,
                 **flags, **extra)


def applied(w: Workload) -> tuple[str, ...]:
    """The fixes a loop workload has, in :data:`FIXES` order."""
    return tuple(f for f in FIXES if w.p.get(f))


class NoisyBatches:
    """Whole batches, each costing the CPU some Python work first (a decode and augmentation stand-in)."""

    def __init__(self, batch: int, dim: int, work: int, n: int = 64):
        self.batch, self.dim, self.work, self.n = batch, dim, work, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        acc = 0.0
        for k in range(self.work):  # pure Python, no calls: GIL-bound work that with_stack does not record per call
            acc += (k + i) ** 0.5
        g = torch.Generator().manual_seed(i)
        x = torch.rand(self.batch, self.dim, generator=g) * (acc > 0)
        return x, torch.randint(0, 10, (self.batch,), generator=g)


def _model(dim: int, hidden: int, layers: int, device: str):
    """Notebook 12's MLP, built where it is defined (helpers.runs.training)."""
    from .training import _mlp

    # the same blocks: the two notebooks' steps differ only in what this loop plants around them
    return _mlp(dim, hidden, layers, device)


def _build_loop(device, dtype, batch, dim, hidden, layers, work, loader, sync, constant, tf32, fused,
                feed_only=False):
    import torch
    import torch.nn.functional as F
    from torch.profiler import record_function
    from torch.utils.data import DataLoader

    cuda = device == "cuda"
    # DataLoader warns when it starts more workers than the machine suggests (2 on free Colab): the lesson times the
    # fix on the machine it runs on, and a step that gets no shorter there says so
    warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
    data = DataLoader(NoisyBatches(batch, dim, work), batch_size=None, num_workers=WORKERS if loader else 0,
                      pin_memory=loader and cuda, persistent_workers=loader)
    batches = itertools.chain.from_iterable(iter(data) for _ in itertools.count())
    model = _model(dim, hidden, layers, device)
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True) if fused and cuda else
           torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=fused))
    weight_once = torch.tensor(CLASS_WEIGHTS, device=device)
    losses: list[Any] = []

    # The loop as a learner would write it; each `if <fix>` line is one problem and its fix.
    def step():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        images, labels = next(batches)
        with record_function("to_device"):
            images = images.to(device, non_blocking=loader)
            labels = labels.to(device, non_blocking=loader)
        if feed_only:
            return labels
        with record_function("forward"):
            logits = model(images)
        with record_function("loss"):
            weight = weight_once if constant else torch.tensor(CLASS_WEIGHTS, device=device)
            loss = F.cross_entropy(logits, labels, weight=weight)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        if sync:
            losses.append(loss.detach())  # stays on the GPU; read once, after the loop
            del losses[:-100]
        else:
            losses.append(loss.item())  # a Python float for a running loss
            del losses[:-100]
        return loss

    return step, ()


def _loop_bytes(p: Params, s: int) -> int:
    from .training import _train_bytes  # notebook 12's step: the same MLP, AdamW and activations

    return _train_bytes(p, s) + 16 * 4 * p["batch"] * p["dim"]  # + batches in flight, pinned or not


KINDS["loop"] = Kind(
    _build_loop,
    describe=lambda p: (f"notebook 16's training loop (a {p['layers']}-block MLP, {p['dim']} to {p['hidden']}, batch "
                        f"{p['batch']})" + (", fixed: " + ", ".join(f for f in FIXES if p.get(f))
                                            if any(p.get(f) for f in FIXES) else ", as written")
                        + (", its input only" if p.get("feed_only") else "")),
    stem=lambda p: "loop" + "".join(f"-{f}" for f in FIXES if p.get(f)) + ("-feed" if p.get("feed_only") else "")
                   + (f"-b{p['batch']}" if p["batch"] != 1024 else ""),
    bytes_needed=_loop_bytes,
    smaller=_halve("batch", above=64),
    stack=True,
    timed=False,
)
