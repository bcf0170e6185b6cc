"""Notebooks 14 and 15's lesson modules, and the leak check's reading of what they show."""

from __future__ import annotations

from helpers import spoilers


def test_the_leak_check_reads_no_script():
    """A Perfetto button carries the trace as base64 inside a <script>: code the page runs, not text a learner
    reads; a ratio's short form ("2x") turns up in base64 by chance and must not count as shown."""
    page = "<button>Open in Perfetto</button><script>var DATA = 'aGVsbG8I2xhbmU=';</script><p>busy 3.4x</p>"
    text = spoilers.plain_text(page)
    assert "DATA" not in text and "Open in Perfetto" in text
    assert spoilers.found(spoilers.ratio(2.23), text) is None
    assert spoilers.found(spoilers.ratio(3.4), text) == "3.4x"
