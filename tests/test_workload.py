"""Workloads: dtype per device, memory refusal with a size that fits, tags."""

from __future__ import annotations

import pytest

from helpers.runs import workload as wl
from helpers.runs.tags import ARTICLE, Schedule, scenario_key, tag_for


@pytest.mark.parametrize("device,cap,expected", [
    ("cpu", None, "fp32"),
    ("cuda", (7, 5), "fp16"),  # T4: no native bfloat16
    ("cuda", (8, 0), "bf16"),  # A100
    ("cuda", (9, 0), "bf16"),  # H100, H200
])
def test_dtype_follows_the_hardware(device, cap, expected):
    assert wl.pick_dtype(device, cap) == expected


def test_t4_note_explains_fp16():
    note = wl.dtype_note("cuda", (7, 5))
    assert "float16" in note and "7.5" in note
    assert wl.dtype_note("cuda", (9, 0)) is None


def test_too_large_is_refused_with_a_size_that_fits():
    w = wl.matmul_add(16384)
    free = 2 * 2**30  # 2 GiB free
    with pytest.raises(wl.NotEnoughMemory) as e:
        wl.check_fits(w, "bf16", free_bytes=free)
    fits = e.value.fits
    assert fits is not None and fits.p["size"] < 16384
    assert fits.bytes_needed("bf16") <= free * 0.9
    assert wl.matmul_add(fits.p["size"] * 2).bytes_needed("bf16") > free * 0.9  # the largest halving that fits
    msg = str(e.value)
    assert "16384x16384" in msg and f"{fits.p['size']}x{fits.p['size']}" in msg and "GiB" in msg


def test_fit_steps_down_with_a_message():
    w, note = wl.fit(wl.matmul_add(8192), "bf16", free_bytes=200 * 2**20)
    assert w.p["size"] < 8192 and w.bytes_needed("bf16") <= 200 * 2**20
    assert note.startswith("Stepped down")
    same, none = wl.fit(wl.matmul_add(64), "bf16", free_bytes=2**30)
    assert same.p["size"] == 64 and none is None


def test_nothing_fits_says_what_to_do():
    with pytest.raises(wl.NotEnoughMemory) as e:
        wl.check_fits(wl.matmul_add(64), "fp32", free_bytes=1000)
    assert e.value.fits is None and "free some memory" in str(e.value)


def test_tags_follow_the_article():
    assert tag_for(wl.matmul_add(64), "bf16", False, False) == "64_bf16_cold_eager"
    assert tag_for(wl.matmul_add(4096), "bf16", True, True) == "4096_bf16_warm_compile"
    assert tag_for(wl.matmul_add(64), "fp16", False, False, Schedule(0, 0, 20)) == "64_fp16_cold_eager_s0-0-20"
    assert tag_for(wl.matmul_add(64, batch=8), "bf16", True, False) == "8x64_bf16_warm_eager"
    assert scenario_key(wl.matmul_add(64), False, False, ARTICLE) == "64_*_cold_eager"


def test_attention_variants_are_checked():
    with pytest.raises(ValueError, match="choose one of"):
        wl.attention("sparse")


def test_workloads_run_on_the_cpu():
    import torch

    for w in (wl.matmul_add(32), wl.matmul_add(32, batch=2), wl.linear(8, 4, 6), wl.mlp(1, 4, 8, 16),
              wl.attention("naive", 1, 2, 8, 4), wl.attention("inplace", 1, 2, 8, 4), wl.attention("sdpa-math", 1, 2, 8, 4),
              wl.block(1, 8, 16, 2, 1)):
        fn, args = w.build("cpu", "fp32")
        with torch.no_grad():
            out = fn(*args)
        assert torch.isfinite(out).all(), w.kind


