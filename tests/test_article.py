"""The article's figures: every one names its run, and quotes read as the article's, never as this run's."""

from __future__ import annotations

import pytest

from helpers import article


def test_every_figure_names_its_run_and_place():
    for f in article.FIGURES.values():
        assert f.run and f.where, f.key
        assert f.label().startswith("the article's A100 ("), f.key
        assert f.quote().endswith(")") and f.text() in f.quote(), f.key


def test_units_and_text():
    assert article.fig("self_cpu_64").value_us == pytest.approx(2314)
    assert article.fig("self_cuda_64").text() == "23.104 µs"
    assert article.fig("cpu_gpu_offset").value_us == pytest.approx(2320)
    assert "warm" in article.fig("cpu_gpu_offset").run  # the offset was seen after warm-up, at 64 x 64
    assert "4096" in article.fig("compile_cpu_cost").run  # the 2x compile figure is from the 4096 run
    assert article.fig("add_registers").value_us is None


def test_an_unknown_figure_names_the_known_ones():
    with pytest.raises(KeyError, match="self_cpu_64"):
        article.fig("nope")
