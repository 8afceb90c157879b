"""Grammars over strings, over any vocabulary (neurosym.compile.spelling, neurosym.decode.tokenized).

Every probability the string-level prefix model gives is checked against brute force
over the finite language's strings: random small PCFGs and FSGs with literal terminals,
random small byte vocabularies (every byte of the language, plus random substrings of
sentences: tokens that span a separator, end inside a word, or span several terminals).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurosym.compile.fsg import compile_fsg
from neurosym.compile.pcfg import compile_pcfg
from neurosym.compile.spelling import Separator, spell
from neurosym.decode.tokenized import SpelledMask, SpelledPrior, StringPrefixModel
from neurosym.dsl.fsg import parse_fsg
from neurosym.dsl.pcfg import parse_pcfg
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab
from references import recursive_pcfg

WORDS = ["a", "ab", "b", "ba", "(", ")", ".", "aa", "é"]
SEPARATORS = [None, "", "-"]


# ---------------------------------------------------------------------- random grammars and their languages
def random_pcfg(rng: random.Random) -> tuple[str, dict[tuple[str, ...], float]]:
    """An acyclic PCFG (finite language) as text, and its sentences' probabilities."""
    n = rng.randint(1, 4)
    lang: dict[int, dict[tuple[str, ...], float]] = {}
    lines = []
    for i in reversed(range(n)):  # N_i uses only N_j with j > i
        k = rng.randint(1, 3)
        weights = [rng.random() + 0.05 for _ in range(k)]
        total = sum(weights)
        out: dict[tuple[str, ...], float] = defaultdict(float)
        alts = []
        for w in weights:
            p = w / total
            rhs = []
            for _ in range(rng.randint(1, 3)):
                if i + 1 < n and rng.random() < 0.4:
                    rhs.append(rng.randint(i + 1, n - 1))
                else:
                    rhs.append(rng.choice(WORDS))
            seqs = {(): 1.0}
            for sym in rhs:
                part = lang[sym] if isinstance(sym, int) else {(sym,): 1.0}
                nxt: dict = defaultdict(float)
                for a, pa in seqs.items():
                    for b, pb in part.items():
                        nxt[a + b] += pa * pb
                seqs = nxt
            for s, q in seqs.items():
                out[s] += p * q
            alts.append(" ".join(f"N{x}" if isinstance(x, int) else repr(x) for x in rhs) + f" [{p!r}]")
        lang[i] = dict(out)
        lines.append(f"N{i} -> " + " | ".join(alts))
    return "%start N0\n" + "\n".join(lines) + "\n", lang[0]


def random_fsg(rng: random.Random) -> tuple[str, dict[tuple[str, ...], float]]:
    """An acyclic FSG as text, and its sentences' probabilities."""
    n = rng.randint(2, 5)
    lines, arcs = [], defaultdict(list)
    for i in range(n - 1):
        k = rng.randint(1, 3)
        ws = [rng.random() + 0.05 for _ in range(k + 1)]
        total = sum(ws)
        for j, w in enumerate(ws[:k]):
            dst, word = (i + 1 if j == 0 else rng.randint(i + 1, n - 1)), rng.choice(WORDS)  # every state reachable
            arcs[i].append((dst, word, w / total))
            lines.append(f"S{i} S{dst} {word!r} {w / total!r}")
        lines.append(f"S{i} {ws[k] / total!r}")
        arcs[i].append((None, None, ws[k] / total))
    lines.append(f"S{n - 1} 1.0")
    arcs[n - 1].append((None, None, 1.0))
    out: dict = defaultdict(float)

    def paths(q, seq, p):
        for dst, word, w in arcs[q]:
            if dst is None:
                out[seq] += p * w
            else:
                paths(dst, seq + (word,), p * w)

    paths(0, (), 1.0)
    return "%start S0\n" + "\n".join(lines) + "\n", dict(out)


def strings_of(lang: dict[tuple[str, ...], float], sep: Separator) -> dict[bytes, float]:
    out: dict[bytes, float] = defaultdict(float)
    for seq, p in lang.items():
        out[sep.join(list(seq)).encode()] += p
    return dict(out)


