"""Real-data tasks over the shared data folder (``../shared/data`` or ``--data DIR``).

Each reads the files as released (see the shared folder's README for sources and
licences), builds its vocabulary from the training split only (words seen at least
twice, at most ``max_vocab``), and cuts sequences to ``max_len`` words. A task whose
files are missing says so in :meth:`~neurosym.tasks.base.Task.skip_reason`.

=================  ====================================  =========================
name               data (substitute for)                 split used here
=================  ====================================  =========================
``pos``            UD English-EWT UPOS (shipped corpora)  train / test
``ner``            WNUT-17 (CoNLL-2003)                   train / test
``sentiment``      Poem Sentiment, 4 classes (SST-2;     train / test
                   shipped copy in ``tasks/data/``)
``topic``          DBpedia-14 subset (AG News)            val (5,000) / test
``acceptability``  BLiMP, all 67 paradigms (CoLA)         pairs split 50/50
``nli``            SNLI dev / test (no train shared)      dev / test
=================  ====================================  =========================
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np

from neurosym.data.text import corpus_path, read_tagged, read_text
from neurosym.errors import NeurosymError
import torch

from neurosym.tasks.base import Task, TaskData, accuracy, classification_split, sample_rows, span_f1, tagging_split, word_vocab

WORD = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks."""
    return WORD.findall(text.lower())


class _RealTask(Task):
    """Shared plumbing: sizes, vocabulary and length caps."""

    max_len = 64
    max_vocab = 5000

    def __init__(self, data_dir=None, max_len: int | None = None, max_vocab: int | None = None):
        super().__init__(data_dir)
        if max_len is not None:
            self.max_len = max_len
        if max_vocab is not None:
            self.max_vocab = max_vocab

    def _classification(self, train, test, n_train, n_test, seed, labels: list[str]) -> TaskData:
        """train/test: lists of (tokens, label id)."""
        train = [train[i] for i in sample_rows(len(train), n_train, seed)]
        test = [test[i] for i in sample_rows(len(test), n_test, seed + 1)]
        vocab = word_vocab([t[: self.max_len] for t, _ in train], self.max_vocab, min_count=2)
        mk = lambda rows: classification_split([t for t, _ in rows], [y for _, y in rows], vocab, self.max_len)  # noqa: E731
        return TaskData(mk(train), mk(test), vocab, len(labels), labels)

    def _tagging(self, train, test, n_train, n_test, seed) -> TaskData:
        """train/test: lists of (forms, tags) string tuples; tags indexed in sorted order."""
        train = [train[i] for i in sample_rows(len(train), n_train, seed)]
        test = [test[i] for i in sample_rows(len(test), n_test, seed + 1)]
        names = sorted({t for _, tags in train + test for t in tags})
        index = {t: i for i, t in enumerate(names)}
        vocab = word_vocab([[w.lower() for w in f[: self.max_len]] for f, _ in train], self.max_vocab, min_count=2)
        forms = {"": 0}
        mk = lambda rows: tagging_split([[w.lower() for w in f] for f, _ in rows], [[index[t] for t in g] for _, g in rows], vocab, self.max_len, forms)  # noqa: E731
        train_split, test_split = mk(train), mk(test)
        return TaskData(train_split, test_split, vocab, len(names), names, forms=list(forms))


class POSTagging(_RealTask):
    """UD English-EWT universal POS tags (17), per token."""

    name = "pos"
    family = "tagging"
    regex_prior = "synthesised"
    source = "UD English-EWT v2.16 UPOS (CC BY-SA 4.0), the shipped corpora/ train/test (or --data)"

    def files(self) -> tuple[Path, Path]:
        if self.data_dir is not None:
            return corpus_path("ud-english-ewt", "train", self.data_dir), corpus_path("ud-english-ewt", "test", self.data_dir)
        return corpus_path("ud-english-ewt", "train"), corpus_path("ud-english-ewt", "test")

    def skip_reason(self):
        try:
            self.files()
        except NeurosymError as err:
            return str(err)
        return None

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        train_path, test_path = self.files()
        rows = lambda p: [(s.forms, s.upos) for s in read_tagged(p)]  # noqa: E731
        return self._tagging(rows(train_path), rows(test_path), n_train, n_test, seed)


