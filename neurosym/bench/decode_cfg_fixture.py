r"""A committed record of XGrammar's decisions on ``grammars/json.pcfg``, so that the
JSON grammar's masks are checked at every step where XGrammar is not installed.

The record (``tests/data/xgrammar_json_masks.json``) holds:

* the small byte-level vocabulary of :mod:`neurosym.bench.decode_fixture` (a BPE on the
  shipped WikiText-2 validation text and its hand-picked tokens) plus JSON tokens that
  cross lexeme boundaries (``{"``, ``":``, ``",``, ``\u``, ``e+``, ...); the end of
  sequence is one more id, ``V``;
* token sequences from outside neurosym: the short documents of
  :func:`neurosym.bench.decode_cfg.json_documents` encoded with that BPE, and walks whose
  every token XGrammar chose at random from its own mask;
* at every step, XGrammar's mask over the real tokens (hex of packed 32-bit words, kept
  once in a table) and whether it allows the end, and the text so far.

Regenerate (needs ``pip install 'neurosym[bench]'``)::

    python -m neurosym.bench.decode_cfg_fixture --write tests/data/xgrammar_json_masks.json
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from neurosym.compile.export import to_gbnf
from neurosym.bench.decode_cfg import END_PROB, json_documents
from neurosym.bench.decode_fixture import fixture_vocab, pack, train_surfaces, write_record
from neurosym.dsl.pcfg import read_pcfg
from neurosym.vocab import Vocab

GRAMMAR = Path(__file__).resolve().parents[2] / "grammars" / "json.pcfg"
JSON_TOKENS = ['{"', '":', '",', '"}', '"]', '["', "],", "},", "[]", "{}", ": ", ", ", '\\"', "\\u", "\\n", "00", "e+", "E-", "1.",
               "-0", "tr", "ue", "true", "fal", "null", "nu", "\n  ", "\t", "é", "日本", "\U0001f600"]
MAX_DOC_CHARS = 160
WALKS, WALK_MAX_TOKENS = 130, 40


def json_surfaces():
    """The record's vocabulary (surfaces) and the BPE that encodes the documents."""
    surfaces, tok = train_surfaces()
    for t in JSON_TOKENS:
        if t.encode() not in surfaces:
            surfaces.append(t.encode())
    return surfaces, tok


class Recorder:
    """XGrammar's matcher for the JSON grammar over the record's vocabulary (+ end ``V``)."""

    def __init__(self, surfaces: list[bytes]):
        import torch  # lazy: only to regenerate
        import xgrammar  # lazy: only to regenerate

        self.V = len(surfaces)
        info = xgrammar.TokenizerInfo(surfaces + [b"</s>"], vocab_type=xgrammar.VocabType.RAW, vocab_size=self.V + 1, stop_token_ids=[self.V])
        compiled = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(to_gbnf(read_pcfg(GRAMMAR)), root_rule_name="root")
        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.buf = torch.zeros((1, (self.V + 1 + 31) // 32), dtype=torch.int32)

    def bits(self) -> np.ndarray:
        self.buf.zero_()
        self.matcher.fill_next_token_bitmask(self.buf)
        return np.unpackbits(self.buf.numpy().view(np.uint8), bitorder="little")[: self.V + 1].astype(bool)

    def record(self, tokens: list[int]) -> tuple[list[np.ndarray], list[bool]]:
        self.matcher.reset()
        masks, ends = [], []
        for k, t in enumerate(tokens + [None]):
            b = self.bits()
            masks.append(b[: self.V])
            ends.append(bool(b[self.V]))
            if t is not None and not self.matcher.accept_token(t):
                raise RuntimeError(f"xgrammar refused token {k} of {tokens}")
        return masks, ends

    def walk(self, rng: random.Random, cap: int) -> list[int]:
        self.matcher.reset()
        seq: list[int] = []
        while len(seq) < cap:
            b = self.bits()
            allowed = np.nonzero(b[: self.V])[0]
            if b[self.V] and (rng.random() < END_PROB or len(allowed) == 0):
                break
            if len(allowed) == 0:
                break
            t = int(allowed[rng.randrange(len(allowed))])
            self.matcher.accept_token(t)
            seq.append(t)
        return seq


def build_fixture(seed: int = 0) -> dict:
    import importlib.metadata as md  # lazy: versions, only to regenerate

    surfaces, tok = json_surfaces()
    rec = Recorder(surfaces)
    rng = random.Random(seed)
    docs = [d for d in json_documents() if len(d) <= MAX_DOC_CHARS]
    seqs = [("document", tok.encode(d).ids) for d in docs] + [("xgrammar-walk", rec.walk(rng, WALK_MAX_TOKENS)) for _ in range(WALKS)]
    table: dict[str, int] = {}
    sequences = []
    for source, ids in seqs:
        masks, ends = rec.record(ids)
        sequences.append({"source": source, "tokens": ids, "masks": [table.setdefault(pack(m), len(table)) for m in masks],
                          "ends": "".join("1" if e else "0" for e in ends)})
    return {
        "about": "XGrammar's decisions on grammars/json.pcfg, recorded by "
                 "`python -m neurosym.bench.decode_cfg_fixture --write tests/data/xgrammar_json_masks.json`",
        "versions": {p: md.version(p) for p in ("xgrammar", "tokenizers")},
        "vocab": [s.hex() for s in surfaces],
        "mask_table": sorted(table, key=table.__getitem__),
        "sequences": sequences,
    }


def load_fixture(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def fixture_vocabulary(fx: dict) -> Vocab:
    return fixture_vocab([bytes.fromhex(h) for h in fx["vocab"]])


def main(argv: list[str] | None = None) -> int:
    return write_record("python -m neurosym.bench.decode_cfg_fixture", __doc__.split("\n\n")[0], build_fixture, argv)


if __name__ == "__main__":
    raise SystemExit(main())
