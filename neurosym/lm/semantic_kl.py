"""The semantic-KL objective: cross-entropy against the model's own similarity kernel.

Notation: logits (B, L, V), targets (B, L) long (``pad_id`` positions left out), the
tied output embeddings W (V, D), ``N`` = the counted positions, ``y_n`` their targets.

* similarity ``S(y, v) = W[y] . W[v]`` (``"dot"``) or ``cos(W[y], W[v])`` (``"cosine"``);
* target ``q_y = softmax(S(y, .) / T)`` over the vocabulary, computed under
  ``torch.no_grad`` from a detached W: no gradient flows through the target;
* ``KL = mean_n KL(q_{y_n} || p_n) = mean_n sum_v q_{y_n}(v) (log q_{y_n}(v) - log p_n(v))``,
  ``p_n = softmax(logits_n)``;
* the loss mixes it with the true next token: ``lam * KL + (1 - lam) * CE``,
  ``CE = mean_n -log p_n(y_n)``.

Limits (tests/lm/test_semantic_kl.py checks both): as T -> 0 with ``"cosine"`` the target
is one-hot at y (``cos(W[y], W[y]) = 1`` is the row's maximum), so ``KL = CE``; with ``"dot"``
the maximum of ``W[y] . W[v]`` need not be at v = y (a longer row wins), so the target can
be one-hot at *another* word. As T -> infinity the target is uniform and
``KL = CE(uniform, p) - log V``.

The target is built once per **distinct** target of the batch: ``U = unique(y)`` gives one
``(U, D) @ (D, V)`` product and a (U, V) table; the per-position sums are regrouped by
target (``index_add`` of the (N, V) log-probabilities, the ones CE needs anyway, into
(U, V)), and the gradient is formed in one custom backward (``softmax - q[inv]`` and the
one-hot): the (N, V) target is materialised only there, once (the logits path, for any model).
Given the final hidden states h (N, D) of a tied model (``logits = h @ W.T``), even that
regrouping goes: ``sum_v q_y(v) log p_n(v) = h_n . (q_y @ W) - logsumexp(logits_n)``, so
the loss costs one ``logsumexp`` over (N, V), like CE, plus (U, V) work.

:class:`TemperatureSchedule` moves T over training: constant, linear or cosine, from
``start`` to ``end`` (either direction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from neurosym.errors import ConfigError

Similarity = Literal["dot", "cosine"]
ScheduleKind = Literal["constant", "linear", "cosine"]
SIMILARITIES = ("dot", "cosine")
SCHEDULES = ("constant", "linear", "cosine")


def _check_temperature(T: float) -> float:
    if isinstance(T, bool) or not isinstance(T, (int, float)) or not math.isfinite(T) or T <= 0:
        raise ConfigError(f"semantic KL temperature: expected a finite number > 0, got {T!r}")
    return float(T)


@torch.no_grad()
def similarity(W: Tensor, rows: Tensor, sim: Similarity = "dot") -> Tensor:
    """``S[u, v]`` = similarity of ``W[rows[u]]`` and ``W[v]``: W (V, D), rows (U,) -> (U, V),
    from a detached copy of W (float32 at least)."""
    if sim not in SIMILARITIES:
        raise ConfigError(f"semantic KL similarity: expected one of {', '.join(SIMILARITIES)}, got {sim!r}")
    W = W.detach()
    W = W if W.dtype == torch.float64 else W.float()
    if sim == "cosine":
        W = F.normalize(W, dim=-1)
    return W[rows] @ W.T


@torch.no_grad()
def semantic_target(W: Tensor, rows: Tensor, T: float, sim: Similarity = "dot") -> Tensor:
    """Log of the target distributions ``log softmax(S(rows, .) / T)``: (U,) -> (U, V), detached."""
    return F.log_softmax(similarity(W, rows, sim) / _check_temperature(T), dim=-1)


def semantic_kl_terms(
    logits: Tensor, targets: Tensor, W: Tensor, T: float, sim: Similarity = "dot", pad_id: int | None = None,
    hidden: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """``(KL, CE)``, each a scalar mean over the counted positions (see the module doc).

    logits (..., V), targets (...) long, W (V, D). Positions with ``targets == pad_id``
    are left out (none with ``pad_id=None``); both terms are a differentiable 0 when no
    position counts.

    With ``hidden`` (..., D), the final hidden states whose tied projection the logits are
    (``logits == hidden @ W.T``, as in :class:`~neurosym.lm.model.CausalLM`), the same
    values and gradients come from ``sum_v q(v) logits_n(v) = hidden_n . (q @ W)``: only
    ``logsumexp(logits)`` touches (N, V), as in plain CE (the fast path; see the module doc).
    """
    V = logits.shape[-1]
    if W.ndim != 2 or W.shape[0] != V:
        raise ConfigError(f"semantic KL: W must be (V={V}, D), got {tuple(W.shape)}")
    logits = logits.reshape(-1, V)
    y = targets.reshape(-1).long()
    if hidden is not None:
        if hidden.shape[-1] != W.shape[1] or hidden.shape[:-1] != targets.shape:
            raise ConfigError(f"semantic KL: hidden must be {tuple(targets.shape) + (W.shape[1],)}, got {tuple(hidden.shape)}")
        hidden = hidden.reshape(-1, W.shape[1])
    keep = None if pad_id is None else y != pad_id  # (N,) the counted positions
    kept = y if keep is None else y[keep]  # (n,) their targets
    n = kept.numel()
    if n == 0:
        zero = logits.sum() * 0.0
        return zero, zero
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    uniq, inv = torch.unique(kept, return_inverse=True)  # (U,), (n,)
    q, neg_entropy = _target_table(W, uniq, T, sim, dtype)
    if hidden is None:  # the logits path
        return _LogitsKL.apply(logits if keep is None else logits[keep], kept, inv, q, neg_entropy)
    # the fast path: log p_n(v) = logits_n(v) - lse_n and logits_n(y_n) = hidden_n . W[y_n], so
    # KL_n = sum_v q log q + CE_n + hidden_n . (W[y_n] - q_{y_n} @ W): torch's fused CE (padding ignored,
    # no (N, V) copy), a (U, V) @ (V, D) product and (n, D) dot products
    ce = F.cross_entropy(logits.to(dtype), y, ignore_index=-100 if pad_id is None else pad_id, reduction="sum") / n
    counts = torch.bincount(inv, minlength=uniq.numel()).to(dtype)
    Wd = W.to(dtype)
    shift = Wd[uniq] - q @ Wd  # (U, D): W[y] minus the target's mean output embedding (gradient reaches W, not q)
    h = hidden if keep is None else hidden[keep]
    kl = ce + ((counts * neg_entropy).sum() + (h.to(dtype) * shift[inv]).sum()) / n
    return kl, ce


@torch.no_grad()
def _target_table(W: Tensor, uniq: Tensor, T: float, sim: Similarity, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """The targets of the distinct targets ``uniq`` (U,): ``q`` (U, V) and ``sum_v q log q`` (U,),
    in ``dtype``, detached."""
    scaled = similarity(W, uniq, sim).to(dtype).div_(_check_temperature(T))  # (U, V)
    q = torch.softmax(scaled, dim=-1)
    # log-normaliser from the row's largest target, which is >= 1/V (no underflow): log q_j = s_j - lse.
    # With cosine similarity the largest is the target word itself (cos = 1); with dot, look for it.
    top = uniq[:, None] if sim == "cosine" else q.argmax(-1, keepdim=True)  # (U, 1)
    lse = scaled.gather(1, top).view(-1) - q.gather(1, top).log().view(-1)  # (U,)
    return q, torch.linalg.vecdot(q, scaled) - lse  # sum_v q (s - lse) = sum_v q log q, exact where q underflows


class _LogitsKL(torch.autograd.Function):
    """``(KL, CE)`` of logits (N, V) at targets y (N,) against the per-target table q (U, V)
    (``inv`` (N,) the row of each position's target, ``neg_entropy`` (U,) each row's
    ``sum_v q log q``), with the gradient formed in one custom backward: no (N, V) tensor under
    autograd, and the (N, V) target ``q[inv]`` only read there, once.

    Forward: ``log p = log_softmax(logits)`` (one fused pass), ``CE = -mean(log p_n(y_n))`` and
    ``KL = mean(neg_entropy[inv_n]) - sum(q * G) / N``, where ``G`` (U, V) sums the
    log-probabilities of each target's positions (one ``index_add`` pass). Backward, for
    incoming gradients ``a`` (of KL) and ``b`` (of CE): ``((a + b) p_n - a q[inv_n] - b onehot(y_n)) / N``.
    ``log p`` is saved (as cross-entropy saves it); q is the caller's."""

    @staticmethod
    def forward(ctx, logits: Tensor, y: Tensor, inv: Tensor, q: Tensor, neg_entropy: Tensor) -> tuple[Tensor, Tensor]:
        n = y.numel()
        logp = F.log_softmax(logits.to(q.dtype), dim=-1)  # (N, V): one fused pass
        ce = -logp.gather(1, y[:, None]).sum() / n
        grouped = logp.new_zeros(q.shape).index_add_(0, inv, logp)  # (U, V): the summed log-probabilities of each target's positions
        kl = (neg_entropy[inv].sum() - (q * grouped).sum()) / n
        ctx.save_for_backward(logp, y, inv, q)
        ctx.logits_dtype = logits.dtype
        return kl, ce

    @staticmethod
    def backward(ctx, g_kl: Tensor, g_ce: Tensor):
        logp, y, inv, q = ctx.saved_tensors
        n = y.numel()
        grad = logp.exp().mul_((g_kl + g_ce) / n)  # (N, V) the softmax, scaled
        grad.addcmul_(q.index_select(0, inv), g_kl / n, value=-1.0)  # - a q[inv] / N
        grad.scatter_add_(1, y[:, None], (-g_ce / n).expand(n, 1).to(grad.dtype))  # - b onehot / N
        return grad.to(ctx.logits_dtype), None, None, None, None


