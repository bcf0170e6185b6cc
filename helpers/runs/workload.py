"""The workloads the series profiles, built for a device and a dtype.

Part 1 of the article: ``add(matmul(x, w), b)`` on square matrices, and the
same on a batch of them. Part 2: one ``nn.Linear`` and a GeGLU MLP. Part 3:
attention written by hand and through ``scaled_dot_product_attention``. And a
small transformer block for the learner's own experiments.

Each kind of workload is one :class:`Kind` entry in :data:`KINDS`, beside its
constructor: how to build it, how to say it in words, its tag stem (the
article's file naming), how much GPU memory it needs (so that a size that
does not fit is refused before anything is allocated) and how to halve it.
Adding a workload is writing its constructor, its builder and that one entry.
"""

from __future__ import annotations

import math
from typing import Any

# Re-exported: the notebooks, lessons and runner import these from here.
from .workload_core import (DTYPE_NAMES, KINDS, BackendUnavailable, Kind, NotEnoughMemory, Params, Workload,
                            WorkloadError, _halve, _make, dtype_note, itemsize, pick_dtype, torch_dtype)


# --- Part 1 ------------------------------------------------------------------


def matmul_add(size: int = 64, batch: int | None = None, bias_1d: bool = False) -> Workload:
    """``add(matmul(x, w), b)`` with (size, size) inputs, or (batch, size, size).

    ``bias_1d=True`` makes ``b`` a vector of ``size`` values broadcast over the
    rows, the shape of ``nn.Linear``'s bias, instead of a full matrix.
    """
    if bias_1d:
        return _make("matmul_add", "matmul_add", size=size, batch=batch, bias_1d=True)
    return _make("matmul_add", "matmul_add", size=size, batch=batch)


def addmm(size: int = 4096) -> Workload:
    """``torch.addmm(b, x, w)``: what torch.compile turns matmul + add into."""
    return _make("addmm", "addmm", size=size)


def fn_matmul_add(x, w, b):
    """The article's function: a matrix multiply, then a bias add."""
    import torch

    return torch.add(torch.matmul(x, w), b)


def _build_matmul_add(device, dtype, size, batch=None, bias_1d=False):
    import torch

    shape = (batch, size, size) if batch else (size, size)
    x, w = (torch.randn(shape, device=device, dtype=dtype) for _ in range(2))
    b = torch.randn(size if bias_1d else shape, device=device, dtype=dtype)
    return fn_matmul_add, (x, w, b)


def _build_addmm(device, dtype, size):
    import torch

    x, w, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(3))
    return torch.addmm, (b, x, w)


def _square_bytes(p: Params, s: int) -> int:
    return 6 * p["size"] ** 2 * (p.get("batch") or 1) * s  # x, w, b, the product, the sum, a compile-time bias copy


KINDS["matmul_add"] = Kind(
    _build_matmul_add,
    describe=lambda p: (f"add(matmul(x, w), b) on {str(p['batch']) + ' x ' if p.get('batch') else ''}"
                        f"{p['size']}x{p['size']} matrices" + (", b a vector" if p.get("bias_1d") else "")),
    stem=lambda p: (f"{p['batch']}x{p['size']}" if p.get("batch") else str(p["size"])) + ("b1d" if p.get("bias_1d") else ""),
    bytes_needed=_square_bytes,
    smaller=_halve("size", above=64),
)
KINDS["addmm"] = Kind(
    _build_addmm,
    describe=lambda p: f"torch.addmm(b, x, w) on {p['size']}x{p['size']} matrices",
    stem=lambda p: f"addmm{p['size']}",
    bytes_needed=_square_bytes,
    smaller=_halve("size", above=64),
)


# --- Part 2 ------------------------------------------------------------------


def linear(batch: int = 1024, in_features: int = 32, out_features: int = 64) -> Workload:
    """One ``nn.Linear`` with bias: the article's Part 2 starting point."""
    return _make("linear", "linear_fwd", no_grad=True, batch=batch, in_features=in_features,
                 out_features=out_features)


