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
