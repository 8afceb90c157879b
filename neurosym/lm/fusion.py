"""Semantic fusion: per-token fuzzy features fused into the token embeddings.

With ``e`` (B, L, D) the token embeddings and ``s`` (B, L, F) the causal feature
memberships of a :class:`~neurosym.compile.lexicon.FeatureBank`:

    u  = W_s s                      (no bias: a token without features keeps h0 = e)
    g  = sigmoid(W_g [e; s] + b_g)  (per dimension, in (0, 1))
    h0 = e + u + g * u              (= e + (1 + g) * u)

:class:`GatedFusion` computes ``h0`` and plugs into :class:`~neurosym.lm.model.CausalLM`
as its ``adapter`` (positions are added after it). With a control channel of size C,
a sentence-level vector ``c`` (B, C) is broadcast over the positions and appended to
the features, ``s' = [s; c]`` (B, L, F + C), and ``s'`` replaces ``s`` in both
formulas. In training ``c`` is the gold control :func:`control_from_features` reads off
the sentence itself; at generation time the user sets it (desired polarity, strength,
punctuation). The control is a conditioning input: the model stays causal in ``ids``
and ``features`` for a fixed ``c``. With ``control_dropout = p`` the control of each
row is zeroed with probability p in training mode (the whole row of ``c``, drawn
independently per row), so the same model also learns to run unconditioned, which is
how it is evaluated (``c = 0``).

:class:`LexicalOutput` is an ``output`` plug-in: with ``f`` (V, F') the context-free
columns of the bank's static table (:meth:`FeatureBank.context_free_columns`) and
``E`` (V, D) the tied embedding, ``logit(v) = h . (E[v] + W_o f(v))``, so a word never seen in training
still gets probability from its lexicon description.

:class:`AuxHead` predicts the features back from the final hidden states, as a
``heads`` entry. :func:`build_fusion_lm` wires both; :func:`make_batch` lays out a
batch of sentences sampled from an FSG the way the model, the losses and
:func:`neurosym.lm.metrics.evaluate` expect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from neurosym.compile.lexicon import FeatureBank
from neurosym.errors import ConfigError, NeurosymError
from neurosym.lm.model import CausalLM, LMConfig


@dataclass(frozen=True)
class ControlColumns:
    """Which feature columns make up a sentence-level control: the maximum over the
    sentence of every column starting with one of ``max_prefixes``, then the value of
    each ``final`` column at the sentence's last position. A recipe chooses them
    (the semantic-fusion recipe's are ``experiments.semantic_fusion.CONTROL``)."""

    max_prefixes: tuple[str, ...]
    final: tuple[str, ...]


def _positive(name: str, value: int, owner: str, allow_zero: bool = False) -> None:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = "a non-negative" if allow_zero else "a positive"
        raise ConfigError(f"{owner}.{name} must be {kind} integer, got {value!r}")


class GatedFusion(nn.Module):
    """``h0 = e + u + g * u`` with ``u = W_s s'``, ``g = sigmoid(W_g [e; s'])``, ``s' = [s; c]``.

    Call: ``fusion(e (B, L, D), features=(B, L, F), control=(B, C)) -> (B, L, D)``.
    ``features`` is required; ``control`` is required when ``n_control > 0`` and ignored
    when ``n_control == 0`` (like any other keyword input: an input without a channel is
    ignored, so one batch format serves every variant). In training mode each row's
    control is zeroed with probability ``control_dropout`` (no random draw when it is 0
    or there is no control channel).
    """

    def __init__(self, n_features: int, d_model: int, n_control: int = 0, control_dropout: float = 0.0):
        super().__init__()
        _positive("n_features", n_features, "GatedFusion")
        _positive("d_model", d_model, "GatedFusion")
        _positive("n_control", n_control, "GatedFusion", allow_zero=True)
        if isinstance(control_dropout, bool) or not isinstance(control_dropout, (int, float)) or not 0.0 <= control_dropout < 1.0:
            raise ConfigError(f"GatedFusion.control_dropout must be a number in [0, 1), got {control_dropout!r}")
        self.n_features, self.d_model, self.n_control = n_features, d_model, n_control
        self.control_dropout = float(control_dropout)
        S = n_features + n_control
        self.W_s = nn.Linear(S, d_model, bias=False)
        self.W_g = nn.Linear(d_model + S, d_model)

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, d_model={self.d_model}, n_control={self.n_control}, control_dropout={self.control_dropout}"

    def drop_control(self, control: Tensor) -> Tensor:
        """control (B, C) with whole rows zeroed, each with probability ``control_dropout``,
        in training mode; unchanged in eval mode."""
        if not self.training or self.control_dropout == 0.0:
            return control
        keep = torch.rand(control.shape[0], 1, device=control.device) >= self.control_dropout  # (B, 1)
        return control * keep.to(control.dtype)

    def signal(self, e: Tensor, features: Tensor | None, control: Tensor | None = None) -> Tensor:
        """s' = [s; c] (B, L, F + C), checked against e (B, L, D); ``c`` after control dropout."""
        B, L, _ = e.shape
        if features is None:
            raise NeurosymError(f"GatedFusion needs features= of shape (B, L, {self.n_features}); none were given")
        if tuple(features.shape) != (B, L, self.n_features):
            raise NeurosymError(f"GatedFusion: features must be {(B, L, self.n_features)}, got {tuple(features.shape)}")
        s = features.to(e.dtype)
        if self.n_control:
            if control is None:
                raise NeurosymError(f"GatedFusion has a control channel (n_control={self.n_control}); pass control= of shape (B, {self.n_control})")
            if tuple(control.shape) != (B, self.n_control):
                raise NeurosymError(f"GatedFusion: control must be {(B, self.n_control)}, got {tuple(control.shape)}")
            c = self.drop_control(control.to(e.dtype))[:, None, :].expand(B, L, self.n_control)
            s = torch.cat([s, c], dim=-1)
        return s

    def forward(self, e: Tensor, features: Tensor | None = None, control: Tensor | None = None, **unused) -> Tensor:
        s = self.signal(e, features, control)  # (B, L, F + C)
        u = self.W_s(s)  # (B, L, D)
        g = torch.sigmoid(self.W_g(torch.cat([e, s], dim=-1)))  # (B, L, D)
        return e + u + g * u


class LexicalOutput(nn.Module):
    """The output layer ``logit(v) = h . (E[v] + W_o f(v))``: an ``output`` plug-in of
    :class:`~neurosym.lm.model.CausalLM`.

    ``descriptions`` f (V, F') are fixed (a buffer, saved with the model): each word's
    static lexicon features, e.g. ``bank.table[:, cols]`` with ``cols`` the bank's
    :meth:`FeatureBank.context_free_columns`. ``W_o`` (F', D) is learned and starts at
    zero, so a new model's logits equal the tied model's ``h . E[v]``.

    Call: ``output(hidden (B, L, D), weight (V, D)) -> logits (B, L, V)``; ``weight`` is
    the tied embedding matrix E.
    """

    def __init__(self, descriptions: Tensor, d_model: int):
        super().__init__()
        _positive("d_model", d_model, "LexicalOutput")
        if descriptions.dim() != 2 or descriptions.shape[1] == 0:
            raise NeurosymError(f"LexicalOutput needs descriptions of shape (V, F') with F' >= 1, got {tuple(descriptions.shape)}")
        self.register_buffer("descriptions", descriptions.detach().float().clone())
        self.W_o = nn.Parameter(torch.zeros(descriptions.shape[1], d_model))

    def extra_repr(self) -> str:
        V, F = self.descriptions.shape
        return f"vocab={V}, n_features={F}, d_model={self.W_o.shape[1]}"

    def forward(self, hidden: Tensor, weight: Tensor) -> Tensor:
        if weight.shape[0] != self.descriptions.shape[0]:
            raise NeurosymError(f"LexicalOutput describes {self.descriptions.shape[0]} words, but the embedding has {weight.shape[0]} rows")
        out_emb = weight + self.descriptions.to(weight.dtype) @ self.W_o.to(weight.dtype)  # (V, D): E[v] + W_o f(v)
        return hidden @ out_emb.T  # (B, L, V)


class AuxHead(nn.Module):
    """Predicts feature memberships from hidden states: ``sigmoid(MLP(H))``, (B, L, D) -> (B, L, F)."""

    def __init__(self, d_model: int, n_features: int, hidden: int = 128):
        super().__init__()
        _positive("d_model", d_model, "AuxHead")
        _positive("n_features", n_features, "AuxHead")
        _positive("hidden", hidden, "AuxHead")
        self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, n_features))

    def forward(self, hidden: Tensor) -> Tensor:
        return torch.sigmoid(self.mlp(hidden))


