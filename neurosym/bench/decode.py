r"""``neurosym bench decode``: the token index side by side with outlines-core and XGrammar.

The same patterns (shipped bank patterns flattened to one regex each, and a word list
of the most frequent WikiText-2 words), the same byte-level BPE vocabulary (trained on
WikiText-2 and UD English-EWT, see :mod:`neurosym.bench.compile`), the same machine, one
engine after the other in the same process. The strings decoded come from outside
neurosym: for the bank patterns, walks guided by the ``regex`` package's partial
matching (:mod:`neurosym.bench.regex_walk`), each a full match under Python's ``re``;
for the word list, WikiText-2 test words in running order.

* **build**: seconds from the regex text to a ready index (the vocabulary's own set-up
  — our trie, outlines-core's ``Vocabulary``, XGrammar's ``TokenizerInfo`` — is timed
  once, apart);
* **memory**: our index's exact bytes (packed masks + the walker's tables); XGrammar's
  own ``memory_size_bytes``; for outlines-core, which reports none, the growth of a fresh
  child process's peak resident memory while its index is built (ours is measured the
  same way, beside it; transient allocations count, so it is an upper bound);
* **mask**: microseconds to write one packed 32-bit mask of the allowed tokens into a
  preallocated buffer, at every token of the strings (median and p99), with the
  engines' masks compared bit for bit at every step (a differing mask counted as the
  other engine's set narrower, wider, or neither), and the end-of-sequence decision
  too (neurosym's ``Automaton.final`` against the end-of-sequence bit of the other
  engine's mask: ending refused or allowed where neurosym does otherwise);
* **advance**: microseconds to take the string's next token (neurosym:
  ``Automaton.next_state``, the one-row NumPy/Python path; outlines-core:
  ``Guide.advance``; XGrammar: ``GrammarMatcher.accept_token``), and **step**, mask and
  advance together: what a decoder pays per token. Each is printed for every engine and
  as theirs / ours, per pattern and as a geometric mean over the patterns;
* **batched advance**: ``Automaton.step`` over batches of 1, 32 and 256 (state, token)
  pairs taken from the same strings, through NumPy against ``step_torch`` (the tensor
  path, which was the CPU path before the NumPy one).

outlines-core 0.2.14 differs from XGrammar and neurosym (which allow every token that
keeps the text completable) in two ways: it refuses a token that would leave an already
complete match incomplete (``a(:b)?`` refuses ``:`` after ``a``; ``-?[0-9]+(\\.[0-9]+)?``
refuses ``.`` after ``1``), and it compiles alternations leftmost-first (``a|ab`` never
allows ``ab``; in a word list a shorter word listed after a longer one it starts is cut
off, and the end refused there). docs/decode.md gives the counts of each in the
published run. Steps where the masks differ are counted and reported, never hidden; each refused string is classed by
whether the refused token would have left a complete match incomplete (the first
kind) or not. Both behaviours are recorded in ``tests/data/xgrammar_masks.json`` (see
:mod:`neurosym.bench.decode_fixture`) and checked by ``tests/test_bench_decode.py``.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import re
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

from neurosym.bench.compile import bpe_tokenizer, frequent_words
from neurosym.bench.grammar_engine import Trace, run_engine
from neurosym.compile.automaton import Automaton
from neurosym.compile.fsg import load_fsg
from neurosym.compile.regex import Limits, literal_alternatives
from neurosym.decode.guide import compile_guide
from neurosym.compile.token_index import vocab_trie
from neurosym.data import shipped_file, shared_data
from neurosym.dsl import regex_ir
from neurosym.dsl.regex_syntax import parse_pattern
from neurosym.decode import FSGPrior, GrammarMask, Nucleus, RepetitionPenalty, Temperature
from neurosym.dsl.regex import read_regex_bank
from neurosym.errors import NeurosymError
from neurosym.lm.model import CausalLM, LMConfig
from neurosym.vocab import Vocab

# (bank file, pattern): one pattern of each shipped bank, chosen without flags so every
# engine reads the same regex
BANK_PATTERNS = [("numbers.regex", "SCIENTIFIC"), ("dates.regex", "STAMP"), ("email.regex", "EMAIL")]

ASCII_CLASSES = {"d": "0-9", "w": "A-Za-z0-9_", "s": " \\t\\n\\r\\f\\v"}


# ---------------------------------------------------------------------- patterns as flat regexes
def ascii_shorthands(pattern: str) -> str:
    r"""``\d \w \s`` spelled as ASCII classes (neurosym reads them as ASCII, Rust's regex
    as Unicode): inside a class the ranges are inlined, outside they get brackets.
    Negated shorthands (``\D \W \S``) are refused: no engine-neutral spelling is needed here."""
    out, i, depth = [], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in ASCII_CLASSES:
                out.append(ASCII_CLASSES[nxt] if depth else f"[{ASCII_CLASSES[nxt]}]")
            elif nxt in "DWS":
                raise NeurosymError(f"bench decode: \\{nxt} has no engine-neutral spelling")
            else:
                out.append(pattern[i: i + 2])
            i += 2
            continue
        if c == "[" and not depth:
            depth = 1
        elif c == "]" and depth and out and out[-1] not in ("[", "[^"):
            depth = 0
        out.append(c)
        i += 1
    return "".join(out)


def flat_regex(bank: regex_ir.Bank, name: str) -> str:
    """One bank pattern as a single regex string (references inlined, ASCII shorthands)."""

    def expr(e: regex_ir.Expr, stack: tuple[str, ...]) -> str:
        if isinstance(e, regex_ir.Regex):
            return f"(?:{ascii_shorthands(e.pattern)})"
        if isinstance(e, regex_ir.Literal):
            return re.escape(e.text)
        if isinstance(e, regex_ir.Words):
            return "(?:" + "|".join(re.escape(w) for w in e.words) + ")"
        if isinstance(e, regex_ir.Ref):
            rule = bank.resolve(e)
            if rule.flags:
                raise NeurosymError(f"bench decode: {rule.name} has flags {rule.flags!r}; pick a pattern without flags")
            return f"(?:{expr(rule.expr, stack + (rule.name,))})"
        if isinstance(e, regex_ir.Seq):
            return "".join(expr(x, stack) for x in e.items)
        if isinstance(e, regex_ir.Choice):
            return "(?:" + "|".join(expr(x, stack) for x in e.options) + ")"
        if isinstance(e, regex_ir.Repeat):
            hi = "" if e.max is None else str(e.max)
            return f"(?:{expr(e.item, stack)}){{{e.min},{hi}}}"
        raise TypeError(e)

    rule = bank.patterns[name]
    if rule.flags:
        raise NeurosymError(f"bench decode: {name} has flags {rule.flags!r}; pick a pattern without flags")
    return expr(rule.expr, (name,))


def bench_patterns(n_words: int, n_strings: int = 60) -> dict[str, tuple[str, list[str]]]:
    """name -> (regex, strings to decode), every string from outside neurosym: bank
    patterns with strings drawn by walks guided by the ``regex`` package's partial
    matching (:mod:`neurosym.bench.regex_walk`, each checked with ``re.fullmatch``), and
    the word list with words in WikiText-2's running order."""
    from neurosym.bench.regex_walk import sample_matches  # lazy: the regex package comes with the bench extra

    out = {}
    for file, name in BANK_PATTERNS:
        pattern = flat_regex(read_regex_bank(shipped_file(f"grammars/{file}")), name)
        out[f"{file.split('.')[0]}:{name}"] = (pattern, sample_matches(pattern, n_strings, seed=0, max_len=40))
    words = frequent_words(n_words)
    text = shared_data("wikitext-2", "test.txt").read_text(encoding="utf-8").split()
    chosen = set(words)
    running = [w for w in text if w in chosen][:200]
    out[f"{n_words} words"] = ("(?:" + "|".join(re.escape(w) for w in words) + ")", running)
    return out


