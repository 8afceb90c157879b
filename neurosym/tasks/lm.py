"""Language-modelling tasks of the ``next-token`` family over WikiText-2.

Each row is a window of up to ``max_len`` tokens and its label the id of the token that
follows (a classification over the input vocabulary; top-1 accuracy here, perplexity
from the logits in the experiment). **WikiText-2's train split is not shared**: as
everywhere in neurosym, ``valid.txt`` trains and ``test.txt`` tests. The files are the
shipped ``corpora/wikitext-2/`` copies, or those of ``--data DIR``.

==================  ===============================================================
name                rows
==================  ===============================================================
``wikitext2-lm``    words: every position of the token stream (lines joined by
                    ``<eos>``), the up to ``max_len`` = 64 words before it
``char-lm``         characters of the same text (a substitute for enwik8 / text8,
                    which are not in the shared data), windows of 128 characters
``cloze``           a **substitute for LAMBADA** (not in the shared data): the last
                    word of a WikiText-2 sentence from the paragraph before it
==================  ===============================================================

The vocabulary is built from the whole training file (``valid.txt``), never from the
test file, whatever rows are sampled, so ``num_classes`` does not change with
``n_train``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from neurosym.data.text import corpus_path, read_text
from neurosym.errors import NeurosymError
from neurosym.tasks.base import Split, Task, TaskData, sample_rows, word_vocab
from neurosym.vocab import Vocab

WIKITEXT = "WikiText-2 v1 tokenised (CC BY-SA 3.0); valid.txt trains, test.txt tests (the train split is not shared)"


def windows(stream: torch.Tensor, targets: torch.Tensor, max_len: int, starts: torch.Tensor | None = None) -> Split:
    """Next-token rows of a token stream (S,) long: for each target position t in
    ``targets`` (R,), the ids ``stream[max(start, t - max_len) : t]`` right-padded to
    ``max_len`` with 0, and the label ``stream[t]``. ``starts`` (R,): the first position a
    window may read (default 0: windows cross line ends, which are ``<eos>`` tokens)."""
    stream = torch.as_tensor(stream, dtype=torch.long)
    targets = torch.as_tensor(targets, dtype=torch.long)
    lo = torch.zeros_like(targets) if starts is None else torch.as_tensor(starts, dtype=torch.long)
    if len(targets) and (int(targets.min()) < 1 or int(targets.max()) >= len(stream) or bool((lo >= targets).any())):
        raise NeurosymError("next-token windows: every target needs at least one token before it")
    begin = torch.maximum(lo, targets - max_len)
    lengths = targets - begin
    col = torch.arange(max_len)
    pos = (begin[:, None] + col).clamp(max=max(0, len(stream) - 1))
    ids = torch.where(col < lengths[:, None], stream[pos], torch.zeros((), dtype=torch.long)) if len(targets) else torch.zeros(0, max_len, dtype=torch.long)
    L = max(1, int(lengths.max())) if len(targets) else 1
    return Split(ids[:, :L].contiguous(), lengths, stream[targets])


class _WikiText(Task):
    """Shared plumbing: the two files, ``skip_reason``, word streams."""

    family = "next-token"
    max_len = 64

    def __init__(self, data_dir=None, max_len: int | None = None):
        super().__init__(data_dir)
        if max_len is not None:
            self.max_len = max_len

    def file(self, split: str) -> Path:
        """The WikiText-2 ``valid`` or ``test`` file (shipped, or in ``--data``)."""
        return corpus_path("wikitext-2", split, self.data_dir)

    def skip_reason(self) -> str | None:
        try:
            self.file("valid")
            self.file("test")
        except NeurosymError as err:
            return str(err)
        return None

    def lines(self, split: str) -> list[list[str]]:
        """The whitespace-split tokens of every non-blank line of a split's file."""
        return [ws for ws in (line.split() for line in read_text(self.file(split)).split("\n")) if ws]

    @staticmethod
    def word_stream(lines: list[list[str]], vocab: Vocab) -> torch.Tensor:
        """(S,) long: each line's word ids, then ``<eos>``."""
        eos = vocab.id("<eos>")
        return torch.tensor([i for ws in lines for i in (*(vocab.id(w) for w in ws), eos)], dtype=torch.long)


