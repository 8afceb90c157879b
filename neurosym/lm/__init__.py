"""Language models for the semantic-fusion recipe: a small causal Transformer
(:mod:`neurosym.lm.model`), the gated feature-fusion adapter and auxiliary head
(:mod:`neurosym.lm.fusion`), training losses (:mod:`neurosym.lm.losses`) and
evaluation metrics (:mod:`neurosym.lm.metrics`). See docs/lm.md.
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
