"""``neurosym bench maskbench [DIR]``: JSON Schemas by MaskBench's own protocol.

MaskBench (JSONSchemaBench, Geng et al. 2025) gives real-world schemas with valid and
invalid test instances. Per schema and engine: the time to first mask (compile, then one
mask); each test instance written as ``json.dumps(data, ensure_ascii=False)``, tokenised,
and every token checked against the mask before it is accepted (the time between masks
is mask + accept); after the last token, whether the end is allowed. A valid instance
refused (at a token or at the end) is a *validation error*, an invalid one accepted to
its end an *invalidation error*; a schema *passes* when it compiles and has neither.

Engines, over the same locally trained 32k byte-level BPE
(:func:`neurosym.bench.compile.bpe_tokenizer`) in one process, one thread each:
neurosym (:func:`neurosym.compile_guide` of the schema), llguidance
(``grammar_from_json_schema``, flexible whitespace) and XGrammar
(``compile_json_schema(any_whitespace=True, strict_mode=False)``).

The schemas are benchmark input only (``../shared/data/maskbench``, never copied into
the repository). docs/json_schema.md has the table and the command.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from neurosym.bench.compile import bpe_tokenizer
from neurosym.errors import NeurosymError
from neurosym.data import shared_data_dir
from neurosym.vocab import Vocab

ENGINES = ("neurosym", "llguidance", "xgrammar")
COUNTS = ("schemas", "passing", "compile_errors", "validation_errors", "invalidation_errors", "valid_tested", "invalid_tested",
          "mask_accept_disagreements")


def default_folder() -> Path | None:
    """``../shared/data/maskbench/schemas`` when present."""
    shared = shared_data_dir()
    folder = None if shared is None else shared / "maskbench" / "schemas"
    return folder if folder is not None and folder.is_dir() else None


def read_cases(folder: Path, limit: int | None = None) -> list[tuple[str, Any, list[tuple[bool, Any]]]]:
    """``(name, schema, [(valid, data), ...])`` of each MaskBench file in ``folder``, sorted by name."""
    files = sorted(p for p in Path(folder).glob("*.json") if p.is_file())
    if not files:
        raise NeurosymError(f"{folder}: no MaskBench .json files")
    out = []
    for p in files[:limit]:
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            out.append((p.stem, d["schema"], [(bool(t["valid"]), t["data"]) for t in d.get("tests", [])]))
        except (ValueError, KeyError, TypeError) as err:
            raise NeurosymError(f"{p}: not a MaskBench file ({err})") from None
    return out


class _Engine:
    """One engine's matcher protocol, as the bench drives it."""

    name = ""

    def compile(self, schema: Any) -> None: ...
    def start(self) -> None: ...
    def mask(self) -> np.ndarray: ...  # packed int32 bits, token i is bit i % 32 of word i // 32
    def accept(self, token: int) -> bool: ...
    def can_end(self) -> bool: ...


class _Neurosym(_Engine):
    name = "neurosym"

    def __init__(self, vocab: Vocab):
        from neurosym.decode.guide import compile_guide  # lazy: the bench imports engines when run

        self._compile = compile_guide
        self.vocab = vocab

    def compile(self, schema: Any) -> None:
        self.guide = self._compile(schema, self.vocab, cache=False)
        self.buf = np.zeros(self.guide.mask_words, dtype=np.int32)
        self.start()

    def start(self) -> None:
        self.m = self.guide.matcher()

    def mask(self) -> np.ndarray:
        self.m.fill_mask(self.buf)
        return self.buf

    def accept(self, token: int) -> bool:
        return self.m.accept(token)

    def can_end(self) -> bool:
        return self.m.can_end()