def random_vocab(rng: random.Random, strings: dict[bytes, float]) -> list[bytes]:
    """Every byte of the language, plus substrings of its strings and a few random ones."""
    texts = list(strings)
    toks = {bytes([b]) for s in texts for b in s}
    for _ in range(rng.randint(0, 25)):
        s = rng.choice(texts)
        if s:
            i = rng.randrange(len(s))
            toks.add(s[i : i + rng.randint(1, 6)])
    for _ in range(rng.randint(0, 4)):
        toks.add(bytes(rng.choice(b"ab(). -") for _ in range(rng.randint(1, 3))))
    toks.discard(b"")
    return sorted(toks)


def bytes_vocab(toks: list[bytes]) -> Vocab:
    return Vocab(["<eos>"] + [t.hex() for t in toks], [None] + toks, "bytes")


# ---------------------------------------------------------------------- brute force
def longest_match(s: bytes, toks: list[bytes]) -> list[int] | None:
    """``s`` written with the longest token at each step (ids 1..), None if it cannot be."""
    out = []
    while s:
        best = max((i for i, t in enumerate(toks, 1) if s.startswith(t)), key=lambda i: len(toks[i - 1]), default=None)
        if best is None:
            return None
        out.append(best)
        s = s[len(toks[best - 1]) :]
    return out


def brute(strings: dict[bytes, float], x: bytes, toks: list[bytes], history: list[int] | None = None) -> tuple[np.ndarray, float, np.ndarray]:
    """(raw (V,), end, longest-match (V,)) by sums over the strings, token ids 1..V-1: raw
    ``P(x + t ...) / P(x ...)`` and the end; with ``history`` (the tokens of x), the next
    token of the strings whose longest-match writing starts with it, and their end."""
    z = sum(p for s, p in strings.items() if s.startswith(x))
    raw = np.zeros(len(toks) + 1)
    greedy = np.zeros(len(toks) + 1)
    for i, t in enumerate(toks, 1):
        raw[i] = sum(p for s, p in strings.items() if s.startswith(x + t)) / z
    end = strings.get(x, 0.0) / z
    if history is not None:
        zg, g_end = 0.0, 0.0
        for s, p in strings.items():
            w = longest_match(s, toks)
            if w is not None and w[: len(history)] == history:
                zg += p
                if len(w) == len(history):
                    g_end += p
                else:
                    greedy[w[len(history)]] += p
        greedy /= zg if zg > 0 else 1.0
        end = g_end / zg if zg > 0 else 0.0
    return raw, end, greedy


def check_walks(text_grammar, lang, separator, seed, steps=12, walks=3):
    rng = random.Random(seed)
    sep = Separator(" " if separator is None else separator)
    strings = strings_of(lang, sep)
    toks = random_vocab(rng, strings)
    vocab = bytes_vocab(toks)
    sg = spell(text_grammar, vocab, separator)
    model = StringPrefixModel(sg)
    for walk in range(walks):
        model.reset(1)
        x, history = b"", []
        own = walk > 0  # the first walk takes any viable token, the others the prior's own (longest-match) tokens
        for _ in range(steps):
            raw, end = model.prefix_probs()
            nxt, end2 = model.next_probs()
            b_raw, b_end, _ = brute(strings, x, toks)
            assert np.allclose(raw[0], b_raw, rtol=1e-9, atol=1e-12), (x, raw[0], b_raw)
            assert math.isclose(end[0], b_end, rel_tol=1e-9, abs_tol=1e-12)
            assert np.array_equal(raw[0] > 0, b_raw > 0), x  # the mask is the viable set, exactly
            if nxt[0].sum() + end2[0] > 0:
                assert abs(nxt[0].sum() + end2[0] - 1) < 1e-9
            if own:
                _, g_end, greedy = brute(strings, x, toks, history)
                assert np.allclose(nxt[0], greedy, rtol=1e-9, atol=1e-12), (x, history, nxt[0], greedy)
                assert math.isclose(end2[0], g_end, rel_tol=1e-9, abs_tol=1e-12)
            viable = np.nonzero((nxt[0] if own else raw[0]) > 0)[0]
            if len(viable) == 0:
                break
            t = int(rng.choice(viable.tolist()))
            model.advance(np.array([t]))
            x += toks[t - 1]
            history.append(t)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9), sep=st.sampled_from(SEPARATORS))
