"""Language models and their training, shared by every recipe.

The model: a small causal Transformer with a KV cache and plug-in adapter, output and
heads (:mod:`neurosym.lm.model`); the gated feature-fusion adapter, lexical output and
auxiliary head (:mod:`neurosym.lm.fusion`); the idea head and gate
(:mod:`neurosym.lm.idea`). Objectives and measures: losses (:mod:`neurosym.lm.losses`),
the semantic-KL loss and its schedules (:mod:`neurosym.lm.semantic_kl`), metrics
(:mod:`neurosym.lm.metrics`). Training: configs (:mod:`neurosym.lm.config`), the
trainer (:mod:`neurosym.lm.train`), DDP plumbing (:mod:`neurosym.lm.distributed`), run
folders (:mod:`neurosym.lm.rundir`), checkpoints (:mod:`neurosym.lm.checkpoint`) and
plots (:mod:`neurosym.lm.plot`). The recipes that use them live in
:mod:`neurosym.experiments`. See docs/lm.md.
"""

from __future__ import annotations

from neurosym.lm.fusion import AuxHead, ControlColumns, GatedFusion, build_fusion_lm, control_from_features, control_names, make_batch
from neurosym.lm.losses import class_uniformizer, aux_bce, label_smoothed_ce
from neurosym.lm.metrics import (
    evaluate,
    floor_ppl,
    focus_token_ce,
    oracle_logits,
    perplexity,
    ppl_from_nll,
    semantic_mse,
    seen_only_ppl,
    token_nll,
)
from neurosym.lm.model import CausalLM, LMConfig, LMOutput

__all__ = [
    "AuxHead",
    "ControlColumns",
    "CausalLM",
    "GatedFusion",
    "LMConfig",
    "LMOutput",
    "class_uniformizer",
    "aux_bce",
    "build_fusion_lm",
    "control_from_features",
    "control_names",
    "evaluate",
    "floor_ppl",
    "focus_token_ce",
    "label_smoothed_ce",
    "make_batch",
    "oracle_logits",
    "perplexity",
    "ppl_from_nll",
    "semantic_mse",
    "seen_only_ppl",
    "token_nll",
]
