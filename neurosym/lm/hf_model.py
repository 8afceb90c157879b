"""A local ``transformers`` causal LM as the built-in task's model (``[model] hf = DIR``).

:class:`HFCausalLM` gives a transformers causal LM :class:`~neurosym.lm.model.CausalLM`'s
calling convention and plug-ins, so one task, one loss and one evaluation serve both:

    ids (B, L) ──input embeddings──> e (B, L, D) ──adapter(e, **inputs)──> base(inputs_embeds=...)
        ──> logits (B, L, V), hidden (B, L, D) = the last hidden states; heads[name](hidden) -> extras[name]

* ``adapter``: the fusion adapter on the token embeddings (the base adds its own positions);
* ``output``: an :class:`~neurosym.lm.idea.IdeaOutput` whose head reads the hidden states
  (tied to the base's output embeddings) and whose gate is added to the base's logits;
  ``extras`` then hold ``idea`` and ``ungated``, as in the native model;
* ``lm_head``: the base's output embeddings (``.weight`` (V, D), tied or not), which the
  semantic-KL target reads;
* ``new_cache(B)`` and ``forward(ids, cache=...)``: the base's own key/value cache behind
  :class:`~neurosym.lm.model.CausalLM`'s cache protocol (``length``, ``select(rows)``),
  so :func:`neurosym.decode.generate` samples from either model; ``max_len`` is the
  base's number of positions.

:func:`load_base` reads the folder (``AutoModelForCausalLM``, no download), checks that
it is causal (a probe: the logits at position 0 must not depend on position 1), and puts
LoRA adapters on it (:func:`neurosym.lm.lora.with_lora`) when asked. ``transformers`` is
imported only here and only when a config names ``hf``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from neurosym.errors import NeurosymError
from neurosym.lm.idea import IdeaOutput
from neurosym.lm.lora import LoraSettings, with_lora
from neurosym.lm.model import LMOutput


def load_base(folder: str | Path, lora: LoraSettings | None = None) -> nn.Module:
    """The causal LM saved in ``folder`` (``save_pretrained``), with LoRA adapters when
    ``lora`` is given; a NeurosymError when the folder holds no model or a non-causal one."""
    try:
        from transformers import AutoModelForCausalLM  # lazy: the optional hf extra, only for hf = DIR
        from transformers.utils import logging as hf_logging  # lazy: as above
    except ImportError:
        raise NeurosymError("model.hf needs transformers: pip install 'neurosym[hf]'") from None
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise NeurosymError(f"{folder}: not a transformers model folder (no config.json)")
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # loading notes and progress bars would bury the training log
    hf_logging.disable_progress_bar()
    try:
        base = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True)
    except (ValueError, OSError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise NeurosymError(f"{folder}: not a causal language model ({first})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    if base.get_output_embeddings() is None:
        raise NeurosymError(f"{folder}: {type(base).__name__} has no output embeddings: not a causal LM head")
    check_causal(base, folder)
    return with_lora(base, lora) if lora is not None else base


@torch.no_grad()
def check_causal(base: nn.Module, folder: str | Path) -> None:
    """A NeurosymError unless the logits at position 0 ignore the token at position 1."""
    was = base.training
    base.eval()
    try:
        V = base.get_input_embeddings().num_embeddings
        a = base(input_ids=torch.tensor([[1 % V, 2 % V]])).logits[0, 0]
        b = base(input_ids=torch.tensor([[1 % V, 3 % V]])).logits[0, 0]
    finally:
        base.train(was)
    if not torch.allclose(a, b, atol=1e-5, rtol=1e-4):
        raise NeurosymError(f"{folder}: {type(base).__name__} is not causal (position 0 reads position 1): "
                            "model.hf needs a causal language model (GPT-2, Llama, ...), not an encoder")


def cache_keyword(base: nn.Module) -> str:
    """The name under which ``base.forward`` takes and returns its key/value cache:
    ``cache`` (transformers 5.x) or ``past_key_values`` (earlier releases)."""
    inner = base.get_base_model() if hasattr(base, "get_base_model") else base  # a peft model passes the keyword through
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


class HFCache:
    """The key/value cache of a transformers model in :class:`~neurosym.lm.model.KVCache`'s
    protocol: ``length`` positions read so far, ``select(rows)`` keeps some rows. ``past``
    is the base's own cache object (None before the first read)."""

    def __init__(self, past: Any = None, length: int = 0):
        self.past = past
        self.length = length

    def select(self, rows: Tensor) -> "HFCache":
        """The cache of the given rows (B',) only (the base's cache object is narrowed in place)."""
        if self.past is not None:
            if hasattr(self.past, "batch_select_indices"):
                self.past.batch_select_indices(rows)
            else:  # a transformers release that keeps a tuple of (k, v) per layer
                self.past = tuple(tuple(t.index_select(0, rows) for t in layer) for layer in self.past)
        return HFCache(self.past, self.length)


