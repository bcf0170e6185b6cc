"""Notebook 16: the slow loop, the Python lines its with_stack traces lead to, and the bench's stages."""

from __future__ import annotations

import json

import pytest

from conftest import H200
from helpers.facts import python_lines as pl
from helpers.runs.slow_loop import FIXES, slow_loop
from helpers.reader.trace import read_trace

LOOP_TRACES = sorted(p for p in H200.glob("loop*_eager.json"))


def test_a_frame_and_a_builtin_are_read_from_their_names():
    assert pl.frame_of("helpers/runs/slow_loop.py(118): step") == pl.Frame("helpers/runs/slow_loop.py", 118, "step")
    assert pl.frame_of("torch/nn/modules/module.py(1783): _call_impl").function == "_call_impl"
    assert pl.frame_of("<built-in method item of Tensor object at 0x7f3c>") is None
    assert pl.builtin_of("<built-in method item of Tensor object at 0x7f3c75172260>") == "item"
    assert pl.builtin_of("<built-in function linear>") == "linear"
    assert pl.builtin_of("<method 'to' of 'torch._C.TensorBase' objects>") == "to"
    assert pl.builtin_of("helpers/runs/slow_loop.py(118): step") is None


SOURCE = '''\
import torch

def outer(x, xs):
    y = x.item()
    def inner():
        return x.item()
    z = torch.tensor(xs)
    return y + x.item() + z
'''


def test_call_lines_finds_the_calls_of_that_function_only():
    assert pl.call_lines(SOURCE, 3, "item") == [4, 8]  # not line 6: a function of its own
    assert pl.call_lines(SOURCE, 3, "tensor") == [7]
    assert pl.call_lines(SOURCE, 5, "item") == [6]
    assert pl.call_lines(SOURCE, 4, "item") == []  # no function starts there: the source moved
    assert pl.starts_function(SOURCE, 3, "outer") and not pl.starts_function(SOURCE, 3, "inner")


def test_a_trace_without_stacks_says_so():
    t = read_trace(H200 / "64_bf16_warm_eager.json")
    assert not pl.has_stacks(t)
    assert all(pl.origin(t, i) is None for i in range(min(len(t), 200)))


def _recorded(fixes=()):
    from helpers.runs.profiling import recorded

    return recorded(slow_loop(fixes), warm=True)


def test_the_loop_as_written_waits_on_the_lines_that_copy_or_read_back():
    """The recorded trace leads each wait to step()'s lines that call to, torch.tensor and item: the lines hold
    exactly those calls, so a slow_loop.py edited without recording again fails here."""
    from helpers.lessons import n16_fix_a_slow_loop as lesson

    run = _recorded()
    sites, steps = lesson.wait_sites(run)
    assert steps == 3 and {s.call for s in sites} == {"to", "tensor", "item"}
    start, body = lesson.step_source()
    text = {start + n: ln for n, ln in enumerate(body)}
    for s in sites:
        assert s.frame.function == "step" and text[s.frame.line].strip().startswith("def step(")
        assert s.lines and all({"to": ".to(", "tensor": "torch.tensor(", "item": ".item()"}[s.call] in text[n]
                               for n in s.lines)
        assert len(s.waits) == steps * len(s.lines)  # each of those lines waits once in every recorded step
    assert lesson.wait_lines(run) == sorted(n for s in sites for n in s.lines)


@pytest.mark.parametrize("path", LOOP_TRACES, ids=lambda p: p.stem)
def test_every_recorded_loop_points_at_this_source(path):
    """Each recorded loop trace's frames start functions of today's slow_loop.py: record part 6 again after
    editing it (python -m helpers.runs.record --parts 6)."""
    from helpers.lessons import n16_fix_a_slow_loop as lesson

    t = read_trace(path)
    assert pl.has_stacks(t)
    src = lesson._source()
    frames = {pl.frame_of(t.name_of(i)) for i in t.indices(("python",)) if "slow_loop.py(" in t.name_of(i)}
    assert frames and all(pl.starts_function(src, f.line, f.function) for f in frames)


def test_the_fixes_remove_the_waits_they_name():
    """Each fix of a wait takes its line out of the trace's waits, and the loader's non-blocking copies from pinned
    memory take the batch copies' lines out: with those three fixes no wait is left."""
    from helpers.lessons import n16_fix_a_slow_loop as lesson

    def calls(fixes):
        return {s.call for s in lesson.wait_sites(_recorded(fixes))[0]}

    assert calls(("sync",)) == {"to", "tensor"}
    assert calls(("constant",)) == {"to", "item"}
    assert calls(FIXES[:3]) == set() and calls(FIXES) == set()


def test_the_recorded_bench_follows_the_recorded_order(monkeypatch):
    from helpers.runs import comparisons
    from helpers.lessons import n16_fix_a_slow_loop as lesson

    shown = []
    monkeypatch.setattr(lesson.show, "md", shown.append)
    monkeypatch.setattr(lesson.show, "display_figure", lambda fig: None)
    bench = lesson.Bench()
    bench.apply("tf32")  # out of order: recorded mode applies the next recorded fix instead, and says so
    assert bench.applied == ["loader"] and "Recorded mode follows the order" in shown[0]
    for f in FIXES[1:]:
        bench.apply(f)
    assert bench.applied == list(FIXES) and len(bench.stages) == len(FIXES) + 1
    stack = comparisons.recorded("loop-stack")
    assert bench.total.samples == stack.ratio("as written", "+".join(FIXES)).samples
    bench.apply("loader")  # applied already
    assert "applied already" in shown[-1] or "pick another" in shown[-1]


def test_the_loop_kinds_name_and_refuse():
    assert slow_loop().stem == "loop" and slow_loop(("tf32", "loader")).stem == "loop-loader-tf32"
    assert "feed_only" not in slow_loop().p  # the recorded scenarios' keys do not change
    assert slow_loop(FIXES, feed_only=True).stem.endswith("-feed")
    with pytest.raises(ValueError, match="unknown fixes"):
        slow_loop(("faster",))


def test_the_input_alone_fetches_and_trains_nothing():
    import torch

    step, args = slow_loop(FIXES[1:], batch=8, dim=16, hidden=16, layers=1, work=10, feed_only=True).build("cpu", "fp32")
    out = step(*args)
    assert out.shape == (8,) and out.dtype == torch.int64  # the labels, copied; no loss


def test_every_loop_comparison_is_recorded_with_all_its_members():
    from helpers.runs import comparisons

    for name in ("loop-alone", "loop-stack", "loop-feed"):
        c = comparisons.recorded(name)
        assert c.labels == comparisons.GROUPS[name].labels
        assert all(c.spread(k).n >= 5 for k in c.labels)
    m = json.loads((H200 / "manifest.json").read_text())["scenarios"]
    assert all(m[f"{slow_loop(f).stem}_*_warm_eager"]["status"] == "ok" for f in [(), *[(x,) for x in FIXES]])