def test_pcfg_over_random_bpe_equals_brute_force(seed, sep):
    text, lang = random_pcfg(random.Random(seed))
    rules = compile_pcfg(parse_pcfg(text))
    check_walks(rules, lang, sep, seed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9), sep=st.sampled_from(SEPARATORS))
def test_fsg_over_random_bpe_equals_brute_force(seed, sep):
    text, lang = random_fsg(random.Random(seed))
    wa = compile_fsg(parse_fsg(text))
    check_walks(wa, lang, sep, seed)


# ---------------------------------------------------------------------- the separator policy
def test_default_separator_is_the_detokenized_text():
    sep = Separator()
    assert sep.join(["Alice", "finishes", "the", "task", "."]) == "Alice finishes the task."
    assert sep.join(["(", "1", "+", "2", ")", "*", "3"]) == "(1 + 2) * 3"
    assert sep.join(["a", "...", "b", "?!"]) == "a... b?!"
    assert Separator("").join(["{", "a", ":", "1", "}"]) == "{a:1}"


def test_separator_directive_is_parsed_and_checked(tmp_path):
    assert parse_pcfg('%separator ""\nS -> \'a\' [1.0]\n').separator == ""
    assert parse_pcfg("S -> 'a' [1.0]\n").separator is None
    assert parse_fsg('%separator "-"\nS E \'a\' 1.0\nE 1.0\n').separator == "-"
    from neurosym.errors import SourceError

    with pytest.raises(SourceError, match="separator"):
        parse_pcfg("%separator x\nS -> 'a' [1.0]\n")
    with pytest.raises(SourceError, match="twice"):
        parse_fsg('%separator ""\n%separator " "\nS E \'a\' 1.0\nE 1.0\n')


# ---------------------------------------------------------------------- processors
def test_processors_mask_and_prior():
    text = "S -> S '+' N [0.3] | N [0.7]\nN -> '1' [0.5] | '12' [0.5]\n"
    toks = [b"1", b"2", b"12", b" ", b"+", b" +", b" + 1"]
    vocab = bytes_vocab(toks)
    sg = spell(compile_pcfg(parse_pcfg(text)), vocab)
    prior, mask = SpelledPrior(sg, 1.0, eos_id=0), SpelledMask(sg, eos_id=0)
    for p in (prior, mask):
        p.reset(2)
        p.advance(torch.tensor([1, 3]))
    scores = prior(torch.zeros(2, len(vocab) + 2, dtype=torch.float64))
    assert torch.isinf(scores[:, len(vocab) :]).all()
    probs = scores[:, : len(vocab)].exp()
    assert torch.allclose(probs.sum(1), torch.ones(2, dtype=torch.float64))
    masked = mask(torch.zeros(2, len(vocab), dtype=torch.float64))
    allowed = [set(torch.isfinite(masked[r]).nonzero().flatten().tolist()) for r in range(2)]
    assert allowed[0] == {0, 2, 4, 6, 7}  # after "1": end, "2", " ", " +", " + 1"
    assert allowed[1] == {0, 4, 6, 7}  # after "12"
    assert mask.allowed(torch.tensor([2, 2])).tolist() == [True, False]
    # after the token "1" the prior writes "12" as one token, so "1" means the number 1: P(end) = 0.35 / 0.5
    assert prior.log_prob(torch.tensor([0, 0])).exp().tolist() == pytest.approx([0.7, 0.7])
    assert prior.log_prob(torch.tensor([2, 2])).exp().tolist() == [0.0, 0.0]  # "12" is written as one token


