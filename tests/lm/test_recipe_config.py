"""The semantic-fusion recipe's [model] and [data] tables: every bad value is a ConfigError
at its key's line in the TOML file, found before any training (issue 14.3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurosym.errors import ConfigError
from neurosym.experiments.semantic_fusion import task
from neurosym.lm.config import load_config

HEAD = '[run]\nname = "r"\ntask = "neurosym.experiments.semantic_fusion:task"\n'


def error_at(tmp_path: Path, table: str, line: str) -> str:
    path = tmp_path / "recipe.toml"
    path.write_text(f"{HEAD}[{table}]\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        task(load_config(path))
    prefix = f"{path}:5:1: "
    assert str(info.value).startswith(prefix), str(info.value)
    return str(info.value)[len(prefix):]


@pytest.mark.parametrize(
    "line, expected",
    [
        ('grammar = "grammars/arith.pcfg"', 'data.grammar: expected an .fsg grammar (the corpus is sampled from it), got "grammars/arith.pcfg"'),
        ('grammar = "lexicons/sentiment.lex"', 'data.grammar: expected an .fsg grammar (the corpus is sampled from it), got "lexicons/sentiment.lex"'),
        ('lexicon = "grammars/clause.fsg"', 'data.lexicon: expected a .lex lexicon (the features come from it), got "grammars/clause.fsg"'),
        ('grammar = "grammars/none.fsg"', "data.grammar: grammars/none.fsg: no such shipped file"),
        ("train = -5", "data.train: expected 0 to 1,000,000 sentences (held in memory), got -5"),
        ("train = 1000000000000", "data.train: expected 0 to 1,000,000 sentences (held in memory), got 1000000000000"),
        ("valid = 0", "data.valid: expected 1 to 1,000,000 sentences (held in memory), got 0"),
        ("max_len = 2", "data.max_len: expected at least 3 (<bos>, a word, <eos>), got 2"),
        ("max_len = 40", "data.max_len: expected at most model.max_len + 1 = 33 (the model's context), got 40"),
        ("holdout = -1", "data.holdout: expected a number of words >= 0, got -1"),
        ("holdout = 50", "data.holdout: cannot hold out 50 words of each class: ADJ_POS has 5, ADJ_NEG has 5"),
        ("holdout_classes = []", "data.holdout_classes: expected distinct word classes of the lexicon, at least one (the focus words), got []"),
        ('holdout_classes = ["ADJ_POS", "NOPE"]', "data.holdout_classes: lexicons/sentiment.lex has no class 'NOPE'; its classes are "),
        ("seed = -1", "data.seed: expected an integer in [0, 2**32), got -1"),
    ],
)
def test_bad_data_values(tmp_path, line, expected):
    assert error_at(tmp_path, "data", line).startswith(expected)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("d_model = 0", "model.d_model: expected an integer >= 1, got 0"),
        ("n_layers = 0", "model.n_layers: expected an integer >= 1, got 0"),
        ("n_heads = 5", "model.n_heads: expected a divisor of model.d_model (128), got 5"),
        ("d_ff = 0", "model.d_ff: expected an integer >= 1, got 0"),
        ("aux_hidden = 0", "model.aux_hidden: expected an integer >= 1, got 0"),
        ("dropout = 1.5", "model.dropout: expected a number in [0, 1), got 1.5"),
        ("label_smoothing = nan", "model.label_smoothing: expected a number in [0, 1), got nan"),
        ("aux_weight = -1", "model.aux_weight: expected a finite number >= 0 (0 turns it off), got -1.0"),
        ("uniformizer_weight = inf", "model.uniformizer_weight: expected a finite number >= 0 (0 turns it off), got inf"),
        ("max_len = 8", "model.max_len: expected at least data.max_len - 1 = 27 (the longest input), got 8"),
        ('kind = "fusoin"', 'model.kind: expected one of "baseline", "fusion", got "fusoin" (did you mean "fusion"?)'),
        ("d_ff = 1000000000", "model.d_ff: expected a model of at most 1e+09 weights, but d_model 128, n_layers 4, d_ff 1000000000, "
                              "max_len 32 and aux_hidden 128 give about 1e+12, got 1000000000"),
    ],
)
def test_bad_model_values(tmp_path, line, expected):
    assert error_at(tmp_path, "model", line) == expected


def test_a_model_too_big_to_allocate_blames_the_key_that_grew(tmp_path):
    for line, key in [("d_model = 65536", "d_model"), ("n_layers = 100000", "n_layers"), ("max_len = 1000000000", "max_len")]:
        assert error_at(tmp_path, "model", line).startswith(f"model.{key}: expected a model of at most 1e+09 weights")


def test_data_files_missing_or_folders(tmp_path):
    (tmp_path / "g.fsg").mkdir()
    assert error_at(tmp_path, "data", f'grammar = "{tmp_path / "g.fsg"}"') == f"data.grammar: {tmp_path / 'g.fsg'} is a folder, not a file"
    assert error_at(tmp_path, "data", f'lexicon = "{tmp_path / "no.lex"}"').startswith(f"data.lexicon: no such file {tmp_path / 'no.lex'}")
