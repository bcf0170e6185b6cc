"""Several ranks' traces read together (helpers/facts/ranks.py, helpers/facts/collectives.py; the rules in
helpers/advice/distributed.py), checked against the raw JSON of real traces.

HTA's two-rank training pair (external) and the project's own two-H200 recordings (traces/ranks/) are read
by the json module here, and the figures the module gives are computed again another way: interval sums
by a sweep over start and end points, collectives by their kernel names, arrivals from the raw timestamps.
"""

from __future__ import annotations

import gzip
import json
import re
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, cli, raw_doc
from helpers.advice import distributed as D
from helpers.facts import collectives as C, ranks as R
from helpers.reader import source as trace_source
from helpers import facts
from helpers.advice.diagnose import diagnose
from helpers.reader.trace import TraceError, read_trace

RANKS = ROOT / "traces" / "ranks"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


@pytest.fixture(scope="module")
def pair(external) -> Path:
    return external / "hta_trace_filter"


@pytest.fixture(scope="module")
def pair_ranks(pair) -> R.Ranks:
    return R.read_ranks(pair)


def gpu_events(path: Path) -> list[dict]:
    """Kernels, copies and fills with their raw times: the json module's view."""
    return [e for e in raw_doc(path)["traceEvents"] if e.get("cat") in GPU_CATS and e.get("ph") == "X"]


def is_collective(e: dict) -> bool:
    return e["name"].lower().startswith("nccl")  # every collective in these traces is an NCCL kernel


def sweep_overlap(coll: list[tuple[float, float]], comp: list[tuple[float, float]], lo: float, hi: float):
    """(time with a collective running, time with a collective and compute running), in [lo, hi], by a sweep."""
    points = []
    for (s, e), kind in [(x, 0) for x in coll] + [(x, 1) for x in comp]:
        s, e = max(s, lo), min(e, hi)
        if e > s:
            points += [(s, 1, kind), (e, -1, kind)]
    points.sort()
    running = [0, 0]
    t_coll = t_both = 0.0
    last = None
    for t, step, kind in points:
        if last is not None:
            if running[0]:
                t_coll += t - last
                if running[1]:
                    t_both += t - last
        running[kind] += step
        last = t
    return t_coll, t_both


def window(path: Path) -> tuple[float, float]:
    """First ProfilerStep's start to the last event's end, raw microseconds."""
    ev = [e for e in raw_doc(path)["traceEvents"] if isinstance(e.get("ts"), (int, float))]
    steps = [e["ts"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"]
    return (min(steps) if steps else min(e["ts"] for e in ev)), max(e["ts"] + e.get("dur", 0) for e in ev)


# --- HTA's pair: the rows ---------------------------------------------------------------------------


def union_us(spans, lo, hi) -> float:
    """Microseconds the spans cover inside [lo, hi], each instant once (plain Python, not the project's spans)."""
    out, end = 0.0, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)):
        if end is None or s > end:
            out += e - s
            end = e
        elif e > end:
            out += e - end
            end = e
    return out


@pytest.mark.parametrize("rank", [0, 1])
def test_pair_rows_against_the_raw_json(pair, pair_ranks, rank):
    path = pair / f"sampled_rank-{rank}.json.gz"
    ev = gpu_events(path)
    coll = [e for e in ev if is_collective(e)]
    comp = [e for e in ev if not is_collective(e)]
    row = pair_ranks.ranks[rank]
    assert row.rank == rank == raw_doc(path)["distributedInfo"]["rank"]
    assert row.collectives == len(coll) == 10
    lo, hi = window(path)
    # each as the union of its spans in the window (concurrent streams once): the review's 280.56 ms on rank 1,
    # against the 288.48 ms its kernels' durations add up to
    assert row.collective_us == pytest.approx(union_us([(e["ts"], e["ts"] + e["dur"]) for e in coll], lo, hi))
    assert row.compute_us == pytest.approx(union_us([(e["ts"], e["ts"] + e["dur"]) for e in comp], lo, hi))
    assert row.compute_us < sum(e["dur"] for e in comp) or rank == 0
    t_coll, t_both = sweep_overlap([(e["ts"], e["ts"] + e["dur"]) for e in coll],
                                   [(e["ts"], e["ts"] + e["dur"]) for e in comp], lo, hi)
    assert row.overlap_pct == pytest.approx(100 * t_both / t_coll, abs=1e-6)
    assert row.exposed_us == pytest.approx(t_coll - t_both)
    # exposed collective time is more than half of the busy time on both ranks: waiting on communication
    assert row.exposed_us >= 0.5 * row.gpu_busy_us
    assert row.verdict == C.COMMUNICATION_BOUND and row.compute_verdict == facts.IN_COLLECTIVES


