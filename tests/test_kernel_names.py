"""What kernel names say (helpers.facts.kernel_names): every name in the traces decodes; real names read right."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from helpers.facts import kernel_kinds as kk, gpu_work, kind_of
from helpers.facts.kernel_names import RULES, decode
from helpers.reader.trace import TraceError, read_trace

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL = Path("/work/shared/external-traces")


def _traces(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json*") if not p.name.endswith(".timing.json"))


@lru_cache(maxsize=None)
def _names(folder: str) -> dict[str, tuple[str, str]]:
    """Every distinct GPU work name in the folder's traces: name -> (kind, trace)."""
    out: dict[str, tuple[str, str]] = {}
    for p in _traces(Path(folder)):
        try:
            t = read_trace(p)
        except TraceError:
            continue  # manifests, comparisons: not traces
        for j in gpu_work(t):
            n = t.name_of(j)
            if n not in out:
                out[n] = (kind_of(t, j), p.name)
    return out


def test_every_name_in_the_repo_traces_decodes_with_a_library():
    names = _names(str(ROOT / "traces"))
    assert len(names) > 50
    for n in names:
        k = decode(n)
        assert k.known, n
        assert k.text()


def test_every_name_in_the_external_traces_decodes_with_a_library():
    if not EXTERNAL.is_dir():
        pytest.skip(f"{EXTERNAL} absent: traces written by others are not in the repo")
    names = _names(str(EXTERNAL))
    assert len(names) > 200
    unknown = [n for n in names if not decode(n).known]
    assert not unknown, unknown[:5]


def test_no_layout_transform_or_fbgemm_kernel_is_a_gemm():
    """cuDNN's nchwToNhwc runs under a convolution op but is a copy; FBGEMM's kernels are no GEMMs."""
    seen = 0
    for folder in (ROOT / "traces", EXTERNAL):
        if not folder.is_dir():
            continue
        for n, (kind, _) in _names(str(folder)).items():
            if "nchwToNhwc" in n or "nhwcToNchw" in n:
                assert kind == kk.COPY, n
                assert decode(n).library == "cuDNN" and decode(n).tensor_cores is False
                seen += 1
            if "fbgemm_gpu::" in n or "split_embedding" in n:
                assert kind != kk.GEMM, n
            if "fft2d_" in n:
                assert kind == kk.GEMM, n  # an FFT convolution's step, not a reduction
    assert seen >= 1
    assert kk.classify("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
                       "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
                       op="aten::cudnn_convolution") == kk.COPY


def test_nvjet_says_cublas_and_tensor_cores_and_no_more():
    k = decode("nvjet_sm90_tst_256x128_64x4_1x2_h_badd_coopA_NNT")
    assert k.library.startswith("cuBLAS") and k.tensor_cores is True
    assert k.dtype is None and k.tile is None  # undocumented fields are not read
    assert k.detail("sm") == "90" and "9.0" in k.text()
    assert any("TensorRT-LLM/issues/1541" in s for s in k.sources)


def test_cutlass_and_cublas_names_of_the_traces():
    k = decode("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x256_16x3_nt_align4>"
               "(cutlass_80_tensorop_s1688gemm_128x256_16x3_nt_align4::Params)")
    assert (k.library, k.tensor_cores, k.dtype, k.accumulate, k.tile) == ("CUTLASS", True, "tf32", "fp32", "128x256")
    assert k.detail("stages") == "3"
    k = decode("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"
               "(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)")
    assert (k.tensor_cores, k.dtype, k.tile) == (False, "fp32", "256x128")
    k = decode("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align2>"
               "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align2::Params)")
    assert (k.tensor_cores, k.dtype, k.accumulate, k.tile) == (True, "bf16", "fp32", "32x32")
    k = decode("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x32x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
               "execute_kernel__5x_cublas")
    assert (k.library, k.tensor_cores, k.dtype, k.tile) == ("cuBLAS (xmma)", False, "fp32", "128x32x8")
    k = decode("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x64x32_warpgroupsize1x1x1_execute_segment_k_off_"
               "kernel__5x_cublas")
    assert (k.tensor_cores, k.dtype, k.tile) == (True, "tf32", "128x64x32")
    k = decode("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
               "warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn")
    assert (k.library, k.family, k.tensor_cores, k.dtype) == ("cuDNN (xmma)", "convolution", True, "tf32")
    k = decode("ampere_sgemm_128x64_nn")
    assert (k.library, k.tensor_cores, k.dtype, k.tile) == ("cuBLAS", False, "fp32", "128x64")
    k = decode("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn")
    assert (k.tensor_cores, k.dtype, k.accumulate, k.tile) == (True, "bf16", "fp32", "128x128")


