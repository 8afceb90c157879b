"""Sentence corpora sampled from a weighted FSG, with held-out words and LM batches.

A corpus is a list of sentences (token-id lists, no specials) over the automaton's
vocabulary. For language modelling a sentence becomes ``<bos> w1 .. wn <eos>``; the
model reads ``inputs = [<bos>, w1 .. wn]`` and predicts ``targets = [w1 .. wn, <eos>]``,
so every word and the end of the sentence are predicted once. Roles (from the FSG) and
features (from a :class:`FeatureBank`) are computed on the inputs, causally.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from neurosym.compile.weighted import WeightedAutomaton
from neurosym.errors import NeurosymError


def sample_sentences(
    auto: WeightedAutomaton,
    n: int,
    seed: int = 0,
    max_words: int | None = None,
    exclude: Iterable[int] = (),
) -> list[list[int]]:
    """``n`` sentences from ``auto``'s distribution conditioned on containing no token in
    ``exclude`` (rejection sampling) and having at most ``max_words`` tokens."""
    banned = torch.zeros(len(auto.vocab), dtype=torch.bool)
    banned[list(exclude)] = True
    out: list[list[int]] = []
    drawn, round_ = 0, 0
    while len(out) < n:
        want = max(64, 2 * (n - len(out)))
        batch = auto.sample(want, max_len=max_words, seed=seed * 1_000_003 + round_)
        drawn += want
        round_ += 1
        out.extend(s for s in batch if not banned[s].any())
        if drawn >= 10_000 and len(out) < drawn * 1e-3:
            raise NeurosymError(f"fewer than 1 in 1000 sentences avoid the held-out tokens ({len(out)} of {drawn}); hold out fewer")
    return out[:n]


@dataclass
class LMBatch:
    """One language-model batch (B sentences, L = longest sentence + 1).

    inputs: (B, L) ``<bos> w1 .. wn`` then pads. targets: (B, L) ``w1 .. wn <eos>`` then
    pads. lengths: (B,) n + 1. roles: role -> (B, L) bool on the inputs. features:
    (B, L, F) or None."""

    inputs: torch.Tensor
    targets: torch.Tensor
    lengths: torch.Tensor
    roles: dict[str, torch.Tensor]
    features: torch.Tensor | None = None

    def to(self, device) -> "LMBatch":
        return LMBatch(
            self.inputs.to(device),
            self.targets.to(device),
            self.lengths.to(device),
            {k: v.to(device) for k, v in self.roles.items()},
            None if self.features is None else self.features.to(device),
        )


def lm_batch(sentences: Sequence[Sequence[int]], auto: WeightedAutomaton, bank=None) -> LMBatch:
    """Pad sentences into an :class:`LMBatch`; roles come from ``auto`` and features from
    ``bank`` (a FeatureBank over the same vocabulary), both on the inputs."""
    vocab = auto.vocab
    pad, bos, eos = (_special(vocab, t) for t in ("<pad>", "<bos>", "<eos>"))
    B = len(sentences)
    L = 1 + max((len(s) for s in sentences), default=0)
    inputs = torch.full((B, L), pad, dtype=torch.long)
    targets = torch.full((B, L), pad, dtype=torch.long)
    lengths = torch.tensor([len(s) + 1 for s in sentences], dtype=torch.long)
    words = torch.full((B, L - 1), pad, dtype=torch.long)
    for b, s in enumerate(sentences):
        n = len(s)
        if n:
            row = torch.as_tensor(list(s), dtype=torch.long)
            words[b, :n] = row
            inputs[b, 1 : n + 1] = row
            targets[b, :n] = row
        inputs[b, 0] = bos
        targets[b, n] = eos
    # roles of the words, shifted right by one: position t of the inputs holds word t - 1
    word_roles = auto.roles(words) if L > 1 else {r: torch.zeros((B, 0), dtype=torch.bool) for r in auto.role_tables}
    valid = torch.arange(L - 1)[None, :] < (lengths - 1)[:, None]
    roles = {r: torch.cat([torch.zeros((B, 1), dtype=torch.bool), m & valid], dim=1) for r, m in word_roles.items()}
    features = None
    if bank is not None:
        needed = {r: roles[r] for r in bank.roles if r in roles}
        missing = [r for r in bank.roles if r not in roles]
        if missing:
            raise NeurosymError(f"the feature bank needs roles {missing} that the grammar does not mark (it marks {sorted(roles)})")
        features = bank.featurize(inputs, needed) * (inputs != pad).unsqueeze(-1)
    return LMBatch(inputs, targets, lengths, roles, features)


def _special(vocab, token: str) -> int:
    if token not in vocab.tokens:
        raise NeurosymError(f"the vocabulary has no {token} token, which language-model batches need")
    return vocab.tokens.index(token)


def batches(sentences: Sequence[Sequence[int]], batch_size: int, generator: torch.Generator | None = None) -> list[list[int]]:
    """Indices of ``sentences`` cut into batches, shuffled by ``generator`` (in order if None)."""
    order = torch.randperm(len(sentences), generator=generator).tolist() if generator is not None else list(range(len(sentences)))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def choose_holdout(words_by_class: dict[str, list[str]], k: int, seed: int) -> dict[str, list[str]]:
    """``k`` words of each class, drawn with ``seed`` (in the class's own order)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, words in words_by_class.items():
        if k > len(words):
            raise NeurosymError(f"cannot hold out {k} words of class {name}: it has {len(words)}")
        pick = sorted(rng.choice(len(words), size=k, replace=False).tolist())
        out[name] = [words[i] for i in pick]
    return out
