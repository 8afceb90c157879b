"""The seven Tomita languages (``grammars/tomita.regex``) as recognition tasks.

Strings over the word tokens ``0`` and ``1``; training strings have lengths 0..10, test
strings 11..30 (the length-generalisation split). Each split is balanced: half
members, half non-members. A length is drawn uniformly among those that have a string
of the wanted label, then a string uniformly among the strings of that length and
label, by counting accepting paths of the compiled DFA (:func:`count_accepting`).
"""

from __future__ import annotations

import numpy as np
import torch

from neurosym.compile.automaton import Automaton
from neurosym.compile.regex import RegexBank, load_regex
from neurosym.data import shipped_file
from neurosym.errors import NeurosymError
from neurosym.tasks.base import Split, Task, TaskData
from neurosym.vocab import Vocab

TOMITA_FILE = "grammars/tomita.regex"
ALPHABET = ("0", "1")
TRAIN_LENGTHS = (0, 10)
TEST_LENGTHS = (11, 30)


def tomita_vocab() -> Vocab:
    """``<pad> <unk> <bos> <eos> 0 1`` (word tokens)."""
    return Vocab.words(list(ALPHABET))


def tomita_bank(vocab: Vocab | None = None) -> RegexBank:
    """The seven compiled Tomita automata (``T1`` .. ``T7``) over :func:`tomita_vocab`."""
    return load_regex(shipped_file(TOMITA_FILE), vocab=vocab if vocab is not None else tomita_vocab())


def count_accepting(auto: Automaton, symbols: list[int], max_len: int) -> np.ndarray:
    """(Q + 1, max_len + 1) float: ``[q, r]`` = how many strings of ``r`` symbols lead
    from state q to acceptance; row Q is the reject sink (always 0)."""
    delta = auto.delta.numpy()
    Q = delta.shape[0]
    nxt = np.where(delta[:, symbols] >= 0, delta[:, symbols], Q)  # (Q, S), Q = sink
    nxt = np.vstack([nxt, np.full(len(symbols), Q)])
    count = np.zeros((Q + 1, max_len + 1))
    count[:Q, 0] = auto.final.numpy()
    for r in range(1, max_len + 1):
        count[:, r] = count[nxt, r - 1].sum(1)
    return count


def sample_language(auto: Automaton, symbols: list[int], n: int, lengths: tuple[int, int], positive: bool, rng: np.random.Generator) -> list[list[int]]:
    """``n`` strings of ``symbols`` uniformly among those of a uniformly drawn length in
    ``lengths`` (only lengths holding such a string) that the automaton accepts
    (``positive``) or rejects."""
    lo, hi = lengths
    S = len(symbols)
    acc = count_accepting(auto, symbols, hi)
    Q = auto.delta.shape[0]
    total = np.array([[float(S) ** r for r in range(hi + 1)]])
    good = acc if positive else total - acc  # (Q + 1, hi + 1): wanted strings from each state
    delta = auto.delta.numpy()
    nxt = np.vstack([np.where(delta[:, symbols] >= 0, delta[:, symbols], Q), np.full(S, Q)])
    start = auto.start
    ok = [r for r in range(lo, hi + 1) if good[start, r] > 0]
    if not ok:
        raise NeurosymError(f"{auto.name}: no {'member' if positive else 'non-member'} of length {lo}..{hi}")
    out = []
    for r in rng.choice(ok, size=n):
        q, word = start, []
        for left in range(int(r), 0, -1):
            w = good[nxt[q], left - 1]
            i = int(rng.choice(S, p=w / w.sum()))
            word.append(symbols[i])
            q = nxt[q, i]
        out.append(word)
    return out


class Tomita(Task):
    """Tomita language ``index`` (1..7): is the string in the language? Train on lengths
    0..10, test on 11..30 (balanced, fixed seed)."""

    family = "classification"
    length_axis = True
    source = "generated: grammars/tomita.regex (Tomita 1982), train lengths 0-10, test 11-30"

    def __init__(self, index: int, data_dir=None):
        super().__init__(data_dir)
        if not 1 <= index <= 7:
            raise NeurosymError(f"there are seven Tomita languages (1..7), got {index}")
        self.index = index
        self.name = f"tomita{index}"
        self.regex_target = f"T{index}"  # its prior: the bank of the seven Tomita automata, its own read first

    regex_prior = "bank"
    by_construction = {
        "regex-hard": "the bank holds the compiled automaton that labels the strings, and the readout starts reading it",
        "regex-soft": "the bank starts as the compiled automaton that labels the strings, and the readout starts reading it",
    }

    def regex_bank(self, vocab: Vocab) -> RegexBank:
        """The seven compiled Tomita automata over ``vocab``."""
        return tomita_bank(vocab)

    def automaton(self, vocab: Vocab | None = None) -> Automaton:
        """The compiled DFA of this language."""
        return tomita_bank(vocab)[f"T{self.index}"]

    def build(self, n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> TaskData:
        n_train = 1000 if n_train is None else n_train
        n_test = 1000 if n_test is None else n_test
        vocab = tomita_vocab()
        auto = self.automaton(vocab)
        symbols = [vocab.id(c) for c in ALPHABET]
        splits = []
        for part, (n, span) in enumerate(((n_train, TRAIN_LENGTHS), (n_test, TEST_LENGTHS))):
            rng = np.random.default_rng([seed, self.index, part])
            pos = sample_language(auto, symbols, n // 2, span, True, rng)
            neg = sample_language(auto, symbols, n - n // 2, span, False, rng)
            words, labels = pos + neg, [1] * len(pos) + [0] * len(neg)
            order = rng.permutation(len(words))
            lengths = torch.tensor([len(words[i]) for i in order], dtype=torch.long)
            ids = torch.zeros(len(words), max(1, int(lengths.max()) if len(words) else 1), dtype=torch.long)
            for row, i in enumerate(order):
                if words[i]:
                    ids[row, : len(words[i])] = torch.tensor(words[i])
            splits.append(Split(ids, lengths, torch.tensor([labels[i] for i in order], dtype=torch.long)))
        return TaskData(splits[0], splits[1], vocab, 2, ["reject", "accept"])
