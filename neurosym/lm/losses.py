"""Training losses of the semantic-fusion recipe. All return a scalar tensor.

Notation: logits (B, L, V), targets (B, L) long with ``pad_id`` at padding,
``p = softmax(logits)``, ``N`` = the set of non-pad positions.

* :func:`label_smoothed_ce`: ``mean_{t in N} [(1 - eps) * -log p_t(y_t) + eps * mean_v -log p_t(v)]``
  (the smoothing mass is spread uniformly over the full vocabulary; pad positions are
  left out of the sum and of the count).
* :func:`aux_bce`: ``weight * mean_{t in mask, f} -[y log q + (1 - y) log(1 - q)]``,
  soft targets y in [0, 1].
* :func:`class_uniformizer`: ``weight * mean_{t: y_t in C} KL(p_t|C || U_C)`` where
  ``p_t|C`` is the softmax restricted to (renormalised over) the class C and U_C the
  uniform distribution on C; ``KL(p || U) = sum_c p_c log(p_c |C|) = log|C| - H(p)``.
  It pulls the model towards not preferring one adjective of a class over another
  (so held-out adjectives are not starved), without changing P(C) itself.

Every loss is 0 (and still differentiable, with zero gradient) when no position counts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def _up(x: Tensor) -> Tensor:
    """At least float32 (half-precision logits are upcast; float64 stays)."""
    return x if x.dtype == torch.float64 else x.float()


def _zero(like: Tensor) -> Tensor:
    """A differentiable 0 connected to ``like``'s graph."""
    return like.sum() * 0.0


def label_smoothed_ce(logits: Tensor, targets: Tensor, epsilon: float = 0.02, pad_id: int = 0) -> Tensor:
    """Label-smoothed cross-entropy, mean over non-pad targets.

    logits (B, L, V), targets (B, L) -> scalar
    ``(1 - epsilon) * NLL(y) + epsilon * mean_v(-log p(v))`` averaged over positions with
    ``targets != pad_id``. ``epsilon = 0`` is the plain cross-entropy.
    """
    logp = F.log_softmax(_up(logits), dim=-1)  # (B, L, V)
    keep = targets != pad_id  # (B, L)
    if not bool(keep.any()):
        return _zero(logits)
    nll = -logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, L)
    smooth = -logp.mean(dim=-1)  # (B, L)
    per_token = (1.0 - epsilon) * nll + epsilon * smooth
    return per_token[keep].mean()


def aux_bce(pred: Tensor, target: Tensor, mask: Tensor, weight: float = 0.5) -> Tensor:
    """Soft-target binary cross-entropy of predicted memberships, averaged over the masked
    positions and all F features, times ``weight``.

    pred (B, L, F) in (0, 1) (an :class:`~neurosym.lm.fusion.AuxHead`'s output), target
    (B, L, F) in [0, 1], mask (B, L) bool (e.g. ``targets != pad_id``) -> scalar.
    ``log`` is clamped at -100 (``F.binary_cross_entropy``), so saturated predictions stay finite.
    """
    mask = mask.bool()
    if not bool(mask.any()):
        return _zero(pred)
    pred = _up(pred)
    bce = F.binary_cross_entropy(pred, target.to(pred.dtype).clamp(0.0, 1.0), reduction="none")  # (B, L, F)
    return weight * bce[mask].mean()


def class_uniformizer(logits: Tensor, targets: Tensor, class_ids: Tensor, weight: float = 0.01) -> Tensor:
    """``weight * mean KL(p_class || uniform)`` at the positions whose target is in the class.

    logits (B, L, V), targets (B, L), class_ids (C,) long (e.g. the adjective token ids)
    -> scalar. ``p_class = softmax(logits[..., class_ids])``; per position the KL is
    ``log C - H(p_class)`` (0 exactly when the model is indifferent among the class).
    0 when no target is in the class.
    """
    class_ids = torch.as_tensor(class_ids, dtype=torch.long, device=logits.device)
    at = torch.isin(targets, class_ids)  # (B, L)
    if not bool(at.any()) or class_ids.numel() == 0:
        return _zero(logits)
    logq = F.log_softmax(_up(logits[at][:, class_ids]), dim=-1)  # (N, C)
    kl = (logq.exp() * logq).sum(-1) + math.log(class_ids.numel())  # log C - H
    return weight * kl.mean()


__all__ = ["class_uniformizer", "aux_bce", "label_smoothed_ce"]