# ---------------------------------------------------------------------- regex lexemes: masks against partial matching
LEXEMES = ["[0-9]+", "ab*", "[a-z]+", '"[a-c ]*"']


def random_lexeme_pcfg(rng: random.Random) -> tuple[str, list[tuple[str, ...]]]:
    """An acyclic PCFG over literals and ``/regex/`` lexemes (marked ``/.../`` in the
    sequences), as text, and its finite set of terminal sequences."""
    n = rng.randint(1, 3)
    seqs_of: dict[int, set] = {}
    lines = []
    for i in reversed(range(n)):
        k = rng.randint(1, 3)
        ps = [rng.random() + 0.05 for _ in range(k)]
        total = sum(ps)
        alts, out = [], set()
        for p in ps:
            rhs = []
            for _ in range(rng.randint(1, 3)):
                r = rng.random()
                if i + 1 < n and r < 0.3:
                    rhs.append(rng.randint(i + 1, n - 1))
                elif r < 0.6:
                    rhs.append("/" + rng.choice(LEXEMES) + "/")
                else:
                    rhs.append(rng.choice(WORDS))
            seqs = {()}
            for sym in rhs:
                part = seqs_of[sym] if isinstance(sym, int) else {(sym,)}
                seqs = {a + b for a in seqs for b in part}
            out |= seqs
            alts.append(" ".join(f"N{x}" if isinstance(x, int) else (x if x.startswith("/") else repr(x)) for x in rhs) + f" [{p / total!r}]")
        seqs_of[i] = out
        lines.append(f"N{i} -> " + " | ".join(alts))
    return "%start N0\n" + "\n".join(lines) + "\n", sorted(seqs_of[0])


def sentence_pattern(seqs: list[tuple[str, ...]], sep: Separator) -> str:
    """One Python regex for the language: each sequence with its glue, lexemes as groups."""
    import re

    alts = []
    for seq in seqs:
        parts, ctx = [], 0
        for w in seq:
            lex = w.startswith("/") and len(w) > 1
            text = "x" if lex else w
            parts.append(re.escape(sep.glue(ctx, text)) + (f"(?:{w[1:-1]})" if lex else re.escape(w)))
            ctx = sep.context_after(text)
        alts.append("".join(parts))
    return "(?:" + "|".join(alts) + ")"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9), sep=st.sampled_from(SEPARATORS))
def test_lexeme_masks_equal_partial_matching(seed, sep):
    import regex

    rng = random.Random(seed)
    text, seqs = random_lexeme_pcfg(rng)
    rules = compile_pcfg(parse_pcfg(text))
    policy = Separator(" " if sep is None else sep)
    pattern = regex.compile(sentence_pattern(seqs, policy))
    samples = [policy.join(["7" if w == "/[0-9]+/" else "abb" if w == "/ab*/" else "q" if w == "/[a-z]+/" else '"a b"' if w.startswith("/") else w for w in s]).encode() for s in seqs]
    toks = random_vocab(rng, {s: 1.0 for s in samples if s} or {b"a": 1.0})
    toks = sorted(set(toks) | {bytes([b]) for b in b'0123456789abcqz" -'})
    model = StringPrefixModel(spell(rules, bytes_vocab(toks), sep))
    for _ in range(3):
        model.reset(1)
        x = b""
        for _ in range(10):
            raw, end = model.prefix_probs()
            nxt, end2 = model.next_probs()
            want = np.array([False] + [_text(x + t) is not None and pattern.fullmatch(_text(x + t), partial=True) is not None for t in toks])
            assert np.array_equal(raw[0] > 0, want), (text, x, [toks[i - 1] for i in np.nonzero((raw[0] > 0) != want)[0]])
            whole = x.decode("utf-8", "replace")  # a cut character (U+FFFD) is matched by no sentence
            assert (end[0] > 0) == (pattern.fullmatch(whole) is not None), (text, x)
            assert abs(nxt[0].sum() + end2[0] - 1) < 1e-9 or (raw[0].sum() + end[0] == 0)
            viable = np.nonzero(raw[0] > 0)[0]
            if len(viable) == 0:
                break
            t = int(rng.choice(viable.tolist()))
            model.advance(np.array([t]))
            x += toks[t - 1]


