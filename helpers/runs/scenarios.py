"""Every scenario the notebooks profile: what the recorder records, and recorded mode reads."""

from __future__ import annotations

from dataclasses import dataclass

from .tags import ARTICLE, Schedule, scenario_key
from .slow_loop import FIXES, slow_loop
from .training import input_pipeline, train_step
from .workload import Workload, attention, addmm, block, linear, matmul_add, mlp

#: matrix sizes of notebook 02's sweep
SWEEP_SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


@dataclass(frozen=True)
class Scenario:
    workload: Workload
    warm: bool = False
    compile: bool = False
    compile_mode: str | None = None
    schedule: Schedule = ARTICLE
    part: int = 1

    @property
    def key(self) -> str:
        return scenario_key(self.workload, self.warm, self.compile, self.schedule, self.compile_mode)


def _part1() -> list[Scenario]:
    s = [
        Scenario(matmul_add(64)),  # 01-04, 06: the article's first run
        Scenario(matmul_add(64), warm=True),  # 03: after warm-up
        Scenario(matmul_add(4096)),  # 02: the article's second run
        Scenario(matmul_add(4096), warm=True),  # 02, 04, 06
        Scenario(matmul_add(64), schedule=Schedule(0, 0, 3)),  # 03: the buffer request
        Scenario(matmul_add(64), schedule=Schedule(0, 0, 20)),  # 03: twenty steps
        Scenario(matmul_add(4096), warm=True, schedule=Schedule(0, 0, 20)),  # 07: variance
        Scenario(matmul_add(64, batch=8), warm=True),  # 05: bmm
        Scenario(matmul_add(4096), warm=True, compile=True),  # 08
        Scenario(matmul_add(64), warm=True, compile=True),  # 08: the compile tax
        Scenario(matmul_add(64), warm=True, compile=True, compile_mode="reduce-overhead"),  # 08: homework
        Scenario(addmm(4096), warm=True),  # 08: addmm by hand
        Scenario(matmul_add(4096, bias_1d=True), warm=True),  # 08: a 1-D bias, eager
        Scenario(matmul_add(4096, bias_1d=True), warm=True, compile=True),  # 08: a 1-D bias, compiled
        Scenario(matmul_add(64), warm=True, schedule=Schedule(5, 5, 3)),  # 03: ten steps before the recording
        Scenario(matmul_add(64, batch=64), warm=True),  # 05: a larger batch
        Scenario(matmul_add(4096), schedule=Schedule(0, 0, 20)),  # 07: twenty GEMMs from a cold start
    ]
    s += [Scenario(matmul_add(n), warm=True) for n in SWEEP_SIZES if n not in (64, 4096)]  # 02: sweep
    return s


def _part2() -> list[Scenario]:
    return [
        Scenario(linear(), warm=True, part=2),
        Scenario(linear(), warm=True, compile=True, part=2),
        Scenario(mlp(), warm=True, part=2),
        Scenario(mlp(), warm=True, compile=True, part=2),
        Scenario(mlp(batch=128), warm=True, part=2),  # 09: twice the tokens
        Scenario(mlp(batch=128), warm=True, compile=True, part=2),
    ]


def _part3() -> list[Scenario]:
    variants = ("naive", "inplace", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn", "sdpa-auto")
    longer = ("naive", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn")  # 10: twice the sequence
    return ([Scenario(attention(v), warm=True, part=3) for v in variants]
            + [Scenario(attention(v, seq=2048), warm=True, part=3) for v in longer])


def _part4() -> list[Scenario]:
    return [Scenario(block(), warm=True, part=4), Scenario(block(), warm=True, compile=True, part=4),
            Scenario(block(batch=32), warm=True, part=4),  # 11: four times the batch
            Scenario(block(batch=32), warm=True, compile=True, part=4)]


def _part5() -> list[Scenario]:
    """Volume two: a training step (12), its memory (13), its input pipeline (14)."""
    return [
        Scenario(train_step(), warm=True, part=5),  # 12: reading backward, fp32 GEMMs
        Scenario(train_step(precision="tf32"), warm=True, part=5),  # 12: TF32
        Scenario(train_step(precision="amp"), warm=True, part=5),  # 12: autocast to the series' dtype
        Scenario(train_step(optimizer="fused"), warm=True, part=5),  # 12: fused AdamW
        Scenario(train_step(optimizer="loop"), warm=True, part=5),  # 12: AdamW one parameter at a time
        Scenario(train_step(syncs=True), warm=True, part=5),  # 12: hidden syncs
        Scenario(train_step(batch=4096, memory=True), warm=True, part=5),  # 13: memory
        Scenario(train_step(batch=4096, memory=True, checkpoint=True), warm=True, part=5),  # 13: checkpointing
        Scenario(input_pipeline(), warm=True, part=5),  # 14: one process, pageable, blocking
        Scenario(input_pipeline(pin=True, non_blocking=True), warm=True, part=5),  # 14: pinned, non-blocking
        Scenario(input_pipeline(workers=4, pin=True, non_blocking=True), warm=True, part=5),  # 14: four workers
    ]


def _part6() -> list[Scenario]:
    """Notebook 16: the slow loop as written, each fix alone, and the fixes one on top of another in FIXES order."""
    alone = [slow_loop((f,)) for f in FIXES]
    stacked = [slow_loop(FIXES[:n]) for n in range(2, len(FIXES) + 1)]
    return [Scenario(w, warm=True, part=6) for w in [slow_loop(), *alone, *stacked]]


def all_scenarios(parts: tuple[int, ...] = (1, 2, 3, 4, 5, 6)) -> list[Scenario]:
    out: list[Scenario] = []
    for part, make in ((1, _part1), (2, _part2), (3, _part3), (4, _part4), (5, _part5), (6, _part6)):
        if part in parts:
            out += make()
    return out
