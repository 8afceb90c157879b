"""LMSection: the [model] architecture keys every recipe reuses from LMConfig."""

from __future__ import annotations

import dataclasses

import pytest

from neurosym.errors import ConfigError
from neurosym.experiments import idea_gating, semantic_fusion, semantic_kl
from neurosym.lm import task as lm_task
from neurosym.lm.config import Config
from neurosym.lm.model import ARCHITECTURE_KEYS, LMConfig, LMSection


def test_the_section_is_lmconfig_less_what_the_data_fix():
    config = {f.name: f for f in dataclasses.fields(LMConfig)}
    section = {f.name: f for f in dataclasses.fields(LMSection)}
    assert set(section) == set(config) - {"vocab_size", "pad_id"} == set(ARCHITECTURE_KEYS)
    assert all(section[k].default == config[k].default for k in section)
    assert LMSection().lm_config(10, 0) == LMConfig(vocab_size=10, pad_id=0)
    assert LMSection(d_model=64, positions="rotary").lm_config(7, 2, max_len=9) == LMConfig(
        vocab_size=7, d_model=64, positions="rotary", max_len=9, pad_id=2)


@pytest.mark.parametrize("recipe", [lm_task])  # the recipes are configs of the built-in lm task
def test_every_recipe_section_is_an_lmsection_with_its_own_defaults(recipe):
    assert issubclass(recipe.ModelSection, LMSection)
    names = [f.name for f in dataclasses.fields(recipe.ModelSection)]
    assert names[: len(ARCHITECTURE_KEYS)] == list(ARCHITECTURE_KEYS)  # declared once, in LMConfig's order


def test_recipe_defaults_and_checks_are_kept():
    assert semantic_fusion.ARCHITECTURE["max_len"] == 32 and semantic_fusion.ARCHITECTURE["n_layers"] == 4
    assert semantic_kl.RECIPE_MODEL["n_layers"] == 2 and lm_task.ModelSection().max_len is None
    assert idea_gating.RECIPE["drift"]["model"]["max_len"] == 64
    config = Config.from_dict({"run": {"name": "x"}, "model": {"n_heads": 3, "d_model": 128}})
    with pytest.raises(ConfigError, match=r"model.n_heads: expected a divisor of model.d_model \(128\), got 3"):
        config.section("model", lm_task.ModelSection)
    config = Config.from_dict({"run": {"name": "x"}, "model": {"dropout": 1.0}})
    with pytest.raises(ConfigError, match=r"model.dropout: expected a number in \[0, 1\), got 1.0"):
        config.section("model", lm_task.ModelSection)
    config = Config.from_dict({"run": {"name": "x"}, "model": {"positions": "learned"}})
    with pytest.raises(ConfigError, match="model.positions: expected one of"):
        config.section("model", lm_task.ModelSection)


def test_semantic_kl_context_follows_the_window_unless_set(tmp_path):
    config = semantic_kl.recipe_config("baseline", "ud-english-ewt", 0, tmp_path, model={"max_len": 16}, data={"max_train_windows": 4})
    with pytest.raises(ConfigError, match="model.max_len: expected at least data.window = 64"):
        semantic_kl.task(config)
