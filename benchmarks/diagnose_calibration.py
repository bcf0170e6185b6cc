"""diagnose's expected gains against the fixes the project timed without the profiler.

Each row names a recorded trace (the run before the fix), the rule whose fix the timing applied, and the timed group
(``traces/reference/nvidia-h200/compare_<group>.json``: interleaved rounds, no profiler) with the labels before and
after. The predicted figure is that rule's ``expected_speedup`` on the trace (1.0 where the rule does not fire: diagnose
expects nothing from that fix); the measured one is the median of the round-by-round ratios (as the notebooks quote it). The target (issue 34): within a factor
of two wherever the project measured the fix; the table also says whether the measured gain lies inside the printed
range. Notebook 10's attention backends have no interleaved timing of the whole call (their timed group measures only
the CPU's side of a call): each scenario's own unprofiled wall time per call (its ``.timing.json``) stands in.

    .venv/bin/python benchmarks/diagnose_calibration.py      # prints the table; exit 3 when a row misses the target
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.advice.diagnose import diagnose  # noqa: E402
from helpers.reader.trace import read_trace  # noqa: E402
from helpers.advice.ledger import Gain  # noqa: E402

H200 = ROOT / "traces" / "reference" / "nvidia-h200"
#: predicted within this factor of measured, either way
#: gains under this (5%) are taken as none, predicted and measured alike
GAIN_NONE = 0.05
TARGET = 2.0


@dataclass(frozen=True)
class Fix:
    trace: str  # the reference trace of the run before the fix
    rule: str  # the rule whose fix it is
    group: str | None  # the timed group; None: each scenario's own unprofiled timing (``.timing.json``'s wall_us)
    before: str  # its label before and after the fix (with no group: "", and the trace of the run after the fix)
    after: str
    what: str  # the fix in words
    also: tuple[str, ...] = ()  # other rules the same fix removes: the row takes their gains together
    #: the cause of ``rule``'s finding the fix removes, where it removes only some (its op or its block, as the
    #: finding's ``parts`` name them): the row takes that part's gain, not the whole finding's. In ``also``, the same
    #: as "rule:cause".
    part: str | None = None
    #: the finding's gain is for another of its fixes (fp32-gemm's is TF32's): this fix's expectation is what the
    #: advice says of it (autocast where the CPU sets the pace: more launches, no gain), taken as 1.00x
    advice_only: bool = False
    #: the constant in helpers/advice whose value was taken from this same measurement (or from the traces of the
    #: runs after the fix): the row then checks the rule against what fitted it, not against new data
    fitted: str | None = None

    @property
    def label(self) -> str:
        return self.rule + (f"[{_SHORT.get(self.part, self.part)}]" if self.part else "")


_SHORT = {"aten::_local_scalar_dense": ".item()"}


ROWS = [
    # notebook 16: each fix alone on the loop as written
    # (the loader fix copies from pinned memory without blocking: the to_device block's waits go with it)
    Fix("loop", "input-bound", "loop-alone", "as written", "loader", "4 workers+pinned+nb (+pageable, +to_device)",
        also=("pageable-copies", "hidden-sync:to_device")),
    Fix("loop", "hidden-sync", "loop-alone", "as written", "sync", "no loss.item() in the loop",
        part="aten::_local_scalar_dense"),
    Fix("loop", "unfused-optimizer", "loop-alone", "as written", "fused", "fused AdamW", fitted="FUSED, its low end"),
    Fix("loop", "fp32-gemm", "loop-alone", "as written", "tf32", "TF32", fitted="TF32_MEASURED"),
    # the class weights built once, before the loop: the torch.tensor(list, device=...) copy under 'loss' and its wait
    Fix("loop", "hidden-sync", "loop-alone", "as written", "constant", "class weights made once",
        part="loss"),
    # notebook 16: the fixes stacked, each on the run with the ones before it
    Fix("loop", "input-bound", "loop-stack", "as written", "loader", "4 workers+pinned+nb (+pageable, +to_device)",
        also=("pageable-copies", "hidden-sync:to_device")),
    Fix("loop-loader", "hidden-sync", "loop-stack", "loader", "loader+sync", "no loss.item()",
        part="aten::_local_scalar_dense"),
    Fix("loop-loader-sync", "hidden-sync", "loop-stack", "loader+sync", "loader+sync+constant",
        "class weights made once", part="loss"),
    Fix("loop-loader-sync-constant", "unfused-optimizer", "loop-stack", "loader+sync+constant",
        "loader+sync+constant+fused", "fused AdamW", fitted="FUSED, its low end"),
    Fix("loop-loader-sync-constant-fused", "fp32-gemm", "loop-stack", "loader+sync+constant+fused",
        "loader+sync+constant+fused+tf32", "TF32", fitted="TF32_MEASURED"),
    # notebook 12: the training step at batch 512
    Fix("train-fp32-foreach", "fp32-gemm", "train-step", "fp32", "TF32", "TF32", fitted="TF32_MEASURED"),
    Fix("train-fp32-foreach", "fp32-gemm", "train-step", "fp32", "autocast", "bf16 autocast (advice: no gain)",
        advice_only=True, fitted="the advice quotes this timing"),
    Fix("train-fp32-foreach", "unfused-optimizer", "train-step", "fp32", "fused AdamW", "fused AdamW", fitted="FUSED"),
    # the rule counts the labelled block around the waits because this very timing showed it shortened too
    Fix("train-fp32-foreach-syncs", "hidden-sync", "train-step", "four syncing lines", "fp32", "the syncs removed",
        fitted="the blocks around the waits"),
    # notebook 14: the input pipeline
    Fix("input-w0", "input-bound", "input", "main process, pageable", "4 workers, pinned", "4 workers+pinned (+pageable)",
        also=("pageable-copies",), fitted="WORKERS_MEASURED"),
    Fix("input-w0-pin-nb", "input-bound", "input", "main process, pinned + non-blocking", "4 workers, pinned",
        "four workers", fitted="WORKERS_MEASURED"),
    # notebook 10: the same attention on a fused backend; the sdpa group times only the CPU's side of a call, so each
    # scenario's own unprofiled wall time per call (its .timing.json, timed in its own process, not interleaved)
    Fix("attn-sdpa-math1024", "math-attention", None, "", "attn-sdpa-flash1024", "flash backend",
        fitted="FUSED_ATTENTION"),
    Fix("attn-sdpa-math1024", "math-attention", None, "", "attn-sdpa-efficient1024",
        "memory-efficient backend", fitted="FUSED_ATTENTION"),
    Fix("attn-sdpa-math1024", "math-attention", None, "", "attn-sdpa-cudnn1024", "cuDNN backend",
        fitted="FUSED_ATTENTION"),
    # the one timing of pinned copies is with non_blocking too (as pageable-copies advises), which also removes the
    # copies' waits that hidden-sync claims: the row is the two rules' fix, their gains together
    Fix("input-w0", "pageable-copies", "input", "main process, pageable", "main process, pinned + non-blocking",
        "pinned+non-blocking (+hidden-sync)", also=("hidden-sync",), fitted="PINNED_GBS"),
]


@dataclass(frozen=True)
class Row:
    fix: Fix
    predicted: float
    low: float
    high: float
    measured: float
    fired: bool
    spread: tuple[float, float] | None = None  # the round-by-round ratios' quartiles (None: no paired rounds)

    @property
    def inside(self) -> bool:
        """Whether the measured gain lies in the printed range (to its two decimals)."""
        return round(self.low, 2) <= round(self.measured, 2) <= round(self.high, 2)

    @property
    def within(self) -> bool:
        r = self.predicted / self.measured
        return 1 / TARGET <= r <= TARGET

    @property
    def gain_within(self) -> bool:
        """The stricter reading near 1x: the gain itself (speedup - 1) within a factor of TARGET, or both gains
        under GAIN_NONE (a fix said to change little that changed little). A loss is never within."""
        p, m = self.predicted - 1, self.measured - 1
        if p < GAIN_NONE and abs(m) < GAIN_NONE:
            return True
        return p > 0 and m > 0 and 1 / TARGET <= p / m <= TARGET


def _measured(group: str, before: str, after: str) -> tuple[float, tuple[float, float] | None]:
    """The fix's speedup as the notebooks quote it: the median of the round-by-round ratios (each round timed both,
    interleaved), with their quartiles; or the ratio of the medians where the rounds do not pair (no spread)."""
    doc = json.loads((H200 / f"compare_{group}.json").read_text())
    a, b = (doc["measured"]["wall"][k]["samples"] for k in (before, after))
    if len(a) == len(b) and a:
        ratios = [x / y for x, y in zip(a, b)]
        q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
        return statistics.median(ratios), (q[0], q[2])
    return statistics.median(a) / statistics.median(b), None


def _wall_us(trace: str) -> float:
    """A scenario's unprofiled wall time per call, timed in its own process (its .timing.json)."""
    return json.loads((H200 / f"{trace}_bf16_warm_eager.timing.json").read_text())["wall_us"]