def _text(b: bytes) -> str | None:
    """``b`` as text; a trailing lead byte of the one non-ASCII word, é (C3 A9), completed
    (a prefix is viable iff its completion is: no other character starts with C3 here)."""
    if b.endswith(b"\xc3"):
        b += b"\xa9"
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:  # malformed: no completion decodes
        return None


# ---------------------------------------------------------------------- the prior alone samples the grammar's strings
def sample_prior(prior: SpelledPrior, n: int, seed: int, max_steps: int = 80) -> tuple[list[list[int]], np.ndarray]:
    """``n`` token sequences drawn from the prior alone (zero model scores), with each
    sequence's log-probability (the end included)."""
    rng = np.random.default_rng(seed)
    V = len(prior.grammar.vocab)
    prior.reset(n)
    seqs: list[list[int]] = [[] for _ in range(n)]
    logp = np.zeros(n)
    done = np.zeros(n, dtype=bool)
    for _ in range(max_steps):
        lp = prior(torch.zeros(n, V, dtype=torch.float64)).numpy()
        p = np.exp(lp)
        u = rng.random(n)[:, None]
        picks = np.minimum((np.cumsum(p, 1) < u * p.sum(1, keepdims=True)).sum(1), V - 1)
        for b in np.nonzero(~done)[0].tolist():
            logp[b] += lp[b, picks[b]]
            if picks[b] == prior.eos_id:
                done[b] = True
            else:
                seqs[b].append(int(picks[b]))
        prior.advance(torch.from_numpy(picks), done=torch.from_numpy(done & (picks != prior.eos_id)))
        if done.all():
            break
    assert done.all()
    return seqs, logp


def test_prior_alone_reproduces_a_pcfg_string_distribution():
    from scipy.stats import chisquare

    rng = random.Random(7)
    while True:  # a grammar with a few dozen strings
        text, lang = random_pcfg(rng)
        strings = strings_of(lang, Separator())
        if 8 <= len(strings) <= 60:
            break
    toks = random_vocab(rng, strings)
    prior = SpelledPrior(spell(compile_pcfg(parse_pcfg(text)), bytes_vocab(toks)), 1.0, eos_id=0)
    seqs, logp = sample_prior(prior, 2000, seed=1)
    texts = [b"".join(toks[t - 1] for t in s) for s in seqs]
    assert set(texts) <= set(strings)
    keys = sorted(strings)
    seen = np.array([sum(t == k for t in texts) for k in keys], dtype=float)
    want = np.array([strings[k] for k in keys]) * len(texts)
    big = want >= 5  # rare strings pooled into one cell
    obs = np.append(seen[big], seen[~big].sum())
    exp = np.append(want[big], want[~big].sum())
    keep = exp > 0
    assert chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3
    _, _, greedy = brute(strings, b"", toks, [])
    firsts = np.bincount([s[0] if s else 0 for s in seqs], minlength=len(toks) + 1).astype(float)
    cells = greedy * len(seqs) >= 5
    assert chisquare(firsts[cells], greedy[cells] * firsts[cells].sum() / greedy[cells].sum()).pvalue > 1e-3
    # each string is written one way (longest match), so its token sequence has its probability
    for t, lp in zip(texts[:200], logp[:200]):
        assert math.isclose(lp, math.log(strings[t]), rel_tol=1e-9, abs_tol=1e-12)
    entropy = -sum(p * math.log(p) for p in strings.values())
    assert abs(-logp.mean() - entropy) < 3 * logp.std() / math.sqrt(len(logp))