def test_attention_nccl_triton_rocm_and_aten_names():
    k = decode("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
               "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true>(x)")
    assert (k.family, k.tensor_cores, k.dtype, k.accumulate, k.tile) == ("attention", True, "bf16", "fp32", "128x128")
    k = decode("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<x>::Params)")
    assert (k.dtype, k.tile, k.tensor_cores) == ("bf16", "64x64", None)
    k = decode("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    assert (k.library, k.dtype) == ("NCCL", "fp32")
    assert dict(k.details) == {"collective": "AllReduce", "op": "Sum", "algorithm": "RING", "protocol": "LL"}
    k = decode("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)")
    assert (k.detail("collective"), k.detail("protocol"), k.dtype) == ("SendRecv", "SIMPLE", "int8")
    k = decode("triton_per_fused__unsafe_view_add_native_layer_norm_view_3")
    assert k.library.startswith("Triton") and k.detail("category") == "persistent reduction"
    assert k.detail("fused") == "_unsafe_view_add_native_layer_norm_view"
    assert decode("triton_poi_fused_add_cos_sin_0").detail("category") == "pointwise"
    k = decode("Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0")
    assert (k.library, k.dtype, k.tile, k.tensor_cores) == ("rocBLAS/hipBLASLt (Tensile)", "fp32", "64x16", True)
    k = decode("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t"
               "<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(x)")
    assert (k.library, k.dtype, k.accumulate) == ("PyTorch ATen", "bf16", "fp32")


# real names from the traces written by others (../shared/external-traces: V100 DLRM, H100, MI300 vLLM and xDiT)
GEMM_SN = (
    'void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>, cublas'
    'GemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float> >(cublasGemmSmallNParams<cublas'
    'GemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedB'
    'atched<float>, float>)')
DOT_BF16 = (
    'void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGe'
    'mvTensorStridedBatched<float> > >(cublasDotParams<cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cubla'
    'sGemvTensorStridedBatched<float> >)')
REDUCE_1BLOCK = (
    'void reduce_1Block_kernel<float, 128, 7, cublasGemvTensorStridedBatched<float>, cublasGemvTensorStridedBatch'
    'ed<float const>, cublasGemvTensorStridedBatched<float> >(float const*, float, cublasGemvTensorStridedBatched'
    '<float>, int, float const*, float, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatch'
    'ed<float>, cublasPointerMode_t, cublasLtEpilogue_t, cublasGemvTensorStridedBatched<biasType<cublasGemvTensor'
    'StridedBatched<float>::value_type, float>::type const>)')
INDEXING_BACKWARD = (
    'void (anonymous namespace)::indexing_backward_kernel<float, 4>(long*, long*, float*, float*, long, long, lon'
    'g, long, bool)')
GROUPNORM_UP = (
    'void (anonymous namespace)::groupnorm_kernel_dispatch_up<__hip_bfloat16, 1024u>(unsigned int, unsigned int, '
    'long, bool, __hip_bfloat16 const*, float*, float*)')
CK_RMSNORM = (
    '_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemID'
    'F16bDF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEENS5_IJLi1ELi128EEEENS5_IJLi1'
    'ELi8EEEEEENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFusedAddEnumE0ELNS_23Rmsnorm2dFusedQuantEnu'
    'mE0ELNS_22Rmsnorm2dSensitiveEnumE0EEEEENS_33Rmsnorm2dFwdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24'
    'Default2DEpilogueProblemIfDF16bLb0ELb1ELb0EEEvEEEEJNSM_5KargsEEEEvDpT1_')
CK_CONV = (
    '_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_34GridwiseGemmMult'
    'iD_xdl_cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS6_11ColumnMajorENS_5TupleIJEEES7_ttftSA_tNS0_12element'
    '_wise11PassThroughESC_SC_LNS1_18GemmSpecializationE7ELi256ELi128ELi128ELi64ELi8ELi8ELi32ELi32ELi2ELi2ENS_8Se'
    'quenceIJLi8ELi32ELi1EEEENSE_IJLi1ELi0ELi2EEEESG_Li2ELi8ELi8ELb0ELi0ESF_SG_SG_Li2ELi8ELi8ELb0ELi0ELi1ELi1ENSE'
    '_IJLi1ELi32ELi1ELi8EEEENSE_IJLi8EEEELNS_26BlockGemmPipelineSchedulerE0ELNS_24BlockGemmPipelineVersionE2Etttt'
    'Lb0ELb0EEENS1_30ComputePtrOffsetOfStridedBatchILi1ELi1ELi0EvEENS_16TensorDescriptorINS9_IJNS_5EmbedINS9_IJii'
    'iiEEESQ_Lb0EEENS_11PassThroughIiEENS_3PadIiiiLb0EEESV_ST_ST_NSP_INS9_IJiiEEESW_Lb0EEESX_ST_NS_23Merge_v2_mag'
    'ic_divisionINS9_IJiiiEEEEES10_NS_8RightPadIiiLb0EEES12_NS_7UnMergeISW_Lb0EEEST_EEENS9_IJNSE_IJLi0EEEENSE_IJL'
    'i1EEEENSE_IJLi2EEEENSE_IJLi3EEEENSE_IJLi4EEEENSE_IJLi5EEEENSE_IJLi6EEEENSE_IJLi7EEEESI_NSE_IJLi9ELi11ELi13EE'
    'EENSE_IJLi10ELi12ELi14EEEENSE_IJLi15EEEENSE_IJLi16EEEENSE_IJLi18EEEENSE_IJLi17EEEEEEENS9_IJNSE_IJLi1ELi2ELi3'
    'ELi4EEEES1B_S1C_S1D_SI_NSE_IJLi9EEEENSE_IJLi10ELi11EEEENSE_IJLi12ELi13EEEENSE_IJLi14EEEES1G_S1H_S1J_S1I_NSE_'
    'IJLi19ELi20EEEENSE_IJLi21EEEEEEENSE_IJLi19ELi21ELi20EEEElEENSO_INS9_IJS14_S12_S12_S14_ST_EEENS9_IJS16_S17_S1'
    '8_S1A_S19_EEENS9_IJNSE_IJLi1ELi2EEEES19_S1A_NSE_IJLi5ELi6EEEES1D_EEENSE_IJLi5ELi7ELi6EEEElEESA_NSO_INS9_IJSX'
    '_S12_S12_EEENS9_IJS16_S17_S18_EEENS9_IJS1X_S19_S1A_EEENSE_IJLi3ELi4EEEElEELb1ELNS_25InMemoryDataOperationEnu'
    'mE0ELi1ELNS_10TailNumberE10EEEvNT_8ArgumentET1_T2_T3_T4_T0_S2F_')
RESHAPE_AND_CACHE = (
    'void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>(__hip'
    '_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16*, __hip_bfloat16*, long const*, long, long, long, lo'
    'ng, long, int, int, int, float const*, float const*, int)')
ROTARY = (
    'void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BF'
    'loat16 const*, int, long, long, long, int, int, int)')
ROCPRIM_SCAN_INIT = (
    'void rocprim::ROCPRIM_400400_NS::detail::init_lookback_scan_state_kernel<rocprim::ROCPRIM_400400_NS::detail:'
    ':lookback_scan_state<unsigned long, false, true>, rocprim::ROCPRIM_400400_NS::detail::block_id_wrapper<unsig'
    'ned int, true> >(rocprim::ROCPRIM_400400_NS::detail::lookback_scan_state<unsigned long, false, true>, unsign'
    'ed int, rocprim::ROCPRIM_400400_NS::detail::block_id_wrapper<unsigned int, true>, unsigned int, rocprim::ROC'
    'PRIM_400400_NS::detail::lookback_scan_state<unsigned long, false, true>::value_type*)')
IGEMM = 'igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x256x32_wt32x32x8_ws1x2_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x4x1_1x4x1x64'
INDUCTOR_POI_SDPA = 'triton_poi_fused__scaled_dot_product_flash_attention_cat_transpose_view_10'


def test_cublas_small_n_gemm_dot_and_reduce_names_say_cublas_by_their_parameter_types():
    k = decode(GEMM_SN)
    assert (k.library, k.family, k.dtype, k.detail("layout"), k.tensor_cores) == ("cuBLAS", "matrix multiply", "fp32",
                                                                                  "TN", None)
    k = decode(DOT_BF16)
    assert (k.library, k.family, k.dtype) == ("cuBLAS", "matrix multiply", "bf16")  # the const (input) tensors' type
    k = decode(REDUCE_1BLOCK)
    assert (k.library, k.family) == ("cuBLAS", "helper")
    assert kk.classify(DOT_BF16, op="aten::mm") == kk.GEMM and kk.classify(REDUCE_1BLOCK) == kk.GEMM


def test_aten_indexing_backward_and_aiter_groupnorm_in_anonymous_namespaces():
    k = decode(INDEXING_BACKWARD)
    assert (k.library, k.dtype) == ("PyTorch ATen", "fp32") and "Indexing.cu" in k.sources[0]
    k = decode(GROUPNORM_UP)
    assert (k.library, k.family, k.dtype) == ("AITER", "normalisation", "bf16")
    assert kk.classify(GROUPNORM_UP) == kk.REDUCTION


def test_composable_kernel_names_mangled():
    k = decode(CK_RMSNORM)
    assert (k.library, k.family, k.dtype, k.accumulate) == ("Composable Kernel (ck_tile)", "normalisation", "bf16",
                                                            "fp32")
    assert kk.classify(CK_RMSNORM) == kk.REDUCTION
    k = decode(CK_CONV)
    assert (k.library, k.family, k.tensor_cores, k.detail("direction")) == ("Composable Kernel", "convolution", True,
                                                                           "fwd")
    assert kk.classify(CK_CONV) == kk.GEMM
    assert kk.gemm_math(CK_CONV) is None  # AMD's matrix cores: not what gemm_math's categories name


def test_miopen_names():
    k = decode(IGEMM)
    assert (k.library, k.family, k.dtype, k.tile, k.tensor_cores) == (
        "MIOpen (assembly implicit GEMM)", "convolution", "bf16", "128x256x32", True)
    assert kk.classify(IGEMM) == kk.GEMM and kk.gemm_math(IGEMM) is None
    k = decode("batched_transpose_32x32_half")
    assert (k.library, k.family, k.tile, k.detail("element"), k.dtype) == ("MIOpen", "transfer", "32x32", "half", None)
    assert kk.classify("batched_transpose_32x32_half") == kk.COPY
    assert decode("SubTensorOpWithScalar1d").library == "MIOpen"
    assert decode("Im2d2Col_v2").library == "MIOpen"
    # im2col copies an input's patches into a matrix's columns: a copy, though the op that launched it is a convolution
    assert kk.classify("Im2d2Col_v2", op="aten::miopen_convolution") == kk.COPY


def test_rocprim_and_vllm_kernels_are_not_pytorch_aten():
    """Their arguments name c10:: or at:: types, but the kernels are rocPRIM's and vLLM's own."""
    assert decode(ROCPRIM_SCAN_INIT).library == "rocPRIM" and decode(ROCPRIM_SCAN_INIT).family == "helper"
    assert decode(ROTARY).library == "vLLM"
    k = decode(RESHAPE_AND_CACHE)
    assert (k.library, k.family, k.dtype) == ("vLLM", "transfer", "bf16")
    # it copies new keys and values into the paged KV cache: no attention, whatever "flash" in its name says
    assert kk.classify(RESHAPE_AND_CACHE) == kk.COPY


def test_triton_kernels_named_after_their_functions():
    k = decode("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu")
    assert (k.library, k.family, k.tile) == ("Triton (triton_kernels)", "matrix multiply", "128x128x128")
    assert dict(k.details) == {"layouts": "NNT", "types": "bf16xbf16xmxfp4", "split_k": "1", "fused": "swiglu"}
    assert kk.classify("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1") == kk.GEMM
    k = decode("_finalize_matmul_scatter_bf16")
    assert (k.library, k.dtype) == ("Triton (triton_kernels)", "bf16")
    # it sums each token's rows from its experts: a reduction, no matrix multiply
    assert kk.classify("_finalize_matmul_scatter_bf16") == kk.REDUCTION
    for n in ("_topk_forward", "_sum_bitmatrix_rows", "_combined_routing_memset", "_combined_routing_compute"):
        assert decode(n).library == "Triton (triton_kernels)" and decode(n).family.startswith("routing"), n
    assert decode("kernel_unified_attention_2d").library == "Triton (vLLM's unified attention)"
    assert decode("attn_fwd").library == "Triton (AOTriton)"
    assert kk.classify("kernel_unified_attention_2d") == kk.ATTENTION == kk.classify("attn_fwd")
    assert decode("_matmul_ogs").library == "unknown" and decode("attn_fwd_v2").library == "unknown"


def test_an_inductor_pointwise_kernel_is_triton_whatever_ops_its_name_lists():
    assert decode(INDUCTOR_POI_SDPA).detail("category") == "pointwise"
    assert kk.classify(INDUCTOR_POI_SDPA, op="aten::_scaled_dot_product_flash_attention") == kk.TRITON


def test_a_name_no_rule_knows_says_nothing():
    for n in ("my_custom_kernel_v3", "gemm_like_thing", "", "tensorop_s1688"):
        k = decode(n)
        assert k.library == "unknown" and k.tensor_cores is None and k.dtype is None and k.tile is None, n
        assert "does not say" in k.text()
    k = decode("my_custom_kernel_v3")
    assert k.to_json()["library"] == "unknown" and k.to_json()["tensor_cores"] is None


def test_every_rule_cites_a_source_and_compiles():
    for r in RULES:
        assert r.source.startswith("https://"), r.pattern
        assert r.rx.pattern and r.meaning


def test_summarize_says_what_the_top_kernels_names_say():
    trace = ROOT / "traces/reference/nvidia-h200/train-tf32-foreach_bf16_warm_eager.json"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "helpers", "summarize", str(trace), "--top", "3"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "the name says: CUTLASS (matrix multiply): tensor cores, tf32 in, fp32 accumulate" in out.stdout
    js = subprocess.run([sys.executable, "-m", "helpers", "summarize", str(trace), "--json"], env=env,
                        capture_output=True, text=True, timeout=60)
    kernels = json.loads(js.stdout)["kernels"]
    says = {k["name"]: k["name_says"] for k in kernels}
    cut = next(v for n, v in says.items() if "s1688gemm_128x256" in n)
    assert cut["tensor_cores"] is True and cut["input_dtype"] == "tf32" and cut["accumulate_dtype"] == "fp32"
    assert all(set(v) >= {"library", "tensor_cores", "input_dtype", "tile", "text"} for v in says.values())


def test_the_lower_case_search_finds_what_the_case_insensitive_rules_find():
    """kernel_kinds searches a lowered name with lowered patterns (several times quicker than re.I): on every
    GPU work name of the repo's and the external traces, and on names in mixed case, each rule's verdict is
    the case-insensitive rule's own."""
    names = set(_names(str(ROOT / "traces")))
    if EXTERNAL.is_dir():
        names |= set(_names(str(EXTERNAL)))
    names |= {"Void CUTLASS_GEMM", "CATARRAYBatchedCopy", "NCCL_AllReduce", "ReduceMean", "ÄdAm_Fused_kernel"}
    lowered = [rx for _, rx, low in kk._SEARCH if low is not None]
    assert len(lowered) >= 8 and len(names) > 200
    for n in names:
        assert kk._by_name(n) == next((kind for kind, rx in kk._RULES if rx.search(n)), None), n
