"""Data: where the shared third-party data sets live, corpora and tasks."""

from __future__ import annotations

import os
from pathlib import Path

from neurosym.errors import NeurosymError

_REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path | None:
    """The shared data folder: ``$NEUROSYM_SHARED_DATA``, else ``../shared/data`` beside the
    repository; ``None`` when neither exists (e.g. in a user's clone)."""
    env = os.environ.get("NEUROSYM_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(_REPO_ROOT.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def shared_data(*parts: str) -> Path:
    """A path inside the shared data folder; a clear error if it is not there."""
    root = shared_data_dir()
    if root is None:
        raise NeurosymError("the shared data folder (../shared/data or $NEUROSYM_SHARED_DATA) is not available")
    path = root.joinpath(*parts)
    if not path.exists():
        raise NeurosymError(f"{path}: not found in the shared data folder")
    return path
