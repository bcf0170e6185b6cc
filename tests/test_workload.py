"""Workloads: dtype per device, memory refusal with a size that fits, tags."""

from __future__ import annotations

import pytest

from helpers import workload as wl
from helpers.tags import ARTICLE, Schedule, scenario_key, tag_for


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
    assert fits.bytes_needed("bf16") <= free
    assert fits.smaller() is None or fits.p["size"] * 2 > 0
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
