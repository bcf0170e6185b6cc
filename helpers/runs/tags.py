"""How runs are named: the profiler schedule, the article's trace tags, and folder names for GPUs.

Recorded mode finds a reference trace by its scenario key, and every
reference set's manifest is keyed by it: a change to these names must keep
the recorded ones matching.
"""

from __future__ import annotations

from dataclasses import dataclass

from .workload import Workload


@dataclass(frozen=True)
class Schedule:
    """``torch.profiler.schedule(wait, warmup, active, repeat=1)``."""

    wait: int = 1
    warmup: int = 1
    active: int = 3

    @property
    def steps(self) -> int:
        return self.wait + self.warmup + self.active

    def __str__(self) -> str:
        return f"wait={self.wait}, warmup={self.warmup}, active={self.active}"


#: the article's schedule
ARTICLE = Schedule(1, 1, 3)


def tag_for(w: Workload, dtype: str, warm: bool, compile: bool, schedule: Schedule = ARTICLE,
            compile_mode: str | None = None) -> str:
    """The article's file naming ``{size}_{dtype}_{cold|warm}_{eager|compile}``, plus what differs.

    A schedule other than the article's adds ``_s<wait>-<warmup>-<active>``;
    a compile mode adds ``-<mode>``.
    """
    tag = f"{w.stem}_{dtype}_{'warm' if warm else 'cold'}_{'compile' if compile else 'eager'}"
    if compile and compile_mode:
        tag += f"-{compile_mode}"
    if schedule != ARTICLE:
        tag += f"_s{schedule.wait}-{schedule.warmup}-{schedule.active}"
    return tag


def scenario_key(w: Workload, warm: bool, compile: bool, schedule: Schedule = ARTICLE,
                 compile_mode: str | None = None) -> str:
    """The tag without its dtype: how recorded mode finds the same scenario on any GPU's set."""
    return tag_for(w, "*", warm, compile, schedule, compile_mode)


def slug(name: str) -> str:
    """A GPU's name as a folder name: 'NVIDIA H200' -> 'nvidia-h200'."""
    out = "".join(c.lower() if c.isalnum() else "-" for c in name)
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "unknown"
