"""Every notebook on the GPUs a learner meets on Colab, simulated: a T4, an L4 and an A100.

Each run executes a notebook headless in a kernel whose torch reports the simulated GPU, with every GPU run
served from the reference set in that GPU's dtype (tests/simulated_gpu.py says how, and what it cannot
simulate). Per run:

(a) the notebook runs to the end;
(b) every prediction in the journal got a verdict (held, missed, or inconclusive: graded neither way because the
    figure it rests on sits within its noise or tolerance): none is unanswerable on that GPU;
(c) on the T4, which has no native bf16 and runs the series in fp16, no markdown and no output says bf16 or
    bfloat16, apart from what the helpers attribute to someone else's run (the article's A100 figures) and
    the banner's note that this GPU has no bf16;
(d) every multiple-choice question offers at least two choices, none empty, none twice.

What runs where, to fit ``make test`` on two cores: the T4 runs every notebook (it is where the dtype and the
SDPA backends change). ``make test-other-gpus`` (run by ``.ci/run``) and ``make test-notebooks`` run every case;
``make test`` only the T4's runs of :data:`QUICK_NOTEBOOKS` (``SIMULATED_GPUS=quick``), in the background of the
unit tests (the Makefile says why). The A100 runs only the notebooks whose code depends on the
GPU, the L4 two of them
(:data:`L4_NOTEBOOKS`)
(:func:`depends_on_the_gpu`: the mode, the capability, the dtype, the SDPA backends, the datasheets, device
"cuda"; over 00-11 that is 01, 07, 09, 10 and 11). Found by what changes, running every notebook on all
three and in recorded mode: the questions' texts and choices differ only in notebook 10 (the SDPA
backends, T4 against the rest), and the L4's outputs differ from the A100's only in numbers (timings, the
datasheets' figures). Every notebook on all three took about 3 x 150 s one at a time, above the four
minutes or so this file may take; the runs go two at a time (:func:`simulated_runs`). Measured times are in
the branch's report.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import simulated_gpu as sim
from conftest import sim_runs_key
from helpers.lesson.journal import EXAM
from simulated_gpu import GPUS, NotebookRun

NOTEBOOKS = sim.notebook_paths()

#: notebooks that read traces recorded on the reference GPU on every machine, and say so (the exam): the dtype in
#: their kernel names is the recording's, not this GPU's, so (c) does not apply to them
RECORDED_EVERYWHERE = (EXAM,)

#: questions that ask for a bet and settle it in a later reveal: their own reveal gives no verdict anywhere
OPEN_BY_DESIGN = {
    "08.why-copy": "a bet on an explanation; 08.bias1d's reveal says which one survives",
}

#: A timing question may be graded "inconclusive here" (its spread as wide as the effect, on a loaded machine:
#: two kernels on two cores, as here): that is an answer, counted apart in the journal (status "inconclusive"),
#: and only when the reveal said so through widgets.inconclusive (checked in the harness's log).

# What makes a notebook's code depend on the GPU it runs on: each pattern is a value that differs between
# a T4, an L4 and an A100 (or between live and recorded).
GPU_DEPENDENT_CODE = re.compile(
    r"\benv\.(live|capability|gpu|sm_count|gpu_memory_gib|cuda)\b"  # the mode and the hardware
    r"|\bpick_dtype\b|\bdtype_note\b|\btorch\.(bfloat16|float16)\b"  # the dtype
    r"|\bBackendUnavailable\b|\bSDPA_BACKENDS\b|\bsdpa_kernel\b"  # the SDPA backends
    r"|\bdatasheet\w*|\bhardware\.architecture\b"  # per-GPU figures
    r"|[\"']cuda[\"']|\.cuda\(|\btorch\.cuda\.|\bdevice_count\b"  # anything run on the GPU for real
)


def _code_only(source: str) -> str:
    """``source`` with its strings and comments blanked: a docstring that names ``torch.cuda`` runs nothing."""
    import io
    import tokenize

    lines = source.splitlines(keepends=True)
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in (tokenize.STRING, tokenize.COMMENT):
            (r0, c0), (r1, c1) = t.start, t.end
            for r in range(r0, r1 + 1):
                a = c0 if r == r0 else 0
                b = c1 if r == r1 else len(lines[r - 1])
                lines[r - 1] = lines[r - 1][:a] + " " * (b - a) + lines[r - 1][b:]
    return "".join(lines)


def depends_on_the_gpu(path: Path) -> bool:
    """True when a code cell of the notebook (the Colab cell aside) uses something that changes with the GPU."""
    import nbformat

    from helpers.lesson.colab import bootstrap_source

    from helpers.lessons import code_of

    nb = nbformat.read(path, as_version=4)
    lesson = _code_only(code_of(path)[len("\n".join(c.source for c in nb.cells if c.cell_type == "code")):])
    return any(GPU_DEPENDENT_CODE.search(c.source) for c in nb.cells
               if c.cell_type == "code" and c.source != bootstrap_source()) or bool(GPU_DEPENDENT_CODE.search(lesson))


#: the L4 (sm_89, 24 GB) sits between the T4 and the A100 in dtype, memory and SDPA backends; its runs differed
#: from the A100's only in numbers. It keeps the two notebooks that read per-GPU tables: 09 (the roofline's
#: datasheet peaks) and 10 (the SDPA backends' rules by capability).
L4_NOTEBOOKS = ("09", "10")

# A notebook that reads the recorded set on every machine (the exam) runs the same on every GPU: its banner's live
# wording is checked by its own tests, and a simulated run of it (2.5 minutes of the suite) would test nothing more.
ALL_CASES = ([("T4", p) for p in NOTEBOOKS if p.name[:2] not in RECORDED_EVERYWHERE]
             + [("L4", p) for p in NOTEBOOKS if depends_on_the_gpu(p) and p.name[:2] in L4_NOTEBOOKS]
             + [("A100", p) for p in NOTEBOOKS if depends_on_the_gpu(p)])
#: SIMULATED_GPUS=quick (make test): the T4 on the two notebooks where it changes most: 10, whose questions and
#: choices differ on it (the SDPA backends it lacks), and 01, which runs its own profiling loop on "cuda" in fp16;
#: the rest (every notebook on the T4, the L4's and the A100's runs, about 250 CPU-seconds) in make
#: test-other-gpus, which .ci/run runs after make test
QUICK_NOTEBOOKS = ("01", "10")
QUICK = os.environ.get("SIMULATED_GPUS", "all") == "quick"
CASES = ([(g, p) for g, p in ALL_CASES if g == "T4" and p.name[:2] in QUICK_NOTEBOOKS] if QUICK else ALL_CASES)


@pytest.fixture(scope="session")
def simulated_runs(request):
    """The runs the session started after collection (tests/conftest.py), now on up to two workers (two cores)."""
    import os

    runs = request.config.stash.get(sim_runs_key, None)
    if runs is None:  # a lone test, or a pytest-xdist worker: each run starts when its test asks for it
        runs = request.config.stash[sim_runs_key] = sim.start_runs([])
    if runs.workers < min(2, os.cpu_count() or 1):
        runs.widen(1)  # the rest of the suite is done: the second core is free
    yield runs


def problems(run: NotebookRun, gpu: sim.SimulatedGPU) -> list[str]:
    """Everything wrong with one run, as lines (empty: the run passes (a) to (d))."""
    found = []
    if run.error:  # (a)
        tail = [ln for ln in re.sub(r"\x1b\[[0-9;]*m", "", run.error).splitlines() if ln.strip()][-6:]
        found.append("(a) a cell failed:\n      " + "\n      ".join(tail))
    logged = {q["qid"]: q for q in run.questions}
    for qid, entry in run.journal.items():  # (b)
        if entry.get("hit") is None and qid not in OPEN_BY_DESIGN:
            why = "; ".join(v[1] for v in logged.get(qid, {}).get("verdicts", []) if v[0] in (None, "inconclusive"))
            if entry.get("status") == "inconclusive" and any(
                    v[0] == "inconclusive" for v in logged.get(qid, {}).get("verdicts", [])):
                continue
            found.append(f"(b) {qid} got no verdict on the {gpu.key}: {why[:300] or 'its reveal returned None'}")
    missing = sorted(set(run.journal) - set(logged))
    if missing:
        found.append(f"the harness did not see questions {missing}: the question log is incomplete")
    if gpu.dtype != "bf16" and run.path.name[:2] not in RECORDED_EVERYWHERE:  # (c)
        found += [f"(c) says bf16 on the {gpu.key} ({gpu.dtype}): {m}" for m in sim.bf16_mentions(run, gpu)]
    for q in run.questions:  # (d)
        choices = q["choices"]
        if choices is None:
            continue
        if len(choices) < 2 or any(not str(c).strip() for c in choices) or len(set(choices)) != len(choices):
            found.append(f"(d) {q['qid']} offers {choices!r}")
    return found


@pytest.mark.parametrize("gpu,path", CASES, ids=[f"{g}-{p.name[:2]}" for g, p in CASES])
def test_notebook_on_a_simulated_gpu(gpu, path, simulated_runs):
    run = simulated_runs.get(gpu, path)
    assert run.installed.get("gpu") == GPUS[gpu].name, f"the kernel was not on the simulated {gpu}: {run.installed}"
    found = problems(run, GPUS[gpu])
    assert not found, f"{path.name} on a simulated {gpu}:\n  " + "\n  ".join(found)
    if path.name.startswith("15"):  # its pairs over gloo went to the run's scratch folder, not the clone's
        assert all((run.workdir / "runs" / "ddp" / f"{name}-cpu" / "rank0.json").is_file()
                   for name in ("base", "straggler")), sorted(p.name for p in (run.workdir / "runs").rglob("*"))


# --- the harness itself: its rules and its checks, without a kernel -----------------------------------


def test_the_sdpa_rules_follow_pytorchs_hardware_checks():
    t4, l4, a100, h200 = (7, 5), (8, 9), (8, 0), (9, 0)
    assert [b for b in ("math", "efficient", "flash", "cudnn") if sim.sdpa_unavailable(b, t4) is None] == \
        ["math", "efficient"]
    for cap in (l4, a100, h200):
        assert all(sim.sdpa_unavailable(b, cap) is None for b in ("math", "efficient", "flash", "cudnn"))
    assert "sm 7.5" in sim.sdpa_unavailable("flash", t4)
    assert (sim.sdpa_auto(t4), sim.sdpa_auto(l4), sim.sdpa_auto(a100), sim.sdpa_auto(h200)) == \
        ("efficient", "flash", "flash", "cudnn")


def test_a_served_trace_says_fp16_everywhere_and_still_reads(tmp_path, h200):
    from helpers.reader.trace import read_trace

    for name, words in (("attn-sdpa-efficient1024_bf16_warm_eager.json", ["fmha_cutlassF_fp16"]),  # kernel names
                        ("4096_bf16_warm_eager.json", ["c10::Half"])):  # the ops' input types
        src = h200 / name
        text = sim.rewrite_dtype(src.read_text(), "bf16", "fp16")
        assert not sim.BF16.search(text) and all(w in text for w in words), name
        (tmp_path / name).write_text(text)
        before, after = read_trace(src), read_trace(tmp_path / name)
        assert len(before) == len(after) and list(before.dur) == list(after.dur)
        assert [sim.rewrite_dtype(n, "bf16", "fp16") for n in before.name_table] == list(after.name_table)
    assert sim.rewrite_dtype("bf16 BFloat16 bfloat16 fp16", "bf16", "fp16") == "fp16 Half float16 fp16"
    assert sim.rewrite_dtype("x", "bf16", "bf16") == "x"


def test_the_checks_catch_a_wrong_dtype_an_unanswerable_question_and_an_empty_choice(tmp_path):
    """A notebook made to fail every check, run on the simulated T4: each check must say so."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("Each input is a matrix of bfloat16."),
        nbformat.v4.new_code_cell(
            "import torch\nfrom helpers.lesson import show, widgets\nenv = show.banner()\nprint(torch.bfloat16)\n"
            "widgets.ask('99.none', 'Q?', choices=['a', ''], default='a',\n"
            "            reveal=lambda a: widgets.verdict(None, 'no fused backend here'))"),
    ]
    path = tmp_path / "99_broken.ipynb"
    nbformat.write(nb, path)
    run = sim.run_notebook(path, GPUS["T4"], tmp_path / "run")
    assert run.error is None, run.error
    found = problems(run, GPUS["T4"])
    assert any(f.startswith("(b) 99.none") and "no fused backend" in f for f in found), found
    assert any(f.startswith("(c)") and "cell 0 (markdown)" in f for f in found), found
    assert any(f.startswith("(c)") and "torch.bfloat16" in f for f in found), found
    assert any(f.startswith("(d) 99.none") for f in found), found
    assert not any("This GPU has no native bfloat16" in f for f in found), found  # the banner's note is allowed