# ---------------------------------------------------------------------- control
def control_names(names: Sequence[str], columns: ControlColumns) -> list[str]:
    """The C columns :func:`control_from_features` produces, in order: ``max:<col>`` for
    every feature column starting with one of ``columns.max_prefixes`` (in the bank's
    order), then ``final:<col>`` for every column of ``columns.final``."""
    names = list(names)
    max_prefixes, final = columns.max_prefixes, columns.final
    missing = [f for f in final if f not in names]
    if missing:
        raise NeurosymError(f"control needs feature column(s) {', '.join(missing)}; the bank has {', '.join(names)}")
    return [f"max:{n}" for n in names if n.startswith(tuple(max_prefixes))] + [f"final:{n}" for n in final]


def control_from_features(
    features: Tensor,
    names: Sequence[str],
    columns: ControlColumns,
    lengths: Tensor | Sequence[int] | None = None,
) -> Tensor:
    """The gold sentence-level control (B, C) of features (B, L, F) with column ``names``.

    With ``valid(b, t) = t < lengths[b]`` (all positions when ``lengths`` is None):

    * ``max:<col>`` = max over valid t of ``features[b, t, col]``, for the columns whose
      name starts with ``columns.max_prefixes`` (in the recipe ``pos_*``, ``neg_*``,
      ``str_*``: how positive, negative and intense the strongest adjective is);
    * ``final:<col>`` = ``features[b, lengths[b] - 1, col]``, for ``columns.final``
      (in the recipe ``is_eos``: the sentence ends in ``. ! ?``; ``is_question``: in ``?``).

    Empty rows (length 0) give 0. With :func:`make_batch`'s layout (inputs
    ``<bos> w1 .. wn``, ``lengths = n + 1``) the final position holds the sentence's
    last word, its punctuation. Column order: :func:`control_names`.
    """
    if features.dim() != 3 or features.shape[-1] != len(names):
        raise NeurosymError(f"control_from_features: features must be (B, L, {len(names)}) for {len(names)} names, got {tuple(features.shape)}")
    B, L, _ = features.shape
    names = list(names)
    control_names(names, columns)  # checks the final columns exist
    max_prefixes, final = columns.max_prefixes, columns.final
    if lengths is None:
        lengths = torch.full((B,), L, dtype=torch.long, device=features.device)
    lengths = torch.as_tensor(lengths, dtype=torch.long, device=features.device)
    valid = torch.arange(L, device=features.device)[None, :] < lengths[:, None]  # (B, L)
    max_cols = [i for i, n in enumerate(names) if n.startswith(tuple(max_prefixes))]
    final_cols = [names.index(n) for n in final]
    masked = torch.where(valid[..., None], features[..., max_cols], torch.zeros((), dtype=features.dtype, device=features.device))
    peak = masked.amax(dim=1) if L else masked.new_zeros(B, len(max_cols))  # (B, C_max)
    last = (lengths - 1).clamp(min=0)
    at_end = features[torch.arange(B, device=features.device), last][:, final_cols]  # (B, C_final)
    at_end = torch.where((lengths > 0)[:, None], at_end, torch.zeros_like(at_end))
    return torch.cat([peak, at_end], dim=-1)


