"""A pytest plugin for the notebook run (``make test-notebooks``): no answer on screen before its question.

nbval executes the series in order, headless, with ``PROFILING_LEAK_CHECK=1``:
each question then marks itself, with the facts that decide it, in its
cell's output (:mod:`helpers.lesson.widgets`). This plugin keeps every executed
cell's outputs as nbval receives them and adds one last test item,
``series-leaks``, which reads the series in order with the markdown cells
and fails on any fact shown before its question (:func:`helpers.lesson.spoilers.find_leaks`);
``series-quiet``, which fails on any output written to stderr (a warning under a reveal); and
``series-small``, which fails when a notebook saved with its outputs (every reveal shown, as a learner who
answered everything saves it) would be over :data:`SAVED_MAX` bytes: Colab, GitHub and git handle large
notebooks badly. The series runs once: the checks read the outputs of that same run.

A recorded value can equal another trace's unrelated figure by chance (two
durations of three digits, from different traces, meaning different things).
Each such coincidence is read by a person and listed in
``tests/leak_coincidences.json`` with why it is not the answer; an entry that
no longer matches (after a re-recording) fails too, so the list stays true.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.lesson.spoilers import MIME, Leak, find_leaks

COINCIDENCES = Path(__file__).with_name("leak_coincidences.json")
#: the most a notebook saved after its run may weigh ("about 1 MB"; the largest, 17, held 1.05 MB on 2026-12-01)
SAVED_MAX = 1_100_000

_executed: dict[str, dict[int, list[dict]]] = {}  # notebook path -> cell index -> outputs
_order: list[str] = []


def _outputs(item) -> list[dict]:
    """nbval's outputs for one cell as plain dicts (nbformat nodes are dicts too)."""
    outs = []
    for o in getattr(item, "test_outputs", None) or []:
        d = dict(o)
        if "data" in d:
            d["data"] = dict(d["data"])
        outs.append(d)
    return outs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    cell = getattr(item, "cell", None)
    if cell is None or not hasattr(item, "cell_num"):
        return
    path = str(item.parent.fspath)
    if path not in _executed:
        _executed[path] = {}
        _order.append(path)
    _executed[path][item.cell_num] = _outputs(item)


def _excuse_coincidences(leaks: list[Leak], ran: set[str]) -> tuple[list[Leak], list[dict]]:
    """Leaks that are not reviewed coincidences, and the reviewed entries (of notebooks that ran) no longer seen."""
    reviewed = json.loads(COINCIDENCES.read_text())["coincidences"] if COINCIDENCES.exists() else []

    def matches(entry: dict, leak: Leak) -> bool:
        return (leak.qid == entry["question"] and leak.fact == entry["form"]
                and leak.where.split(" cell ")[0] == entry["shown_in"])

    def checkable(entry: dict) -> bool:  # both notebooks ran: where it is shown, and where it is asked
        asked_in = entry["question"].split(".")[0] + "_"
        return entry["shown_in"] in ran and any(n.startswith(asked_in) for n in ran)

    kept = [x for x in leaks if not any(matches(e, x) for e in reviewed)]
    stale = [e for e in reviewed if checkable(e) and not any(matches(e, x) for x in leaks)]
    return kept, stale


class SeriesLeaks(pytest.Item):
    """The series read in order: every question's facts must be absent from what comes before it."""

    def runtest(self) -> None:
        if not _order:
            pytest.skip("no notebook ran in this session")
        series = []
        for path in _order:
            nb = json.loads(Path(path).read_text())
            code_i = 0
            cells = []
            for cell in nb["cells"]:
                c = {"cell_type": cell["cell_type"], "source": cell.get("source", "")}
                if cell["cell_type"] == "code":
                    c["outputs"] = _executed[path].get(code_i, [])
                    code_i += 1
                cells.append(c)
            series.append((Path(path).stem, cells))
        leaks, checked = find_leaks(series)
        if checked == 0:
            pytest.fail("no question marked itself: run with PROFILING_HEADLESS=1 PROFILING_LEAK_CHECK=1")
        leaks, stale = _excuse_coincidences(leaks, ran={Path(p).stem for p in _order})
        if stale:
            raise AssertionError("reviewed coincidences that no longer occur (remove them from "
                                 f"{COINCIDENCES.name}):\n" + "\n".join(map(str, stale)))
        if leaks:
            raise AssertionError(f"{len(leaks)} answer(s) on screen before their question "
                                 f"({checked} questions checked):\n" + "\n".join(x.text() for x in leaks))

    def reportinfo(self):
        return self.fspath, None, "series-leaks: no answer before its question"