def test_issue_13_rank_is_no_longer_compute_bound(pair):
    """The issue's rank: 379 of 668 ms of GPU time in collectives, once called compute-bound; mostly inside
    collectives, it now gets no CPU- or GPU-bound verdict at all (issue 22). 53% idle: the window ends at the last
    recorded activity, not 1.28 s later where the profiler's session span ends (HTA's sampling kept that span)."""
    t = read_trace(pair / "sampled_rank-1.json.gz")
    b = facts.balance(t)
    assert round(b.collective_us / 1000) == 379 and round((b.device_us + b.collective_us) / 1000) == 668
    assert round(100 * b.gpu_idle_share) == 53
    # with collectives counted, GPU time was 51% of the CPU time (gpu-bound); without, it is 22%
    assert (b.device_us + b.collective_us) / b.self_cpu_us >= facts.GPU_BOUND_RATIO > b.ratio
    assert b.verdict == facts.IN_COLLECTIVES
    out = json.loads(cli("summarize", pair / "sampled_rank-1.json.gz", "--json").stdout)
    assert out["verdict"] == facts.IN_COLLECTIVES
    assert set(out["balance"]) >= {"self_cpu_us", "device_us", "ratio", "verdict", "window_us", "gpu_busy_us",
                                   "gpu_busy_share", "gpu_idle_share", "threshold", "collective_us",
                                   "collective_exposed_us"}
    assert out["balance"]["collective_us"] == pytest.approx(b.collective_us)


def test_single_gpu_traces_keep_their_device_time(h200):
    """No collectives: device time is still the profiler table's total, and nothing distributed is said."""
    t = read_trace(h200 / "4096_bf16_warm_eager.json")
    b = facts.balance(t)
    assert b.collective_us == 0 and b.collective_exposed_us == 0
    assert b.device_us == pytest.approx(sum(t.dur[j] for j in facts.gpu_work(t)))
    assert not {f.rule for f in diagnose(t)} & {"communication-bound", "low-overlap"}


# --- HTA's pair: matching and the straggler, checked by hand -------------------------------------------

# Found by hand in the raw JSON (both files stamp events in wall-clock microseconds): the collectives
# that run on both ranks at once, as (rank 0's duration, rank 1's duration). Each pair ends within
# 0.4 ms on both ranks; the file's other ten collectives (5 a rank) overlap nothing of their kind on
# the other rank: this sample of a 128-rank job kept different collectives on each rank.
PAIR_MATCHED = [(62783, 57924), (11727, 8370), (42496, 42744), (36158, 13838), (63644, 62163)]


def test_pair_matching_is_the_one_found_by_hand(pair, pair_ranks):
    r = pair_ranks
    assert r.clock == "wall-clock timestamps"
    assert [tuple(m.durs_us) for m in r.matched] == PAIR_MATCHED
    assert r.unmatched == {0: 5, 1: 5}
    raw = {k: sorted((e for e in gpu_events(pair / f"sampled_rank-{k}.json.gz") if is_collective(e)),
                     key=lambda e: e["ts"]) for k in (0, 1)}
    by_dur = {k: {e["dur"]: e for e in raw[k]} for k in raw}
    for d0, d1 in PAIR_MATCHED:
        a, b = by_dur[0][d0], by_dur[1][d1]
        assert abs((a["ts"] + a["dur"]) - (b["ts"] + b["dur"])) < 400  # they leave the collective together
        assert b["ts"] > a["ts"]  # rank 1 entered each of them last
    assert r.end_spread_us is not None and r.end_spread_us < 400