def _together(gains: list) -> "Gain | None":
    """Several findings' gains for one fix that removes them all: their savings add (no time is counted in two
    findings), so the step after is the window less each one's saving: 1 / (1 - sum(1 - 1/s))."""
    if len(gains) <= 1:
        return gains[0] if gains else None

    def one(xs: list[float]) -> float:
        return 1 / max(1 - sum(1 - 1 / x for x in xs), 1e-9)
    # a high end that takes in the other findings' fixes already (Gain.high_shared) is not added to again
    shared = [g.high for g in gains if g.high_shared]
    high = max(max(shared), one([g.speedup for g in gains])) if shared else one([g.high for g in gains])
    return Gain(one([g.speedup for g in gains]), one([g.low for g in gains]), high, "; ".join(g.basis for g in gains))


def rows() -> list[Row]:
    """Every row, predicted and measured."""
    out = []
    for f in ROWS:
        found = {x.rule: x for x in diagnose(read_trace(H200 / f"{f.trace}_bf16_warm_eager.json"))}
        gains = []
        for spec in ((f"{f.rule}:{f.part}" if f.part else f.rule), *f.also):
            rule, _, part = spec.partition(":")
            x = found.get(rule)
            if x is None:
                continue
            if part:
                gains += [p.gain for p in x.parts if part in (p.cause, p.annotation)]
            elif x.gain is not None:
                gains.append(x.gain)
        g = _together(gains)
        if f.advice_only and g is not None:
            g = Gain(1.0, 1.0, 1.0, "the advice: no gain where the CPU sets the pace")
        if f.group is None:
            measured, spread = _wall_us(f.trace) / _wall_us(f.after), None
        else:
            measured, spread = _measured(f.group, f.before, f.after)
        out.append(Row(f, g.speedup if g else 1.0, g.low if g else 1.0, g.high if g else 1.0, measured, g is not None,
                       spread))
    return out