def test_naive_and_inplace_attention_agree():
    import torch

    torch.manual_seed(0)
    fn1, args = wl.attention("naive", 1, 2, 16, 8).build("cpu", "fp32")
    fn2, _ = wl.attention("inplace", 1, 2, 16, 8).build("cpu", "fp32")
    ref = torch.nn.functional.scaled_dot_product_attention(*args[:3], is_causal=True)
    assert torch.allclose(fn1(*args), ref, atol=1e-5)
    assert torch.allclose(fn2(*args), ref, atol=1e-5)


def test_every_recorded_scenario_keeps_its_key(h200):
    """Recorded mode finds traces by key: every scenario the recorder knows is in the H200 set under the
    same key, with the tag its workload gives today."""
    import json

    from helpers.runs.scenarios import all_scenarios

    recorded = json.loads((h200 / "manifest.json").read_text())["scenarios"]
    scenarios = {s.key: s for s in all_scenarios()}
    assert set(scenarios) == set(recorded)
    for key, s in scenarios.items():
        entry = recorded[key]
        assert entry["tag"] == tag_for(s.workload, entry["dtype"], s.warm, s.compile, s.schedule, s.compile_mode)
        assert entry["workload"]["description"] == s.workload.description
        assert entry["workload"]["label"] == s.workload.label


@pytest.mark.parametrize("w,steps", [
    (wl.matmul_add(64), 1), (wl.matmul_add(64, batch=8), 1), (wl.addmm(256), 3),  # sizes stop at 64
    (wl.linear(), 11), (wl.mlp(), 7), (wl.attention("sdpa-math"), 4), (wl.block(), 4),  # batches stop at 1
])
def test_every_kind_halves_until_it_cannot(w, steps):
    sizes = [w.bytes_needed("bf16")]
    while (w := w.smaller()) is not None:
        sizes.append(w.bytes_needed("bf16"))
    assert len(sizes) == steps
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)


def test_an_unknown_kind_says_what_there_is():
    with pytest.raises(wl.WorkloadError, match="no workload kind 'conv'.*matmul_add"):
        wl.Workload("conv", (), "conv").description


def test_your_own_model_is_never_built_here():
    w = wl.custom("my_model")
    assert w.stem == "my_model" and w.smaller() is None
    with pytest.raises(wl.WorkloadError, match="profile_model"):
        w.build("cpu", "fp32")


# --- what a failed first SDPA call means ------------------------------------------------


def test_a_backend_without_a_kernel_here_is_unavailable():
    with pytest.raises(wl.BackendUnavailable, match="SDPA backend 'efficient' is not available here"):
        wl.attention("sdpa-efficient", 1, 2, 8, 4).build("cpu", "fp32")  # no CPU kernel for it


def _sdpa_raising(monkeypatch, error):
    import torch.nn.functional as F

    def fail(*a, **k):
        raise error

    monkeypatch.setattr(F, "scaled_dot_product_attention", fail)
    return wl.attention("sdpa-flash", 1, 2, 8, 4)


def test_out_of_memory_in_the_probe_is_not_a_missing_backend(monkeypatch):
    import torch

    w = _sdpa_raising(monkeypatch, torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    with pytest.raises(wl.NotEnoughMemory, match="ran out of GPU memory.*Tried to allocate 2.00 GiB.*restart"):
        w.build("cpu", "fp32")


@pytest.mark.parametrize("message", ["CUDA error: an illegal memory access was encountered",
                                     "CUDA error: operation not supported on this device",
                                     "Expected query, key and value to have the same dtype"])
def test_other_errors_in_the_probe_surface_as_they_are(monkeypatch, message):
    w = _sdpa_raising(monkeypatch, RuntimeError(message))
    with pytest.raises(RuntimeError) as e:
        w.build("cpu", "fp32")
    assert not isinstance(e.value, wl.WorkloadError) and str(e.value) == message


def test_the_cuda_message_for_a_missing_kernel_is_unavailable(monkeypatch):
    w = _sdpa_raising(monkeypatch, RuntimeError("No available kernel. Aborting execution."))
    with pytest.raises(wl.BackendUnavailable, match="'flash' is not available here: No available kernel"):
        w.build("cpu", "fp32")
