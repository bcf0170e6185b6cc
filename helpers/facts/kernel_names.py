"""What a GPU kernel's name says: library, tensor cores or not, data types, tile.

Kernel names are written by the libraries that build the kernels, and each
library has its own scheme: CUTLASS's generator spells out the accumulator,
the instruction shape and the tile (``cutlass_80_tensorop_s1688gemm_128x256_16x3_nt_align4``),
NCCL's the collective, type, algorithm and protocol
(``ncclDevKernel_AllReduce_Sum_f32_RING_LL``), Inductor's the kind of Triton
kernel and the ops fused into it (``triton_poi_fused_add_cos_sin_0``). Other
schemes are private: NVIDIA does not document cuBLAS's own names (``nvjet_...``,
``sm90_xmma_...``), so only the parts a name labels itself (``tilesize128x64x32``)
or that a public source explains are read here, and the rest is left as
"the name does not say" rather than guessed.

:data:`RULES` is the one table of (pattern, meaning, source) the decoder
reads, so a page can cite where each reading comes from. :func:`decode` never
raises: a name no rule knows gives library ``"unknown"`` and no field.

No torch, no matplotlib: this runs wherever the trace reader runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

# --- sources ------------------------------------------------------------------------------------------------------

CUTLASS_GEMM_NAMES = "https://github.com/NVIDIA/cutlass/blob/main/python/cutlass_library/gemm_operation.py"
CUTLASS_TYPE_LETTERS = "https://github.com/NVIDIA/cutlass/blob/main/python/cutlass_library/library.py"
CUTLASS_PROFILER = "https://github.com/NVIDIA/cutlass/blob/main/media/docs/cpp/profiler.md"
CUTLASS_OPCLASS = "https://github.com/NVIDIA/cutlass/blob/main/include/cutlass/arch/mma.h"
CUTLASS_CONV = "https://github.com/NVIDIA/cutlass/blob/main/include/cutlass/conv/threadblock/implicit_gemm_multistage.h"
CUBLAS_PRIVATE = "https://github.com/NVIDIA/TensorRT-LLM/issues/1541"
NVJET_IS_CUBLAS = ("https://forums.developer.nvidia.com/t/switch-from-sm90-xmma-gemm-cublas-void-cutlass-kernel-"
                   "cutlass-80-tensorop-kernels-with-cuda-12-1-to-nvjet-tst-kernels-with-cuda-12-8/348958")
NVJET_TENSOR_CORES = "https://github.com/GindaChen/nsys-ai/pull/582"
BLAS_LETTERS = "https://www.netlib.org/lapack/lug/node24.html"
TF32_TENSOR_CORES = "https://docs.pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
WMMA = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#warp-matrix-functions"
WGMMA = "https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#asynchronous-warpgroup-level-matrix-instructions"
FFMA = "https://docs.nvidia.com/cuda/cuda-binary-utilities/index.html#instruction-set-reference"
COMPUTE_CAPABILITY = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities"
NCCL_NAMES = "https://github.com/NVIDIA/nccl/blob/master/src/device/generate.py"
NCCL_REPO = "https://github.com/NVIDIA/nccl"
INDUCTOR_NAMES = "https://github.com/pytorch/pytorch/blob/main/torch/_inductor/codegen/triton.py"
INDUCTOR_CATEGORIES = "https://github.com/pytorch/pytorch/blob/main/torch/_inductor/wrapper_benchmark.py"
INDUCTOR_TEMPLATES = "https://github.com/pytorch/pytorch/blob/main/torch/_inductor/select_algorithm.py"
FLASH_TRAITS = "https://github.com/Dao-AILab/flash-attention/blob/main/csrc/flash_attn/src/kernel_traits.h"
PYTORCH_FLASH = "https://github.com/pytorch/pytorch/tree/main/aten/src/ATen/native/transformers/cuda/flash_attn"
MEM_EFF = ("https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/transformers/cuda/mem_eff_attention/"
           "kernels/generate_kernels.py")
CUDNN = "https://docs.nvidia.com/deeplearning/cudnn/latest/"
ATEN_CUDA = "https://github.com/pytorch/pytorch/tree/main/aten/src/ATen/native/cuda"
ATEN_SUM = "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/ReduceSumProdKernel.cu"
ATEN_SOFTMAX = "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/PersistentSoftmax.cuh"
CUB = "https://nvidia.github.io/cccl/cub/"
FBGEMM = "https://github.com/pytorch/FBGEMM/tree/main/fbgemm_gpu"
TENSILE = "https://rocm.docs.amd.com/projects/Tensile/en/latest/src/conceptual/kernel-parameters.html"
PROFILER_MEMCPY = "https://github.com/pytorch/kineto/blob/main/libkineto/src/CuptiActivity.cpp"
_CK = "https://github.com/ROCm/composable_kernel/blob/{}/include/{}"
CK_KENTRY = _CK.format("8e22e1ae31bbf7086f69d8724e027676791d351a", "ck_tile/host/kernel_launch.hpp")
CK_RMSNORM = _CK.format("182454f48f9b537632f8acc224c061ada53941f1",
                        "ck_tile/ops/rmsnorm2d/pipeline/rmsnorm2d_fwd_pipeline_problem.hpp")
CK_CONV = _CK.format("8e22e1ae31bbf7086f69d8724e027676791d351a",
                     "ck/tensor_operation/gpu/device/impl/device_grouped_conv_fwd_multiple_abd_xdl_cshuffle.hpp")
CK_XDL = _CK.format("8e22e1ae31bbf7086f69d8724e027676791d351a", "ck/tensor_operation/gpu/warp/xdlops_gemm.hpp")
_MIOPEN = "https://github.com/ROCm/MIOpen/blob/2d1fd997a6fcf801ac4ca7a63e0656ef1cb9f488/src/{}"
MIOPEN_IGEMM = _MIOPEN.format("solver/conv/conv_asm_implicit_gemm_gtc_perf_config.cpp")
MIOPEN_TRANSPOSE = _MIOPEN.format("hip/batched_transpose_sol.cpp")
MIOPEN_IM2COL = _MIOPEN.format("kernels/MIOpenIm2d2Col.cl")
MIOPEN_SCALAR = _MIOPEN.format("ocl/tensorocl.cpp")
ROCPRIM = ("https://github.com/ROCm/rocm-libraries/blob/027c8b37b4231cae2f318f2776526865e848e291/projects/rocprim/"
           "rocprim/include/rocprim/config.hpp")
AITER_GROUPNORM = ("https://github.com/ROCm/aiter/blob/e4048607a535ace3a2b51ded31b1c8c2d45c0879/csrc/kernels/"
                   "groupnorm.cu")
MANGLED_BF16 = "https://reviews.llvm.org/D150913"
PYTORCH_AOTRITON = ("https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/transformers/hip/flash_attn/aot/"
                    "mha_all_aot.hip")
AOTRITON_FWD = "https://github.com/ROCm/aotriton/blob/fd4048c9dded60c69e9006cdb77c181781956f39/tritonsrc/fwd_kernel.py"
CUBLAS_DOCS = "https://docs.nvidia.com/cuda/cublas/index.html"
ATEN_INDEXING = "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/Indexing.cu"
VLLM_CSRC = "https://github.com/vllm-project/vllm/tree/main/csrc"
VLLM_CACHE = "https://github.com/vllm-project/vllm/blob/main/csrc/cache_kernels.cu"
VLLM_UNIFIED_ATTENTION = ("https://github.com/vllm-project/vllm/blob/001ceb3e98e7a19ebe33f542a368fa73bf6c76ad/vllm/"
                          "attention/ops/triton_unified_attention.py")
_TK = "https://github.com/triton-lang/triton/blob/{}/python/triton_kernels/triton_kernels/{}"
TK_MATMUL_NAME = _TK.format("052a2c971cad0df10eb04c32726d67caddfd8265", "matmul_ogs_details/_common.py")
TK_SPECIALIZE = _TK.format("02adf8fdd97b1c940719b509f53a7cd90acc0156", "specialize.py")
TK_FINALIZE = _TK.format("1ddaa5e75916dbc7dce2c5a519d6723c922b406a", "matmul_ogs_details/_finalize_matmul.py")
TK_TOPK = _TK.format("08503c47e2d017311bf4a439d2db9fa9fea0eb6b", "topk_details/_topk_forward.py")
TK_ROUTING = _TK.format("0b1cf48fff3fb7a7d884005d7a8f61b56c4cfd3b", "routing_details/_routing_compute.py")
TK_BITMATRIX = _TK.format("12d909bff965bccb355e41133615bf8331cf9475",
                          "tensor_details/bitmatrix_details/sum_bitmatrix_rows.py")

# --- the table ----------------------------------------------------------------------------------------------------

#: family names (what the kernel does, as far as the name shows)
GEMM, CONVOLUTION, ATTENTION, COLLECTIVE, GENERATED, LIBRARY_HELPER, ATEN, TRANSFER = (
    "matrix multiply", "convolution", "attention", "collective", "generated", "helper", "PyTorch's own", "transfer")


@dataclass(frozen=True)
class Rule:
    """One reading: where ``pattern`` matches a name, the name says ``says`` (and what its named groups hold).

    ``says`` maps a field of :class:`KernelName` (``library``, ``family``, ``tensor_cores``, ``dtype``,
    ``accumulate``, ``tile``) to a value; a string value may name the pattern's groups (``"{m}x{n}"``). The
    pattern's named groups that are fields fill them; the others go to ``details``. A field is set by the first
    rule in :data:`RULES` that sets it.
    """

    pattern: str
    says: dict
    meaning: str
    source: str

    @property
    def rx(self) -> re.Pattern:
        return _compiled(self.pattern)


@lru_cache(maxsize=None)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def compile_rules() -> None:
    """Every rule's regex compiled now (as :func:`decode` does at its first name): for the command line, while the
    reader's workers still read."""
    for rule in RULES:
        _compiled(rule.pattern)