def main() -> int:
    got = rows()
    print(f"{'trace':32} {'rule':22} {'fix':44} {'timed in':10} {'predicted':>18} {'measured':>9} {'its IQR':>11}  "
          f"within {TARGET:g}x  in range  gain within  fitted on it")
    for r in got:
        pred = f"{r.predicted:.2f}x [{r.low:.2f}-{r.high:.2f}]" if r.fired else "1.00x (no finding)"
        iqr = f"{r.spread[0]:.2f}-{r.spread[1]:.2f}" if r.spread else "-"
        print(f"{r.fix.trace:32} {r.fix.label:22} {r.fix.what:44} {r.fix.group or 'own runs':10} {pred:>18} "
              f"{r.measured:>8.2f}x {iqr:>11}  {'yes' if r.within else 'NO':>9}  {'yes' if r.inside else 'no':>8}  "
              f"{'yes' if r.gain_within else 'no':>11}  {r.fix.fitted or '-'}")
    missed = [r for r in got if not r.within]
    distinct = len({(r.fix.trace, r.fix.label, r.fix.also, r.fix.advice_only) for r in got})
    # compared as printed: an IQR shown as 1.00-1.15 reaches 1.00x for the reader too
    noisy = [r for r in got if r.spread and round(r.spread[0], 2) <= 1.0 <= round(r.spread[1], 2)]
    if noisy:
        print(f"{len(noisy)} rows' timings have an IQR that reaches 1.00x ("
              + ", ".join(f"{r.fix.trace} {r.fix.label}" for r in noisy)
              + "): those fixes' effects lie inside their own noise, so whether they fall in the printed range "
                "says little.")
    fresh = [r for r in got if r.fix.fitted is None]
    # the check on data no constant was fitted on first: the totals over every row hold the fitted ones too
    print(f"Out of sample: {len(fresh)} of the {len(got)} rows check a rule against a timing none of its constants "
          f"was fitted on: {sum(r.within for r in fresh)} with the speedup within {TARGET:g}x, "
          f"{sum(r.inside for r in fresh)} inside the printed range, {sum(r.gain_within for r in fresh)} with the gain "
          f"itself within {TARGET:g}x. The other {len(got) - len(fresh)} ('fitted on it') check a rule against the "
          "measurement a constant was fitted on, some with ends chosen to hold it: they show the fit, not a test.")
    print(f"Over all {len(got)} rows, fitted ones included: "
          f"{sum(r.gain_within for r in got)} with the gain itself (speedup - 1) within a "
          f"factor of {TARGET:g} of the predicted gain (or both under {GAIN_NONE:.0%}); "
          f"{sum(r.inside for r in got)} inside the printed range; "
          f"{len(got) - len(missed)} with the speedup within a factor of {TARGET:g}, which near 1x says "
          "little (0.68x to 2.7x around a 1.35x prediction).")
    print(f"The {len(got)} rows hold {distinct} distinct predictions: one prediction is checked against each timing "
          "of its fix (notebook 16 times the loader fix alone and first in the stack; notebook 10's three fused "
          "backends share the math backend's one).")
    print("(measured: the median of the round-by-round ratios, before the fix over after, each round timing both "
          "interleaved without the profiler, as the notebooks quote them. The attention rows: each backend's "
          "unprofiled wall time per call, timed in its own process once (no spread: those rows say less than the interleaved ones"
          f"; the same cuDNN kernel timed in two such processes, the auto and the cuDNN runs, gave {_wall_us('attn-sdpa-auto1024'):.1f} "
          f"and {_wall_us('attn-sdpa-cudnn1024'):.1f} us a call, so one such row missing its range by less than that "
          "says nothing). A fix in brackets, '(+pageable)', removes "
          "another rule's finding too: its row is their gains together, 1 / (1 - sum(1 - 1/s)), since no time is "
          "counted in two findings (a high end that counts the other fixes' gains already is kept as it is). A rule with a cause in brackets, 'hidden-sync[.item()]', is the part of its "
          "finding that cause explains, the one the fix removes: the others stay. A range of one value, "
          "[1.00-1.00], is the model finding no time in the trace for the fix to win; it sizes nothing of what "
          "the profiler changes in the balance of CPU and GPU, so a fix can still gain some without it"
          + "".join(f"; {r.fix.trace}'s {r.fix.label} timed {r.measured:.2f}x" for r in got if r.fired
                    and round(r.low, 2) == round(r.high, 2) and r.measured - 1 >= GAIN_NONE and not r.fix.advice_only
                    and r not in noisy)  # a timing inside its own noise proves no gain
          + ".)")
    return 3 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
