"""LoRA adapters on a ``transformers`` model through ``peft`` (the optional ``hf`` extra):
the settings and the one wrapper, shared by the built-in language-model task's ``[model]
lora`` (:mod:`neurosym.lm.hf_model`) and the idea-gated transformers LM
(:class:`neurosym.hf_idea.IdeaGatedLM`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from neurosym.errors import NeurosymError


class MissingPeft(NeurosymError, ImportError):
    """LoRA was asked for, and ``peft`` is not installed."""


@dataclass
class LoraSettings:
    """LoRA adapters (``peft.LoraConfig``): rank ``r``, scale ``alpha / r``, dropout on the
    adapters' input, and the modules to adapt (None: peft's default for the architecture,
    the attention projections — ``c_attn`` on GPT-2, ``q_proj``/``v_proj`` on Llama)."""

    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.05
    target_modules: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise NeurosymError(f"LoraSettings.r: expected an integer >= 1, got {self.r!r}")
        if not self.alpha > 0:
            raise NeurosymError(f"LoraSettings.alpha: expected a number > 0, got {self.alpha!r}")
        if not 0 <= self.dropout < 1:
            raise NeurosymError(f"LoraSettings.dropout: expected a number in [0, 1), got {self.dropout!r}")


def with_lora(base: nn.Module, settings: LoraSettings) -> nn.Module:
    """``base`` wrapped by ``peft`` with LoRA adapters (its own weights frozen, the
    adapters trainable; the adapters' B matrices start at zero, so the wrapped model
    computes what ``base`` did until it trains). Raises :class:`MissingPeft` without ``peft``."""
    try:
        from peft import LoraConfig, get_peft_model  # lazy: an optional extra
    except ImportError:
        raise MissingPeft("LoRA needs peft: pip install 'neurosym[hf]'") from None
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout, task_type="CAUSAL_LM",
                        target_modules=None if settings.target_modules is None else list(settings.target_modules))
    try:
        return get_peft_model(base, config)
    except ValueError as err:  # e.g. target modules not found in the model, or no default for the architecture
        raise NeurosymError(f"LoRA on {type(base).__name__}: {err}") from None


__all__ = ["LoraSettings", "MissingPeft", "with_lora"]
