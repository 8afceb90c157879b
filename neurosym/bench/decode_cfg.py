r"""``neurosym bench decode --cfg``: a `.pcfg` with regex terminals (``grammars/json.pcfg``)
constraining a 32k byte-level BPE, side by side with the grammar engines that install.

The grammar is written in each engine's language by :mod:`neurosym.bench.cfg_convert`
(XGrammar and transformers-cfg: EBNF/GBNF; llguidance: Lark), over the byte-level BPE
of the regex bench (:func:`neurosym.bench.compile.bpe_tokenizer`, trained locally on
WikiText-2 and UD English-EWT; one end-of-sequence id ``V`` added). Per engine:

* **compile**: seconds from the grammar text to a ready matcher (the vocabulary's own
  set-up timed apart), and **memory**: the engine's own figure where it reports one
  (XGrammar's ``memory_size_bytes``), else the growth of this process's peak resident
  memory during the compile (an upper bound; 0 when an earlier step already peaked);
* **mask** and **advance**: microseconds per token, median and p99, to write the packed
  32-bit mask into a preallocated buffer and to take the sequence's next token; **step**
  is the two together;
* **agreement**: the packed masks and end-of-sequence decisions compared with
  XGrammar's at every step, along (a) real JSON documents (``json.dumps`` of varied
  Python objects in several layouts, and this repository's ``docs/*.json`` figures),
  tokenised by the BPE, and (b) random walks whose every token XGrammar chose (uniform
  over its allowed tokens; the end taken with probability 0.1 where allowed). Each
  token on which two engines differ is judged by an independent judge, the ``regex``
  package's partial full match of the grammar as one recursive pattern
  (:class:`~neurosym.bench.cfg_convert.PrefixJudge`): is the text so far plus the token
  still a prefix of some JSON text of the grammar? A token that ends inside a UTF-8
  character is judged with the smallest and the largest completion of that character.

neurosym's side is the string-level runtime (:class:`NeurosymEngine`), compared with
XGrammar like the others.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurosym.bench.cfg_convert import PrefixJudge, to_gbnf, to_lark
from neurosym.bench.decode import percentiles, peak_rss_bytes
from neurosym.dsl.pcfg import Grammar, read_pcfg
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("neurosym", "xgrammar", "llguidance", "transformers-cfg")
END_PROB = 0.1  # a walk ends with this probability where the end is allowed
WALK_CAP = 48  # tokens per random walk
# three JSON files of the repository, relative to its root; the second is a retired report (transcribed, replaced in
# docs/ by the recipe's own), kept byte for byte as a document so that the bench's documents stay the measured ones
SHIPPED_JSON = ("docs/gpu_launch_proxy.json", "tests/data/semantic_fusion_report_uniform_2seeds.json", "docs/structured_suite_duplicates.json")
SLOW_ENGINES = ("neurosym", "transformers-cfg")  # driven for at most slow_engine_seconds per part (the steps reached are compared)


# ---------------------------------------------------------------------- the documents
def json_documents(max_docs: int | None = None) -> list[str]:
    """Real JSON documents: ``json.dumps`` of varied Python objects in five layouts, and
    three JSON files of the repository written by the project's benches (under its licence; :data:`SHIPPED_JSON`)."""
    objects = [
        {}, [], "", 0, -0.0, 1e300, -2.5e-7, 12345678901234567890, True, False, None,
        {"name": "Zoë", "tags": ["a", "b\n", "\t\"quoted\"\\"], "n": [1, 2.5, -3, 4e10], "ok": None},
        [[[[]]], {"": {"": [{}]}}, "\u2603 snow", "\U0001f600 emoji", "\x00\x1f control"],
        {"nested": {"deep": {"deeper": [1, {"x": [True, False, None]}]}}, "unicode": "日本語 ñ €"},
        {"id": 17, "user": {"login": "ada", "email": "ada@example.org", "score": 0.93}, "items": list(range(12))},
        [{"lat": 48.8566, "lon": 2.3522, "name": "Paris"}, {"lat": -33.8688, "lon": 151.2093, "name": "Sydney"}],
    ]
    layouts = [{}, {"indent": 2}, {"separators": (",", ":")}, {"ensure_ascii": False}, {"indent": "\t", "ensure_ascii": False}]
    docs = [json.dumps(o, **kw) for o in objects for kw in layouts]
    for name in SHIPPED_JSON:
        p = ROOT / name
        if p.is_file():
            docs.append(p.read_text(encoding="utf-8"))
    return docs[:max_docs] if max_docs else docs


