"""The reference sets: traces recorded earlier on real GPUs, which recorded mode reads.

Each set is a folder ``traces/reference/<gpu>/`` written by ``python -m
helpers.runs.record``: a ``<tag>.json`` trace and ``<tag>.txt`` table per
scenario, and a ``manifest.json`` naming the GPU, the versions, and every
scenario's files under its key (the tag with ``*`` for the dtype, so that any
GPU's set answers the same question).
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from .. import ROOT
from .tags import slug
from .workload import BackendUnavailable

REFERENCE = ROOT / "traces" / "reference"
REFERENCE_VAR = "PROFILING_REFERENCE"  # which reference set, e.g. "nvidia-h200"


class NotRecorded(LookupError):
    """Recorded mode cannot answer: no reference set here, or no recording of the scenario."""


@dataclass(frozen=True)
class ReferenceSet:
    """Traces recorded on one GPU by ``python -m helpers.runs.record``."""

    path: Path
    manifest: dict

    @property
    def gpu(self) -> str:
        return self.manifest.get("gpu", {}).get("name", self.path.name)

    @property
    def date(self) -> str:
        return str(self.manifest.get("date", "unknown date"))[:10]

    @property
    def scenarios(self) -> dict[str, dict]:
        """The manifest's entries, by scenario key (``4096_*_warm_eager``)."""
        return self.manifest.get("scenarios", {})

    def short(self) -> str:
        """'NVIDIA H200, the reference set': what a reveal names; the recording's date, torch, CUDA and driver are
        said once, in the banner (:meth:`describe`)."""
        return f"{self.gpu}, the reference set"

    def describe(self) -> str:
        m = self.manifest
        return (f"{self.gpu}, recorded {self.date} with torch {m.get('torch', '?')}, "
                f"CUDA {m.get('cuda', '?')}, driver {m.get('driver', '?')}")

    def recording(self, key: str) -> dict:
        """The manifest's entry for a scenario that was recorded here.

        A scenario the set lacks raises :class:`NotRecorded`; one the GPU
        could not run (an SDPA backend it lacks) raises :class:`BackendUnavailable`.
        """
        entry = self.scenarios.get(key)
        if entry is None:
            raise NotRecorded(f"The reference set {self.path.name} has no recording of {key}. Record it on a GPU "
                              f"with `python -m helpers.runs.record` (recorded: {', '.join(sorted(self.scenarios))}).")
        if entry.get("status") != "ok":
            raise BackendUnavailable(f"{entry.get('reason', 'not recorded')} (on {self.gpu}, where the set was "
                                     "recorded)")
        return entry


class BrokenManifest(ValueError):
    """A manifest.json that cannot be read, is not JSON, or is not a manifest."""


def read_manifest(path: Path) -> dict:
    """A reference set's manifest; :class:`BrokenManifest`, naming the file and the problem, when it is not one."""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BrokenManifest(f"{path} cannot be read as JSON ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("scenarios", {}), dict):
        raise BrokenManifest(f"{path} is JSON but not a manifest (no object of scenarios)")
    return manifest


def reference_sets() -> list[ReferenceSet]:
    """Every reference set under ``traces/reference/``, in name order; a broken one is skipped with a warning."""
    out = []
    for d in sorted(REFERENCE.iterdir()) if REFERENCE.is_dir() else []:
        if not (d / "manifest.json").is_file():
            continue
        try:
            out.append(ReferenceSet(d, read_manifest(d / "manifest.json")))
        except BrokenManifest as e:  # the other sets still serve
            warnings.warn(f"reference set {d.name} skipped: {e}. Restore it (git checkout -- {d}) or record "
                          "the set again.", stacklevel=2)
    return out


def reference_set() -> ReferenceSet:
    """The reference set recorded mode reads (``PROFILING_REFERENCE`` picks one)."""
    sets = reference_sets()
    if not sets:
        raise NotRecorded(f"No reference traces under {REFERENCE}. Record a set on a GPU machine with "
                          "`python -m helpers.runs.record`, or check out the repository's traces/ folder.")
    want = os.environ.get(REFERENCE_VAR)
    if want:
        for s in sets:
            if s.path.name == want or slug(s.gpu) == slug(want):
                return s
        raise NotRecorded(f"{REFERENCE_VAR}={want!r} names no reference set; there are: "
                          + ", ".join(s.path.name for s in sets))
    # The H200 set is the one the notebooks' checkpoints were written against.
    return next((s for s in sets if s.path.name == "nvidia-h200"), sets[0])
