"""Per-step cost of grammars over strings on a 32k byte-level BPE (docs/strings.md).

``python -m neurosym.bench.strings [--bpe-size 32000] [--sentences 30] [--json OUT]``:
for each shipped grammar (``clause.fsg``, ``arith.pcfg``, ``agreement.pcfg``) read as
strings over a byte-level BPE trained locally on WikiText-2 (:func:`neurosym.bench.compile.bpe_tokenizer`,
no download), the seconds to build the processors, then per decoding step at batch 1:

* ``mask``: the viable tokens (``StringPrefixModel.prefix_probs``, what ``SpelledMask`` reads);
* ``prior``: the exact next-token distribution (``next_probs``, what ``SpelledPrior``
  reads; it includes the mask's work);
* ``advance``: reading the chosen token.

The texts are the grammar's own sentences, written by the prior itself from a fixed
seed. The same sentences are decoded twice: ``cold`` (the first pass fills the
context-independent walk tables) and ``warm``; and once more as one batch of all of
them (``batch``: milliseconds per step for the whole batch).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np

from neurosym.files import emit_report
from neurosym.bench.compile import bpe_tokenizer
from neurosym.decode.tokenized import StringPrefixModel
from neurosym.kinds import load_grammar
from neurosym.vocab import Vocab

GRAMMARS = ("grammars/clause.fsg", "grammars/arith.pcfg", "grammars/agreement.pcfg")


def sentences(model: StringPrefixModel, n: int, seed: int, max_steps: int = 200) -> list[list[int]]:
    """``n`` token sequences drawn from the model's own prior (its longest-match writing)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        model.reset(1)
        seq: list[int] = []
        for _ in range(max_steps):
            p, end = model.next_probs()
            probs = np.append(p[0], end[0])
            k = int(rng.choice(len(probs), p=probs / probs.sum()))
            if k == len(probs) - 1:
                break
            seq.append(k)
            model.advance(np.array([k]))
        out.append(seq)
    return out


def _stats(times: list[float]) -> dict:
    ms = np.array(times) * 1e3
    return {"p50_ms": float(np.median(ms)), "p99_ms": float(np.percentile(ms, 99)), "mean_ms": float(ms.mean()), "steps": len(times)}


def decode_pass(model: StringPrefixModel, seqs: list[list[int]]) -> dict:
    """Times of mask, prior and advance per step, batch 1, along ``seqs``."""
    mask, prior, adv = [], [], []
    for seq in seqs:
        model.reset(1)
        for t in seq + [None]:
            a = time.perf_counter()
            model.prefix_probs()
            b = time.perf_counter()
            model.next_probs()
            c = time.perf_counter()
            mask.append(b - a)
            prior.append(c - b)
            if t is None:
                break
            model.advance(np.array([t]))
            adv.append(time.perf_counter() - c)
    return {"mask": _stats(mask), "prior": _stats(prior), "advance": _stats(adv)}


def batch_pass(model: StringPrefixModel, seqs: list[list[int]]) -> dict:
    """Milliseconds per step (prior + advance) for all ``seqs`` as one batch."""
    B, L = len(seqs), max(len(s) for s in seqs)
    model.reset(B)
    times = []
    for i in range(L):
        tokens = np.array([s[i] if i < len(s) else 0 for s in seqs])
        skip = np.array([i >= len(s) for s in seqs])
        a = time.perf_counter()
        model.next_probs()
        model.advance(tokens, skip)
        times.append(time.perf_counter() - a)
    return {"batch": B, **_stats(times)}


def run(bpe_size: int = 32000, n: int = 30, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    vocab = Vocab.from_tokenizer(bpe_tokenizer(bpe_size))
    out = {"vocab_size": len(vocab), "tokenizer_seconds": time.perf_counter() - t0, "sentences": n, "seed": seed,
           "machine": platform.processor() or platform.machine(), "grammars": {}}
    for path in GRAMMARS:
        t0 = time.perf_counter()
        grammar = load_grammar(path, vocab)
        model = StringPrefixModel(grammar)
        build = time.perf_counter() - t0
        seqs = sentences(StringPrefixModel(grammar), n, seed)
        row = {"build_seconds": build, "tokens_per_sentence": float(np.mean([len(s) for s in seqs])),
               "example": vocab.spell(seqs[0]).decode("utf-8", "replace")}
        row["cold"] = decode_pass(model, seqs)
        row["warm"] = decode_pass(model, seqs)
        row["batch"] = batch_pass(model, seqs)
        out["grammars"][Path(path).name] = row
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bpe-size", type=int, default=32000)
    ap.add_argument("--sentences", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    args = ap.parse_args(argv)
    report = run(args.bpe_size, args.sentences, args.seed)
    emit_report(report, args.json)


if __name__ == "__main__":
    main()
