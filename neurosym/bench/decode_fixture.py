r"""A committed record of XGrammar's and outlines-core's decisions, so that neurosym's
token masks are checked against another engine where neither is installed (CI installs
only the ``test`` extra; XGrammar brings triton and more).

The record (``tests/data/xgrammar_masks.json``) holds:

* a small byte-level vocabulary: a BPE trained with ``tokenizers`` on the shipped
  WikiText-2 validation text (``FIXTURE_BPE_SIZE`` tokens), plus hand-picked multi-byte
  tokens that cross the patterns' boundaries (``:b``, ``1.``, ``e+``, ``.com``, ...);
  the end of sequence is one more id, ``V``;
* for each pattern of ``FIXTURE_PATTERNS``, token sequences from outside neurosym:
  strings drawn by :mod:`neurosym.bench.regex_walk` and encoded with that BPE, and walks
  whose every token XGrammar chose at random from its own mask (tokenisations no
  tokenizer would produce);
* at every step of every sequence, XGrammar's mask over the real tokens (hex of the
  packed 32-bit words, bit ``v % 32`` of word ``v // 32``, kept once in a table) and
  whether it allows the end of sequence;
* outlines-core's allowed tokens after the prefixes of the documented examples
  (``a(:b)?``, ``-?[0-9]+(\.[0-9]+)?``, ``a|ab``) over a small character-level
  vocabulary, beside XGrammar's.

Regenerate (needs ``pip install 'neurosym[bench]'``)::

    python -m neurosym.bench.decode_fixture --write tests/data/xgrammar_masks.json

:func:`neurosym_decisions` gives neurosym's answers for the same steps, which
``tests/test_bench_decode.py`` compares with the record.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import numpy as np
import torch

from neurosym.bench.decode import BANK_PATTERNS, flat_regex
from neurosym.compile.automaton import Automaton
from neurosym.compile.regex import compile_regex
from neurosym.data import shipped_file
from neurosym.data.text import corpus_path, read_text
from neurosym.dsl.regex import read_regex_bank
from neurosym.errors import NeurosymError
from neurosym.files import atomic_write_bytes
from neurosym.vocab import Vocab

FIXTURE_BPE_SIZE = 400
# multi-byte tokens that cross the patterns' boundaries (a token may finish one part and start the next)
EXTRA_TOKENS = [":b", "1.", ".5", "e+", "e-", "E-", "5e", "T0", "T1", "T2", ":0", ":3", ":5", "-0", "-1", "-3", "20", "19",
                "@", "a@", "@e", ".com", ".org", "o.", "ab", "the", "ther", "there", "é", "日本"]
WORDS_IN_LIST = 40
RE_STRINGS, XGRAMMAR_WALKS, WALK_MAX_TOKENS = 20, 12, 24

# (name, pattern); the bank patterns and the word list are added by fixture_patterns()
FIXTURE_EXTRA_PATTERNS = [
    ("optional-suffix", "a(:b)?"),
    ("decimal", r"-?[0-9]+(\.[0-9]+)?"),
    ("alternation", "a|ab"),
    ("quoted", r'"[^"]{0,8}"'),
]

# the documented outlines-core examples, over a character-level vocabulary with a few longer tokens
OUTLINES_TOKENS = ["a", ":", "b", ":b", "ab", "1", ".", "5", "-", "1."]
OUTLINES_CASES = [
    ("a(:b)?", []),
    ("a(:b)?", ["a"]),
    (r"-?[0-9]+(\.[0-9]+)?", []),
    (r"-?[0-9]+(\.[0-9]+)?", ["1"]),
    (r"-?[0-9]+(\.[0-9]+)?", ["1", "."]),
    ("a|ab", []),
    ("a|ab", ["a"]),
]


def fixture_patterns() -> list[tuple[str, str]]:
    """(name, regex) of every pattern in the record."""
    out = []
    for file, name in BANK_PATTERNS:
        out.append((f"{file.split('.')[0]}:{name}", flat_regex(read_regex_bank(shipped_file(f"grammars/{file}")), name)))
    counts: dict[str, int] = {}
    for w in read_text(corpus_path("wikitext-2", "valid")).split():
        if w.isalpha():
            counts[w] = counts.get(w, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))[:WORDS_IN_LIST]
    out.append((f"{WORDS_IN_LIST} words", "(?:" + "|".join(re.escape(w) for w in words) + ")"))
    return out + FIXTURE_EXTRA_PATTERNS


def fixture_vocab(surfaces: list[bytes]) -> Vocab:
    """A byte vocabulary over exactly these surfaces (display names: their hex)."""
    return Vocab([s.hex() for s in surfaces], list(surfaces), "bytes")


def train_surfaces():
    """The record's vocabulary: a byte-level BPE on the shipped WikiText-2 validation
    text plus ``EXTRA_TOKENS``, and the tokenizer (to encode the sampled strings)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # lazy: only to regenerate

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=FIXTURE_BPE_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    lines = [line for line in read_text(corpus_path("wikitext-2", "valid")).splitlines() if line.strip()]
    tok.train_from_iterator(lines, trainer)
    surfaces = [s for s in Vocab.from_tokenizer(tok).surfaces if s is not None]
    for t in EXTRA_TOKENS:
        if t.encode() not in surfaces:
            surfaces.append(t.encode())
    return surfaces, tok


