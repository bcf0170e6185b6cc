"""The cheat sheet's rows: one table that ``diagnose``, ``docs/cheat-sheet.md`` and the notebooks read.

Each row is a pattern a learner may see in a trace, what it usually means,
what to try, the ``diagnose`` rules that find it (none for a reading hint,
which names where the series shows it instead) and the notebooks that
teach it. ``diagnose`` takes each finding's notebook from here;
``tools/cheat_sheet.py`` writes the sheet's table from here (a test checks
the two agree). Like the facts, it imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ROOT, Word


class RuleId(Word):
    """A diagnose rule's id, as ``diagnose``, ``--json``, the cheat sheet and the exam's key name it."""

    CPU_BOUND = "cpu-bound"
    GPU_BOUND = "gpu-bound"
    COLD_START = "cold-start"
    PROFILER_BUFFER = "profiler-buffer"
    PROFILER_FLUSH = "profiler-flush"
    OCCUPANCY_QUERIES = "occupancy-queries"
    KERNEL_VARIANCE = "kernel-variance"
    ADDMM_BIAS_COPY = "addmm-bias-copy"
    COMPILE_CACHE_HITS = "compile-cache-hits"
    RECOMPILES = "recompiles"
    GRAPH_BREAKS = "graph-breaks"
    COMPILE_TAX = "compile-tax"
    TINY_KERNELS = "tiny-kernels"
    HIDDEN_SYNC = "hidden-sync"
    FP32_GEMM = "fp32-gemm"
    UNFUSED_OPTIMIZER = "unfused-optimizer"
    MEMORY_SPIKE = "memory-spike"
    INPUT_BOUND = "input-bound"
    PAGEABLE_COPIES = "pageable-copies"
    INSIDE_COLLECTIVES = "inside-collectives"
    COMMUNICATION_BOUND = "communication-bound"
    LOW_OVERLAP = "low-overlap"
    STRAGGLER = "straggler"
    LONG_CALL = "long-call"
    GPU_BEHIND = "gpu-behind"
    NOT_RECORDED = "not-recorded"
    GRAPH_CAPTURE = "graph-capture"
    GRAPH_REPLAY = "graph-replay"
    MATH_ATTENTION = "math-attention"


@dataclass(frozen=True)
class Row:
    """One row of the cheat sheet."""

    you_see: str
    means: str
    tries: str
    rules: tuple[RuleId, ...]  # the diagnose rules that find it; empty for a reading hint
    where: str | None  # for a reading hint: where the series shows it ("(dispatch chain)")
    notebooks: tuple[str, ...]  # "02", ...: the notebooks that teach it, the first one first


ROWS: tuple[Row, ...] = (
    Row(
        you_see='Self CUDA total far below Self CPU total; GPU lane mostly empty',
        means='**CPU-bound**: the GPU waits for the CPU to prepare and launch work; `diagnose` names what kept the '
              "CPU busy (the DataLoader, compiling, set-up, waits, the optimizer) and what its fix should gain",
        tries='more work per launch (bigger batches), fewer launches (fusion, `torch.compile`, CUDA graphs); faster'
              ' kernels shorten the step only where the CPU waits for them (a `.item()` or a synchronize each step): '
              '`diagnose` says what each fix should gain',
        rules=(RuleId.CPU_BOUND,), where=None, notebooks=('02',)),
    Row(
        you_see='Self CUDA total comparable to Self CPU total; GPU lane packed',
        means='**GPU-bound**: kernels set the pace',
        tries="look at the longest kernels: how near each comes to the GPU's peaks (the roofline in `summarize`), "
              'then shapes, dtype, kernel choice, fusion',
        rules=(RuleId.GPU_BOUND,), where=None, notebooks=('02',)),
    Row(
        you_see='The first recorded step is much wider than the rest; a gap between the annotation and its first op',
        means="**one-time costs** in the recording: the program's start-up (the set-up calls inside the step name "
              "it), or, after warm-up, possibly the profiler's own first recorded step (notebook 03 tests which)",
        tries='warm up before profiling; `schedule(wait=1, warmup=1, ...)`; then check the trace again',
        rules=(RuleId.COLD_START,), where=None, notebooks=('03',)),
    Row(
        you_see='`Activity Buffer Request`',
        means="CUPTI's own overhead record: time spent getting a buffer for GPU activity records ([CUPTI activity "
              'API](https://docs.nvidia.com/cupti/api/group__CUPTI__ACTIVITY__API.html), '
              '`CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST`)',
        tries='not your code; `wait`/`warmup` move it out of the recorded steps',
        rules=(RuleId.PROFILER_BUFFER,), where=None, notebooks=('03',)),
    Row(
        you_see='A long `cudaDeviceSynchronize` at the very end',
        means="the profiler's own synchronize before it stops ([`torch.autograd.profiler.profile.__exit__`](https:/"
              '/github.com/pytorch/pytorch/blob/main/torch/autograd/profiler.py)). GPU busy during it: the CPU ran '
              "ahead and waits for queued work. GPU idle during it: the time is not GPU work at all (the article's "
              'A100: 1.78 ms over 26 µs of GPU work at 64 × 64; on the H200 reference set the same call at 64 × 64 '
              'is a small fraction of that: notebook 04 reads it for your GPU)',
        tries="do not count it against your code; judge the run by the GPU's idle share over the whole window",
        rules=(RuleId.PROFILER_FLUSH,), where=None, notebooks=('04',)),
    Row(
        you_see='Long arrows from launch calls to kernels on a busy GPU',
        means='the CPU runs ahead and kernels queue: good',
        tries='nothing; worry about long arrows on an *idle* GPU',
        rules=(), where='(launch latency in `summarize`)', notebooks=('04',)),
    Row(
        you_see='`expand`, `reshape`, `view`, `_unsafe_view` around `aten::bmm`',
        means='a batched matmul: views (metadata only) around one batched GEMM',
        tries='fine on the GPU; on a CPU-bound run each op still costs CPU time',
        rules=(), where='(dispatch chain)', notebooks=('05',)),
    Row(
        you_see='`cudaOccupancy...` calls',
        means="a **library working out how its kernels fit an SM**: before every GEMM launch on the article's A100;"
              " on the H200 reference set's GEMMs only in the first step, while cuBLAS sets itself up (a sort's CUB"
              " kernels, from NVIDIA's library of parallel primitives, ask every step)",
        tries='every step: a CPU cost per call, and the kernels after them are library kernels to judge by '
              'resources and throughput; first step only: set-up, keep it out of the recording',
        rules=(RuleId.OCCUPANCY_QUERIES,), where=None, notebooks=('06',)),
    Row(
        you_see='The launch call (`cudaLaunchKernel`, `cuLaunchKernel`, `cuLaunchKernelEx`, `hipLaunchKernel`)',
        means='only which API the library chose: it does **not** tell heavy from light (on the H200 reference set '
              "Inductor's light Triton kernels use `cuLaunchKernel`, flash attention `cudaLaunchKernel`)",
        tries="read the kernel's name and resources instead",
        rules=(), where='(launch calls in `summarize`)', notebooks=('04', '06')),
    Row(
        you_see='Low theoretical occupancy on a GEMM or flash attention',
        means='often a design choice: tiles kept in registers and shared memory instead of many warps',
        tries='judge the kernel by its throughput, not its occupancy',
        rules=(), where='(resources in `summarize`)', notebooks=('06', '10')),
    Row(
        you_see='`est. achieved occupancy %` of 0, or `blocks per SM` far from what fits',
        means="Kineto's own figures (Kineto: the library inside torch.profiler that records the GPU's activity) "
              '([source](https://github.com/pytorch/kineto/blob/main/libkineto/src/CudaDeviceProperties.cpp)): '
              '*blocks per SM* is grid size over SM count; the estimate can be 0 for kernels that need more than '
              'the default 48 KiB of shared memory per block',
        tries='compute theoretical occupancy from registers, shared memory and block size',
        rules=(), where='(notebook 06)', notebooks=('06',)),
    Row(
        you_see='Identical kernels with different durations',
        means="causes to test, not assume: the article lists clocks at idle and boost, heat, power management and "
              'driver housekeeping; other work on the same GPU is one more',
        tries='quote the median; study the outliers apart',
        rules=(RuleId.KERNEL_VARIANCE,), where=None, notebooks=('07',)),
    Row(
        you_see='A `Memcpy DtoD` right before a GEMM, under `aten::addmm`',
        means='**addmm with a full-matrix bias**: ATen copies the bias into the output, then the GEMM adds its '
              "product onto it (β = 1, the GEMM's factor on what the output already holds) "
              '([`addmm_out_cuda_impl`](https://github.com/pytorch/pytorch/blob/main/aten/sr'
              'c/ATen/native/cuda/Blas.cpp))',
        tries="expected from `torch.addmm` or compile's rewrite of matmul + add with a 2-D bias; a 1-D bias (as "
              "`nn.Linear` has) can go to the GEMM's bias epilogue (the step at the end of a GEMM kernel that adds "
              "the bias as it writes the output) with no copy",
        rules=(RuleId.ADDMM_BIAS_COPY,), where=None, notebooks=('08', '09')),
    Row(
        you_see='The same `CompiledFxGraph <hash>` every step',
        means='compile cache hits: one graph reused',
        tries='nothing; read the generated code by its hash',
        rules=(RuleId.COMPILE_CACHE_HITS,), where=None, notebooks=('08',)),
    Row(
        you_see='`Torch-Compiled Region: F/N`',
        means="Dynamo's compile id: frame F, compiled for the N-th time after the first ([`CompileId` in "
              'torch/_guards.py](https://github.com/pytorch/pytorch/blob/main/torch/_guards.py)). **N above 0 is a '
              'recompile** (shapes, dtypes or devices changed); several frames (`0/0`, `1/0`) can be **graph '
              'breaks** (or separately compiled functions). Several `CompiledFxGraph` hashes alone can mean either',
        tries='`TORCH_LOGS=recompiles` or `TORCH_LOGS=graph_breaks`; mark dynamic dimensions or keep shapes fixed',
        rules=(RuleId.RECOMPILES, RuleId.GRAPH_BREAKS), where=None, notebooks=('08',)),
    Row(
        you_see='A compiled region costing more CPU time than the GPU work it launches',
        means='the **compile tax** on tiny work',
        tries='confirm it without the profiler (`torch.utils.benchmark.Timer`), since the profiler inflates CPU '
              'time per op; then compile bigger graphs, batch work, or try `mode="reduce-overhead"` and measure',
        rules=(RuleId.COMPILE_TAX,), where=None, notebooks=('08',)),
    Row(
        you_see='Many kernels shorter than their own launch calls',
        means='launch-bound: tiny kernels',
        tries='fuse (a `triton_poi_fused_...` kernel replaces several), batch, CUDA graphs',
        rules=(RuleId.TINY_KERNELS,), where=None, notebooks=('08', '09')),
    Row(
        you_see='`aten::t` with no kernel under `aten::linear`',
        means='a transpose that only changes strides (metadata)',
        tries='nothing',
        rules=(), where='(dispatch chain)', notebooks=('09',)),
    Row(
        you_see='`aten::_scaled_dot_product_attention_math` with many kernels under it',
        means="**the math SDPA backend**: attention built from separate kernels, not one fused kernel",
        tries="a fused backend (flash, memory-efficient, cuDNN: `torch.nn.attention.sdpa_kernel`); find out why "
              "the fused ones were not picked (dtype, head size, mask, dropout, a GPU they do not support)",
        rules=(RuleId.MATH_ATTENTION,), where=None, notebooks=('10',)),
    Row(
        you_see='A clean trace with one opaque fused kernel (an SDPA backend)',
        means='the work moved inside one library call the profiler cannot split; fewer kernels need not mean less '
              'CPU time',
        tries='compare CPU and GPU time per call across backends: the ranking differs by GPU (the series review: '
              "flash fastest in the article's run; cuDNN fastest by GPU time per call on the H200 reference set)",
        rules=(), where='(per-call times)', notebooks=('10',)),
    Row(
        you_see='`autograd::engine::evaluate_function: AddmmBackward0` and its kin on a second CPU thread '
                '(`pt_autograd_0`)',
        means='**backward**: on CUDA, autograd runs the backward nodes on a thread of its own; each node shares its'
              ' `Sequence number` with the forward op that recorded it (`AddmmBackward0` with `aten::addmm`)',
        tries='read the GPU time each node launched next to its forward op (`step_facts.backward_ops`)',
        rules=(), where='(backward in `step_facts`)', notebooks=('12',)),
    Row(
        you_see='`cudaStreamSynchronize` inside the step under `aten::_local_scalar_dense`, `aten::is_nonzero`, '
                '`aten::nonzero` or `aten::_to_copy`, the GPU lane empty right after it',
        means='a **hidden synchronization**: a line that needs a value from the GPU (`.item()`, `if tensor:`, a '
              'boolean mask, `.cpu()`) makes the CPU wait until the GPU has run everything queued; then the GPU '
              'idles until the CPU launches again. A copy call may wait too when pageable memory is on one side: '
              'one to pageable memory returns when the copy is done, one from it may return once its bytes are '
              "staged ([CUDA's rules](https://docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html))",
        tries='read values every N steps, not every step; tensor ops instead of Python branches on tensors; '
              'fixed-size ops instead of boolean masks; [`torch.cuda.set_sync_debug_mode("warn")`](https://docs.pyt'
              'orch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html) names the lines',
        rules=(RuleId.HIDDEN_SYNC,), where=None, notebooks=('12',)),
    Row(
        you_see='GEMM kernels named `simt_sgemm`, `ampere_sgemm`, `..._ffma_...` or `gemm_f32f32_f32f32_f32` on a GPU'
                ' of compute capability 8.0 or later',
        means="**float32 GEMMs on the CUDA cores**, likely because TF32 is off for matmuls (PyTorch's default). "
              'With TF32 the names say `tf32` or `tensorop_s1688gemm` (H200 reference set: '
              '`cutlass_80_simt_sgemm_...` in the fp32 run, `sm90_xmma_gemm_f32f32_tf32f32_...` in the tf32 run, '
              '`nvjet_...`, kernels of NVIDIA\'s newer GEMM library, under bf16 autocast)',
        tries='[`torch.set_float32_matmul_precision("high")`](https://docs.pytorch.org/docs/stable/generated/torch.'
              "set_float32_matmul_precision.html) if float32's last bits do not matter, or autocast to bf16; if the"
              ' GEMMs were meant to be 16-bit, find where their inputs became float32',
        rules=(RuleId.FP32_GEMM,), where=None, notebooks=('12',)),
    Row(
        you_see='`Optimizer.step#AdamW.step` holding `aten::_foreach_*` ops (foreach) or an `aten::lerp_`, '
                '`addcdiv_`... per parameter (for-loop)',
        means='an **unfused optimizer**: the update takes several kernels a step (H200 reference set, 10 '
              'parameters: 80 pieces of GPU work in the for-loop, 8 foreach, 2 with `fused=True`)',
        tries='[`AdamW(..., fused=True)`](https://docs.pytorch.org/docs/stable/generated/torch.optim.AdamW.html) '
              '(Adam too); measure the step before and after',
        rules=(RuleId.UNFUSED_OPTIMIZER,), where=None, notebooks=('12',)),
    Row(
        you_see='`[memory]` instant events (`profile_memory=True`)',
        means="the allocator's totals after each allocation and free: `summarize` reports each device's peak "
              'allocated and reserved from them (H200 reference set: equal to `torch.cuda.max_memory_allocated()` '
              'and `max_memory_reserved()` over the same steps)',
        tries='find the moment of the peak (it falls in backward on the reference set); activation checkpointing '
              'lowers it',
        rules=(), where='(memory in `summarize`)', notebooks=('13',)),
    Row(
        you_see='In the `[memory]` events, one allocation (or one op\'s allocations) holding a large share of the '
                'peak allocated memory',
        means='a **memory spike**: one temporary far larger than what the program holds (an intermediate made whole, '
              'a broadcast\'s for one, before the reduction that consumes it); it sets the peak, and the kernels that '
              'write and read it take GPU time too',
        tries='compute it in chunks, or with an op that never builds it ([`torch.cdist`](https://docs.pytorch.org/'
              'docs/stable/generated/torch.cdist.html) for distances; `torch.compile` can fuse an elementwise chain '
              'into the reduction after it); for activations, [checkpointing](https://docs.pytorch.org/docs/stable/'
              'checkpoint.html)',
        rules=(RuleId.MEMORY_SPIKE,), where=None, notebooks=('13',)),
    Row(
        you_see='`enumerate(DataLoader)#..._next__` spans taking much of each step, the GPU lane empty under them',
        means='**input-bound**: the GPU waits for the next batch; `_SingleProcessDataLoaderIter` means the main '
              'process makes the batches (`num_workers=0`). The table then says *CPU-bound*, but the CPU time is '
              "the DataLoader's, so launch-side fixes miss the cause",
        tries='[`DataLoader(num_workers=N, persistent_workers=True)`](https://docs.pytorch.org/docs/stable/data.htm'
              'l#single-and-multi-process-data-loading), cheaper samples; then check that the span shrinks to a '
              'queue read',
        rules=(RuleId.INPUT_BOUND,), where=None, notebooks=('14',)),
    Row(
        you_see='`Memcpy HtoD (Pageable -> Device)`',
        means='copies from **pageable** host memory: the driver stages them through a pinned buffer, the CPU '
              'waits at least until each is staged, and they run slower than from pinned memory (H200 reference '
              'set, 6 MiB batches: 9.2 GB/s pageable, 28.4 GB/s pinned)',
        tries='`DataLoader(pin_memory=True)` and `.to(device, non_blocking=True)` '
              '([tutorial](https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html): pinning each '
              'tensor yourself costs time too)',
        rules=(RuleId.PAGEABLE_COPIES,), where=None, notebooks=('14',)),
    Row(
        you_see="One rank's trace whose collectives (NCCL kernels, or a CPU backend's `gloo:` spans) fill half of "
                "its recorded window or more",
        means="**inside collectives**: a collective's kernel runs until every rank has entered it, so its time "
              "holds the wait for other ranks as well as the transfer; one rank's trace cannot tell them apart, so "
              "it gets no CPU- or GPU-bound verdict. Where collectives fill less than half of the window (the GPU "
              "idle most of it), the trace is read as any other, and the next row may apply",
        tries="read every rank's trace together (`python -m helpers diagnose FOLDER`): a straggler comes first "
              'there, the rest is worded as what remains once it is fixed',
        rules=(RuleId.INSIDE_COLLECTIVES,), where=None, notebooks=('15',)),
    Row(
        you_see="A rank (its own trace, or one of a folder's) whose GPU spends half of its busy time or more in "
                "NCCL kernels with nothing beside them",
        means='**communication-bound**: the rank waits on communication (transfer, or other ranks); its time in '
              'collectives is not compute, and `summarize` leaves it out of the GPU-bound verdict',
        tries="read every rank's trace together (`python -m helpers diagnose FOLDER`) to see who waits for whom; "
              "overlap collectives with compute ([DDP's buckets](https://pytorch.org/docs/stable/notes/ddp.html))",
        rules=(RuleId.COMMUNICATION_BOUND,), where=None, notebooks=('15',)),
    Row(
        you_see='NCCL kernels alone on the GPU timeline, no compute kernels beside them',
        means='**low overlap**: communication not hidden behind compute',
        tries="launch collectives while independent compute remains (`async_op=True`, `wait()` late; DDP's "
              '`bucket_cap_mb`)',
        rules=(RuleId.LOW_OVERLAP,), where=None, notebooks=('15',)),
    Row(
        you_see='The same collective lasts longer on some ranks than on one other',
        means='a **straggler**: the rank that enters last makes the others wait inside the collective (`diagnose '
              'FOLDER` matches collectives across ranks on one clock)',
        tries='look at what the late rank does before it: its GPU work, CPU side, input; test whether the work is '
              'split evenly',
        rules=(RuleId.STRAGGLER,), where=None, notebooks=('15',)),
    Row(
        you_see='One runtime call (a first `cudaLaunchKernel`, `cudaMalloc`, a device query) holding a large share of '
                'the window while the GPU idles',
        means="a **one-time cost**: loading the GPU code's modules, creating the context, reserving memory",
        tries='warm up before recording; keep set-up out of the recorded steps',
        rules=(RuleId.LONG_CALL,), where=None, notebooks=('03',)),
    Row(
        you_see='The GPU idle although its next kernel was launched long before',
        means='**the GPU started late**: work queued behind something the trace does not show as work (another '
              "stream's event, a graph's set-up, the recording starting before the GPU was free): not the CPU's idle "
              'time',
        tries="look at what ran before the recording, and at stream and event waits; don't fix the CPU for it",
        rules=(RuleId.GPU_BEHIND,), where=None, notebooks=('04',)),
    Row(
        you_see='Launch calls and copies on the CPU but no GPU lane; or GPU lanes and no ATen op; or one or two '
                'kernels in all; or, with no GPU work, long stretches with no op on any CPU thread',
        means='**an activity not recorded**, or too little of it: the GPU (or the CPU) side of the recording is '
              'missing or nearly empty, so the idle time cannot be read; or the CPU ran what the profiler does not '
              'record (Python between ops, a sleep, a wait on input)',
        tries='`activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]`; check that CUPTI (or roctracer) loads; '
              '`with_stack=True` records the Python between ops',
        rules=(RuleId.NOT_RECORDED,), where=None, notebooks=('01',)),
    Row(
        you_see='`cudaStreamBeginCapture`, `...GetCaptureInfo`, `capture_` labels; or `cudaGraphLaunch` with many '
                'kernels each',
        means='**CUDA graphs**: a trace of a graph being captured (a one-time cost, launches recorded, not run), or of '
              'its replays (one launch runs the whole graph)',
        tries="read the steady step from the replays; don't read a capture's CPU time as the step's",
        rules=(RuleId.GRAPH_CAPTURE, RuleId.GRAPH_REPLAY), where=None, notebooks=('08',)),
)

#: the verdicts on a run's CPU/GPU balance, as the lessons offer them
VERDICTS = {RuleId.CPU_BOUND: "CPU-bound: the GPU waits for the CPU",
            RuleId.GPU_BOUND: "GPU-bound: the kernels set the pace"}


def notebook_of(rule: RuleId) -> str:
    """The notebook that teaches a diagnose rule (the first of its row's)."""
    for row in ROWS:
        if rule in row.rules:
            return row.notebooks[0]
    raise KeyError(f"{rule}: no row of the cheat sheet (helpers/advice/rulebook.py) names this rule")


def rule_ids() -> list[RuleId]:
    """Every diagnose rule the sheet lists, in the sheet's order."""
    return [r for row in ROWS for r in row.rules]


def _notebook_file(number: str) -> str:
    """``notebooks/NN_name.ipynb``'s name for a row's link: read from the folder, so that a new notebook needs no
    entry here."""
    found = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    if not found:
        raise KeyError(f"{number}: a row of the cheat sheet names a notebook that notebooks/ does not hold")
    return found[0].name


def markdown_table() -> str:
    """The sheet's table, as docs/cheat-sheet.md holds it."""
    lines = ["| you see | it usually means | try | rule | taught in |", "| --- | --- | --- | --- | --- |"]
    for row in ROWS:
        rule = ", ".join(f"`{r}`" for r in row.rules) if row.rules else (row.where or "")
        taught = ", ".join(f"[{n}](../notebooks/{_notebook_file(n)})" for n in row.notebooks)
        lines.append(f"| {row.you_see} | {row.means} | {row.tries} | {rule} | {taught} |")
    return "\n".join(lines)