# ---------------------------------------------------------------------- engines
class Engine:
    """One engine's matcher for the grammar, driven token by token."""

    name: str = "?"
    compile_seconds: float = math.nan
    memory_bytes: int | None = None

    def start(self) -> None: ...
    def write_mask(self, out: np.ndarray) -> None: ...
    def advance(self, token: int) -> None: ...

    def end_allowed(self, mask: np.ndarray, eos: int) -> bool:
        return bool((int(mask[eos // 32]) >> (eos % 32)) & 1)


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, gbnf: str, compiler):
        import torch  # lazy: only the engines that take torch buffers
        import xgrammar  # lazy: optional

        t0 = time.perf_counter()
        compiled = compiler.compile_grammar(gbnf, root_rule_name="root")
        self.compile_seconds = time.perf_counter() - t0
        self.memory_bytes = int(compiled.memory_size_bytes)
        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.buffer = torch.zeros((1, 0), dtype=torch.int32)
        self._torch = torch

    def start(self) -> None:
        self.matcher.reset()

    def write_mask(self, out: np.ndarray) -> None:
        if self.buffer.shape[1] != out.size or self.buffer.data_ptr() != out.ctypes.data:
            self.buffer = self._torch.from_numpy(out.reshape(1, -1))
        self.matcher.fill_next_token_bitmask(self.buffer)

    def advance(self, token: int) -> None:
        if not self.matcher.accept_token(token):
            raise NeurosymError(f"xgrammar refused token {token}")


class LLGuidanceEngine(Engine):
    name = "llguidance"

    def __init__(self, lark: str, tokenizer):
        import llguidance  # lazy: optional
        import llguidance.numpy  # lazy: optional

        t0 = time.perf_counter()
        grammar = llguidance.grammar_from("lark", lark)
        self.matcher = llguidance.LLMatcher(tokenizer, grammar)
        self.compile_seconds = time.perf_counter() - t0
        if self.matcher.is_error():
            raise NeurosymError(f"llguidance: {self.matcher.get_error()}")
        self._fill = llguidance.numpy.fill_next_token_bitmask

    def start(self) -> None:
        self.matcher.reset()

    def write_mask(self, out: np.ndarray) -> None:
        self._fill(self.matcher, out.reshape(1, -1), 0)

    def advance(self, token: int) -> None:
        if not self.matcher.consume_token(token):
            raise NeurosymError(f"llguidance refused token {token}: {self.matcher.get_error()}")


def gpt2_byte_table() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the ByteLevel alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


class TransformersCFGEngine(Engine):
    """transformers-cfg's incremental recognizer. Version 0.2.7 reloads a fast tokenizer
    as a slow one from the hub by name, and takes GPT-2's byte table from the hub too;
    offline, the bench hands it that table (the ByteLevel alphabet our BPE uses) in place
    of the download, for the duration of the build."""

    name = "transformers-cfg"

    def __init__(self, gbnf: str, hf_tokenizer, eos: int):
        from types import SimpleNamespace

        import transformers_cfg.tokenization.middle.ByteProxyMapping as proxy  # lazy: optional
        from transformers_cfg.token_grammar_recognizer import IncrementalTokenRecognizer  # lazy: optional

        enc = gpt2_byte_table()
        table = SimpleNamespace(byte_encoder=enc, byte_decoder={c: b for b, c in enc.items()})
        hub = proxy.AutoTokenizer
        proxy.AutoTokenizer = SimpleNamespace(from_pretrained=lambda *a, **k: table)
        try:
            t0 = time.perf_counter()
            self.rec = IncrementalTokenRecognizer(gbnf, "root", hf_tokenizer)
            self.compile_seconds = time.perf_counter() - t0
        finally:
            proxy.AutoTokenizer = hub
        self.eos, self.their_eos = eos, hf_tokenizer.eos_token_id
        self.state = None

    def start(self) -> None:
        self.state = self.rec.string_recognizer.get_initial_parsing_state()

    def write_mask(self, out: np.ndarray) -> None:
        import torch  # lazy

        allowed = self.rec.get_next_token_acceptance(self.state, torch.device("cpu")).numpy()
        bits = np.zeros(out.size * 32, dtype=bool)
        bits[: self.eos] = allowed[: self.eos]
        bits[self.eos] = allowed[self.their_eos]
        out[:] = np.packbits(bits, bitorder="little").view("<i4")

    def advance(self, token: int) -> None:
        self.state = self.rec._update_state_with_token_id(self.their_eos if token == self.eos else token, self.state)
        if not self.state.stacks:
            raise NeurosymError(f"transformers-cfg refused token {token}")


class NeurosymEngine(Engine):
    """neurosym's string-level runtime (:class:`~neurosym.decode.tokenized.StringPrefixModel`
    over :func:`~neurosym.compile.spelling.load_spelled`, one row, ``support=True`` as
    :class:`SpelledMask` alone builds it: a ``.pcfg``'s Earley recogniser): the mask is
    the set of tokens with ``P(x + t is a prefix) > 0``, and the end is allowed where
    ``P(x is a sentence) > 0``."""

    name = "neurosym"

    def __init__(self, path: str | Path, vocab: Vocab, eos: int):
        from neurosym.compile.spelling import load_spelled  # lazy: the runtime, only for this engine
        from neurosym.decode.tokenized import StringPrefixModel  # lazy: as above

        rss = peak_rss_bytes()
        t0 = time.perf_counter()
        self.model = StringPrefixModel(load_spelled(path, vocab), support=True)
        self.compile_seconds = time.perf_counter() - t0
        self.memory_bytes = peak_rss_bytes() - rss
        self.eos = eos
        self.token = np.zeros(1, dtype=np.int64)

    def start(self) -> None:
        self.model.reset(1)

    def write_mask(self, out: np.ndarray) -> None:
        raw, end = self.model.prefix_probs()
        bits = np.zeros(out.size * 32, dtype=bool)
        bits[: self.eos] = raw[0] > 0
        bits[self.eos] = end[0] > 0
        out[:] = np.packbits(bits, bitorder="little").view("<i4")

    def advance(self, token: int) -> None:
        self.token[0] = token
        self.model.advance(self.token)
        if not self.model.rows[0]:
            raise NeurosymError(f"neurosym refused token {token}")


def neurosym_engine(path: str | Path, vocab: Vocab, eos: int) -> Engine:
    """neurosym's matcher for the grammar file ``path`` over ``vocab`` (+ end id ``eos``)."""
    return NeurosymEngine(path, vocab, eos)


# ---------------------------------------------------------------------- vocabularies
@dataclass
class Setup:
    """The bench's vocabulary and each engine's view of it."""

    tokenizer: object
    vocab: Vocab
    eos: int
    seconds: dict[str, float] = field(default_factory=dict)
    views: dict[str, object] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def setup(bpe_size: int) -> Setup:
    from neurosym.bench.compile import bpe_tokenizer  # lazy: trains (or reads the cached) BPE

    tok = bpe_tokenizer(bpe_size)
    vocab = Vocab.from_tokenizer(tok)
    eos = len(vocab)
    s = Setup(tok, vocab, eos)
    encoded = [bytes(x) if x is not None else b"" for x in vocab.surfaces]
    try:
        import xgrammar  # lazy: optional

        t0 = time.perf_counter()
        info = xgrammar.TokenizerInfo(encoded + [b"</s>"], vocab_type=xgrammar.VocabType.RAW, vocab_size=eos + 1, stop_token_ids=[eos])
        s.views["xgrammar"] = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        s.seconds["xgrammar"] = time.perf_counter() - t0
    except ImportError as err:
        s.missing["xgrammar"] = str(err)
    try:
        import llguidance  # lazy: optional

        class _Raw:  # what llguidance.TokenizerWrapper reads of a tokenizer
            eos_token_id, bos_token_id = eos, None
            tokens = encoded + [b"</s>"]
            special_token_ids = [eos]

            def __call__(self, text) -> list[int]:
                return tok.encode(text.decode("utf-8", "replace") if isinstance(text, bytes) else text).ids

        t0 = time.perf_counter()
        s.views["llguidance"] = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Raw()))
        s.seconds["llguidance"] = time.perf_counter() - t0
    except ImportError as err:
        s.missing["llguidance"] = str(err)
    try:
        from transformers import GPT2TokenizerFast  # lazy: optional
        import transformers_cfg  # noqa: F401  # lazy: optional

        t0 = time.perf_counter()
        hf = GPT2TokenizerFast(tokenizer_object=tok.__class__.from_str(tok.to_str()), eos_token="</s>")
        hf.name_or_path = "local-bpe"
        s.views["transformers-cfg"] = hf
        s.seconds["transformers-cfg"] = time.perf_counter() - t0
    except ImportError as err:
        s.missing["transformers-cfg"] = str(err)
    return s


def make_engine(name: str, path: str | Path, grammar: Grammar, s: Setup) -> Engine | None:
    """The engine ``name`` compiled for ``grammar`` (read from ``path``), or None where it
    is not installed."""
    if name == "neurosym":
        return neurosym_engine(path, s.vocab, s.eos)
    if name not in s.views:
        return None
    rss = peak_rss_bytes()
    if name == "xgrammar":
        e: Engine = XGrammarEngine(to_gbnf(grammar), s.views[name])
    elif name == "llguidance":
        e = LLGuidanceEngine(to_lark(grammar), s.views[name])
    else:
        e = TransformersCFGEngine(to_gbnf(grammar, hex_escapes=True), s.views[name], s.eos)
    if e.memory_bytes is None:
        e.memory_bytes = peak_rss_bytes() - rss
    return e


# ---------------------------------------------------------------------- running
@dataclass
class Trace:
    """An engine's answers along the sequences: per step (sequence, k) the packed mask
    over the real tokens and the end decision; where it refused a sequence's token."""

    masks: dict[tuple[int, int], bytes] = field(default_factory=dict)
    ends: dict[tuple[int, int], bool] = field(default_factory=dict)
    refusals: list[tuple[int, int]] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=lambda: {"mask": [], "advance": [], "step": []})


