"""Kineto's event categories, and the groups the reader and the facts work with.

Kineto has spelled its categories differently over the years (and ROCm
reuses the CUDA ones): :func:`category_group` maps each spelling to one group.
"""

from __future__ import annotations

CPU_OP = "cpu_op"
ANNOTATION = "annotation"
RUNTIME = "runtime"
DRIVER = "driver"
KERNEL = "kernel"
MEMCPY = "memcpy"
MEMSET = "memset"
GPU_ANNOTATION = "gpu_annotation"
PYTHON = "python"
OVERHEAD = "overhead"
SYNC = "sync"
#: CUPTI's range profiler (Kineto's ``cuda_profiler_range``): one range per kernel replayed to
#: collect hardware counters; its span is the collection window, not the kernel's run time
COUNTER_RANGE = "counter_range"
OTHER = "other"

_GROUP_OF_CAT = {
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "user_annotation": ANNOTATION,
    "cuda_runtime": RUNTIME,
    "runtime": RUNTIME,
    "cuda_driver": DRIVER,
    "driver": DRIVER,
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
    "gpu_user_annotation": GPU_ANNOTATION,
    "python_function": PYTHON,
    "overhead": OVERHEAD,
    "cuda_sync": SYNC,
    "cuda_profiler_range": COUNTER_RANGE,
}

#: groups whose events run on a GPU (they put a lane on the GPU side)
GPU_GROUPS = frozenset({KERNEL, MEMCPY, MEMSET, GPU_ANNOTATION, SYNC, COUNTER_RANGE})
#: groups that are device work proper (busy time, "Self CUDA")
GPU_WORK = frozenset({KERNEL, MEMCPY, MEMSET})
#: groups that the profiler table counts as CPU time
CPU_GROUPS = frozenset({CPU_OP, ANNOTATION, RUNTIME, DRIVER})


def category_group(cat: str) -> str:
    """The group (``kernel``, ``runtime``, ...) of a raw Kineto category."""
    return _GROUP_OF_CAT.get(cat.lower(), OTHER)