# ---------------------------------------------------------------------- static descriptions
def lexical_descriptions(bank: FeatureBank, columns: Sequence[str] | None = None) -> Tensor:
    """f (V, F'): the static table of ``bank`` restricted to ``columns`` (default
    :meth:`FeatureBank.context_free_columns`), one row per vocabulary token."""
    columns = bank.context_free_columns() if columns is None else list(columns)
    return bank.table[:, [bank.column(c) for c in columns]]


# ---------------------------------------------------------------------- building
def build_fusion_lm(
    config: LMConfig, n_features: int, n_control: int = 0, aux_hidden: int | None = 128, control_dropout: float = 0.0,
    descriptions: Tensor | None = None, output: nn.Module | None = None,
) -> CausalLM:
    """A :class:`CausalLM` with a :class:`GatedFusion` adapter (``n_control``,
    ``control_dropout``), unless ``aux_hidden`` is None an :class:`AuxHead` under
    ``heads["aux"]``, and with ``descriptions`` (V, F') a :class:`LexicalOutput`, else
    ``output`` (another output plug-in) if given. The modules are made in this order
    (aux head, output layer, adapter, the LM), which fixes a seed's initial weights."""
    if descriptions is not None and output is not None:
        raise NeurosymError("build_fusion_lm: descriptions= (a LexicalOutput) and output= are both output layers; give one")
    heads = {} if aux_hidden is None else {"aux": AuxHead(config.d_model, n_features, aux_hidden)}
    output = output if descriptions is None else LexicalOutput(descriptions, config.d_model)
    return CausalLM(config, adapter=GatedFusion(n_features, config.d_model, n_control, control_dropout), heads=heads, output=output)


