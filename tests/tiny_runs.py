"""The smallest semantic-fusion training config, shared by the tests that need a trained
run folder (generate, eval, the bad-input and fuzz passes, the toy processor): one place
to change when the recipe's config keys change. It is a config of the built-in ``lm``
task laid out as the recipe's (configs/semantic_fusion.toml)."""

from __future__ import annotations

from pathlib import Path


def tiny_fusion_config(out: str | Path, kind: str = "fusion", holdout: int = 1, run: str = "", model: str = "") -> str:
    """A TOML config training a 1-layer, 16-wide ``kind`` model ("fusion" or "baseline")
    of the semantic-fusion recipe on 64 sampled sentences for one epoch into ``out/tiny``;
    ``run`` and ``model`` are extra lines for those tables (``model`` lines go into
    ``[model.fusion]`` for the fusion model, e.g. ``control = { ... }``)."""
    fusion = f'\n[model.fusion]\nlexicon = "lexicons/sentiment.lex"\naux_hidden = 16\n{model}\n' if kind == "fusion" else ""
    aux = "aux = { weight = 0.5 }" if kind == "fusion" else ""
    return f"""
[run]
name = "tiny"
out_dir = "{Path(out).as_posix()}"
task = "lm"
{run}
[model]
d_model = 16
n_layers = 1
n_heads = 2
d_ff = 32
max_len = 32
{fusion}
[data]
grammar = "grammars/clause.fsg"
layout = "sentences"
lexicon = "lexicons/sentiment.lex"
train_sentences = 64
valid_sentences = 16
test_sentences = 16
window = 27
holdout = {{ classes = ["ADJ_POS", "ADJ_NEG"], words = {holdout} }}

[objective]
label_smoothing = 0.02
uniformizer = {{ weight = 0.01 }}
{aux}

[optim]
batch_size = 32
epochs = 1
"""


CONTROL_LINES = 'control = { max_prefixes = ["pos_", "neg_", "str_"], final = ["is_eos", "is_question", "is_exclaim"] }'
