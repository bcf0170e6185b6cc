"""Notebook 15's recorder on this CPU (helpers/runs/ddp.py, helpers/runs/ddp_train.py): a real two-rank run over gloo, made
here, read by the distributed reader; and ddp.balance, the check that a base run's ranks enter together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import raw_doc
from helpers.runs import ddp
from helpers.facts import ranks


@pytest.fixture(scope="module")
def gloo_straggler(tmp_path_factory) -> ddp.RankRun:
    """The straggler scenario over gloo on this CPU (two processes, a few seconds)."""
    return ddp.run("straggler", gpus=0, out_root=tmp_path_factory.mktemp("ddp"), quiet=True)


def test_gloo_straggler_run_is_read_across_ranks(gloo_straggler):
    """Past DDP's first ten iterations, default buckets; every gloo all-reduce of each rank matched with the other
    rank's (counted in the raw JSON); the planted rank 1 named the straggler, and the run found unbalanced."""
    folder = gloo_straggler.folder
    info = ddp.run_info(gloo_straggler)
    assert info["backend"] == "gloo" and info["warm_iterations"] >= 11 and info["bucket_mb_default"] is True
    assert info["straggle_ms"] == float(ddp.CPU_OPTIONS["straggler"][-1])
    raw = [sum(1 for e in raw_doc(folder / f"rank{k}.json")["traceEvents"]
               if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:all_reduce")) for k in (0, 1)]
    r = ranks.read_ranks(folder)
    assert r.clock is not None and r.backend == "gloo" and r.world_size == 2
    assert raw[0] == raw[1] == len(r.matched) > 0 and r.unmatched == {0: 0, 1: 0}
    assert {m.op for m in r.matched} == {"allreduce"}
    assert all(max(m.starts_us) < min(m.ends_us) for m in r.matched)  # each matched pair ran at one moment
    assert r.straggler.rank == 1, r.straggler.reason
    assert r.ranks[0].wait_us > r.ranks[1].wait_us  # rank 0 waited for it, inside its own all-reduces
    ok, how = ddp.balance(folder)
    assert not ok and how.endswith("straggler: 1")


def _pair(folder: Path, late_us: list[float], dur: float = 200.0, gap: float = 1000.0) -> Path:
    """Two ranks' traces, one all-reduce kernel per entry of ``late_us``: rank 1 enters that long after rank 0
    (negative: before), and both leave once the last has arrived."""
    folder.mkdir(parents=True)
    for rank in (0, 1):
        ev = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 0.0,
               "dur": gap * (len(late_us) + 1)}]
        for k, late in enumerate(late_us):
            start0 = gap * (k + 1)
            start = start0 + (late if rank == 1 else 0.0)
            ev.append({"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": start,
                       "dur": max(start0, start0 + late) + dur - start, "args": {"device": 0, "stream": 7},
                       "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"})
        (folder / f"rank{rank}.json").write_text(json.dumps({
            "schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "baseTimeNanoseconds": 1_790_000_000_000_000_000, "traceEvents": ev}))
    return folder


def test_balance(tmp_path):
    """Balanced: no straggler named and the median entry gap within the margin; either failing is unbalanced."""
    jitter = _pair(tmp_path / "jitter", [30, -30, 25, -25, 30, -30])  # each rank last in turn, 30 us apart
    assert ddp.entry_gaps_us(jitter) == [30, 30, 25, 25, 30, 30]
    ok, how = ddp.balance(jitter)
    assert ok and how == ("6 matched collectives, the last rank entering a median 30 us after the first "
                          "(max 30 us); straggler: none")
    assert not ddp.balance(jitter, margin_us=20)[0]  # the same pair, a tighter margin
    late = _pair(tmp_path / "late", [500] * 6)  # rank 1 last every time
    ok, how = ddp.balance(late)
    assert not ok and how.endswith("straggler: 1") and ranks.read_ranks(late).straggler.rank == 1
    assert not ddp.balance(late, margin_us=1e6)[0]  # a named straggler is unbalanced whatever the margin
