"""Data: shipped example files, the shared third-party data sets, FSG corpora and real text."""

from __future__ import annotations

import os
from pathlib import Path

from neurosym.errors import NeurosymError
from neurosym.files import SHIPPED, resolve_data_path, shipped_file  # where shipped files are: one place, below the compiler

# A source checkout keeps the shared data sets beside the repository (../shared/data).
CHECKOUT_SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
def shared_data_dir() -> Path | None:
    """The shared data folder: ``$NEUROSYM_SHARED_DATA``, else ``../shared/data`` beside the
    source checkout; ``None`` when neither exists (e.g. in a user's install)."""
    env = os.environ.get("NEUROSYM_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(CHECKOUT_SHARED_DATA)
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
