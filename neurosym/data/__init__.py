"""Data: shipped example files, the shared third-party data sets, FSG corpora and real text."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from neurosym.errors import NeurosymError

# A source checkout keeps the shared data sets beside the repository (../shared/data).
CHECKOUT_SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SHIPPED = {"grammars": "neurosym.grammars", "lexicons": "neurosym.lexicons"}


def shipped_file(relative: str | Path) -> Path:
    """A file shipped with the package, named as in the repository (``grammars/clause.fsg``,
    ``lexicons/sentiment.lex``), read through :mod:`importlib.resources` so that a
    regular (non-editable) install finds it too."""
    parts = Path(relative).parts
    if len(parts) < 2 or parts[0] not in SHIPPED:
        raise NeurosymError(f"{relative}: not a shipped file; expected grammars/<file> or lexicons/<file>")
    path = resources.files(SHIPPED[parts[0]]).joinpath(*parts[1:])
    if not path.is_file():
        raise NeurosymError(f"{relative}: no such shipped file")
    return Path(str(path))  # installed as plain files (the package is not zip-safe)


def resolve_data_path(path: str | Path) -> Path:
    """A data path of a config: absolute, or relative to the working folder when it exists
    there, else a shipped file (``grammars/...``, ``lexicons/...``)."""
    path = Path(path)
    if path.is_absolute() or path.exists() or not path.parts or path.parts[0] not in SHIPPED:
        return path
    return shipped_file(path)


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
