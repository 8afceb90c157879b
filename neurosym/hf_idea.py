"""Idea gating on a ``transformers`` causal LM (the optional ``hf`` extra).

    from neurosym.hf_idea import IdeaGatedLM, IdeaGateLogitsProcessor
    model = IdeaGatedLM(GPT2LMHeadModel.from_pretrained(...), IdeaConfig())      # tied head: only the MLP is new
    out = model(input_ids, attention_mask=mask, labels=input_ids)                # out.loss = CE(gated) + weight * idea BCE
    gen = model.base.generate(input_ids, logits_processor=[IdeaGateLogitsProcessor(model)], ...)

* :class:`IdeaGatedLM` reads the base model's last hidden states (B, L, D) and adds the
  :class:`~neurosym.lm.idea.IdeaHead` (tied to the base's output embedding matrix by
  default) and the gate of :mod:`neurosym.lm.idea`; ``forward`` returns the gated logits,
  the ungated ones, the idea logits and, with ``labels`` (the input ids, as transformers
  does: shifted inside), the loss. How the base trains: fully (the default),
  ``freeze_base=True`` (only the idea head), or ``lora=LoraSettings(...)`` (the design's
  set-up for a pretrained model: the base frozen, low-rank adapters on its attention
  projections through ``peft``, the idea head trained in full; needs ``peft``, in the
  ``hf`` extra; the settings and the wrapper live in :mod:`neurosym.lm.lora`). With LoRA,
  ``model.base`` is the ``peft`` model (``generate`` as usual).
* :class:`IdeaGateLogitsProcessor` gates ``generate``'s scores: at each step it reads the
  rows' ids through the base (positions from the attention mask of the padding, so
  left-padded prompts are read as they were) and adds ``idea_gate(z)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurosym.errors import NeurosymError
from neurosym.hf import MissingExtra
from neurosym.lm.idea import IdeaConfig, IdeaHead, idea_gate, idea_loss, ramped_alpha
from neurosym.lm.lora import LoraSettings, with_lora  # the LoRA plumbing, shared with the lm task

try:
    from transformers import LogitsProcessor as HFLogitsProcessor
except ImportError:  # pragma: no cover - neurosym.hf raises first
    raise MissingExtra("neurosym.hf_idea needs transformers: pip install 'neurosym[hf]'") from None


@dataclass
class IdeaGatedOutput:
    """logits (B, L, V) gated; ungated (B, L, V); idea (B, L, V) idea logits; loss (with labels)."""

    logits: Tensor
    ungated: Tensor
    idea: Tensor
    loss: Tensor | None = None
    ce: Tensor | None = None
    idea_bce: Tensor | None = None


class IdeaGatedLM(nn.Module):
    """A transformers causal LM with an idea head and the gate (see the module docstring)."""

    def __init__(self, base: nn.Module, config: IdeaConfig | None = None, stop_ids: Tensor | None = None, freeze_base: bool = False,
                 pad_id: int = -100, lora: LoraSettings | None = None):
        super().__init__()
        if lora is not None:
            if freeze_base:
                raise NeurosymError("IdeaGatedLM: freeze_base=True and lora= conflict (LoRA trains adapters on the frozen base; "
                                    "freeze_base would freeze the adapters too)")
            base = with_lora(base, lora)
        self.base = base
        self.config = config or IdeaConfig()
        emb = base.get_output_embeddings()
        if emb is None:
            raise NeurosymError(f"{type(base).__name__} has no output embeddings (get_output_embeddings() is None): not a causal LM head")
        V, D = emb.weight.shape
        self.vocab_size, self.d_model = V, D
        self.head = IdeaHead(D, V, self.config.hidden, self.config.tied)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("stop_ids", torch.as_tensor([] if stop_ids is None else stop_ids, dtype=torch.long), persistent=False)
        self.pad_id = pad_id
        if freeze_base:
            for p in base.parameters():
                p.requires_grad_(False)

    @property
    def alpha(self) -> float:
        return ramped_alpha(self.config.alpha, int(self.steps), self.config.ramp_steps)

    def gate(self, z: Tensor) -> Tensor:
        c = self.config
        return idea_gate(z, self.alpha, c.beta, c.eps, c.variant)

    def idea_logits(self, hidden: Tensor) -> Tensor:
        """hidden (B, L, D) -> z (B, L, V)."""
        return self.head(hidden, self.base.get_output_embeddings().weight)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None,
                position_ids: Tensor | None = None) -> IdeaGatedOutput:
        out = self.base(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, output_hidden_states=True)
        hidden = out.hidden_states[-1]  # (B, L, D): after the final layer norm (GPT-2, Llama, ...)
        ungated = out.logits
        z = self.idea_logits(hidden)
        logits = ungated + self.gate(z).to(ungated.dtype)
        if self.training:
            self.steps += 1
        result = IdeaGatedOutput(logits=logits, ungated=ungated, idea=z)
        if labels is not None:
            # transformers' convention: labels are the inputs; position t predicts labels[t + 1]; -100 is ignored
            targets = labels[:, 1:]
            if attention_mask is not None:
                targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
            V = logits.shape[-1]
            ce = F.cross_entropy(logits[:, :-1].reshape(-1, V).float(), targets.reshape(-1), ignore_index=-100)
            pad = V  # the idea targets need a pad id inside the vocabulary range check: -100 -> an unused id
            idea_t = torch.where(targets == -100, torch.full_like(targets, pad), targets)
            bce = idea_loss(F.pad(z[:, :-1], (0, 1)), idea_t, self.config.window, pad_id=pad, stop_ids=self.stop_ids,
                            pos_weight=self.config.pos_weight)
            result.loss, result.ce, result.idea_bce = ce + self.config.weight * bce, ce, bce
        return result


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """(B, L) positions counting only attended tokens (0 for left padding), as generate does."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class IdeaGateLogitsProcessor(HFLogitsProcessor):
    """Adds the gate of an :class:`IdeaGatedLM` to ``generate``'s scores (B, V).

    ``pad_token_id``: rows' left padding (not attended, positions from the mask); None
    when prompts are not padded."""

    def __init__(self, model: IdeaGatedLM, pad_token_id: int | None = None):
        if not isinstance(model, IdeaGatedLM):
            raise NeurosymError(f"IdeaGateLogitsProcessor needs an IdeaGatedLM, got {type(model).__name__}")
        self.model, self.pad_token_id = model, pad_token_id

    @torch.no_grad()
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        mask = torch.ones_like(input_ids) if self.pad_token_id is None else (input_ids != self.pad_token_id).long()
        out = self.model.base(input_ids=input_ids, attention_mask=mask, position_ids=position_ids_from_mask(mask), output_hidden_states=True)
        z = self.model.idea_logits(out.hidden_states[-1][:, -1:])[:, 0]  # (B, V)
        gate = self.model.gate(z)
        V = scores.shape[-1]
        if gate.shape[-1] < V:  # the scores may have more columns than the head (padded vocabularies)
            gate = F.pad(gate, (0, V - gate.shape[-1]))
        return scores + gate[:, :V].to(scores.dtype)


__all__ = ["IdeaGateLogitsProcessor", "IdeaGatedLM", "IdeaGatedOutput", "LoraSettings", "position_ids_from_mask", "with_lora"]