def test_pair_straggler_is_rank_1(pair_ranks):
    r = pair_ranks
    s = r.straggler
    assert s.rank == 1
    # rank 0 waits for rank 1: its kernels last longer by about rank 1's delay, summed by hand from PAIR_MATCHED
    assert r.ranks[0].wait_us == pytest.approx(sum(max(a - b, 0) for a, b in PAIR_MATCHED))
    assert r.ranks[1].wait_us == pytest.approx(sum(max(b - a, 0) for a, b in PAIR_MATCHED))
    assert (r.ranks[0].last_arrivals, r.ranks[1].last_arrivals) == (0, 5)
    assert "entered last in 5 of 5" in s.reason


def test_pair_on_the_command_line(pair):
    p = cli("summarize", pair)
    assert p.returncode == 0 and p.stderr == ""
    lines = p.stdout.splitlines()
    rows = [ln.split() for ln in lines if ln.strip().startswith(("0 ", "1 "))]
    assert [x[0] for x in rows] == ["0", "1"] and all(x[-1] == C.COMMUNICATION_BOUND for x in rows)
    assert "straggler: rank 1 (" in p.stdout
    out = json.loads(cli("summarize", pair, "--json").stdout)
    assert out["straggler"] == 1 and out["world_size"] == 128 and out["matched_collectives"] == 5
    assert [x["rank"] for x in out["ranks"]] == [0, 1]
    assert {"rank", "collective_us", "overlap_pct", "verdict", "compute_us", "gpu_busy_us", "idle_pct",
            "exposed_us"} <= set(out["ranks"][0])
    found = json.loads(cli("diagnose", pair, "--json").stdout)
    # both ranks' exposed collective time is communication-bound's: low-overlap would claim it again
    assert {f["rule"] for f in found["together"]} == {"communication-bound", "straggler"}
    assert [x["rank"] for x in found["each_rank"]] == [0, 1]  # and each rank read alone
    text = cli("diagnose", pair).stdout
    assert "Straggler: the other ranks wait for rank 1" in text


def test_one_rank_trace_gets_the_rank_rules(pair):
    # its collectives are most of its GPU's busy time but a sixth of its window: not inside them (fault 7's reading)
    rules = {f.rule: f for f in diagnose(read_trace(pair / "sampled_rank-1.json.gz"))}
    assert "inside-collectives" not in rules and "communication-bound" in rules and "low-overlap" not in rules
    dlrm = pair.parent / "param_dlrm_8rank"
    if dlrm.is_dir():  # the DLRM job's rank 1: over half its window in collectives
        rules = {f.rule: f for f in diagnose(read_trace(next(dlrm.glob("worker1_*"))))}
        f = rules["inside-collectives"]
        assert not {"cpu-bound", "gpu-bound", "communication-bound", "low-overlap"} & set(rules)
        assert " window is in collectives (" in f.evidence[0] and "diagnose the folder" in f.next


# --- the project's own recordings (two H200s) ----------------------------------------------------------


def rank_paths(folder: str) -> list[Path]:
    return [RANKS / folder / f"rank{k}.json.gz" for k in (0, 1)]


def raw_collective_starts(path: Path) -> list[tuple[float, float]]:
    """(start, duration) of each collective on the shared clock: baseTimeNanoseconds plus the event's time."""
    doc = raw_doc(path)
    base = doc["baseTimeNanoseconds"] / 1000
    return sorted((base + e["ts"], e["dur"]) for e in doc["traceEvents"]
                  if e.get("cat") == "kernel" and is_collective(e))


