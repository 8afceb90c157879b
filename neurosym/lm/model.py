"""A small causal Transformer language model with plug-in points.

One readable file, nanoGPT-style:

    ids (B, L) ──embed──> e (B, L, D) ──adapter(e, **inputs)──> (+ sinusoidal positions)
        ──dropout──> n_layers x pre-LN block ──final LayerNorm──> hidden (B, L, D)
        ──tied output projection (or output(hidden, E))──> logits (B, L, V);   heads[name](hidden) -> extras[name]

* The token embedding and the output projection share one Parameter (``lm_head.weight
  is tok_emb.weight``). Embeddings are drawn with std ``D**-0.5`` and multiplied by
  ``sqrt(D)`` (Vaswani et al.), so ``e`` has entries of order 1, comparable to the
  sinusoidal positions, while the tied logits ``hidden @ W^T`` start with std ~1.
* Blank inputs (:meth:`CausalLM.blank_inputs`): chosen tokens are read as a zero
  embedding (words never seen in training, whose rows were trained only as outputs), and
  in training other chosen tokens are blanked at random, so the model learns to read a
  blank word through its other inputs (a fusion adapter's features). Off by default.
* Positions: ``"sinusoidal"`` adds the fixed sin/cos table to the (adapted) embeddings;
  ``"rotary"`` adds nothing and rotates queries and keys inside every attention layer.
  Either way the adapter sees position-free token embeddings.
* Attention is always causal (``F.scaled_dot_product_attention(is_causal=True)``), so
  the output at position t depends on ``ids[:, :t+1]`` (and on ``inputs`` at positions
  ``<= t`` when the adapter is per-position) only. There is no key-padding mask: padding
  is expected only at the *end* of a row, where causality already hides it from every
  real position; the outputs at pad positions are garbage and the losses and metrics
  ignore them (targets there are ``pad_id``). Left padding would need a mask.

Plug-in points, so variants need no edit here:

* ``adapter``: an ``nn.Module`` called as ``adapter(e (B, L, D), **inputs) -> (B, L, D)``
  before the blocks; ``inputs`` are the extra keyword arguments of :meth:`CausalLM.forward`
  (``features=``, ``control=``, ...). Without an adapter the extra inputs are ignored,
  so one batch format feeds the baseline and the fused model alike.
* ``heads``: ``{name: nn.Module}``, each called on the final hidden states (B, L, D);
  their outputs come back in ``LMOutput.extras[name]``.
* ``output``: an ``nn.Module`` called as ``output(hidden (B, L, D), weight (V, D)) ->
  logits (B, L, V)`` in place of the tied projection ``hidden @ weight^T``; ``weight`` is
  the tied embedding matrix (e.g. :class:`~neurosym.lm.fusion.LexicalOutput` adds each
  word's lexicon description to its row). It may also return ``(logits, {name: extra})``,
  whose entries join ``LMOutput.extras`` (:class:`~neurosym.lm.idea.IdeaOutput`). It acts on each position alone, so the KV
  cache needs nothing from it.

Incremental decoding: ``cache = model.new_cache(B)``, then ``model(ids, cache=cache)``
reads the next positions only — ``ids`` (B, T) are positions ``cache.length ..
cache.length + T - 1`` — and appends their keys and values to ``cache``, so every step
costs one position, not the whole prefix. Positions (sinusoidal or rotary) start at
``cache.length``; per-position adapter inputs (``features=``) cover the new positions
only, per-sentence ones (``control=``) are given whole. The logits equal a full
forward's (tests/lm/test_model.py checks it to 1e-5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurosym.errors import ConfigError

Positions = Literal["sinusoidal", "rotary"]


# ---------------------------------------------------------------------- configuration
@dataclass
class LMConfig:
    """Hyper-parameters of :class:`CausalLM`; checked on construction.

    Every bad value raises :class:`~neurosym.errors.ConfigError` whose message starts
    with ``LMConfig.<field>``.
    """

    vocab_size: int
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.1
    max_len: int = 64
    positions: Positions = "sinusoidal"
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"LMConfig.{name} must be a positive integer, got {value!r}")
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise ConfigError(f"LMConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if self.positions not in ("sinusoidal", "rotary"):
            raise ConfigError(f"LMConfig.positions must be 'sinusoidal' or 'rotary', got {self.positions!r}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"LMConfig.d_model ({self.d_model}) must be divisible by LMConfig.n_heads ({self.n_heads})")
        if self.positions == "rotary" and self.head_dim % 2:
            raise ConfigError(
                f"LMConfig.d_model / n_heads = {self.head_dim} must be even for rotary positions "
                f"(d_model={self.d_model}, n_heads={self.n_heads})"
            )
        if isinstance(self.pad_id, bool) or not isinstance(self.pad_id, int) or not 0 <= self.pad_id < self.vocab_size:
            raise ConfigError(f"LMConfig.pad_id must be a token id in [0, vocab_size={self.vocab_size}), got {self.pad_id!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


# The keys of a recipe's [model] table that are LMConfig's: all its fields but the two the
# data fix (the vocabulary's size and its padding id).
ARCHITECTURE_KEYS = tuple(f.name for f in fields(LMConfig) if f.name not in ("vocab_size", "pad_id"))


def _require(ok: bool, key: str, expected: str, value: Any) -> None:
    """A ConfigError ``model.key: expected ..., got value`` unless ``ok`` (positioned by Config.section)."""
    if not ok:
        shown = f'"{value}"' if isinstance(value, str) else str(value).replace("True", "true").replace("False", "false")
        raise ConfigError(f"model.{key}: {expected}, got {shown}")


def _check_architecture(self) -> None:
    for key in ("d_model", "n_layers", "n_heads", "d_ff", "max_len"):
        value = getattr(self, key)
        if value is not None:  # a recipe may let max_len follow its data (None)
            _require(value >= 1, key, "expected an integer >= 1", value)
    _require(self.d_model % self.n_heads == 0, "n_heads", f"expected a divisor of model.d_model ({self.d_model})", self.n_heads)
    _require(0 <= self.dropout < 1, "dropout", "expected a number in [0, 1)", self.dropout)


def _lm_config(self, vocab_size: int, pad_id: int, **overrides: Any) -> LMConfig:
    """The :class:`LMConfig` of these keys over a vocabulary (``overrides`` replace keys)."""
    return LMConfig(vocab_size=vocab_size, pad_id=pad_id, **{**{k: getattr(self, k) for k in ARCHITECTURE_KEYS}, **overrides})


LMSection = make_dataclass(
    "LMSection",
    [(f.name, f.type, field(default=f.default)) for f in fields(LMConfig) if f.name in ARCHITECTURE_KEYS],
    namespace={
        "__module__": __name__,
        "__doc__": "``[model]``'s architecture keys, made from :class:`LMConfig`'s fields (all but ``vocab_size`` and "
                   "``pad_id``, which the data fix) with its defaults, checked as ConfigErrors at ``model.<key>``. A "
                   "recipe's ``[model]`` dataclass subclasses it (redeclaring a key only to change its default, and "
                   "calling ``super().__post_init__()``), and builds the model with ``lm_config(vocab_size, pad_id)``.",
        "__post_init__": _check_architecture,
        "lm_config": _lm_config,
    },
)


@dataclass
class LMOutput:
    """What :meth:`CausalLM.forward` returns.

    logits: (B, L, V) next-token scores (position t predicts token t + 1).
    hidden: (B, L, D) final hidden states (after the final LayerNorm).
    extras: ``{head name: head(hidden)}``.
    """

    logits: Tensor
    hidden: Tensor
    extras: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------- positions
def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """(max_len, d_model): ``PE[p, 2i] = sin(p / 10000^(2i/D))``, ``PE[p, 2i+1] = cos(...)``."""
    half = (d_model + 1) // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) * 2 / d_model)  # (half,)
    angle = torch.arange(max_len, dtype=torch.float32)[:, None] * freq[None, :]  # (max_len, half)
    pe = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, 2 * half)
    return pe[:, :d_model]


def rotary_tables(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """cos, sin (max_len, head_dim // 2) for rotating (x1, x2) halves of each head."""
    freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (hd/2,)
    angle = torch.arange(max_len, dtype=torch.float32)[:, None] * freq[None, :]
    return angle.cos(), angle.sin()


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x (B, H, L, hd) by position: the pairs (x[..., i], x[..., i + hd/2]) turn by
    angle ``p * base^(-2i/hd)``; cos, sin are (L, hd/2). Scores q·k then depend on the
    positions only through their difference."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# ---------------------------------------------------------------------- key/value cache
class LayerCache:
    """One layer's keys and values for incremental decoding, in buffers of ``capacity``
    positions allocated once: (B, H, capacity, hd) each, the first ``length`` filled.
    An append writes the new positions in place (no copy of the cached ones)."""

    def __init__(self, keys: Tensor, values: Tensor, length: int = 0):
        if keys.shape != values.shape or keys.dim() != 4 or not 0 <= length <= keys.shape[2]:
            raise ConfigError(f"LayerCache: keys and values must be equal (B, H, capacity, hd) buffers, got {tuple(keys.shape)} and {tuple(values.shape)}")
        self._k, self._v, self.length = keys, values, length

    @property
    def keys(self) -> Tensor:
        """(B, H, length, hd): the cached positions' keys (a view of the buffer)."""
        return self._k[:, :, : self.length]

    @property
    def values(self) -> Tensor:
        """(B, H, length, hd): the cached positions' values (a view of the buffer)."""
        return self._v[:, :, : self.length]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new positions' k, v (B, H, T, hd); return every position's (B, H, length, hd)."""
        end = self.length + k.shape[2]
        if end > self._k.shape[2]:
            raise ConfigError(f"the key/value cache holds {self._k.shape[2]} positions; {end} asked (LMConfig.max_len)")
        self._k[:, :, self.length : end] = k
        self._v[:, :, self.length : end] = v
        self.length = end
        return self.keys, self.values

    def select(self, rows: Tensor) -> "LayerCache":
        """The cache of the given rows (B',) only."""
        return LayerCache(self._k.index_select(0, rows), self._v.index_select(0, rows), self.length)


@dataclass
class KVCache:
    """The keys and values of every layer for the positions read so far (see the module
    docstring). Make one with :meth:`CausalLM.new_cache`."""

    layers: list[LayerCache]

    @property
    def length(self) -> int:
        """How many positions the cache holds (the position of the next token)."""
        return self.layers[0].length if self.layers else 0

    def select(self, rows: Tensor) -> "KVCache":
        """A cache of the given rows (B',) only, e.g. to drop finished rows."""
        return KVCache([layer.select(rows) for layer in self.layers])


def attention_mask(new: int, total: int, device: torch.device) -> Tensor | None:
    """(new, total) bool: the query of the i-th new position (position total - new + i)
    may see keys 0 .. total - new + i; None when every query sees every key."""
    if new == 1:
        return None
    return torch.ones(new, total, dtype=torch.bool, device=device).tril(diagonal=total - new)


# ---------------------------------------------------------------------- blocks
class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: x (B, L, D) -> (B, L, D)."""

    def __init__(self, config: LMConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, rotary: tuple[Tensor, Tensor] | None = None, cache: LayerCache | None = None) -> Tensor:
        """x (B, L, D) are the new positions; with a ``cache`` they follow the cached ones
        (whose keys and values are reused, and the new ones appended)."""
        B, L, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, L, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, L, hd)
        if rotary is not None:
            cos, sin = rotary
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        past = 0 if cache is None else cache.length
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, past + L, hd): cached positions, then the new ones
        mask = attention_mask(L, past + L, x.device) if past else None
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=not past)
        y = y.transpose(1, 2).reshape(B, L, D)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward: D -> d_ff -> GELU -> D."""

    def __init__(self, config: LMConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_ff)
        self.proj = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-LN Transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``."""

    def __init__(self, config: LMConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x: Tensor, rotary: tuple[Tensor, Tensor] | None = None, cache: LayerCache | None = None) -> Tensor:
        x = x + self.attn(self.ln1(x), rotary, cache)
        return x + self.mlp(self.ln2(x))


# ---------------------------------------------------------------------- the model
class CausalLM(nn.Module):
    """Decoder-only Transformer LM with a tied embedding, an optional input ``adapter``,
    optional output ``heads`` and an optional ``output`` layer (see the module docstring)."""

    def __init__(
        self, config: LMConfig, adapter: nn.Module | None = None, heads: Mapping[str, nn.Module] | None = None,
        output: nn.Module | None = None,
    ):
        super().__init__()
        self.config = config
        D = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, D)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, config.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied: one Parameter
        if config.positions == "sinusoidal":
            self.register_buffer("pos_table", sinusoidal_table(config.max_len, D), persistent=False)
        else:
            cos, sin = rotary_tables(config.max_len, config.head_dim)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self._init_weights()
        # blank inputs (blank_inputs): none by default; not part of the state dict (the task rebuilds them)
        self.register_buffer("blank", None, persistent=False)  # (V,) bool: read as a zero embedding
        self.register_buffer("blank_drop", None, persistent=False)  # (V,) bool: blanked at random in training
        self.blank_dropout = 0.0
        # plug-ins keep their own initialisation
        self.adapter = adapter
        self.heads = nn.ModuleDict(dict(heads or {}))
        self.output = output

    def _init_weights(self) -> None:
        """GPT-2 style: Linear ~ N(0, 0.02), zero biases, residual projections scaled by
        1/sqrt(2 n_layers); embeddings ~ N(0, 1/D) (they are multiplied by sqrt(D))."""
        for name, p in self.named_parameters():
            if name == "tok_emb.weight":
                nn.init.normal_(p, std=self.config.d_model**-0.5)
            elif name.endswith("proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * self.config.n_layers))
            elif name.endswith(".weight") and p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Number of parameters, each tied Parameter counted once (adapter and heads included)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    @property
    def max_len(self) -> int:
        """The most positions the model reads (``config.max_len``)."""
        return self.config.max_len

    def embed(self, ids: Tensor) -> Tensor:
        """Scaled token embeddings: ids (B, L) -> (B, L, D), zero at blank tokens (:meth:`blank_inputs`)."""
        e = self.tok_emb(ids)
        if self.blank is not None:
            blank = self.blank[ids]  # (B, L)
            if self.training and self.blank_dropout > 0:
                blank = blank | (self.blank_drop[ids] & (torch.rand(ids.shape, device=ids.device) < self.blank_dropout))
            e = e.masked_fill(blank.unsqueeze(-1), 0.0)
        return e * math.sqrt(self.config.d_model)

    def blank_inputs(self, ids: Sequence[int], dropout_ids: Sequence[int] = (), dropout: float = 0.0) -> None:
        """Read the tokens ``ids`` as a zero input embedding, always (words never seen in
        training: their tied rows were trained only as outputs, so as inputs they carry
        noise); in training mode, read each occurrence of a token of ``dropout_ids`` as
        zero too with probability ``dropout`` (drawn per position from torch's generator),
        so the model learns to read a blank word through its other inputs. The output
        side (the tied projection) is unchanged."""
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ConfigError(f"CausalLM.blank_inputs: dropout must be a number in [0, 1), got {dropout!r}")
        V = self.config.vocab_size
        bad = [i for i in [*ids, *dropout_ids] if not 0 <= int(i) < V]
        if bad:
            raise ConfigError(f"CausalLM.blank_inputs: token ids out of range [0, {V}): {bad}")
        device = self.tok_emb.weight.device
        self.blank = torch.zeros(V, dtype=torch.bool, device=device)
        self.blank[list(map(int, ids))] = True
        self.blank_drop = torch.zeros(V, dtype=torch.bool, device=device)
        self.blank_drop[list(map(int, dropout_ids))] = True
        self.blank_dropout = float(dropout)

    def new_cache(self, batch_size: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> KVCache:
        """An empty :class:`KVCache` for ``batch_size`` rows, with room for ``max_len`` positions."""
        c, ref = self.config, self.tok_emb.weight
        empty = lambda: torch.zeros(batch_size, c.n_heads, c.max_len, c.head_dim, device=device or ref.device, dtype=dtype or ref.dtype)  # noqa: E731
        return KVCache([LayerCache(empty(), empty()) for _ in range(c.n_layers)])

    def forward(self, ids: Tensor, cache: KVCache | None = None, **inputs: Any) -> LMOutput:
        """ids (B, L) long -> :class:`LMOutput` (logits (B, L, V), hidden (B, L, D), extras).

        ``inputs`` (e.g. ``features=`` (B, L, F), ``control=`` (B, C)) go to the adapter
        as keyword arguments; without an adapter they are ignored. With a ``cache``, ``ids``
        are the positions after the cached ones (see the module docstring) and the
        outputs are theirs only."""
        B, L = ids.shape
        start = 0 if cache is None else cache.length
        if start + L > self.config.max_len:
            raise ConfigError(f"sequence length {start + L} exceeds LMConfig.max_len={self.config.max_len}")
        x = self.embed(ids)  # (B, L, D)
        if self.adapter is not None:
            x = self.adapter(x, **inputs)
        rotary = None
        if self.config.positions == "sinusoidal":
            x = x + self.pos_table[start : start + L]
        else:
            rotary = (self.rope_cos[start : start + L], self.rope_sin[start : start + L])
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, rotary, None if cache is None else cache.layers[i])
        hidden = self.ln_f(x)
        logits = self.lm_head(hidden) if self.output is None else self.output(hidden, self.lm_head.weight)  # (B, L, V)
        extras = {name: head(hidden) for name, head in self.heads.items()}
        if isinstance(logits, tuple):  # an output layer may return (logits, {name: extra}) (e.g. lm.idea.IdeaOutput)
            logits, more = logits
            extras.update(more)
        return LMOutput(logits=logits, hidden=hidden, extras=extras)


__all__ = [
    "Block", "CausalLM", "CausalSelfAttention", "KVCache", "LMConfig", "LMOutput", "LayerCache", "MLP",
    "apply_rotary", "attention_mask", "rotary_tables", "sinusoidal_table",
]
