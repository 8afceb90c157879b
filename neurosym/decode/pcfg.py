"""Logits processors from a PCFG's exact prefix probabilities.

* :class:`PCFGPrior` adds ``weight * log P(v | prefix)`` to every token's score (the
  end-of-sentence token gets ``weight * log P(end | prefix)``): a product of experts
  with the model. With ``weight = 1`` and zero model logits, sampling draws sentences
  from the grammar itself.
* :class:`PCFGMask` forbids (``-inf``) every token the grammar cannot put next, and
  the end of the sentence unless the prefix is a whole sentence.

Both keep a :class:`~neurosym.layers.prefix.PrefixState` per batch and extend it by
one chart column per token (:meth:`advance`; rows marked ``done`` and the
end-of-sentence token leave the state as it is). Scores are (B, V_model) with
``V_model >= V`` (the grammar's vocabulary): ids beyond it are never grammatical.
A row whose prefix left the language (a token another processor let through) has
no continuation at all: every score becomes ``-inf``, end of sentence included.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from neurosym.decode.processor import LogitsProcessor
from neurosym.errors import ConfigError, NeurosymError
from neurosym.layers.prefix import PrefixGrammar, PrefixState
from neurosym.semiring import LOG_ZERO

if TYPE_CHECKING:
    from neurosym.compile.pcfg import RuleTensors



class _PrefixProcessor(LogitsProcessor):
    """Shared state and checks of the PCFG processors."""

    def __init__(self, rule_tensors: "RuleTensors", eos_id: int | None = None, dtype: torch.dtype = torch.float64):
        self.grammar = PrefixGrammar.from_rules(rule_tensors, dtype)
        vocab = rule_tensors.vocab
        if eos_id is None:
            if "<eos>" not in vocab:
                raise ConfigError(f"{type(self).__name__}: eos_id is required (the grammar's vocabulary has no <eos> token)")
            eos_id = vocab.id("<eos>")
        eos_id = int(eos_id)
        if eos_id < 0:
            raise ConfigError(f"{type(self).__name__}: eos_id must be a token id >= 0, got {eos_id}")
        if eos_id < self.grammar.V and bool(torch.isfinite(self.grammar.emit_by_token[eos_id]).any()):
            raise ConfigError(
                f"{type(self).__name__}: eos_id {eos_id} is the grammar token {vocab.tokens[eos_id]!r}; the end of a sentence needs an id of its own"
            )
        self.eos_id = eos_id
        self.name = rule_tensors.path or rule_tensors.start
        self.state: PrefixState | None = None

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        self.state = PrefixState(self.grammar, batch_size, device)
        self.grammar = self.state.grammar  # moved once to the device

    def advance(self, tokens: Tensor, done: Tensor | None = None) -> None:
        state = self._state()
        tokens = torch.as_tensor(tokens, device=state.device).long()
        skip = tokens == self.eos_id  # the end of the sentence is no grammar token
        if done is not None:
            skip = skip | torch.as_tensor(done, device=state.device).bool()
        state.append(tokens, skip=skip)

    def _state(self) -> PrefixState:
        if self.state is None:
            raise NeurosymError(f"{type(self).__name__}: call reset(batch_size) before using the processor")
        return self.state

    def _log_probs(self, scores: Tensor) -> Tensor:
        """(B, V_model) float64 ``log P(v | prefix)``, the end at ``eos_id``."""
        state = self._state()
        B, V = scores.shape[0], scores.shape[-1]
        if scores.dim() != 2 or B != state.batch_size:
            raise NeurosymError(f"{type(self).__name__}: expected scores (B, V) with B = {state.batch_size}; got {tuple(scores.shape)}")
        if V < self.grammar.V or self.eos_id >= V:
            raise NeurosymError(
                f"{type(self).__name__}: scores have {V} columns but the grammar's vocabulary has {self.grammar.V} tokens and eos_id is {self.eos_id}"
            )
        nxt, end = state.next_token_log_probs()
        out = scores.new_full((B, V), LOG_ZERO, dtype=nxt.dtype)
        out[:, : self.grammar.V] = nxt
        out[:, self.eos_id] = end
        return out

    def allowed(self, tokens: Tensor) -> Tensor:
        """(B,) bool: the grammar can continue each row's prefix with its token (the end
        of sentence when the prefix is a whole sentence)."""
        return self._token_log_probs(tokens) > LOG_ZERO

    def _token_log_probs(self, tokens: Tensor) -> Tensor:
        """(B,) float64 ``log P(token | prefix)`` (``eos_id``: the end), without the (B, V) vector."""
        state = self._state()
        tokens = torch.as_tensor(tokens, device=state.device).long()
        norm = state.prefix_log_prob
        joint = torch.where(tokens == self.eos_id, state.sentence_log_prob, state.token_log_prob(tokens))
        return torch.where(torch.isfinite(norm), joint - torch.where(torch.isfinite(norm), norm, 0.0), LOG_ZERO).double()

    def describe_allowed(self, row: int, limit: int = 8) -> list[int]:
        """Up to ``limit`` token ids row ``row`` may take next, the most probable first."""
        state = self._state()
        nxt, end = state.next_token_log_probs()
        scores = torch.cat([nxt[row], end[row : row + 1]])
        ids = torch.cat([torch.arange(self.grammar.V, device=scores.device), torch.tensor([self.eos_id], device=scores.device)])
        order = torch.argsort(scores, descending=True, stable=True)
        order = order[torch.isfinite(scores[order])][:limit]
        return ids[order].tolist()


class PCFGPrior(_PrefixProcessor):
    """Adds ``weight * log P(v | prefix)`` under a PCFG to the scores (B, V_model); the
    end-of-sentence id ``eos_id`` (default: the vocabulary's ``<eos>``) gets
    ``weight * log P(end | prefix)``. ``weight = 0`` leaves scores unchanged."""

    def __init__(self, rule_tensors: "RuleTensors", weight: float = 1.0, eos_id: int | None = None, dtype: torch.dtype = torch.float64):
        weight = float(weight)
        if not (math.isfinite(weight) and weight >= 0):
            raise ConfigError(f"PCFGPrior: weight must be a finite number >= 0, got {weight}")
        super().__init__(rule_tensors, eos_id, dtype)
        self.weight = weight

    def __repr__(self) -> str:
        return f"PCFGPrior({self.name}, weight={self.weight:g})"

    def __call__(self, scores: Tensor) -> Tensor:
        if self.weight == 0:
            self._state()
            return scores
        return scores.add_((self._log_probs(scores) * self.weight).to(scores.dtype))

    def allowed(self, tokens: Tensor) -> Tensor:
        if self.weight == 0:
            return torch.ones(tokens.shape[0], dtype=torch.bool, device=tokens.device)
        return super().allowed(tokens)

    def log_prob(self, tokens: Tensor) -> Tensor:
        """(B,) float64 ``log P(token | prefix)`` under the grammar (``eos_id``: the end),
        whatever the weight; called before :meth:`advance` with the same tokens."""
        return self._token_log_probs(tokens)


class PCFGMask(_PrefixProcessor):
    """Sets the scores (B, V_model) of tokens of zero prefix probability to ``-inf``, and
    of ``eos_id`` unless the prefix is a whole sentence."""

    def __repr__(self) -> str:
        return f"PCFGMask({self.name})"

    def __call__(self, scores: Tensor) -> Tensor:
        forbid = self._log_probs(scores) == LOG_ZERO
        return scores.masked_fill_(forbid, LOG_ZERO)


__all__ = ["PCFGMask", "PCFGPrior"]
