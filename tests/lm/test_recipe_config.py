"""The built-in lm task's keys behind the semantic-fusion recipe (the sentences layout,
held-out words, the word-class lexicon, control, lexical output, label smoothing, the
uniformizer): every bad value is a ConfigError at its key's line in the TOML file, found
before any training (issues 14.3 and 28)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurosym.errors import ConfigError
from neurosym.lm.config import load_config
from neurosym.lm.task import LMTask

GOOD = {
    "run": '[run]\nname = "r"\ntask = "lm"',
    "model": "[model]\nd_model = 16\nn_layers = 1\nn_heads = 2\nd_ff = 32\nmax_len = 32",
    "data": '[data]\ngrammar = "grammars/clause.fsg"\nlayout = "sentences"\nlexicon = "lexicons/sentiment.lex"\n'
            "train_sentences = 16\nvalid_sentences = 8\ntest_sentences = 8\nwindow = 27\n"
            'holdout = { classes = ["ADJ_POS", "ADJ_NEG"], words = 1 }',
    "objective": "[objective]\nlabel_smoothing = 0.02\nuniformizer = { weight = 0.01 }",
}


def config_text(table: str, line: str) -> str:
    """The good config with ``line`` in ``table``, in place of the line setting the same key (else added after the header)."""
    key = line.split(" = ")[0]
    parts = dict(GOOD)
    rows = [x for x in parts[table].split("\n") if not x.startswith(f"{key} = ")]
    parts[table] = "\n".join([rows[0], line, *rows[1:]])
    return "\n".join(parts[k] for k in ("run", "model", "data", "objective")) + "\n"


def error_at(tmp_path: Path, table: str, line: str, blamed: str | None = None) -> str:
    """The ConfigError of the good config with ``line`` in ``table``, positioned at that
    line (or at the line starting with ``blamed``); the message after the position."""
    text = config_text(table, line)
    path = tmp_path / "recipe.toml"
    path.write_text(text, encoding="utf-8")
    lineno = next(i for i, x in enumerate(text.splitlines(), 1) if x.startswith(blamed or line))
    with pytest.raises(ConfigError) as info:
        LMTask(load_config(path))
    prefix = f"{path}:{lineno}:1: "
    assert str(info.value).startswith(prefix), str(info.value)
    return str(info.value)[len(prefix):]


def test_the_good_config_builds(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text("\n".join(GOOD.values()) + "\n")
    task = LMTask(load_config(path))
    assert task.holdout is not None and len(task.sentences("train")) == 16 and task.uniformizer_groups


@pytest.mark.parametrize(
    "line, expected",
    [
        ('layout = "rows"', "data.layout: expected one of"),
        ("seed = -1", "data.seed: expected an integer in [0, 2**32), got -1"),
        ('grammar = "grammars/none.fsg"', "data.grammar: grammars/none.fsg: no such shipped file"),
        ('lexicon = "grammars/clause.fsg"', 'data.lexicon: expected a .lex lexicon, got "grammars/clause.fsg"'),
        ("holdout = { classes = [] }", "data.holdout.classes: expected distinct word classes of the lexicon, at least one, got []"),
        ('holdout = { classes = ["ADJ_POS"], words = -1 }', "data.holdout.words: expected a number of words >= 0, got -1"),
        ('holdout = { classes = ["ADJ_POS"], words = 50 }', "data.holdout: cannot hold out 50 words of each class: ADJ_POS has 5"),
        ('holdout = { classes = ["ADJ_POS", "NOPE"] }', "data.holdout: the lexicon has no class 'NOPE'; its classes are "),
        ('holdout = { classes = ["ADJ_POS"], blank_dropout = 1.0 }', "data.holdout.blank_dropout: expected a number in [0, 1)"),
        ("window = 1", "data.window: expected at least 2 with the sentences layout (<bos> and a word), got 1"),
        ("train_sentences = 0", "data.train_sentences: expected an integer >= 1, got 0"),
    ],
)
def test_bad_data_values(tmp_path, line, expected):
    assert error_at(tmp_path, "data", line).startswith(expected)


def test_a_window_longer_than_the_model_blames_the_models_context(tmp_path):
    message = error_at(tmp_path, "data", "window = 40", blamed="max_len = 32")
    assert message == "model.max_len: expected at least data.window = 40 (the longest input), got 32"


def test_blank_inputs_are_the_held_out_words_and_blank_dropout_the_classes_seen_words(tmp_path):
    path = tmp_path / "blank.toml"
    path.write_text(config_text("data", 'holdout = { classes = ["ADJ_POS", "ADJ_NEG"], words = 1, blank_input = true, blank_dropout = 0.2 }'))
    task = LMTask(load_config(path))
    model = task.build_model(None)
    vocab = task.auto.vocab
    held = {vocab.id(w) for ws in task.holdout.values() for w in ws}
    lex = task.bank.lexicon
    seen_adjectives = {vocab.id(w) for c in ("ADJ_POS", "ADJ_NEG") for w in lex.class_words(c)} - held
    assert len(held) == 2 and len(seen_adjectives) == 8
    assert set(model.blank.nonzero().flatten().tolist()) == held
    assert set(model.blank_drop.nonzero().flatten().tolist()) == seen_adjectives and model.blank_dropout == 0.2


def test_without_blank_keys_the_model_has_no_blank_inputs(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text("\n".join(GOOD.values()) + "\n")
    assert LMTask(load_config(path)).build_model(None).blank is None


def test_a_holdout_needs_the_sentences_layout(tmp_path):
    path = tmp_path / "w.toml"
    data = GOOD["data"].replace('layout = "sentences"\n', "").replace("window = 27\n", "window = 8\n")
    path.write_text("\n".join([GOOD["run"], GOOD["model"], data]) + "\n")
    with pytest.raises(ConfigError, match=r'data.holdout: held-out words need data.layout = "sentences"'):
        LMTask(load_config(path))


@pytest.mark.parametrize(
    "line, expected",
    [
        ("label_smoothing = 1.0", "objective.label_smoothing: expected a number in [0, 1), got 1.0"),
        ("aux = { weight = -1 }", "objective.aux.weight: expected a finite number >= 0, got -1"),
        ("aux = { hidden = 0 }", "objective.aux.hidden: expected an integer >= 1, got 0"),
        ('uniformizer = { weight = 0.1, classes = ["NOPE"] }', "objective.uniformizer: the lexicon has no class 'NOPE'"),
        ("uniformizer = { weight = inf }", "objective.uniformizer.weight: expected a finite number >= 0, got inf"),
    ],
)
def test_bad_objective_values(tmp_path, line, expected):
    assert error_at(tmp_path, "objective", line).startswith(expected)


def test_label_smoothing_with_semantic_kl_is_refused(tmp_path):
    message = error_at(tmp_path, "objective", "semantic_kl = { lambda = 0.5 }", blamed="label_smoothing = 0.02")
    assert message.startswith("objective.label_smoothing: smooths the plain cross-entropy only")


def test_control_and_lexical_output_need_the_sentences_layout(tmp_path):
    text = (f'{GOOD["run"]}\n{GOOD["model"]}\nfusion = {{ lexicon = "lexicons/sentiment.lex", lexical_output = true }}\n'
            '[data]\ngrammar = "grammars/clause.fsg"\nwindow = 8\n')
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r'model.fusion.lexical_output: needs data.layout = "sentences"'):
        LMTask(load_config(path))


def test_a_control_dropout_out_of_range_is_named(tmp_path):
    line = 'fusion = { lexicon = "lexicons/sentiment.lex", control = { max_prefixes = ["pos_"], final = ["is_eos"], dropout = 1.5 } }'
    assert error_at(tmp_path, "model", line).startswith("model.fusion.control.dropout: expected a number in [0, 1)")


def test_two_different_lexicons_are_refused(tmp_path):
    message = error_at(tmp_path, "model", 'fusion = { lexicon = "lexicons/other.lex" }', blamed='lexicon = "lexicons/sentiment.lex"')
    assert message.startswith("data.lexicon: the task reads one lexicon")
