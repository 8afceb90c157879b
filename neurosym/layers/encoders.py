"""Sequence encoders: token ids (B, L) -> one vector per sequence (B, D) or per token (B, L, D).

Every encoder takes ``ids`` (B, L) and optional ``lengths`` (B,). Without lengths, the
positions holding ``padding_idx`` (default 0, ``<pad>`` in neurosym vocabularies) are
padding; pass ``padding_idx=None`` to treat every position as a token. Sequences are
right-padded: padding never changes a pooled output or the per-token outputs of
real tokens.

``forward`` returns the pooled (B, D) vector, or with ``pooled=False`` the per-token
states (B, L, D); :meth:`Encoder.tokens` always gives the per-token states and their
(B, L) mask and :meth:`Encoder.pool` pools them.

=============  ==========================================================  ============
name           encoder                                                     pooled by
=============  ==========================================================  ============
``mean``       :class:`MeanPool`: embeddings                               masked mean
``conv``       :class:`ConvEncoder`: 1-D convolution (kernel, stride)      masked max
``rnn``        :class:`RNNEncoder`: tanh RNN (packed)                      last state
``lstm``       :class:`LSTMEncoder`: LSTM (packed; bidirectional option)   last state
``attention``  :class:`AttentionEncoder`: multi-head self-attention        attention
``stack``      :class:`StackEncoder`: a stack RNN (:mod:`neurosym.layers.pda`) last state
``regex``      :class:`RegexBankEncoder`: a ``RegexLayer``'s match scores  (sequence)
``pcfg``       :class:`PCFGEncoder`: PCFG inside-outside features          (sequence)
=============  ==========================================================  ============

:func:`build_encoder` builds one by name from :data:`ENCODERS`.
"""

from __future__ import annotations

import importlib
import inspect
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from neurosym.errors import NeurosymError
from neurosym.layers.pda import NondeterministicStackRNN, StackRNN
from neurosym.layers.wfsa import RegexLayer  # lazily: the encoders work without it
from neurosym.semiring import LOG_ZERO

POOLS = ("mean", "max", "last", "first")


def padding_mask(ids: torch.Tensor, lengths: torch.Tensor | None = None, padding_idx: int | None = 0) -> torch.Tensor:
    """(B, L) bool, True on real tokens: ``position < lengths`` if lengths are given,
    else ``ids != padding_idx`` (all True when ``padding_idx`` is None)."""
    if ids.dim() != 2:
        raise NeurosymError(f"ids must be (B, L), got {tuple(ids.shape)}")
    if lengths is not None:
        lengths = torch.as_tensor(lengths, device=ids.device).long()
        if lengths.shape != ids.shape[:1] or bool((lengths < 0).any()) or bool((lengths > ids.shape[1]).any()):
            raise NeurosymError(f"lengths must be (B,) = ({ids.shape[0]},) values in [0, {ids.shape[1]}]")
        return torch.arange(ids.shape[1], device=ids.device) < lengths.unsqueeze(1)
    if padding_idx is None:
        return torch.ones_like(ids, dtype=torch.bool)
    return ids != padding_idx


def masked_pool(states: torch.Tensor, mask: torch.Tensor, mode: str = "mean") -> torch.Tensor:
    """Pool states (B, L, D) over the True positions of mask (B, L) -> (B, D).

    ``mean``, ``max``, ``last`` (the last True position) or ``first``; an all-False row
    pools to zeros."""
    m = mask.unsqueeze(-1).to(states.dtype)
    any_ = mask.any(1, keepdim=True).to(states.dtype)
    if mode == "mean":
        return (states * m).sum(1) / m.sum(1).clamp_min(1.0)
    if mode == "max":
        return states.masked_fill(~mask.unsqueeze(-1), LOG_ZERO).amax(1).nan_to_num(0.0, 0.0, 0.0) * any_
    if mode in ("last", "first"):
        if mode == "last":
            idx = (mask.long().cumsum(1).argmax(1))  # the first position reaching the final count: the last True
        else:
            idx = mask.long().argmax(1)
        return states[torch.arange(states.shape[0], device=states.device), idx] * any_
    raise NeurosymError(f"unknown pooling {mode!r}; known: {', '.join(POOLS)}")


