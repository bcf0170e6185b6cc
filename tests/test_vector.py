"""numpy and plain Python give the same facts, to the last bit (helpers/reader/vector.py).

Real traces in: every whole-column computation of :mod:`helpers.reader.vector`, and
the whole summary through the command line's ``--json``, once with numpy and
once without, compared with ``==`` (no tolerance).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EXTERNAL, H200, cli
from helpers import facts
from helpers.reader import vector
from helpers.reader.categories import CPU_GROUPS, CPU_OP, GPU_WORK
from helpers.reader.spans import intersection_us, lane_spans
from helpers.reader.trace import TraceError, read_trace

pytest.importorskip("numpy")


def _traces() -> list[Path]:
    files = sorted(H200.glob("*.json"))
    if EXTERNAL.is_dir():
        files += sorted(p for p in EXTERNAL.rglob("*.json*") if "rank" not in p.name)
    return files


def _both(monkeypatch, f):
    """f() with numpy (for every size of input), then without."""
    monkeypatch.setattr(vector, "NUMPY", True)
    monkeypatch.setattr(vector, "SMALL", 0)
    with_numpy = f()
    monkeypatch.setattr(vector, "NUMPY", False)
    return with_numpy, f()


@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.name)
def test_the_same_summary_with_and_without_numpy(path, monkeypatch):
    def summary():
        try:
            t = read_trace(path)
        except TraceError as e:  # a file of the external set that is not a trace: the same words either way
            return str(e)
        # the summary, and the unrounded figures it rounds, bit for bit (read once each way: a big trace's
        # reading is most of the test's time)
        return facts.summarize(t).to_json(), facts.self_cpu_us(t), facts.window(t), facts.balance(t).gpu_busy_us

    a, b = _both(monkeypatch, summary)
    assert a == b


@pytest.mark.parametrize("path", [H200 / "train-fp32-loop_bf16_warm_eager.json", H200 / "block8x256x512_bf16_warm_eager.json"],
                         ids=lambda p: p.name)
def test_each_computation_alike(path, monkeypatch):
    t = read_trace(path)
    cat_flags = [g in CPU_GROUPS for g in t.cat_groups]
    lane_flags = [not ln.is_gpu for ln in t.lanes]
    a, b = _both(monkeypatch, lambda: vector.select(t, cat_flags, lane_flags))
    assert a == b and len(a) > 100
    assert list(a) == [i for i in range(len(t)) if cat_flags[t.cat_id[i]] and lane_flags[t.lane[i]]]
    a, b = _both(monkeypatch, lambda: vector.max_end(t))
    assert a == b == max(t.ts[i] + t.dur[i] for i in range(len(t)))
    idx = list(a_ for a_ in vector.select(t, cat_flags, lane_flags))
    a, b = _both(monkeypatch, lambda: vector.covered_us(t, idx))
    assert a == b > 0
    ops = t.indices((CPU_OP,))
    a, b = _both(monkeypatch, lambda: vector.by_start(t, ops))
    assert a == b
    assert a[0] == sorted(ops, key=lambda i: (t.ts[i], i))
    for column in ("lane", "name_id"):
        a, b = _both(monkeypatch, lambda: vector.by_code(t, idx, column))
        assert a == b and list(a) == sorted(a) and sorted(i for x in a.values() for i in x) == sorted(idx)
    a, b = _both(monkeypatch, lambda: vector.spans(t, idx))
    assert a == b == lane_spans(t, idx)
    work = t.on_gpu(GPU_WORK)
    half = set(work[::3])
    one = vector.spans(t, [j for j in work if j in half])
    other = vector.spans(t, [j for j in work if j not in half])
    a, b = _both(monkeypatch, lambda: vector.intersection_us(one, other))
    assert a == b == intersection_us(one, other)
    a, b = _both(monkeypatch, lambda: (t.parent(idx[-1]), [t.parent(i) for i in idx[::97]]))
    t._nest()  # and the whole nesting, made at once, agrees with parents found one at a time
    assert a == b == (t._parent[idx[-1]], [t._parent[i] for i in idx[::97]])
    # each launch call's innermost ATen op: numpy's lookup, the walk over the ops and calls, the whole nesting
    from helpers.facts.kernels import innermost_ops

    calls = [i for i in t.launchers(work) if i >= 0]
    t._parent = None
    a, b = _both(monkeypatch, lambda: innermost_ops(t, calls))
    t._nest()
    assert a == b == innermost_ops(t, calls) and sum(op >= 0 for op in a.values()) > 50
    # the kinds of many kernels at once (their launching ops found together) are each kernel's kind alone
    t._parent = None
    from helpers.facts.kernels import kind_of, kinds_of

    t._parent = None
    a, b = _both(monkeypatch, lambda: kinds_of(t, work))
    assert a == b == [kind_of(t, j) for j in work]
    if t.shapes:  # the op calls' shapes looked up at once: the table's own answer, op by op
        held = list(t.shapes)
        asked = held[::7] + [i + 1 for i in held[::11] if i + 1 not in t.shapes]
        a, b = _both(monkeypatch, lambda: t.shapes.numbers(asked))
        assert a == b == [t.shapes.ids[held.index(i)] if i in t.shapes else -1 for i in asked]
        assert -1 in a and any(x >= 0 for x in a)
    a, b = _both(monkeypatch, lambda: vector.remap(t.name_id, list(range(len(t.name_table)))[::-1]))
    assert a == b and a[0] == len(t.name_table) - 1 - t.name_id[0]
    a, b = _both(monkeypatch, lambda: vector.shifted(t.ts, 1.5))
    assert a == b and a[5] == t.ts[5] - 1.5


def test_spans_that_touch_nest_and_overlap():
    """Hand-made spans on two lanes: the covered time worked out by hand."""
    from helpers.reader.trace import Trace
    from helpers.reader.columns import ColumnBuilder

    b = ColumnBuilder(Path("hand.json"))
    ev = [  # lane 1: [0, 10) with [2, 3) inside, [10, 12) touching, [20, 25) apart -> 17; lane 2: [5, 8), [6, 9) -> 4
        (1, 0.0, 10.0), (1, 2.0, 1.0), (1, 10.0, 2.0), (1, 20.0, 5.0), (2, 5.0, 3.0), (2, 6.0, 3.0)]
    from helpers.reader.event_fields import PlainEvent

    b.add([PlainEvent({"ph": "X", "name": "op", "cat": "cpu_op", "pid": 1, "tid": tid, "ts": ts, "dur": d, "args": {}})
           for tid, ts, d in ev], False)
    t = Trace(Path("hand.json"), b.finish(), {})
    for numpy in (True, False):
        vector.NUMPY, vector.SMALL = numpy, 0
        try:
            assert vector.covered_us(t, list(range(len(t)))) == 21.0
            assert vector.spans(t, [0, 1, 2, 3]) == [(0.0, 12.0), (20.0, 25.0)]
            # [0, 12) and [20, 25) against [5, 8), [6, 9) merged into [5, 9), and [11, 21): 4 + 1 + 1
            assert vector.intersection_us([(0.0, 12.0), (20.0, 25.0)], [(5.0, 9.0), (11.0, 21.0)]) == 6.0
            assert t.parent(1) == 0 and t.parent(2) == -1 and t.parent(5) == -1  # [6, 9) overlaps [5, 8), not inside it
        finally:
            vector.NUMPY, vector.SMALL = vector.AVAILABLE, 4096


def test_the_command_line_without_numpy(tmp_path):
    """`summarize --json` in a process where numpy cannot be imported: the same output."""
    path = H200 / "train-amp-foreach_bf16_warm_eager.json"
    blocker = tmp_path / "numpy.py"
    blocker.write_text("raise ImportError('numpy is not installed here')\n")
    plain = cli("summarize", "--json", path, env={"PYTHONPATH": str(tmp_path)})
    fast = cli("summarize", "--json", path)
    assert plain.returncode == fast.returncode == 0, plain.stderr + fast.stderr
    assert json.loads(plain.stdout) == json.loads(fast.stdout)