_TY = r"(?:f16|bf16|f32|tf32|f64|s8|u8|s32|e4m3|e5m2)"

RULES: tuple[Rule, ...] = (
    # -- NCCL ---------------------------------------------------------------------------------------------------------
    Rule(r"^ncclDevKernel_(?P<collective>[A-Z][A-Za-z]*?)(?:_(?P<op>Sum|Prod|MinMax|PreMulSum|SumPostDiv))?"
         r"(?:_(?P<dtype>[iu](?:8|32|64)|f16|f32|f64|bf16|f8e4m3|f8e5m2))?"
         r"(?:_(?P<algorithm>TREE|RING|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT))?"
         r"(?:_(?P<protocol>LL128|LL|SIMPLE))?(?![A-Za-z0-9])",
         {"library": "NCCL", "family": COLLECTIVE},
         "NCCL's kernel name is ncclDevKernel_ + collective_op_type_algorithm_protocol. NCCL builds one kernel per "
         "collective and type, specialised for Sum, RING (or TREE) and LL, and runs the other ops, algorithms and "
         "protocols of that collective through it: the op, algorithm and protocol in the name are what the kernel "
         "was specialised for, not proof of what ran", NCCL_NAMES),
    Rule(r"^ncclKernel_(?P<collective>[A-Za-z]+?)_(?P<algorithm>RING|TREE|COLLNET\w*?|NVLS\w*?)_"
         r"(?P<protocol>LL128|LL|SIMPLE)_(?P<op>[A-Za-z]+)_(?P<dtype>u?int8_t|u?int32_t|u?int64_t|half|float|double|"
         r"__nv_bfloat16)",
         {"library": "NCCL", "family": COLLECTIVE},
         "an older NCCL's kernel name: ncclKernel_ + collective_algorithm_protocol_op_type", NCCL_REPO),
    Rule(r"^(?:nccl|rccl)", {"library": "NCCL", "family": COLLECTIVE}, "an NCCL (or ROCm's RCCL) kernel", NCCL_REPO),
    # -- Triton (Inductor) ---------------------------------------------------------------------------------------------
    Rule(r"^triton_(?P<category>poi|red|per|for|spl|tem|unk)_(?:(?:fused_)?(?P<fused>.*?)_)?(?P<index>\d+)$",
         {"library": "Triton (torch.compile's Inductor)", "family": GENERATED},
         "Inductor names a Triton kernel triton_ + the first three letters of its category (poi: pointwise, "
         "red: reduction, per: persistent reduction, for: foreach, spl: split scan, tem: a template such as a "
         "matrix multiply) + the ops fused into it + a counter", INDUCTOR_NAMES),
    Rule(r"^triton_tem_", {"family": GEMM}, "tem: a template kernel, Inductor's Triton matrix multiply or "
         "convolution; whether it runs on tensor cores is in its code, not its name", INDUCTOR_TEMPLATES),
    Rule(r"^triton", {"library": "Triton"}, "a Triton kernel", INDUCTOR_NAMES),
    # -- Triton kernels written by hand, named after their function (no Inductor prefix) ------------------------------
    Rule(r"^_matmul_ogs(?P<acc>_acc)?_(?P<layouts>[NT]{3})_(?P<types>[a-z0-9]+x[a-z0-9]+x[a-z0-9]+)_"
         r"(?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)x(?P<split_k>\d+)(?:_(?P<fused>\w+))?$",
         {"library": "Triton (triton_kernels)", "family": GEMM, "tile": "{m}x{n}x{k}"},
         "triton_kernels' matmul_ogs (a matrix multiply with an optional gather and scatter, for mixtures of "
         "experts) names itself _matmul_ogs + a letter each for Y, X, W (N: its stride along N, K, N is the "
         "constant 1; T: it is not) + the types of Y, X and W (u8 weights are written mxfp4) + "
         "BLOCK_M x BLOCK_N x BLOCK_K x SPLIT_K", TK_MATMUL_NAME),
    Rule(r"^_matmul_ogs\w*_\d+x\d+x\d+x\d+_\w+$", {}, "the suffix after the tile is the fused function's own "
         "name (swiglu: the activation fused into the matrix multiply)", TK_SPECIALIZE),
    Rule(r"^_finalize_matmul(?:_scatter)?_(?P<dtype>bf16|fp16|fp32|fp8e4nv|fp8e5)$",
         {"library": "Triton (triton_kernels)", "family": "reduction"},
         "_finalize_matmul[_scatter]_<type of A>: sums the rows that the experts of each token wrote, into one "
         "row per token (a reduction after matmul_ogs, no matrix multiply of its own)", TK_FINALIZE),
    Rule(r"^_topk_forward$", {"library": "Triton (triton_kernels)", "family": "routing (mixture of experts)"},
         "the top-k experts of each token, their scores (softmax) and a bitmatrix of the choices", TK_TOPK),
    Rule(r"^_sum_bitmatrix_rows$", {"library": "Triton (triton_kernels)", "family": "routing (mixture of experts)"},
         "counts the tokens routed to each expert: sums the routing bitmatrix", TK_BITMATRIX),
    Rule(r"^_combined_routing_(?:memset|compute)$",
         {"library": "Triton (triton_kernels)", "family": "routing (mixture of experts)"},
         "one launch for several small routing steps: memset combines fills and prefix sums (cumsum) of the "
         "expert histogram; compute sorts the tokens by expert and writes the gather and scatter indices",
         TK_ROUTING),
    Rule(r"^kernel_unified_attention_(?:2d|3d)$", {"library": "Triton (vLLM's unified attention)",
                                                    "family": ATTENTION},
         "vLLM's Triton attention over its paged KV cache, for queries of any lengths in one launch",
         VLLM_UNIFIED_ATTENTION),
    Rule(r"^attn_fwd$", {"library": "Triton (AOTriton)", "family": ATTENTION},
         "attn_fwd: AOTriton's Triton forward attention, which PyTorch's flash attention on ROCm runs; another "
         "Triton kernel may have the same name", AOTRITON_FWD),
    Rule(r"^attn_fwd$", {}, "PyTorch's flash attention on ROCm calls aotriton::v2::flash::attn_fwd (mha_fwd_aot)",
         PYTORCH_AOTRITON),
    # -- attention -----------------------------------------------------------------------------------------------------
    Rule(r"pytorch_flash::flash_(?P<direction>fwd|bwd)\w*?<Flash_(?:fwd|bwd)_kernel_traits<(?P<head_dim>\d+), "
         r"(?P<m>\d+), (?P<n>\d+), (?P<warps>\d+),.*?cutlass::(?P<dtype>bfloat16_t|half_t)",
         {"library": "FlashAttention-2 (PyTorch's copy)", "family": ATTENTION, "tile": "{m}x{n}",
          "tensor_cores": True, "accumulate": "fp32"},
         "Flash_fwd_kernel_traits<head dim, block rows (queries), block columns (keys), warps, ..., element type>; "
         "its matrix multiplies are SM80 tensor-core MMA atoms with fp32 accumulators", FLASH_TRAITS),
    Rule(r"flash_fwd|flash_bwd|pytorch_flash::", {"library": "FlashAttention (PyTorch's copy)", "family": ATTENTION},
         "FlashAttention, as vendored in PyTorch", PYTORCH_FLASH),
    Rule(r"^fmha_cutlass(?P<direction>[FB])_(?P<dtype>bf16|f16|f32)_(?P<aligned>aligned|notaligned)_"
         r"(?P<tile>\d+x\d+)_(?P<kv>rf|gmem|seqaligned)?\w*?_sm(?P<sm>\d+)",
         {"library": "PyTorch memory-efficient attention (CUTLASS, from xFormers)", "family": ATTENTION},
         "fmha_cutlass + F (forward) or B (backward) + type + alignment + queries x keys per block + where the "
         "output is kept (rf: registers) + the oldest GPU it is built for (sm80: compute capability 8.0)", MEM_EFF),
    Rule(r"cudnn_generated\w*?sdpa\w*?_sm(?P<sm>\d+)_flash\w*?_wgmma_(?P<dtype>f16|bf16|fp8|e4m3)",
         {"library": "cuDNN (generated SDPA)", "family": ATTENTION, "tensor_cores": True},
         "a kernel cuDNN generated for scaled dot-product attention, with wgmma, Hopper's warpgroup tensor-core "
         "instruction; cuDNN does not document the other fields (f16 may stand for either 16-bit type)", WGMMA),
    Rule(r"fmha|_mha_|fprop_mha|sdpa|attention|attn", {"family": ATTENTION}, "an attention kernel", CUDNN),
    # -- cuBLAS -------------------------------------------------------------------------------------------------------
    Rule(r"^nvjet_(?:sm(?P<sm>\d+)_)?",
         {"library": "cuBLAS (nvjet)", "family": GEMM, "tensor_cores": True},
         "nvjet: the GEMM kernels of recent cuBLAS on Hopper and later (NVIDIA's forum: CUDA 12.8's cuBLAS runs "
         "nvjet_tst kernels where 12.1 ran sm90_xmma and cutlass_80 ones); they run on the tensor cores "
         "(a third party measured one far above what the CUDA cores can reach); NVIDIA does not document the other "
         "fields (such as tst, 256x128, 64x4, 1x2, h or v, bz or badd, coopA, NNT), so the decoder does not read "
         "them", NVJET_IS_CUBLAS),
    Rule(r"^nvjet_", {}, "nvjet runs on the tensor cores: a third party's measurement, not NVIDIA's word",
         NVJET_TENSOR_CORES),
    Rule(r"^nvjet_", {}, "cuBLAS's kernel names are confidential, NVIDIA says", CUBLAS_PRIVATE),
    # xmma (cuBLAS, cuDNN): the name labels its own tile ("tilesize") and its tensor-core instruction ("tensor")
    Rule(r"^sm(?P<sm>\d+)_xmma_(?P<operation>gemm|fprop|dgrad|wgrad)\w*?_(?:cublas|cudnn)", {},
         "xmma: NVIDIA's internal GEMM and convolution kernels inside cuBLAS and cuDNN; the suffix names the "
         "library; NVIDIA does not document the naming", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_\w*_cudnn", {"library": "cuDNN (xmma)"}, "ends in cudnn: built into cuDNN", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_\w*cublas", {"library": "cuBLAS (xmma)"}, "ends in cublas: built into cuBLAS", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_(?:fprop|dgrad|wgrad)", {"family": CONVOLUTION},
         "fprop/dgrad/wgrad: a convolution's forward, gradient of its input, gradient of its weights",
         CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_gemm", {"family": GEMM}, "gemm: a matrix multiply", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_\w*?_tilesize(?P<tile>\d+x\d+x\d+)", {},
         "tilesize: the name's own word for the block's tile (M x N x K)", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_\w*?tf32", {"tensor_cores": True, "dtype": "tf32"},
         "tf32: TensorFloat-32, a format only the tensor cores take (fp32 storage, 10-bit mantissa multiply)",
         TF32_TENSOR_CORES),
    Rule(r"^sm\d+_xmma_\w*?_tensor(?P<instruction>\d+x\d+x\d+)", {"tensor_cores": True},
         "tensor16x8x8: the tensor-core instruction's shape", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_\w*?_ffma_", {"tensor_cores": False},
         "ffma: FP32 fused multiply-add, the CUDA cores' instruction, not the tensor cores'", FFMA),
    Rule(r"^sm\d+_xmma_\w*?_(?:bf16)", {"tensor_cores": True, "dtype": "bf16"}, "bf16 inputs", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_\w*?_(?:f16)", {"tensor_cores": True, "dtype": "fp16"}, "f16 inputs", CUBLAS_PRIVATE),
    Rule(r"^sm\d+_xmma_gemm_f32f32_f32f32_f32_", {"dtype": "fp32", "accumulate": "fp32"},
         "every type in the name is f32", CUBLAS_PRIVATE),
    Rule(r"^sm(?P<sm>\d+)_xmma", {"library": "cuBLAS or cuDNN (xmma)"}, "xmma kernel", CUBLAS_PRIVATE),
    # cuBLAS's older families: <architecture>_[<type>_]<accumulator letter><instruction shape>gemm_..._<tile>_<layout>
    Rule(r"^(?P<generation>maxwell|pascal|volta|turing|ampere|ada|hopper)_(?:(?P<dtype>fp16|bf16|int8|tf32|i8)_)?"
         r"(?P<accumulate>[hsdi])(?P<instruction>\d{3,6})gemm\w*?_(?P<tile>\d+x\d+)_",
         {"library": "cuBLAS", "family": GEMM, "tensor_cores": True},
         "the letter before the instruction shape is the accumulator's type (s: fp32, h: fp16), as in CUTLASS's "
         "names; an instruction shape (884, 1688, 16816) is a tensor-core instruction's", CUTLASS_TYPE_LETTERS),
    Rule(r"^(?P<generation>maxwell|pascal|volta|turing|ampere|ada|hopper)_(?P<dtype>[sdhcz])gemm\w*?_"
         r"(?P<tile>\d+x\d+)_",
         {"library": "cuBLAS", "family": GEMM, "tensor_cores": False},
         "BLAS's first letter is the type (s: single precision, d: double, c: complex, h: half); no tensor-core "
         "instruction shape in the name, unlike cuBLAS's tensor-core kernels of the same families (s1688, s16816)",
         BLAS_LETTERS),
    Rule(r"^(?P<generation>maxwell|pascal|volta|turing|ampere|ada|hopper)_gcgemm_(?P<tile>\d+x\d+)_",
         {"library": "cuBLAS", "family": GEMM, "dtype": "complex fp32"},
         "gc: complex (c) with the Gauss three-multiply trick (g), as in CUTLASS's names; cuDNN runs it for "
         "FFT convolutions", CUTLASS_TYPE_LETTERS),
    Rule(r"^(?:void )?sgemm_", {"library": "cuBLAS", "family": GEMM, "tensor_cores": False, "dtype": "fp32"},
         "sgemm: BLAS's single-precision GEMM, named without a tensor-core instruction shape", BLAS_LETTERS),
    Rule(r"splitKreduce_kernel", {"library": "cuBLAS", "family": LIBRARY_HELPER},
         "split-K reduction: sums the partial products of a GEMM whose K was split across blocks", CUBLAS_PRIVATE),
    Rule(r"cublasLt::epilogue|epilogue::impl::globalKernel",
         {"library": "cuBLASLt", "family": LIBRARY_HELPER},
         "a cuBLASLt epilogue (bias, activation) run after the GEMM", CUBLAS_PRIVATE),
    Rule(r"gemv|gemmk1_kernel", {"library": "cuBLAS", "family": GEMM},
         "gemv: a matrix-vector product (BLAS level 2)", BLAS_LETTERS),
    # cuBLAS's small-N GEMM and dot kernels: the name does not say cuBLAS, its parameters' types do
    Rule(r"^(?:void )?gemmSN_(?P<layout>[NT]{2})_kernel<.*?cublasGemvTensorStridedBatched<(?P<dtype>[\w:]+) const>",
         {"library": "cuBLAS", "family": GEMM},
         "gemmSN_TN_kernel (or NN...) with cublasGemmSmallNParams: cuBLAS's GEMM for a small N; N and T as in "
         "BLAS (not transposed, transposed), NVIDIA does not say which letter is which operand; the first const "
         "(input) tensor's type is the input type", CUBLAS_DOCS),
    Rule(r"^(?:void )?dot_kernel<.*?cublasDotParams<cublasGemvTensorStridedBatched<(?P<dtype>[\w:]+) const>",
         {"library": "cuBLAS", "family": GEMM},
         "dot_kernel with cublasDotParams: BLAS's dot product (sum of x_i * y_i) over cuBLAS's strided batched "
         "gemv tensors, which cuBLAS runs for a matrix product (a real trace launches it under aten::mm)",
         CUBLAS_DOCS),
    Rule(r"^(?:void )?reduce_1Block_kernel<.*?cublasGemvTensorStridedBatched<(?P<dtype>[\w:]+) const>",
         {"library": "cuBLAS", "family": LIBRARY_HELPER},
         "reduce_1Block_kernel on cuBLAS's gemv tensors: one block sums the partial dot products", CUBLAS_DOCS),
    Rule(r"(?:^|void )scal_kernel", {"library": "cuBLAS", "family": LIBRARY_HELPER},
         "scal: BLAS's vector scaling (here, the output scaled by beta before a GEMM adds onto it)", BLAS_LETTERS),
    # -- CUTLASS ------------------------------------------------------------------------------------------------------
    Rule(r"cutlass3x_sm(?P<sm>\d+)_(?P<opclass>tensorop|simt)_(?P<accumulate>[hsdi])(?P<instruction>\d+x\d+x\d+)gemm_"
         r"(?P<dtype>" + _TY + r")_" + _TY + r"_" + _TY + r"_" + _TY + r"_(?P<tile>\d+x\d+x\d+)_(?P<cluster>\d+x\d+x\d+)",
         {"library": "CUTLASS 3", "family": GEMM},
         "cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_f32_f16_128x128x64_2x1x1_...: architecture, tensorop "
         "(tensor cores) or simt (CUDA cores), accumulator letter (s: fp32, h: fp16), instruction shape, types of "
         "A, B, accumulator, C, block tile, cluster shape", CUTLASS_PROFILER),
    Rule(r"cutlass\w*?_(?P<opclass>wmma_tensorop|tensorop|simt)_(?:(?P<c>[a-z]+\d+)_)?(?P<accumulate>g?[hsdzci])"
         r"(?P<instruction>\d{3,6})?(?P<operation>gemm|fprop|dgrad|wgrad)(?:_(?P<iterator>optimized|analytic))?"
         r"(?:_(?P<dtype>[a-z]+\d+))?_(?P<tile>\d+x\d+)_(?P<k>\d+)x(?P<stages>\d+)",
         {"library": "CUTLASS"},
         "CUTLASS 2 names: cutlass_ + tensorop (tensor cores), wmma_tensorop (tensor cores through WMMA) or simt "
         "(CUDA cores) + [C's type] + the accumulator's letter (s: fp32, h: fp16, d: fp64, i: int32) + the "
         "instruction shape + the operation + [A's type, left out when it is the accumulator's] + block tile "
         "M x N + K per stage x stages", CUTLASS_GEMM_NAMES),
    Rule(r"cutlass\w*?_(?:wmma_)?tensorop_", {"tensor_cores": True},
         "tensorop: the tensor cores (OpClassTensorOp)", CUTLASS_PROFILER),
    Rule(r"cutlass\w*?_simt_", {"tensor_cores": False}, "simt: the CUDA cores (OpClassSimt)", CUTLASS_PROFILER),
    Rule(r"cutlass\w*?_wmma_tensorop", {}, "wmma: CUDA's warp matrix functions, which run on the tensor cores",
         WMMA),
    Rule(r"cutlass\w*?_(?:wmma_)?tensorop_(?:[a-z]+\d+_)?s\d{3,6}(?:gemm|fprop|dgrad|wgrad)_(?!bf16|f16|tf32|s8)"
         r"(?P<m>\d)",
         {"dtype": "tf32"},
         "no input type after the operation: CUTLASS leaves it out when it is the accumulator's (fp32), and fp32 "
         "data on the tensor cores is multiplied as TF32", TF32_TENSOR_CORES),
    Rule(r"cutlass\w*?_simt_(?P<dtype>[sdhc])gemm", {}, "simt sgemm: single-precision GEMM on the CUDA cores",
         CUTLASS_GEMM_NAMES),
    # mangled CUTLASS (cuDNN's copies): the template arguments are in the mangled name
    Rule(r"cutlass\w*?ImplicitGemm\w*?GemmShapeILi(?P<m>\d+)ELi(?P<n>\d+)ELi(?P<k>\d+)E",
         {"tile": "{m}x{n}x{k}", "family": CONVOLUTION},
         "ImplicitGemmConvolution<ImplicitGemmMultistage<GemmShape<M, N, K> ...>>: the block's tile, first "
         "template argument of the threadblock-level multistage convolution", CUTLASS_CONV),
    Rule(r"cutlass\w*?OpClassTensorOp", {"tensor_cores": True}, "OpClassTensorOp: the tensor cores",
         CUTLASS_OPCLASS),
    Rule(r"cutlass\w*?OpClassSimt", {"tensor_cores": False}, "OpClassSimt: the CUDA cores", CUTLASS_OPCLASS),
    Rule(r"cutlass\w*?MmaTensorOp", {"tensor_cores": True},
         "MmaTensorOp: CUTLASS's warp-level matrix multiply on the tensor cores", CUTLASS_OPCLASS),
    Rule(r"cutlass\w*?tfloat32_t", {"dtype": "tf32"}, "tfloat32_t: the operands are TF32", TF32_TENSOR_CORES),
    Rule(r"cutlass\w*?Conv2d(?P<operation>Fprop|Dgrad|Wgrad)", {}, "Conv2dFprop/Dgrad/Wgrad: which convolution pass",
         CUTLASS_CONV),
    Rule(r"cutlass\w*?(?:gemm|Gemm)", {"family": GEMM}, "a CUTLASS matrix multiply", CUTLASS_GEMM_NAMES),
    Rule(r"cutlass\w*?(?:fprop|dgrad|wgrad|Conv)", {"family": CONVOLUTION}, "a CUTLASS convolution",
         CUTLASS_GEMM_NAMES),
    Rule(r"cutlass\w*?ReduceSplitK", {"family": LIBRARY_HELPER},
         "ReduceSplitK: sums the partial results of a split-K GEMM or convolution", CUTLASS_CONV),
    Rule(r"cutlass_?\w*?cudnn", {"library": "CUTLASS (inside cuDNN)"}, "a CUTLASS kernel built into cuDNN",
         CUTLASS_CONV),
    Rule(r"cutlass", {"library": "CUTLASS"}, "a CUTLASS kernel", CUTLASS_GEMM_NAMES),
    # -- cuDNN --------------------------------------------------------------------------------------------------------
    Rule(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw", {"library": "cuDNN", "family": TRANSFER, "tensor_cores": False},
         "a layout transform (NCHW to NHWC or back) that cuDNN runs around a convolution: a copy, no arithmetic",
         CUDNN),
    Rule(r"cudnn::bn_|bn_fw_|bn_bw_", {"library": "cuDNN", "family": "normalisation"},
         "cuDNN's batch normalisation", CUDNN),
    Rule(r"^(?:cudnn_)?(?:infer_)?(?P<generation>maxwell|pascal|volta|turing|ampere|hopper)_(?P<dtype>[sdh])cudnn_"
         r"(?P<tile>\d+x\d+)",
         {"library": "cuDNN", "family": CONVOLUTION},
         "cuDNN's convolution kernel, BLAS-style type letter (s: fp32)", BLAS_LETTERS),
    Rule(r"fft2d_|fft_", {"library": "cuDNN", "family": CONVOLUTION},
         "an FFT step of an FFT convolution (r2c: real to complex, c2r: back)", CUDNN),
    Rule(r"cask_cudnn|cask_plugin\w*cudnn|computeOffsetsKernel|init_device_workspace|reduce_wgrad",
         {"library": "cuDNN", "family": LIBRARY_HELPER},
         "a helper cuDNN runs around a convolution (offsets, workspace, weight-gradient reduction)", CUDNN),
    Rule(r"cudnn", {"library": "cuDNN"}, "a cuDNN kernel", CUDNN),
    # -- ROCm (Tensile: rocBLAS, hipBLASLt) ---------------------------------------------------------------------------
    Rule(r"^Cijk_A[a-z]+_B[a-z]+_(?P<types>[A-Z0-9]+?)(?:B)?_", {"library": "rocBLAS/hipBLASLt (Tensile)", "family": GEMM},
         "Tensile's name: C[i,j,k] = A x B with the indices of each, then the types", TENSILE),
    Rule(r"^Cijk_A[a-z]+_B[a-z]+_S", {"dtype": "fp32"}, "S: single precision", TENSILE),
    Rule(r"^Cijk_A[a-z]+_B[a-z]+_H", {"dtype": "fp16"}, "H: half precision", TENSILE),
    Rule(r"^Cijk_A[a-z]+_B[a-z]+_B", {"dtype": "bf16"}, "B: bfloat16", TENSILE),
    Rule(r"^Cijk_\w*?_MT(?P<tile>\d+x\d+)x(?P<depth>\d+)", {},
         "MT: the macro tile, the work-group's tile of C (and its depth in K)", TENSILE),
    Rule(r"^Cijk_\w*?_MI(?P<instruction>\d+x\d+x\d+)", {"tensor_cores": True},
         "MI: MatrixInstruction, AMD's matrix cores (MFMA), the counterpart of NVIDIA's tensor cores", TENSILE),
    # -- ROCm's libraries, named by their namespaces, mangled or not -----------------------------------------------
    Rule(r"^_ZN7ck_tile6kentry", {"library": "Composable Kernel (ck_tile)"},
         "ck_tile::kentry<..., Kernel, Args...>: the __global__ function through which ck_tile's make_kernel "
         "launches a kernel (it calls Kernel{}(args...)); here mangled, _ZN7ck_tile6kentry...", CK_KENTRY),
    Rule(r"^_ZN7ck_tile6kentry\w*?12Rmsnorm2dFwdI\w*?27Rmsnorm2dFwdPipelineProblemI"
         r"(?P<dtype>DF16b|DF16_)(?:DF16b|DF16_)(?P<accumulate>f)",
         {"family": "normalisation"},
         "Rmsnorm2dFwd<...Rmsnorm2dFwdPipelineProblem<X type, gamma type, compute type, ...>>: an RMS norm, "
         "the input's type and the type it computes in (mangled: DF16_ is _Float16, f float)", CK_RMSNORM),
    Rule(r"^_ZN\w*?DF16b", {}, "DF16b: __bf16 (std::bfloat16_t) in a mangled name, as Clang mangles it for AMD GPUs",
         MANGLED_BF16),
    Rule(r"^_ZN2ck16tensor_operation6device", {"library": "Composable Kernel"},
         "ck::tensor_operation::device::...: a Composable Kernel device operation (mangled; _GLOBAL__N_1 is the "
         "anonymous namespace its kernel entries live in)", CK_CONV),
    Rule(r"^_ZN2ck16tensor_operation6device\w*?kernel_grouped_conv_(?P<direction>fwd)_",
         {"family": CONVOLUTION}, "kernel_grouped_conv_fwd_...: a grouped convolution's forward pass, run as an "
         "implicit GEMM", CK_CONV),
    Rule(r"^_ZN2ck16tensor_operation6device\w*?_xdl_", {"tensor_cores": True},
         "xdl: CK's XDL (xdlops) GEMM, built on MFMA, AMD's matrix-core instructions", CK_XDL),
    Rule(r"^igemm_(?P<direction>fwd|bwd|wrw)_gtcx\d?_(?P<layout>nhwc|nchw)_(?P<dtype>fp32|fp16|bf16)_bx\d+_ex\d+_"
         r"bt(?P<tile>\d+x\d+x\d+)_wt(?P<wave_tile>\d+x\d+x\d+)",
         {"library": "MIOpen (assembly implicit GEMM)", "family": CONVOLUTION, "tensor_cores": True},
         "igemm_<fwd|bwd|wrw>_gtcx<n>_<layout>_<type>_bx.._ex.._bt<GEMM M x N x K per block>_wt<wave tile>...: "
         "MIOpen's implicit-GEMM convolution in assembly; gtcx (gfx908), gtcx2 (gfx90a), gtcx3 (the others, "
         "such as gfx942): its xdlops kernels, which run on the matrix cores (MFMA)", MIOPEN_IGEMM),
    Rule(r"^batched_transpose_(?P<tile>\d+x\d+)_(?:pack_\d+x\d+_ediv_\d+x\d+_)?(?P<element>byte|half|dword)$",
         {"library": "MIOpen", "family": TRANSFER},
         "batched_transpose_<tile>_<element size>: MIOpen's layout transform around a convolution (byte, half, "
         "dword: 1, 2, 4 bytes per element, whatever the type)", MIOPEN_TRANSPOSE),
    Rule(r"^Im2d2Col", {"library": "MIOpen", "family": TRANSFER},
         "Im2d2Col: im2col, the input's patches copied into the columns of a matrix for a GEMM convolution",
         MIOPEN_IM2COL),
    Rule(r"^SubTensorOpWithScalar[1-5]d$", {"library": "MIOpen", "family": LIBRARY_HELPER},
         "SubTensorOpWithScalar<n>d: MIOpen's SetTensor (fill with a scalar) or ScaleTensor (multiply by one); "
         "the name does not say which", MIOPEN_SCALAR),
    Rule(r"(?:^|[^\w])rocprim::(?:ROCPRIM_\d+_NS::)?", {"library": "rocPRIM", "family": LIBRARY_HELPER},
         "rocPRIM, ROCm's counterpart of CUB (scan, sort, reduce, select); ROCPRIM_400400_NS is its versioned "
         "inline namespace", ROCPRIM),
    Rule(r"\(anonymous namespace\)::groupnorm_kernel_dispatch_(?:up|down)<(?P<dtype>__hip_bfloat16|__half|float)",
         {"library": "AITER", "family": "normalisation"},
         "AITER's group norm: up accumulates each group's sums, down normalises", AITER_GROUPNORM),
    # -- vLLM's own CUDA (and HIP) kernels ------------------------------------------------------------------------
    Rule(r"(?:^|void )vllm::reshape_and_cache(?:_flash)?_kernel<(?P<dtype>[\w:]+),",
         {"library": "vLLM", "family": TRANSFER},
         "reshape_and_cache_flash_kernel: copies each new token's keys and values into vLLM's paged KV cache "
         "(converted to fp8 only when the cache is fp8): no attention of its own", VLLM_CACHE),
    Rule(r"(?:^|void )vllm::", {"library": "vLLM"}, "vllm::...: one of vLLM's own kernels (csrc/)", VLLM_CSRC),
    # -- PyTorch's own kernels, CUB, FBGEMM ---------------------------------------------------------------------------
    Rule(r"\(anonymous namespace\)::indexing_backward_kernel<", {"library": "PyTorch ATen"},
         "indexing_backward_kernel: the backward of indexing (index_put_ with accumulate), in Indexing.cu's "
         "anonymous namespace", ATEN_INDEXING),
    Rule(r"sum_functor<(?P<dtype>[\w:]+), (?P<accumulate>[\w:]+), [\w:]+>",
         {"library": "PyTorch ATen", "family": "reduction"},
         "sum_functor<input type, accumulator type, output type>", ATEN_SUM),
    Rule(r"softmax_warp_(?:forward|backward)<(?P<dtype>[\w:]+), [\w:]+, (?P<accumulate>[\w:]+),",
         {"library": "PyTorch ATen", "family": "reduction"},
         "softmax_warp_forward<input type, output type, accumulator type, ...>", ATEN_SOFTMAX),
    Rule(r"at_cuda_detail::cub::|(?:^|[^\w])cub::", {"library": "CUB", "family": LIBRARY_HELPER},
         "CUB's device-wide primitives (scan, sort, reduce, select)", CUB),
    Rule(r"fbgemm|split_embedding|bounds_check_indices|permute_pooled_embs|recat_copy|to_dense_representation|"
         r"linearize_index",
         {"library": "FBGEMM-GPU"}, "FBGEMM-GPU's embedding and sparse-data kernels (not a GEMM despite the "
         "library's name)", FBGEMM),
    Rule(r"at::native::|at::cuda::|\bat::|c10::|\(anonymous namespace\)::softmax_warp|multi_tensor_apply_kernel|"
         r"compute_cuda_kernel|elementwise_kernel_with_index",
         {"library": "PyTorch ATen"},
         "one of PyTorch's own CUDA kernels (elementwise, reduce, index, copy...)", ATEN_CUDA),
    Rule(r"^void (?:at::native::|\(anonymous namespace\)::)(?:[^(]|\(anonymous namespace\))*?<"
         r"(?:[^(]|\(anonymous namespace\))*?(?<![\w:])"
         r"(?P<dtype>c10::BFloat16|c10::Half|float|double|long|int|bool)\b",
         {}, "the first element type among the template arguments: the type the kernel was built for",
         ATEN_CUDA),
    # -- the runtime's own -----------------------------------------------------------------------------------------
    Rule(r"^Memcpy|^Memset", {"library": "CUDA runtime (copy engine or memset)", "family": TRANSFER},
         "not a kernel: a copy or fill the profiler names after its direction and memory kinds", PROFILER_MEMCPY),
)

# --- decoding -----------------------------------------------------------------------------------------------------

_FIELDS = ("library", "family", "tensor_cores", "dtype", "accumulate", "tile")

_DTYPES = {
    "f16": "fp16", "fp16": "fp16", "h": "fp16", "half": "fp16", "half_t": "fp16", "c10::Half": "fp16",
    "bf16": "bf16", "bfloat16_t": "bf16", "c10::BFloat16": "bf16", "__nv_bfloat16": "bf16",
    "f32": "fp32", "fp32": "fp32", "s": "fp32", "float": "fp32", "S": "fp32",
    "f64": "fp64", "d": "fp64", "double": "fp64",
    "tf32": "tf32", "i": "int32", "s32": "int32", "int": "int32", "int32_t": "int32", "i32": "int32",
    "u32": "uint32", "uint32_t": "uint32", "i64": "int64", "long": "int64", "int64_t": "int64", "u64": "uint64",
    "uint64_t": "uint64", "i8": "int8", "int8": "int8", "int8_t": "int8", "s8": "int8", "u8": "uint8",
    "uint8_t": "uint8", "bool": "bool", "c": "complex fp32", "z": "complex fp64", "gc": "complex fp32",
    "f8e4m3": "fp8 (e4m3)", "e4m3": "fp8 (e4m3)", "f8e5m2": "fp8 (e5m2)", "e5m2": "fp8 (e5m2)",
    "c10::complex<float>": "complex fp32", "__hip_bfloat16": "bf16", "DF16b": "bf16", "DF16_": "fp16",
    "f": "fp32", "__half": "fp16",
}


@dataclass(frozen=True)
class KernelName:
    """What a kernel's name says. None in a field: the name does not say."""

    name: str
    library: str = "unknown"
    family: str | None = None  # matrix multiply, convolution, attention, collective, generated, helper...
    tensor_cores: bool | None = None
    dtype: str | None = None  # the inputs' type
    accumulate: str | None = None  # the accumulator's type
    tile: str | None = None  # the block's tile, as the name writes it (M x N [x K])
    details: tuple[tuple[str, str], ...] = ()  # other fields the name holds (collective, algorithm, stages...)
    notes: tuple[str, ...] = ()  # what each matching rule says
    sources: tuple[str, ...] = ()  # where each reading comes from

    @property
    def known(self) -> bool:
        return self.library != "unknown"

    def detail(self, key: str) -> str | None:
        return dict(self.details).get(key)

    def text(self) -> str:
        """One line: "cuBLAS (nvjet): tensor cores, tile 256x128", or what the name does not say."""
        if not self.known:
            return "the name does not say which library (not in the decoder's table)"
        parts = []
        if self.tensor_cores is not None:
            parts.append("tensor cores" if self.tensor_cores else "CUDA cores, no tensor cores")
        elif self.family in (GEMM, CONVOLUTION, ATTENTION):
            parts.append("tensor cores or not: the name does not say")
        types = []
        if self.dtype:
            types.append(f"{self.dtype} in")
        if self.accumulate:
            types.append(f"{self.accumulate} accumulate")
        if types:
            parts.append(", ".join(types))
        elif self.family in (GEMM, CONVOLUTION, ATTENTION, COLLECTIVE):
            parts.append("input type: the name does not say")
        if self.tile:
            parts.append(f"tile {self.tile}")
        for key in ("collective", "op", "algorithm", "protocol", "category", "operation"):
            v = self.detail(key)
            if v:
                parts.append(f"{key} {_CATEGORY.get(v, v) if key == 'category' else v}")
        sm = self.detail("sm")
        if sm:
            parts.append(f"built for sm_{sm} (compute capability {sm[:-1]}.{sm[-1]})")
        head = self.library + (f" ({self.family})" if self.family and self.family not in self.library else "")
        return head + (": " + ", ".join(parts) if parts else "")

    def to_json(self) -> dict[str, Any]:
        """The fields under clear names, for ``summarize --json``."""
        return {"library": self.library, "family": self.family, "tensor_cores": self.tensor_cores,
                "input_dtype": self.dtype, "accumulate_dtype": self.accumulate, "tile": self.tile,
                "details": dict(self.details), "text": self.text(), "sources": list(self.sources)}


_CATEGORY = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "for": "foreach",
             "spl": "split scan", "tem": "template", "unk": "unknown"}


