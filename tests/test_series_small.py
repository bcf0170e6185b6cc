"""series-small (tests/series_leaks.py) weighs a notebook as Jupyter would save it after its run."""

from __future__ import annotations

import base64

from conftest import ROOT
from series_leaks import SAVED_MAX, saved_size

from helpers.lesson.spoilers import MIME

NOTEBOOK = ROOT / "notebooks" / "00_before_we_start.ipynb"


def test_a_saved_notebook_weighs_its_outputs_and_not_the_leak_checks_markers():
    bare = saved_size(NOTEBOOK, {})
    png = {"output_type": "display_data", "metadata": {},
           "data": {"image/png": base64.b64encode(bytes(300_000)).decode(), "text/plain": "<Figure>"}}
    marker = {"output_type": "display_data", "metadata": {}, "data": {MIME: {"event": "end"}, "text/plain": ""}}
    with_png = saved_size(NOTEBOOK, {0: [png]})
    assert 400_000 < with_png - bare < 420_000  # the base64 text of 300,000 bytes, and its JSON
    assert saved_size(NOTEBOOK, {0: [marker]}) == bare
    assert saved_size(NOTEBOOK, {0: [png] * 3}) > SAVED_MAX  # three such figures would fail the run
