"""What every workload is: its kinds' registry (:data:`KINDS`), the :class:`Workload` record, the dtypes and the
errors. :mod:`helpers.runs.workload` (volume one's kinds) and :mod:`helpers.runs.training` (volume two's) add their kinds to
the registry; both import this module, which imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..facts.hardware import has_native_bf16

DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


class WorkloadError(RuntimeError):
    """A workload that cannot run here (memory, dtype, backend); the message says what to do."""


class NotEnoughMemory(WorkloadError):
    def __init__(self, message: str, fits: "Workload | None"):
        super().__init__(message)
        self.fits = fits


class BackendUnavailable(WorkloadError):
    """An attention backend this GPU or this torch does not offer."""


def pick_dtype(device: str, capability: tuple[int, int] | None = None) -> str:
    """bf16 on GPUs that have it (sm_80 and newer), fp16 on older GPUs (T4), fp32 on the CPU.

    ``torch.cuda.is_bf16_supported()`` says yes on a T4 because bf16 can be
    emulated there, which is slow; the compute capability is the honest test.
    """
    if device == "cpu":
        return "fp32"
    if capability is None:
        import torch

        capability = torch.cuda.get_device_capability()
    return "bf16" if has_native_bf16(capability) else "fp16"


def dtype_note(device: str, capability: tuple[int, int] | None) -> str | None:
    """A sentence for the learner when the dtype differs from the article's bf16."""
    d = pick_dtype(device, capability)
    if d == "fp16":
        return ("This GPU has no native bfloat16 (it needs compute capability 8.0; this one is "
                f"{capability[0]}.{capability[1]}), so the series uses float16: same size, same kernels' shape.")
    if d == "fp32":
        return "On the CPU the series uses float32: the CPU has no fast bfloat16 matrix multiply."
    return None


def torch_dtype(name: str):
    import torch

    return getattr(torch, DTYPE_NAMES[name])


def itemsize(name: str) -> int:
    return 4 if name == "fp32" else 2


Params = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """Everything the series knows about one kind of workload, each as a function of its parameters."""

    build: Callable[..., tuple[Callable[..., Any], tuple]]  # (device, torch dtype, **params) -> (step, inputs)
    describe: Callable[[Params], str]  # the workload in words, for messages and manifests
    stem: Callable[[Params], str]  # the first part of the article's tag: "64" for a 64x64 matmul_add
    bytes_needed: Callable[[Params, int], int]  # (params, bytes per element) -> a generous GPU memory estimate
    smaller: Callable[[Params], Params | None]  # the parameters that halve it, or None when it cannot shrink
    stack: bool = False  # profiled with_stack=True: each op's Python line in the trace (notebook 16)
    # timed alone without the profiler before a warm run is profiled (helpers.runs.timing). Not for steps fed by a
    # DataLoader: three warm-up steps and a lone timing would meet batches the workers prepared ahead; notebooks 14 and
    # 16 time those steps in turn instead (comparisons), and read no lone timing.
    timed: bool = True


#: every kind of workload, by the name :attr:`Workload.kind` holds
KINDS: dict[str, Kind] = {}


def _halve(param: str, above: int) -> Callable[[Params], Params | None]:
    """Shrink by halving one parameter, as long as it is above ``above``."""
    return lambda p: {param: p[param] // 2} if p[param] > above else None


@dataclass(frozen=True)
class Workload:
    """One thing to profile.

    ``kind`` names its entry in :data:`KINDS`, ``params`` its arguments,
    ``label`` the ``record_function`` annotation each step runs under.
    """

    kind: str
    params: tuple[tuple[str, Any], ...]
    label: str
    no_grad: bool = False

    @property
    def p(self) -> Params:
        return dict(self.params)

    @property
    def _kind(self) -> Kind:
        k = KINDS.get(self.kind)
        if k is None:
            raise WorkloadError(f"no workload kind {self.kind!r}: the series knows {', '.join(sorted(KINDS))}")
        return k

    @property
    def description(self) -> str:
        """The workload in words, for messages and manifests."""
        return self._kind.describe(self.p)

    @property
    def stem(self) -> str:
        """The first part of the article's tag: ``64`` for a 64x64 matmul_add."""
        return self._kind.stem(self.p)

    def bytes_needed(self, dtype: str) -> int:
        """A generous estimate of the GPU memory the workload allocates."""
        return self._kind.bytes_needed(self.p, itemsize(dtype))

    def smaller(self) -> "Workload | None":
        """The same workload at half the size, or None when it cannot shrink."""
        changes = self._kind.smaller(self.p)
        return None if changes is None else _make(self.kind, self.label, self.no_grad, **{**self.p, **changes})

    @property
    def timed(self) -> bool:
        """Whether a warm run of it is timed alone without the profiler before it is profiled."""
        return self._kind.timed

    @property
    def with_stack(self) -> bool:
        """Whether its profiled steps record the Python stack (``with_stack=True``)."""
        return self._kind.stack

    def build(self, device: str, dtype: str) -> tuple[Callable[..., Any], tuple]:
        """The function to call each step and its inputs, allocated on ``device``."""
        return self._kind.build(device, torch_dtype(dtype), **self.p)


def _make(kind: str, label: str, no_grad: bool = False, **params: Any) -> Workload:
    return Workload(kind, tuple(sorted(params.items())), label, no_grad)