def run_engine(engine: Engine, sequences: list[list[int]], eos: int, time_limit: float = math.inf) -> Trace:
    """Drive ``engine`` along every sequence (stopping early past ``time_limit`` seconds)."""
    words = (eos + 1 + 31) // 32
    buf = np.zeros(words, dtype=np.int32)
    full, rest = divmod(eos, 32)
    out = Trace()
    clock = time.perf_counter_ns
    deadline = time.perf_counter() + time_limit
    for i, tokens in enumerate(sequences):
        if time.perf_counter() > deadline:
            break
        engine.start()
        for k, tok in enumerate(tokens + [None]):
            buf[:] = 0
            t0 = clock()
            engine.write_mask(buf)
            mask_us = (clock() - t0) / 1000
            real = buf[: full + 1].copy()
            real[full] = int(real[full]) & ((1 << rest) - 1)
            out.masks[i, k] = real.tobytes()
            out.ends[i, k] = engine.end_allowed(buf, eos)
            out.times["mask"].append(mask_us)
            if tok is None:
                break
            try:
                t0 = clock()
                engine.advance(tok)
                adv_us = (clock() - t0) / 1000
            except Exception:  # noqa: BLE001 - the engine's refusal, counted
                out.refusals.append((i, k))
                break
            out.times["advance"].append(adv_us)
            out.times["step"].append(mask_us + adv_us)
    return out