def mlp(batch: int = 64, seq: int = 128, dim: int = 768, hidden: int = 3072) -> Workload:
    """A GeGLU MLP: ``down(gelu(gate(x)) * up(x))``, three Linears without bias."""
    return _make("mlp", "mlp_fwd", no_grad=True, batch=batch, seq=seq, dim=dim, hidden=hidden)


def _build_linear(device, dtype, batch, in_features, out_features):
    import torch

    layer = torch.nn.Linear(in_features, out_features, device=device, dtype=dtype)
    x = torch.randn(batch, in_features, device=device, dtype=dtype)
    return layer, (x,)


def _geglu_module(dim, hidden, device, dtype):
    import torch
    from torch import nn

    class GeGLUMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
            self.up = nn.Linear(dim, hidden, bias=False, device=device, dtype=dtype)
            self.down = nn.Linear(hidden, dim, bias=False, device=device, dtype=dtype)

        def forward(self, x):
            return self.down(torch.nn.functional.gelu(self.gate(x), approximate="tanh") * self.up(x))

    return GeGLUMLP()


def _build_mlp(device, dtype, batch, seq, dim, hidden):
    import torch

    model = _geglu_module(dim, hidden, device, dtype)
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
    return model, (x,)


KINDS["linear"] = Kind(
    _build_linear,
    describe=lambda p: f"nn.Linear({p['in_features']}, {p['out_features']}) on a batch of {p['batch']}",
    stem=lambda p: f"linear{p['batch']}x{p['in_features']}x{p['out_features']}",
    bytes_needed=lambda p, s: (p["batch"] * (p["in_features"] + 2 * p["out_features"])
                               + p["in_features"] * p["out_features"]) * s,
    smaller=_halve("batch", above=1),
)
KINDS["mlp"] = Kind(
    _build_mlp,
    describe=lambda p: f"GeGLU MLP, batch {p['batch']}, seq {p['seq']}, dim {p['dim']}, hidden {p['hidden']}",
    stem=lambda p: f"mlp{p['batch']}x{p['seq']}x{p['dim']}x{p['hidden']}",
    bytes_needed=lambda p, s: (p["batch"] * p["seq"] * (2 * p["dim"] + 4 * p["hidden"])
                               + 3 * p["dim"] * p["hidden"]) * s,
    smaller=_halve("batch", above=1),
)


# --- Part 3 ------------------------------------------------------------------

SDPA_BACKENDS = ("math", "efficient", "flash", "cudnn")


def attention(variant: str = "naive", batch: int = 8, heads: int = 16, seq: int = 1024,
              head_dim: int = 64) -> Workload:
    """Causal attention: ``naive`` (out-of-place mask), ``inplace``, or ``sdpa-<backend>``.

    Backends: ``sdpa-auto``, ``sdpa-math``, ``sdpa-efficient``, ``sdpa-flash``, ``sdpa-cudnn``.
    """
    ok = ("naive", "inplace", "sdpa-auto") + tuple(f"sdpa-{b}" for b in SDPA_BACKENDS)
    if variant not in ok:
        raise ValueError(f"attention variant {variant!r}: choose one of {', '.join(ok)}")
    label = "sdpa_fwd" if variant.startswith("sdpa") else "attn_fwd"
    return _make("attention", label, no_grad=True, variant=variant, batch=batch, heads=heads, seq=seq,
                 head_dim=head_dim)


def _attention_naive(q, k, v, mask):
    import torch

    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(mask, float("-inf"))  # out of place: a new tensor
    return torch.softmax(scores, dim=-1) @ v


def _attention_inplace(q, k, v, mask):
    import torch

    scores = q @ k.transpose(-2, -1)
    scores.div_(math.sqrt(q.shape[-1]))
    scores.masked_fill_(mask, float("-inf"))  # in place: no copy of the scores
    return torch.softmax(scores, dim=-1) @ v


