"""`FeatureSteer`: shift next-token scores by lexicon memberships at chosen grammar states.

With ``table`` (V, F) a :class:`~neurosym.compile.lexicon.FeatureBank`'s static
memberships (each token on its own) and ``targets`` ``{column: strength}``, every token
gets ``shift(v) = sum_f strength_f * table[v, f]`` added to its score — in every row, or,
with ``at_states``, only in rows whose grammar state (tracked on ``automaton``) is one of
them. E.g. ``{"pos_high": 4.0}`` at the states where an adjective comes next makes
strongly positive adjectives more likely there and changes nothing elsewhere
(:func:`~neurosym.decode.mask.states_allowing` finds such states).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import torch

from neurosym.compile.automaton import Automaton
from neurosym.compile.lexicon import FeatureBank
from neurosym.decode.mask import StateTracker
from neurosym.decode.processor import LogitsProcessor
from neurosym.errors import NeurosymError


class FeatureSteer(LogitsProcessor):
    """scores += shift (V,) in the rows at one of ``at_states`` (all rows if None).

    bank: over the model's vocabulary. targets: feature column -> strength (negative
    steers away). at_states: states of ``automaton`` (needed with ``at_states``)."""

    def __init__(
        self,
        bank: FeatureBank,
        targets: Mapping[str, float],
        at_states: Collection[int] | None = None,
        automaton: Automaton | None = None,
    ):
        if not targets:
            raise NeurosymError(f"FeatureSteer: targets must name at least one feature column of {', '.join(bank.names)}")
        cols = [bank.column(name) for name in targets]
        strength = torch.tensor([float(x) for x in targets.values()], dtype=bank.table.dtype)
        self.shift = bank.table[:, cols] @ strength  # (V,)
        self.targets = dict(targets)
        self.tracker = None
        self.at_states = None
        if at_states is not None:
            if automaton is None:
                raise NeurosymError("FeatureSteer: at_states needs the automaton whose states they are (automaton=)")
            bad = [q for q in at_states if not 0 <= int(q) < automaton.num_states]
            if bad:
                raise NeurosymError(f"FeatureSteer: states {bad[:5]} are not states of the automaton (0..{automaton.num_states - 1})")
            if len(automaton.vocab) != len(bank.vocab):
                raise NeurosymError(f"FeatureSteer: the automaton has {len(automaton.vocab)} tokens, the bank {len(bank.vocab)}")
            self.tracker = StateTracker(automaton)
            self.at_states = torch.tensor(sorted({int(q) for q in at_states}), dtype=torch.long)

    def __repr__(self) -> str:
        where = "" if self.at_states is None else f", at {len(self.at_states)} states"
        return f"FeatureSteer({self.targets}{where})"

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        if self.tracker is not None:
            self.tracker.reset(batch_size, device)

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        if self.tracker is not None:
            self.tracker.advance(tokens, done)

    def active(self) -> torch.Tensor | None:
        """(B,) bool: the rows being steered now (None: all of them)."""
        if self.tracker is None:
            return None
        states = self.tracker.states
        return torch.isin(states, self.at_states.to(states.device))

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.shape[-1] != self.shift.shape[0]:
            raise NeurosymError(f"FeatureSteer: scores have {scores.shape[-1]} tokens, the feature bank {self.shift.shape[0]}")
        shift = self.shift.to(device=scores.device, dtype=scores.dtype)
        on = self.active()
        if on is None:
            return scores.add_(shift)
        return scores.add_(on.to(scores.device)[:, None] * shift[None, :])


__all__ = ["FeatureSteer"]
