r"""``neurosym bench decode --cfg``: a `.pcfg` with regex terminals (``grammars/json.pcfg``)
constraining a 32k byte-level BPE, side by side with the grammar engines that install.

The grammar is written in each engine's language by :mod:`neurosym.compile.export`
(XGrammar and transformers-cfg: EBNF/GBNF; llguidance and SynCode: Lark), over the byte-level BPE
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
  (:class:`~neurosym.compile.export.PrefixJudge`): is the text so far plus the token
  still a prefix of some JSON text of the grammar? A token that ends inside a UTF-8
  character is judged with the smallest and the largest completion of that character.

neurosym's side is the string-level runtime (:class:`NeurosymEngine`), compared with
XGrammar like the others.

SynCode 0.4.16 pins ``transformers==4.53.2``, so it runs from a venv of its own
(``scripts/syncode-venv``) in a worker process (:mod:`neurosym.bench.remote_engine`):
the worker drives it along a whole part with the same :func:`run_engine` loop, so its
times are taken in the worker and carry no inter-process cost. Every engine already
takes a part's sequences one engine after the other, so nothing is interleaved
differently for it.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurosym.compile.export import PrefixJudge, to_gbnf, to_lark
from neurosym.bench.decode import percentiles, peak_rss_bytes
from neurosym.bench.grammar_engine import Engine, Trace, run_engine
from neurosym.dsl.pcfg import Grammar, read_pcfg
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("neurosym", "xgrammar", "llguidance", "transformers-cfg", "syncode")
END_PROB = 0.1  # a walk ends with this probability where the end is allowed
WALK_CAP = 48  # tokens per random walk
# three JSON files of the repository, relative to its root; the second is a retired report (transcribed, replaced in
# docs/ by the recipe's own), kept byte for byte as a document so that the bench's documents stay the measured ones
SHIPPED_JSON = ("docs/gpu_launch_proxy.json", "tests/data/semantic_fusion_report_uniform_2seeds.json", "docs/structured_suite_duplicates.json")
EXAMPLES_PER_SIDE = 6  # differing tokens kept as examples, per side (allowed by the other engine alone / by XGrammar alone)
REFUSAL_EXAMPLES = 8
SLOW_ENGINES = ("neurosym", "transformers-cfg", "syncode")  # driven for at most slow_engine_seconds per part (the steps reached are compared)


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


class SynCodeEngine(Engine):
    """SynCode's logits processor (``SyncodeLogitsProcessor``, lark's LALR(1) parser with
    its basic lexer, and the DFA mask store over the vocabulary; ``mode="grammar_mask"``,
    its default, which over-approximates), on the Lark grammar of :func:`to_lark`.

    SynCode keeps no parser state between tokens that the caller advances: it re-reads
    the ids generated so far at every call (its incremental parser caches the lexing).
    So **advance** is appending the id to a preallocated id buffer (and checking it was
    allowed: a refused token ends the sequence, as for the other engines), and all the
    parsing is in **mask**: one call of the processor on a row of zero scores, the mask
    read back as the scores it left finite. That is SynCode's mask as a model sees it,
    including its fall-back to no mask where its parser fails or allows nothing.

    It builds a ``GPT2TokenizerFast`` over the bench's BPE (``tokenizer_json``) with the
    end token ``</s>`` added (transformers also adds ``<|endoftext|>`` as a special
    token, left out of the comparison; the end is mapped to the bench's ``eos``). Its
    parser and mask store are cached under a fresh temporary folder, so the compile is
    timed from nothing."""

    name = "syncode"

    def __init__(self, lark: str, tokenizer_json: str, eos: int, mode: str = "grammar_mask", threads: int = 1):
        import importlib.metadata as md
        import logging
        import shutil
        import tempfile

        import torch  # lazy: only the engines that take torch buffers
        from tokenizers import Tokenizer
        from transformers import GPT2TokenizerFast  # lazy: optional

        import syncode.common  # lazy: optional (its own venv: docs/decode.md)
        from syncode.grammar_mask.logits_processor import SyncodeLogitsProcessor  # lazy: optional
        from syncode.parsers.grammars import Grammar as SynCodeGrammar  # lazy: optional

        torch.set_num_threads(threads)
        logging.getLogger("syncode").setLevel(logging.WARNING)
        self.version = md.version("syncode")
        hf = GPT2TokenizerFast(tokenizer_object=Tokenizer.from_str(tokenizer_json), eos_token="</s>")
        cache = tempfile.mkdtemp(prefix="neurosym-syncode-")
        saved, syncode.common.SYNCODE_CACHE = syncode.common.SYNCODE_CACHE, cache + "/"
        try:
            rss = peak_rss_bytes()
            t0 = time.perf_counter()
            self.proc = SyncodeLogitsProcessor(SynCodeGrammar(lark), hf, use_cache=False, parse_output_only=True, mode=mode)
            self.compile_seconds = time.perf_counter() - t0
            self.memory_bytes = peak_rss_bytes() - rss
        finally:
            syncode.common.SYNCODE_CACHE = saved
            shutil.rmtree(cache, ignore_errors=True)
        self.eos, self.their_eos = eos, hf.eos_token_id
        self.scores = torch.zeros((1, len(hf)))
        self.ids = torch.zeros((1, 1 << 16), dtype=torch.long)
        self.n = 0
        self.allowed = None
        self._torch = torch

    def start(self) -> None:
        self.proc.reset()
        self.n = 0
        self.allowed = None

    def write_mask(self, out: np.ndarray) -> None:
        self.scores.zero_()
        scores = self.proc(self.ids[:, : self.n], self.scores)
        self.allowed = self._torch.isfinite(scores[0]).numpy()
        bits = np.zeros(out.size * 32, dtype=bool)
        bits[: self.eos] = self.allowed[: self.eos]
        bits[self.eos] = self.allowed[self.their_eos]
        out[:] = np.packbits(bits, bitorder="little").view("<i4")

    def advance(self, token: int) -> None:
        their = self.their_eos if token == self.eos else token
        if self.allowed is not None and not self.allowed[their]:
            raise NeurosymError(f"syncode refused token {token}")
        self.ids[0, self.n] = their
        self.n += 1
        self.allowed = None


def syncode_python(given: str | Path | None = None) -> str | None:
    """The Python that runs SynCode: ``given``, else ``$NEUROSYM_SYNCODE_PYTHON``, else
    this checkout's ``.venv-syncode`` (docs/decode.md says how to make it), else None."""
    if given is not None:
        if not Path(given).is_file():
            raise NeurosymError(f"--syncode-python {given}: no such file")
        return str(given)
    for cand in (os.environ.get("NEUROSYM_SYNCODE_PYTHON"), ROOT / ".venv-syncode" / "bin" / "python"):
        if cand and Path(cand).is_file():
            return str(cand)
    return None


class NeurosymEngine(Engine):
    """neurosym through its public guide API (:func:`neurosym.compile_guide` over the
    prebuilt vocabulary, one :class:`~neurosym.decode.guide.Matcher` per sequence): the
    mask is ``fill_mask`` (packed int32 bits), the end bit is ``can_end``, and the advance
    is ``accept``. The compile is timed without the guide cache (a fresh compile)."""

    name = "neurosym"

    def __init__(self, path: str | Path, vocab: Vocab, eos: int):
        from neurosym.decode.guide import compile_guide  # lazy: the runtime, only for this engine

        rss = peak_rss_bytes()
        t0 = time.perf_counter()
        self.guide = compile_guide(Path(path), vocab, cache=False)
        self.matcher = self.guide.matcher()
        self.compile_seconds = time.perf_counter() - t0
        self.memory_bytes = peak_rss_bytes() - rss
        self.eos = eos
        self.words = self.guide.mask_words

    def start(self) -> None:
        self.matcher = self.guide.matcher()

    def write_mask(self, out: np.ndarray) -> None:
        self.matcher.fill_mask(out[: self.words])
        out[self.words:] = 0
        if self.matcher.can_end():  # the end id V sits just past the vocabulary's bits
            out.view(np.uint32)[self.eos // 32] |= np.uint32(1 << (self.eos % 32))

    def advance(self, token: int) -> None:
        if token == self.eos or not self.matcher.accept(token):
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


SYNCODE_MISSING = ("not measured: SynCode 0.4.16 pins transformers==4.53.2, so it runs in a venv of its own, "
                   "named by --syncode-python or $NEUROSYM_SYNCODE_PYTHON, or .venv-syncode in the checkout (docs/decode.md)")


def setup(bpe_size: int, syncode: str | Path | None = None, threads: int = 1) -> Setup:
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
    python = syncode_python(syncode)
    if python is not None:
        s.views["syncode"] = (python, threads)
    else:
        s.missing["syncode"] = SYNCODE_MISSING
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
    elif name == "syncode":
        from neurosym.bench.remote_engine import RemoteEngine  # lazy: only where SynCode's venv is there

        python, threads = s.views[name]
        kwargs = {"lark": to_lark(grammar), "tokenizer_json": s.tokenizer.to_str(), "eos": s.eos, "threads": threads}
        e = RemoteEngine(python, "neurosym.bench.decode_cfg:SynCodeEngine", kwargs, name="syncode")
    else:
        e = TransformersCFGEngine(to_gbnf(grammar, hex_escapes=True), s.views[name], s.eos)
    if e.memory_bytes is None:
        e.memory_bytes = peak_rss_bytes() - rss
    return e


# ---------------------------------------------------------------------- running
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


def judge_tokens(judge: PrefixJudge, prefix: bytes, tokens: list[bytes]) -> list[bool]:
    """:func:`judge_token` for each of ``tokens`` after one ``prefix``, the same answers
    sooner: viable prefixes are closed under taking prefixes, so a token whose first one
    or two bytes (ASCII, so whole characters) already leave no completion is not viable,
    and those short heads are judged once per prefix."""
    heads: dict[bytes, bool] = {}
    out = []
    for tok in tokens:
        ok = True
        for n in (1, 2):
            head = tok[:n]
            if len(tok) <= n or not head.isascii():
                break
            if head not in heads:
                heads[head] = judge_token(judge, prefix, head)
            if not heads[head]:
                ok = False
                break
        out.append(ok and judge_token(judge, prefix, tok))
    return out


def compare(ref: Trace, other: Trace, sequences: list[list[int]], surfaces: list[bytes], eos: int, judge: PrefixJudge) -> dict:
    """Steps where ``other``'s mask or end decision differs from ``ref``'s (XGrammar's),
    each differing token judged: who is right by the independent judge; the differing
    tokens also split by side (``other_allows``: allowed by ``other`` alone;
    ``other_refuses``: by ``ref`` alone)."""
    shared = sorted(ref.masks.keys() & other.masks.keys())
    out = {"steps_compared": len(shared), "mask_differences": 0, "end_differences": 0, "tokens_differing": 0,
           "other_allows": 0, "other_refuses": 0, "reference_right": 0, "other_right": 0, "end_reference_right": 0, "end_other_right": 0, "examples": []}
    for key in shared:
        i, k = key
        prefix = b"".join(surfaces[t] for t in sequences[i][:k])
        sides: set[str] = set()
        if ref.masks[key] != other.masks[key]:
            out["mask_differences"] += 1
            a, b = _bits(ref.masks[key], eos), _bits(other.masks[key], eos)
            differing = np.nonzero(a != b)[0].tolist()
            for t, truth in zip(differing, judge_tokens(judge, prefix, [surfaces[t] for t in differing])):
                out["tokens_differing"] += 1
                side = "other_refuses" if a[t] else "other_allows"
                out[side] += 1
                right = "reference_right" if truth == bool(a[t]) else "other_right"
                out[right] += 1
                if side not in sides and sum(e["reference_allows"] == bool(a[t]) for e in out["examples"]) < EXAMPLES_PER_SIDE:
                    sides.add(side)  # one example per side and step, so the examples come from several steps
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


def refusal_examples(t: Trace, sequences: list[list[int]], surfaces: list[bytes], judge: PrefixJudge) -> list[dict]:
    """The first tokens ``t``'s engine refused along ``sequences``: the text before, the
    token, and whether the independent judge finds the text plus the token viable."""
    out = []
    for i, k in t.refusals[:REFUSAL_EXAMPLES]:
        prefix, token = b"".join(surfaces[x] for x in sequences[i][:k]), surfaces[sequences[i][k]]
        out.append({"prefix": prefix.decode("utf-8", "replace")[-40:], "token": token.decode("utf-8", "replace"),
                    "viable": judge_token(judge, prefix, token)})
    return out


def summary_times(t: Trace) -> dict:
    out = {}
    for what, xs in t.times.items():
        p50, p99 = percentiles(xs)
        out[what] = {"p50_us": p50, "p99_us": p99, "n": len(xs)}
    return out


def run(grammar_path: str | Path = ROOT / "grammars" / "json.pcfg", bpe_size: int = 32000, walks: int = 60, seed: int = 0,
        engines: tuple[str, ...] = ENGINES, slow_engine_seconds: float = 120.0, progress: bool = True,
        syncode: str | Path | None = None, threads: int = 1) -> dict:
    """The whole comparison (see the module docstring); a JSON-ready dict. ``syncode``:
    the Python of SynCode's own venv (:func:`syncode_python` finds one otherwise); that
    engine runs in a worker process (:mod:`neurosym.bench.remote_engine`). ``threads``:
    torch's threads, here and in the worker (transformers-cfg and SynCode compute their
    masks with torch; XGrammar's compiler is given one thread)."""
    import importlib.metadata as md

    import torch  # lazy: only to pin the torch engines' threads

    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)

    def say(msg: str) -> None:
        if progress:
            print(msg, flush=True)

    grammar = read_pcfg(grammar_path)
    s = setup(bpe_size, syncode if "syncode" in engines else None, threads)
    surfaces = [bytes(x) if x is not None else b"" for x in s.vocab.surfaces]
    judge = PrefixJudge(grammar)
    docs = json_documents()
    doc_seqs = [s.tokenizer.encode(d).ids for d in docs]
    result: dict = {"grammar": str(Path(grammar_path).name), "vocab_size": len(s.vocab), "documents": len(docs),
                    "document_tokens": sum(map(len, doc_seqs)), "versions": {}, "engines": {}, "missing": dict(s.missing),
                    "vocab_setup_seconds": s.seconds, "threads": threads, "load_average_at_start": os.getloadavg()[0]}
    for pkg in ("xgrammar", "llguidance", "transformers-cfg", "syncode", "outlines-core"):
        try:
            result["versions"][pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            result["versions"][pkg] = None
    built: dict[str, Engine] = {}
    try:
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
            if e.version is not None:
                result["versions"][name] = e.version
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
                trace = ref if name == "xgrammar" else e.run(seqs, s.eos, limit)
                r = result["engines"].setdefault(name, {"compile_seconds": e.compile_seconds, "memory_bytes": e.memory_bytes})
                r[part] = {"times": summary_times(trace), "refused": len(trace.refusals),
                           "refusal_examples": refusal_examples(trace, seqs, surfaces, judge),
                           "agreement": compare(ref, trace, seqs, surfaces, s.eos, judge) if name != "xgrammar" else None}
                say(f"{name} on {part}: {len(trace.masks)} steps, {len(trace.refusals)} refused")
    finally:
        for e in built.values():
            e.close()
        torch.set_num_threads(threads_before)
    result["load_average_at_end"] = os.getloadavg()[0]
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


__all__ = ["ENGINES", "Engine", "SynCodeEngine", "Trace", "syncode_python", "compare", "format_results", "json_documents", "judge_token", "judge_tokens", "neurosym_engine", "run", "run_engine", "xgrammar_walks"]