def sdpa_context(backend: str):
    """A context manager that restricts SDPA to one backend (``auto``: no restriction)."""
    import contextlib

    if backend == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    return sdpa_kernel([which])


# What SDPA says when the chosen backend has no kernel for this GPU, dtype or shape
# (CUDA: "No available kernel. Aborting execution."; the CPU: "No viable backend ... was found").
_NO_BACKEND = ("no available kernel", "no viable backend", "not supported", "only supports")


def probe_failure(backend: str, e: RuntimeError) -> WorkloadError | None:
    """What a failed first SDPA call means, for a clear message; None: a real error, to raise as it is.

    A backend without a kernel here is :class:`BackendUnavailable`; running
    out of GPU memory is :class:`NotEnoughMemory`; a CUDA error (or anything
    else) is neither, and must not be reported as a missing backend.
    """
    import torch

    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return NotEnoughMemory(f"SDPA backend '{backend}' ran out of GPU memory on a tiny first call ({first}). "
                               "Free some memory (restart the kernel) and run the cell again.", None)
    cuda_error = isinstance(e, getattr(torch, "AcceleratorError", ())) or "CUDA error" in first
    if not cuda_error and any(words in first.lower() for words in _NO_BACKEND):
        return BackendUnavailable(f"SDPA backend '{backend}' is not available here: {first}")
    return None


def _build_attention(device, dtype, variant, batch, heads, seq, head_dim):
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.randn(batch, heads, seq, head_dim, device=device, dtype=dtype) for _ in range(3))
    if variant in ("naive", "inplace"):
        mask = torch.triu(torch.ones(seq, seq, device=device, dtype=torch.bool), diagonal=1)
        fn = _attention_naive if variant == "naive" else _attention_inplace
        return fn, (q, k, v, mask)
    backend = variant.split("-", 1)[1]

    def sdpa(q, k, v):
        with sdpa_context(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    try:  # ask once, outside the profiler, so an unavailable backend is a clear message
        sdpa(q[:1, :1, :64], k[:1, :1, :64], v[:1, :1, :64])
    except RuntimeError as e:
        clear = probe_failure(backend, e)
        if clear is None:
            raise
        raise clear from e
    return sdpa, (q, k, v)


def _attention_bytes(p: Params, s: int) -> int:
    b, h, n, d = p["batch"], p["heads"], p["seq"], p["head_dim"]
    scores = b * h * n * n * (4 if p["variant"] == "sdpa-math" else s)
    return 4 * b * h * n * d * s + 3 * scores + n * n * 4


KINDS["attention"] = Kind(
    _build_attention,
    describe=lambda p: (f"{p['variant']} causal attention, batch {p['batch']}, {p['heads']} heads, seq {p['seq']}, "
                        f"head dim {p['head_dim']}"),
    stem=lambda p: f"attn-{p['variant']}{p['seq']}",
    bytes_needed=_attention_bytes,
    smaller=_halve("batch", above=1),
)


# --- a small transformer block for notebook 11 -------------------------------------


def block(batch: int = 8, seq: int = 256, dim: int = 512, heads: int = 8, layers: int = 2) -> Workload:
    """A few pre-norm transformer blocks in plain torch (attention + GeGLU MLP)."""
    return _make("block", "block_fwd", no_grad=True, batch=batch, seq=seq, dim=dim, heads=heads, layers=layers)


def transformer_blocks(dim: int, heads: int, layers: int, device: str, dtype) -> Any:
    """``layers`` pre-norm blocks: LayerNorm, causal SDPA, LayerNorm, GeGLU MLP."""
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, device=device, dtype=dtype)
            self.qkv = nn.Linear(dim, 3 * dim, device=device, dtype=dtype)
            self.proj = nn.Linear(dim, dim, device=device, dtype=dtype)
            self.norm2 = nn.LayerNorm(dim, device=device, dtype=dtype)
            self.mlp = _geglu_module(dim, 4 * dim, device, dtype)

        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
            return x + self.mlp(self.norm2(x))

    return nn.Sequential(*[Block() for _ in range(layers)])


