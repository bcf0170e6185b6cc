"""Point the notebooks' Colab badges and first cells at where the series is published.

    python tools/set_repository.py https://github.com/OWNER/REPO

Rewrites ``helpers/lesson/colab.py``'s REPOSITORY, then the badge (first line of
each notebook's first cell) and the Colab cell (first code cell) of every
notebook. Outputs are left as they are.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].startswith("https://github.com/"):
        print(__doc__)
        return 2
    repo = argv[0].rstrip("/")
    colab_py = ROOT / "helpers" / "lesson" / "colab.py"
    colab_py.write_text(re.sub(r'REPOSITORY = "[^"]*"', f'REPOSITORY = "{repo}"', colab_py.read_text()))
    from helpers.lesson import colab

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        first_md = next(c for c in nb.cells if c.cell_type == "markdown")
        lines = first_md.source.split("\n")
        if lines and lines[0].startswith("[![Open In Colab]"):
            lines = lines[1:]
        first_md.source = "\n".join([colab.badge(path.name, repo)] + lines)
        first_code = next(c for c in nb.cells if c.cell_type == "code")
        if first_code.source.startswith(colab.MARK):
            first_code.source = colab.bootstrap_source(repo)
        nbformat.write(nb, path)
        print(f"{path.name}: badge and Colab cell point at {repo}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
