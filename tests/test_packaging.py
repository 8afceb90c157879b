"""The package list in pyproject.toml and the shipped files an install needs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from neurosym.data import resolve_data_path, shipped_file
from neurosym.errors import NeurosymError

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_package_of_the_tree():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = cfg["package-dir"]
    listed = set(cfg["packages"])
    found = set()
    for name, folder in dirs.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join([name, *rel]))
    # a sub-package mapped to its own folder is found under that mapping, not twice
    assert listed == found, f"missing from pyproject: {sorted(found - listed)}; listed but absent: {sorted(listed - found)}"


def test_shipped_files_resolve_through_the_package():
    fsg = shipped_file("grammars/clause.fsg")
    assert fsg.is_file() and fsg.name == "clause.fsg"
    lex = shipped_file(Path("lexicons") / "sentiment.lex")
    assert lex.is_file()
    # clause.fsg imports ../lexicons/sentiment.lex: the two packages sit side by side
    assert (fsg.parent.parent / "lexicons" / "sentiment.lex").resolve() == lex.resolve()


def test_resolve_prefers_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_data_path("grammars/clause.fsg") == shipped_file("grammars/clause.fsg")
    (tmp_path / "grammars").mkdir()
    (tmp_path / "grammars" / "clause.fsg").write_text("S 1.0\n")
    assert resolve_data_path("grammars/clause.fsg") == Path("grammars/clause.fsg")
    assert resolve_data_path("mine.fsg") == Path("mine.fsg")


def test_unknown_shipped_files_are_clear_errors():
    with pytest.raises(NeurosymError, match="no such shipped file"):
        shipped_file("grammars/nope.fsg")
    with pytest.raises(NeurosymError, match="not a shipped file"):
        shipped_file("docs/x.md")


def test_shipped_configs_load_from_any_folder(tmp_path, monkeypatch):
    """configs/ ships as package data (issue 32): `neurosym train configs/semantic_fusion.toml`
    reads the shipped copy where the working folder has none."""
    from neurosym.files import shipped_file
    from neurosym.lm.config import load_config

    monkeypatch.chdir(tmp_path)
    shipped = shipped_file("configs/semantic_fusion.toml")
    assert shipped.is_file()
    config = load_config("configs/semantic_fusion.toml")
    assert config.run.name == "semantic-fusion"