def aligned(c0: list, c1: list) -> tuple[int, int]:
    """How many leading collectives each rank has with no partner: the offsets at which every pair overlaps in
    time (the same collective runs on both ranks at one moment), found by trying them, apart from the reader."""
    for k0 in range(len(c0)):
        for k1 in range(len(c1)):
            pairs = list(zip(c0[k0:], c1[k1:]))
            if pairs and (k0 == 0 or k1 == 0) and all(max(a[0], b[0]) < min(a[0] + a[1], b[0] + b[1])
                                                      for a, b in pairs):
                return k0, k1
    raise AssertionError("no alignment: the ranks share no collective")


def test_straggler_recording_names_rank_1():
    """Rank 1 ran 20 extra matrix products each step (benchmarks/record_ranks.py): the others wait for it."""
    r = R.read_ranks(RANKS / "h200x2-straggler")
    assert r.clock == "baseTimeNanoseconds" and r.world_size == 2
    assert r.straggler.rank == 1
    assert r.ranks[0].wait_us > 10 * r.ranks[1].wait_us
    # the ranks' recordings began a few all-reduces apart (one profiler started a step sooner): the raw starts say
    # by how many, and the reader must match the same pairs
    c0, c1 = (raw_collective_starts(p) for p in rank_paths("h200x2-straggler"))
    k0, k1 = aligned(c0, c1)
    pairs = list(zip(c0[k0:], c1[k1:]))
    assert len(r.matched) == len(pairs) >= 20 and r.unmatched == {0: len(c0) - len(pairs), 1: len(c1) - len(pairs)}
    assert all(b[0] > a[0] for a, b in pairs)  # rank 1 entered every one of them last
    assert [m.durs_us for m in r.matched] == [[a[1], b[1]] for a, b in pairs]


def test_ddp_recording_overlaps_and_names_the_rank_that_enters_late():
    """The same work on both ranks, recorded past DDP's first ten iterations: DDP all-reduces its buckets during
    the backward pass; one rank enters most all-reduces a little late, and the reader names it, from the raw
    times too."""
    r = R.read_ranks(RANKS / "h200x2-ddp")
    assert all(x.overlap_pct > 50 for x in r.ranks)  # DDP all-reduces buckets during the backward pass
    assert all(x.verdict != C.COMMUNICATION_BOUND for x in r.ranks)
    c0, c1 = (raw_collective_starts(p) for p in rank_paths("h200x2-ddp"))
    k0, k1 = aligned(c0, c1)
    pairs = list(zip(c0[k0:], c1[k1:]))
    late1 = sum(b[0] > a[0] for a, b in pairs)
    later = 1 if late1 > len(pairs) / 2 else 0
    assert r.straggler.rank in (None, later)
    if r.straggler.rank is not None:
        assert r.straggler.last_arrivals[later] > len(pairs) / 2
    assert not {"communication-bound", "low-overlap"} & {f.rule for f in D.diagnose_ranks(r)}


def test_manual_all_reduce_recording_has_no_overlap_and_no_straggler():
    """One all-reduce per parameter after the whole backward pass: nothing runs beside them."""
    r = R.read_ranks(RANKS / "h200x2-manual")
    for x, path in zip(r.ranks, rank_paths("h200x2-manual")):
        ev = gpu_events(path)
        lo, hi = window(path)
        t_coll, t_both = sweep_overlap([(e["ts"], e["ts"] + e["dur"]) for e in ev if is_collective(e)],
                                       [(e["ts"], e["ts"] + e["dur"]) for e in ev if not is_collective(e)], lo, hi)
        assert t_both == 0 and x.overlap_pct == 0
        assert x.exposed_us == pytest.approx(t_coll)
    assert r.straggler.rank is None and r.straggler.reason.startswith("within noise")
    assert "low-overlap" in {f.rule for f in D.diagnose_ranks(r)}


