"""Notebooks 08 to 11 on their lesson modules: question cells hold no reveal, and the known leaks stay fixed.

The series-wide leak check (``make test-notebooks``) proves no declared fact is on screen before its question;
these tests guard, without running a notebook, the wordings that gave answers away before.
"""

from __future__ import annotations

import inspect
import json
import re

from conftest import ROOT

from helpers.lessons import n08_torch_compile, n09_linear_and_mlp, n10_attention, n11_your_own_model

NOTEBOOKS = {"08": "08_torch_compile", "09": "09_linear_and_mlp", "10": "10_attention", "11": "11_your_own_model"}


def _cells(stem: str) -> list[dict]:
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())
    return [{"type": c["cell_type"], "source": "".join(c["source"])} for c in nb["cells"]]


def test_question_cells_hold_no_reveal():
    for stem in NOTEBOOKS.values():
        for c in _cells(stem):
            if c["type"] != "code" or "checkpoint.check" in c["source"]:
                continue
            assert "widgets.ask(" not in c["source"] and "widgets.verdict(" not in c["source"], (stem, c["source"][:80])
            assert "def reveal" not in c["source"], (stem, c["source"][:80])


def test_08_gpu_work_says_what_runs_not_why_the_copy():
    """08.gpu-work's reveal must not explain the copy: 08.why-copy and 08.addmm ask for its cause next."""
    src = inspect.getsource(n08_torch_compile.gpu_work)
    for phrase in ("copies b into the output", "addmm_out_cuda_impl", "β = 1"):
        assert phrase not in src, phrase
    for fact in n08_torch_compile._CAUSE:  # the cause is declared: the leak check looks for it before the questions
        assert fact.value in inspect.getsource(n08_torch_compile.addmm)


def test_10_markdown_does_not_state_how_the_sequence_scales():
    """10.why-seq's first choice was written out in the markdown before it."""
    for c in _cells(NOTEBOOKS["10"]):
        if c["type"] == "markdown":
            assert not re.search(r"about (four|4) ?(times|x)|four times the GPU time", c["source"]), c["source"][:120]


def test_no_markdown_repeats_a_choice():
    choices = (n08_torch_compile.WORK_CHOICES + n08_torch_compile.WHY_COPY + n09_linear_and_mlp.ELEM_CHOICES
               + n09_linear_and_mlp.SAVE_CHOICES + n10_attention.PART_CHOICES + n10_attention.seq_choices("flash")
               + n11_your_own_model.MAIN_CHOICES + n11_your_own_model.OBSERVER_CHOICES)
    for stem in NOTEBOOKS.values():
        for c in _cells(stem):
            if c["type"] == "markdown":
                for ch in choices:
                    if len(ch) > 12:
                        assert ch.lower() not in c["source"].lower(), (stem, ch)