def read_conll_pairs(path: Path) -> list[tuple[list[str], list[str]]]:
    """WNUT-17 files: ``word<TAB>tag`` lines, sentences separated by blank lines (a line
    of only whitespace is blank)."""
    out, forms, tags = [], [], []
    for n, line in enumerate(read_text(path).split("\n"), 1):
        if not line.strip():
            if forms:
                out.append((forms, tags))
                forms, tags = [], []
            continue
        cols = line.rstrip("\r").split("\t")
        if len(cols) != 2 or not cols[1]:
            raise NeurosymError(f"{path}:{n}: expected WORD<TAB>TAG, got {line!r}")
        forms.append(cols[0])
        tags.append(cols[1])
    if forms:
        out.append((forms, tags))
    return out


class NER(_RealTask):
    """WNUT-17 emerging entities, BIO tags over 6 types (13 tags), per token."""

    name = "ner"
    family = "tagging"
    metric = "f1"
    regex_prior = "synthesised"
    source = "WNUT-17 (CC BY 4.0), train / annotated test; CoNLL-2003 substitute"

    def evaluate(self, pred: torch.Tensor, labels: torch.Tensor, names=()) -> dict[str, float]:
        """Micro entity F1 (exact BIO spans) and token accuracy."""
        return {"f1": span_f1(pred, labels, names), "accuracy": accuracy(pred, labels)}

    def skip_reason(self):
        missing = [f for f in ("wnut17train.conll", "emerging.test.annotated") if self.shared("wnut17", f) is None]
        return f"wnut17/{', '.join(missing)} not in the shared data folder" if missing else None

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        return self._tagging(read_conll_pairs(self.shared("wnut17", "wnut17train.conll")),
                             read_conll_pairs(self.shared("wnut17", "emerging.test.annotated")), n_train, n_test, seed)


class Sentiment(_RealTask):
    """Poem Sentiment: negative / no impact / positive / mixed (labels -1, 0, 1, 2)."""

    name = "sentiment"
    source = "Poem Sentiment (CC BY 4.0), train / test; SST-2 substitute"
    LABELS = ["negative", "no-impact", "positive", "mixed"]

    def skip_reason(self):
        missing = [f for f in ("train.tsv", "test.tsv") if self.shared("poem-sentiment", "data", f) is None]
        return f"poem-sentiment/data/{', '.join(missing)} not in the shared data folder" if missing else None

    def rows(self, split: str) -> list[tuple[list[str], int]]:
        path = self.shared("poem-sentiment", "data", f"{split}.tsv")
        out = []
        for n, line in enumerate(read_text(path).splitlines(), 1):
            cols = line.split("\t")
            if len(cols) != 3 or cols[2].strip() not in ("-1", "0", "1", "2"):
                raise NeurosymError(f"{path}:{n}: expected ID<TAB>VERSE<TAB>LABEL (-1, 0, 1 or 2)")
            out.append((tokenize(cols[1]), int(cols[2]) + 1))
        return out

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        return self._classification(self.rows("train"), self.rows("test"), n_train, n_test, seed, self.LABELS)