def test_without_a_shared_clock_ranks_are_compared_row_by_row(tmp_path):
    """The same two traces with baseTimeNanoseconds removed: no clock, so no matching and no straggler."""
    for p in rank_paths("h200x2-straggler"):
        doc = raw_doc(p)
        del doc["baseTimeNanoseconds"]
        (tmp_path / p.name.replace(".gz", "")).write_text(json.dumps(doc))
    r = R.read_ranks(tmp_path)
    assert r.clock is None and r.matched == [] and r.straggler.rank is None
    assert "share no clock" in r.straggler.reason
    assert [x.collectives for x in r.ranks] == [len(raw_collective_starts(p)) for p in rank_paths("h200x2-straggler")]
    out = cli("summarize", tmp_path)
    assert out.returncode == 0 and "no shared clock" in out.stdout and "straggler: none" in out.stdout


# --- bad folders: one clear line each -------------------------------------------------------------------


def link(folder: Path, *paths: Path, names: list[str] | None = None) -> Path:
    folder.mkdir(exist_ok=True)
    for k, p in enumerate(paths):
        os.symlink(p, folder / (names[k] if names else p.name))
    return folder


def one_line_error(*args) -> str:
    p = cli(*args)
    assert p.returncode == 2 and p.stdout == "", p.stdout
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("error: ")
    return p.stderr


@pytest.mark.parametrize("command", ["summarize", "diagnose"])
def test_empty_folder(tmp_path, command):
    assert "the folder is empty" in one_line_error(command, tmp_path)


def test_non_trace_files_are_skipped_with_a_line_each(tmp_path, pair):
    d = link(tmp_path / "mixed", pair / "sampled_rank-0.json.gz", pair / "sampled_rank-1.json.gz")
    (d / "manifest.json").write_text('{"gpu": "H200"}')
    (d / "cut.json").write_text('{"traceEvents": [{"ph": "X"')
    (d / "notes.txt").write_text("not JSON")
    p = cli("summarize", d, "--json")
    assert p.returncode == 0
    assert sorted(p.stderr.splitlines()) == [
        "skipped cut.json: the JSON ends too early: the trace was probably cut short while it was written",
        "skipped manifest.json: JSON without a 'traceEvents' list: not a profiler trace",
        "skipped notes.txt: not named *.json or *.json.gz"]
    out = json.loads(p.stdout)
    assert out["straggler"] == 1 and len(out["skipped"]) == 3
    # nothing but non-traces: one line
    only = tmp_path / "only"
    only.mkdir()
    (only / "manifest.json").write_text('{"gpu": "H200"}')
    assert "no rank trace in the folder (manifest.json: JSON without a 'traceEvents' list" in \
        one_line_error("summarize", only)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_every_entry_that_is_no_trace_file_gets_its_own_line(tmp_path, pair):
    """Links that loop or lead nowhere, a named pipe, a folder: a line each, said without opening them."""
    d = link(tmp_path / "odd", pair / "sampled_rank-0.json.gz", pair / "sampled_rank-1.json.gz")
    os.symlink(d / "loop.json", d / "loop.json")
    os.symlink(tmp_path / "gone.json", d / "dangling.json")
    os.mkfifo(d / "pipe.json")  # opening it would wait for a writer that never comes
    (d / "nested").mkdir()
    (d / "a.txt").write_text("x")
    (d / "b.txt").write_text("x")
    (d / "two\nlines.json").write_text('{"gpu": "H200"}')
    (d / "also\rnot.txt").write_text("x")
    for command in ("summarize", "diagnose"):
        t = time.monotonic()
        p = cli(command, d, "--json")
        assert time.monotonic() - t < trace_source.FIFO_WAIT_S + 20
        assert p.returncode == 0, p.stderr
        assert sorted(p.stderr.splitlines()) == [
            "skipped a.txt: not named *.json or *.json.gz",
            "skipped also\\rnot.txt: not named *.json or *.json.gz",
            "skipped b.txt: not named *.json or *.json.gz",
            f"skipped dangling.json: a symbolic link to {tmp_path / 'gone.json'}, which does not exist",
            "skipped loop.json: a symbolic link that loops",
            "skipped nested: a folder: folders inside the folder are not read (give that folder itself)",
            "skipped pipe.json: a named pipe, not a regular file: in a folder only trace files are read",
            "skipped two\\nlines.json: JSON without a 'traceEvents' list: not a profiler trace"]
    out = json.loads(cli("summarize", d, "--json").stdout)
    assert len(out["skipped"]) == 8 and "two\nlines.json" in {s["path"] for s in out["skipped"]}
    assert out["straggler"] == 1