def _value(key: str, v: Any) -> Any:
    if key in ("dtype", "accumulate") and isinstance(v, str):
        return _DTYPES.get(v, v)
    return v


@lru_cache(maxsize=4096)
def decode(name: str) -> KernelName:
    """What ``name`` says, read with :data:`RULES`; never raises."""
    if not isinstance(name, str):
        return KernelName(name=str(name))
    got: dict[str, Any] = {}
    details: dict[str, str] = {}
    notes: list[str] = []
    sources: list[str] = []
    for rule in RULES:
        m = rule.rx.search(name)
        if m is None:
            continue
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        used = False
        for key, v in rule.says.items():
            if key not in got:
                got[key] = _value(key, v.format(**groups) if isinstance(v, str) else v)
                used = True
        for key, v in groups.items():
            if key in _FIELDS:
                if key not in got:
                    got[key] = _value(key, v)
                    used = True
            elif key not in details and key not in ("m", "n", "k", "c"):
                details[key] = v
                used = True
        if used or rule.says == {} and not groups:
            notes.append(rule.meaning)
            if rule.source not in sources:
                sources.append(rule.source)
    if "library" not in got:  # a field read by a generic rule alone is no reading of an unknown name
        return KernelName(name=name)
    if "category" in details:
        details["category"] = _CATEGORY.get(details["category"], details["category"])
    return KernelName(name=name, details=tuple(details.items()), notes=tuple(notes), sources=tuple(sources),
                      **{k: got[k] for k in _FIELDS if k in got})