def _build_block(device, dtype, batch, seq, dim, heads, layers):
    import torch

    model = transformer_blocks(dim, heads, layers, device, dtype)
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
    return model, (x,)


KINDS["block"] = Kind(
    _build_block,
    describe=lambda p: (f"{p['layers']} transformer blocks, batch {p['batch']}, seq {p['seq']}, dim {p['dim']}, "
                        f"{p['heads']} heads"),
    stem=lambda p: f"block{p['batch']}x{p['seq']}x{p['dim']}",
    bytes_needed=lambda p, s: (p["batch"] * p["seq"] * p["dim"] * 12 + 12 * p["dim"] ** 2
                               + p["batch"] * p["heads"] * p["seq"] ** 2 * 2) * s,
    smaller=_halve("batch", above=1),
)


# --- your own model ---------------------------------------------------------------------


def custom(name: str, no_grad: bool = True) -> Workload:
    """Your own model, as :func:`helpers.runs.profiling.profile_model` profiles it: named, never built here."""
    return _make("custom", name, no_grad, name=name)


def _build_custom(device, dtype, name):
    raise WorkloadError(f"{name} is your own model: profile it with profile_model(model, inputs)")


KINDS["custom"] = Kind(
    _build_custom,
    describe=lambda p: f"your model {p['name']}",
    stem=lambda p: p["name"],
    bytes_needed=lambda p, s: 0,  # unknown: profile_model never checks it
    smaller=lambda p: None,
)


# --- memory ---------------------------------------------------------------------


def free_gpu_bytes() -> int:
    import torch

    free, _total = torch.cuda.mem_get_info()
    return int(free)


def check_fits(w: Workload, dtype: str, free_bytes: int | None = None) -> None:
    """Refuse a workload that would not fit in the GPU's free memory, naming one that does."""
    free = free_gpu_bytes() if free_bytes is None else free_bytes
    need = w.bytes_needed(dtype)
    if need <= free * 0.9:
        return
    fits = w.smaller()
    while fits is not None and fits.bytes_needed(dtype) > free * 0.9:
        fits = fits.smaller()
    hint = (f"; {fits.description} fits ({fits.bytes_needed(dtype) / 2**30:.2f} GiB)" if fits
            else "; free some memory (restart the kernel) or use a GPU with more memory")
    raise NotEnoughMemory(f"{w.description} in {dtype} needs about {need / 2**30:.2f} GiB of GPU memory, "
                          f"but only {free / 2**30:.2f} GiB is free{hint}", fits)


def fit(w: Workload, dtype: str, free_bytes: int | None = None) -> tuple[Workload, str | None]:
    """The workload, or a smaller one that fits, with a message saying it stepped down."""
    try:
        check_fits(w, dtype, free_bytes)
        return w, None
    except NotEnoughMemory as e:
        if e.fits is None:
            raise
        return e.fits, f"Stepped down: {e}. Using {e.fits.description} instead."


# --- memory traffic from shapes -------------------------------------------------------


def geglu_traffic(w: Workload, dtype: str) -> dict[str, int]:
    """Bytes the GeGLU MLP's elementwise part moves through HBM, eager against fused.

    Eager, ``gelu(g)`` reads ``g`` and writes its result; ``* u`` reads that
    result and ``u`` and writes the product: five tensors of (batch, seq,
    hidden) go through memory. Fused, one kernel reads ``g`` and ``u`` and
    writes the product: three. The difference is one write and one read of
    the intermediate ``gelu(g)``.
    """
    p = w.p
    one = p["batch"] * p["seq"] * p["hidden"] * itemsize(dtype)
    return {"intermediate": one, "eager": 5 * one, "fused": 3 * one, "saved": 2 * one}


from . import slow_loop, training