def test_a_folder_of_odd_entries_only(tmp_path):
    d = tmp_path / "odd"
    d.mkdir()
    (d / "nested").mkdir()
    os.symlink(tmp_path / "gone.json", d / "dangling.json")
    assert "no rank trace in the folder (dangling.json: a symbolic link to " in one_line_error("summarize", d)


def test_traces_without_a_rank_are_skipped(tmp_path, h200):
    d = link(tmp_path / "single", h200 / "64_bf16_warm_eager.json")
    assert "64_bf16_warm_eager.json: no rank: neither distributedInfo.rank nor 'rank<N>'" in \
        one_line_error("summarize", d)


def test_rank_from_the_file_name(tmp_path, pair):
    """A trace whose header has no rank takes it from its name."""
    doc = raw_doc(pair / "sampled_rank-1.json.gz")
    del doc["distributedInfo"]
    (tmp_path / "trace_rank7.json").write_text(json.dumps(doc))
    r = R.read_ranks(tmp_path)
    assert [x.rank for x in r.ranks] == [7] and r.world_size is None


def test_one_rank_only(tmp_path):
    d = link(tmp_path / "one", RANKS / "h200x2-ddp" / "rank1.json.gz")
    p = cli("summarize", d)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("one rank only: nothing to compare across ranks")
    out = json.loads(cli("summarize", d, "--json").stdout)
    assert [x["rank"] for x in out["ranks"]] == [1] and out["straggler"] is None
    assert out["straggler_reason"] == "one rank only: nothing to compare"


def test_ranks_from_different_jobs(tmp_path, pair):
    d = link(tmp_path / "worlds", pair / "sampled_rank-0.json.gz", RANKS / "h200x2-ddp" / "rank1.json.gz")
    assert "ranks from different jobs: rank1.json.gz has a world size of 2, sampled_rank-0.json.gz of 128" in \
        one_line_error("summarize", d)
    d = link(tmp_path / "twice", RANKS / "h200x2-ddp" / "rank0.json.gz", RANKS / "h200x2-manual" / "rank0.json.gz",
             names=["a_rank0.json.gz", "b_rank0.json.gz"])
    assert "two traces claim rank 0 (a_rank0.json.gz and b_rank0.json.gz)" in one_line_error("diagnose", d)
    # the same world size, but recorded 17 s apart: not one job's recording
    d = link(tmp_path / "apart", RANKS / "h200x2-ddp" / "rank0.json.gz", RANKS / "h200x2-straggler" / "rank1.json.gz")
    assert re.search(r"the recordings do not overlap in time \(rank 0 ends at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, "
                     r"rank 1 starts at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", one_line_error("summarize", d, "--json"))


def test_rank_beyond_the_world_size(tmp_path):
    doc = raw_doc(RANKS / "h200x2-ddp" / "rank1.json.gz")
    doc["distributedInfo"]["rank"] = 5
    (tmp_path / "rank5.json").write_text(json.dumps(doc))
    with pytest.raises(TraceError, match="rank5.json is rank 5, beyond its world size of 2"):
        R.read_ranks(tmp_path)


