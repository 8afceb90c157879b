"""The smallest semantic-fusion training config, shared by the tests that need a trained
run folder (generate, eval, the bad-input and fuzz passes, the toy processor): one place
to change when the recipe's config keys change."""

from __future__ import annotations

from pathlib import Path


def tiny_fusion_config(out: str | Path, kind: str = "fusion", holdout: int = 1, run: str = "", model: str = "") -> str:
    """A TOML config training a 1-layer, 16-wide ``kind`` model of the semantic-fusion
    recipe on 64 sampled sentences for one epoch into ``out/tiny``; ``run`` and ``model``
    are extra lines for those tables."""
    return f"""
[run]
name = "tiny"
out_dir = "{Path(out).as_posix()}"
task = "neurosym.experiments.semantic_fusion:task"
{run}
[model]
kind = "{kind}"
{model}
d_model = 16
n_layers = 1
n_heads = 2
d_ff = 32
aux_hidden = 16

[data]
train = 64
valid = 16
holdout = {holdout}

[optim]
batch_size = 32
epochs = 1
"""