@pytest.mark.slow
def test_prior_alone_reproduces_clause_fsg_over_a_bpe():
    tokenizers = pytest.importorskip("tokenizers")
    from neurosym.compile.fsg import load_fsg
    from neurosym.files import resolve_data_path

    path = resolve_data_path("grammars/clause.fsg")
    wa = load_fsg(path)
    sep = Separator()
    lines = [sep.join([wa.vocab.tokens[i] for i in s]) for s in wa.sample(400, seed=3)]
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=400, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(), show_progress=False, special_tokens=["<eos>"])
    tok.train_from_iterator(lines, trainer)
    vocab = Vocab.from_tokenizer(tok)
    eos = tok.token_to_id("<eos>")
    vocab = Vocab(vocab.tokens, [None if i == eos else s for i, s in enumerate(vocab.surfaces)], "bytes")
    prior = SpelledPrior(spell(wa, vocab), 1.0, eos_id=eos)
    seqs, logp = sample_prior(prior, 1500, seed=2)
    h = wa.entropy().per_sentence
    assert abs(-logp.mean() - h) < 3 * logp.std() / math.sqrt(len(logp)), (-logp.mean(), h)
    for s in seqs[:300]:  # every sample is a sentence of the FSG, written with the default separator
        text = b"".join(vocab.surfaces[t] for t in s).decode()
        assert any(text == sep.join([wa.vocab.tokens[i] for i in ws]) for ws in [_parse_clause(wa, text)] if ws is not None)


def _parse_clause(wa, text: str) -> list[int] | None:
    """The FSG word sequence whose text is ``text`` (punctuation split off), if the FSG accepts it."""
    import re

    words = re.findall(r"[^\s.!?]+|[.!?]", text)
    if not all(w in wa.vocab for w in words):
        return None
    ids = [wa.vocab.id(w) for w in words]
    return ids if wa.accepts(ids) else None


def test_fsg_regex_terminal_of_infinitely_many_strings_is_a_lexeme(tmp_path):
    """An imported regex terminal with an infinite language is spelled by its DFA over a
    tokenizer: the mask follows the pattern (the regex package's partial matching)."""
    import regex

    (tmp_path / "n.regex").write_text("NUM: /[0-9]+/\n")
    (tmp_path / "n.fsg").write_text('%import "n.regex" (NUM)\nS A \'take\' 1.0\nA E NUM 1.0\nE 1.0\n')
    from neurosym.kinds import load_grammar

    toks = [b"take", b" ", b" 1", b"1", b"2", b"12", b"t", b"ake", b" take", b"1 "]
    vocab = bytes_vocab(toks)
    model = StringPrefixModel(load_grammar(tmp_path / "n.fsg", vocab))
    pattern = regex.compile(r"take [0-9]+")
    rng = random.Random(0)
    for _ in range(5):
        model.reset(1)
        x = b""
        for _ in range(6):
            raw, end = model.prefix_probs()
            want = [pattern.fullmatch((x + t).decode(), partial=True) is not None for t in toks]
            assert (raw[0, 1:] > 0).tolist() == want, x
            assert (end[0] > 0) == bool(pattern.fullmatch(x.decode()))
            viable = np.nonzero(raw[0] > 0)[0].tolist()
            t = rng.choice(viable)
            model.advance(np.array([t]))
            x += toks[t - 1]


def test_prior_and_mask_share_one_string_model():
    from neurosym.decode import grammar_processors

    text = "S -> S '+' N [0.3] | N [0.7]\nN -> '1' [0.5] | '12' [0.5]\n"
    toks = [b"1", b"2", b"12", b" ", b"+", b" +", b" + 1"]
    sg = spell(compile_pcfg(parse_pcfg(text)), bytes_vocab(toks))
    prior, mask = grammar_processors(sg, 0, use="both")
    alone = SpelledMask(sg, eos_id=0)
    assert mask.model is prior.model and alone.model is not prior.model
    for p in (prior, mask, alone):
        p.reset(2)
    for tokens in ([1, 3], [6, 6], [4, 4], [2, 1]):
        zeros = torch.zeros(2, len(toks) + 1, dtype=torch.float64)
        assert torch.equal(mask(prior(zeros.clone())).isfinite(), (alone(zeros.clone()).isfinite() & prior(zeros.clone()).isfinite()))
        assert torch.equal(mask(zeros.clone()), alone(zeros.clone()))
        for p in (prior, mask, alone):
            p.advance(torch.tensor(tokens))


