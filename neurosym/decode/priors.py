"""Grammar priors: processors that add ``weight * log P_grammar(token | prefix)``.

A prior is a distribution over the next token — end-of-sequence included — that a
grammar assigns given each row's prefix; adding its weighted log to the model's scores
samples from the product of experts ``P_model * P_grammar^weight`` (renormalised).
Tokens of probability zero are forbidden, so a prior also constrains the language.

* :class:`FSGPrior`: an FSG's own ``log P(token | state)``, with the stopping
  probability on end-of-sequence. Alone on zero logits it samples the FSG's sentences
  with their exact probabilities.
* :class:`RegexPrior`: the next-token distribution of a :class:`~neurosym.layers.wfsa.RegexLayer`
  pattern given its forward scores (below).
* :class:`MixturePrior`: ``p = sum_k softmax(c)_k p_k`` in probability space, ``c``
  fixed or learnable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from neurosym.compile.weighted import WeightedAutomaton
from neurosym.decode.mask import NUMPY_FLOATS, StateTracker, add_rows, check_backend
from neurosym.decode.processor import LogitsProcessor
from neurosym.errors import NeurosymError
from neurosym.layers.wfsa import RegexLayer
from neurosym.semiring import LOG_ZERO



def _check_weight(owner: str, weight: float) -> float:
    if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight >= 0):
        raise NeurosymError(f"{owner}: weight must be a finite number >= 0, got {weight!r}")
    return float(weight)


class Prior(LogitsProcessor, ABC):
    """Base class: a subclass defines :meth:`log_prior` (B, V), each row a normalised
    log-distribution over the next token; the rest follows from it."""

    weight: float = 1.0

    @abstractmethod
    def log_prior(self) -> torch.Tensor:
        """(B, V) float64: log P(next token | each row's prefix); rows sum to 1 in
        probability (all ``-inf`` for a row that left the grammar)."""
        raise NotImplementedError

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        lp = self.log_prior().to(device=scores.device, dtype=scores.dtype)
        shift = torch.where(lp == LOG_ZERO, LOG_ZERO, self.weight * lp)  # -inf stays -inf at weight 0
        return scores.add_(shift)

    def allowed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.log_prob(tokens) > LOG_ZERO

    def log_prob(self, tokens: torch.Tensor) -> torch.Tensor:
        lp = self.log_prior()
        return lp.gather(1, tokens.to(lp.device).long()[:, None]).squeeze(1)

    def describe_allowed(self, row: int, limit: int = 8) -> list[int]:
        return (self.log_prior()[row] > LOG_ZERO).nonzero().flatten()[:limit].tolist()


class FSGPrior(Prior):
    """``weight * log P(token | state)`` of a compiled FSG; ``eos_id`` gets the stopping
    probability ``log P(stop | state)``.

    weighted_automaton: over the model's vocabulary. Its table (Q, V) with the
    end-of-sequence column replaced is built once; a step is one row gather.
    backend: where the rows' states live (:class:`~neurosym.decode.mask.StateTracker`:
    ``"auto"``, ``"numpy"`` or ``"torch"``); under NumPy float32 and float64 scores get
    their rows gathered from a NumPy copy of the weighted table, other dtypes through
    torch. The same scores either way.
    """

    def __init__(self, weighted_automaton: WeightedAutomaton, weight: float = 1.0, eos_id: int | None = None, backend: str = "auto"):
        wa = weighted_automaton
        if not isinstance(wa, WeightedAutomaton):
            raise NeurosymError(f"FSGPrior needs a WeightedAutomaton (a compiled .fsg), got {type(wa).__name__}")
        if eos_id is None:
            eos_id = wa.vocab.id("<eos>") if "<eos>" in wa.vocab else None
            if eos_id is None:
                raise NeurosymError("FSGPrior: the vocabulary has no <eos> token; pass eos_id=")
        V = wa.log_probs.shape[1]
        if not 0 <= eos_id < V:
            raise NeurosymError(f"FSGPrior: eos_id must be a token id in [0, {V}), got {eos_id}")
        if bool((wa.log_probs[:, eos_id] > LOG_ZERO).any()):
            raise NeurosymError(f"FSGPrior: the grammar reads token {eos_id} ({wa.vocab.tokens[eos_id]!r}), so it cannot mark the end")
        self.automaton, self.weight, self.eos_id = wa, _check_weight("FSGPrior", weight), eos_id
        table = wa.log_probs.clone()
        table[:, eos_id] = wa.final_log_probs
        self.table = torch.cat([table, torch.full((1, V), LOG_ZERO, dtype=torch.float64)])  # (Q + 1, V); row Q: rejected
        self.tracker = StateTracker(wa, check_backend("FSGPrior", backend))
        self._shift: torch.Tensor | None = None  # (Q + 1, V) weight * table in the scores' dtype, built on first use
        self._shift_np: np.ndarray | None = None  # the same as a NumPy array (float32 / float64 scores under NumPy)
        self._rows_np: np.ndarray | None = None  # (B, V): the batch's rows of it, rewritten per call

    def __repr__(self) -> str:
        return f"FSGPrior({self.automaton.name or 'fsg'}, weight={self.weight:g})"

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        self.tracker.reset(batch_size, device)
        if not self.tracker.uses_numpy:
            self.table = self.table.to(device)

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        self.tracker.advance(tokens, done)

    def log_prior(self) -> torch.Tensor:
        return self.table[self.tracker.states.to(self.table.device)]  # state -1 reads the last row: rejected

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        if self.tracker.uses_numpy and scores.dtype in NUMPY_FLOATS:  # one NumPy row gather, one add
            shift_np = self._shift_np
            if shift_np is None or shift_np.dtype != NUMPY_FLOATS[scores.dtype]:
                table = self.table.cpu().numpy()
                with np.errstate(invalid="ignore"):  # weight 0 times -inf: replaced by -inf
                    shift_np = self._shift_np = np.where(table == LOG_ZERO, LOG_ZERO, self.weight * table).astype(NUMPY_FLOATS[scores.dtype])
            states = self.tracker.states_np
            if len(states) == 1:  # one row: a view, no copy
                return add_rows(scores, shift_np[int(states[0])][None])  # state -1 reads the last row: rejected
            buf = self._rows_np
            if buf is None or buf.shape != (len(states), shift_np.shape[1]) or buf.dtype != shift_np.dtype:
                buf = self._rows_np = np.empty((len(states), shift_np.shape[1]), dtype=shift_np.dtype)  # kept: no fresh pages per call
            return add_rows(scores, np.take(shift_np, states, axis=0, out=buf, mode="wrap"))  # state -1: the last row, rejected
        shift = self._shift
        if shift is None or shift.dtype != scores.dtype or shift.device != scores.device:  # weight * table, -inf kept, once
            table = self.table.to(scores.device)
            shift = self._shift = torch.where(table == LOG_ZERO, LOG_ZERO, self.weight * table).to(scores.dtype)
        return scores.add_(shift[self.tracker.states.to(scores.device)])


class RegexPrior(Prior):
    """Next-token scores of one pattern of a :class:`RegexLayer`, from its forward state.

    With ``alpha`` (Q,) the pattern's forward log-scores after the prefix (the layer's
    forward algorithm, advanced one token per step) and W its transition log-weights,

        score(v)   = log sum_{i, j} exp(alpha[i] + W[v, i, j])   (mass that reads v next)
        score(eos) = log sum_i exp(alpha[i] + final[i])            (mass that stops here)

    normalised over the vocabulary: ``P(v | prefix)`` is the share of the prefix's forward
    mass that continues with v (or stops). An untrained layer gives allowed tokens
    weight ~1 and others ~exp(penalty): a soft version of the compiled mask.
    """

    def __init__(self, regex_layer: RegexLayer, weight: float = 1.0, eos_id: int = 0, pattern: int | str | None = None):
        layer = regex_layer
        K = layer.num_automata
        if pattern is None:
            if K != 1:
                raise NeurosymError(f"RegexPrior: the layer has {K} patterns ({', '.join(map(str, layer.names))}); choose one with pattern=")
            k = 0
        elif isinstance(pattern, str):
            if pattern not in layer.names:
                raise NeurosymError(f"RegexPrior: no pattern {pattern!r}; the layer has {', '.join(map(str, layer.names))}")
            k = layer.names.index(pattern)
        else:
            if not 0 <= pattern < K:
                raise NeurosymError(f"RegexPrior: pattern index must be in [0, {K}), got {pattern}")
            k = pattern
        V = layer.delta.shape[2]
        if not 0 <= eos_id < V:
            raise NeurosymError(f"RegexPrior: eos_id must be a token id in [0, {V}), got {eos_id}")
        self.weight, self.eos_id, self.name = _check_weight("RegexPrior", weight), eos_id, layer.names[k]
        q = int(layer.state_mask[k].sum())
        with torch.no_grad():
            w = layer.token_log_weights()[:, k, :q, :q].double()  # (V, Q, Q)
            self.w = w
            self.reads = torch.logsumexp(w, dim=2)  # (V, Q): log sum_j exp W[v, i, j]
            self.final = layer.final_weights[k, :q].double()
            self.start = layer.start_weights[k, :q].double()
        self.alpha = torch.empty(0, q, dtype=torch.float64)

    def __repr__(self) -> str:
        return f"RegexPrior({self.name}, weight={self.weight:g})"

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        for name in ("w", "reads", "final", "start"):
            setattr(self, name, getattr(self, name).to(device))
        self.alpha = torch.log_softmax(self.start, dim=0).expand(batch_size, -1).clone()

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        w = self.w.index_select(0, tokens.to(self.w.device).long().clamp(0, self.w.shape[0] - 1))  # (B, Q, Q)
        nxt = torch.logsumexp(self.alpha[:, :, None] + w, dim=1)  # (B, Q)
        nxt = nxt - torch.logsumexp(nxt, dim=1, keepdim=True)  # keep alpha normalised: only ratios matter
        self.alpha = nxt if done is None else torch.where(done.to(nxt.device)[:, None], self.alpha, nxt)

    def log_prior(self) -> torch.Tensor:
        a = self.alpha  # (B, Q)
        a_max = a.amax(dim=1, keepdim=True)
        r_max = self.reads.amax(dim=1, keepdim=True)  # (V, 1)
        real = (a - a_max).exp() @ (self.reads - r_max).exp().T  # (B, V), a log-space product done in reals
        tiny = torch.finfo(real.dtype).tiny
        scores = real.clamp_min(tiny).log() + a_max + r_max.T
        scores[:, self.eos_id] = torch.logsumexp(a + self.final, dim=1)
        return torch.log_softmax(scores, dim=1)


class MixturePrior(Prior):
    """``p(v) = sum_k softmax(c)_k p_k(v)``: a mixture of priors in probability space
    (a log-sum-exp of their log-priors). ``c`` (K,): fixed numbers, or an
    ``nn.Parameter`` the gradient of :meth:`log_prior` reaches. The mixture resets and
    advances its priors itself: do not list them as processors too."""

    def __init__(self, priors: Sequence[Prior], c: Sequence[float] | torch.Tensor | None = None, weight: float = 1.0):
        self.priors = list(priors)
        if not self.priors or not all(isinstance(p, Prior) for p in self.priors):
            raise NeurosymError("MixturePrior needs a non-empty list of priors (FSGPrior, RegexPrior, MixturePrior, ...)")
        K = len(self.priors)
        c = torch.zeros(K) if c is None else c
        self.c = c if isinstance(c, torch.Tensor) else torch.tensor([float(x) for x in c])
        if self.c.shape != (K,):
            raise NeurosymError(f"MixturePrior: c must have one logit per prior, shape ({K},), got {tuple(self.c.shape)}")
        self.weight = _check_weight("MixturePrior", weight)

    def __repr__(self) -> str:
        return f"MixturePrior({', '.join(map(repr, self.priors))}, weight={self.weight:g})"

    @property
    def mixture_weights(self) -> torch.Tensor:
        """softmax(c) (K,)."""
        return torch.softmax(self.c, dim=0)

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        for p in self.priors:
            p.reset(batch_size, device)

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        for p in self.priors:
            p.advance(tokens, done)

    def log_prior(self) -> torch.Tensor:
        parts = torch.stack([p.log_prior() for p in self.priors])  # (K, B, V)
        w = torch.softmax(self.c.to(device=parts.device, dtype=torch.float64), dim=0)
        # log sum_k w_k exp(parts_k), written so that tokens no prior allows give -inf
        # and a zero (not NaN) gradient
        top = parts.amax(dim=0)
        top = torch.where(top > LOG_ZERO, top, 0.0)
        total = (w[:, None, None] * (parts - top).exp()).sum(dim=0)
        some = total > 0
        return torch.where(some, torch.where(some, total, 1.0).log() + top, LOG_ZERO)


def learnable(c: Sequence[float]) -> nn.Parameter:
    """Mixture logits to train: ``MixturePrior(priors, learnable([0.0, 0.0]))``."""
    return nn.Parameter(torch.tensor([float(x) for x in c]))


__all__ = ["FSGPrior", "MixturePrior", "Prior", "RegexPrior", "learnable"]
