"""Sentence corpora sampled from a weighted FSG, with held-out words.

A corpus is a list of sentences (token-id lists, no specials) over the automaton's
vocabulary; :func:`neurosym.lm.fusion.make_batch` lays sentences out as LM batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
