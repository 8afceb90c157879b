"""A PCFG mask over strings: the exact prefix chart against the Earley recogniser (docs/strings.md).

``python -m neurosym.bench.earley [--grammar grammars/json.pcfg] [--bpe-size 32000] [--json OUT]``:
the grammar read as strings over a byte-level BPE trained locally on WikiText-2
(:func:`neurosym.bench.compile.bpe_tokenizer`, no download), decoded at batch 1 along JSON
documents written by Python's own ``json.dumps`` (varied objects from a fixed seed, not
sampled from the grammar) and tokenized by the BPE. Two string models read the same
tokens in the same run:

* ``chart``: ``StringPrefixModel(grammar)``, the exact float64 prefix chart
  (:mod:`neurosym.layers.prefix`), what a mask read before;
* ``earley``: ``StringPrefixModel(grammar, support=True)``, the boolean Earley recogniser
  (:mod:`neurosym.layers.earley`), what ``SpelledMask`` alone reads now.

Per step: ``mask`` (``prefix_probs``: the viable tokens and the end), ``advance``
(reading the document's token) and ``step`` (the two, per token of the document), in
milliseconds (median, 99th percentile, mean). Every
step checks that the two masks are equal, that the document's token is allowed, and that
the end is allowed exactly after the whole document. ``cold``: the first pass (the walk
tables fill); ``warm``: the same documents again.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

import numpy as np

from neurosym.files import emit_report
from neurosym.bench.compile import bpe_tokenizer
from neurosym.decode.tokenized import StringPrefixModel
from neurosym.errors import NeurosymError
from neurosym.kinds import load_grammar
from neurosym.vocab import Vocab


def documents(n: int, seed: int) -> list[str]:
    """``n`` JSON texts by ``json.dumps`` of random nested objects (keys, strings with
    escapes, integers, floats, booleans, null, nesting up to depth 3)."""
    rng = random.Random(seed)
    words = ["name", "id", "value", "items", "tags", "ok", "x", "path", "note", "count"]

    def value(depth: int):
        r = rng.random()
        if depth < 3 and r < 0.25:
            return {rng.choice(words) + str(rng.randrange(10)): value(depth + 1) for _ in range(rng.randint(1, 4))}
        if depth < 3 and r < 0.45:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        if r < 0.65:
            return rng.choice(["hello", "a \"quoted\" word", "tab\there", "line\nbreak", "café", "", "x/y"])
        if r < 0.8:
            return rng.randint(-1000, 10**6)
        if r < 0.9:
            return round(rng.uniform(-100, 100), rng.randint(1, 4))
        return rng.choice([True, False, None])

    return [json.dumps({w: value(1) for w in rng.sample(words, rng.randint(2, 5))}) for _ in range(n)]


def _stats(times: list[float]) -> dict:
    ms = np.array(times) * 1e3
    return {"p50_ms": float(np.median(ms)), "p99_ms": float(np.percentile(ms, 99)), "mean_ms": float(ms.mean()), "steps": len(times)}


def decode_pass(chart: StringPrefixModel, earley: StringPrefixModel, docs: list[list[int]]) -> dict:
    """Mask and advance times of both models along ``docs`` (token ids), batch 1; the
    masks are compared at every step."""
    times: dict[str, dict[str, list[float]]] = {m: {"mask": [], "advance": [], "step": []} for m in ("chart", "earley")}
    models = {"chart": chart, "earley": earley}
    for ids in docs:
        for m in models.values():
            m.reset(1)
        for i, t in enumerate(ids + [None]):
            got = {}
            for name, m in models.items():
                a = time.perf_counter()
                raw, end = m.prefix_probs()
                times[name]["mask"].append(time.perf_counter() - a)
                got[name] = (raw[0] > 0, end[0] > 0)
            if not (np.array_equal(got["chart"][0], got["earley"][0]) and got["chart"][1] == got["earley"][1]):
                raise NeurosymError(f"the masks differ at step {i}")
            if t is None:
                if not got["earley"][1]:
                    raise NeurosymError("the end is not allowed after a whole document")
                break
            if not got["earley"][0][t]:
                raise NeurosymError(f"the document's token {t} is not allowed at step {i}")
            for name, m in models.items():
                a = time.perf_counter()
                m.advance(np.array([t]))
                times[name]["advance"].append(time.perf_counter() - a)
                times[name]["step"].append(times[name]["mask"][-1] + times[name]["advance"][-1])
    return {name: {k: _stats(v) for k, v in d.items()} for name, d in times.items()}


def run(grammar_path: str, bpe_size: int = 32000, n: int = 4, seed: int = 0) -> dict:
    tok = bpe_tokenizer(bpe_size)
    vocab = Vocab.from_tokenizer(tok)
    texts = documents(n, seed)
    docs = [tok.encode(t).ids for t in texts]
    for t, ids in zip(texts, docs):
        if vocab.spell(ids) != t.encode():
            raise NeurosymError("the BPE does not spell a document back")
    grammar = load_grammar(grammar_path, vocab)
    builds = {}
    t0 = time.perf_counter()
    chart = StringPrefixModel(grammar)
    builds["chart"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    earley = StringPrefixModel(grammar, support=True)
    builds["earley"] = time.perf_counter() - t0
    out = {"grammar": str(grammar_path), "vocab_size": len(vocab), "documents": n, "seed": seed,
           "tokens_per_document": [len(d) for d in docs], "example": texts[0],
           "machine": platform.processor() or platform.machine(), "build_seconds": builds}
    out["cold"] = decode_pass(chart, earley, docs)
    out["warm"] = decode_pass(chart, earley, docs)
    out["speedup_warm_step_mean"] = out["warm"]["chart"]["step"]["mean_ms"] / out["warm"]["earley"]["step"]["mean_ms"]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grammar", default="grammars/json.pcfg")
    ap.add_argument("--bpe-size", type=int, default=32000)
    ap.add_argument("--documents", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    args = ap.parse_args(argv)
    report = run(args.grammar, args.bpe_size, args.documents, args.seed)
    emit_report(report, args.json)


if __name__ == "__main__":
    main()
