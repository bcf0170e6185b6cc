"""The two-rank training loop of notebook 15, one process per rank, started by ``torchrun``.

    torchrun --standalone --nproc_per_node=2 -m helpers.runs.ddp_train --out traces/runs/ddp/base

Each rank trains the same MLP wrapped in ``DistributedDataParallel``, profiles
``wait=1, warmup=1, active=3`` steps and writes ``rank<r>.json`` (the profiler
adds the rank and world size to the trace's header). NCCL on GPUs, gloo on
the CPU. Options plant what the notebook asks about: ``--straggle-ms`` makes
rank 1 start every step late, ``--accumulate K`` runs K micro-batches per
optimizer step with gradient sync only on the last (``no_sync``),
``--bucket-mb`` sets DDP's gradient bucket size (left out: DDP's default).

The profiled steps come after ``--warm`` iterations (11 by default, plus the
schedule's wait and warmup steps): during its first ten iterations DDP's
reducer collects runtime statistics, timing its buckets with CUDA events it
waits on, which a trace of those iterations would show as syncs that a
longer job never has (``ddp_runtime_logging_sample_rate`` in
``torch/nn/parallel/distributed.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path


def _model(width: int, layers: int, device: str):
    from torch import nn

    blocks = []
    for _ in range(layers):
        blocks += [nn.Linear(width, width, device=device), nn.GELU()]
    return nn.Sequential(*blocks, nn.Linear(width, 10, device=device))


def main(argv: list[str] | None = None) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, record_function, schedule

    ap = argparse.ArgumentParser(prog="python -m helpers.runs.ddp_train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for rank<r>.json")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4)
    # A batch that keeps both GPUs busier than the CPUs that feed them: the ranks then enter each all-reduce when
    # their GPU gets there, not when one process's Python happens to (at batch 256 on two H200s the step was
    # CPU-bound and one rank entered a median 0.4-0.7 ms late, run after run, either rank).
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--bucket-mb", type=float, default=None,
                    help="DDP's bucket_cap_mb (left out: DDP's default, 25 MiB with a smaller first bucket)")
    ap.add_argument("--warm", type=int, default=11, help="iterations before the profiler's schedule starts")
    ap.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step (no_sync on all but the last)")
    ap.add_argument("--straggle-ms", type=float, default=0.0, help="one rank sleeps this long at the start of every step")
    ap.add_argument("--straggler", type=int, default=1, help="the rank that --straggle-ms delays")
    ap.add_argument("--straggle-label", default="straggle",
                    help="the record_function label around the delay (empty: none, a bare gap in the trace)")
    a = ap.parse_args(argv)

    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    device = f"cuda:{local}" if cuda else "cpu"
    torch.manual_seed(0)  # the same initial weights on every rank, as DDP expects
    buckets = {} if a.bucket_mb is None else {"bucket_cap_mb": a.bucket_mb}  # absent: DDP's own default
    model = DDP(_model(a.width, a.layers, device), device_ids=[local] if cuda else None, **buckets)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    torch.manual_seed(1 + rank)  # each rank its own data
    x = torch.randn(a.batch, a.width, device=device)
    y = torch.randint(0, 10, (a.batch,), device=device)

    def micro() -> None:
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        with record_function("backward"):
            loss.backward()

    def step() -> None:
        if a.straggle_ms and rank == a.straggler:
            with record_function(a.straggle_label) if a.straggle_label else contextlib.nullcontext():
                time.sleep(a.straggle_ms / 1e3)
        for k in range(a.accumulate):
            last = k == a.accumulate - 1
            if last:
                micro()
            else:
                with model.no_sync():  # gradients add up locally; no all-reduce until the last micro-batch
                    micro()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    for _ in range(a.warm):  # past DDP's first ten iterations (see the module's docstring)
        step()
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
        for n in range(5):
            with record_function("train_step"):
                step()
            if cuda and n == 1:  # the GPUs finish the unrecorded steps first: no all-reduce without its launch
                torch.cuda.synchronize()
            prof.step()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out / f"rank{rank}.json"))
    if rank == 0:
        grads = sum(p.numel() * p.element_size() for p in model.parameters())
        (out / "run.json").write_text(json.dumps({
            "world_size": dist.get_world_size(), "backend": dist.get_backend(), "device": device.split(":")[0],
            "gpu": torch.cuda.get_device_name(local) if cuda else None, "torch": torch.__version__,
            "gradient_bytes": grads, "bucket_mb": model.bucket_bytes_cap / 2**20,
            "bucket_mb_default": a.bucket_mb is None, "warm_iterations": a.warm, "accumulate": a.accumulate,
            "straggle_ms": a.straggle_ms, "width": a.width, "layers": a.layers, "batch": a.batch}) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
