from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "traces" / "reference" / "nvidia-h200"
EXTERNAL = ROOT.parent / "shared" / "external-traces"


@pytest.fixture(scope="session")
def h200() -> Path:
    if not (H200 / "manifest.json").is_file():
        pytest.fail(f"the H200 reference set is missing from {H200}: it is part of the repository")
    return H200


@pytest.fixture(scope="session")
def external() -> Path:
    if not EXTERNAL.is_dir():
        pytest.skip(f"{EXTERNAL} is absent: the external traces live beside the clone in CI, not in a user's clone")
    return EXTERNAL


def raw_events(path: Path) -> list[dict]:
    """The trace's events as the json module reads them: the tests' independent view."""
    import gzip

    data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(data)
    return doc["traceEvents"] if isinstance(doc, dict) else doc
