"""Print or edit a notebook's cells by index (a maintainer's tool: keeps the notebook's JSON layout).

    python tools/nbcells.py show notebooks/00_before_we_start.ipynb [INDEX ...]
    python tools/nbcells.py set notebooks/00_before_we_start.ipynb INDEX < new_source.txt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(path: str) -> dict:
    return json.loads(Path(path).read_text())


def save(path: str, nb: dict) -> None:
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def set_source(nb: dict, index: int, source: str) -> None:
    lines = source.splitlines(keepends=True)
    if lines and lines[-1].endswith("\n"):
        lines[-1] = lines[-1][:-1]
    nb["cells"][index]["source"] = lines


def main(argv: list[str]) -> int:
    verb, path, *rest = argv
    nb = load(path)
    if verb == "show":
        wanted = {int(x) for x in rest} or set(range(len(nb["cells"])))
        for i, c in enumerate(nb["cells"]):
            if i in wanted:
                print(f"--- [{i}] {c['cell_type']} {c.get('metadata', {}).get('tags', '')}")
                print("".join(c["source"]))
        return 0
    if verb == "set":
        set_source(nb, int(rest[0]), sys.stdin.read())
        save(path, nb)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
