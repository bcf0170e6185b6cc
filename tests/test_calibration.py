"""diagnose's expected gains against every fix the project timed without the profiler (benchmarks/diagnose_calibration.py)."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import diagnose_calibration as cal  # noqa: E402


def test_every_timed_fix_is_predicted_within_a_factor_of_two():
    got = cal.rows()
    assert len(got) == len(cal.ROWS) >= 18
    missed = [(r.fix.trace, r.fix.rule, round(r.predicted, 2), round(r.measured, 2)) for r in got if not r.within]
    assert not missed, missed


def test_the_fixes_that_matter_most_are_findings_and_ranked_first():
    """Where a fix more than doubled the speed (the loader, the workers), its rule fires as the first finding."""
    from helpers.advice.diagnose import diagnose
    from helpers.reader.trace import read_trace

    for r in cal.rows():
        if r.measured >= 2:
            first = diagnose(read_trace(cal.H200 / f"{r.fix.trace}_bf16_warm_eager.json"))[0]
            assert r.fired and first.rule == r.fix.rule, (r.fix.trace, first.rule)
