"""What a reveal on screen must look like (issue 35, section 2; ``../shared/review/style.md``), read from its HTML.

A reveal is one ``<div class="reveal" data-qid="NN.name">`` (:func:`helpers.lesson.widgets.reveal_box`): its first
line (``<p class="reveal-head">``) says the verdict and quotes the learner's answer ("You said ..."); the
measurement's details (spread, tolerance, provenance, caveats) sit in a ``<details>`` fold inside it. The checks
here find what breaks that shape; ``series_leaks.SeriesReveals`` runs them on every reveal of the series run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

#: a beginner reads this many words outside the fold at most, and about MEDIAN_WORDS in the median reveal
MAX_WORDS = 120
MEDIAN_WORDS = 60


@dataclass
class Reveal:
    qid: str
    head: str  # the first line's text
    outside: str  # the text outside the fold (the head included)
    folded: str  # the text inside the fold


class _Parse(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[Reveal] = []
        self._depth = 0  # <div> nesting inside the current reveal; 0: outside any
        self._fold = 0
        self._head = False
        self._cur: Reveal | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and self._cur is None and "reveal" in (a.get("class") or "").split():
            self._cur = Reveal(a.get("data-qid") or "", "", "", "")
            self._depth = 1
            return
        if self._cur is None:
            return
        if tag == "div":
            self._depth += 1
        elif tag == "details":
            self._fold += 1
        elif tag == "p" and "reveal-head" in (a.get("class") or "").split():
            self._head = True

    def handle_endtag(self, tag):
        if self._cur is None:
            return
        if tag == "details":
            self._fold -= 1
        elif tag == "p":
            self._head = False
        elif tag == "div":
            self._depth -= 1
            if self._depth == 0:
                self.found.append(self._cur)
                self._cur = None

    def handle_data(self, data):
        if self._cur is None:
            return
        if self._fold:
            self._cur.folded += data
        else:
            self._cur.outside += data
            if self._head:
                self._cur.head += data


def reveals(html: str) -> list[Reveal]:
    """Every reveal in a page of HTML."""
    p = _Parse()
    p.feed(html)
    return p.found


def words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def shape_problems(r: Reveal) -> list[str]:
    """What breaks the reveal's shape: no question id, no first line, no quote of the learner's answer."""
    out = []
    if not re.fullmatch(r"\d\d\.[a-z0-9-]+", r.qid):
        out.append(f"no question id (data-qid={r.qid!r})")
    if not r.head.strip():
        out.append("no first line (p.reveal-head)")
    elif "You said" not in r.head:
        out.append(f"its first line does not quote the answer: {r.head.strip()[:80]!r}")
    return out


def provenance_problems(r: Reveal, provenance: list[str]) -> list[str]:
    """Provenance (a recording's GPU, driver, torch, date strings) outside the fold."""
    return [f"provenance outside the fold: {p!r}" for p in provenance if p and p in r.outside]


def length_problems(found: list[Reveal]) -> list[str]:
    """Reveals a beginner cannot read in a breath: over MAX_WORDS outside the fold, or a median over MEDIAN_WORDS."""
    if not found:
        return []
    out = [f"{r.qid}: {words(r.outside)} words outside the fold (at most {MAX_WORDS})" for r in found
           if words(r.outside) > MAX_WORDS]
    counts = sorted(words(r.outside) for r in found)
    median = counts[len(counts) // 2]
    if median > MEDIAN_WORDS:
        out.append(f"the median reveal has {median} words outside its fold (about {MEDIAN_WORDS} at most)")
    return out
