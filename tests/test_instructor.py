"""The instructor's guide matches the notebooks: every notebook, every question, the screenshot it shows."""

from __future__ import annotations

import re
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import instructor_table as it  # noqa: E402

GUIDE = (ROOT / "docs" / "instructor.md").read_text()


def generated() -> str:
    return GUIDE.split(it.BEGIN, 1)[1].split(it.END, 1)[0]


def test_every_notebook_has_a_row_and_a_section():
    rows = re.findall(r"^\| (\d\d) [^|]+\| +\d+ \|", GUIDE, re.M)
    sections = it.SECTION.findall(generated())
    numbers = [p.name[:2] for p in it.notebooks()]
    assert rows == numbers, "the per-notebook table of docs/instructor.md does not list the notebooks in order"
    assert sections == numbers, ("the generated block is stale: make test-notebooks && python tools/instructor_table.py"
                                 " (one notebook: make test-notebooks NOTEBOOKS=notebooks/NN_name.ipynb && "
                                 "python tools/instructor_table.py --only NN)")


def test_every_question_of_every_notebook_is_in_the_generated_block():
    block = generated()
    for path in it.notebooks():
        for key in it.questions_of(path):
            assert f"`{key}`" in block, f"{key} ({path.name}) is missing from docs/instructor.md's generated block"
        assert "(not in this journal" not in block, "the block was generated from a journal that lacks questions"


def test_the_questions_that_change_per_gpu_exist():
    for key in re.findall(r"^\| `(\d\d\.[\w-]+)` \| the", GUIDE, re.M):
        assert any(key in it.questions_of(p) for p in it.notebooks()), key


def test_the_screenshot_is_there():
    for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", GUIDE):
        assert (ROOT / "docs" / img).is_file(), img


def test_the_block_is_what_the_tool_writes(tmp_path):
    """Regenerating from the journal the block names the questions of gives the same questions (order and keys)."""
    keys_in_block = re.findall(r"^\| `(\d\d\.[\w-]+)` \(", generated(), re.M)
    keys_in_notebooks = [k for p in it.notebooks() for k in it.questions_of(p)]
    assert sorted(keys_in_block) == sorted(keys_in_notebooks)
    for p in it.notebooks():  # within a notebook, the block keeps the order the questions are asked in
        mine = [k for k in keys_in_block if k.startswith(p.name[:2] + ".")]
        assert mine == it.questions_of(p, dict.fromkeys(mine)), p.name


def test_one_notebook_is_regenerated_alone():
    """--only NN rewrites that notebook's section from the journal (a run of that notebook alone) and keeps every
    other section, heading paragraph included, as the block has it: their CPU figures came from another run."""
    old = it.BEGIN + generated() + it.END
    assert it.block({}, ROOT, set(), old) == old  # nothing asked for: nothing changes
    first = it.notebooks()[0]
    keys = it.questions_of(first)
    journal = {k: {"kind": "predict", "prompt": f"asked {k}", "actual": "seen"} for k in keys}
    new = it.block(journal, ROOT, {first.name[:2]}, old)
    changed = [ln for ln in new.splitlines() if ln not in old.splitlines()]
    assert changed == [f"| `{k}` (predict) | asked {k} | seen |" for k in keys]
    assert it.sections_of(new).keys() == it.sections_of(old).keys()
