"""The structured suite's models: one head per task family, and the encoders the suite
adds to :mod:`neurosym.layers.encoders` (the soft and prefix PCFG priors, per-token regex
features, memoised fixed features).

Heads (:func:`build_head`):

* ``classification`` and ``next-token``: a linear layer on the pooled vector,
  (B, L) ids -> (B, C) logits;
* ``tagging``: a linear layer on every token's state, (B, L) -> (B, L, C);
* ``seq2seq`` (:class:`Seq2SeqModel`): a GRU decoder with bilinear attention over the
  encoder's token states (over the pooled vector for encoders that give only one),
  teacher-forced in training, greedy at test.

Every model has ``loss(ids, lengths, labels) -> (sum of token cross-entropies, count)``
and ``predict(ids, lengths, max_len) -> predictions`` in the labels' layout, so the
suite's training and evaluation loops are written once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from neurosym.compile.pcfg import RuleTensors
from neurosym.errors import NeurosymError
from neurosym.layers.encoders import Encoder, PCFGEncoder
from neurosym.layers.inside import sentence_log_prob
from neurosym.layers.prefix import PrefixGrammar, prefix_state
from neurosym.layers.wfsa import RegexLayer
from neurosym.semiring import LOG_ZERO
from neurosym.tasks.base import BOS_ID as BOS
from neurosym.tasks.base import EOS_ID as EOS
from neurosym.tasks.base import IGNORE
from neurosym.vocab import Vocab

DECODE_MARGIN = 5
"""Greedy decoding runs to the longest test target plus this many tokens."""


# ---------------------------------------------------------------------- heads
def summed_ce(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Cross-entropy of logits (..., C) against labels (...) summed over the positions
    that are not ``IGNORE``, and how many there are."""
    flat = labels.reshape(-1)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), flat, ignore_index=IGNORE, reduction="sum"), int((flat != IGNORE).sum())