def test_gzip_and_plain_read_alike(tmp_path):
    """A rank folder as the lead's recording will come: plain rank0.json, rank1.json."""
    for k in (0, 1):
        (tmp_path / f"rank{k}.json").write_bytes(gzip.open(RANKS / "h200x2-straggler" / f"rank{k}.json.gz").read())
    a, b = R.read_ranks(tmp_path), R.read_ranks(RANKS / "h200x2-straggler")
    assert a.to_json()["ranks"][0]["exposed_us"] == b.to_json()["ranks"][0]["exposed_us"]
    assert a.straggler.rank == b.straggler.rank == 1


def test_folder_output_is_strict_json_and_needs_no_heavy_imports(pair):
    def no_constants(word):
        raise ValueError(f"{word} in the output")

    out = cli("summarize", pair, "--json")
    doc = json.loads(out.stdout, parse_constant=no_constants)
    assert doc["matched_end_spread_us"] < 400
    json.loads(cli("diagnose", pair, "--json").stdout, parse_constant=no_constants)
    code = ("import sys, helpers.__main__ as m; m.main(['summarize', %r]); m.main(['diagnose', %r]); "
            "print(*(x in sys.modules for x in ('torch', 'pandas', 'matplotlib', 'ipywidgets')))" % (str(pair), str(pair)))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.stdout.strip().splitlines()[-1] == "False False False False"


def test_top_limits_the_matched_table(pair):
    text = cli("summarize", pair, "--top", "2").stdout
    assert "matched collectives, in time order (2 of 5)" in text
    assert "matched collectives, in time order" not in cli("summarize", pair, "--top", "0").stdout


# --- notebook 15's pairs, recorded on two H200s by python -m helpers.runs.ddp record ------------------------


def _nccl_starts_us(path):
    """Each NCCL kernel's start on the shared clock, straight from the JSON (baseTimeNanoseconds + ts)."""
    import json

    doc = json.loads(path.read_text())
    base = doc.get("baseTimeNanoseconds", 0) / 1e3
    return sorted(base + e["ts"] for e in doc["traceEvents"]
                  if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower())


def test_the_recorded_straggler_is_rank_1_as_planted(h200):
    """rank 1 sleeps before every step (helpers/runs/ddp_train.py --straggle-ms): it enters every all-reduce last."""
    folder = h200 / "ddp" / "straggler"
    r = R.read_ranks(folder)
    assert r.straggler.rank == 1 and r.backend == "nccl" and r.world_size == 2
    s0, s1 = (_nccl_starts_us(folder / f"rank{k}.json") for k in (0, 1))
    n = min(len(s0), len(s1))
    assert n >= 3 and sum(b > a for a, b in zip(s0[:n], s1[:n])) == n  # by hand: rank 1 starts later, every time
    assert r.ranks[0].wait_us > r.ranks[1].wait_us  # and rank 0 does the waiting, inside its kernels


def test_the_recorded_bucket_and_no_sync_runs(h200):
    """Bigger buckets mean fewer all-reduces a step; no_sync keeps the count per optimizer step."""
    from helpers.facts import steps

    def per_step(name):
        folder = h200 / "ddp" / name
        t = read_trace(folder / "rank0.json")
        return len(_nccl_starts_us(folder / "rank0.json")) / len(steps(t))

    assert per_step("bucket100") < per_step("base")
    assert per_step("nosync4") == per_step("base")


def test_clock_shifts_put_the_ranks_on_one_clock(h200):
    """Shifted by clock_shifts_us, each rank's first NCCL kernel lands where the raw base times put it."""
    folder = h200 / "ddp" / "base"
    traces = [read_trace(folder / f"rank{k}.json") for k in (0, 1)]
    shifts = C.clock_shifts_us(traces)
    raw = [_nccl_starts_us(folder / f"rank{k}.json")[0] for k in (0, 1)]
    first = [min(t.ts[j] for j in facts.collective_work(t)) + s for t, s in zip(traces, shifts)]
    assert min(shifts) == 0.0
    assert first[1] - first[0] == pytest.approx(raw[1] - raw[0], abs=1.0)
