"""``neurosym bench guide``: compiled guides through the public API against XGrammar.

Over the regex bench's 32k byte-level BPE (:func:`neurosym.bench.compile.bpe_tokenizer`,
trained locally), with each side's vocabulary built once (neurosym's :class:`Vocab`,
XGrammar's ``TokenizerInfo``), in one process on one thread:

* **vocabulary**: seconds to build it, and to ask again for the same tokenizer;
* **compile**: per grammar (the regex bench's patterns and ``grammars/json.pcfg``), the
  median over ``repeats`` fresh compiles of ``neurosym.compile_guide(spec, vocab,
  cache=False)`` and the time to its first mask, against XGrammar's own best
  configuration (``compile_regex``; the builtin JSON grammar, ``compile_builtin_json_grammar``),
  and the time of a cached ``compile_guide``;
* **steps** (JSON): the per-token step, ``fill_mask`` then ``accept``, along real JSON
  documents (:func:`neurosym.bench.decode_cfg.json_documents`), interleaved per token with
  XGrammar's builtin JSON grammar (``fill_next_token_bitmask`` then ``accept_token``):
  p50, p90 and p99 in µs over the documents both accept (XGrammar's builtin grammar takes
  an object or an array at the top only), and how many tokens each refused;
* **prior** (JSON): the exact next-token log-probabilities (``Matcher.log_probs``) along
  the same documents, ms per step, each row checked to sum to 1.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from neurosym.bench.compile import TOKEN_REGEXES, bpe_tokenizer
from neurosym.bench.decode_cfg import json_documents
from neurosym.decode.guide import compile_guide
from neurosym.vocab import Vocab

JSON_GRAMMAR = "grammars/json.pcfg"


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # lazy: only for the report

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 4)


def _quantiles(times: list[float]) -> dict:
    if not times:
        return {"steps": 0, "p50_us": None, "p90_us": None, "p99_us": None}
    q = np.percentile(np.array(times) * 1e6, [50, 90, 99])
    return {"steps": len(times), "p50_us": round(float(q[0]), 2), "p90_us": round(float(q[1]), 2), "p99_us": round(float(q[2]), 2)}


def _xgrammar(vocab: Vocab):
    """XGrammar's compiler over the same vocabulary (one end id ``V`` added), or None."""
    try:
        import xgrammar  # lazy: optional (the bench extra)
    except ImportError:
        return None
    eos = len(vocab)
    encoded = [bytes(s) if s is not None else b"" for s in vocab.surfaces]
    info = xgrammar.TokenizerInfo(encoded + [b"</s>"], vocab_type=xgrammar.VocabType.RAW, vocab_size=eos + 1, stop_token_ids=[eos])
    return xgrammar, xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)


def compile_times(vocab: Vocab, repeats: int, xg) -> list[dict]:
    """Per grammar: neurosym's fresh compile and first mask, a cached compile, XGrammar's compile (medians, ms)."""
    rows = []
    specs = [(name, pattern) for name, pattern in TOKEN_REGEXES.items()] + [("json", JSON_GRAMMAR)]
    for name, spec in specs:
        build, first = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            guide = compile_guide(spec, vocab, cache=False)
            t1 = time.perf_counter()
            guide.matcher().fill_mask(np.zeros(guide.mask_words, dtype=np.int32))
            first.append(time.perf_counter() - t1)
            build.append(t1 - t0)
        compile_guide(spec, vocab)
        t0 = time.perf_counter()
        compile_guide(spec, vocab)
        cached = time.perf_counter() - t0
        row = {"grammar": name, "spec": spec, "neurosym_compile_ms": _ms(statistics.median(build)),
               "neurosym_first_mask_ms": _ms(statistics.median(first)), "neurosym_cached_ms": _ms(cached)}
        if xg is not None:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                if spec == JSON_GRAMMAR:
                    xg[1].compile_builtin_json_grammar()
                else:
                    xg[1].compile_regex(spec)
                times.append(time.perf_counter() - t0)
            row["xgrammar_compile_ms"] = _ms(statistics.median(times))
            row["xgrammar_how"] = "compile_builtin_json_grammar" if spec == JSON_GRAMMAR else "compile_regex"
            row["compile_ratio"] = round(row["neurosym_compile_ms"] / max(row["xgrammar_compile_ms"], 1e-9), 2)
        rows.append(row)
    return rows