class SuiteModel(nn.Module):
    """An encoder and a linear head: (B, L) ids -> (B, C) logits (``classification``,
    ``next-token``) or (B, L, C) (``tagging``)."""

    def __init__(self, encoder: Encoder, family: str, num_classes: int):
        super().__init__()
        if family not in ("classification", "next-token", "tagging"):
            raise NeurosymError(f"SuiteModel takes the classification, next-token or tagging family, got {family!r}")
        self.encoder, self.family = encoder, family
        self.head = nn.Linear(encoder.dim, num_classes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if self.family == "tagging":
            states, _ = self.encoder.tokens(ids, lengths)
            return self.head(states)
        return self.head(self.encoder(ids, lengths))

    def loss(self, ids: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Summed cross-entropy over the labelled positions and their count."""
        return summed_ce(self(ids, lengths), labels)

    def predict(self, ids: torch.Tensor, lengths: torch.Tensor, max_len: int = 0) -> torch.Tensor:
        """Argmax labels, (B,) or (B, L)."""
        return self(ids, lengths).argmax(-1)


class Seq2SeqModel(nn.Module):
    """Encoder -> GRU decoder (dim D) with bilinear attention over the encoder's token
    states (Luong-style: the GRU state h_t attends, ``tanh(W [h_t; context])`` reads out).

    Encoders that give one vector per sequence (``pooled_only``) are attended as a
    single memory slot. The decoder starts from ``tanh(W_0 mean(states))``.
    Targets (B, T) are ``target ids, EOS, IGNORE...``; the decoder's inputs are BOS and
    the targets shifted right.
    """

    family = "seq2seq"

    def __init__(self, encoder: Encoder, num_targets: int, pooled_only: bool = False):
        super().__init__()
        D = encoder.dim
        self.encoder, self.pooled_only = encoder, pooled_only
        self.embed = nn.Embedding(num_targets, D)
        self.init = nn.Linear(D, D)
        self.gru = nn.GRU(D, D, batch_first=True)
        self.attn = nn.Linear(D, D, bias=False)
        self.mix = nn.Linear(2 * D, D)
        self.out = nn.Linear(D, num_targets)

    def memory(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Memory (B, S, D), its mask (B, S) and the decoder's first state (1, B, D)."""
        if self.pooled_only:
            v = self.encoder(ids, lengths)
            mem, mask = v[:, None], torch.ones(v.shape[0], 1, dtype=torch.bool, device=v.device)
        else:
            mem, mask = self.encoder.tokens(ids, lengths)
            v = (mem * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp_min(1)
        return mem, mask, torch.tanh(self.init(v))[None]

    def readout(self, h: torch.Tensor, mem: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Decoder states (B, T, D) -> logits (B, T, C), attending over the memory."""
        scores = self.attn(h) @ mem.transpose(1, 2)  # (B, T, S)
        scores = scores.masked_fill(~mask[:, None, :], LOG_ZERO)
        context = scores.softmax(-1).nan_to_num(0.0) @ mem
        return self.out(torch.tanh(self.mix(torch.cat([h, context], -1))))

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T, C) for targets (B, T)."""
        mem, mask, h0 = self.memory(ids, lengths)
        prev = torch.cat([torch.full_like(targets[:, :1], BOS), targets[:, :-1]], 1)
        prev = prev.masked_fill(prev == IGNORE, EOS)  # after EOS: ignored positions, any input
        h, _ = self.gru(self.embed(prev), h0)
        return self.readout(h, mem, mask)

    def loss(self, ids: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Summed teacher-forced cross-entropy over the target tokens and their count."""
        return summed_ce(self(ids, lengths, labels), labels)

    def predict(self, ids: torch.Tensor, lengths: torch.Tensor, max_len: int = 0) -> torch.Tensor:
        """Greedy decoding of up to ``max_len`` tokens: (B, max_len) in the targets' layout
        (tokens, EOS, then IGNORE). A loop over output steps (each needs the last token)."""
        if max_len < 1:
            raise NeurosymError(f"seq2seq decoding needs max_len >= 1, got {max_len}")
        mem, mask, h = self.memory(ids, lengths)
        y = torch.full((ids.shape[0],), BOS, dtype=torch.long, device=ids.device)
        done = torch.zeros_like(y, dtype=torch.bool)
        out = []
        for _ in range(max_len):
            o, h = self.gru(self.embed(y)[:, None], h)
            y = self.readout(o, mem, mask)[:, 0].argmax(-1)
            out.append(y)
            done |= y == EOS
            if bool(done.all()):
                break
        pred = torch.stack(out, 1)
        eos = pred == EOS
        after = (eos.cumsum(1) - eos.long()) > 0  # strictly after the first EOS
        return pred.masked_fill(after, IGNORE)


def target_width(labels: torch.Tensor) -> int:
    """The longest target (EOS included) of seq2seq labels (N, T)."""
    return int((labels != IGNORE).sum(1).max()) if labels.numel() else 0


def pad_to(x: torch.Tensor, width: int) -> torch.Tensor:
    """(N, T) -> (N, width), cut or padded with IGNORE."""
    if x.shape[1] >= width:
        return x[:, :width]
    return F.pad(x, (0, width - x.shape[1]), value=IGNORE)


# ---------------------------------------------------------------------- fixed features, memoised
class FeatureMemo:
    """Per-sentence memo of a *fixed* feature function ``fn(ids, lengths) -> (B, F)``:
    each row is keyed by its ids up to its length, computed once (the missing rows of a
    batch in one call) and looked up afterwards. ``enabled = False`` bypasses it (to
    count the function's FLOPs). :meth:`warm` fills it for a whole split in
    length-sorted batches (little padding)."""

    def __init__(self, fn):
        self.fn = fn
        self.store: dict[bytes, torch.Tensor] = {}
        self.enabled = True

    @staticmethod
    def keys(ids: torch.Tensor, lengths: torch.Tensor) -> list[bytes]:
        rows = ids.detach().cpu().numpy()
        return [rows[i, :n].tobytes() for i, n in enumerate(lengths.tolist())]

    def __call__(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return self.fn(ids, lengths)
        keys = self.keys(ids, lengths)
        missing = list(dict.fromkeys(k for k in keys if k not in self.store))
        if missing:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            rows = torch.tensor([first[k] for k in missing], device=ids.device)
            feats = self.fn(ids[rows], lengths[rows]).detach()
            self.store.update(zip(missing, feats))
        return torch.stack([self.store[k] for k in keys])

    def warm(self, ids: torch.Tensor, lengths: torch.Tensor, batch_size: int = 16) -> None:
        """Compute every row of (N, L) ids, shortest first (small batches: most hold one
        length, which the prefix chart runs in lockstep)."""
        order = torch.argsort(lengths, stable=True)
        for s in range(0, len(order), batch_size):
            part = order[s : s + batch_size]
            n = lengths[part]
            self(ids[part, : max(1, int(n.max()))], n)


class MemoPCFGEncoder(PCFGEncoder):
    """:class:`PCFGEncoder` with its (fixed) sentence features memoised per sentence
    (:class:`FeatureMemo`): the hard and removed PCFG priors, whose grammar does not train."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.memo = FeatureMemo(self._fresh_features)

    def _fresh_features(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return super().sentence_features(ids, lengths)

    def sentence_features(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        return self.memo(ids, self.mask(ids, lengths).sum(1))


def random_rules(rules: RuleTensors, gen: torch.Generator) -> RuleTensors:
    """Rule tensors of the same shape and vocabulary with random (normalised) weights:
    the PCFG encoder with its prior removed."""
    N, T = rules.N, rules.T
    binary = torch.randn(N, N + T, N + T, generator=gen).flatten(1).log_softmax(-1).view(N, N + T, N + T)
    emit = torch.randn(T, len(rules.vocab), generator=gen).log_softmax(-1)
    start = torch.randn(N + T + 1, generator=gen).log_softmax(-1)
    return RuleTensors(start[:N], binary + math.log(0.999), emit, start[N : N + T], start[-1], rules.nonterminals, rules.preterminals, rules.vocab, rules.start, None)


class SoftPCFGEncoder(PCFGEncoder):
    """The PCFG encoder with trainable rule and emission weights (the *soft* prior).

    Parameters ``binary_logits`` (N, N+T, N+T) and ``emit_logits`` (T, V) start at the
    compiled log-probabilities; outside the grammar's support they stay -inf, so the
    relaxation re-weights the grammar's rules and words but adds none. Each forward pass
    renormalises them (per left-hand side, per preterminal) into the rule tensors; the
    per-token ``log P(sentence)`` feature is differentiable, the posterior features
    (roots, rule counts) are computed on detached weights as in :class:`PCFGEncoder`.
    """

    def __init__(self, vocab_size: int, dim: int, rules: RuleTensors | None = None, **kwargs):
        super().__init__(vocab_size, dim, rules=rules, **kwargs)
        self.binary_logits = nn.Parameter(rules.binary.detach().clone())
        self.emit_logits = nn.Parameter(rules.emit.detach().clone())
        self.register_buffer("binary_support", rules.binary > LOG_ZERO, persistent=False)
        self.register_buffer("emit_support", rules.emit > LOG_ZERO, persistent=False)

    def current_rules(self) -> RuleTensors:
        """The rule tensors of the current weights (renormalised, -inf off the support)."""
        b = self.binary_logits.masked_fill(~self.binary_support, LOG_ZERO).flatten(1)
        has = self.binary_support.flatten(1).any(1, keepdim=True)
        binary = torch.where(has, b.log_softmax(-1), b).view_as(self.binary_logits)
        e = self.emit_logits.masked_fill(~self.emit_support, LOG_ZERO)
        emit = torch.where(self.emit_support.any(1, keepdim=True), e.log_softmax(-1), e)
        r = self.rules
        return RuleTensors(r.root, binary, emit, r.root_term, r.empty, r.nonterminals, r.preterminals, r.vocab, r.start, r.path)

    def sentence_features(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        mask = self.mask(ids, lengths)
        n = mask.sum(1).to(self.binary_logits.device)
        rules = self.current_rules()
        self.rules = RuleTensors(*(x.detach() for x in (rules.root, rules.binary, rules.emit, rules.root_term, rules.empty)),
                                 rules.nonterminals, rules.preterminals, rules.vocab, rules.start, rules.path)
        longest = int(mask.sum(1).max()) if mask.numel() else 0
        trimmed = ids[:, :longest].masked_fill(~mask[:, :longest], 0)
        lp = sentence_log_prob(rules, trimmed, n)
        ok = torch.isfinite(lp)
        safe = torch.where(ok, lp, torch.zeros_like(lp))  # no -inf in the graph: finite gradients
        per_token = torch.where(ok, safe / n.clamp_min(1), torch.full_like(lp, self.floor)).clamp_min(self.floor)
        parts = [torch.stack([per_token, ok.to(lp.dtype)], -1)]
        rest = tuple(f for f in self.features if f != "logz")
        if rest:
            self.features, kept = rest, self.features
            try:
                parts.append(super().sentence_features(ids, lengths))
            finally:
                self.features = kept
        return torch.cat(parts, -1).to(self.proj.weight.dtype)


class PCFGPrefixEncoder(Encoder):
    """The grammar's view of what comes next: ``log P(v | sequence ...)`` for every token
    v (V), ``log P(end | sequence)`` and a 0/1 "the sequence is a possible prefix" flag,
    floored at ``floor`` and mapped to D by a linear layer. The prefix chart is exact and
    fixed (not differentiable), so the features are memoised per sentence
    (:class:`FeatureMemo`): only the linear layer trains. Pooled output only."""

    def __init__(self, vocab_size: int, dim: int, rules: RuleTensors | None = None, floor: float = -30.0, padding_idx: int | None = 0):
        super().__init__(dim, padding_idx, True, "mean")
        if rules is None or len(rules.vocab) != vocab_size:
            raise NeurosymError("the pcfg-prefix encoder needs RuleTensors over the task's vocabulary")
        self.grammar = PrefixGrammar.from_rules(rules, torch.float32)  # features floored at -30: float32 is ample, ~1.5x faster
        self.floor = float(floor)
        self.proj = nn.Linear(vocab_size + 2, dim)
        self.memo = FeatureMemo(self.prefix_features)

    def prefix_features(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, V + 2): next-token and end log-probabilities (floored) and the prefix flag."""
        mask = self.mask(ids, lengths)
        with torch.no_grad():
            state = prefix_state(self.grammar, self.clean(ids, mask).to(self.grammar.device), mask.sum(1).to(self.grammar.device))
            nxt, end = state.next_token_log_probs()
            ok = torch.isfinite(state.prefix_log_prob)
            return torch.cat([nxt.clamp_min(self.floor), end.clamp_min(self.floor)[:, None], ok[:, None].to(nxt.dtype)], -1)

    def pooled_output(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        feats = self.memo(ids, self.mask(ids, lengths).sum(1))
        return self.proj(feats.to(self.proj.weight.device, self.proj.weight.dtype))

    def tokens(self, ids, lengths=None):
        raise NeurosymError("the pcfg-prefix encoder gives one vector per sequence; call it with pooled=True")


# ---------------------------------------------------------------------- regex features per token
def spellings(surfaces: Sequence[str | None], chars: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Each surface as character ids of ``chars`` (unknown characters -> its ``<unk>``;
    None and "" spell nothing): (W, Lc) long, 0-padded, and lengths (W,)."""
    rows = [chars.encode(s) if s else [] for s in (w if isinstance(w, str) else "" for w in surfaces)]
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    out = torch.zeros(len(rows), max(1, int(lengths.max())), dtype=torch.long)
    for i, r in enumerate(rows):  # building only: once per vocabulary
        if r:
            out[i, : len(r)] = torch.tensor(r)
    return out, lengths


class TokenRegexEncoder(Encoder):
    """Per-token regex features for tagging: every token's spelling is run through a
    character-level :class:`RegexLayer` (K automata) -> acceptance probabilities (K,),
    mapped to D and added to a learned word embedding.

    Its input ids are *form* ids (``Split.forms`` over ``TaskData.forms``): every surface
    of the task, test words unseen in training included, so the regexes read the
    spelling of a word the embedding only knows as ``<unk>``; ``word_of_form`` (F,) maps
    each form to its word id for the embedding. Without a form table (``forms=None``) the
    ids are word ids and the spellings those of ``words``. A frozen layer (the *hard*
    prior) gives fixed features, computed once for every form; a trainable one runs on
    the distinct forms of each batch only. Token states only; the pooled vector is their mean.
    """

    def __init__(self, words: Vocab, dim: int, layer: RegexLayer, padding_idx: int | None = 0, forms: Sequence[str] | None = None):
        super().__init__(dim, padding_idx, False, "mean")
        if layer.vocab.kind != "char":
            raise NeurosymError(f"the token regex encoder needs a character-level RegexLayer, got a {layer.vocab.kind!r} one")
        self.layer = layer
        surfaces = list(words.surfaces) if forms is None else list(forms)
        chars, lengths = spellings(surfaces, layer.vocab)
        word_of_form = torch.arange(len(words)) if forms is None else torch.tensor([words.id(f) if f else 0 for f in forms], dtype=torch.long)
        self.register_buffer("chars", chars, persistent=False)
        self.register_buffer("char_lengths", lengths, persistent=False)
        self.register_buffer("word_of_form", word_of_form, persistent=False)
        self.embed = nn.Embedding(len(words), dim, padding_idx=padding_idx)
        self.proj = nn.Linear(layer.num_automata, dim)
        self._table: torch.Tensor | None = None

    def word_features(self, forms: torch.Tensor) -> torch.Tensor:
        """(U,) form ids -> (U, K) acceptance probabilities of their spellings."""
        n = self.char_lengths[forms]
        return self.layer.accept_prob(self.chars[forms, : max(1, int(n.max()))], n)

    def features(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) form ids -> (B, L, K)."""
        if not any(p.requires_grad for p in self.layer.parameters()):
            if self._table is None or self._table.device != ids.device:
                with torch.no_grad():
                    self._table = self.word_features(torch.arange(len(self.chars), device=ids.device))
            return self._table[ids]
        uniq, inverse = torch.unique(ids, return_inverse=True)
        return self.word_features(uniq)[inverse]

    def tokens(self, ids, lengths=None):
        mask = self.mask(ids, lengths)
        ids = self.clean(ids, mask)
        states = self.embed(self.word_of_form[ids]) + self.proj(self.features(ids))
        return states * mask.unsqueeze(-1), mask


def randomise(layer: RegexLayer, seed: int) -> None:
    """Random transition, start and final weights (the *removed* prior), bias 0."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (layer.log_weights, layer.start_weights, layer.final_weights):
            p.copy_(torch.randn(p.shape, generator=gen))
        layer.bias.zero_()