# ---------------------------------------------------------------------- engines
@dataclass
class Engine:
    """One engine's index for one pattern, driven token by token."""

    name: str
    build_seconds: float
    memory_bytes: int | None
    build_cpu_seconds: float = math.nan  # process CPU time of the build (other jobs' load does not enter it)

    def start(self) -> None: ...
    def write_mask(self, out: np.ndarray) -> None: ...
    def advance(self, token: int) -> None: ...

    def end_allowed(self, mask: np.ndarray, eos: int) -> bool:
        """Whether the engine lets the sequence end here: the end-of-sequence bit
        (id ``eos``) of the mask it has just written."""
        return bool((int(mask[eos // 32]) >> (eos % 32)) & 1)


class Ours(Engine):
    """neurosym through its public guide API: ``compile_guide`` (a fresh compile, no cache)
    over the prebuilt vocabulary, one matcher per string, ``fill_mask``, ``accept`` and
    ``can_end``."""

    def __init__(self, pattern: str, vocab: Vocab):
        t0, c0 = time.perf_counter(), time.process_time()
        self.guide = compile_guide(pattern, vocab, Limits(max_states=200_000), cache=False)
        super().__init__("neurosym", time.perf_counter() - t0, self.guide.grammar.index_bytes(), time.process_time() - c0)
        self.auto: Automaton = self.guide.grammar
        self.words = self.guide.mask_words
        self.matcher = self.guide.matcher()

    def start(self) -> None:
        self.matcher = self.guide.matcher()

    def write_mask(self, out: np.ndarray) -> None:
        self.matcher.fill_mask(out[: self.words])

    def advance(self, token: int) -> None:
        if not self.matcher.accept(token):
            raise NeurosymError(f"token {token} rejected")

    def end_allowed(self, mask: np.ndarray, eos: int) -> bool:
        """neurosym's own decision: ``can_end`` (its masks hold no end-of-sequence bit)."""
        return self.matcher.can_end()


class Outlines(Engine):
    def __init__(self, pattern: str, vocabulary):
        import outlines_core  # lazy: an optional benchmark dependency

        t0, c0 = time.perf_counter(), time.process_time()
        self.index = outlines_core.Index(pattern, vocabulary)
        super().__init__("outlines-core", time.perf_counter() - t0, None, time.process_time() - c0)
        self.guide = outlines_core.Guide(self.index)

    def start(self) -> None:
        self.guide.reset()

    def write_mask(self, out: np.ndarray) -> None:
        self.guide.write_mask_into(out.ctypes.data, out.size, 4)

    def advance(self, token: int) -> None:
        self.guide.advance(token, return_tokens=False)


class XGrammar(Engine):
    def __init__(self, pattern: str, compiler):
        import xgrammar  # lazy: an optional benchmark dependency

        t0, c0 = time.perf_counter(), time.process_time()
        compiled = compiler.compile_regex(pattern)
        super().__init__("xgrammar", time.perf_counter() - t0, int(compiled.memory_size_bytes), time.process_time() - c0)
        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.buffer = torch.zeros((1, 0), dtype=torch.int32)

    def start(self) -> None:
        self.matcher.reset()

    def write_mask(self, out: np.ndarray) -> None:
        if self.buffer.shape[1] != out.size:
            self.buffer = torch.from_numpy(out.reshape(1, -1))  # shares memory with ``out``
        self.matcher.fill_next_token_bitmask(self.buffer)

    def advance(self, token: int) -> None:
        if not self.matcher.accept_token(token):
            raise NeurosymError(f"token {token} rejected")


# ---------------------------------------------------------------------- measuring
def engine_vocabularies(vocab: Vocab, eos: int):
    """Each engine's view of the same vocabulary (+ one end-of-sequence id ``eos = V``),
    and the seconds each took to set up."""
    out, seconds = {}, {}
    t0 = time.perf_counter()
    vocab_trie(vocab)
    seconds["neurosym"] = time.perf_counter() - t0
    try:
        import outlines_core  # lazy: optional

        t0 = time.perf_counter()
        table: dict[bytes, list[int]] = {}
        for i, s in enumerate(vocab.surfaces):
            if s is not None:
                table.setdefault(bytes(s), []).append(i)
        out["outlines-core"] = outlines_core.Vocabulary(eos, table)
        seconds["outlines-core"] = time.perf_counter() - t0
    except ImportError:
        out["outlines-core"] = None
    try:
        import xgrammar  # lazy: optional

        t0 = time.perf_counter()
        encoded = [bytes(s) if s is not None else b"" for s in vocab.surfaces] + [b"</s>"]
        info = xgrammar.TokenizerInfo(encoded, vocab_type=xgrammar.VocabType.RAW, vocab_size=len(encoded), stop_token_ids=[eos])
        out["xgrammar"] = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        seconds["xgrammar"] = time.perf_counter() - t0
    except ImportError:
        out["xgrammar"] = None
    return out, seconds


def run_strings(engine: Engine, token_lists: list[list[int]], eos: int) -> tuple[dict[str, list[float]], Trace]:
    """Times (µs) at every step of every string — ``mask`` (write the packed mask),
    ``advance`` (take the string's next token) and ``step`` (the two together, what a
    decoder pays per token) — and the engine's decisions (a :class:`Trace`: per step the
    packed mask over the real tokens and the end decision, and where the engine refused a
    token of a string that fully matches the pattern under Python's ``re``). The loop is
    :func:`~neurosym.bench.grammar_engine.run_engine`, the one ``bench decode --cfg`` drives
    its engines with."""
    trace = run_engine(engine, token_lists, eos)
    return trace.times, trace


def compare_decisions(ours: Trace, theirs: Trace) -> dict[str, int]:
    """Step-by-step comparison of another engine's decisions with neurosym's, over the
    steps both reached: masks differing (the other engine's set narrower, wider, or
    neither), and end-of-sequence decisions differing (the other engine refusing an end
    neurosym allows, or allowing one neurosym refuses)."""
    shared = ours.masks.keys() & theirs.masks.keys()
    out = {"mask_steps_compared": len(shared), "mask_disagreements": 0, "mask_theirs_narrower": 0, "mask_theirs_wider": 0,
           "mask_theirs_crossed": 0, "end_disagreements": 0, "end_theirs_refuses": 0, "end_theirs_allows": 0}
    for key in shared:
        a = np.frombuffer(ours.masks[key], dtype=np.uint32)
        b = np.frombuffer(theirs.masks[key], dtype=np.uint32)
        if not np.array_equal(a, b):
            out["mask_disagreements"] += 1
            extra, missing = bool((b & ~a).any()), bool((a & ~b).any())
            out["mask_theirs_wider" if not missing else "mask_theirs_narrower" if not extra else "mask_theirs_crossed"] += 1
        if ours.ends[key] != theirs.ends[key]:
            out["end_disagreements"] += 1
            out["end_theirs_refuses" if ours.ends[key] else "end_theirs_allows"] += 1
    return out


def classify_refusals(refusals: list[tuple[int, int]], pattern: str, token_lists: list[list[int]], vocab: Vocab) -> dict[str, int]:
    """Refused strings split by what the refused token would have done (``re.fullmatch``
    on the text): left a complete match incomplete (the text before it matched the
    whole pattern, the text with it does not: outlines-core's first kind of refusal),
    or anything else (leftmost-first alternation, e.g. ``the`` then ``re`` in a word
    list, or ``ab`` at the start of ``a|ab``)."""
    checker = re.compile(pattern)

    def text(ids: list[int]) -> str:
        s = vocab.spell(ids)
        return s.decode("utf-8", errors="replace") if isinstance(s, bytes) else s

    first_kind = 0
    for i, k in refusals:
        before, after = text(token_lists[i][:k]), text(token_lists[i][: k + 1])
        first_kind += checker.fullmatch(before) is not None and checker.fullmatch(after) is None
    return {"strings_refused": len(refusals), "refused_leaving_a_complete_match_incomplete": first_kind, "refused_otherwise": len(refusals) - first_kind}


BATCHES = (1, 32, 256)


def batched_steps(auto: Automaton, token_lists: list[list[int]], batches: tuple[int, ...] = BATCHES, repeats: int = 200, seed: int = 0) -> dict[int, dict[str, float]]:
    """Median µs of one batched advance, ``Automaton.step`` on CPU tensors (the NumPy
    path) against ``step_torch`` (the same step as tensor operations, the path before
    the NumPy one), for batches of (state, token) pairs drawn from the real strings'
    steps; the two must give the same states."""
    pairs = []
    for tokens in token_lists:
        q = auto.start
        for t in tokens:
            pairs.append((q, t))
            q = auto.next_state(q, t)
    if not pairs:
        return {}
    rng = np.random.default_rng(seed)
    table = np.array(pairs, dtype=np.int64)
    out = {}
    for B in batches:
        pick = table[rng.integers(0, len(table), B)]
        states, tokens = torch.from_numpy(pick[:, 0].copy()), torch.from_numpy(pick[:, 1].copy())
        if not torch.equal(auto.step(states, tokens), auto.step_torch(states, tokens)):
            raise NeurosymError("bench decode: the NumPy and tensor steps disagree")
        row = {}
        for name, fn in (("numpy_us", auto.step), ("torch_us", auto.step_torch)):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter_ns()
                fn(states, tokens)
                times.append((time.perf_counter_ns() - t0) / 1000)
            row[name] = statistics.median(times)
        out[B] = row
    return out


def percentiles(times: list[float]) -> tuple[float | None, float | None]:
    """(median, 99th percentile) of a list of times, or (None, None) if empty."""
    if not times:
        return None, None
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def peak_rss_bytes() -> int:
    """The process's peak resident memory so far (Linux reports KiB)."""
    import resource  # lazy: POSIX only

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_child(kind: str, pattern: str, vocab: Vocab, eos: int, out) -> None:
    engines, _ = engine_vocabularies(vocab, eos)
    before = peak_rss_bytes()
    keep = Ours(pattern, vocab) if kind == "neurosym" else Outlines(pattern, engines["outlines-core"])
    out.put(peak_rss_bytes() - before)
    del keep


def rss_growth(kind: str, pattern: str, vocab: Vocab, eos: int, timeout: float) -> int | None:
    """Growth of a fresh process's peak resident memory while it builds one index
    (transient allocations included: an upper bound on what the index keeps)."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_rss_child, args=(kind, pattern, vocab, eos, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None
    return queue.get() if not queue.empty() else None


def parse_floor(pattern: str, repeats: int = 3) -> float:
    """Seconds (best of ``repeats``) that parsing ``pattern`` with interegular takes, the
    first step of every neurosym regex build (``dsl.regex_syntax.parse_pattern``): a floor
    under neurosym's build time that no token-index work can remove."""
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        parse_pattern(pattern)
        best = min(best, time.perf_counter() - t0)
    return best


def run(n_words: int = 5000, bpe_size: int = 32000, repeats: int = 3, progress: bool = True) -> dict:
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None)
    tokenizer = bpe_tokenizer(bpe_size)
    vocab = Vocab.from_tokenizer(tokenizer)
    V = len(vocab)
    eos = V
    vocabularies, setup = engine_vocabularies(vocab, eos)
    rows = []
    for name, (pattern, strings) in bench_patterns(n_words).items():
        say(f"{name}: building indexes ...")
        token_lists = [tokenizer.encode(s).ids for s in strings]
        row = {"pattern": name, "regex_chars": len(pattern), "strings": len(strings), "steps": sum(len(t) + 1 for t in token_lists), "engines": {}}
        engines: list[Engine] = []
        for kind in ("neurosym", "outlines-core", "xgrammar"):
            if kind != "neurosym" and vocabularies.get(kind) is None:
                row["engines"][kind] = {"error": "not installed (pip install 'neurosym[bench]')"}
                continue
            try:
                builds, cpu = [], []
                for _ in range(repeats):
                    e = Ours(pattern, vocab) if kind == "neurosym" else Outlines(pattern, vocabularies[kind]) if kind == "outlines-core" else XGrammar(pattern, vocabularies[kind])
                    builds.append(e.build_seconds)
                    cpu.append(e.build_cpu_seconds)
                e.build_seconds, e.build_cpu_seconds = statistics.median(builds), statistics.median(cpu)
                engines.append(e)
            except Exception as err:  # a reference engine refusing a pattern is a result, not a crash
                row["engines"][kind] = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
        if literal_alternatives(pattern) is None:  # a word list takes the trie route: no regex parse
            row["regex_parse_seconds"] = parse_floor(pattern, repeats)
        decisions: dict[str, Trace] = {}
        for e in engines:
            if isinstance(e, Ours):
                row["batched_step"] = batched_steps(e.auto, token_lists)
            times, decisions[e.name] = run_strings(e, token_lists, eos)
            row["engines"][e.name] = {
                "build_seconds": e.build_seconds,
                "build_cpu_seconds": e.build_cpu_seconds,
                "memory_bytes": e.memory_bytes,
                **classify_refusals(decisions[e.name].refusals, pattern, token_lists, vocab),
            }
            for part, ts in times.items():
                row["engines"][e.name][f"{part}_median_us"], row["engines"][e.name][f"{part}_p99_us"] = percentiles(ts)
        for kind in ("neurosym", "outlines-core"):
            if kind in row["engines"] and "error" not in row["engines"][kind]:
                row["engines"][kind]["rss_growth_bytes"] = rss_growth(kind, pattern, vocab, eos, timeout=600)
        if "neurosym" in decisions:
            for kind, theirs in decisions.items():
                if kind != "neurosym":
                    row["engines"][kind].update(compare_decisions(decisions["neurosym"], theirs))
        rows.append(row)
    out = {"vocab_size": V, "vocab_setup_seconds": setup, "patterns": rows}
    out["ratios"] = step_ratios(out)
    return out


def us(x: float | None, width: int) -> str:
    return f"{x:>{width}.2f}" if x is not None else f"{'n/a':>{width}}"


def ratio(theirs: float | None, ours: float | None) -> float | None:
    return theirs / ours if theirs is not None and ours else None


def step_ratios(r: dict) -> dict[str, dict[str, float]]:
    """Per reference engine, the geometric mean over patterns of theirs / ours for the
    mask, the advance and the two together (p50 and p99): > 1 means neurosym is faster."""
    out: dict[str, dict[str, list[float]]] = {}
    for row in r["patterns"]:
        ours = row["engines"].get("neurosym", {})
        if "error" in ours:
            continue
        for kind, e in row["engines"].items():
            if kind == "neurosym" or "error" in e:
                continue
            for key in ("mask_median_us", "mask_p99_us", "advance_median_us", "advance_p99_us", "step_median_us", "step_p99_us"):
                q = ratio(e.get(key), ours.get(key))
                if q is not None:
                    out.setdefault(kind, {}).setdefault(key, []).append(q)
    return {kind: {key: math.exp(statistics.fmean(math.log(x) for x in xs)) for key, xs in d.items()} for kind, d in out.items()}


def format_results(r: dict) -> str:
    lines = [
        f"token index over a {r['vocab_size']}-token byte-level BPE (WikiText-2 + UD EWT)",
        "vocabulary set-up, once: " + ", ".join(f"{k} {v:.3f} s" for k, v in r["vocab_setup_seconds"].items()),
        "per token, one sequence: mask = write the packed allowed-token mask, advance = take the token, step = both (µs)",
        "",
        f"  {'pattern':<22}{'engine':<15}{'build s':>9}{'CPU s':>9}{'index MB':>10}{'peak RSS MB':>12}"
        f"{'mask p50':>10}{'p99':>8}{'adv p50':>9}{'p99':>8}{'step p50':>10}{'p99':>8}  steps differing from neurosym's (masks, end of sequence); refusals",
    ]
    for row in r["patterns"]:
        ours = row["engines"].get("neurosym", {})
        for kind, e in row["engines"].items():
            if "error" in e:
                lines.append(f"  {row['pattern']:<22}{kind:<15}{e['error']}")
                continue
            mem = f"{e['memory_bytes'] / 1e6:.2f}" if e.get("memory_bytes") is not None else "n/a"
            rss = f"{e['rss_growth_bytes'] / 1e6:.1f}" if e.get("rss_growth_bytes") is not None else "n/a"
            diff = ""
            if "mask_disagreements" in e:
                n = e["mask_steps_compared"]
                diff = (f"masks {e['mask_disagreements']}/{n} (narrower {e['mask_theirs_narrower']}, wider {e['mask_theirs_wider']}, "
                        f"crossed {e['mask_theirs_crossed']}), ends {e['end_disagreements']}/{n} (refused {e['end_theirs_refuses']}, "
                        f"allowed {e['end_theirs_allows']})")
            if e.get("strings_refused"):
                diff += f"; refused {e['strings_refused']} of {row['strings']} ({e['refused_leaving_a_complete_match_incomplete']} leaving a complete match incomplete)"
            times = "".join(us(e.get(f"{part}_{q}_us"), w) for part in ("mask", "advance", "step") for q, w in (("median", 10 if part != "advance" else 9), ("p99", 8)))
            lines.append(f"  {row['pattern']:<22}{kind:<15}{e['build_seconds']:>9.4f}{e['build_cpu_seconds']:>9.4f}{mem:>10}{rss:>12}{times}  {diff}")
        for kind, e in row["engines"].items():
            if kind != "neurosym" and "error" not in e and "error" not in ours:
                parts = [f"build {e['build_seconds'] / ours['build_seconds']:.2f}x (CPU {e['build_cpu_seconds'] / ours['build_cpu_seconds']:.2f}x)"]
                for part in ("mask", "advance", "step"):
                    p50, p99 = ratio(e.get(f"{part}_median_us"), ours.get(f"{part}_median_us")), ratio(e.get(f"{part}_p99_us"), ours.get(f"{part}_p99_us"))
                    if p50 is not None and p99 is not None:
                        parts.append(f"{part} p50 {p50:.2f}x p99 {p99:.2f}x")
                lines.append(f"  {'':<22}{'theirs/ours ' + kind + ':':<27}" + ", ".join(parts))
        if row.get("batched_step"):
            lines.append(f"  {'':<22}batched advance, Automaton.step (NumPy) vs step_torch, µs p50: "
                         + ", ".join(f"B={B} {t['numpy_us']:.1f} vs {t['torch_us']:.1f}" for B, t in row["batched_step"].items()))
        parse = f"; parsing the regex alone (interegular) {row['regex_parse_seconds']:.4f} s" if "regex_parse_seconds" in row else ""
        lines.append(f"  {'':<22}({row['strings']} strings, {row['steps']} mask steps{parse})")
    summary = step_ratios(r)
    if summary:
        lines += ["", "theirs / ours per token, geometric mean over the patterns (> 1: neurosym is faster):"]
        for kind, g in summary.items():
            lines.append(f"  {kind:<15}" + ", ".join(f"{part} p50 {g[f'{part}_median_us']:.2f}x p99 {g[f'{part}_p99_us']:.2f}x" for part in ("mask", "advance", "step") if f"{part}_median_us" in g))
    return "\n".join(lines)


# ---------------------------------------------------------------------- generation
def bench_generation(batch: int = 32, steps: int = 128, repeats: int = 3, threads: int = 1, seed: int = 0, device: str = "cpu") -> dict:
    """Per generated token, at the semantic-fusion recipe's size (d_model 128, 4 layers,
    clause.fsg's word vocabulary): the model's incremental forward (KV cache), drawing
    a token from its scores (what unconstrained sampling adds), and the full processor
    chain (grammar mask, FSG prior, repetition penalty, temperature, nucleus: every
    call and advance) on the same batch; and ``steps`` tokens with the KV cache vs
    recomputing the whole prefix at every step. Each figure is the median over
    ``repeats`` runs in one process, in wall time and in this thread's CPU time (the
    CPU figures are the fair ones on a shared machine: other processes' load does not
    enter them). On ``device`` "cuda" the model, the scores and the processors' states
    live on the GPU and every figure is taken after ``torch.cuda.synchronize``."""
    torch.set_num_threads(threads)
    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)  # noqa: E731
    torch.manual_seed(seed)
    fsg = load_fsg(shipped_file("grammars/clause.fsg"))
    vocab = fsg.vocab
    eos = vocab.id("<eos>")
    model = CausalLM(LMConfig(vocab_size=len(vocab), d_model=128, n_layers=4, n_heads=4, d_ff=256, dropout=0.0, max_len=steps + 1)).to(dev).eval()
    chain = [GrammarMask(fsg, eos_id=eos), FSGPrior(fsg, weight=1.0, eos_id=eos), RepetitionPenalty(last_k=8, factor=1.2), Temperature(0.9), Nucleus(0.95)]
    gen = torch.Generator(device=dev).manual_seed(seed)
    clocks = {"wall": time.perf_counter, "cpu": time.thread_time}

    def timed(fn) -> dict[str, float]:
        sync()
        t0 = {k: c() for k, c in clocks.items()}
        fn()
        sync()
        return {k: c() - t0[k] for k, c in clocks.items()}

    def forward_cached() -> tuple[dict[str, float], torch.Tensor]:
        cache = model.new_cache(batch)
        ids = torch.randint(0, len(vocab), (batch, steps), generator=gen, device=dev)
        out = {}

        def go():
            with torch.no_grad():
                for t in range(steps):
                    out["logits"] = model(ids[:, t : t + 1], cache=cache).logits[:, -1]

        spent = timed(go)
        return {k: v / steps for k, v in spent.items()}, out["logits"]

    def forward_recomputed() -> dict[str, float]:
        ids = torch.randint(0, len(vocab), (batch, steps), generator=gen, device=dev)

        def go():
            with torch.no_grad():
                for t in range(steps):
                    model(ids[:, : t + 1])

        return {k: v / steps for k, v in timed(go).items()}

    def draw(scores: torch.Tensor) -> torch.Tensor:
        return torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=gen).squeeze(1)

    def sampling(logits: torch.Tensor) -> dict[str, float]:
        spent = {k: 0.0 for k in clocks}
        for _ in range(steps):
            scores = logits.clone()
            for k, v in timed(lambda: draw(scores)).items():
                spent[k] += v
        return {k: v / steps for k, v in spent.items()}

    def processor_chain(logits: torch.Tensor) -> dict[str, float]:
        for p in chain:
            p.reset(batch, dev)
        done = torch.zeros(batch, dtype=torch.bool, device=dev)
        spent = {k: 0.0 for k in clocks}
        for _ in range(steps):
            scores = logits.clone()
            sync()
            t0 = {k: c() for k, c in clocks.items()}
            for p in chain:
                scores = p(scores)
            sync()
            t1 = {k: c() for k, c in clocks.items()}
            tokens = torch.where(done, eos, draw(scores.masked_fill(done[:, None], 0.0)))  # done rows: padding
            t2 = {k: c() for k, c in clocks.items()}
            sync()
            for p in chain:
                p.advance(tokens, done)
            sync()
            for k, c in clocks.items():
                spent[k] += (t1[k] - t0[k]) + (c() - t2[k])
            done = done | (tokens == eos)
            if bool(done.all()):
                for p in chain:
                    p.reset(batch, dev)
                done = torch.zeros(batch, dtype=torch.bool, device=dev)
        return {k: v / steps for k, v in spent.items()}

    runs: dict[str, list[dict[str, float]]] = {"cached": [], "recomputed": [], "sampling": [], "chain": []}
    for _ in range(repeats):
        per_token, logits = forward_cached()
        runs["cached"].append(per_token)
        runs["recomputed"].append(forward_recomputed())
        runs["sampling"].append(sampling(logits))
        runs["chain"].append(processor_chain(logits))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in clocks} for name, rs in runs.items()}
    out = {"batch": batch, "steps": steps, "threads": threads, "device": str(dev), "vocab_size": len(vocab), "chain": [repr(x) for x in chain]}
    for k in clocks:
        c, r, smp, p = (med[n][k] for n in ("cached", "recomputed", "sampling", "chain"))
        out[k] = {"forward_cached_ms": 1e3 * c, "forward_recomputed_ms": 1e3 * r, "kv_speedup": r / c,
                  "sampling_ms": 1e3 * smp, "processor_chain_ms": 1e3 * p, "chain_share_of_forward": p / c}
    return out