def _check_pool(pool: str, allowed: tuple[str, ...] = POOLS) -> str:
    if pool not in allowed:
        raise NeurosymError(f"unknown pooling {pool!r}; known: {', '.join(allowed)}")
    return pool


class Encoder(nn.Module):
    """Base class: ``forward(ids (B, L), lengths=None)`` -> (B, D), or (B, L, D) with
    ``pooled=False``. Subclasses implement :meth:`tokens` (and may override
    :meth:`pool` or :meth:`pooled_output`).

    Attributes:
        dim: D, the output size.
        padding_idx: the id that marks padding when no lengths are given.
        pooled: whether ``forward`` pools.
        pooling: the pooling mode (see :func:`masked_pool`).
    """

    def __init__(self, dim: int, padding_idx: int | None = 0, pooled: bool = True, pool: str = "mean"):
        super().__init__()
        if dim < 1:
            raise NeurosymError(f"the encoder dimension must be positive, got {dim}")
        self.dim = dim
        self.padding_idx = padding_idx
        self.pooled = pooled
        self.pooling = _check_pool(pool, getattr(self, "POOLS", POOLS))

    def mask(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L) bool, True on real tokens (see :func:`padding_mask`)."""
        return padding_mask(ids, lengths, self.padding_idx)

    def clean(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """ids with every padding position set to ``padding_idx`` (0 if None), so any
        value may sit past a sequence's end when lengths are given."""
        return ids.masked_fill(~mask, self.padding_idx if self.padding_idx is not None else 0)

    def tokens(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token states (B, L', D) (zero at padding) and their mask (B, L');
        L' = L except for strided convolutions."""
        raise NotImplementedError

    def pool(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Pool per-token states (B, L, D) with their mask (B, L) -> (B, D)."""
        return masked_pool(states, mask, self.pooling)

    def pooled_output(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """(B, D): by default the pooled :meth:`tokens`."""
        return self.pool(*self.tokens(ids, lengths))

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """ids (B, L) -> (B, D) pooled, or (B, L, D) per token with ``pooled=False``."""
        return self.pooled_output(ids, lengths) if self.pooled else self.tokens(ids, lengths)[0]


# ---------------------------------------------------------------------- embeddings
class MeanPool(Encoder):
    """Token embeddings (V, D), pooled by a masked mean (bag of embeddings)."""

    def __init__(self, vocab_size: int, dim: int, padding_idx: int | None = 0, pooled: bool = True, pool: str = "mean"):
        super().__init__(dim, padding_idx, pooled, pool)
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=padding_idx)

    def tokens(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        return self.embed(self.clean(ids, mask)) * mask.unsqueeze(-1), mask


class ConvEncoder(Encoder):
    """Embeddings (E) -> 1-D convolution (``filters`` channels, ``kernel_size``, ``stride``)
    -> ReLU -> linear to D (when filters != D), max-pooled over real windows.

    Padding tokens are zeroed before the convolution and the sequence is zero-padded by
    ``(k-1)//2`` on the left and ``k//2`` on the right, so window j covers tokens
    ``j*stride - (k-1)//2 ..`` and sees the same zeros whatever padding follows; the
    output has ``ceil(L / stride)`` positions, window j real when ``j*stride < length``.
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        kernel_size: int = 3,
        stride: int = 1,
        filters: int | None = None,
        embed_dim: int | None = None,
        padding_idx: int | None = 0,
        pooled: bool = True,
        pool: str = "max",
    ):
        super().__init__(dim, padding_idx, pooled, pool)
        if kernel_size < 1 or stride < 1:
            raise NeurosymError(f"kernel_size and stride must be positive, got {kernel_size} and {stride}")
        self.kernel_size, self.stride = kernel_size, stride
        filters = filters or dim
        embed_dim = embed_dim or dim
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        self.conv = nn.Conv1d(embed_dim, filters, kernel_size, stride=stride)
        self.proj = nn.Linear(filters, dim) if filters != dim else nn.Identity()

    def tokens(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        B, L = ids.shape
        k, s = self.kernel_size, self.stride
        x = (self.embed(self.clean(ids, mask)) * mask.unsqueeze(-1)).transpose(1, 2)  # (B, E, L)
        n_out = -(-L // s)  # ceil(L / s)
        right = max(0, (n_out - 1) * s + k - (k - 1) // 2 - L)  # enough for n_out windows
        x = F.pad(x, ((k - 1) // 2, right))
        h = self.proj(torch.relu(self.conv(x)).transpose(1, 2))[:, :n_out]  # (B, L', D)
        out_mask = torch.arange(n_out, device=ids.device) * s < mask.sum(1, keepdim=True)
        return h * out_mask.unsqueeze(-1), out_mask


# ---------------------------------------------------------------------- recurrent
class _RecurrentEncoder(Encoder):
    """A packed ``nn.RNN`` / ``nn.LSTM``; bidirectional states concatenate both
    directions (D/2 each). ``last`` pooling takes the final state of each direction
    (the forward one after the last token, the backward one after the first)."""

    RNN: type[nn.RNNBase] = nn.RNN

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        embed_dim: int | None = None,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
        padding_idx: int | None = 0,
        pooled: bool = True,
        pool: str = "last",
        **rnn_kwargs,
    ):
        super().__init__(dim, padding_idx, pooled, pool)
        if bidirectional and dim % 2:
            raise NeurosymError(f"a bidirectional encoder needs an even dim (D/2 per direction), got {dim}")
        embed_dim = embed_dim or dim
        self.bidirectional = bidirectional
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        hidden = dim // 2 if bidirectional else dim
        self.rnn = self.RNN(embed_dim, hidden, num_layers=num_layers, batch_first=True, bidirectional=bidirectional, dropout=dropout, **rnn_kwargs)

    def _run(self, ids, lengths):
        mask = self.mask(ids, lengths)
        n = mask.sum(1)
        packed = pack_padded_sequence(self.embed(self.clean(ids, mask)), n.clamp_min(1).cpu(), batch_first=True, enforce_sorted=False)
        out, state = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
        h_n = state[0] if isinstance(state, tuple) else state  # (layers * dirs, B, H)
        final = torch.cat([h_n[-2], h_n[-1]], -1) if self.bidirectional else h_n[-1]
        nonempty = (n > 0).unsqueeze(-1).to(states.dtype)
        return states * mask.unsqueeze(-1), mask, final * nonempty

    def tokens(self, ids, lengths=None):
        states, mask, _ = self._run(ids, lengths)
        return states, mask

    def pooled_output(self, ids, lengths=None):
        states, mask, final = self._run(ids, lengths)
        return final if self.pooling == "last" else self.pool(states, mask)

    def pool(self, states, mask):
        if self.pooling == "last" and self.bidirectional:
            half = self.dim // 2
            return torch.cat([masked_pool(states[..., :half], mask, "last"), masked_pool(states[..., half:], mask, "first")], -1)
        return masked_pool(states, mask, self.pooling)


class RNNEncoder(_RecurrentEncoder):
    """Embeddings -> packed tanh RNN (``nn.RNN``) of hidden size D (D/2 per direction)."""

    RNN = nn.RNN


class LSTMEncoder(_RecurrentEncoder):
    """Embeddings -> packed LSTM of hidden size D (D/2 per direction when bidirectional)."""

    RNN = nn.LSTM


# ---------------------------------------------------------------------- attention
def sinusoidal_positions(length: int, dim: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """(length, dim) sine/cosine position encodings (Vaswani et al., 2017)."""
    pos = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return pe.to(dtype)


class AttentionEncoder(Encoder):
    """Embeddings + sinusoidal positions -> ``layers`` Transformer encoder layers
    (multi-head self-attention with padding keys masked, feed-forward, pre-norm) ->
    pooled by a learned-query multi-head attention over the real tokens (``pool=
    "attention"``) or by a masked mean / max / first."""

    POOLS = ("attention", *POOLS)

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        heads: int = 4,
        layers: int = 1,
        ff_dim: int | None = None,
        dropout: float = 0.0,
        padding_idx: int | None = 0,
        pooled: bool = True,
        pool: str = "attention",
    ):
        super().__init__(dim, padding_idx, pooled, pool)
        if dim % heads:
            raise NeurosymError(f"dim ({dim}) must be divisible by the number of heads ({heads})")
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=padding_idx)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, ff_dim or 2 * dim, dropout, batch_first=True, norm_first=True) for _ in range(layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.query = nn.Parameter(torch.randn(1, 1, dim) / math.sqrt(dim))
        self.pool_attention = nn.MultiheadAttention(dim, heads, batch_first=True)

    def tokens(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        B, L = ids.shape
        x = self.embed(self.clean(ids, mask)) * math.sqrt(self.dim) + sinusoidal_positions(L, self.dim, ids.device, self.embed.weight.dtype)
        keys_off = ~mask
        keys_off[:, 0] &= mask.any(1)  # an empty sequence attends to its first slot, not to nothing (NaN)
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=keys_off)
        return self.norm(x) * mask.unsqueeze(-1), mask

    def pool(self, states, mask):
        if self.pooling != "attention":
            return masked_pool(states, mask, self.pooling)
        keys_off = ~mask
        keys_off[:, 0] &= mask.any(1)
        out, _ = self.pool_attention(self.query.expand(states.shape[0], -1, -1), states, states, key_padding_mask=keys_off, need_weights=False)
        return out[:, 0] * mask.any(1, keepdim=True).to(out.dtype)


# ---------------------------------------------------------------------- stacks
class StackEncoder(Encoder):
    """A stack RNN (:class:`~neurosym.layers.pda.StackRNN`, or with
    ``nondeterministic=True`` the :class:`~neurosym.layers.pda.NondeterministicStackRNN`)
    of hidden size ``hidden_size`` (default D), then a linear map to D if they differ;
    pooled by its last state. ``stack_kwargs`` go to the stack RNN (``stack_dim``,
    ``depth``, ``hard``, ``num_states``, ...)."""

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        hidden_size: int | None = None,
        nondeterministic: bool = False,
        padding_idx: int | None = 0,
        pooled: bool = True,
        pool: str = "last",
        **stack_kwargs,
    ):
        super().__init__(dim, padding_idx, pooled, pool)

        cls = NondeterministicStackRNN if nondeterministic else StackRNN
        hidden_size = hidden_size or dim
        self.rnn = cls(vocab_size, hidden_size, padding_idx=padding_idx, **stack_kwargs)
        self.proj = nn.Linear(hidden_size, dim) if hidden_size != dim else nn.Identity()

    def tokens(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        h = self.rnn(self.clean(ids, mask), mask.sum(1))
        return self.proj(h) * mask.unsqueeze(-1), mask


# ---------------------------------------------------------------------- symbolic
class RegexBankEncoder(Encoder):
    """Regex match features: a ``RegexLayer`` (:mod:`neurosym.layers.wfsa`) over K
    automata scores each sequence, and a linear map takes the K features to D.

    ``features="prob"`` uses ``accept_prob`` (sigmoid of the scaled score, in (0, 1)),
    ``"score"`` the raw log scores. The layer's weights train with the rest. Per-token
    states (``pooled=False``) are the features of every prefix (``tokens[:t+1]``): one
    layer call on B·L prefixes, O(B L²) work.

    Args:
        automata: what ``RegexLayer`` takes (an Automaton, a list of them, a RegexBank),
            or a built ``RegexLayer``; its vocabulary must have ``vocab_size`` ids.
        layer_kwargs: more arguments for ``RegexLayer`` (``penalty``, ``rank``, ...).
    """

    FEATURES = ("prob", "score")

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        automata=None,
        features: str = "prob",
        padding_idx: int | None = 0,
        pooled: bool = True,
        **layer_kwargs,
    ):
        super().__init__(dim, padding_idx, pooled, "mean")

        if automata is None:
            raise NeurosymError("the regex encoder needs automata (an Automaton, a list of them, a RegexBank or a RegexLayer)")
        if features not in self.FEATURES:
            raise NeurosymError(f"unknown regex features {features!r}; known: {', '.join(self.FEATURES)}")
        self.layer = automata if isinstance(automata, RegexLayer) else RegexLayer(automata, **layer_kwargs)
        V = len(self.layer.vocab)
        if V != vocab_size:
            raise NeurosymError(f"the automata's vocabulary has {V} ids but the encoder was given vocab_size={vocab_size}")
        self.features = features
        self.proj = nn.Linear(self.layer.num_automata, dim)

    def _scores(self, ids, lengths):
        return self.layer.accept_prob(ids, lengths) if self.features == "prob" else self.layer(ids, lengths)

    def pooled_output(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        n = mask.sum(1)
        return self.proj(self._scores(ids.masked_fill(~mask, 0), n))

    def tokens(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        B, L = ids.shape
        prefixes = ids.masked_fill(~mask, 0).repeat_interleave(L, dim=0)  # (B·L, L): row b·L + t is prefix t of b
        plen = torch.arange(1, L + 1, device=ids.device).repeat(B)
        feats = self._scores(prefixes, plen).view(B, L, -1)
        return self.proj(feats) * mask.unsqueeze(-1), mask

    def pool(self, states, mask):
        raise NeurosymError("regex features of a whole sequence are not a pooling of its prefixes'; call the encoder with pooled=True")


class PCFGEncoder(Encoder):
    """PCFG features of each sentence under fixed ``RuleTensors`` (by the inside
    algorithm, :mod:`neurosym.layers.inside`), mapped to D by a linear layer.

    Pooled features, per sentence (``features`` picks any of them, in this order):

    * ``"logz"``: ``log P(sentence) / length`` (every length counts: :func:`sentence_log_prob`),
      floored at ``floor``, and a 0/1 flag "the sentence is in the grammar" (2 features);
    * ``"roots"``: the posterior of the root nonterminal (N);
    * ``"rules"``: expected counts of each binary rule the grammar has, per binary node
      (divided by length - 1) (R).

    Sentences with no tree (one token, or outside the grammar) get zero posteriors.
    Per-token states (``pooled=False``) are the posterior preterminal of each token
    (T), mapped to D. Only the linear layers train: the grammar is a fixed buffer.
    """

    FEATURES = ("logz", "roots", "rules")

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        rules=None,
        features: tuple[str, ...] = FEATURES,
        floor: float = -30.0,
        padding_idx: int | None = 0,
        pooled: bool = True,
    ):
        super().__init__(dim, padding_idx, pooled, "mean")
        _inside = importlib.import_module("neurosym.layers.inside")  # the module: the package re-exports the function `inside`

        self._inside = _inside
        if rules is None or not hasattr(rules, "binary"):
            raise NeurosymError("the pcfg encoder needs RuleTensors (e.g. neurosym.load('grammar.pcfg'))")
        if len(rules.vocab) != vocab_size:
            raise NeurosymError(f"the grammar's vocabulary has {len(rules.vocab)} ids but the encoder was given vocab_size={vocab_size}")
        unknown = [f for f in features if f not in self.FEATURES]
        if unknown or not features:
            raise NeurosymError(f"unknown or no pcfg features {unknown}; known: {', '.join(self.FEATURES)}")
        self.rules = rules
        self.features = tuple(f for f in self.FEATURES if f in features)
        self.floor = float(floor)
        self.register_buffer("rule_index", torch.nonzero(rules.binary > LOG_ZERO), persistent=False)  # (R, 3)
        sizes = {"logz": 2, "roots": rules.N, "rules": len(self.rule_index)}
        self.num_features = sum(sizes[f] for f in self.features)
        self.proj = nn.Linear(self.num_features, dim)
        self.token_proj = nn.Linear(rules.T, dim)

    def _potentials(self, ids, mask):
        """ids trimmed to the longest sentence (pads set to 0) and their potentials."""
        longest = int(mask.sum(1).max()) if mask.numel() else 0
        ids = ids[:, :longest].masked_fill(~mask[:, :longest], 0).to(self.rules.binary.device)
        return ids, *self.rules.potentials(ids)

    def posteriors(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Inside-outside by autograd on detached potentials: log Z (B,), and the
        posteriors of the preterminals (B, L', T), rules (B, N, N+T, N+T) and root (B, N),
        with L' the longest sentence; zeros for sentences without a tree."""
        mask = self.mask(ids, lengths)
        n = mask.sum(1)
        ids, terms, binary, roots = self._potentials(ids, mask)
        with torch.enable_grad():
            parts = [x.detach().contiguous().requires_grad_() for x in (terms, binary, roots)]  # rules: one copy per sentence
            log_z = self._inside.inside(*parts, n.to(terms.device))
            finite = torch.isfinite(log_z)
            if bool(finite.any()):
                grads = torch.autograd.grad(torch.where(finite, log_z, torch.zeros_like(log_z)).sum(), parts)
            else:
                grads = [torch.zeros_like(x) for x in parts]
        g_terms, g_rules, g_roots = (torch.where(finite.view(-1, *[1] * (g.dim() - 1)), g, 0.0).nan_to_num(0.0) for g in grads)
        return log_z.detach(), g_terms, g_rules, g_roots

    def sentence_features(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The (B, F) feature matrix before the linear layer."""
        mask = self.mask(ids, lengths)
        n = mask.sum(1).to(self.rules.binary.device)
        parts = []
        if "logz" in self.features:
            trimmed = self._potentials(ids, mask)[0]
            with torch.no_grad():
                lp = self._inside.sentence_log_prob(self.rules, trimmed, n)
            ok = torch.isfinite(lp)
            per_token = torch.where(ok, lp / n.clamp_min(1), torch.full_like(lp, self.floor)).clamp_min(self.floor)
            parts.append(torch.stack([per_token, ok.to(lp.dtype)], -1))
        if {"roots", "rules"} & set(self.features):
            _, _, g_rules, g_roots = self.posteriors(ids, mask.sum(1))
            if "roots" in self.features:
                parts.append(g_roots)
            if "rules" in self.features:
                a, b, c = self.rule_index.unbind(-1)
                parts.append(g_rules[:, a, b, c] / (n - 1).clamp_min(1).unsqueeze(-1).to(g_rules.dtype))
        return torch.cat(parts, -1).to(self.proj.weight.device, self.proj.weight.dtype)

    def pooled_output(self, ids, lengths=None):
        return self.proj(self.sentence_features(ids, lengths))

    def tokens(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        g_terms = self.posteriors(ids, mask.sum(1))[1]
        post = F.pad(g_terms, (0, 0, 0, ids.shape[1] - g_terms.shape[1]))  # back to (B, L, T)
        return self.token_proj(post.to(self.token_proj.weight.device, self.token_proj.weight.dtype)) * mask.unsqueeze(-1), mask

    def pool(self, states, mask):
        raise NeurosymError("pcfg features of a whole sentence are not a pooling of its tokens'; call the encoder with pooled=True")


# ---------------------------------------------------------------------- registry
ENCODERS: dict[str, type[Encoder]] = {
    "mean": MeanPool,
    "conv": ConvEncoder,
    "rnn": RNNEncoder,
    "lstm": LSTMEncoder,
    "attention": AttentionEncoder,
    "stack": StackEncoder,
    "regex": RegexBankEncoder,
    "pcfg": PCFGEncoder,
}


def build_encoder(name: str, vocab_size: int, dim: int, **kwargs) -> Encoder:
    """The encoder registered as ``name`` in :data:`ENCODERS`, built with
    ``(vocab_size, dim, **kwargs)``; an unknown name lists the known ones."""
    cls = ENCODERS.get(name)
    if cls is None:
        raise NeurosymError(f"unknown encoder {name!r}; known: {', '.join(sorted(ENCODERS))}")
    try:
        inspect.signature(cls).bind(vocab_size, dim, **kwargs)
    except TypeError as err:  # e.g. a misspelt keyword: say which encoder
        raise NeurosymError(f"encoder {name!r} ({cls.__name__}): {err}") from None
    return cls(vocab_size, dim, **kwargs)


__all__ = [
    "ENCODERS",
    "AttentionEncoder",
    "ConvEncoder",
    "Encoder",
    "LSTMEncoder",
    "MeanPool",
    "PCFGEncoder",
    "RNNEncoder",
    "RegexBankEncoder",
    "StackEncoder",
    "build_encoder",
    "masked_pool",
    "padding_mask",
]
