"""Dyck-k bracket languages: samples, recognition sets of minimal corruptions, next-token targets.

A Dyck-k word is a balanced string over k bracket pairs, e.g. ``( [ ] ) [ ]`` for k = 2.
:class:`Dyck` samples them with a controlled length distribution (every even length in
``[min_len, max_len]`` equally likely, then a word *uniformly* among the Dyck-k words of
that length), builds a balanced recognition set whose negatives are minimal
corruptions of positives (so a model must track bracket types and depth, not
surface statistics), and next-token targets (the set of symbols allowed after each
prefix, as in Suzgun et al., 2019, "LSTM networks can perform dynamic counting").

Token ids come from a word :class:`~neurosym.vocab.Vocab`: the specials ``<pad> <unk>
<bos> <eos>`` first (``<pad>`` is id 0), then ``( ) [ ] { } < >`` for k <= 4 (pairs
beyond the fourth are spelled ``(5 )5``, ...)::

    dyck = Dyck(k=2)
    words = dyck.sample(3, min_len=2, max_len=8, seed=0)       # lists of token ids
    data = dyck.recognition(1000, max_len=40, seed=0)           # padded (N, L) ids, labels
    nt = dyck.next_token(words)                                  # (B, L) inputs, (B, L, V) targets
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

BRACKETS: tuple[tuple[str, str], ...] = (("(", ")"), ("[", "]"), ("{", "}"), ("<", ">"))
CORRUPTIONS = ("retype", "delete", "insert", "flip", "swap")
"""Minimal edits of a balanced word: ``retype`` changes one bracket's type (``(`` -> ``[``),
``delete`` removes one bracket, ``insert`` adds one, ``flip`` turns one bracket round
(``(`` -> ``)``), ``swap`` exchanges two adjacent different brackets. Results that happen
to stay balanced (only possible for ``swap``) are drawn again."""


def bracket_pairs(k: int) -> list[tuple[str, str]]:
    """The k (open, close) token strings."""
    if k < 1:
        raise NeurosymError(f"Dyck-k needs k >= 1 bracket pairs, got {k}")
    return [BRACKETS[i] if i < len(BRACKETS) else (f"({i + 1}", f"){i + 1}") for i in range(k)]


def dyck_vocab(k: int = 2) -> Vocab:
    """A word vocabulary: ``<pad> <unk> <bos> <eos>`` then the 2k brackets, pair by pair."""
    return Vocab.words([t for pair in bracket_pairs(k) for t in pair])


def _up_odds(max_len: int, bias: float) -> np.ndarray:
    """(max_len + 1, max_len + 1): P(next bracket opens | depth h, r brackets left) when a
    Dyck path's weight is ``bias ** (sum of its depths)``.

    ``log Z[h, r]`` sums the weights of the paths from depth h to 0 in r steps:
    ``Z[h, r] = bias^(h+1) Z[h+1, r-1] + bias^(h-1) Z[h-1, r-1]`` (the second only for
    h >= 1), ``Z[0, 0] = 1``. For bias 1, Z is a ballot number and
    ``P(up) = (h+2)(r-h) / (2(h+1)r)``."""
    H = max_len + 2
    lb = np.log(bias)
    depth = np.arange(H)
    log_z = np.full((H, max_len + 1), -np.inf)
    log_z[0, 0] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for r in range(1, max_len + 1):
            up = np.full(H, -np.inf)
            up[:-1] = lb * depth[1:] + log_z[1:, r - 1]
            down = np.full(H, -np.inf)
            down[1:] = lb * depth[:-1] + log_z[:-1, r - 1]
            log_z[:, r] = np.logaddexp(up, down)
        p = np.zeros((max_len + 1, max_len + 1))
        for r in range(1, max_len + 1):
            h = depth[: max_len + 1]
            ok = np.isfinite(log_z[h, r])
            p[ok, r] = np.exp(lb * (h[ok] + 1) + log_z[h[ok] + 1, r - 1] - log_z[h[ok], r])
    return np.nan_to_num(p)


def pad_sequences(seqs: Sequence[Sequence[int]], pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists: ids (B, L) long with L = the longest (at least 1), lengths (B,)."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    L = max(1, int(lengths.max())) if len(seqs) else 1
    ids = torch.full((len(seqs), L), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return ids, lengths


@dataclass
class Recognition:
    """A labelled recognition set of N strings.

    ids: (N, L) long, right-padded with ``<pad>``. lengths: (N,). labels: (N,) float,
    1.0 = balanced. kinds: per string ``"balanced"`` or the corruption that made it.
    """

    ids: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor
    kinds: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def batches(self, batch_size: int, seed: int | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """(ids (b, l), lengths (b,), labels (b,)) batches, each trimmed to its longest string;
        shuffled by ``seed`` (in order when ``None``)."""
        order = torch.arange(len(self)) if seed is None else torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
        for start in range(0, len(self), batch_size):
            idx = order[start : start + batch_size]
            lengths = self.lengths[idx]
            yield self.ids[idx, : max(1, int(lengths.max()))], lengths, self.labels[idx]


@dataclass
class NextToken:
    """Next-token targets for balanced words.

    inputs: (B, L) ``<bos> w1 .. wn`` then pads (L = longest n + 1). targets: (B, L, V)
    bool, the symbols allowed after each input prefix (every open bracket, the close
    matching the innermost open one, ``<eos>`` when nothing is open); all False at
    pads. lengths: (B,) n + 1. depth: (B, L) the nesting depth after each prefix.
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    lengths: torch.Tensor
    depth: torch.Tensor


