"""The task protocol of the structured-LM suite: fixed-seed splits, a metric, a family.

A :class:`Task` builds a :class:`TaskData` (a train and a test :class:`Split` over one
word :class:`~neurosym.vocab.Vocab`) from a generator or from files; the same
``(n_train, n_test, seed)`` always gives the same data. A task whose data is missing
says why in :meth:`Task.skip_reason` (``None`` when it can run).

Families (one model head each):

* ``classification``: labels (N,) long in ``[0, num_classes)``, one per sequence;
* ``tagging``: labels (N, L) long, one per token, ``IGNORE`` (-100) at padding;
* ``next-token``: a classification over the task's input vocabulary: each row is a
  window of up to ``max_len`` preceding tokens, labels (N,) the id of the next token in
  ``TaskData.vocab`` (``num_classes = len(vocab)``; ``<unk>`` may be a label);
* ``seq2seq``: labels (N, T) long over ``TaskData.target_vocab`` (index 0 ``<bos>``,
  1 ``<eos>``): each row the target's ids, then 1, then ``IGNORE`` padding
  (``num_classes = len(target_vocab)``); scored by :func:`sequence_exact_match`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import torch

from neurosym.compile.regex import RegexBank
from neurosym.data import shared_data_dir
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

FAMILIES = ("classification", "tagging", "next-token", "seq2seq")
SHIPPED_DATA = Path(__file__).resolve().parent / "data"
"""Small freely licensed subsets shipped with the package (each with its licence)."""
IGNORE = -100
"""The label of padding positions in tagging and seq2seq splits (``cross_entropy``'s ignore index)."""
BOS_ID, EOS_ID = 0, 1
"""Target-vocabulary ids of ``<bos>`` and ``<eos>`` in seq2seq tasks."""


@dataclass
class Split:
    """N sequences of word ids, right-padded with 0 (``<pad>``).

    ids: (N, L) long. lengths: (N,) long. labels: (N,) long (classification,
    next-token), (N, L) long with ``IGNORE`` at padding (tagging), or (N, T) long target
    ids, ``<eos>``, then ``IGNORE`` (seq2seq; T need not equal L).
    """

    ids: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor
    forms: torch.Tensor | None = None
    """(N, L) long ids into :attr:`TaskData.forms` (every surface string, unknown words
    included; 0 at padding), for encoders that read spellings; None when not kept."""

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def subset(self, index: Sequence[int] | torch.Tensor) -> "Split":
        """The rows ``index`` (trimmed to their longest sequence)."""
        index = torch.as_tensor(index, dtype=torch.long)
        lengths = self.lengths[index]
        L = max(1, int(lengths.max())) if len(index) else 1
        labels = self.labels[index]
        if labels.dim() == 2:  # tagging: L columns; seq2seq: up to the last target column used
            used = torch.nonzero((labels != IGNORE).any(0)).flatten()
            labels = labels[:, : max(L, int(used[-1]) + 1 if len(used) else 1)]
        forms = None if self.forms is None else self.forms[index, :L]
        return Split(self.ids[index, :L], lengths, labels, forms)

    def fraction(self, share: float, seed: int = 0) -> "Split":
        """A fixed-seed random ``share`` of the rows (at least one)."""
        if not 0 < share <= 1:
            raise NeurosymError(f"a training share must be in (0, 1], got {share}")
        n = max(1, int(round(share * len(self))))
        order = torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
        return self.subset(order[:n].sort().values)


@dataclass
class TaskData:
    """What a task gives a model: the splits, the vocabulary, the label count; for
    seq2seq tasks the target vocabulary (``<bos>`` 0, ``<eos>`` 1), else None."""

    train: Split
    test: Split
    vocab: Vocab
    num_classes: int
    label_names: list[str] = field(default_factory=list)
    target_vocab: Vocab | list[str] | None = None
    forms: list[str] | None = None
    """Tagging tasks: the surface of every form id of the splits' ``forms`` ("" = 0, padding)."""


def encode(sequences: Sequence[Sequence[str]], vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Token strings -> right-padded ids (N, L) and lengths (N,); unknown words map to
    ``<unk>`` (a NeurosymError when the vocabulary has none)."""
    rows = [[vocab.id(w) for w in seq] for seq in sequences]
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    return torch.from_numpy(fill_rows(rows, lengths, 0)), torch.from_numpy(lengths)


def fill_rows(rows: Sequence[Sequence[int]], lengths: np.ndarray, pad: int, extra: int = 0) -> np.ndarray:
    """Ragged int rows -> (N, max(1, max length + extra)) int64, ``pad`` past each row
    (one flat copy, no per-row tensors)."""
    width = max(1, (int(lengths.max()) if len(rows) else 0) + extra)
    out = np.full((len(rows), width), pad, dtype=np.int64)
    if len(rows):
        flat = np.fromiter((i for r in rows for i in r), dtype=np.int64, count=int(lengths.sum()))
        out[np.arange(width) < lengths[:, None]] = flat
    return out


def pad_tags(tags: Sequence[Sequence[int]], width: int) -> torch.Tensor:
    """Per-token labels -> (N, width) long with ``IGNORE`` past each sequence."""
    out = torch.full((len(tags), max(1, width)), IGNORE, dtype=torch.long)
    for n, t in enumerate(tags):
        if len(t):
            out[n, : len(t)] = torch.tensor(list(t), dtype=torch.long)
    return out


def word_vocab(sequences: Sequence[Sequence[str]], max_size: int | None = None, min_count: int = 1) -> Vocab:
    """A word vocabulary (``<pad> <unk> <bos> <eos>``, then words by count, ties
    alphabetical) built from training sequences only."""
    counts = Counter(w for s in sequences for w in s)
    ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    if max_size is not None:
        ranked = ranked[: max(0, max_size - 4)]
    return Vocab.words(ranked)


def classification_split(sequences: Sequence[Sequence[str]], labels: Sequence[int], vocab: Vocab, max_len: int | None = None) -> Split:
    """A classification :class:`Split` (sequences cut to ``max_len`` words)."""
    seqs = [list(s)[:max_len] if max_len else list(s) for s in sequences]
    ids, lengths = encode(seqs, vocab)
    return Split(ids, lengths, torch.tensor(list(labels), dtype=torch.long))


def tagging_split(sequences: Sequence[Sequence[str]], tags: Sequence[Sequence[int]], vocab: Vocab, max_len: int | None = None,
                  forms: dict[str, int] | None = None) -> Split:
    """A tagging :class:`Split` (sequences and their tags cut to ``max_len``). With a
    ``forms`` table (surface -> form id, ``{"": 0}`` to start; shared by the train and
    test splits, new surfaces appended), the split also keeps each token's form id."""
    seqs = [list(s)[:max_len] if max_len else list(s) for s in sequences]
    tags = [list(t)[: len(s)] for t, s in zip(tags, seqs)]
    ids, lengths = encode(seqs, vocab)
    form_ids = None
    if forms is not None:
        rows = [[forms.setdefault(w, len(forms)) for w in s] for s in seqs]
        form_ids = torch.from_numpy(fill_rows(rows, lengths.numpy(), 0))
    return Split(ids, lengths, pad_tags(tags, ids.shape[1]), form_ids)


def row_keys(split: Split, forms: bool = False) -> list[tuple[int, ...]]:
    """Each row's input as a tuple, up to its length: its surface-form ids with ``forms``
    (unknown words stay apart), else its word ids."""
    rows = split.forms if forms else split.ids
    return [tuple(r[: int(n)].tolist()) for r, n in zip(rows, split.lengths)]


def train_test_duplicates(data: TaskData) -> dict[str, int | float]:
    """How many test rows have an input that also occurs in the training split (train and
    test rows of a sampled task are drawn i.i.d. from one sampler, so repeats are
    possible): ``{test, in_train, share, distinct_in_train}`` (``distinct_in_train``: the
    distinct test inputs among them). Inputs only: a repeated input may carry another
    label (next-token windows, ambiguous prefixes)."""
    forms = data.train.forms is not None and data.test.forms is not None
    train, test = row_keys(data.train, forms), row_keys(data.test, forms)
    seen = set(train)
    hits = [k for k in test if k in seen]
    return {"test": len(test), "in_train": len(hits), "share": len(hits) / len(test) if test else 0.0,
            "distinct_in_train": len(set(hits))}


def sample_rows(n_total: int, n: int | None, seed: int) -> np.ndarray:
    """A fixed-seed sorted choice of ``min(n, n_total)`` row numbers (all when n is None)."""
    if n is None or n >= n_total:
        return np.arange(n_total)
    return np.sort(np.random.default_rng(seed).choice(n_total, size=n, replace=False))


class Task(ABC):
    """One task of the suite.

    Class attributes:
        name: the suite's name (``tomita3``, ``pos``, ...).
        family: one of :data:`FAMILIES` (``classification``, ``tagging``, ``next-token``,
            ``seq2seq``).
        metric: the headline key of :meth:`evaluate` (``accuracy``; ``f1`` for NER,
            chunking and constituency, ``uas`` for dependency arcs, ``exact_match``
            for seq2seq tasks).
        source: what the data are (generator or data set, with its licence).
        length_axis: whether the test set spans longer lengths than training (the
            length-generalisation analysis buckets its accuracy by test length).

    The symbolic priors a task offers the suite's ``regex-*`` and ``pcfg-*`` settings
    (none by default; a setting without its prior is "not applicable"):

        regex_prior: ``"bank"``: a bank of compiled automata over the task's vocabulary
            (:meth:`regex_bank`) read by a sequence-level WFSA layer;
            ``"synthesised"`` (tagging tasks): a bank synthesised from the training
            split, read per token; None: no regex prior.
        regex_target: with a bank, the pattern whose acceptance is the label (Tomita:
            ``T3``): the readout starts by reading it (the cold start), and
            ``regex-others`` is the bank without it.
        grammar: the ``.pcfg`` file (a shipped ``grammars/...`` name or a path) the
            task's sentences come from: the PCFG priors.
        by_construction: ``{setting: why}``, the settings whose prior reads the very
            function that labelled the data (Tomita's own automaton, the grammar whose
            next-token distribution is the label): their score shows the prior is exact,
            not that a prior helps; every report labels them.
    """

    name: str = ""
    family: str = "classification"
    metric: str = "accuracy"
    source: str = ""
    length_axis: bool = False
    data_dir: Path | None = None
    regex_prior: Literal["bank", "synthesised"] | None = None
    regex_target: str | None = None
    grammar: str | None = None
    by_construction: ClassVar[dict[str, str]] = {}

    def __init__(self, data_dir: str | Path | None = None):
        self.data_dir = Path(data_dir) if data_dir is not None else None

    def shared(self, *parts: str) -> Path | None:
        """A path inside the shared data folder (``--data`` DIR, else ``../shared/data``);
        without ``--data``, a copy shipped in ``neurosym/tasks/data/`` (small, freely
        licensed subsets, licence beside them) stands in for a missing one. None when
        neither has it."""
        root = self.data_dir if self.data_dir is not None else shared_data_dir()
        if root is not None and Path(root).joinpath(*parts).exists():
            return Path(root).joinpath(*parts)
        if self.data_dir is None and SHIPPED_DATA.joinpath(*parts).exists():
            return SHIPPED_DATA.joinpath(*parts)
        return None

    def skip_reason(self) -> str | None:
        """Why the task cannot run here (missing data), or None."""
        return None

    @abstractmethod
    def build(self, n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> TaskData:
        """The task's fixed-seed train and test splits (``None``: the default sizes / all rows)."""

    def load(self, n_train: int | None = None, n_test: int | None = None, seed: int = 0) -> TaskData:
        """:meth:`build` after checking :meth:`skip_reason` (a NeurosymError naming it)."""
        reason = self.skip_reason()
        if reason is not None:
            raise NeurosymError(f"task {self.name}: {reason}")
        data = self.build(n_train, n_test, seed)
        if self.family not in FAMILIES:
            raise NeurosymError(f"task {self.name}: unknown family {self.family!r}")
        return data

    def regex_bank(self, vocab: Vocab) -> RegexBank:
        """The compiled bank of a ``regex_prior = "bank"`` task over ``vocab`` (the task's
        own vocabulary); a NeurosymError for a task without one."""
        raise NeurosymError(f"task {self.name}: no regex bank (regex_prior is {self.regex_prior!r})")

    def row_lengths(self, split: Split) -> torch.Tensor:
        """(N,) the length the length-generalisation analysis buckets rows by: the input
        length here (seq2seq tasks: the target length, without ``<eos>``)."""
        return split.lengths

    def evaluate(self, pred: torch.Tensor, labels: torch.Tensor, names: Sequence[str] = ()) -> dict[str, float]:
        """The task's metrics of predictions against labels (same shapes); ``metric``
        names the headline one. Here: ``{"accuracy": ...}``."""
        return {"accuracy": accuracy(pred, labels)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, family={self.family!r})"


def seq2seq_labels(targets: Sequence[Sequence[int]]) -> torch.Tensor:
    """Target id rows -> (N, T) long labels: each row's ids, then ``EOS_ID``, then
    ``IGNORE`` (T = the longest target + 1)."""
    lengths = np.array([len(t) for t in targets], dtype=np.int64)
    out = fill_rows(targets, lengths, IGNORE, extra=1)
    out[np.arange(len(targets)), lengths] = EOS_ID
    return torch.from_numpy(out)


def sequence_exact_match(pred: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of rows whose predicted sequence equals the target up to and including
    the target's first ``<eos>`` (what follows is not read). pred: (N, T') long, labels:
    (N, T) long (seq2seq labels); a prediction shorter than the target is wrong."""
    if pred.dim() != 2 or labels.dim() != 2 or pred.shape[0] != labels.shape[0]:
        raise NeurosymError(f"sequence_exact_match: expected (N, T) predictions and labels, got {tuple(pred.shape)} and {tuple(labels.shape)}")
    N, T = labels.shape
    if N == 0:
        return float("nan")
    if pred.shape[1] < T:
        pred = torch.cat([pred, torch.full((N, T - pred.shape[1]), IGNORE - 1, dtype=pred.dtype)], 1)
    pred = pred[:, :T]
    col = torch.arange(T).expand(N, T)
    is_eos = labels == EOS_ID
    first_eos = torch.where(is_eos.any(1), torch.where(is_eos, col, T).min(1).values, (labels != IGNORE).sum(1) - 1)
    read = col <= first_eos[:, None]
    return float(((pred == labels) | ~read).all(1).float().mean())


def bio_spans(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """Entity spans ``(start, end, type)`` (end exclusive) of one BIO tag sequence
    (conlleval's rule: an ``I-x`` after ``O`` or another type starts a new span)."""
    spans, start, kind = set(), None, None
    for i, t in enumerate([*tags, "O"]):
        inside = t.startswith("I-") and kind == t[2:]
        if start is not None and not inside:
            spans.add((start, i, kind))
            start, kind = None, None
        if t.startswith("B-") or (t.startswith("I-") and not inside):
            start, kind = i, t[2:]
    return spans


def span_f1(pred: torch.Tensor, labels: torch.Tensor, names: Sequence[str]) -> float:
    """Micro entity F1 of BIO taggings (N, L) (label ids into ``names``; ``IGNORE`` ends
    a sequence); 1.0 when neither side has an entity."""
    tp = n_pred = n_gold = 0
    for p_row, g_row in zip(pred.tolist(), labels.tolist()):
        n = sum(1 for g in g_row if g != IGNORE)
        p = bio_spans([names[i] for i in p_row[:n]])
        g = bio_spans([names[i] for i in g_row[:n]])
        tp += len(p & g)
        n_pred += len(p)
        n_gold += len(g)
    if n_pred + n_gold == 0:
        return 1.0
    return 2 * tp / (n_pred + n_gold)


def accuracy(pred: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of positions where ``pred == labels``, ignoring ``IGNORE`` labels."""
    keep = labels != IGNORE
    n = int(keep.sum())
    return float(((pred == labels) & keep).sum()) / n if n else float("nan")