def pack(bits: np.ndarray) -> str:
    """A boolean mask (V,) as hex of packed little-endian 32-bit words."""
    words = np.zeros((len(bits) + 31) // 32, dtype=np.uint32)
    ids = np.nonzero(bits)[0]
    np.bitwise_or.at(words, ids // 32, (np.uint32(1) << (ids % 32).astype(np.uint32)))
    return words.astype("<u4").tobytes().hex()


class XGrammarRecorder:
    """XGrammar over the record's vocabulary (+ the end-of-sequence id ``V``)."""

    def __init__(self, surfaces: list[bytes]):
        import xgrammar  # lazy: only to regenerate

        self.xgrammar = xgrammar
        self.V = len(surfaces)
        info = xgrammar.TokenizerInfo(list(surfaces) + [b"</s>"], vocab_type=xgrammar.VocabType.RAW, vocab_size=self.V + 1, stop_token_ids=[self.V])
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def matcher(self, pattern: str):
        return self.xgrammar.GrammarMatcher(self.compiler.compile_regex(pattern))

    def allowed(self, matcher) -> np.ndarray:
        """(V + 1,) bool: the matcher's allowed ids, the end of sequence last."""
        buf = self.xgrammar.allocate_token_bitmask(1, self.V + 1)
        matcher.fill_next_token_bitmask(buf)
        words = buf[0].numpy().astype(np.uint32)
        ids = np.arange(self.V + 1)
        return ((words[ids // 32] >> (ids % 32).astype(np.uint32)) & 1).astype(bool)

    def record(self, pattern: str, tokens: list[int]) -> tuple[list[np.ndarray], list[bool]]:
        """Masks over the real tokens and end decisions at each step of ``tokens``
        (len + 1 steps); an error if XGrammar refuses one of the tokens."""
        m = self.matcher(pattern)
        masks, ends = [], []
        for k, t in enumerate(tokens + [None]):
            bits = self.allowed(m)
            masks.append(bits[: self.V])
            ends.append(bool(bits[self.V]))
            if t is not None and not m.accept_token(t):
                raise NeurosymError(f"xgrammar refuses token {t} at step {k} of a string of {pattern!r}")
        return masks, ends

    def walk(self, pattern: str, rng: random.Random, max_tokens: int, stop_prob: float = 0.3) -> list[int]:
        """Tokens XGrammar chose: at each step a uniform draw among its allowed real
        tokens, ending (with ``stop_prob``) where it allows the end of sequence."""
        m = self.matcher(pattern)
        out: list[int] = []
        while len(out) < max_tokens:
            bits = self.allowed(m)
            real = np.nonzero(bits[: self.V])[0].tolist()
            if bits[self.V] and (not real or rng.random() < stop_prob):
                break
            if not real:
                break
            t = rng.choice(real)
            if not m.accept_token(t):
                raise NeurosymError(f"xgrammar refuses its own token {t}")
            out.append(t)
        return out


def outlines_answers(cases=OUTLINES_CASES, tokens=OUTLINES_TOKENS) -> list[dict]:
    """outlines-core's allowed tokens (by text) and end decision after each case's prefix;
    ``allowed`` is None where it refused a token of the prefix itself."""
    import outlines_core  # lazy: optional

    eos = len(tokens)
    vocabulary = outlines_core.Vocabulary(eos, {t.encode(): [i] for i, t in enumerate(tokens)})
    out = []
    for pattern, prefix in cases:
        guide = outlines_core.Guide(outlines_core.Index(pattern, vocabulary))
        row = {"pattern": pattern, "prefix": prefix}
        try:
            for t in prefix:
                guide.advance(tokens.index(t), return_tokens=False)
        except Exception:  # noqa: BLE001 - outlines-core's refusal, recorded
            out.append({**row, "allowed": None, "end": None})
            continue
        ids = guide.get_tokens()
        out.append({**row, "allowed": sorted(tokens[i] for i in ids if i < eos), "end": eos in ids})
    return out


def xgrammar_answers(cases=OUTLINES_CASES, tokens=OUTLINES_TOKENS) -> list[dict]:
    """XGrammar's answers for the same cases, over the same small vocabulary."""
    rec = XGrammarRecorder([t.encode() for t in tokens])
    out = []
    for pattern, prefix in cases:
        m = rec.matcher(pattern)
        for t in prefix:
            if not m.accept_token(tokens.index(t)):
                raise NeurosymError(f"xgrammar refuses {t!r} in {pattern!r}")
        bits = rec.allowed(m)
        out.append({"pattern": pattern, "prefix": prefix, "allowed": sorted(tokens[i] for i in np.nonzero(bits[: rec.V])[0]), "end": bool(bits[rec.V])})
    return out


def build_fixture(seed: int = 0) -> dict:
    """The whole record (see the module docstring)."""
    import importlib.metadata as md  # lazy: versions, only to regenerate

    from neurosym.bench.regex_walk import sample_matches  # lazy: the regex package comes with the bench extra

    surfaces, tok = train_surfaces()
    rec = XGrammarRecorder(surfaces)
    rng = random.Random(seed)
    table: dict[str, int] = {}
    patterns = []
    for name, pattern in fixture_patterns():
        sequences = []
        strings = sample_matches(pattern, RE_STRINGS, seed=seed, max_len=30)
        seqs = [("re", s, tok.encode(s).ids) for s in strings]
        seqs += [("xgrammar-walk", None, rec.walk(pattern, rng, WALK_MAX_TOKENS)) for _ in range(XGRAMMAR_WALKS)]
        for source, text, ids in seqs:
            masks, ends = rec.record(pattern, ids)
            sequences.append({
                "source": source,
                "text": text,
                "tokens": ids,
                "masks": [table.setdefault(pack(m), len(table)) for m in masks],
                "ends": "".join("1" if e else "0" for e in ends),
            })
        patterns.append({"name": name, "pattern": pattern, "sequences": sequences})
    return {
        "about": "XGrammar's and outlines-core's decisions, recorded by `python -m neurosym.bench.decode_fixture --write tests/data/xgrammar_masks.json`",
        "versions": {p: md.version(p) for p in ("xgrammar", "outlines-core", "tokenizers")},
        "vocab": [s.hex() for s in surfaces],
        "mask_table": sorted(table, key=table.__getitem__),
        "patterns": patterns,
        "outlines_examples": {"tokens": OUTLINES_TOKENS, "outlines_core": outlines_answers(), "xgrammar": xgrammar_answers()},
    }


def load_fixture(path: str | Path) -> dict:
    """The record as written by :func:`build_fixture`."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def neurosym_decisions(auto: Automaton, tokens: list[int]) -> tuple[list[str], list[bool]]:
    """neurosym's packed masks (hex, as :func:`pack` writes them) and end decisions
    (``Automaton.final``) at each of the len + 1 steps of ``tokens``; an error if it
    refuses one of them."""
    buf = np.zeros(auto.words, dtype=np.int32)
    q = auto.start
    masks, ends = [], []
    for k, t in enumerate(tokens + [None]):
        auto.write_mask(q, buf)
        masks.append(buf.astype("<i4").tobytes().hex())
        ends.append(bool(auto.final[q]))
        if t is not None:
            q = auto.next_state(q, t)
            if q < 0:
                raise NeurosymError(f"neurosym refuses token {t} at step {k} of {auto!r}")
    return masks, ends


def fixture_mismatches(fixture: dict) -> tuple[list[str], int]:
    """Every step where neurosym's mask or end decision differs from the recorded
    XGrammar one (or neurosym refuses a recorded token), as readable lines, and the
    number of steps compared."""
    vocab = fixture_vocab([bytes.fromhex(s) for s in fixture["vocab"]])
    table = fixture["mask_table"]
    bad, steps = [], 0
    for p in fixture["patterns"]:
        auto = compile_regex(p["pattern"], vocab=vocab)
        for j, seq in enumerate(p["sequences"]):
            where = f"{p['name']} sequence {j} ({seq['source']})"
            try:
                masks, ends = neurosym_decisions(auto, seq["tokens"])
            except NeurosymError as err:
                bad.append(f"{where}: {err}")
                continue
            for k, (m, e) in enumerate(zip(masks, ends)):
                steps += 1
                if m != table[seq["masks"][k]]:
                    bad.append(f"{where} step {k}: masks differ")
                if e != (seq["ends"][k] == "1"):
                    bad.append(f"{where} step {k}: end of sequence {'allowed' if e else 'refused'} by neurosym, not by xgrammar")
    return bad, steps


def neurosym_allowed(pattern: str, prefix: list[str], tokens: list[str] = OUTLINES_TOKENS) -> tuple[list[str], bool]:
    """neurosym's allowed tokens (by text) and end decision after ``prefix`` over the
    small vocabulary of the outlines-core examples."""
    vocab = fixture_vocab([t.encode() for t in tokens])
    auto = compile_regex(pattern, vocab=vocab)
    q = auto.start
    for t in prefix:
        q = auto.next_state(q, tokens.index(t))
        if q < 0:
            raise NeurosymError(f"neurosym refuses {t!r} in {pattern!r}")
    allowed = auto.mask(torch.tensor([q]))[0]
    return sorted(tokens[i] for i in torch.nonzero(allowed).flatten().tolist()), bool(auto.final[q])


def write_record(prog: str, description: str, build, argv: list[str] | None = None) -> int:
    """The command line of a record writer: ``prog --write PATH`` writes ``build()`` there
    as JSON (atomically)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--write", required=True, metavar="PATH", help="where to write the record (JSON)")
    args = parser.parse_args(argv)
    atomic_write_bytes(Path(args.write), (json.dumps(build(), indent=0) + "\n").encode())
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_record("python -m neurosym.bench.decode_fixture", __doc__.split("\n\n")[0], build_fixture, argv)


if __name__ == "__main__":
    raise SystemExit(main())
