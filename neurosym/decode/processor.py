"""The logits-processor protocol every decoding step goes through.

A processor holds per-row state (an automaton state, a prefix chart, a history) for a
batch of B rows being decoded together. :func:`neurosym.decode.generate` drives it:

    proc.reset(B, device)                 # before the first token of a batch
    for each prompt position / step:
        scores = proc(scores)             # (B, V) float log-space scores -> (B, V)
        proc.advance(tokens)              # (B,) long: the token each row took

``scores`` are unnormalised log-weights; ``-inf`` forbids a token. A processor may
modify ``scores`` in place and must return the tensor to use next. ``advance`` is
called once per position with the chosen tokens, so no processor ever recomputes from
the start of the sequence. Rows that already ended receive ``pad`` tokens; processors
ignore them (see ``done`` in :meth:`advance`).

A processor that constrains the language also answers :meth:`allowed`: which of the
given tokens it permits at each row's current state (used to check prompts and to stop
rows that have no continuation left). A processor that defines a distribution over
sequences (a grammar prior) also answers :meth:`log_prob`, which ``generate`` sums into
each row's grammar log-probability.
"""

from __future__ import annotations

import torch


class LogitsProcessor:
    """Base class: the identity processor with no state."""

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        """Start B fresh rows (every row at the grammar's start, empty history)."""

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        """scores (B, V) -> (B, V) for the next token."""
        return scores

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        """Feed the token each row took: tokens (B,) long; ``done`` (B,) bool marks rows
        that had already finished (their token is padding and must not move the state)."""

    def allowed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Whether each row may take ``tokens`` (B,) next: (B,) bool. Unconstrained here."""
        return torch.ones(tokens.shape[0], dtype=torch.bool, device=tokens.device)

    def describe_allowed(self, row: int, limit: int = 8) -> list[int]:
        """A few token ids row ``row`` may take next (for error messages); [] if any."""
        return []

    def log_prob(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """The processor's own log P(token | row's state) for ``tokens`` (B,): (B,) float64,
        or None if it defines no distribution (masks, sampling transforms). Called before
        :meth:`advance` with the same tokens."""
        return None
