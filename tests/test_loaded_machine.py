"""The CPU timing questions on a machine whose cores are busy with other work: graded outside the noise, or not.

A learner's laptop runs other programs; a shared hub runs other learners. The
timing cells of the CPU lessons run here while two busy processes hog the
cores (this machine has two), and each timing question's reveal must

* grade through :mod:`helpers.facts.measure` (a grade computed from a spread, never one sample), and record in the
  journal exactly the status that grade gave: held or missed only when the spread's quartiles fall in one
  choice (checked here independently of the grading code), else inconclusive;
* print no absurd profiler-cost ratio (a profiled call 1,600 times its unprofiled self, or faster than it
  by half: what one sample per side gave on a loaded laptop before).

It takes seconds: small calls, the CPU runs only.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers.lesson import journal, widgets
from helpers.facts import measure

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def busy_cores():
    """Two processes that spin for as long as the test runs."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


@pytest.fixture
def graded(monkeypatch, tmp_path):
    """Every grade the reveals ask for, and every HTML they show, with a journal of their own."""
    monkeypatch.setenv("PROFILING_HEADLESS", "1")
    monkeypatch.setenv("PROFILING_JOURNAL", str(tmp_path / "journal.json"))
    grades: list[tuple[str, object, list, list, measure.Graded]] = []
    shown: list[str] = []
    real = measure.grade_choice

    def grade_choice(answer, spread, edges, choices, **kw):
        g = real(answer, spread, edges, choices, **kw)
        grades.append(("choice", spread, list(edges), list(choices), g))
        return g

    monkeypatch.setattr(measure, "grade_choice", grade_choice)
    monkeypatch.setattr(widgets, "_display", lambda obj: shown.append(getattr(obj, "data", str(obj))))
    monkeypatch.setattr("helpers.lesson.show._display_html", lambda text: shown.append(text), raising=False)
    monkeypatch.setattr("helpers.lesson.show.display_figure", lambda fig: None)
    return grades, shown


def check(qid: str, grades, shown) -> None:
    """The journal's verdict for ``qid`` is the grade of a spread, and the grade is right about that spread."""
    entry = journal.load()[qid]
    if not grades:  # not graded at all is allowed: said inconclusive before any grade was computed
        assert entry["status"] == "inconclusive", f"{qid}: graded without helpers.facts.measure (a single sample?)"
        return
    kind, spread, edges, choices, g = grades[-1]
    assert entry["status"] == g.status, (qid, entry, g)
    lo, hi = spread.quartiles
    one_choice = measure.bucket(lo, edges, choices) == measure.bucket(hi, edges, choices)
    if g.status in ("held", "missed"):
        assert spread.n >= measure.MIN_SAMPLES and one_choice, f"{qid}: graded inside its noise: {g.why}"
    else:
        assert not one_choice or spread.n < measure.MIN_SAMPLES, f"{qid}: called inconclusive on a clear spread"
    text = " ".join(shown)
    for r in re.findall(r"(\d[\d,]*\.?\d*)x\b", re.sub(r"<[^>]+>", "", text)):
        assert 0.5 <= float(r.replace(",", "")) <= 50, f"{qid}: an absurd ratio {r}x in its reveal"


def test_00_observer_on_busy_cores(busy_cores, graded, h200, monkeypatch):
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    from helpers.lessons import n00_before_we_start as lesson
    from helpers.runs.profiling import Schedule, profile
    from helpers.runs.workload import matmul_add

    grades, shown = graded
    tiny = profile(matmul_add(64), warm=True, on="cpu", schedule=Schedule(1, 1, 10))
    gpu_tiny = profile(matmul_add(64), warm=True)  # the recorded H200 run: its ratio is shown, not graded
    lesson.observer(tiny, gpu_tiny)
    check("00.observer", grades, shown)


def test_01_why_cost_on_busy_cores(busy_cores, graded, h200, monkeypatch):
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    from helpers.lessons import n01_setting_up_the_profiler as lesson
    from helpers.runs.profiling import Schedule, profile
    from helpers.runs.workload import matmul_add

    grades, shown = graded
    flat = profile(matmul_add(64), warm=True, on="cpu", schedule=Schedule(1, 1, 10))
    batched = profile(matmul_add(64, batch=8), warm=True, on="cpu", schedule=Schedule(1, 1, 10))
    lesson.why_cost(flat, batched)
    check("01.why-cost", grades, shown)


def test_05_batch_questions_on_busy_cores(busy_cores, graded, h200, monkeypatch):
    """05's timing questions grade the calls timed in turn (recorded here): busy cores change nothing in them,
    and the CPU runs beside them are counted, not graded."""
    monkeypatch.setenv("PROFILING_MODE", "recorded")
    from helpers.runs import comparisons
    from helpers.lessons import n05_a_batch_axis as lesson
    from helpers.runs.profiling import profile
    from helpers.runs.workload import matmul_add

    grades, shown = graded
    timed = comparisons.measure("batch")
    flat, batched, wide = (profile(matmul_add(64, batch=b), warm=True) for b in (None, 8, 64))
    cpu_flat = profile(matmul_add(64), warm=True, on="cpu")
    cpu_batched = profile(matmul_add(64, batch=8), warm=True, on="cpu")
    lesson.cpu_cost(timed, flat, batched, cpu_flat, cpu_batched)
    check("05.cpu-cost", grades, shown)
    grades.clear()
    shown.clear()
    lesson.why_batch(timed, flat, batched, wide)
    check("05.why-batch", grades, shown)