class HFCausalLM(nn.Module):
    """A transformers causal LM with CausalLM's plug-ins (see the module docstring)."""

    def __init__(self, base: nn.Module, adapter: nn.Module | None = None, heads: Mapping[str, nn.Module] | None = None,
                 output: IdeaOutput | None = None):
        super().__init__()
        self.base = base
        self.adapter = adapter
        self.heads = nn.ModuleDict(dict(heads or {}))
        self.output = output

    @property
    def lm_head(self) -> nn.Module:
        """The base's output embeddings (``.weight`` (V, D))."""
        return self.base.get_output_embeddings()

    @property
    def d_model(self) -> int:
        return self.base.get_input_embeddings().embedding_dim

    @property
    def max_len(self) -> int:
        """The most positions the base reads (its ``n_positions`` or ``max_position_embeddings``)."""
        config = self.base.config
        positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        if positions is None:
            raise NeurosymError(f"{type(self.base).__name__}: its config gives no number of positions (max_position_embeddings)")
        return int(positions)

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def new_cache(self, batch_size: int) -> HFCache:
        """An empty cache (the base makes its own on the first read; ``batch_size`` rows)."""
        return HFCache()

    def forward(self, ids: Tensor, cache: HFCache | None = None, **inputs: Any) -> LMOutput:
        """ids (B, L) -> LMOutput(logits (B, L, V), hidden (B, L, D), extras). With a
        ``cache``, ``ids`` are the positions after the cached ones and the outputs are theirs."""
        e = self.base.get_input_embeddings()(ids)  # (B, L, D)
        if self.adapter is not None:
            e = self.adapter(e, **inputs)
        if cache is None:
            out = self.base(inputs_embeds=e, output_hidden_states=True, use_cache=False)
        else:
            if cache.length + ids.shape[1] > self.max_len:
                raise NeurosymError(f"sequence length {cache.length + ids.shape[1]} exceeds the model's {self.max_len} positions")
            positions = torch.arange(cache.length, cache.length + ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
            key = cache_keyword(self.base)
            out = self.base(inputs_embeds=e, position_ids=positions, output_hidden_states=True, use_cache=True, **{key: cache.past})
            cache.past, cache.length = out[key], cache.length + ids.shape[1]
        hidden, logits = out.hidden_states[-1], out.logits  # the last hidden states: after the final norm (GPT-2, Llama, ...)
        extras = {name: head(hidden) for name, head in self.heads.items()}
        if self.output is not None:
            z = self.output.head(hidden, self.lm_head.weight)
            extras.update(idea=z, ungated=logits)
            if self.output.gated:
                logits = logits + self.output.gate(z).to(logits.dtype)
            if self.training:
                self.output.steps += 1
        return LMOutput(logits=logits, hidden=hidden, extras=extras)


__all__ = ["HFCache", "HFCausalLM", "check_causal", "load_base"]