def json_steps(tokenizer, vocab: Vocab, xg) -> dict:
    """The JSON step along real documents, neurosym's guide and XGrammar's builtin JSON interleaved per token."""
    guide = compile_guide(JSON_GRAMMAR, vocab)
    out = np.zeros(guide.mask_words, dtype=np.int32)
    ours: list[float] = []
    theirs: list[float] = []
    refused = {"neurosym": 0, "xgrammar": 0}
    compared = 0
    if xg is not None:
        compiled = xg[1].compile_builtin_json_grammar()
        buf = xg[0].allocate_token_bitmask(1, len(vocab) + 1)
    clock = time.perf_counter
    for doc in json_documents():
        ids = tokenizer.encode(doc).ids
        m = guide.matcher()
        matcher = xg[0].GrammarMatcher(compiled) if xg is not None else None
        mine: list[float] = []
        other: list[float] = []
        ok_ours = ok_theirs = True
        for t in ids:
            t0 = clock()
            m.fill_mask(out)
            accepted = m.accept(t)
            t1 = clock()
            mine.append(t1 - t0)
            if not accepted:
                ok_ours = False
                refused["neurosym"] += 1
                break
            if matcher is not None and ok_theirs:
                t0 = clock()
                matcher.fill_next_token_bitmask(buf)
                accepted = matcher.accept_token(t)
                other.append(clock() - t0)
                if not accepted:
                    ok_theirs = False
                    refused["xgrammar"] += 1
        if ok_ours and (matcher is None or ok_theirs):  # the documents both take: like with like
            ours.extend(mine)
            theirs.extend(other)
            compared += 1
    result = {"documents": len(json_documents()), "documents_compared": compared, "refused": refused, "neurosym": _quantiles(ours)}
    if xg is not None:
        result["xgrammar_builtin_json"] = _quantiles(theirs)
        result["p50_ratio"] = round(result["neurosym"]["p50_us"] / result["xgrammar_builtin_json"]["p50_us"], 2)
        result["p90_ratio"] = round(result["neurosym"]["p90_us"] / result["xgrammar_builtin_json"]["p90_us"], 2)
    return result


def json_prior(tokenizer, vocab: Vocab, max_tokens: int = 60) -> dict:
    """The exact prior along real documents: ``Matcher.log_probs`` (the next-token
    log-probabilities of ``grammars/json.pcfg`` read as strings, from its prefix chart),
    timed before each accepted token, over the first ``max_tokens`` tokens of each document;
    every document token must have a finite log-probability, and each row sum to 1."""
    guide = compile_guide(JSON_GRAMMAR, vocab)
    times: list[float] = []
    worst = 0.0
    for doc in json_documents():
        m = guide.matcher()
        for t in tokenizer.encode(doc).ids[:max_tokens]:
            t0 = time.perf_counter()
            lp = m.log_probs()
            times.append(time.perf_counter() - t0)
            if not np.isfinite(lp[t]) or not m.accept(t):
                raise AssertionError(f"the prior refused token {t} of a JSON document")
            worst = max(worst, abs(float(np.exp(lp).sum()) - 1.0))
    return {"max_tokens_per_document": max_tokens, "rows_sum_to_one_within": worst,
            **{k.replace("_us", "_ms"): (None if v is None else round(v / 1e3, 4)) for k, v in _quantiles(times).items() if k != "steps"},
            "steps": len(times)}


def run(bpe_size: int = 32000, repeats: int = 5) -> dict:
    """Every part of the bench (module docstring), one dict."""
    tokenizer = bpe_tokenizer(bpe_size)
    t0 = time.perf_counter()
    vocab = Vocab.from_tokenizer(tokenizer)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = Vocab.from_tokenizer(tokenizer)
    second = time.perf_counter() - t0
    xg = _xgrammar(vocab)
    compile_guide("a", vocab, cache=False)  # the imports and the vocabulary's tables, once, before anything is timed
    return {
        "bpe_size": len(vocab), "repeats": repeats, "xgrammar": None if xg is None else _version("xgrammar"),
        "vocabulary": {"build_ms": _ms(first), "again_ms": _ms(second), "same_object": again is vocab},
        "compile": compile_times(vocab, repeats, xg),
        "json_steps": json_steps(tokenizer, vocab, xg),
        "json_prior": json_prior(tokenizer, vocab),
    }


def format_results(r: dict) -> str:
    lines = [f"vocabulary of {r['bpe_size']} tokens: built in {r['vocabulary']['build_ms']:.1f} ms, asked again {r['vocabulary']['again_ms']:.3f} ms"]
    for row in r["compile"]:
        xg = f"; XGrammar {row['xgrammar_how']} {row['xgrammar_compile_ms']:.2f} ms ({row['compile_ratio']}x)" if "xgrammar_compile_ms" in row else ""
        lines.append(f"{row['grammar']:>12}: compile {row['neurosym_compile_ms']:.2f} ms, first mask {row['neurosym_first_mask_ms']:.3f} ms, "
                     f"cached {row['neurosym_cached_ms']:.3f} ms{xg}")
    s = r["json_steps"]
    lines.append(f"JSON step over {s['documents_compared']} of {s['documents']} documents (refused: {s['refused']}):")
    for name in ("neurosym", "xgrammar_builtin_json"):
        if name in s:
            q = s[name]
            lines.append(f"{name:>22}: p50 {q['p50_us']} µs, p90 {q['p90_us']} µs, p99 {q['p99_us']} µs over {q['steps']} steps")
    p = r["json_prior"]
    lines.append(f"JSON exact prior (log_probs): p50 {p['p50_ms']} ms, p90 {p['p90_ms']} ms, p99 {p['p99_ms']} ms over {p['steps']} steps "
                 f"(rows sum to 1 within {p['rows_sum_to_one_within']:.1e})")
    return "\n".join(lines)


__all__ = ["compile_times", "format_results", "json_steps", "run"]