class SeriesQuiet(pytest.Item):
    """No executed cell writes to stderr: a warning or a log line under a reveal is noise on a learner's screen."""

    def runtest(self) -> None:
        if not _order:
            pytest.skip("no notebook ran in this session")
        noisy = []
        for path in _order:
            for cell, outs in sorted(_executed[path].items()):
                for o in outs:
                    if o.get("output_type") == "stream" and o.get("name") == "stderr":
                        text = "".join(o.get("text", "")) if isinstance(o.get("text"), list) else o.get("text", "")
                        noisy.append(f"{Path(path).stem} code cell {cell}: {text.strip()[:200]}")
        if noisy:
            raise AssertionError(f"{len(noisy)} output(s) on stderr:\n" + "\n".join(noisy))

    def reportinfo(self):
        return self.fspath, None, "series-quiet: nothing on stderr"


def saved_size(path: str | Path, outputs: dict[int, list[dict]]) -> int:
    """The bytes of ``path`` saved as Jupyter saves it, with these outputs in its code cells (the leak check's own
    markers, which no learner's notebook holds, left out)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        cell.outputs = [nbformat.from_dict(o) for o in outputs.get(i, []) if MIME not in (o.get("data") or {})]
    return len(nbformat.writes(nb).encode())


class SeriesSmall(pytest.Item):
    """A notebook saved after its run stays small enough to keep, share and open on Colab."""

    def runtest(self) -> None:
        if not _order:
            pytest.skip("no notebook ran in this session")
        sizes = {Path(p).stem: saved_size(p, _executed[p]) for p in _order}
        big = {k: v for k, v in sizes.items() if v > SAVED_MAX}
        if big:
            raise AssertionError(f"saved with their outputs, over {SAVED_MAX:,} bytes: "
                                 + ", ".join(f"{k} {v:,} bytes" for k, v in big.items())
                                 + f" (the largest figures and Perfetto buttons go first: show.small_png, "
                                   "perfetto.MAX_EMBED)")

    def reportinfo(self):
        return self.fspath, None, f"series-small: every saved notebook under {SAVED_MAX:,} bytes"


def _provenance() -> list[str]:
    """The reference sets' provenance strings as a reveal would print them (driver and torch versions)."""
    out = []
    for m in (Path(__file__).resolve().parent.parent / "traces" / "reference").glob("*/manifest.json"):
        doc = json.loads(m.read_text())
        out += [f"driver {doc['driver']}" if doc.get("driver") else "", f"torch {doc['torch']}" if doc.get("torch") else ""]
    return [x for x in out if x]


#: what the series' reveals still do that section 2 of issue 35 removes, notebook by notebook: written for the
#: editorial work, enforced once the reveals are rewritten
REVEAL_REPORT = Path(__file__).resolve().parent.parent / ".cache" / "reveal-format.txt"


class SeriesReveals(pytest.Item):
    """Every reveal on screen has the reveal's shape: one div.reveal with its question id, a first line that says the
    verdict and quotes the learner's answer, and no provenance (a recording's driver or torch) outside its fold: the
    banner says it once (tests/reveal_format.py). Their length is counted and written to :data:`REVEAL_REPORT`."""

    def runtest(self) -> None:
        import reveal_format as rf

        if not _order:
            pytest.skip("no notebook ran in this session")
        bad, found, notes = [], [], []
        prov = _provenance()
        for path in _order:
            for cell, outs in sorted(_executed[path].items()):
                for o in outs:
                    page = (o.get("data") or {}).get("text/html")
                    if not page:
                        continue
                    for r in rf.reveals("".join(page) if isinstance(page, list) else page):
                        found.append(r)
                        bad += [f"{Path(path).stem} code cell {cell} ({r.qid}): {x}"
                                for x in rf.shape_problems(r) + rf.provenance_problems(r, prov)]
        notes += rf.length_problems(found)
        REVEAL_REPORT.parent.mkdir(exist_ok=True)
        REVEAL_REPORT.write_text(f"{len(found)} reveals; still to rewrite (issue 35, section 2):\n" + "\n".join(notes)
                                 + "\n")
        if not found:
            raise AssertionError("no reveal on screen in the whole series: the reveals lost their div.reveal")
        if bad:
            raise AssertionError(f"{len(bad)} reveal(s) out of shape:\n" + "\n".join(bad))

    def reportinfo(self):
        return self.fspath, None, ("series-reveals: every reveal has its question id, quotes the answer, and keeps "
                                   "provenance out of its text")


def pytest_collection_modifyitems(session, config, items):
    if any(hasattr(i, "cell") for i in items):
        items.append(SeriesLeaks.from_parent(session, name="series-leaks"))
        items.append(SeriesReveals.from_parent(session, name="series-reveals"))
        items.append(SeriesQuiet.from_parent(session, name="series-quiet"))
        items.append(SeriesSmall.from_parent(session, name="series-small"))
