"""The idea gate as a logits processor.

:class:`IdeaGate` adds ``idea_gate(z)`` (see :mod:`neurosym.lm.idea`) to each step's
scores, where z (B, V) are the idea logits a model with an
:class:`~neurosym.lm.idea.IdeaOutput` gives at each row's last position. It keeps each
row's tokens (``<bos>``, the prompt, the generated tokens) and reads them through the
model when called, so it needs nothing from :func:`~neurosym.decode.generate.generate`
beyond the processor protocol (the cost is one forward pass over the rows' histories
per step: fine for the recipe's short documents, O(L^2) overall).

Typical use, the design's setting (gate, then the repetition penalty 1.2)::

    with ungated(model):   # the model's own logits without the gate
        generate(model, prompts=..., processors=[IdeaGate(model, bos_id), RepetitionPenalty(20, 1.2)])

which samples exactly what ``generate(model, processors=[RepetitionPenalty(20, 1.2)])``
samples from the gated model itself (tests/decode/test_decode_idea.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from neurosym.decode.processor import LogitsProcessor
from neurosym.errors import NeurosymError
from neurosym.lm.idea import GATE_VARIANTS, IdeaOutput, idea_gate


def idea_output(model: nn.Module) -> IdeaOutput:
    """The model's :class:`IdeaOutput`; a NeurosymError when it has none."""
    output = getattr(model, "output", None)
    if not isinstance(output, IdeaOutput):
        raise NeurosymError(f"{type(model).__name__} has no idea head: its output layer is {type(output).__name__}, not an IdeaOutput")
    return output


@contextmanager
def ungated(model: nn.Module) -> Iterator[nn.Module]:
    """Within the block the model's logits are the ungated ones (the gate is left to
    :class:`IdeaGate`)."""
    output = idea_output(model)
    before = output.gated
    output.gated = False
    try:
        yield model
    finally:
        output.gated = before


class IdeaGate(LogitsProcessor):
    """scores (B, V) -> scores + gate(z) with z the idea logits of each row's history.

    alpha, beta, eps, variant default to the model's trained gate (its current alpha)."""

    def __init__(
        self, model: nn.Module, bos_id: int | None, alpha: float | None = None, beta: float | None = None,
        eps: float | None = None, variant: str | None = None,
    ):
        output = idea_output(model)
        c = output.config
        self.model = model
        self.bos_id = bos_id
        self.alpha = output.alpha if alpha is None else float(alpha)
        self.beta = c.beta if beta is None else float(beta)
        self.eps = c.eps if eps is None else float(eps)
        self.variant = c.variant if variant is None else variant
        if self.variant not in GATE_VARIANTS:
            raise NeurosymError(f"IdeaGate: variant must be one of {', '.join(GATE_VARIANTS)}, got {self.variant!r}")
        if not self.alpha >= 0 or not self.beta <= 0:
            raise NeurosymError(f"IdeaGate: expected alpha >= 0 and beta <= 0, got alpha={self.alpha}, beta={self.beta}")
        self.history: list[list[int]] = []

    def __repr__(self) -> str:
        return f"IdeaGate(alpha={self.alpha:g}, beta={self.beta:g}, variant={self.variant!r})"

    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        self.history = [([] if self.bos_id is None else [self.bos_id]) for _ in range(batch_size)]

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        for b, t in enumerate(tokens.tolist()):
            if done is None or not bool(done[b]):
                self.history[b].append(int(t))

    @torch.no_grad()
    def idea_logits(self) -> torch.Tensor:
        """z (B, V) at each row's last token (rows without any token: zeros)."""
        device = next(self.model.parameters()).device
        lengths = torch.tensor([len(h) for h in self.history], device=device)
        width = max(1, int(lengths.max()) if len(self.history) else 1)
        grid = torch.zeros(len(self.history), width, dtype=torch.long, device=device)
        for b, h in enumerate(self.history):
            if h:
                grid[b, : len(h)] = torch.tensor(h, dtype=torch.long)
        was = self.model.training
        self.model.eval()
        try:
            z = self.model(grid).extras["idea"]  # (B, width, V)
        finally:
            self.model.train(was)
        last = z[torch.arange(len(self.history), device=device), (lengths - 1).clamp(min=0)]
        return torch.where((lengths > 0)[:, None], last, torch.zeros((), dtype=last.dtype, device=device))

    def gate(self) -> torch.Tensor:
        """The gate (B, V) for the next token of every row."""
        return idea_gate(self.idea_logits(), self.alpha, self.beta, self.eps, self.variant)

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        return scores + self.gate().to(scores.dtype)


__all__ = ["IdeaGate", "idea_output", "ungated"]