def _special(vocab, token: str) -> int:
    if token not in vocab.tokens:
        raise NeurosymError(f"the vocabulary has no {token} token")
    return vocab.tokens.index(token)


def make_batch(sentences: Sequence[Sequence[int]], automaton, bank=None, control: ControlColumns | None = None) -> dict[str, Tensor]:
    """Sentences (token ids, no specials) -> a padded LM batch.

    Row b is ``full = <bos> w1 .. wn <eos>`` padded with ``<pad>``; the model reads
    ``ids = <bos> w1 .. wn <pad>..`` and predicts ``targets = w1 .. wn <eos> <pad>..``
    (n + 1 predictions, the last one ``<eos>``; ``<pad>`` targets are ignored by losses
    and metrics). Keys:

    * ``ids``, ``targets``: (B, L) long, ``L = max n + 1``; ``lengths``: (B,) = n + 1, the
      number of real positions of the row (in ``ids`` and in ``targets``);
    * with a ``bank``: ``features`` (B, L, F), the bank's causal features of the inputs,
      with the automaton's roles (shifted one right for ``<bos>``), and ``aux_targets``
      (B, L, F), the features of the *target* tokens: ``f = featurize(full)`` gives
      ``features = f[:-1]`` (``featurize`` is causal) and ``aux_targets = f[1:]``; both are
      0 at padding;
    * with ``control`` (a :class:`ControlColumns`) too: ``control`` (B, C) =
      :func:`control_from_features`.
    """
    vocab = automaton.vocab
    pad, bos, eos = _special(vocab, "<pad>"), _special(vocab, "<bos>"), _special(vocab, "<eos>")
    B = len(sentences)
    n = torch.tensor([len(s) for s in sentences], dtype=torch.long)
    width = int(n.max()) + 2 if B else 2
    full = torch.full((B, width), pad, dtype=torch.long)
    for b, s in enumerate(sentences):
        full[b, : len(s) + 2] = torch.tensor([bos, *s, eos], dtype=torch.long)
    real = torch.arange(width - 1)[None, :] < (n + 1)[:, None]  # (B, L): the real inputs and targets
    ids = torch.where(real, full[:, :-1], torch.full_like(full[:, :-1], pad))  # <bos> w1 .. wn, no <eos>
    batch = {"ids": ids, "targets": full[:, 1:], "lengths": n + 1}
    if bank is not None:
        words = full[:, 1:]  # what the automaton reads: w1 .. wn <eos> <pad>...; rejected from <eos> on
        roles = {r: torch.cat([torch.zeros(B, 1, dtype=torch.bool), m], dim=1) for r, m in automaton.roles(words).items()}
        feats = bank.featurize(full, roles)  # (B, L + 1, F)
        batch["features"] = feats[:, :-1] * real[..., None]
        batch["aux_targets"] = feats[:, 1:] * real[..., None]
        if control is not None:
            batch["control"] = control_from_features(batch["features"], bank.names, control, batch["lengths"])
    elif control is not None:
        raise NeurosymError("make_batch(control=...) needs a feature bank")
    return batch


__all__ = [
    "AuxHead", "ControlColumns", "GatedFusion", "LexicalOutput", "build_fusion_lm", "control_from_features",
    "control_names", "lexical_descriptions", "make_batch",
]