def xgrammar_walks(engine: Engine, eos: int, n: int, seed: int = 0, cap: int = WALK_CAP) -> list[list[int]]:
    """``n`` random walks whose tokens XGrammar chose: uniform over its allowed tokens,
    the end taken with probability ``END_PROB`` where allowed; at most ``cap`` tokens."""
    rng = random.Random(seed)
    words = (eos + 1 + 31) // 32
    buf = np.zeros(words, dtype=np.int32)
    walks = []
    for _ in range(n):
        engine.start()
        seq: list[int] = []
        while len(seq) < cap:
            buf[:] = 0
            engine.write_mask(buf)
            bits = np.unpackbits(buf.view(np.uint8), bitorder="little")[: eos + 1]
            allowed = np.nonzero(bits[:eos])[0]
            if bits[eos] and (rng.random() < END_PROB or len(allowed) == 0):
                break
            if len(allowed) == 0:
                break
            t = int(allowed[rng.randrange(len(allowed))])
            engine.advance(t)
            seq.append(t)
        walks.append(seq)
    return walks


def _bits(mask: bytes, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")[:n].astype(bool)


def judge_token(judge: PrefixJudge, prefix: bytes, token: bytes) -> bool:
    """Whether ``prefix + token`` (UTF-8 bytes) can still be completed into a text of the
    grammar; a last character cut in the middle is completed with its smallest and its
    largest continuation (viable if either is)."""
    data = prefix + token
    try:
        return judge.viable(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        if err.reason != "unexpected end of data":
            return False
        head, tail = data[: err.start], data[err.start :]
        need = {0xC0: 2, 0xE0: 3, 0xF0: 4}[tail[0] & 0xF0 if tail[0] >= 0xF0 else tail[0] & 0xE0]
        for fill in (0x80, 0xBF):
            for lead_fix in (False, True):
                cand = tail + bytes([fill]) * (need - len(tail))
                try:
                    ch = cand.decode("utf-8")
                except UnicodeDecodeError:
                    if lead_fix:
                        continue
                    cand = tail + bytes([0xA0 if fill == 0x80 else 0x9F]) * (need - len(tail))
                    try:
                        ch = cand.decode("utf-8")
                    except UnicodeDecodeError:
                        continue
                if judge.viable(head.decode("utf-8") + ch):
                    return True
        return False


def compare(ref: Trace, other: Trace, sequences: list[list[int]], surfaces: list[bytes], eos: int, judge: PrefixJudge) -> dict:
    """Steps where ``other``'s mask or end decision differs from ``ref``'s (XGrammar's),
    each differing token judged: who is right by the independent judge."""
    shared = sorted(ref.masks.keys() & other.masks.keys())
    out = {"steps_compared": len(shared), "mask_differences": 0, "end_differences": 0, "tokens_differing": 0,
           "reference_right": 0, "other_right": 0, "end_reference_right": 0, "end_other_right": 0, "examples": []}
    for key in shared:
        i, k = key
        prefix = b"".join(surfaces[t] for t in sequences[i][:k])
        if ref.masks[key] != other.masks[key]:
            out["mask_differences"] += 1
            a, b = _bits(ref.masks[key], eos), _bits(other.masks[key], eos)
            for t in np.nonzero(a != b)[0].tolist():
                out["tokens_differing"] += 1
                truth = judge_token(judge, prefix, surfaces[t])
                right = "reference_right" if truth == bool(a[t]) else "other_right"
                out[right] += 1
                if len(out["examples"]) < 8:
                    out["examples"].append({"prefix": prefix.decode("utf-8", "replace")[-40:], "token": surfaces[t].decode("utf-8", "replace"),
                                            "reference_allows": bool(a[t]), "viable": truth})
        if ref.ends[key] != other.ends[key]:
            out["end_differences"] += 1
            try:
                truth = judge.complete(prefix.decode("utf-8"))
            except UnicodeDecodeError:
                truth = False
            out["end_reference_right" if truth == ref.ends[key] else "end_other_right"] += 1
    return out


def summary_times(t: Trace) -> dict:
    out = {}
    for what, xs in t.times.items():
        p50, p99 = percentiles(xs)
        out[what] = {"p50_us": p50, "p99_us": p99, "n": len(xs)}
    return out


def run(grammar_path: str | Path = ROOT / "grammars" / "json.pcfg", bpe_size: int = 32000, walks: int = 60, seed: int = 0,
        engines: tuple[str, ...] = ENGINES, slow_engine_seconds: float = 120.0, progress: bool = True) -> dict:
    """The whole comparison (see the module docstring); a JSON-ready dict."""
    import importlib.metadata as md

    def say(msg: str) -> None:
        if progress:
            print(msg, flush=True)

    grammar = read_pcfg(grammar_path)
    s = setup(bpe_size)
    surfaces = [bytes(x) if x is not None else b"" for x in s.vocab.surfaces]
    judge = PrefixJudge(grammar)
    docs = json_documents()
    doc_seqs = [s.tokenizer.encode(d).ids for d in docs]
    result: dict = {"grammar": str(Path(grammar_path).name), "vocab_size": len(s.vocab), "documents": len(docs),
                    "document_tokens": sum(map(len, doc_seqs)), "versions": {}, "engines": {}, "missing": dict(s.missing),
                    "vocab_setup_seconds": s.seconds}
    for pkg in ("xgrammar", "llguidance", "transformers-cfg", "syncode", "outlines-core"):
        try:
            result["versions"][pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            result["versions"][pkg] = None
    built: dict[str, Engine] = {}
    for name in engines:
        try:
            e = make_engine(name, grammar_path, grammar, s)
        except Exception as err:  # noqa: BLE001 - an engine that fails on the grammar is reported
            result["missing"][name] = f"{type(err).__name__}: {err}"
            continue
        if e is None:
            result["missing"].setdefault(name, "not available")
            continue
        built[name] = e
        say(f"{name}: compiled in {e.compile_seconds:.3f} s")
    if "xgrammar" not in built:
        raise NeurosymError("bench decode --cfg compares with XGrammar, which is not installed (pip install 'neurosym[bench]')")
    walk_seqs = xgrammar_walks(built["xgrammar"], s.eos, walks, seed)
    result["walks"] = len(walk_seqs)
    result["walk_tokens"] = sum(map(len, walk_seqs))
    for part, seqs in (("documents", doc_seqs), ("walks", walk_seqs)):
        ref = run_engine(built["xgrammar"], seqs, s.eos)
        for name, e in built.items():
            limit = slow_engine_seconds if name in SLOW_ENGINES else math.inf
            trace = ref if name == "xgrammar" else run_engine(e, seqs, s.eos, limit)
            r = result["engines"].setdefault(name, {"compile_seconds": e.compile_seconds, "memory_bytes": e.memory_bytes})
            r[part] = {"times": summary_times(trace), "refused": len(trace.refusals),
                       "agreement": compare(ref, trace, seqs, surfaces, s.eos, judge) if name != "xgrammar" else None}
            say(f"{name} on {part}: {len(trace.masks)} steps, {len(trace.refusals)} refused")
    return result


def format_results(r: dict) -> str:
    lines = [f"{r['grammar']} over a {r['vocab_size']}-token byte-level BPE: {r['documents']} documents ({r['document_tokens']} tokens), "
             f"{r['walks']} XGrammar walks ({r['walk_tokens']} tokens)",
             "engine            compile s   memory MB   mask p50/p99 µs    advance p50/p99 µs   step p50/p99 µs   diff steps (docs, walks)"]
    for name, e in r["engines"].items():
        t = e["documents"]["times"]

        def pp(x):
            return f"{x['p50_us'] or math.nan:8.1f} /{x['p99_us'] or math.nan:8.1f}"

        diffs = [e[p]["agreement"] for p in ("documents", "walks")]
        d = ", ".join("-" if a is None else f"{a['mask_differences'] + a['end_differences']}/{a['steps_compared']}" for a in diffs)
        mem = (e["memory_bytes"] or 0) / 2**20
        lines.append(f"{name:17s} {e['compile_seconds']:9.3f}   {mem:9.2f}   {pp(t['mask'])}   {pp(t['advance'])}   {pp(t['step'])}   {d}")
    for name, why in r["missing"].items():
        lines.append(f"{name}: {why}")
    return "\n".join(lines)


__all__ = ["ENGINES", "Engine", "compare", "format_results", "json_documents", "judge_token", "neurosym_engine", "run", "run_engine", "xgrammar_walks"]
