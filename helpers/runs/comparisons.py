"""Workloads timed side by side without the profiler: the comparisons the notebooks grade.

A question such as "does a batch axis cost the CPU more?" compares two
unprofiled times. Timed one after the other, the machine's state moves
between them; timed in turn, round by round (:func:`helpers.runs.rounds.interleave`),
it falls on both alike. Each :class:`Group` here names the calls one question
compares. :func:`measure` times a group live on this GPU (or on this CPU,
one thread), or reads what the recorder measured on the reference GPU::

    python -m helpers.runs.comparisons OUT_DIR [NAME ...]   # the recorder runs this in a fresh process

The recorder times the groups in a process that has not profiled anything
(the profiler leaves a cost behind in a process: :mod:`helpers.runs.timing`).
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..facts.measure import Measured, Spread
from .rounds import interleave, one_thread
from .slow_loop import FIXES, slow_loop
from .stopwatch import phase
from .training import input_pipeline, train_step
from .workload import Workload, WorkloadError, attention, block, linear, matmul_add


@dataclass(frozen=True)
class Member:
    """One side of a comparison: a workload, eager or compiled."""

    workload: Workload
    compile: bool = False
    compile_mode: str | None = None


@dataclass(frozen=True)
class Group:
    """Calls one question compares, and how to time them."""

    name: str
    members: tuple[tuple[str, Member], ...]
    what: str  # "host": the CPU's time to issue a call; "wall": a call (a training step) start to finish
    rounds: int = 30
    # untimed calls at the start of every block, every member's: they use up a DataLoader's batches prepared ahead,
    # and let the workers of the member before finish refilling their queue (one trial on the H200 without them for
    # the main-process members: notebook 14's pageable pipeline timed 151 ms a step; the reference set, with them,
    # 94 ms)
    settle: int = 0
    max_per_block: int = 20
    block_s: float = 0.01  # about how long a block's timed calls take (rounds.interleave)

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.members]


def _group(name: str, what: str, members: dict[str, Member], **kw: Any) -> Group:
    return Group(name, tuple(members.items()), what, **kw)


#: every comparison the notebooks grade on the GPU, by name
GROUPS: dict[str, Group] = {g.name: g for g in [
    _group("batch", "host", {"2-D": Member(matmul_add(64)), "batch 8": Member(matmul_add(64, batch=8)),
                             "batch 64": Member(matmul_add(64, batch=64))}),  # 05
    _group("compile-4096", "host", {"eager": Member(matmul_add(4096)),
                                    "compiled": Member(matmul_add(4096), compile=True)}),  # 08
    _group("compile-64", "host", {"eager": Member(matmul_add(64)), "compiled": Member(matmul_add(64), compile=True),
                                  "reduce-overhead": Member(matmul_add(64), compile=True,
                                                            compile_mode="reduce-overhead")}),  # 08
    _group("linear", "host", {"eager": Member(linear()), "compiled": Member(linear(), compile=True)}),  # 09
    _group("sdpa", "host", {b: Member(attention(f"sdpa-{b}")) for b in ("math", "efficient", "flash", "cudnn")}),  # 10
    _group("blocks", "host", {"eager": Member(block()), "compiled": Member(block(), compile=True)}),  # 11
    _group("train-step", "wall", {"fp32": Member(train_step()), "TF32": Member(train_step(precision="tf32")),
                                  "autocast": Member(train_step(precision="amp")),
                                  "fused AdamW": Member(train_step(optimizer="fused")),
                                  "four syncing lines": Member(train_step(syncs=True))},
           rounds=20, max_per_block=10),  # 12
    # The DataLoader prepares batches ahead (2 per worker): after a pause the first steps find them ready, so
    # each block first takes as many untimed steps as four workers can have prepared.
    _group("input", "wall", {"main process, pageable": Member(input_pipeline()),
                             "main process, pinned + non-blocking": Member(input_pipeline(pin=True, non_blocking=True)),
                             "4 workers, pinned": Member(input_pipeline(workers=4, pin=True, non_blocking=True))},
           rounds=8, settle=8, max_per_block=3),  # 14
    # 16: the loop as written against each fix alone, against the fixes one on top of another, and the fixed loop
    # against its input alone (the batches fetched and copied, nothing trained: the same time per step says the input
    # sets the pace). Every block starts after untimed steps that use up the batches the workers prepared ahead
    # during the other calls' turns, then times about 0.15 s of steps: a rate the workers sustain, not a batch that
    # was waiting.
    *[_group(name, "wall", members, rounds=6, settle=8, max_per_block=12, block_s=0.15) for name, members in (
        ("loop-alone", {"as written": Member(slow_loop()), **{f: Member(slow_loop((f,))) for f in FIXES}}),
        ("loop-stack", {"as written": Member(slow_loop()),
                        **{"+".join(FIXES[:n]): Member(slow_loop(FIXES[:n])) for n in range(1, len(FIXES) + 1)}}),
        ("loop-feed", {"all five fixes": Member(slow_loop(FIXES)),
                       "its input alone": Member(slow_loop(FIXES, feed_only=True))}))],
]}


@dataclass
class Comparison:
    """A group's calls timed in turn: per label, the CPU's time per call (host) and the time per call (wall)."""

    group: Group
    measured: Measured
    source: str  # where and when it was measured, in words
    unavailable: dict[str, str]  # label -> why it could not run here

    def spread(self, label: str) -> Spread:
        side = self.measured.host if self.group.what == "host" else self.measured.wall
        return side[label]

    @property
    def labels(self) -> list[str]:
        return [x for x in self.group.labels if x not in self.unavailable]

    def ratio(self, a: str, b: str) -> Spread:
        """``a / b``, round by round."""
        return self.measured.ratio(a, b, self.group.what)

    def conditions_text(self) -> str:
        return self.measured.conditions.text()


def _distinct(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
    """``fn`` with a code object of its own: torch.compile caches by code object, and two modes of one function
    compiled in one process must not share a cache entry."""
    if not isinstance(fn, types.FunctionType):
        return fn
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{''.join(c if c.isalnum() else '_' for c in label)}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


def _calls(group: Group, device: str, dtype: str) -> tuple[dict[str, tuple], dict[str, str]]:
    import torch

    calls, unavailable = {}, {}
    for label, m in group.members:
        try:
            fn, args = m.workload.build(device, dtype)
            if m.compile:
                fn = torch.compile(_distinct(fn, label), mode=m.compile_mode)
            grad = torch.no_grad() if m.workload.no_grad else torch.enable_grad()
            with grad:  # a first call here: a backend this GPU lacks fails now, not in the timed loop
                fn(*args)
            calls[label] = (_with_grad(fn, m.workload.no_grad), args)
        except WorkloadError as e:
            unavailable[label] = str(e)
        except RuntimeError as e:  # an SDPA backend with no kernel for this GPU says so at its first call
            unavailable[label] = str(e).splitlines()[0][:200]
    return calls, unavailable


def _with_grad(fn: Callable[..., Any], no_grad: bool) -> Callable[..., Any]:
    import torch

    if not no_grad:
        return fn

    def call(*args: Any) -> Any:
        with torch.no_grad():
            return fn(*args)
    return call


def run(group: Group, device: str, dtype: str, where: str) -> tuple[Measured, dict[str, str]]:
    """Time a group here, now."""
    calls, unavailable = _calls(group, device, dtype)
    if len(calls) < 2:
        raise WorkloadError(f"comparison {group.name}: fewer than two of its calls run here ({unavailable})")
    host = group.what == "host"
    with phase("timed comparison", group.name):
        m = interleave(calls, device=device, rounds=group.rounds, max_per_block=group.max_per_block,
                       block_s=group.block_s, wall=not host, host=host, settle=group.settle, where=where)
    return m, unavailable


def measure(name: str, *, on: str = "auto") -> Comparison:
    """Group ``name`` timed live on this GPU, on this CPU (``on="cpu"``, one thread), or read from the reference set."""
    from .mode import environment

    group = GROUPS[name]
    if on == "cpu":
        with one_thread():
            m, un = run(group, "cpu", "fp32", "this CPU")
        return Comparison(group, m, "measured now on this CPU, one thread", un)
    if environment().live:
        return _on_this_gpu(group)
    return recorded(name)


def _on_this_gpu(group: Group) -> Comparison:
    """``group`` timed in turn now, on this GPU."""
    from .mode import environment
    from .timing import profiled_here
    from .workload import pick_dtype

    env = environment()
    m, un = run(group, "cuda", pick_dtype("cuda", env.capability), env.gpu or "this GPU")
    note = (" (in a kernel that has already run the profiler, which slows every call a little; the sides are "
            "timed in turn, so the ratio stands)" if profiled_here() else "")
    return Comparison(group, m, f"measured now on {env.gpu}{note}", un)


def adhoc(name: str, members: dict[str, Member], what: str = "wall", **how: Any) -> Comparison:
    """Members no recorded group holds together (a learner's own order of fixes), timed in turn now on this GPU."""
    from .mode import environment

    if not environment().live:
        raise WorkloadError(f"comparison {name}: timing calls now needs a CUDA GPU; recorded mode reads the "
                            "reference set's groups instead")
    return _on_this_gpu(Group(name, tuple(members.items()), what, **how))


def path_in(folder: Path, name: str) -> Path:
    return folder / f"compare_{name}.json"


def recorded(name: str) -> Comparison:
    """The reference set's measurement of group ``name``."""
    from .reference import NotRecorded, reference_set

    ref = reference_set()
    p = path_in(ref.path, name)
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError):
        raise NotRecorded(f"The reference set {ref.path.name} has no comparison {name!r} ({p.name}). Record it on "
                          "a GPU with `python -m helpers.runs.record`.") from None
    m = Measured.from_json(d.get("measured"), where=f"{ref.gpu} (recorded)")
    if m is None:
        raise NotRecorded(f"{p} holds no measurement: record it again with `python -m helpers.runs.record`.")
    return Comparison(GROUPS[name], m, f"measured on {ref.short()}, in a process that profiled nothing",
                      dict(d.get("unavailable") or {}))


def _main(argv: list[str]) -> int:
    """Time the named groups (all by default) on this GPU and write ``compare_<name>.json`` into OUT_DIR."""
    import torch

    from .workload import pick_dtype

    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    names = argv[1:] or list(GROUPS)
    dtype = pick_dtype("cuda")
    where = torch.cuda.get_device_name(0)
    for name in names:
        group = GROUPS[name]
        try:
            m, un = run(group, "cuda", dtype, where)
        except WorkloadError as e:
            print(f"{name}: not measured ({e})", flush=True)
            continue
        path_in(out, name).write_text(json.dumps({"group": name, "what": group.what, "dtype": dtype,
                                                  "measured": m.to_json(), "unavailable": un}) + "\n")
        side = m.host if group.what == "host" else m.wall
        print(f"{name}: " + ", ".join(f"{k} {v.median:.1f} us" for k, v in side.items()), flush=True)
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