def semantic_kl(
    logits: Tensor, targets: Tensor, W: Tensor, T: float, sim: Similarity = "dot", lam: float = 1.0, pad_id: int | None = None,
    hidden: Tensor | None = None,
) -> Tensor:
    """``lam * KL(softmax(S(y, .) / T) || softmax(logits)) + (1 - lam) * CE``: a scalar.

    logits (B, L, V) (or (N, V)), targets (B, L) (or (N,)), W (V, D) the tied output
    embeddings, T > 0 the temperature, ``sim`` ``"dot"`` or ``"cosine"``, ``lam`` in [0, 1]
    (0 is plain CE). The target is detached; see the module doc for the limits. ``hidden``
    (B, L, D) with ``logits == hidden @ W.T`` takes the fast path (same value and gradients).
    """
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0.0 <= lam <= 1.0:
        raise ConfigError(f"semantic KL lambda: expected a number in [0, 1], got {lam!r}")
    kl, ce = semantic_kl_terms(logits, targets, W, T, sim, pad_id, hidden)
    return lam * kl + (1.0 - lam) * ce


@dataclass(frozen=True)
class TemperatureSchedule:
    """T over training: ``constant`` (``start`` throughout), or ``linear`` / ``cosine`` from
    ``start`` at step 0 to ``end`` at the last step (``end`` above ``start`` increases T,
    below decreases it). Cosine: ``end + (start - end) * (1 + cos(pi p)) / 2``, p in [0, 1]."""

    start: float = 1.0
    end: float | None = None
    kind: ScheduleKind = "constant"

    def __post_init__(self) -> None:
        _check_temperature(self.start)
        if self.kind not in SCHEDULES:
            raise ConfigError(f"semantic KL schedule: expected one of {', '.join(SCHEDULES)}, got {self.kind!r}")
        if self.kind != "constant":
            if self.end is None:
                raise ConfigError(f"semantic KL schedule {self.kind!r}: needs an end temperature")
            _check_temperature(self.end)

    def at(self, step: int, total_steps: int) -> float:
        """T at optimizer step ``step`` (0-based) of ``total_steps``."""
        if self.kind == "constant" or self.end is None:
            return self.start
        p = min(1.0, max(0.0, step / max(1, total_steps - 1)))
        if self.kind == "linear":
            return self.start + (self.end - self.start) * p
        return self.end + (self.start - self.end) * 0.5 * (1.0 + math.cos(math.pi * p))


__all__ = ["SCHEDULES", "SIMILARITIES", "TemperatureSchedule", "semantic_kl", "semantic_kl_terms", "semantic_target", "similarity"]
