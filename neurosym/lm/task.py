"""The built-in language-model task, ``[run] task = "lm"``: your text, your lexicon, composable objectives.

``neurosym train CONFIG.toml`` trains it from a config alone (docs/training.md, "Train on
your own text", is the reference for every key)::

    [data]       train / valid / test: a path or glob each (plain text, .gz, .conllu FORM
                 column, .jsonl with text_field); tokenizer word | bpe | tokenizer.json |
                 a tokenizer folder; min_freq, bpe_size, window; or grammar = "x.fsg"
                 (sampled sentences in place of text, its exact perplexity floor reported;
                 layout = "sentences": one padded row per sentence, with seed, holdout =
                 { classes, words } and lexicon = "x.lex" for a model without fusion)
    [model]      the causal LM's architecture (LMSection: d_model, n_layers, n_heads, d_ff,
                 ...) or hf = DIR (a local transformers causal LM, lora = { r, alpha }:
                 :mod:`neurosym.lm.hf_model`), fusion = { lexicon = "x.lex",
                 control = { max_prefixes, final, dropout }, lexical_output },
                 idea = { weight = 1.0, ... }
    [objective]  semantic_kl = { lambda, temperature, ... }, aux = { weight, hidden },
                 uniformizer = { weight, classes, per_class }, label_smoothing

The pieces are the library's own: the text readers and vocabularies of
:mod:`neurosym.data.text`, :class:`~neurosym.lm.model.CausalLM`, the fusion adapter and
aux head of :mod:`neurosym.lm.fusion` (fed by a lexicon's
:class:`~neurosym.compile.lexicon.FeatureBank`), the idea head, gate and fused objective of
:mod:`neurosym.lm.idea`, the semantic-KL loss of :mod:`neurosym.lm.semantic_kl`.

Data. Every line of a text file is one document (blank lines dropped); a word vocabulary
cuts it on whitespace, a tokenizer encodes it. The stream is ``<bos> doc <eos> <bos> doc
<eos> ...`` (``<bos>`` only for the word and bpe vocabularies, which have one) cut into
windows of ``window`` tokens (stride = window). ``<bos>`` is read, never predicted: its
target positions hold ``<pad>`` and every loss and metric leaves them out.

The loss of a batch, each term logged on its own in ``metrics.jsonl``::

    total = (1 - lambda) * ce + lambda * kl + idea.weight * idea_bce + uniformizer + aux.weight * aux

``ce`` is the cross-entropy of the model's distribution (the idea-gated one with
``idea``); ``kl`` the semantic KL of the ungated logits ``hidden @ W^T`` against the tied
embedding's similarity kernel (lambda = 0 without ``semantic_kl``); ``idea_bce`` the idea
head's bag-of-words loss; ``aux`` the fusion aux head's prediction of the next token's
features. A finished run's folder holds, beside the trainer's ``config.json``,
``metrics.jsonl`` and ``last.pt``: ``vocab.json``, ``model.safetensors``, the lexicon it
read (``lexicon.lex``), ``data.json`` (the files it read, absolute) and ``checksums.json``
(SHA-256 of each of them). :func:`evaluate_run` is ``neurosym eval`` for these runs;
``neurosym generate`` and ``neurosym eval --grammar`` read them through
:func:`neurosym.decode.run.load_run`, which calls :func:`load_lm_run` (native and
Hugging Face models alike).
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import shutil
from collections.abc import Iterator
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurosym.compile.fsg import load_fsg
from neurosym.compile.lexicon import FeatureBank, load_lexicon
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.data.corpora import choose_holdout, sample_sentences
from neurosym.data.text import MIN_BPE_SIZE, SPECIALS, BpeVocab, WordVocab, lm_windows, majority_upos, parse_tagged, read_tagged, read_text
from neurosym.errors import ConfigError, NeurosymError
from neurosym.files import atomic_write_bytes, resolve_data_path
from neurosym.lm.checkpoint import LAST, load_checkpoint
from neurosym.lm.config import Config
from neurosym.lm.fusion import (
    AuxHead, ControlColumns, GatedFusion, build_fusion_lm, control_names, lexical_descriptions, make_batch,
)
from neurosym.lm.idea import IdeaConfig, IdeaOutput, idea_objective, idea_parameters, matched_d_ff, stop_word_ids
from neurosym.lm.losses import aux_bce, class_uniformizer, label_smoothed_ce
from neurosym.lm.metrics import embedding_health, evaluate as evaluate_batches, expected_calibration_error, floor_ppl, reliability_bins, same_pos_miss_rate
from neurosym.lm.hf_model import HFCausalLM, load_base
from neurosym.lm.lora import LoraSettings, with_lora
from neurosym.lm.model import ARCHITECTURE_KEYS, CausalLM, LMSection
from neurosym.lm.semantic_kl import TemperatureSchedule, semantic_kl_terms
from neurosym.vocab import Vocab

BOS = "<bos>"
WORD_SPECIALS = (*SPECIALS, BOS)  # <pad> 0, <unk> 1, <eos> 2, <bos> 3
MAX_WINDOW = 4096
TEXT_SUFFIXES = (".txt", ".tokens", ".raw", ".text", "")
# the files a finished run folder holds besides the trainer's (checksums.json lists them)
VOCAB_FILE, WEIGHTS_FILE, LEXICON_FILE, DATA_FILE, CHECKSUMS_FILE = (
    "vocab.json", "model.safetensors", "lexicon.lex", "data.json", "checksums.json")
# data.grammar, sentences: each split's seed offset from data.seed (train 0 and valid 10,007 are the semantic-fusion recipe's)
SENTENCE_SEEDS = {"train": 0, "valid": 10_007, "test": 20_014}
EVAL_SENTENCES = 256  # sentences per evaluation batch (sentences layout)
EOS_NAMES = ("<eos>", "</s>", "<|endoftext|>", "[SEP]")
PAD_NAMES = ("<pad>", "[PAD]", "<|padding|>")


def _require(ok: bool, key: str, expected: str, value: Any) -> None:
    """A ConfigError ``key: expected ..., got value`` unless ``ok`` (positioned by Config.section)."""
    if not ok:
        shown = json.dumps(value) if isinstance(value, (str, list)) else str(value).replace("True", "true").replace("False", "false")
        raise ConfigError(f"{key}: {expected}, got {shown}")


# ---------------------------------------------------------------------- the sections
@dataclass
class DataSection:
    """``[data]``: the text files (a path or a glob, or a list of them) and the tokenizer, or
    an ``.fsg`` grammar whose sampled sentences stand in for text."""

    train: str | list[str] | None = None
    valid: str | list[str] | None = None
    test: str | list[str] | None = None
    text_field: str = "text"  # .jsonl: the field holding each document's text
    tokenizer: str | None = None  # word | bpe | a tokenizer.json | a folder holding one (None: word, or model.hf's own)
    min_freq: int = 1  # word: rarer training words become <unk>
    bpe_size: int = 8000  # bpe: the vocabulary size
    window: int = 64  # tokens per training window (stride = window)
    max_train_windows: int | None = None  # the first N training windows only
    max_eval_windows: int | None = None  # the first N evaluation windows only
    grammar: str | None = None  # an .fsg: its sampled sentences are the text (and its vocabulary the vocabulary)
    train_sentences: int = 2000  # grammar: sentences sampled for each split (fixed seeds 0, 1, 2)
    valid_sentences: int = 200
    test_sentences: int = 200
    train_seed: int = 0  # grammar: the sampling seed of each split
    valid_seed: int = 1
    test_seed: int = 2
    max_words: int | None = None  # grammar: longer sampled sentences are redrawn (None: no limit)
    layout: Literal["windows", "documents", "sentences"] = "windows"  # documents: one row per document (<bos> doc -> doc <eos>), right-padded; sentences (grammar): one padded row per sentence
    bos: bool = True  # word / bpe: each document starts with <bos> (false: the stream is doc <eos> doc <eos> ..., no <bos> token)
    format: Literal["auto", "lines", "tagged", "jsonl"] = "auto"  # how files are read (auto: by suffix; tagged: CoNLL-U or FORM<TAB>UPOS)
    pos: str | None = None  # a tagged file (CoNLL-U or FORM<TAB>UPOS): every evaluation adds its same-POS miss rate
    pos_tags: str | None = None  # the tagged file whose majority UPOS tags the words (default: data.pos itself)
    seed: int = 0  # grammar, sentences: the corpus seed (split seeds data.seed + 0, 10007, 20014)
    lexicon: str | None = None  # the lexicon of word classes (holdout, uniformizer) and aux targets; default model.fusion's
    holdout: HoldoutSection | None = None  # grammar, sentences: lexicon words never sampled for training

    def __post_init__(self):
        if self.grammar is None and self.train is None:
            raise ConfigError("data.train: expected text files (train = \"FILE\" or a glob), or data.grammar = \"FILE.fsg\"")
        if self.grammar is not None:
            for key in ("train", "valid", "test"):
                _require(getattr(self, key) is None, f"data.{key}", "the grammar's sampled sentences are the text with data.grammar; "
                         "expected no files", getattr(self, key))
            _require(self.tokenizer is None, "data.tokenizer", "the grammar's vocabulary is the vocabulary with data.grammar; expected none",
                     self.tokenizer)
        for key in ("train_sentences", "valid_sentences", "test_sentences"):
            _require(getattr(self, key) >= 1, f"data.{key}", "expected an integer >= 1", getattr(self, key))
        for key in ("train_seed", "valid_seed", "test_seed"):
            _require(0 <= getattr(self, key) < 2**63, f"data.{key}", "expected an integer in [0, 2**63)", getattr(self, key))
        _require(self.max_words is None or self.max_words >= 1, "data.max_words", "expected an integer >= 1", self.max_words)
        _require(1 <= self.window <= MAX_WINDOW, "data.window", f"expected an integer in [1, {MAX_WINDOW}]", self.window)
        _require(self.min_freq >= 1, "data.min_freq", "expected an integer >= 1", self.min_freq)
        _require(self.bpe_size >= MIN_BPE_SIZE, "data.bpe_size", f"expected an integer >= {MIN_BPE_SIZE} (the {len(SPECIALS)} special "
                 "tokens and the 256 bytes)", self.bpe_size)
        _require(bool(self.text_field), "data.text_field", "expected a field name", self.text_field)
        for key in ("max_train_windows", "max_eval_windows"):
            value = getattr(self, key)
            if value is not None:
                _require(value >= 1, f"data.{key}", "expected an integer >= 1", value)
        for key in ("pos", "pos_tags"):
            value = getattr(self, key)
            if value is not None:
                _require(Path(value).is_file(), f"data.{key}", "expected a tagged file (CoNLL-U or FORM<TAB>UPOS)", value)
        _require(self.pos_tags is None or self.pos is not None, "data.pos_tags", "tags the words of data.pos; expected data.pos too",
                 self.pos_tags)
        _require(self.layout in ("windows", "documents", "sentences"), "data.layout", 'expected "windows", "documents" or "sentences"', self.layout)
        if self.layout == "sentences":
            _require(self.grammar is not None, "data.layout", 'the sentences layout lays out sampled sentences; it needs data.grammar', self.layout)
            _require(self.window >= 2, "data.window", "expected at least 2 with the sentences layout (<bos> and a word)", self.window)
        _require(0 <= self.seed < 2**32, "data.seed", "expected an integer in [0, 2**32)", self.seed)
        if self.holdout is not None:
            _require(self.layout == "sentences", "data.holdout", 'held-out words need data.layout = "sentences" (a grammar\'s sentences)', self.layout)
        if self.lexicon is not None:
            _require(Path(self.lexicon).suffix == ".lex", "data.lexicon", "expected a .lex lexicon", self.lexicon)


@dataclass
class HoldoutSection:
    """``[data] holdout = { classes, words }``: ``words`` words of each lexicon class in
    ``classes``, drawn with ``data.seed``, never occur in training (the training grammar is
    the same grammar without them, each arc's probability shared among its remaining words);
    evaluation adds ``seen_ppl`` (targets seen in training) and ``focus_ce`` (targets in
    those classes)."""

    classes: list[str]
    words: int = 3
    blank_input: bool = False  # the held-out words' input embedding is zero (CausalLM.blank_inputs): never trained as inputs
    blank_dropout: float = 0.0  # in training, the seen words of these classes are read as zero with this probability

    def __post_init__(self):
        _require(len(self.classes) >= 1 and len(set(self.classes)) == len(self.classes), "data.holdout.classes",
                 "expected distinct word classes of the lexicon, at least one", self.classes)
        _require(self.words >= 0, "data.holdout.words", "expected a number of words >= 0", self.words)
        _require(0 <= self.blank_dropout < 1, "data.holdout.blank_dropout",
                 "expected a number in [0, 1) (the share of the classes' seen words read as a blank input in training)", self.blank_dropout)


@dataclass
class FusionSection:
    """``[model] fusion = { lexicon = "x.lex" }``: the gated fusion adapter fed by the lexicon's features."""

    lexicon: str
    ignore_case: bool = False  # match vocabulary words to lexicon words case-insensitively
    aux_hidden: int = 128  # the aux head's width (used with [objective] aux)
    control: ControlSection | None = None  # sentences layout: a sentence-level control read off each sentence's features
    lexical_output: bool = False  # logit(v) = h . (E[v] + W_o f(v)), f the lexicon's context-free columns

    def __post_init__(self):
        _require(self.aux_hidden >= 1, "model.fusion.aux_hidden", "expected an integer >= 1", self.aux_hidden)


@dataclass
class ControlSection:
    """``[model] fusion.control = { max_prefixes, final, dropout }``: the gold control
    (:func:`~neurosym.lm.fusion.control_from_features`) fed to the fusion adapter in
    training, each row's zeroed with probability ``dropout``; zero at evaluation."""

    max_prefixes: list[str]
    final: list[str]
    dropout: float = 0.1

    def __post_init__(self):
        _require(0 <= self.dropout < 1, "model.fusion.control.dropout", "expected a number in [0, 1) (the share of rows trained without control)",
                 self.dropout)

    def columns(self) -> ControlColumns:
        return ControlColumns(max_prefixes=tuple(self.max_prefixes), final=tuple(self.final))


@dataclass
class LoraSection:
    """``[model] lora = { r, alpha }``: train LoRA adapters on ``model.hf`` (its weights frozen)."""

    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: list[str] | None = None  # None: peft's default for the architecture

    def __post_init__(self):
        _require(self.r >= 1, "model.lora.r", "expected an integer >= 1", self.r)
        _require(math.isfinite(self.alpha) and self.alpha > 0, "model.lora.alpha", "expected a finite number > 0", self.alpha)
        _require(0 <= self.dropout < 1, "model.lora.dropout", "expected a number in [0, 1)", self.dropout)

    def settings(self) -> LoraSettings:
        return LoraSettings(self.r, self.alpha, self.dropout, self.target_modules)


@dataclass
class ModelSection(LMSection):
    """``[model]``: the architecture (:class:`~neurosym.lm.model.LMSection`, a context of
    ``data.window`` tokens unless ``max_len`` is set), the fusion adapter and the idea gate."""

    d_model: int = 64
    n_layers: int = 2
    d_ff: int = 128
    max_len: int | None = None  # None: data.window
    fusion: FusionSection | None = None
    idea: IdeaConfig | None = None
    hf: str | None = None  # a local transformers causal LM folder (save_pretrained): its architecture and weights
    lora: LoraSection | None = None  # with hf: train LoRA adapters only
    match_idea: int | None = None  # a baseline at equal parameters: d_ff widened by what a tied idea head of this hidden width adds

    def __post_init__(self):
        super().__post_init__()
        if self.lora is not None and self.hf is None:
            raise ConfigError("model.lora: LoRA adapts a transformers model; it needs model.hf = DIR")
        if self.match_idea is not None:
            _require(self.match_idea >= 1, "model.match_idea", "expected the idea head's hidden width, an integer >= 1", self.match_idea)
            _require(self.idea is None and self.hf is None, "model.match_idea",
                     "sizes a native baseline like an idea model; expected no model.idea and no model.hf", self.match_idea)


def _tied_logits(model: nn.Module) -> bool:
    """Whether ``model``'s (ungated) logits are ``hidden @ lm_head.weight.T``, as semantic KL's
    fast path needs: a native :class:`~neurosym.lm.model.CausalLM` with the plain output or
    the idea gate (deferred in training), not the lexical output layer (``h . (E + W_o f)``)
    nor a transformers model (which may scale or bias its logits)."""
    return isinstance(model, CausalLM) and (model.output is None or isinstance(model.output, IdeaOutput))


@dataclass
class SemanticKLSection:
    """``[objective] semantic_kl = { lambda, temperature, ... }`` (the recipe's keys)."""

    lambda_: float = 0.5  # "lambda" in the file: lambda * KL + (1 - lambda) * CE
    temperature: float = 0.1  # T, or T at the first step with a schedule
    temperature_end: float | None = None  # T at the last step (linear / cosine schedules)
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    similarity: Literal["dot", "cosine"] = "cosine"
    path: Literal["auto", "hidden", "logits"] = "auto"  # semantic_kl_terms' fast path (hidden states) or logits path; auto: hidden where it applies

    def __post_init__(self):
        _require(0 <= self.lambda_ <= 1, "objective.semantic_kl.lambda", "expected a number in [0, 1] (the weight of the KL term)", self.lambda_)
        _require(math.isfinite(self.temperature) and self.temperature > 0, "objective.semantic_kl.temperature", "expected a finite number > 0", self.temperature)
        if self.schedule != "constant":
            _require(self.temperature_end is not None, "objective.semantic_kl.temperature_end",
                     f"expected a final temperature for the {self.schedule} schedule", self.temperature_end)
        if self.temperature_end is not None:
            _require(math.isfinite(self.temperature_end) and self.temperature_end > 0, "objective.semantic_kl.temperature_end",
                     "expected a finite number > 0", self.temperature_end)

    def temperatures(self) -> TemperatureSchedule:
        return TemperatureSchedule(self.temperature, self.temperature_end, self.schedule)


@dataclass
class AuxSection:
    """``[objective] aux = { weight }``: the fusion aux head predicts the next token's features."""

    weight: float = 0.5
    hidden: int = 128  # the aux head's width on a model without fusion (with fusion: model.fusion.aux_hidden)

    def __post_init__(self):
        _require(math.isfinite(self.weight) and self.weight >= 0, "objective.aux.weight", "expected a finite number >= 0", self.weight)
        _require(self.hidden >= 1, "objective.aux.hidden", "expected an integer >= 1", self.hidden)


@dataclass
class UniformizerSection:
    """``[objective] uniformizer = { weight, classes, per_class }``: ``weight`` times the KL
    of the model's distribution within a word class from uniform, at the positions whose
    target is in the class (:func:`~neurosym.lm.losses.class_uniformizer`); one class of
    all ``classes``' words, or (``per_class``) each class on its own."""

    weight: float = 0.01
    classes: list[str] | None = None  # lexicon classes; None: data.holdout.classes
    per_class: bool = False

    def __post_init__(self):
        _require(math.isfinite(self.weight) and self.weight >= 0, "objective.uniformizer.weight", "expected a finite number >= 0", self.weight)


@dataclass
class ObjectiveSection:
    """``[objective]``: cross-entropy always (label-smoothed with ``label_smoothing``);
    semantic KL, the aux loss and the uniformizer when given."""

    semantic_kl: SemanticKLSection | None = None
    aux: AuxSection | None = None
    uniformizer: UniformizerSection | None = None
    label_smoothing: float = 0.0  # the cross-entropy's smoothing mass, spread over the vocabulary (plain CE only)

    def __post_init__(self):
        _require(0 <= self.label_smoothing < 1, "objective.label_smoothing", "expected a number in [0, 1)", self.label_smoothing)


def objective_section(config: Config) -> ObjectiveSection:
    """``[objective]`` checked; ``lambda`` (a Python keyword) is the field ``lambda_``."""
    table = {k: dict(v) if isinstance(v, dict) else v for k, v in config.objective.items()}
    kl = table.get("semantic_kl")
    if isinstance(kl, dict):
        if "lambda_" in kl:
            raise config.error("objective.semantic_kl", "unknown key 'lambda_'; did you mean 'lambda'?")
        if "lambda" in kl:
            kl["lambda_"] = kl.pop("lambda")
    try:
        return dataclasses.replace(config, objective=table).section("objective", ObjectiveSection)
    except ConfigError as err:
        raise ConfigError(str(err).replace("lambda_", "lambda")) from None


# ---------------------------------------------------------------------- files
def expand_files(config: Config, key: str) -> list[Path]:
    """The files ``[data] key`` names: each entry a path or a glob (``*``, ``?``, ``[``;
    ``**`` for sub-folders), relative to the working directory; a ConfigError at the key
    when a path is missing or a glob matches nothing."""
    value = config.data.get(key)
    entries = [value] if isinstance(value, str) else list(value or [])
    out: list[Path] = []
    for entry in entries:
        if any(c in entry for c in "*?["):
            matched = sorted(Path(p) for p in glob.glob(entry, recursive=True) if Path(p).is_file())
            if not matched:
                raise config.error(f"data.{key}", f"no file matches {entry!r}")
            out += matched
        else:
            path = Path(entry)
            if not path.is_file():
                raise config.error(f"data.{key}", f"no such file {entry!r}" if not path.exists() else f"{entry!r} is a folder, not a file")
            out.append(path)
    return out


def read_documents(path: Path, text_field: str = "text", format: str = "auto") -> list[str]:
    """The documents of one file, by ``format`` (``data.format``) or, with ``auto``, by its
    suffix (under an optional ``.gz``): ``.conllu`` (or ``tagged``: CoNLL-U or
    ``FORM<TAB>UPOS``): one sentence each (its FORM column, space-joined); ``.jsonl``: each
    line's ``text_field``; anything else (``lines``): each non-blank line. A bad line is a
    NeurosymError at ``path:line``."""
    text = read_text(path)
    suffix = Path(path.name[: -len(".gz")]).suffix if path.name.endswith(".gz") else path.suffix
    if format == "auto":
        format = {".conllu": "tagged", ".jsonl": "jsonl"}.get(suffix, "lines")
    if format == "tagged":
        return [" ".join(s.forms) for s in parse_tagged(text, str(path))]
    if format == "jsonl":
        docs = []
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise NeurosymError(f"{path}:{n}:{err.colno}: not a JSON line ({err.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
                raise NeurosymError(f"{path}:{n}:1: expected an object with a string field {text_field!r} (data.text_field)")
            if obj[text_field].strip():
                docs.append(obj[text_field])
        return docs
    return [line for line in text.split("\n") if line.strip()]


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, in hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------------- vocabularies
def build_vocab(config: Config, d: DataSection, docs: list[str]) -> Vocab:
    """The run's vocabulary from the training documents: ``word`` (whitespace words seen
    ``min_freq`` times, most frequent first, after ``<pad> <unk> <eos> <bos>``), ``bpe``
    (learnt on the documents), or a tokenizer file or folder."""
    if d.tokenizer is None or d.tokenizer == "word":
        ranked = WordVocab.build((doc.split() for doc in docs), min_freq=d.min_freq)
        words = [w for w in ranked.tokens[len(SPECIALS):] if w != BOS]
        if not words:  # every word would read as <unk>: nothing to learn, refused before the run folder exists
            raise config.error("data.min_freq", f"no word of the training text occurs {d.min_freq} times: the vocabulary would hold "
                               "only the special tokens; lower data.min_freq")
        return Vocab.words(words, specials=WORD_SPECIALS if d.bos else SPECIALS)
    if d.tokenizer == "bpe":
        bpe = BpeVocab.train(docs, vocab_size=d.bpe_size)  # byte-level: spaces stay in the sub-words, decode restores the text
        tok = bpe.tokenizer
        if d.bos:
            tok.add_special_tokens([BOS])
        return Vocab.from_tokenizer(tok)
    path = Path(d.tokenizer)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise config.error("data.tokenizer", f'expected "word", "bpe", a tokenizer.json or a folder holding one, got {d.tokenizer!r} '
                           f"({path} is not there)")
    try:
        vocab = Vocab.from_tokenizer(path)
    except NeurosymError as err:
        raise config.error("data.tokenizer", str(err)) from None
    if not any(name in vocab for name in EOS_NAMES):
        raise config.error("data.tokenizer", f"{path}: the tokenizer has no end-of-text token ({', '.join(EOS_NAMES)})")
    return vocab


def special_ids(vocab: Vocab) -> tuple[int, int, int | None]:
    """``(pad, eos, bos)`` of a vocabulary: its own tokens where it has them; a tokenizer
    without a padding token pads with its unknown (else its end) token, which then counts
    as never predicted."""
    eos = next(vocab.id(n) for n in EOS_NAMES if n in vocab)
    pad = next((vocab.id(n) for n in PAD_NAMES if n in vocab), vocab.unk if vocab.unk is not None else eos)
    return pad, eos, vocab.id(BOS) if BOS in vocab else None


def encode_stream(vocab: Vocab, docs: list[str] | list[list[int]]) -> tuple[Tensor, Tensor]:
    """``(inputs, targets)`` streams (N,) of ``<bos> doc <eos> ...``: the targets are the
    inputs shifted by one, with ``<pad>`` where the next token is ``<bos>`` (never predicted)."""
    pad, eos, bos = special_ids(vocab)
    out: list[int] = []
    for doc in docs:
        if bos is not None:
            out.append(bos)
        out += vocab.encode(doc) if isinstance(doc, str) else list(doc)  # text, or a sampled sentence's ids
        out.append(eos)
    stream = torch.tensor(out, dtype=torch.long)
    targets = stream.clone()
    if bos is not None:
        targets[stream == bos] = pad
    return stream, targets


def windows(vocab: Vocab, docs: list[str] | list[list[int]], window: int, limit: int | None) -> tuple[Tensor, Tensor]:
    """LM windows (W, window) of the documents' stream (:func:`neurosym.data.text.lm_windows`)."""
    stream, targets = encode_stream(vocab, docs)
    ids, _ = lm_windows(stream, window)
    _, tgt = lm_windows(targets, window)
    return (ids[:limit], tgt[:limit]) if limit is not None else (ids, tgt)


def document_rows(vocab: Vocab, docs: list[str] | list[list[int]]) -> tuple[Tensor, Tensor]:
    """One row per document, ``ids = <bos> w1..wn`` and ``targets = w1..wn <eos>`` (no
    ``<bos>`` in the vocabulary: ``ids = w1..wn``, ``targets = w2..wn <eos>``),
    right-padded with ``<pad>`` to the longest row: (N, L) each."""
    pad, eos, bos = special_ids(vocab)
    seqs = [vocab.encode(doc) if isinstance(doc, str) else list(doc) for doc in docs]
    pairs = [([bos, *w], [*w, eos]) if bos is not None else (w, [*w[1:], eos]) for w in seqs]
    width = max((len(i) for i, _ in pairs), default=0)
    ids = torch.full((len(pairs), width), pad, dtype=torch.long)
    targets = torch.full((len(pairs), width), pad, dtype=torch.long)
    for row, (i, t) in enumerate(pairs):
        ids[row, : len(i)] = torch.tensor(i, dtype=torch.long)
        targets[row, : len(t)] = torch.tensor(t, dtype=torch.long)
    return ids, targets


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel wrapper (or the model itself)."""
    return model.module if hasattr(model, "module") else model


# ---------------------------------------------------------------------- the task
class LMTask:
    """The built-in language-model task (the trainer's task protocol); see the module docstring.

    ``run_dir`` (default ``config.run_dir``) is where a trained run's vocabulary and
    lexicon are read from when its checkpoint is there (``neurosym eval`` and ``generate``
    rebuild the task without the training text)."""

    def __init__(self, config: Config, run_dir: str | Path | None = None):
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else config.run_dir
        self.data_cfg = d = config.section("data", DataSection)
        self.model_cfg = m = config.section("model", ModelSection)
        self.objective = o = objective_section(config)
        self.batch_size = config.optim.batch_size
        if m.max_len is not None and m.max_len < d.window and d.layout != "documents":
            raise config.error("model.max_len", f"expected at least data.window = {d.window} (the longest input), got {m.max_len}")
        if o.aux is not None and m.fusion is None and d.lexicon is None:
            raise config.error("objective.aux", "the aux loss predicts lexicon features: it needs [model] fusion = { lexicon = ... } "
                               "or data.lexicon")
        if o.label_smoothing > 0 and (o.semantic_kl is not None or m.idea is not None):
            raise config.error("objective.label_smoothing", "smooths the plain cross-entropy only; leave it out with semantic_kl or idea")
        if m.fusion is not None and d.lexicon is not None and m.fusion.lexicon != d.lexicon:
            raise config.error("data.lexicon", f"the task reads one lexicon; model.fusion.lexicon is {m.fusion.lexicon!r}, data.lexicon {d.lexicon!r}")
        if m.fusion is not None and (m.fusion.control is not None or m.fusion.lexical_output):
            key = "model.fusion.control" if m.fusion.control is not None else "model.fusion.lexical_output"
            if d.layout != "sentences":
                raise config.error(key, 'needs data.layout = "sentences" (a grammar\'s sentences, one per row)')
            if m.hf is not None or m.idea is not None:
                raise config.error(key, "native models without the idea gate only (the idea gate is an output layer too)")
        if o.semantic_kl is not None and o.semantic_kl.path == "hidden" and (m.hf is not None or (m.fusion is not None and m.fusion.lexical_output)):
            raise config.error("objective.semantic_kl.path", 'the fast path needs logits = hidden @ W^T, which model.hf and '
                               'model.fusion.lexical_output do not give; use "auto" or "logits"')
        if o.semantic_kl is not None and m.idea is not None and o.semantic_kl.lambda_ >= 1:
            raise config.error("objective.semantic_kl", "lambda = 1 leaves no cross-entropy for the idea gate to train; use lambda < 1")
        if m.hf is not None:
            given = [k for k in ARCHITECTURE_KEYS if k in config.model]
            if given:
                raise config.error(f"model.{given[0]}", "the architecture comes from model.hf; leave the native keys out")
        self.kl = o.semantic_kl
        self.temperatures = None if self.kl is None else self.kl.temperatures()
        self.temperature = None if self.temperatures is None else self.temperatures.start
        trained = (self.run_dir / LAST).is_file() and (self.run_dir / VOCAB_FILE).is_file()
        if trained:  # a finished run: its own vocabulary and the files it recorded, no training text needed
            recorded = self.run_dir / DATA_FILE
            listed = json.loads(recorded.read_text(encoding="utf-8")) if recorded.is_file() else {}
            self.hf_dir = Path(listed.pop("hf")) if "hf" in listed else (Path(m.hf) if m.hf is not None else None)
            self.grammar_path = Path(listed.pop("grammar")) if "grammar" in listed else (Path(d.grammar) if d.grammar else None)
            self.files = {split: [Path(f) for f in names] for split, names in listed.items()}
            self.vocab = Vocab.from_json(json.loads((self.run_dir / VOCAB_FILE).read_text(encoding="utf-8")))
            self.train_docs: list[str] | list[list[int]] | None = None
            self.auto = self._grammar() if self.grammar_path is not None else None
        else:
            self.hf_dir = Path(m.hf) if m.hf is not None else None
            if self.hf_dir is not None and not (self.hf_dir / "config.json").is_file():
                raise config.error("model.hf", f"{m.hf}: not a transformers model folder (no config.json)")
            if self.hf_dir is not None and d.tokenizer is None:
                d = self.data_cfg = dataclasses.replace(d, tokenizer=str(self.hf_dir))
            self.files = {split: expand_files(config, split) for split in ("train", "valid", "test") if config.data.get(split) is not None}
            self.grammar_path = Path(d.grammar) if d.grammar is not None else None
            self.auto = self._grammar() if self.grammar_path is not None else None
            if self.auto is not None:
                self.vocab = self.auto.vocab
                self.train_docs = self.sample("train") if d.layout != "sentences" else None
            else:
                self.train_docs = [doc for f in self.files["train"] for doc in read_documents(f, d.text_field, d.format)]
                if not self.train_docs:
                    raise config.error("data.train", "the training files hold no text")
                self.vocab = build_vocab(config, d, self.train_docs)
        self.base: nn.Module | None = None
        if self.hf_dir is not None:  # loaded (and checked) now, so a bad folder is refused before the run folder exists
            try:
                self.base = load_base(self.hf_dir)
            except NeurosymError as err:
                raise config.error("model.hf", str(err)) from None
            rows = self.base.get_input_embeddings().num_embeddings
            if len(self.vocab) > rows:
                raise config.error("model.hf", f"the tokenizer has {len(self.vocab):,} tokens, the model embeds {rows:,}")
            positions = getattr(self.base.config, "max_position_embeddings", None) or getattr(self.base.config, "n_positions", None)
            if positions is not None and d.window > positions:
                raise config.error("data.window", f"expected at most the model's {positions} positions, got {d.window}")
        self.pad_id, self.eos_id, self.bos_id = special_ids(self.vocab)
        lexicon = m.fusion.lexicon if m.fusion is not None else d.lexicon
        key = "model.fusion" if m.fusion is not None else "data.lexicon"
        self.bank = self._bank(lexicon, m.fusion is not None and m.fusion.ignore_case, key, trained) if lexicon is not None else None
        self.holdout: dict[str, list[str]] | None = None  # sentences layout with data.holdout: {class: held-out words}
        self.seen_ids = self.focus_ids = None
        self.control = m.fusion.control.columns() if m.fusion is not None and m.fusion.control is not None else None
        self.n_control = len(control_names(self.bank.names, self.control)) if self.control is not None else 0
        self._train: tuple[Tensor, Tensor] | None = None
        self._eval: dict[str, tuple[Tensor, Tensor]] = {}
        self._pos: dict[tuple[str, str | None], tuple[list[str | None], Tensor, Tensor]] = {}
        self._sentences: dict[str, list[list[int]]] = {}
        self._train_rows: dict[str, Tensor] | None = None
        if d.layout == "sentences":
            self._holdout()
        self.uniformizer_groups = self._uniformizer_groups() if o.uniformizer is not None else []
        if d.layout == "sentences":
            if not trained:  # sampled now, so a grammar that cannot give them is refused before the run folder exists
                self.train_rows()
                self.sentences("valid")
        elif not trained:  # data too short for one window is refused now, before the trainer writes the run folder
            self.train_windows()
            if self.has_split("valid") and len(self.eval_windows("valid")[0]) == 0:
                raise config.error("data.valid", f"the validation text is shorter than one window of {d.window} tokens")

    def _grammar(self) -> WeightedAutomaton:
        """The ``data.grammar`` FSG (a path, or a shipped ``grammars/...`` file), compiled over its own words."""
        path = self.grammar_path
        if path.suffix != ".fsg":
            raise self.config.error("data.grammar", f"expected an .fsg grammar, got {str(path)!r}")
        try:
            path = self.grammar_path = resolve_data_path(path)
        except NeurosymError as err:
            raise self.config.error("data.grammar", str(err)) from None
        if not path.is_file():
            raise self.config.error("data.grammar", f"no such file {str(path)!r}")
        try:
            auto = load_fsg(path)
        except NeurosymError as err:
            raise self.config.error("data.grammar", str(err)) from None
        needed = ("<eos>", "<pad>", BOS) if self.data_cfg.layout == "sentences" else ("<eos>", "<pad>")
        if any(t not in auto.vocab for t in needed):
            raise self.config.error("data.grammar", f"{path}: its vocabulary lacks one of {', '.join(needed)}")
        return auto

    def floor(self) -> float | None:
        """With ``data.grammar``: the grammar's exact perplexity floor (every word and
        ``<eos>`` predicted, :func:`neurosym.lm.metrics.floor_ppl`); None for text."""
        if self.auto is None:
            return None
        if getattr(self, "_floor", None) is None:
            self._floor = floor_ppl(self.auto, with_eos=True)
        return self._floor

    def _bank(self, lexicon: str, ignore_case: bool, key: str, trained: bool) -> FeatureBank:
        """The lexicon's feature bank over the vocabulary (``key`` names the config key in errors)."""
        copy = self.run_dir / LEXICON_FILE
        try:
            path = copy if trained and copy.is_file() else resolve_data_path(lexicon)
        except NeurosymError as err:
            raise self.config.error(key, f"lexicon: {err}") from None
        if not path.is_file():
            raise self.config.error(key, f"lexicon: no such file {lexicon!r}")
        self.lexicon_path = path
        try:
            bank = load_lexicon(path, self.vocab, ignore_case=ignore_case)
        except NeurosymError as err:
            raise self.config.error(key, f"lexicon: {err}") from None
        if bank.roles and self.data_cfg.layout != "sentences":
            raise self.config.error(key, f"lexicon {lexicon}: its rules read role(s) {', '.join(bank.roles)}, "
                                    'which plain text does not mark; use a lexicon without role(...) rules (or a grammar with data.layout = "sentences")')
        covered = int((bank.table != 0).any(-1).sum())
        if covered == 0:
            raise self.config.error(key, f"lexicon {lexicon} does not cover the vocabulary: none of its "
                                    f"{len(self.vocab):,} tokens has a feature (check the words' spelling and case, or ignore_case = true)")
        self.coverage = covered
        return bank

    def _class_ids(self, classes: list[str], key: str) -> list[Tensor]:
        """The sorted vocabulary ids of each lexicon class's words; a ConfigError at ``key`` for an unknown class."""
        if self.bank is None:
            raise self.config.error(key, "word classes come from a lexicon: set data.lexicon (or model.fusion)")
        lex = self.bank.lexicon
        unknown = [c for c in classes if c not in lex.classes]
        if unknown:
            raise self.config.error(key, f"the lexicon has no class {', '.join(map(repr, unknown))}; its classes are {', '.join(lex.classes)}")
        return [torch.tensor(sorted({self.vocab.id(w) for w in lex.class_words(c) if w in self.vocab}), dtype=torch.long) for c in classes]

    def _uniformizer_groups(self) -> list[Tensor]:
        """``[objective] uniformizer``'s classes as id tensors: one of all their words, or one per class."""
        u, holdout = self.objective.uniformizer, self.data_cfg.holdout
        classes = u.classes if u.classes is not None else holdout.classes if holdout is not None else None
        if not classes:
            raise self.config.error("objective.uniformizer", "expected classes = [...] (lexicon word classes), or data.holdout's classes")
        groups = self._class_ids(classes, "objective.uniformizer")
        return groups if u.per_class else [torch.cat(groups).unique()]

    def _holdout(self) -> None:
        """Sentences layout: the held-out words (``data.holdout``), the training grammar
        without them, and the ids behind ``seen_ppl`` and ``focus_ce``."""
        h, vocab = self.data_cfg.holdout, self.vocab
        self.train_auto = self.auto
        if h is None:
            return
        classes = self._class_ids(h.classes, "data.holdout")
        lex = self.bank.lexicon
        small = {c: len(lex.class_words(c)) for c in h.classes if len(lex.class_words(c)) < h.words}
        if small:
            raise self.config.error("data.holdout", f"cannot hold out {h.words} words of each class: "
                                    + ", ".join(f"{c} has {n}" for c, n in small.items()))
        self.holdout = choose_holdout({c: lex.class_words(c) for c in h.classes}, h.words, self.data_cfg.seed)
        held_words = [w for ws in self.holdout.values() for w in ws]
        held = {vocab.id(w) for w in held_words}
        self.focus_ids = torch.cat(classes).unique()
        self.seen_ids = torch.tensor([i for i in range(len(vocab)) if i not in held], dtype=torch.long)
        try:  # the same grammar without the held-out words, each arc's probability shared among its remaining words
            self.train_auto = load_fsg(self.grammar_path, self.auto.vocab, exclude=held_words)
        except NeurosymError as err:
            raise self.config.error("data.holdout", str(err)) from None

    # ------------------------------------------------------------------ data
    def train_windows(self) -> tuple[Tensor, Tensor]:
        if self._train is None:
            if self.train_docs is None and self.auto is not None:  # a finished run resumed: the same samples
                self.train_docs = self.sample("train")
            elif self.train_docs is None:  # a finished run resumed: the files it recorded
                self.train_docs = [doc for f in self.files.get("train", []) for doc in read_documents(f, self.data_cfg.text_field,
                                                                                                       self.data_cfg.format)]
            self._train = self.layout_rows(self.train_docs, self.data_cfg.max_train_windows)
            if len(self._train[0]) == 0:
                raise self.config.error("data.train", f"the training text is shorter than one window of {self.data_cfg.window} tokens")
            longest, room = self._train[0].shape[1], self.model_cfg.max_len or self.data_cfg.window
            if self.data_cfg.layout == "documents" and self.base is None and longest > room:
                raise self.config.error("model.max_len", f"expected at least the longest document row, {longest} tokens "
                                        f"(or a smaller data.max_words), got {room}")
            if self.model_cfg.idea is not None:  # the most frequent training targets, specials left out
                specials = [i for i in (self.pad_id, self.eos_id, self.bos_id, self.vocab.unk) if i is not None]
                self.stop_ids = stop_word_ids(self._train[1], self.model_cfg.idea.stop_words, len(self.vocab), exclude=specials)
        return self._train

    def eval_windows(self, split: str, files: list[Path] | None = None) -> tuple[Tensor, Tensor]:
        """The windows of ``split``'s files (``files`` replaces them), or with ``data.grammar``
        its sentences sampled with the split's seed."""
        if split not in self._eval:
            if self.auto is not None:
                docs: list = self.sample(split)
            else:
                files = self.files.get(split, []) if files is None else files
                docs = [doc for f in files for doc in read_documents(f, self.data_cfg.text_field, self.data_cfg.format)]
            self._eval[split] = self.layout_rows(docs, self.data_cfg.max_eval_windows)
        return self._eval[split]

    def sample(self, split: str) -> list[list[int]]:
        """``data.grammar``: the split's sentences (``<split>_sentences`` of them, seed
        ``<split>_seed``, at most ``max_words`` words each)."""
        d = self.data_cfg
        return self.auto.sample(getattr(d, f"{split}_sentences"), max_len=d.max_words, seed=getattr(d, f"{split}_seed"))

    def layout_rows(self, docs: list[str] | list[list[int]], limit: int | None) -> tuple[Tensor, Tensor]:
        """The model's rows (N, L) of ``docs``: windows of the stream, or with ``data.layout =
        "documents"`` one document per row (:func:`document_rows`)."""
        if self.data_cfg.layout == "documents":
            ids, targets = document_rows(self.vocab, docs)
            return (ids[:limit], targets[:limit]) if limit is not None else (ids, targets)
        return windows(self.vocab, docs, self.data_cfg.window, limit)

    def sentences(self, split: str) -> list[list[int]]:
        """Sentences layout: ``split``'s sentences (token ids, no specials), at most
        ``data.window - 1`` words each, sampled with the seed ``data.seed +``
        :data:`SENTENCE_SEEDS` ``[split]`` (training from the grammar without the held-out words)."""
        if split not in self._sentences:
            d = self.data_cfg
            auto = self.train_auto if split == "train" else self.auto
            try:
                self._sentences[split] = sample_sentences(auto, getattr(d, f"{split}_sentences"), seed=d.seed + SENTENCE_SEEDS[split],
                                                          max_words=d.window - 1)
            except NeurosymError as err:
                raise self.config.error("data.holdout" if d.holdout is not None else "data.grammar", str(err)) from None
        return self._sentences[split]

    def train_rows(self) -> dict[str, Tensor]:
        """Sentences layout: every training sentence as one padded row
        (:func:`~neurosym.lm.fusion.make_batch`, with the control columns when set)."""
        if self._train_rows is None:
            self._train_rows = make_batch(self.sentences("train"), self.auto, self.bank, control=self.control)
        return self._train_rows

    def sentence_batches(self, split: str) -> Iterator[dict[str, Tensor]]:
        """Sentences layout: ``split``'s sentences in batches of :data:`EVAL_SENTENCES` rows,
        the control (if any) zero: every model is evaluated unconditioned."""
        sentences = self.sentences(split)
        for i in range(0, len(sentences), EVAL_SENTENCES):
            batch = make_batch(sentences[i : i + EVAL_SENTENCES], self.auto, self.bank)
            if self.n_control:
                batch["control"] = torch.zeros(len(batch["ids"]), self.n_control)
            yield batch

    def inputs(self, ids: Tensor, targets: Tensor) -> dict[str, Tensor]:
        """The batch of windows ids, targets (B, L): with fusion also ``features`` (B, L, F)
        of the inputs and ``aux_targets`` (B, L, F) of the next tokens (one causal pass over
        the window and its next token)."""
        batch = {"ids": ids, "targets": targets}
        if self.bank is not None:
            nxt = torch.where(targets[:, -1:] == self.pad_id, self.bos_id if self.bos_id is not None else self.pad_id, targets[:, -1:])
            feats = self.bank.featurize(torch.cat([ids, nxt], dim=1))  # (B, L + 1, F)
            batch["features"], batch["aux_targets"] = feats[:, :-1], feats[:, 1:]
        return batch

    # ------------------------------------------------------------------ the task protocol
    def build_model(self, config: Config) -> CausalLM | HFCausalLM:
        m, V, aux = self.model_cfg, len(self.vocab), self.objective.aux
        h = self.data_cfg.holdout
        if self.base is not None:
            if h is not None and (h.blank_input or h.blank_dropout > 0):
                raise self.config.error("data.holdout", "blank_input and blank_dropout are for the native model, not model.hf")
            return self._build_hf(m)
        lm = m.lm_config(V, self.pad_id, max_len=m.max_len or self.data_cfg.window)
        if m.match_idea is not None:
            extra = idea_parameters(lm.d_model, V, m.match_idea, True)
            lm = dataclasses.replace(lm, d_ff=matched_d_ff(lm.d_model, lm.n_layers, lm.d_ff, extra))
        output = IdeaOutput(lm.d_model, V, self.idea_config()) if m.idea is not None else None
        if m.fusion is not None:
            f = m.fusion
            model = build_fusion_lm(lm, len(self.bank), self.n_control, aux_hidden=f.aux_hidden if aux is not None else None,
                                    control_dropout=f.control.dropout if f.control is not None else 0.0,
                                    descriptions=lexical_descriptions(self.bank) if f.lexical_output else None, output=output)
        else:
            heads = {"aux": AuxHead(lm.d_model, len(self.bank), aux.hidden)} if aux is not None else None
            model = CausalLM(lm, heads=heads, output=output)
        if h is not None and (h.blank_input or h.blank_dropout > 0):  # data.holdout: blank inputs (CausalLM.blank_inputs)
            held = {self.vocab.id(w) for ws in self.holdout.values() for w in ws}
            seen_class_words = [int(i) for i in self.focus_ids if int(i) not in held]
            model.blank_inputs(sorted(held) if h.blank_input else [], seen_class_words, h.blank_dropout)
        return model

    def idea_config(self) -> IdeaConfig:
        """``[model] idea``, with ``ramp`` (a share of the training steps) made ``ramp_steps``."""
        c = self.model_cfg.idea
        if c.ramp is None:
            return c
        return dataclasses.replace(c, ramp_steps=round(c.ramp * self.steps_per_epoch() * self.config.optim.epochs))

    def _build_hf(self, m: ModelSection) -> HFCausalLM:
        """The transformers model with the plug-ins; LoRA here, after the trainer has seeded
        the run (the adapters' A matrices are random). The loaded base is used once."""
        base, self.base = self.base, None
        if base is None:
            base = load_base(self.hf_dir)
        if m.lora is not None:
            base = with_lora(base, m.lora.settings())
        D = base.get_input_embeddings().embedding_dim
        rows = base.get_output_embeddings().weight.shape[0]
        adapter = GatedFusion(len(self.bank), D) if m.fusion is not None else None
        aux = self.objective.aux
        heads = {"aux": AuxHead(D, len(self.bank), m.fusion.aux_hidden if m.fusion is not None else aux.hidden)} if aux is not None else None
        output = IdeaOutput(D, rows, self.idea_config()) if m.idea is not None else None
        return HFCausalLM(base, adapter=adapter, heads=heads, output=output)

    def steps_per_epoch(self) -> int:
        if self.data_cfg.layout == "sentences":
            return math.ceil(len(self.sentences("train")) / self.batch_size)
        return math.ceil(len(self.train_windows()[0]) / self.batch_size)

    def train_batches(self, epoch: int, generator: torch.Generator) -> Iterator[dict[str, Tensor]]:
        if self.data_cfg.layout == "sentences":  # shuffled sentences, each batch cut to its longest row
            data = self.train_rows()
            order = torch.randperm(len(data["ids"]), generator=generator)
            for i in range(0, len(order), self.batch_size):
                batch = {k: v[order[i : i + self.batch_size]] for k, v in data.items()}
                width = int(batch["lengths"].max())
                yield {k: (v[:, :width] if v.dim() >= 2 and k != "control" else v) for k, v in batch.items()}
            return
        ids, targets = self.train_windows()
        order = torch.randperm(len(ids), generator=generator)
        for i in range(0, len(order), self.batch_size):
            rows = order[i : i + self.batch_size]
            x, y = ids[rows], targets[rows]
            if self.data_cfg.layout == "documents":  # trim the padding every row of the batch has
                width = int((y != self.pad_id).sum(1).max())
                x, y = x[:, :width], y[:, :width]
            yield self.inputs(x, y)

    def at_step(self, step: int, total_steps: int) -> None:
        if self.temperatures is not None:
            self.temperature = self.temperatures.at(step, total_steps)

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        core = unwrap(model)
        ids, y = batch["ids"], batch["targets"]
        inputs = {k: batch[k] for k in ("features", "control") if k in batch} if self.model_cfg.fusion is not None else {}
        lam = self.kl.lambda_ if self.kl is not None else 0.0
        idea = core.output if isinstance(core.output, IdeaOutput) else None
        logs: dict[str, float] = {}
        if idea is not None:  # the gate is applied inside the fused objective, at this pass's alpha
            alpha, gated = idea.alpha, idea.gated
            idea.gated = False
            try:
                out = model(ids, **inputs)
            finally:
                idea.gated = gated
            c = idea.config
            stop = getattr(self, "stop_ids", None)
            part, ce, bce = idea_objective(out.logits, out.extras["idea"], y, alpha=alpha, window=c.window, pad_id=self.pad_id,
                                           beta=c.beta, eps=c.eps, variant=c.variant, weight=c.weight / (1.0 - lam),
                                           stop_ids=None if stop is None else stop.to(y.device), pos_weight=c.pos_weight,
                                           kernel=c.kernel)
            total = (1.0 - lam) * part  # = (1 - lam) * ce(gated) + weight * bce
            logs.update(ce=float(ce), idea_bce=float(bce), idea_alpha=alpha)
        else:
            out = model(ids, **inputs)
        if self.kl is not None:  # on the ungated logits, by the fast path (hidden @ W^T) or the logits path
            fast = self.kl.path != "logits" and _tied_logits(core)
            kl, ce_plain = semantic_kl_terms(out.logits, y, core.lm_head.weight, self.temperature, self.kl.similarity,
                                             pad_id=self.pad_id, hidden=out.hidden if fast else None)
            total = (total + lam * kl) if idea is not None else lam * kl + (1.0 - lam) * ce_plain
            logs.update(kl=float(kl.detach()), temperature=float(self.temperature))
            if idea is None:
                logs["ce"] = float(ce_plain.detach())
        elif idea is None and self.objective.label_smoothing > 0:
            total = label_smoothed_ce(out.logits, y, self.objective.label_smoothing, self.pad_id)
            logs["ce"] = float(total.detach())
        elif idea is None:
            V = out.logits.shape[-1]
            total = F.cross_entropy(out.logits.reshape(-1, V).float(), y.reshape(-1), ignore_index=self.pad_id)
            logs["ce"] = float(total.detach())
        if self.uniformizer_groups:
            weight = self.objective.uniformizer.weight
            uni = sum(class_uniformizer(out.logits, y, c.to(out.logits.device), weight) for c in self.uniformizer_groups)
            total = total + uni
            logs["uniformizer"] = float(uni.detach())
        if self.objective.aux is not None:
            aux = aux_bce(out.extras["aux"], batch["aux_targets"], y != self.pad_id, self.objective.aux.weight)
            total = total + aux
            logs["aux"] = float(aux.detach())
        return total, logs

    def has_split(self, split: str) -> bool:
        """Whether there is anything to evaluate on for ``split``."""
        return self.auto is not None or bool(self.files.get(split))

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        if not self.has_split("valid"):
            return {}
        return self.figures(model, "valid")

    def figures(self, model: nn.Module, split: str, files: list[Path] | None = None, reliability: bool = False) -> dict[str, Any]:
        """Every figure of ``split`` (:meth:`evaluate_split`, with its reliability diagram's
        bins when asked), the output embedding's health
        (:func:`~neurosym.lm.metrics.embedding_health` of its word rows, the specials left
        out) and, with ``data.pos``, the same-POS miss rate (:meth:`same_pos`)."""
        out = self.evaluate_split(model, split, files, reliability=reliability)
        specials = sum(s is None for s in self.vocab.surfaces[: len(self.vocab)]) if self.vocab.kind == "word" else 0
        out.update(embedding_health(unwrap(model).lm_head.weight[specials : len(self.vocab)]))
        d = self.data_cfg
        if d.pos is not None:
            pos = self.same_pos(model, Path(d.pos), tags_from=Path(d.pos_tags) if d.pos_tags else None)
            out.update(same_pos_miss=pos["same_pos_miss"], pos_misses=pos["pos_misses"])
        return out

    @torch.no_grad()
    def evaluate_split(self, model: nn.Module, split: str, files: list[Path] | None = None, batch_size: int = 64,
                       reliability: bool = False) -> dict[str, Any]:
        """PPL, top-1 accuracy and ECE of the model's distribution over ``split``'s windows
        (every target but ``<pad>``, ``<eos>`` included; ``reliability``: also the
        reliability diagram's bins, :func:`~neurosym.lm.metrics.reliability_bins`, under
        ``"reliability"``); with the idea gate also ``ppl_ungated``. Sentences layout: :func:`neurosym.lm.metrics.evaluate` over the
        split's sentences (``ppl``, ``nll``, ``tokens``; ``seen_ppl`` and ``focus_ce`` with
        held-out words; ``sem_mse`` with an aux head), and ``floor_ppl``."""
        if self.data_cfg.layout == "sentences":
            keys = ("features", "control") if self.model_cfg.fusion is not None else ()
            result = evaluate_batches(model, self.sentence_batches(split), seen_ids=self.seen_ids, focus_ids=self.focus_ids,
                                      input_keys=keys, pad_id=self.pad_id)
            return {**result, "floor_ppl": self.floor()}
        ids, targets = self.eval_windows(split, files)
        if len(ids) == 0:
            raise NeurosymError(f"data.{split}: no evaluation window of {self.data_cfg.window} tokens")
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        nll = {"ppl": 0.0, "ppl_ungated": 0.0}
        n, conf, hit = 0, [], []
        try:
            for i in range(0, len(ids), batch_size):
                batch = self.inputs(ids[i : i + batch_size], targets[i : i + batch_size])
                inputs = {"features": batch["features"].to(device)} if "features" in batch and self.model_cfg.fusion is not None else {}
                out = model(batch["ids"].to(device), **inputs)
                y = batch["targets"].to(device)
                keep = y != self.pad_id
                logp = F.log_softmax(out.logits.float(), dim=-1)  # (B, L, V), once: PPL, top-1 and ECE read it
                nll["ppl"] -= float(logp.gather(-1, y[..., None]).squeeze(-1)[keep].double().sum())
                if out.extras.get("ungated") is not None:
                    plain = F.log_softmax(out.extras["ungated"].float(), dim=-1)
                    nll["ppl_ungated"] -= float(plain.gather(-1, y[..., None]).squeeze(-1)[keep].double().sum())
                top, arg = logp.max(-1)
                conf.append(top[keep].exp().cpu())
                hit.append((arg == y)[keep].cpu())
                n += int(keep.sum())
        finally:
            model.train(was_training)
        if n == 0:
            raise NeurosymError(f"data.{split}: no token to predict")
        conf_t, hit_t = torch.cat(conf), torch.cat(hit)
        result = {"ppl": math.exp(nll["ppl"] / n), "nll": nll["ppl"] / n, "tokens": n,
                  "top1": float(hit_t.double().mean()), "ece": expected_calibration_error(conf_t, hit_t)}
        if reliability:
            result["reliability"] = reliability_bins(conf_t, hit_t)
        if isinstance(unwrap(model).output, IdeaOutput):
            result["ppl_ungated"] = math.exp(nll["ppl_ungated"] / n)
        if self.auto is not None:
            result["floor_ppl"] = self.floor()
        return result

    @torch.no_grad()
    def same_pos(self, model: nn.Module, conllu: Path, batch_size: int = 64, tags_from: Path | None = None) -> dict[str, float]:
        """The same-POS miss rate over a tagged file's sentences (:func:`same_pos_miss_rate`):
        each word's tag is its majority UPOS in ``tags_from`` (default: the file itself); the
        model's prediction is its top *tagged* word (``<unk>``, ``<eos>`` and untagged words
        are not words with a part of speech). Over the file's first ``data.max_eval_windows``
        windows (all when unset). Word vocabularies only."""
        if self.vocab.kind != "word" or self.data_cfg.tokenizer not in (None, "word"):
            raise NeurosymError("--pos: the same-POS miss rate needs a word vocabulary (data.tokenizer = \"word\")")
        key = (str(conllu), None if tags_from is None else str(tags_from))
        if key not in self._pos:  # read once per task: every evaluation of data.pos reuses it
            sentences = read_tagged(conllu)
            tag_of = majority_upos(sentences if tags_from is None else read_tagged(tags_from))
            tags = [None if s is None else tag_of.get(s) for s in self.vocab.surfaces]
            self._pos[key] = (tags, *windows(self.vocab, [" ".join(x.forms) for x in sentences], self.data_cfg.window,
                                             self.data_cfg.max_eval_windows))
        tags, ids, targets = self._pos[key]
        if len(ids) == 0:
            raise NeurosymError(f"{conllu}: shorter than one window of {self.data_cfg.window} tokens")
        device = next(model.parameters()).device
        untagged = torch.tensor([t is None for t in tags] + [True] * (self.rows(model) - len(tags)), device=device)
        was_training = model.training
        model.eval()
        preds = []
        try:
            for i in range(0, len(ids), batch_size):
                batch = self.inputs(ids[i : i + batch_size], targets[i : i + batch_size])
                inputs = {"features": batch["features"].to(device)} if "features" in batch else {}
                logits = model(batch["ids"].to(device), **inputs).logits
                preds.append(logits.masked_fill(untagged, -math.inf).argmax(-1).cpu())
        finally:
            model.train(was_training)
        gold = torch.where(targets == self.pad_id, self.eos_id, targets)  # <bos> positions: never counted (no tag)
        result = same_pos_miss_rate(torch.cat(preds), gold, tags)
        return {"same_pos_miss": result["same_pos_miss"], "pos_misses": result["misses"], "pos_file": str(conllu)}

    @staticmethod
    def rows(model: nn.Module) -> int:
        """The model's number of output rows (at least the vocabulary's size)."""
        return unwrap(model).lm_head.weight.shape[0]

    # ------------------------------------------------------------------ the run folder
    outputs = (WEIGHTS_FILE, VOCAB_FILE, LEXICON_FILE, DATA_FILE, CHECKSUMS_FILE)  # what finish writes into the run folder

    def input_paths(self) -> list[Path]:
        """Every file and folder this run reads: the text files, the lexicon, the tokenizer,
        the base model, the grammar (the trainer refuses a run folder that holds one of them
        under a name the run writes, or that is one of the folders)."""
        out = [f for files in self.files.values() for f in files]
        tokenizer = self.data_cfg.tokenizer
        for extra in (getattr(self, "lexicon_path", None), self.hf_dir, self.grammar_path,
                      Path(tokenizer) if tokenizer not in (None, "word", "bpe") else None):
            if extra is not None:
                out.append(Path(extra))
        return out

    def finish(self, run_dir: Path, model: nn.Module) -> None:
        """Write the run's own files (see the module docstring) and their checksums."""
        from safetensors.torch import save  # lazy: only a finished run writes safetensors

        run_dir = Path(run_dir)
        weights = {k: v.detach().cpu().contiguous().clone() for k, v in unwrap(model).state_dict().items()}
        atomic_write_bytes(run_dir / WEIGHTS_FILE, save(weights, metadata={"format": "neurosym-lm", "vocab_size": str(len(self.vocab))}))
        atomic_write_bytes(run_dir / VOCAB_FILE, (json.dumps(self.vocab.to_json(), ensure_ascii=False) + "\n").encode("utf-8"))
        written = [WEIGHTS_FILE, VOCAB_FILE]
        if self.bank is not None and self.lexicon_path.resolve() != (run_dir / LEXICON_FILE).resolve():
            shutil.copyfile(self.lexicon_path, run_dir / LEXICON_FILE)
        if self.bank is not None:
            written.append(LEXICON_FILE)
        data: dict[str, Any] = {split: [str(f.resolve()) for f in files] for split, files in self.files.items()}
        if self.hf_dir is not None:
            data["hf"] = str(self.hf_dir.resolve())
        if self.grammar_path is not None:
            data["grammar"] = str(self.grammar_path.resolve())
        if not (run_dir / DATA_FILE).is_file() or self.train_docs is not None:
            atomic_write_bytes(run_dir / DATA_FILE, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
        written.append(DATA_FILE)
        sums = {name: file_digest(run_dir / name) for name in written}
        atomic_write_bytes(run_dir / CHECKSUMS_FILE, (json.dumps(sums, indent=2) + "\n").encode("utf-8"))


# ---------------------------------------------------------------------- reading a run back
def is_lm_run(path: str | Path) -> bool:
    """Whether ``path`` (a run folder or a checkpoint) was trained by the built-in task."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    try:
        saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    run = saved.get("run", {}) if isinstance(saved, dict) else {}
    data = saved.get("data", {}) if isinstance(saved, dict) else {}
    return run.get("task") == "lm" or (run.get("task") is None and ("train" in data or "grammar" in data))


def verify_run(folder: Path) -> None:
    """A NeurosymError when a file ``checksums.json`` lists has changed since it was written."""
    listed = folder / CHECKSUMS_FILE
    if not listed.is_file():
        return
    for name, expected in json.loads(listed.read_text(encoding="utf-8")).items():
        if not (folder / name).is_file() or file_digest(folder / name) != expected:
            raise NeurosymError(f"{folder / name}: missing or changed since training (its checksum in {CHECKSUMS_FILE} differs)")


def load_lm_run(path: str | Path) -> tuple[LMTask, CausalLM]:
    """A run of the built-in task (a folder or its checkpoint) -> ``(task, model)`` in eval
    mode, the weights from ``model.safetensors`` when the run finished (checksums checked),
    else from the checkpoint."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    verify_run(folder)
    state = load_checkpoint(path)
    config = Config.from_dict(state["config"])
    task = LMTask(config, run_dir=folder)
    model = task.build_model(config)
    weights = state["model"]
    if (folder / WEIGHTS_FILE).is_file() and path.is_dir():
        from safetensors.torch import load_file  # lazy: as in finish()
        weights = load_file(str(folder / WEIGHTS_FILE))
    model.load_state_dict(weights)
    return task, model.eval()


def evaluate_run(path: str | Path, split: str = "valid", pos: str | Path | None = None) -> dict[str, Any]:
    """``neurosym eval RUN [--split valid|test] [--pos FILE.conllu]`` for a run of the
    built-in task: PPL, top-1 and ECE over the split's files (those the run recorded in
    ``data.json``, or the grammar's sampled sentences), embedding health, and with ``pos``
    (or the run's ``data.pos``) the same-POS miss rate over that tagged file."""
    task, model = load_lm_run(path)
    extra = task.same_pos(model, Path(pos)) if pos is not None else {}
    if task.auto is not None:
        return {"run": str(path), "split": split, "grammar": str(task.grammar_path), **task.figures(model, split), **extra}
    files = task.files.get(split)
    if not files:
        raise NeurosymError(f"{path}: the run's config names no [data] {split} files to evaluate on")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise NeurosymError(f"{path}: the {split} file {missing[0]} is not there any more")
    return {"run": str(path), "split": split, "files": [str(f) for f in files], **task.figures(model, split, files), **extra}


def format_evaluation(report: dict[str, Any]) -> str:
    """One line: the split, its token count and the figures."""
    figures = ", ".join(f"{k} {report[k]:.4f}" for k in ("ppl", "ppl_ungated", "floor_ppl", "top1", "ece", "same_pos_miss") if k in report)
    return f"{report['run']} ({report['split']}, {report['tokens']:,} tokens): {figures}"


__all__ = [
    "AuxSection", "DataSection", "FusionSection", "LMTask", "ModelSection", "ObjectiveSection", "SemanticKLSection",
    "build_vocab", "encode_stream", "evaluate_run", "expand_files", "format_evaluation", "is_lm_run", "load_lm_run",
    "read_documents", "special_ids", "verify_run",
]
