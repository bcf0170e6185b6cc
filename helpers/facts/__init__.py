"""The facts: the questions the notebooks ask, answered from one trace or a folder of ranks.

Each function takes a :class:`~helpers.reader.trace.Trace` and returns plain data
(dataclasses, lists, dicts): no printing, no plotting, no torch. Screens
(plots, widgets, the command line) read these facts; the facts know nothing
about screens. May import :mod:`helpers.reader` only.

``from helpers import facts`` is the public face: ``facts.steps``,
``facts.balance``, ``facts.kernels``, ``facts.summarize``... come from the
topic modules below (steps, balance, kernels, launches, compiled, occupancy,
summary, per_call). The other modules of the package are imported by name:
:mod:`.step_facts`, :mod:`.memory`, :mod:`.roofline` (with :mod:`.op_shapes` and
:mod:`.op_work`: the ops' recorded shapes and their work), :mod:`.kernel_kinds`,
:mod:`.kernel_names`, :mod:`.hardware` (the GPU table), :mod:`.gemm_table`,
:mod:`.gpu_calls`, :mod:`.one_trace`, :mod:`.python_lines`,
:mod:`.profile_table`, :mod:`.measure` (spreads and their grades),
:mod:`.collectives` (one rank's collectives, matched across ranks: the
straggler), :mod:`.ranks` (a folder of rank traces read together) and
:mod:`.text` (facts as readable text).
"""

from __future__ import annotations

from .steps import (Gap, Step, annotation_gaps, gpu_busy_per_step, gpu_work, main_thread, median_step_us, self_cpu_us,
                    steps, window)
from .balance import (Balance, COLLECTIVE_SHARE, CPU_BOUND, GPU_BOUND, GPU_BOUND_RATIO, IN_COLLECTIVES, balance,
                      collective_work)
from .kernels import (CopyStat, KernelStat, KindStat, Resources, copies, durations, kernels, kernels_by_kind, kind_of,
                      launching_op)
from .launches import (CallStat, Latency, Launch, Node, dispatch_chain, launch_latency, launches, ops_per_call,
                       runtime_calls)
from .compiled import (COMPILE_MARKERS, COMPILE_SPANS, COMPILE_SPAN_SUFFIX, CompileTime, Compiled, compile_time,
                       compiled, compiled_region_counts, recompiles)
from .occupancy import EstimateSplit, Occupancy, estimate_by_shared_memory, occupancy, theoretical_occupancy
from .summary import (Artifacts, BufferRequest, ClosingSync, CounterRanges, Summary, artifacts, counter_ranges,
                      summarize)
from .per_call import (GpuTwin, OpTime, calls_in, child_ops, gpu_time_by_top_op, gpu_time_per_call, gpu_time_under,
                       gpu_twin, gpu_work_per_step, label_spans, launches_under, occupancy_queries_by_step, op_times,
                       ops_around, per_call_us, self_cpu_without_closing_sync, settle_index, steady_spans, top_kernel,
                       work_per_call)
