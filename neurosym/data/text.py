"""Real text for language models: files, vocabularies, token streams and LM windows.

The pieces, in the order a recipe uses them::

    path = corpus_path("wikitext-2", "valid")            # shipped corpora/ file, or --data DIR
    lines = read_lines(path)                              # [["The", "game", ...], ...] (blank lines dropped)
    vocab = WordVocab.build(lines, min_freq=2)            # <pad> <unk> <eos>, then words by frequency
    stream = vocab.encode_lines(lines)                    # (N,) long: every line's ids, then <eos>
    ids, targets = lm_windows(stream, 64)                 # (W, 64) each: stride 64, targets shifted by one

    sents = read_tagged(corpus_path("ud-english-ewt", "train"))   # [TaggedSentence(forms, upos), ...]
    tags = majority_upos(sents)                                   # {"the": "DET", ...}

* **Word vocabularies** follow WikiText-2's convention: the text is already tokenised
  (split on whitespace) and rare words are already spelled ``<unk>``; that token is the
  vocabulary's unknown word, so words cut by ``min_freq`` (or absent from the training
  text) map to the same ``<unk>`` the corpus uses. Ids: ``<pad>`` 0, ``<unk>`` 1,
  ``<eos>`` 2, then words by decreasing count, ties alphabetical (deterministic).
* **BPE** (:class:`BpeVocab`): a `tokenizers` byte-level byte-pair model trained on the
  same lines (GPT-2's pre-tokenizer and decoder: the 256 bytes are the first sub-words
  after ``<pad> <unk> <eos>``, special tokens at ids 0, 1, 2; a space is part of the
  sub-word it starts, so ``decode(encode(text)) == text`` and any text encodes, the
  corpus's ``<unk>`` kept whole). Both vocabularies have ``encode_lines``.
* **Windows**: the whole stream cut into consecutive windows of length L with stride L
  (stateless: no hidden state carried between windows), inputs ``stream[iL:(i+1)L]`` and
  targets ``stream[iL+1:(i+1)L+1]``; the tail shorter than L + 1 tokens is dropped. The
  order is the file's; a trainer shuffles windows with its own seeded generator.
* **Tagged text** (UD English-EWT): CoNLL-U files (syntactic words only: multiword
  ranges ``n-m`` and empty nodes ``n.m`` are skipped) or the shipped ``FORM<TAB>UPOS``
  files (a blank line between sentences), plain or ``.gz``.

Shipped corpora live in the top-level ``corpora/`` folder (installed as the package
data ``neurosym.corpora``; its README gives sources and CC BY-SA licences).
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import torch
from torch import Tensor

from neurosym.errors import NeurosymError, SourceError
from neurosym.files import read_input

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"
SPECIALS = (PAD, UNK, EOS)
PAD_ID, UNK_ID, EOS_ID = 0, 1, 2
MIN_BPE_SIZE = len(SPECIALS) + 256  # BPE: the special tokens and every byte

# The corpora the recipes know: dataset -> split -> (shipped file, file names accepted in a --data folder)
CORPORA: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "wikitext-2": {
        "valid": ("wikitext-2/valid.txt.gz", ("valid.txt", "wiki.valid.tokens", "valid.txt.gz")),
        "test": ("wikitext-2/test.txt.gz", ("test.txt", "wiki.test.tokens", "test.txt.gz")),
        "train": ("", ("train.txt", "wiki.train.tokens", "train.txt.gz")),  # not shipped: --data only
    },
    "ud-english-ewt": {
        "train": ("ud-english-ewt/train.tsv.gz", ("en_ewt-ud-train.conllu", "train.tsv.gz", "train.tsv")),
        "dev": ("", ("en_ewt-ud-dev.conllu", "dev.tsv.gz", "dev.tsv")),
        "test": ("ud-english-ewt/test.tsv.gz", ("en_ewt-ud-test.conllu", "test.tsv.gz", "test.tsv")),
    },
}
REPO_CORPORA = Path(__file__).resolve().parents[2] / "corpora"  # a source checkout (editable installs)


# ---------------------------------------------------------------------- files
def corpus_path(dataset: str, split: str, data_dir: str | Path | None = None) -> Path:
    """The file of ``dataset``'s ``split``: the shipped copy, or with ``data_dir`` the first
    of the accepted names (see :data:`CORPORA`) found in ``data_dir/dataset/`` or ``data_dir/``.

    A :class:`NeurosymError` names what was looked for when nothing is there.
    """
    if dataset not in CORPORA:
        raise NeurosymError(f"unknown corpus {dataset!r}; expected one of {', '.join(CORPORA)}")
    if split not in CORPORA[dataset]:
        raise NeurosymError(f"{dataset} has no split {split!r}; expected one of {', '.join(CORPORA[dataset])}")
    shipped, names = CORPORA[dataset][split]
    if data_dir is not None:
        root = Path(data_dir)
        if not root.is_dir():
            raise NeurosymError(f"--data {root}: no such folder")
        for folder in (root / dataset, root):
            for name in names:
                if (folder / name).is_file():
                    return folder / name
        raise NeurosymError(f"--data {root}: no {dataset} {split} file ({' or '.join(names)}) in {root / dataset} or {root}")
    if not shipped:
        raise NeurosymError(f"{dataset} {split} is not shipped with neurosym; point --data at a folder holding {' or '.join(names)}")
    try:
        path = Path(str(resources.files("neurosym.corpora").joinpath(shipped)))
    except ModuleNotFoundError:  # an editable install made before corpora/ existed
        path = REPO_CORPORA / shipped
    if not path.is_file():
        raise NeurosymError(f"corpora/{shipped}: no such shipped file (is this an incomplete install?)")
    return path


def read_text(path: str | Path) -> str:
    """A UTF-8 text file, gzip-compressed (``.gz``) or not; a clear error when unreadable."""
    path = Path(path)
    try:
        raw = read_input(path)  # a regular file only: a device or a FIFO is refused, not read forever
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SourceError.not_utf8(err, path) from None
    except FileNotFoundError:
        raise NeurosymError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise NeurosymError(f"{path}: is a folder, not a text file") from None
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        raise NeurosymError(f"{path}: cannot read text: {err}") from None


def read_lines(path: str | Path) -> list[list[str]]:
    """The whitespace-split tokens of each non-blank line (WikiText's layout: one
    paragraph or heading per line)."""
    return [words for words in (line.split() for line in read_text(path).split("\n")) if words]


# ---------------------------------------------------------------------- vocabularies
@dataclass(frozen=True)
class WordVocab:
    """A word-level vocabulary: ``tokens[i]`` is id i; ``<pad>`` 0, ``<unk>`` 1, ``<eos>`` 2.

    ``counts`` are the training counts of the kept words (specials: the count of ``<unk>``
    as a word in the text, 0 for the others).
    """

    tokens: tuple[str, ...]
    counts: tuple[int, ...]
    index: dict[str, int] = field(init=False, repr=False, compare=False)

    pad_id = PAD_ID
    unk_id = UNK_ID
    eos_id = EOS_ID

    def __post_init__(self) -> None:
        if tuple(self.tokens[:3]) != SPECIALS:
            raise NeurosymError(f"a WordVocab starts with {', '.join(SPECIALS)}, got {', '.join(self.tokens[:3])}")
        if len(set(self.tokens)) != len(self.tokens):
            raise NeurosymError("a WordVocab's tokens must be distinct")
        object.__setattr__(self, "index", {t: i for i, t in enumerate(self.tokens)})

    @classmethod
    def build(cls, lines: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None) -> "WordVocab":
        """Words seen at least ``min_freq`` times, most frequent first (ties alphabetical),
        at most ``max_size`` tokens in all (specials included)."""
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
            raise NeurosymError(f"min_freq: expected an integer >= 1, got {min_freq!r}")
        if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < len(SPECIALS)):
            raise NeurosymError(f"max_size: expected an integer >= {len(SPECIALS)} (the special tokens), got {max_size!r}")
        counts = Counter(w for line in lines for w in line)
        unk = counts.pop(UNK, 0)
        for special in (PAD, EOS):
            counts.pop(special, None)  # never words
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max_size - len(SPECIALS)]
        return cls(SPECIALS + tuple(words), (0, unk, 0) + tuple(counts[w] for w in words))

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, word: str) -> int:
        """The id of ``word`` (``<unk>``'s when it is not in the vocabulary)."""
        return self.index.get(word, UNK_ID)

    def encode(self, words: Sequence[str]) -> list[int]:
        """Ids of ``words`` (unknown words -> ``<unk>``)."""
        get = self.index.get
        return [get(w, UNK_ID) for w in words]

    def encode_lines(self, lines: Iterable[Sequence[str]], eos: bool = True) -> Tensor:
        """One stream of ids (N,) long: each line's ids followed by ``<eos>`` (with ``eos``)."""
        out: list[int] = []
        for line in lines:
            out.extend(self.encode(line))
            if eos:
                out.append(EOS_ID)
        return torch.tensor(out, dtype=torch.long)


class BpeVocab:
    """A byte-level byte-pair-encoding vocabulary trained with `tokenizers`.

    ``<pad> <unk> <eos>`` are special tokens with ids 0, 1, 2 (the corpus's own ``<unk>``
    stays one token); then the 256 single bytes (GPT-2's byte-to-character alphabet), then
    the learnt merges. The pre-tokenizer is GPT-2's (``ByteLevel``, no added prefix space):
    a space belongs to the sub-word after it (``Ġgame``), so sub-words carry the word
    boundaries and :meth:`decode` gives back the text exactly: ``decode(encode(text)) ==
    text`` for any text without the special tokens' spellings.
    """

    pad_id = PAD_ID
    unk_id = UNK_ID
    eos_id = EOS_ID

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        for i, special in enumerate(SPECIALS):
            if tokenizer.token_to_id(special) != i:
                raise NeurosymError(f"a BpeVocab's tokenizer must have {special} at id {i}")
        size = tokenizer.get_vocab_size()
        self.tokens = tuple(tokenizer.id_to_token(i) for i in range(size))

    @classmethod
    def train(cls, lines: Iterable[str | Sequence[str]], vocab_size: int = 8000, min_frequency: int = 2) -> "BpeVocab":
        """Learn merges from ``lines`` (each a text, or a sequence of words joined by
        single spaces) up to ``vocab_size`` tokens: the specials, the 256 bytes, then
        merges (so ``vocab_size`` is at least :data:`MIN_BPE_SIZE`)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # lazy: only the BPE option needs it

        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < MIN_BPE_SIZE:
            raise NeurosymError(f"vocab_size: expected an integer >= {MIN_BPE_SIZE} (the {len(SPECIALS)} special tokens and the 256 bytes), "
                                f"got {vocab_size!r}")
        tok = Tokenizer(models.BPE(unk_token=UNK))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIALS),
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator((_line_text(line) for line in lines), trainer=trainer)
        return cls(tok)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str | Sequence[str]) -> list[int]:
        """Sub-word ids of a text (or of words joined by single spaces)."""
        return self.tokenizer.encode(_line_text(text), add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` (special tokens left out)."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def encode_lines(self, lines: Iterable[str | Sequence[str]], eos: bool = True) -> Tensor:
        """One stream of ids (N,) long: each line's sub-word ids followed by ``<eos>``."""
        out: list[int] = []
        for enc in self.tokenizer.encode_batch([_line_text(line) for line in lines], add_special_tokens=False):
            out.extend(enc.ids)
            if eos:
                out.append(EOS_ID)
        return torch.tensor(out, dtype=torch.long)


def _line_text(line: str | Sequence[str]) -> str:
    """A line as text: itself, or its words joined by single spaces."""
    return line if isinstance(line, str) else " ".join(line)


# ---------------------------------------------------------------------- LM windows
def lm_windows(stream: Tensor, length: int) -> tuple[Tensor, Tensor]:
    """Consecutive windows of a token stream (N,): ``ids`` and ``targets`` (W, length) with
    ``W = (N - 1) // length``; window i reads ``stream[i*length : (i+1)*length]`` and
    predicts the same positions shifted by one. Stride = length, file order, tail dropped."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise NeurosymError(f"window length: expected an integer >= 1, got {length!r}")
    stream = torch.as_tensor(stream, dtype=torch.long).reshape(-1)
    n = (stream.numel() - 1) // length if stream.numel() else 0
    if n == 0:
        return torch.empty(0, length, dtype=torch.long), torch.empty(0, length, dtype=torch.long)
    ids = stream[: n * length].view(n, length)
    targets = stream[1 : n * length + 1].view(n, length)
    return ids.clone(), targets.clone()


# ---------------------------------------------------------------------- tagged text
@dataclass(frozen=True)
class TaggedSentence:
    """One sentence's word forms and their universal POS tags (equal lengths)."""

    forms: tuple[str, ...]
    upos: tuple[str, ...]


def conllu_sentences(lines: Iterable[str], source: str | Path = "<text>") -> Iterator[list[tuple[int, list[str]]]]:
    """The sentences of CoNLL-U lines, each a list of ``(line number, 10 columns)`` of its
    syntactic words: comments, multiword ranges ``n-m`` and empty nodes ``n.m`` skipped;
    a blank line ends a sentence. A word line without 10 TAB-separated columns or with a
    non-numeric ID is a NeurosymError naming ``source`` and the line."""
    words: list[tuple[int, list[str]]] = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line:
            if words:
                yield words
                words = []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise SourceError(f"a CoNLL-U word line has 10 tab-separated columns, this one has {len(cols)}", source, n, field_column(line, 10))
        if "-" in cols[0] or "." in cols[0]:
            continue
        if not cols[0].isdigit():
            raise SourceError(f"bad word ID {cols[0]!r}", source, n, 1)
        words.append((n, cols))
    if words:
        yield words


def field_column(line: str, k: int) -> int:
    """The 1-based character column where TAB-separated field ``k`` (0-based) of ``line``
    starts; past the end of the line when it has fewer fields (where the missing one goes)."""
    col = 1
    for i, part in enumerate(line.split("\t")):
        if i == k:
            return col
        col += len(part) + 1
    return len(line) + 1


def parse_tagged(text: str, source: str = "<text>") -> list[TaggedSentence]:
    """Sentences of CoNLL-U text (10 TAB-separated columns) or of ``FORM<TAB>UPOS`` lines;
    sentences end at blank lines; in CoNLL-U (told by its first word line) ``#`` lines are
    comments, in ``FORM<TAB>UPOS`` files ``#`` is a word; multiword ranges and empty
    nodes (IDs ``n-m``, ``n.m``) are skipped. A malformed line is a :class:`NeurosymError`
    naming ``source`` and the line."""
    out: list[TaggedSentence] = []
    forms: list[str] = []
    tags: list[str] = []
    conllu: bool | None = None

    def flush() -> None:
        if forms:
            out.append(TaggedSentence(tuple(forms), tuple(tags)))
            forms.clear()
            tags.clear()

    for n, line in enumerate(text.split("\n"), 1):  # not splitlines: forms may hold \x85, \u2028, ...
        line = line.rstrip("\r")
        if not line:
            flush()
            continue
        cols = line.split("\t")
        if conllu is None and not (line.startswith("#") and len(cols) != 2):
            conllu = len(cols) == 10  # the first word line decides the format
        if line.startswith("#") and conllu is not False:
            continue  # a CoNLL-U comment (in FORM<TAB>UPOS files '#' is a word: hashtags)
        if conllu and len(cols) == 10:
            if "-" in cols[0] or "." in cols[0]:
                continue
            form, tag = cols[1], cols[3]
        elif not conllu and len(cols) == 2:
            form, tag = cols
        else:
            want = 10 if conllu else 2
            raise SourceError(f"expected 10 TAB-separated CoNLL-U columns or FORM<TAB>UPOS, got {len(cols)} column(s)",
                              source, n, field_column(line, want))
        if not form or not tag:
            form_field, tag_field = (1, 3) if conllu else (0, 1)
            raise SourceError("empty form or tag", source, n, field_column(line, tag_field if form else form_field))
        forms.append(form)
        tags.append(tag)
    flush()
    return out


def read_tagged(path: str | Path) -> list[TaggedSentence]:
    """The sentences of a CoNLL-U or ``FORM<TAB>UPOS`` file (plain or ``.gz``)."""
    return parse_tagged(read_text(path), str(path))


def majority_upos(sentences: Iterable[TaggedSentence]) -> dict[str, str]:
    """Each form's most frequent UPOS tag (ties: the alphabetically first tag)."""
    counts: dict[str, Counter] = {}
    for s in sentences:
        for form, tag in zip(s.forms, s.upos):
            counts.setdefault(form, Counter())[tag] += 1
    return {form: min(c, key=lambda t: (-c[t], t)) for form, c in counts.items()}


__all__ = [
    "conllu_sentences",
    "BpeVocab",
    "CORPORA",
    "EOS",
    "MIN_BPE_SIZE",
    "PAD",
    "SPECIALS",
    "TaggedSentence",
    "UNK",
    "WordVocab",
    "corpus_path",
    "field_column",
    "lm_windows",
    "majority_upos",
    "parse_tagged",
    "read_lines",
    "read_tagged",
    "read_text",
]