class Dyck:
    """The Dyck-k language over ``vocab`` (by default :func:`dyck_vocab`).

    Args:
        k: number of bracket pairs.
        vocab: a vocabulary holding the 2k bracket tokens and ``<pad>``, ``<bos>``,
            ``<eos>`` (any other tokens are ignored).
    """

    def __init__(self, k: int = 2, vocab: Vocab | None = None):
        pairs = bracket_pairs(k)
        self.k = k
        self.vocab = vocab if vocab is not None else dyck_vocab(k)
        for tok in [t for p in pairs for t in p] + ["<pad>", "<bos>", "<eos>"]:
            if tok not in self.vocab:
                raise NeurosymError(f"the vocabulary has no token {tok!r} needed by Dyck-{k}")
        self.opens = [self.vocab.id(o) for o, _ in pairs]
        self.closes = [self.vocab.id(c) for _, c in pairs]
        self.pad, self.bos, self.eos = (self.vocab.id(t) for t in ("<pad>", "<bos>", "<eos>"))
        self._type = {**{o: i for i, o in enumerate(self.opens)}, **{c: i for i, c in enumerate(self.closes)}}

    def __repr__(self) -> str:
        return f"Dyck(k={self.k}, vocab={self.vocab!r})"

    # ------------------------------------------------------------------ reference
    def is_balanced(self, ids: Sequence[int]) -> bool:
        """Whether ``ids`` (brackets only) is a Dyck-k word, by an explicit stack."""
        stack: list[int] = []
        for t in ids:
            t = int(t)
            if t in self.opens:
                stack.append(t)
            elif t in self.closes:
                if not stack or self.opens[self._type[t]] != stack.pop():
                    return False
            else:
                return False
        return not stack

    def depths(self, ids: Sequence[int]) -> list[int]:
        """The nesting depth after each token of a word (opens +1, closes -1)."""
        d, out = 0, []
        for t in ids:
            d += 1 if int(t) in self.opens else -1
            out.append(d)
        return out

    # ------------------------------------------------------------------ sampling
    def sample(self, n: int, min_len: int = 2, max_len: int = 40, seed: int = 0, depth_bias: float = 1.0) -> list[list[int]]:
        """``n`` Dyck-k words as token-id lists.

        Each word's length is uniform over the even numbers in ``[min_len, max_len]``;
        given its length, its bracket skeleton (Dyck path) has probability proportional to
        ``depth_bias ** (sum of the depths after each token)`` — uniform over all words of
        that length for the default 1.0, deeper nesting above 1 — and each pair gets a
        uniform type. Drawn step by step with the exact odds of going up (a dynamic
        program over (depth, steps left)); vectorised over words; the same ``seed`` gives
        the same words."""
        lo, hi = min_len + (min_len % 2), max_len - (max_len % 2)
        if min_len < 0 or lo > hi:
            raise NeurosymError(f"no even length in [{min_len}, {max_len}]")
        if not depth_bias > 0:
            raise NeurosymError(f"depth_bias must be positive, got {depth_bias}")
        p_up_table = _up_odds(hi, float(depth_bias))
        rng = np.random.default_rng(seed)
        lengths = rng.choice(np.arange(lo, hi + 1, 2), size=n)
        types = rng.integers(0, self.k, size=(n, max(1, hi // 2)))  # the type of each pair, in opening order
        coins = rng.random((n, max(1, hi)))
        opens, closes = np.asarray(self.opens), np.asarray(self.closes)
        out = np.full((n, max(1, hi)), -1, dtype=np.int64)
        stack = np.zeros((n, max(1, hi // 2) + 1), dtype=np.int64)
        height = np.zeros(n, dtype=np.int64)
        opened = np.zeros(n, dtype=np.int64)
        rows = np.arange(n)
        for t in range(hi):
            live = t < lengths
            r = np.maximum(lengths - t, 1)  # steps left, this one included
            up = live & (coins[:, t] < p_up_table[np.minimum(height, hi), r])
            down = live & ~up
            ty = types[rows, np.minimum(opened, types.shape[1] - 1)]
            out[up, t] = opens[ty[up]]
            stack[up, height[up]] = ty[up]
            opened += up
            height += up
            height -= down
            out[down, t] = closes[stack[down, height[down]]]
        return [row[:length].tolist() for row, length in zip(out, lengths)]

    def corrupt(self, ids: Sequence[int], kind: str, rng: np.random.Generator) -> list[int] | None:
        """One minimal corruption of a balanced word (see :data:`CORRUPTIONS`), or ``None``
        when ``kind`` does not apply (e.g. ``retype`` with k = 1, ``delete`` of nothing).
        The result may still be balanced (``swap``); :meth:`negatives` checks."""
        w = [int(t) for t in ids]
        n = len(w)
        if kind == "insert":
            pos = int(rng.integers(0, n + 1))
            tok = int(rng.choice(self.opens + self.closes))
            return w[:pos] + [tok] + w[pos:]
        if n == 0:
            return None
        pos = int(rng.integers(0, n))
        t = w[pos]
        ty, is_open = self._type[t], t in self.opens
        if kind == "delete":
            return w[:pos] + w[pos + 1 :]
        if kind == "retype":
            if self.k < 2:
                return None
            new = (ty + int(rng.integers(1, self.k))) % self.k
            w[pos] = (self.opens if is_open else self.closes)[new]
            return w
        if kind == "flip":
            w[pos] = (self.closes if is_open else self.opens)[ty]
            return w
        if kind == "swap":
            cands = [i for i in range(n - 1) if w[i] != w[i + 1]]
            if not cands:
                return None
            i = int(rng.choice(cands))
            w[i], w[i + 1] = w[i + 1], w[i]
            return w
        raise NeurosymError(f"unknown corruption {kind!r}; known: {', '.join(CORRUPTIONS)}")

    def negatives(
        self,
        n: int,
        min_len: int = 2,
        max_len: int = 40,
        seed: int = 0,
        corruptions: Sequence[str] = ("retype", "delete", "insert"),
        depth_bias: float = 1.0,
    ) -> tuple[list[list[int]], list[str]]:
        """``n`` unbalanced strings, each one corruption away from a fresh Dyck-k word of
        length in ``[min_len, max_len]``, and their kinds: the kinds take turns through
        ``corruptions`` (equal shares, shuffled)."""
        for c in corruptions:
            if c not in CORRUPTIONS:
                raise NeurosymError(f"unknown corruption {c!r}; known: {', '.join(CORRUPTIONS)}")
        if not corruptions:
            raise NeurosymError("no corruptions given")
        if self.k < 2 and "retype" in corruptions:
            raise NeurosymError("the 'retype' corruption needs k >= 2 bracket pairs")
        rng = np.random.default_rng([seed, 1])
        pending = [corruptions[i % len(corruptions)] for i in range(n)]
        rng.shuffle(pending)
        out: list[list[int] | None] = [None] * n
        todo = list(range(n))
        for round_ in range(100):
            if not todo:
                break
            base = self.sample(len(todo), max(min_len, 2), max_len, seed=seed * 7919 + 104729 * (round_ + 1), depth_bias=depth_bias)
            failed = []
            for i, w in zip(todo, base):
                bad = self.corrupt(w, pending[i], rng)
                if bad is None or self.is_balanced(bad):
                    failed.append(i)
                else:
                    out[i] = bad
            todo = failed
        if todo:
            raise NeurosymError(f"could not corrupt enough words with {list(corruptions)}")
        return out, pending  # type: ignore[return-value]

    def recognition(
        self,
        n: int,
        min_len: int = 2,
        max_len: int = 40,
        seed: int = 0,
        corruptions: Sequence[str] = ("retype", "delete", "insert"),
        bos: bool = False,
        eos: bool = False,
        depth_bias: float = 1.0,
    ) -> Recognition:
        """A shuffled recognition set: ``n // 2`` balanced words and ``n - n // 2`` corrupted
        ones (from other words of the same length distribution), optionally wrapped in
        ``<bos>`` / ``<eos>``."""
        pos = self.sample(n // 2, min_len, max_len, seed=seed, depth_bias=depth_bias)
        neg, kinds = self.negatives(n - n // 2, min_len, max_len, seed=seed, corruptions=corruptions, depth_bias=depth_bias)
        seqs = pos + neg
        kinds = ["balanced"] * len(pos) + kinds
        labels = torch.tensor([1.0] * len(pos) + [0.0] * len(neg))
        order = np.random.default_rng([seed, 2]).permutation(len(seqs))
        seqs = [([self.bos] if bos else []) + seqs[i] + ([self.eos] if eos else []) for i in order]
        ids, lengths = pad_sequences(seqs, self.pad)
        return Recognition(ids, lengths, labels[torch.as_tensor(order)], [kinds[i] for i in order])

    # ------------------------------------------------------------------ next token
    def allowed_next(self, ids: Sequence[int]) -> torch.Tensor:
        """(n + 1, V) bool: row t is the set of symbols that may follow the first t tokens
        of the balanced word ``ids`` (row 0: after the empty prefix)."""
        V = len(self.vocab)
        out = torch.zeros(len(ids) + 1, V, dtype=torch.bool)
        stack: list[int] = []
        for t in range(len(ids) + 1):
            if t > 0:
                tok = int(ids[t - 1])
                if tok in self.opens:
                    stack.append(self._type[tok])
                elif not stack or stack.pop() != self._type.get(tok, -1):
                    raise NeurosymError(f"next-token targets need a balanced word; position {t - 1} is not")
            out[t, self.opens] = True
            if stack:
                out[t, self.closes[stack[-1]]] = True
            else:
                out[t, self.eos] = True
        return out

    def next_token(self, words: Sequence[Sequence[int]]) -> NextToken:
        """Inputs ``<bos> w`` and allowed-next targets for a batch of balanced words."""
        inputs, lengths = pad_sequences([[self.bos, *w] for w in words], self.pad)
        B, L = inputs.shape
        targets = torch.zeros(B, L, len(self.vocab), dtype=torch.bool)
        depth = torch.zeros(B, L, dtype=torch.long)
        for b, w in enumerate(words):
            targets[b, : len(w) + 1] = self.allowed_next(w)
            depth[b, 1 : len(w) + 1] = torch.tensor(self.depths(w), dtype=torch.long)
        return NextToken(inputs, targets, lengths, depth)