class Topic(_RealTask):
    """DBpedia-14 topic of an abstract (14 classes); the 5,000-row ``val.csv`` trains."""

    name = "topic"
    source = "DBpedia-14 subset (CC BY-SA 3.0 + GFDL), val.csv trains, test.csv tests; AG News substitute"

    def skip_reason(self):
        missing = [f for f in ("val.csv", "test.csv", "classes.txt") if self.shared("dbpedia14-subset", f) is None]
        return f"dbpedia14-subset/{', '.join(missing)} not in the shared data folder" if missing else None

    def rows(self, name: str) -> list[tuple[list[str], int]]:
        path = self.shared("dbpedia14-subset", name)
        out = []
        for n, rec in enumerate(csv.reader(io.StringIO(read_text(path))), 1):
            if len(rec) < 2 or not rec[0].strip().isdigit() or not 1 <= int(rec[0]) <= 14:
                raise NeurosymError(f"{path}: row {n}: expected CLASS (1-14), TEXT...")
            out.append((tokenize(" ".join(rec[1:])), int(rec[0]) - 1))
        return out

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        labels = [c.strip() for c in read_text(self.shared("dbpedia14-subset", "classes.txt")).splitlines() if c.strip()]
        return self._classification(self.rows("val.csv"), self.rows("test.csv"), n_train, n_test, seed, labels)


class Acceptability(_RealTask):
    """BLiMP minimal pairs as single sentences: grammatical (1) or not (0). The pairs of
    all 67 paradigms are split 50/50 by a fixed seed, both sentences of a pair on the
    same side."""

    name = "acceptability"
    source = "BLiMP, 67 paradigms (CC BY 4.0), pairs split 50/50; CoLA substitute"

    def skip_reason(self):
        folder = self.shared("blimp", "data")
        return None if folder is not None and any(folder.glob("*.jsonl")) else "blimp/data/*.jsonl not in the shared data folder"

    def pairs(self) -> list[tuple[str, str]]:
        out = []
        for path in sorted(self.shared("blimp", "data").glob("*.jsonl")):
            for n, line in enumerate(read_text(path).splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    out.append((rec["sentence_good"], rec["sentence_bad"]))
                except (ValueError, KeyError, TypeError):
                    raise NeurosymError(f"{path}:{n}: expected a JSON object with sentence_good and sentence_bad") from None
        return out

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        pairs = self.pairs()
        order = np.random.default_rng([seed, 5]).permutation(len(pairs))
        half = len(pairs) // 2
        side = lambda idx: [(tokenize(s), y) for i in idx for s, y in ((pairs[i][0], 1), (pairs[i][1], 0))]  # noqa: E731
        train, test = side(order[:half]), side(order[half:])
        return self._classification(train, test, n_train, n_test, seed, ["unacceptable", "acceptable"])


class NLI(_RealTask):
    """SNLI premise ``<sep>`` hypothesis -> entailment / neutral / contradiction; the dev
    set trains (no train split is shared), the test set tests."""

    name = "nli"
    source = "SNLI 1.0 dev (trains) / test (CC BY-SA 4.0, via e-SNLI)"
    LABELS = ["entailment", "neutral", "contradiction"]

    def skip_reason(self):
        missing = [f"{k}.{s}" for k in ("s1", "s2", "labels") for s in ("dev", "test") if self.shared("snli-esnli", f"{k}.{s}") is None]
        return f"snli-esnli/{', '.join(missing)} not in the shared data folder" if missing else None

    def rows(self, split: str) -> list[tuple[list[str], int]]:
        s1, s2, lab = (read_text(self.shared("snli-esnli", f"{k}.{split}")).splitlines() for k in ("s1", "s2", "labels"))
        if not len(s1) == len(s2) == len(lab):
            raise NeurosymError(f"snli-esnli {split}: s1, s2 and labels have {len(s1)}, {len(s2)} and {len(lab)} lines")
        out = []
        for n, (a, b, y) in enumerate(zip(s1, s2, lab), 1):
            if y.strip() not in self.LABELS:
                raise NeurosymError(f"snli-esnli/labels.{split}:{n}: unknown label {y!r}")
            out.append((tokenize(a) + ["<sep>"] + tokenize(b), self.LABELS.index(y.strip())))
        return out

    def build(self, n_train=None, n_test=None, seed=0) -> TaskData:
        return self._classification(self.rows("dev"), self.rows("test"), n_train, n_test, seed, self.LABELS)