def format_generation(g: dict) -> str:
    lines = [f"generation at the semantic-fusion recipe's size (V={g['vocab_size']}, batch {g['batch']}, {g['steps']} tokens, "
             f"{g['threads']} thread(s); median of runs; wall time, and this thread's CPU time)"]
    for label, key, unit in (
        ("model forward per token, KV cache", "forward_cached_ms", "ms"),
        ("model forward per token, recomputed", "forward_recomputed_ms", "ms"),
        ("drawing the token (any sampler)", "sampling_ms", "ms"),
        ("processor chain per token", "processor_chain_ms", "ms"),
    ):
        lines.append(f"  {label:<40s} {g['wall'][key]:8.3f} {unit} wall   {g['cpu'][key]:8.3f} {unit} CPU")
    lines.append(f"  {'-> KV cache faster than recompute':<40s} {g['wall']['kv_speedup']:7.1f}x wall    {g['cpu']['kv_speedup']:7.1f}x CPU")
    lines.append(f"  {'-> processor chain / cached forward':<40s} {100 * g['wall']['chain_share_of_forward']:7.1f}% wall    "
                 f"{100 * g['cpu']['chain_share_of_forward']:7.1f}% CPU")
    lines.append(f"  chain: {', '.join(g['chain'])}")
    return "\n".join(lines)
