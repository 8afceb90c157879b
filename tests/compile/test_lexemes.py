"""`/regex/` terminals (lexemes) in `.pcfg` files: parsed, printed back, checked at their
position, compiled into ``RuleTensors.lexemes``, saved in artifacts and sampled from
their language (issue 29). The references are Python's ``re`` and hand-computed sums."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurosym.cli.main import main
from neurosym.compile.artifact import from_bytes, to_bytes
from neurosym.compile.cnf import to_cnf
from neurosym.compile.pcfg import compile_pcfg, load_pcfg, summary
from neurosym.compile.pcfg_sample import LEXEME_MAX_CHARS, sample_sentences, sample_trees
from neurosym.dsl.pcfg import Lexeme, Lit, Terminal, lexeme_source, lexeme_text, parse_pcfg
from neurosym.errors import NeurosymError, SourceError
from neurosym.vocab import Vocab
from references import rule_tensors_log_prob

GRAMMAR = r"""%start S
S -> '[' /[0-9]+/ ']' [0.5]
   | /"([^"\\\n]|\\.)*"/ [0.3]
   | /a\/b|c/ S [0.2]
"""


def parse(text: str = GRAMMAR, path: str = "lex.pcfg"):
    return parse_pcfg(text, path)


# ---------------------------------------------------------------------- the syntax
def test_regex_terminals_parse_as_lexemes():
    g = parse()
    rhs = [p.rhs for p in g.productions]
    assert isinstance(rhs[0][1], Lexeme) and rhs[0][1].source == "[0-9]+" and isinstance(rhs[0][0], Lit)
    assert rhs[1][0].source == r'"([^"\\\n]|\\.)*"'
    assert rhs[2][0].source == "a/b|c"  # `\/` is a slash
    assert g.lexemes == ["[0-9]+", r'"([^"\\\n]|\\.)*"', "a/b|c"]
    assert Terminal("lexeme", "a/b|c") in g.terminals
    assert str(rhs[2][0]) == r"/a\/b|c/" and str(Terminal("lexeme", "[0-9]+")) == "/[0-9]+/"
    assert (rhs[0][1].span.line, rhs[0][1].span.col) == (2, 10)


def test_one_line_rules_and_lark_agree():
    one = parse("S -> 'x' /[ab]+/ [0.5] | /c\\/d/ [0.5]\n")
    two = parse("S -> 'x' /[ab]+/ [0.5]\n | /c\\/d/ [0.5]\n")  # a `|` line: lark reads it
    assert [str(p) for p in one.productions] == [str(p) for p in two.productions]


def test_printed_grammars_read_back():
    g = parse()
    again = parse(str(g))
    assert [str(p) for p in again.productions] == [str(p) for p in g.productions]
    assert again.lexemes == g.lexemes


@pytest.mark.parametrize("source", ["a/b", r"a\/b", r"\\/x", r"[/]+", r"\d+(\.\d+)?", "x"])
def test_lexeme_text_round_trip(source):
    shown = lexeme_text(source)
    assert shown.startswith("/") and shown.endswith("/")
    back = lexeme_source(shown)
    assert re.compile(back).pattern == back and all(
        bool(re.fullmatch(back, w)) == bool(re.fullmatch(source, w)) for w in ["a/b", "ab", "\\/x", "/x", "//", "12.5", "x"]
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("S -> /a(/ [1]", "g.pcfg:1:8: "),  # at the unclosed group
        ("S -> 'x'\n  | /[z-a]/", "g.pcfg:2:7: "),  # at the range
        ("S -> /(?=a)b/ [1]", "g.pcfg:1:7: lookahead"),
        ("S -> /a\\1/ [1]", "g.pcfg:1:9: invalid regex: invalid group reference"),
    ],
)
def test_bad_patterns_are_reported_where_they_are(text, expected):
    with pytest.raises(SourceError) as err:
        parse(text, "g.pcfg")
    assert str(err.value).startswith(expected), str(err.value)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("S -> 'x' /a*/ [1]", "g.pcfg:1:10: regex terminal /a*/ matches the empty string"),
        ("S -> 'x' [0.5] | /a[^\\d\\D]/ [0.5]", "g.pcfg:1:18: regex terminal /a[^\\d\\D]/ matches no string"),
        ("S -> '/x/' /x/ [1]", "g.pcfg:1:12: the literal '/x/' is also the name of the regex terminal /x/"),
    ],
)
def test_lexemes_that_cannot_be_one_string_are_refused(text, expected):
    with pytest.raises(SourceError) as err:
        compile_pcfg(parse(text, "g.pcfg"))
    assert str(err.value).startswith(expected), str(err.value)


# ---------------------------------------------------------------------- compiled
def test_default_vocabulary_holds_one_opaque_token_per_lexeme():
    rt = compile_pcfg(parse())
    assert sorted(rt.lexemes.values()) == sorted(["[0-9]+", r'"([^"\\\n]|\\.)*"', "a/b|c"])
    for i, source in rt.lexemes.items():
        assert rt.vocab.tokens[i] == lexeme_text(source)
    num, string, ab = (rt.vocab.id(lexeme_text(s)) for s in ["[0-9]+", r'"([^"\\\n]|\\.)*"', "a/b|c"])
    lb, rb = rt.vocab.id("["), rt.vocab.id("]")
    # P(S => ab ab "...") = 0.2 * 0.2 * 0.3, P([ num ]) = 0.5
    assert math.exp(rule_tensors_log_prob(rt, [ab, ab, string])) == pytest.approx(0.2 * 0.2 * 0.3, rel=1e-12)
    assert math.exp(rule_tensors_log_prob(rt, [lb, num, rb])) == pytest.approx(0.5, rel=1e-12)
    assert rt.to(torch.float32).lexemes == rt.lexemes
    s = summary(parse())
    assert s["terminals"] == {"literal": 2, "regex": 3}


def test_grammars_without_lexemes_have_none():
    rt = compile_pcfg(parse("S -> 'a' S [0.4] | 'b' [0.6]"))
    assert rt.lexemes == {} and "/" not in "".join(rt.vocab.tokens)


def test_over_a_given_vocabulary_a_lexeme_emits_the_tokens_it_matches():
    vocab = Vocab.words(["[", "]", "12", "7", "x", '"hi"', "a/b", "c"])
    rt = compile_pcfg(parse(), vocab)
    assert rt.lexemes == {}
    p12 = math.exp(rule_tensors_log_prob(rt, vocab.encode("[ 12 ]")))
    assert p12 == pytest.approx(0.5 / 2, rel=1e-12)  # two number tokens: 12 and 7
    assert math.exp(rule_tensors_log_prob(rt, vocab.encode('a/b "hi"'))) == pytest.approx(0.2 / 2 * 0.3, rel=1e-12)
    with pytest.raises(SourceError, match=r"lex.pcfg:2:10: regex terminal /\[0-9\]\+/ matches no token"):
        compile_pcfg(parse(), Vocab.words(["[", "]", '"hi"', "c"]))


def test_artifacts_keep_lexemes_and_refuse_tampered_ones():
    rt = compile_pcfg(parse())
    back = from_bytes(to_bytes(rt))
    assert back.lexemes == rt.lexemes and back.vocab == rt.vocab
    assert all(torch.equal(getattr(back, k), getattr(rt, k)) for k in ("root", "binary", "emit", "root_term", "empty"))
    plain = compile_pcfg(parse("S -> 'a' [1]"))
    assert from_bytes(to_bytes(plain)).lexemes == {}
    rt.lexemes = {len(rt.vocab) + 3: "x"}
    with pytest.raises(NeurosymError, match="lexemes are not a map"):
        from_bytes(to_bytes(rt))


# ---------------------------------------------------------------------- sampled
def test_sampled_lexemes_are_strings_of_their_language():
    g = parse()
    sources = {lexeme_text(s): s for s in g.lexemes}
    seen = set()
    for tree in sample_trees(g, 200, seed=3, max_len=12):
        leaves = tree.leaves()
        for w in leaves:
            if w in ("[", "]"):
                continue
            matched = [s for s in sources.values() if re.fullmatch(s, w)]
            assert matched, w
            assert len(w) <= LEXEME_MAX_CHARS
            seen.add(matched[0])
    assert seen == set(g.lexemes)
    assert sample_sentences(g, 20, seed=5) == sample_sentences(g, 20, seed=5)


# ---------------------------------------------------------------------- the command line
def test_check_inspect_sample_from_the_command_line(tmp_path):
    path = tmp_path / "lex.pcfg"
    path.write_text(GRAMMAR)
    runner = CliRunner()
    r = runner.invoke(main, ["check", str(path)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["inspect", "--json", str(path)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["terminals"]["regex"] == 3
    r = runner.invoke(main, ["sample", "-n", "5", str(path)])
    assert r.exit_code == 0 and len(r.output.splitlines()) == 5, r.output
    path.write_text("S -> 'x' /[0-9/ [1]\n")
    r = runner.invoke(main, ["check", str(path)])
    assert r.exit_code == 2 and f"{path}:1:" in r.output and "Traceback" not in r.output, r.output
    path.write_text("S -> 'x' /[0-9]*/ [1]\n")
    r = runner.invoke(main, ["check", str(path)])
    assert r.exit_code == 2 and f"{path}:1:10: regex terminal /[0-9]*/ matches the empty string" in r.output, r.output


# ---------------------------------------------------------------------- random grammars
PATTERNS = ["[0-9]+", "a/b", "x(y|z)*", r"\.+", "[^ab]c", r"\/[a-c]{1,3}", r'"[^"]*"', "q|r/s", "(ab)+c?"]
LITERALS = ["a", "b", "/", "x/y", "'", '"', "[", "c d"]


@st.composite
def random_lexeme_pcfg(draw):
    """A random grammar mixing literals, lexemes and nonterminals, with its lexemes."""
    n = draw(st.integers(1, 3))
    names = [f"N{i}" for i in range(n)]
    lines = []
    for i, name in enumerate(names):
        alts = []
        k = draw(st.integers(1, 3))
        for j in range(k):
            syms = []
            for _ in range(draw(st.integers(1, 3))):
                kind = draw(st.sampled_from(["lit", "lex", "nt"] if i + 1 < n else ["lit", "lex"]))
                if kind == "lit":
                    syms.append(repr(draw(st.sampled_from(LITERALS))))
                elif kind == "lex":
                    syms.append(lexeme_text(draw(st.sampled_from(PATTERNS))))
                else:
                    syms.append(draw(st.sampled_from(names[i + 1 :])))
            alts.append(f"{' '.join(syms)} [{1 / k!r}]")
        lines.append(f"{name} -> " + " | ".join(alts))
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_lexeme_pcfg(), st.integers(0, 2**16))
def test_random_grammars_round_trip_compile_save_and_sample(text, seed):
    g = parse(text)
    again = parse(str(g))
    assert [str(p) for p in again.productions] == [str(p) for p in g.productions]
    rt = compile_pcfg(g)
    kept = [t.value for t in to_cnf(g, check=False).terminals if t.kind == "lexeme"]  # unreachable rules are dropped
    assert sorted(rt.lexemes.values()) == sorted(kept) and set(kept) <= set(g.lexemes)
    assert from_bytes(to_bytes(rt)).lexemes == rt.lexemes
    literals = {t.value for t in g.terminals if t.kind == "literal"}
    for sent in sample_sentences(g, 5, seed=seed, max_len=20):
        for w in sent:
            assert w in literals or any(re.fullmatch(s, w) for s in g.lexemes), (w, text)
