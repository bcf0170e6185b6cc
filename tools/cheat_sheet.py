"""Write docs/cheat-sheet.md's table from helpers/advice/rulebook.py, the one table diagnose and the notebooks read.

    python tools/cheat_sheet.py          # rewrite the table in place
    python tools/cheat_sheet.py --check  # exit 1 if the sheet's table differs from the rulebook's
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHEET = ROOT / "docs" / "cheat-sheet.md"


def rewritten(text: str) -> str:
    """The sheet with its table (the block of lines starting with '|') replaced by the rulebook's."""
    from helpers.advice.rulebook import markdown_table

    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    last = max(i for i, ln in enumerate(lines) if ln.startswith("|"))
    return "\n".join(lines[:first] + markdown_table().splitlines() + lines[last + 1:]) + "\n"


def main(argv: list[str]) -> int:
    text = SHEET.read_text()
    new = rewritten(text)
    if "--check" in argv:
        if new != text:
            print(f"{SHEET} differs from helpers/advice/rulebook.py: run python tools/cheat_sheet.py")
            return 1
        return 0
    SHEET.write_text(new)
    print(f"wrote the table of {SHEET.relative_to(ROOT)} from helpers/advice/rulebook.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