class _LLGuidance(_Engine):
    name = "llguidance"

    def __init__(self, tokenizer, vocab: Vocab):
        import llguidance  # lazy: optional (the bench extra)
        import llguidance.numpy  # lazy: optional

        eos = len(vocab)
        encoded = [bytes(s) if s is not None else b"" for s in vocab.surfaces]

        class _Raw:  # what llguidance.TokenizerWrapper reads of a tokenizer
            eos_token_id, bos_token_id = eos, None
            tokens = encoded + [b"</s>"]
            special_token_ids = [eos]

            def __call__(self, text) -> list[int]:
                return tokenizer.encode(text.decode("utf-8", "replace") if isinstance(text, bytes) else text).ids

        self.llg = llguidance
        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Raw()))
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.buf = np.zeros((1, (eos + 1 + 31) // 32), dtype=np.int32)

    def compile(self, schema: Any) -> None:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": True})
        self.matcher = self.llg.LLMatcher(self.tok, grammar)
        if self.matcher.is_error():
            raise NeurosymError(self.matcher.get_error())

    def start(self) -> None:
        self.matcher.reset()

    def mask(self) -> np.ndarray:
        self._fill(self.matcher, self.buf, 0)
        return self.buf[0]

    def accept(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))

    def can_end(self) -> bool:
        return bool(self.matcher.is_accepting())


class _XGrammar(_Engine):
    name = "xgrammar"

    def __init__(self, vocab: Vocab):
        import torch  # lazy: XGrammar's masks are torch tensors
        import xgrammar  # lazy: optional (the bench extra)

        self.eos = len(vocab)
        encoded = [bytes(s) if s is not None else b"" for s in vocab.surfaces]
        info = xgrammar.TokenizerInfo(encoded + [b"</s>"], vocab_type=xgrammar.VocabType.RAW, vocab_size=self.eos + 1,
                                      stop_token_ids=[self.eos])
        self.xg = xgrammar
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.buf = xgrammar.allocate_token_bitmask(1, self.eos + 1)
        self.view = self.buf.numpy()[0] if hasattr(self.buf, "numpy") else torch.as_tensor(self.buf).numpy()[0]

    def compile(self, schema: Any) -> None:
        compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True, strict_mode=False)
        self.matcher = self.xg.GrammarMatcher(compiled)

    def start(self) -> None:
        self.matcher.reset()

    def mask(self) -> np.ndarray:
        self.matcher.fill_next_token_bitmask(self.buf)
        return self.view

    def accept(self, token: int) -> bool:
        return bool(self.matcher.accept_token(token))

    def can_end(self) -> bool:
        self.matcher.fill_next_token_bitmask(self.buf)
        return bool((self.view[self.eos // 32] >> (self.eos % 32)) & 1)


def _allowed(mask: np.ndarray, token: int) -> bool:
    return bool((int(mask[token // 32]) >> (token % 32)) & 1)


def run_engine(engine: _Engine, cases: list, tokenizer, progress=None) -> dict:
    """One engine over every case: counts, every compile error's message, and the times."""
    clock = time.perf_counter
    first: list[float] = []
    between: list[float] = []
    counts = Counter()
    errors: dict[str, str] = {}
    wrong: list[dict] = []
    encoded = {}
    for name, schema, tests in cases:
        counts["schemas"] += 1
        t0 = clock()
        try:
            engine.compile(schema)
            engine.mask()
        except Exception as err:  # each engine's own refusal (neurosym's: NeurosymError) is a compile error
            counts["compile_errors"] += 1
            errors[name] = reason((str(err).splitlines() or [type(err).__name__])[0])
            continue
        first.append(clock() - t0)
        ok = True
        for i, (valid, data) in enumerate(tests):
            text = json.dumps(data, ensure_ascii=False)
            ids = encoded.get(text)
            if ids is None:
                ids = encoded[text] = tokenizer.encode(text).ids
            engine.start()
            accepted = True
            for t in ids:
                t0 = clock()
                mask = engine.mask()
                allowed = _allowed(mask, t)
                took = allowed and engine.accept(t)
                between.append(clock() - t0)
                if allowed and not took:
                    counts["mask_accept_disagreements"] += 1
                if not took:
                    accepted = False
                    break
            ends = accepted and engine.can_end()
            if valid and not ends:
                counts["validation_errors"] += 1
                ok = False
                wrong.append({"schema": name, "test": i, "valid": True, "refused_at_end": accepted})
            elif not valid and ends:
                counts["invalidation_errors"] += 1
                ok = False
                wrong.append({"schema": name, "test": i, "valid": False})
            counts["valid_tested" if valid else "invalid_tested"] += 1
        counts["passing"] += ok
        if progress is not None:
            progress(engine.name, counts["schemas"])
    q = lambda xs, p: round(float(np.percentile(np.array(xs) * 1e6, p)), 1) if xs else None  # noqa: E731
    for key in COUNTS:
        counts.setdefault(key, 0)
    return {
        "counts": {key: counts[key] for key in COUNTS},
        "compile_error_reasons": dict(Counter(errors.values()).most_common()),
        "time_to_first_mask_us": {"p50": q(first, 50), "p90": q(first, 90), "p99": q(first, 99), "n": len(first)},
        "time_between_masks_us": {"p50": q(between, 50), "p90": q(between, 90), "p99": q(between, 99), "n": len(between)},
        "compile_errors": errors,
        "wrong": wrong,
    }


def reason(message: str) -> str:
    """A compile error's reason without what it quotes of the schema (patterns, names,
    pointers, numbers), so reasons group and no schema text is kept: neurosym's
    ``FILE#POINTER: keyword: why`` as ``keyword: why``."""
    text = message.split("#", 1)[1].split(": ", 1)[1] if "#" in message and ": " in message.split("#", 1)[1] else message
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "…", text)
    text = re.sub(r"[0-9]+(?:[,.][0-9]+)*", "N", text)
    return text[:120]


def run(folder: Path | None = None, engines: tuple[str, ...] = ENGINES, limit: int | None = None, bpe_size: int = 32000,
        progress=None) -> dict:
    """Every engine asked for over the MaskBench files in ``folder`` (default: the shared sample)."""
    folder = folder or default_folder()
    if folder is None:
        raise NeurosymError("no MaskBench folder: pass DIR, or put the shared data beside the repository (../shared/data/maskbench)")
    cases = read_cases(Path(folder), limit)
    tokenizer = bpe_tokenizer(bpe_size)
    vocab = Vocab.from_tokenizer(tokenizer)
    out: dict = {"folder": str(folder), "schemas": len(cases), "bpe_size": bpe_size,
                 "valid_instances": sum(v for _, _, ts in cases for v, _ in ts),
                 "invalid_instances": sum(not v for _, _, ts in cases for v, _ in ts), "engines": {}}
    for name in engines:
        if name not in ENGINES:
            raise NeurosymError(f"unknown engine {name!r}; expected one of {', '.join(ENGINES)}")
        try:
            engine = {"neurosym": lambda: _Neurosym(vocab), "llguidance": lambda: _LLGuidance(tokenizer, vocab),
                      "xgrammar": lambda: _XGrammar(vocab)}[name]()
        except ImportError as err:
            out["engines"][name] = {"missing": str(err)}
            continue
        out["engines"][name] = run_engine(engine, cases, tokenizer, progress)
        out["engines"][name]["version"] = _version(name)
    return out


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def format_results(r: dict) -> str:
    rows = [f"MaskBench: {r['schemas']} schemas, {r['valid_instances']} valid and {r['invalid_instances']} invalid instances, "
            f"{r['bpe_size'] // 1000}k byte-level BPE (times in microseconds)",
            f"{'engine':<12} {'pass':>5} {'compile err':>11} {'valid refused':>13} {'invalid accepted':>16} "
            f"{'TBM p50':>8} {'p99':>8} {'TTFM p50':>9} {'p99':>9}"]
    for name, e in r["engines"].items():
        if "missing" in e:
            rows.append(f"{name:<12} not installed ({e['missing']})")
            continue
        c, b, f = e["counts"], e["time_between_masks_us"], e["time_to_first_mask_us"]
        rows.append(f"{name:<12} {c.get('passing', 0):>5} {c.get('compile_errors', 0):>11} {c.get('validation_errors', 0):>13} "
                    f"{c.get('invalidation_errors', 0):>16} {b['p50']!s:>8} {b['p99']!s:>8} {f['p50']!s:>9} {f['p99']!s:>9}")
    return "\n".join(rows)


__all__ = ["ENGINES", "default_folder", "format_results", "read_cases", "run", "run_engine"]