class WikiText2LM(_WikiText):
    """Word-level next-token prediction on WikiText-2: every position of the stream is a
    row (the window of up to 64 words before it; the first word has no row).

    Vocabulary: the training file's words seen at least ``min_count`` = 2 times (13k types
    occur in valid.txt; words seen once map to the corpus's own ``<unk>``).
    """

    name = "wikitext2-lm"
    source = f"{WIKITEXT}; word windows of 64"
    min_count = 2

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        train_lines, test_lines = self.lines("valid"), self.lines("test")
        vocab = word_vocab(train_lines, min_count=self.min_count)
        out = []
        for lines, n, s in ((train_lines, n_train, seed), (test_lines, n_test, seed + 1)):
            stream = self.word_stream(lines, vocab)
            rows = torch.from_numpy(sample_rows(len(stream) - 1, n, s)) + 1
            out.append(windows(stream, rows, self.max_len))
        return TaskData(out[0], out[1], vocab, len(vocab), list(vocab.tokens))


class CharLM(_WikiText):
    """Character-level next-token prediction on WikiText-2's text (a substitute for
    enwik8 / text8): each non-blank line stripped, then ``<eos>``; windows of up to 128
    characters. The vocabulary: every character of the training file, most frequent
    first (test characters not in it are ``<unk>``). Default sizes (``None``): 100,000
    training and 20,000 test rows (every position would be 1.1M rows)."""

    name = "char-lm"
    source = f"{WIKITEXT}; characters, windows of 128 (enwik8 / text8 substitute)"
    max_len = 128
    default_rows = (100_000, 20_000)

    def texts(self, split: str) -> list[str]:
        return [line.strip() for line in read_text(self.file(split)).split("\n") if line.strip()]

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        train_text, test_text = self.texts("valid"), self.texts("test")
        vocab = Vocab.chars_from_corpus("".join(train_text))
        index = {c: i for i, c in enumerate(vocab.tokens) if vocab.surfaces[i] is not None}
        eos, unk = vocab.id("<eos>"), vocab.id("<unk>")
        out = []
        for text, n, default, s in ((train_text, n_train, self.default_rows[0], seed), (test_text, n_test, self.default_rows[1], seed + 1)):
            stream = torch.tensor([i for line in text for i in (*(index.get(c, unk) for c in line), eos)], dtype=torch.long)
            rows = torch.from_numpy(sample_rows(len(stream) - 1, default if n is None else n, s)) + 1
            out.append(windows(stream, rows, self.max_len))
        return TaskData(out[0], out[1], vocab, len(vocab), list(vocab.tokens))


SENTENCE_WORD = re.compile(r"[A-Za-z]+")


class Cloze(_WikiText):
    """**A substitute for LAMBADA** (which is not in the shared data): predict the last
    word of a WikiText-2 sentence from up to 64 words of its paragraph before it.

    A target is a word followed by ``.`` whose spelling is letters only (``[A-Za-z]+``),
    that is not ``<unk>``, that is in the training vocabulary, and that has at least
    ``min_context`` = 10 words of its paragraph (line) before it; the window never reads
    across the paragraph's start. Unlike LAMBADA, targets are not filtered for needing
    the broad context: many are guessable from the sentence alone.
    """

    name = "cloze"
    source = f"{WIKITEXT}; sentence-final words from their paragraph (LAMBADA substitute)"
    min_context = 10

    def rows(self, lines: list[list[str]], vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The stream (S,), the target positions (R,) and their paragraph starts (R,)."""
        stream = self.word_stream(lines, vocab)
        lengths = np.array([len(ws) + 1 for ws in lines])
        line_start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        targets, starts = [], []
        for ws, start in zip(lines, line_start.tolist()):
            for j in range(self.min_context, len(ws) - 1):
                w = ws[j]
                if ws[j + 1] == "." and w != "<unk>" and SENTENCE_WORD.fullmatch(w) and w in vocab:
                    targets.append(start + j)
                    starts.append(start)
        return stream, torch.tensor(targets, dtype=torch.long), torch.tensor(starts, dtype=torch.long)

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        train_lines = self.lines("valid")
        vocab = word_vocab(train_lines, min_count=WikiText2LM.min_count)
        out = []
        for lines, n, s in ((train_lines, n_train, seed), (self.lines("test"), n_test, seed + 1)):
            stream, targets, starts = self.rows(lines, vocab)
            keep = torch.from_numpy(sample_rows(len(targets), n, s))
            out.append(windows(stream, targets[keep], self.max_len, starts[keep]))
        return TaskData(out[0], out[1], vocab, len(vocab), list(vocab.tokens))

