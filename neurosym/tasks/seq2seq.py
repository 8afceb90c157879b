"""Sequence-to-sequence tasks: SCAN and advising text-to-SQL.

Labels (N, T) are target ids over ``TaskData.target_vocab`` (``<bos>`` 0, ``<eos>`` 1,
``<unk>`` 2, then the training targets' tokens by count, ties alphabetical), then
``<eos>``, then ``IGNORE``; the metric is whole-sequence exact match
(:func:`~neurosym.tasks.base.sequence_exact_match`).

==================  =========================================  =========================
name                data                                       split used here
==================  =========================================  =========================
``scan``            SCAN (Lake & Baroni 2018, BSD-3-Clause)    the released simple split
``scan-length``     the same                                   the released length split
                                                               (test actions longer)
``semantic-parsing``  advising text-to-SQL (Finegan-Dollak      question split: train +
                    et al. 2018, CC BY 4.0; GeoQuery/ATIS      dev train, test tests
                    substitute)
==================  =========================================  =========================
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch

from neurosym.data.text import read_text
from neurosym.errors import NeurosymError
from neurosym.tasks.base import IGNORE, Split, Task, TaskData, encode, sample_rows, seq2seq_labels, sequence_exact_match, word_vocab
from neurosym.vocab import Vocab

TARGET_SPECIALS = ("<bos>", "<eos>", "<unk>")


def target_vocab(targets: Sequence[Sequence[str]]) -> Vocab:
    """A target vocabulary from training targets only: ``<bos> <eos> <unk>``, then tokens
    by count (ties alphabetical)."""
    counts = Counter(t for seq in targets for t in seq)
    return Vocab.words(sorted(counts, key=lambda t: (-counts[t], t)), specials=TARGET_SPECIALS)


class _Seq2Seq(Task):
    """Shared plumbing: sampling, vocabularies, splits, the exact-match metric."""

    family = "seq2seq"
    metric = "exact_match"
    min_count = 1
    max_vocab: int | None = None

    def evaluate(self, pred: torch.Tensor, labels: torch.Tensor, names=()) -> dict[str, float]:
        """Whole-sequence exact match (pred (N, T') decoded target ids)."""
        return {"exact_match": sequence_exact_match(pred, labels)}

    def row_lengths(self, split: Split) -> torch.Tensor:
        """(N,) target lengths without ``<eos>`` (SCAN's length split is about these)."""
        return (split.labels != IGNORE).sum(1) - 1

    def make(self, train, test, n_train, n_test, seed) -> TaskData:
        """train/test: lists of (source tokens, target tokens)."""
        train = [train[i] for i in sample_rows(len(train), n_train, seed)]
        test = [test[i] for i in sample_rows(len(test), n_test, seed + 1)]
        vocab = word_vocab([s for s, _ in train], self.max_vocab, min_count=self.min_count)
        tv = target_vocab([t for _, t in train])

        def split(rows) -> Split:
            ids, lengths = encode([s for s, _ in rows], vocab)
            return Split(ids, lengths, seq2seq_labels([[tv.id(w) for w in t] for _, t in rows]))

        return TaskData(split(train), split(test), vocab, len(tv), list(tv.tokens), target_vocab=tv)


def read_scan(path: Path) -> list[tuple[list[str], list[str]]]:
    """SCAN's ``IN: <command> OUT: <actions>`` lines (blank lines skipped)."""
    out = []
    for n, line in enumerate(read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        if not line.startswith("IN: ") or " OUT: " not in line:
            raise NeurosymError(f"{path}:{n}: expected 'IN: <command> OUT: <actions>', got {line[:60]!r}")
        command, actions = line[4:].split(" OUT: ", 1)
        if not command.split() or not actions.split():
            raise NeurosymError(f"{path}:{n}: empty command or action sequence")
        out.append((command.split(), actions.split()))
    return out


class Scan(_Seq2Seq):
    """SCAN commands -> action sequences, on a released split: ``simple`` (random 80/20,
    the headline), ``length`` (train actions up to 22 long, test 24-48: the
    length-generalisation test) or ``addprim_jump`` ("jump" seen only alone in
    training). Vocabularies: 13 command words, 6 actions + 3 specials."""

    SPLITS = {"simple": ("simple_split", "simple"), "length": ("length_split", "length"),
              "addprim_jump": ("add_prim_split", "addprim_jump")}

    def __init__(self, split: str = "simple", data_dir=None):
        super().__init__(data_dir)
        if split not in self.SPLITS:
            raise NeurosymError(f"unknown SCAN split {split!r}; expected one of {', '.join(self.SPLITS)}")
        self.split = split
        self.name = "scan" if split == "simple" else f"scan-{split.replace('_', '-')}"
        self.length_axis = split == "length"
        self.source = f"SCAN (BSD-3-Clause), the released {split} split: tasks_train / tasks_test"

    def files(self) -> tuple[str, str]:
        folder, suffix = self.SPLITS[self.split]
        return f"{folder}/tasks_train_{suffix}.txt", f"{folder}/tasks_test_{suffix}.txt"

    def skip_reason(self):
        missing = [f for f in self.files() if self.shared("scan", f) is None]
        return f"scan/{', '.join(missing)} not in the shared data folder" if missing else None

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        train, test = (read_scan(self.shared("scan", f)) for f in self.files())
        return self.make(train, test, n_train, n_test, seed)


class SemanticParsing(_Seq2Seq):
    """Advising questions -> SQL tokens (Finegan-Dollak et al. 2018), on the released
    **question split** (a query may appear in train and test with different wordings):
    the train and dev questions train (as the source README says for the large sets),
    the test questions test; ``exclude`` questions are dropped. Questions and SQL keep
    the anonymised variables (``number0``, ``department0``); the SQL is each entry's
    first query, split on whitespace. Questions are lower-cased words seen at least
    twice in training. Target tokens unseen in training are ``<unk>`` (such a row cannot
    be matched exactly, since ``<unk>`` is never the right output)."""

    name = "semantic-parsing"
    source = "advising text-to-SQL (CC BY 4.0), question split: train + dev / test; GeoQuery/ATIS substitute"
    min_count = 2
    FILE = "advising.json"

    def skip_reason(self):
        return None if self.shared("text2sql-advising", self.FILE) is not None else f"text2sql-advising/{self.FILE} not in the shared data folder"

    def records(self) -> list[tuple[str, list[str], list[str]]]:
        """(question split, question tokens, SQL tokens) of every question, file order."""
        path = self.shared("text2sql-advising", self.FILE)
        try:
            entries = json.loads(read_text(path))
        except ValueError as err:
            raise NeurosymError(f"{path}: not valid JSON: {err}") from None
        out = []
        for n, entry in enumerate(entries if isinstance(entries, list) else [None]):
            try:
                sql = entry["sql"][0].split()
                for q in entry["sentences"]:
                    out.append((q["question-split"], q["text"].lower().split(), sql))
            except (TypeError, KeyError, IndexError, AttributeError):
                raise NeurosymError(f"{path}: entry {n}: expected an object with 'sql' (a list of strings) and 'sentences' "
                                    "(objects with 'text' and 'question-split')") from None
        return out

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        recs = self.records()
        train = [(q, s) for split, q, s in recs if split in ("train", "dev")]
        test = [(q, s) for split, q, s in recs if split == "test"]
        return self.make(train, test, n_train, n_test, seed)