# ---------------------------------------------------------------------- the mask's Earley recogniser against the chart
def masks_agree(rules, sep, seed: int, samples: list[bytes], walks: int = 3, steps: int = 14) -> int:
    """``SpelledMask`` alone (a support model: the Earley recogniser) against the exact
    chart's viable tokens and end, two rows at a time, at every step of random walks over
    a random byte vocabulary. Returns the number of rows compared."""
    rng = random.Random(seed)
    toks = random_vocab(rng, {s: 1.0 for s in samples if s} or {b"a": 1.0})
    toks = sorted(set(toks) | {bytes([b]) for b in b"0123456789abcqz\" -()"})
    vocab = bytes_vocab(toks)
    sg = spell(rules, vocab, sep)
    mask, chart = SpelledMask(sg, eos_id=0), StringPrefixModel(sg)
    assert mask.model.support and type(mask.model.model).__name__ == "EarleyRecognizer"
    compared = 0
    for _ in range(walks):
        mask.reset(2)
        chart.reset(2)
        for _ in range(steps):
            raw, end = chart.prefix_probs()
            want = raw > 0
            want[:, 0] = end > 0
            got = mask(torch.zeros(2, len(vocab), dtype=torch.float64)).isfinite().numpy()
            assert np.array_equal(got, want), (sep, [toks[i - 1] for i in np.nonzero(got != want)[1] if i])
            compared += 2
            picks = [rng.choice(np.nonzero(want[b, 1:])[0].tolist()) + 1 if want[b, 1:].any() else 0 for b in range(2)]
            if not any(picks):
                break
            mask.advance(torch.tensor(picks))
            chart.advance(np.array(picks), np.array(picks) == 0)
    return compared


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(seed=st.integers(0, 10**9), sep=st.sampled_from(SEPARATORS), kind=st.sampled_from(["finite", "recursive", "lexemes"]))
def test_mask_on_earley_equals_mask_on_the_chart(seed, sep, kind):
    from hypothesis import assume

    rng = random.Random(seed)
    policy = Separator(" " if sep is None else sep)
    if kind == "finite":
        text, lang = random_pcfg(rng)
        samples = list(strings_of(lang, policy))
    elif kind == "lexemes":
        text, seqs = random_lexeme_pcfg(rng)
        samples = [policy.join(["7" if w.startswith("/") else w for w in s]).encode() for s in seqs]
    else:
        text = recursive_pcfg(rng)
        samples = []
    try:
        rules = compile_pcfg(parse_pcfg(text))
    except NeurosymError:  # a nonterminal with no finite string, an inconsistent grammar
        assume(False)
    if kind == "recursive":
        samples = [policy.join([rules.vocab.tokens[i] for i in s]).encode() for s in rules.sample(20, seed=seed % 1000, max_len=12)]
    assert masks_agree(rules, sep, seed, samples) > 0


def test_a_mask_alone_reads_the_earley_recogniser_and_refuses_probabilities():
    from neurosym.decode import grammar_processors
    from neurosym.decode.guide import GuideMask
    from neurosym.layers.earley import EarleyRecognizer

    sg = spell(compile_pcfg(parse_pcfg("S -> S '+' N [0.3] | N [0.7]\nN -> '1' [0.5] | '12' [0.5]\n")), bytes_vocab([b"1", b"2", b" +"]))
    (mask,) = grammar_processors(sg, 0, use="mask")  # the guide's matchers, on its support model: the Earley recogniser
    assert isinstance(mask, GuideMask) and isinstance(mask.guide.support_terminals, EarleyRecognizer) and mask.guide.tables.support
    alone = SpelledMask(sg, 0)
    assert alone.model.support
    alone.reset(1)
    with pytest.raises(NeurosymError, match="support"):
        alone.model.next_probs()
    prior, shared = grammar_processors(sg, 0, use="both")
    assert not shared.model.support and shared.model is prior.model  # the prior keeps the exact chart
