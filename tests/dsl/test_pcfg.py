"""The `.pcfg` parser: NLTK's format loads, directives work, every error has a position."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from neurosym.dsl.pcfg import NT, Lit, RegexTerm, Terminal, read_pcfg, parse_pcfg
from neurosym.errors import NeurosymError, SourceError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "pcfg"


def probs(g) -> dict[str, float]:
    return {f"{p.lhs} -> {' '.join(map(str, p.rhs))}": p.prob for p in g.productions}


def error(text: str, path: str = "g.pcfg") -> str:
    with pytest.raises(SourceError) as err:
        parse_pcfg(text, path)
    return str(err.value)


# ---------------------------------------------------------------------- NLTK's documented grammars
def test_nltk_toy_pcfg1_loads():
    g = read_pcfg(DATA / "nltk_toy_pcfg1.pcfg")
    assert g.start == "S" and g.weights == "prob" and len(g.productions) == 17
    assert g.nonterminals == ["S", "NP", "Det", "N", "VP", "V", "PP", "P"]
    p = probs(g)
    assert p["NP -> NP PP"] == 0.25 and p["NP -> 'I'"] == 0.15 and p["P -> 'under'"] == 0.39
    assert g.productions[1].rhs == (NT("Det", g.productions[1].span), NT("N", g.productions[1].rhs[1].span))
    assert str(g.productions[0].span) == f"{DATA / 'nltk_toy_pcfg1.pcfg'}:2:6"


def test_nltk_toy_pcfg2_one_rule_per_line_and_leading_dots():
    g = read_pcfg(DATA / "nltk_toy_pcfg2.pcfg")
    p = probs(g)
    assert len(g.productions) == 23 and p["VP -> V NP"] == pytest.approx(0.59) and p["N -> 'hill'"] == pytest.approx(0.5)
    assert [len(v) for v in g.by_lhs.values()] == [1, 3, 3, 1, 3, 5, 2, 2, 3]


def test_nltk_book_grammars_load():
    g = read_pcfg(DATA / "nltk_book_grammar1.pcfg")  # a CFG: uniform
    assert g.weights == "uniform" and probs(g)["NP -> Det N PP"] == pytest.approx(0.2)
    assert Terminal("literal", "telescope") in g.terminals
    g2 = read_pcfg(DATA / "nltk_book_grammar2.pcfg")
    assert g2.normalize and probs(g2)["VP -> V NP PP"] == pytest.approx(0.25)
    groucho = read_pcfg(DATA / "nltk_book_groucho.pcfg")  # `% start S`, as NLTK allows
    assert groucho.start == "S" and probs(groucho)["VP -> VP PP"] == 0.3
    book = read_pcfg(DATA / "nltk_book_pcfg.pcfg")
    assert probs(book)["VP -> DatV NP NP"] == 0.3


def test_what_nltk_writes_loads():
    # str(nltk.PCFG): a header line, indented productions, %g probabilities, repr'd terminals
    text = """Grammar with 5 productions (start state = S)
    S -> NP VP [1.0]
    NP -> 'John' [0.6] | "don't" [0.4]
    VP -> 'ran' [0.99999] | VP 'x' [1e-05]
    """
    g = parse_pcfg(text)
    assert g.start == "S" and probs(g)["NP -> \"don't\""] == 0.4 and probs(g)["VP -> VP 'x'"] == pytest.approx(1e-5)
    again = parse_pcfg(str(g))  # and what neurosym writes reads back
    assert probs(again) == probs(g) and again.start == g.start


# ---------------------------------------------------------------------- syntax
def test_nonterminal_names_are_generous():
    g = parse_pcfg("S -> NP-SBJ VP/NP S^<VP> PRP$ -NONE- Ärger 3rd [1.0]\n" + "\n".join(
        f"{n} -> 'w' [1.0]" for n in ["NP-SBJ", "VP/NP", "S^<VP>", "PRP$", "-NONE-", "Ärger", "3rd"]))
    assert [s.name for s in g.productions[0].rhs] == ["NP-SBJ", "VP/NP", "S^<VP>", "PRP$", "-NONE-", "Ärger", "3rd"]
    assert [p.lhs for p in parse_pcfg("A->B|'x'\nB->'y'").productions] == ["A", "A", "B"]


def test_terminals_quotes_and_escapes():
    g = parse_pcfg(r"""S -> '#' "it's" 'say \"hi\"' 'tab\t' 'back\slash' '\u00e9' [1.0]  # comment""")
    assert [s.text for s in g.productions[0].rhs] == ["#", "it's", 'say "hi"', "tab\t", "back\\slash", "é"]
    assert all(isinstance(s, Lit) for s in g.productions[0].rhs)


def test_continuation_lines_comments_and_empty_alternatives():
    g = parse_pcfg(
        "# leading comment\n"
        "S -> A 'x' [0.5]   # trailing comment\n"
        "   # a comment between alternatives\n"
        "   | [0.5]\n"
        "A -> 'a' \\\n"
        "     A [0.5] | [0.5]\n"
    )
    assert probs(g) == {"S -> A 'x'": 0.5, "S -> ": 0.5, "A -> 'a' A": 0.5, "A -> ": 0.5}
    assert str(g.productions[1].span) == "<string>:4:4"  # an empty alternative sits at its `|`
    cfg = parse_pcfg("S -> 'a' S |\nT -> ")  # NLTK CFG epsilon rules
    assert [len(p.rhs) for p in cfg.productions] == [2, 0, 0]


def test_probability_may_come_first_and_scientific_notation():
    g = parse_pcfg("S -> [2.5e-1] 'a' | 'b' [7.5E-1]")
    assert probs(g) == {"S -> 'a'": 0.25, "S -> 'b'": 0.75}


def test_start_directive_and_default():
    assert parse_pcfg("A -> 'a' [1]\nS -> A [1]").start == "A"
    assert parse_pcfg("A -> 'a' [1]\n%start S\nS -> A [1]").start == "S"


def test_normalize_and_logprob():
    g = parse_pcfg("%normalize\nS -> 'a' [3] | 'b' [1] | 'c'")  # an unwritten weight is 1
    assert probs(g) == {"S -> 'a'": 0.6, "S -> 'b'": 0.2, "S -> 'c'": 0.2}
    lp = read_pcfg(DATA / "logprob.pcfg")
    assert probs(lp) == {"S -> 'a' S": pytest.approx(0.2), "S -> 'b'": pytest.approx(0.8)}
    g = parse_pcfg("%weights logprob\n%normalize\nS -> 'a' [2] | 'b' [2] | 'c' [-inf]")
    assert probs(g) == {"S -> 'a'": 0.5, "S -> 'b'": 0.5, "S -> 'c'": 0.0}


def test_sums_within_tolerance_are_made_exact():
    g = parse_pcfg("S -> 'a' [0.3333333] | 'b' [0.6666667]")
    assert math.fsum(p.prob for p in g.productions) == 1.0
    assert g.productions[0].weight == 0.3333333


def test_regex_terminals():
    g = read_pcfg(DATA / "dates.pcfg")
    assert set(g.imports) == {"YEAR", "MONTH"}
    rhs = g.productions[1].rhs
    assert isinstance(rhs[1], RegexTerm) and rhs[1].name == "MONTH" and isinstance(rhs[0], Lit)
    assert g.terminals == [Terminal("literal", "in"), Terminal("regex", "YEAR"), Terminal("regex", "MONTH"), Terminal("literal", "/")]
    assert str(Terminal("regex", "YEAR")) == "YEAR" and str(Terminal("literal", "in")) == "'in'"


# ---------------------------------------------------------------------- errors, each at its position
@pytest.mark.parametrize(
    "text, expected",
    [
        ("S -> NP VP [1.0]\nNP 'the' [1.0]", "g.pcfg:2:4: expected '->'"),
        ("S -> 'abc", "g.pcfg:1:6: expected"),
        ("S -> 'a' ]", "g.pcfg:1:10: expected"),
        ("S -> 'a' [1.0]\n| 'b'", "g.pcfg:2:3: this alternative of S has no probability"),  # `|` continues
        ("%start S\n| 'b'", "g.pcfg:2:1: expected"),
        ("S -> A [1.0]", "g.pcfg:1:6: undefined nonterminal A"),
        ("S -> NUM [1.0]", 'g.pcfg:1:6: undefined nonterminal NUM (no rule has it on the left); to use a regex-bank pattern as a terminal, add %import "file.regex" (NUM)'),
        ("S -> 'a' [0.5]\nS -> 'b' [0.4]", "g.pcfg:1:1: the probabilities of S sum to 0.9, not 1"),
        ("S -> 'a' [1.5] | 'b' [0]", "g.pcfg:1:10: probability 1.5 is out of range [0, 1]"),
        ("S -> 'a' [-0.5] | 'b' [1.5]", "g.pcfg:1:10: probability -0.5 is out of range [0, 1]"),
        ("S -> 'a' [abc]", "g.pcfg:1:10: expected a number in [...], got 'abc'"),
        ("S -> 'a' [nan]", "g.pcfg:1:10: a probability cannot be NaN"),
        ("S -> 'a' [0.5] [0.5]", "g.pcfg:1:16: a second probability"),
        ("S -> 'a' [0.5] | 'b'", "g.pcfg:1:18: this alternative of S has no probability"),
        ("S -> '' [1]", "g.pcfg:1:6: empty terminal ''"),
        ("%normalize\nS -> 'a' [-1]", "g.pcfg:2:10: weight -1 is out of range"),
        ("%normalize\nS -> 'a' [0] | 'b' [0]", "g.pcfg:2:1: every weight of S is 0"),
        ("%weights logprob\nS -> 'a' [0.5]", "g.pcfg:2:10: log-probability 0.5 is out of range"),
        ("%weights probability\nS -> 'a'", "g.pcfg:1:10: unknown weight kind 'probability'"),
        ("%weights prob\n%weights logprob\nS -> 'a'", "g.pcfg:2:10: %weights logprob contradicts"),
        ("%begin S\nS -> 'a'", "g.pcfg:1:1: unknown directive %begin"),
        ("%start\nS -> 'a'", "g.pcfg:1:1: bad %start directive; write %start NAME"),
        ("%start S T\nS -> 'a'", "g.pcfg:1:10: bad %start directive"),
        ("%normalize S\nS -> 'a'", "g.pcfg:1:12: bad %normalize directive"),
        ("%start S\n%start S\nS -> 'a'", "g.pcfg:2:1: a second %start (the first is at line 1)"),
        ("%start T\nS -> 'a'", "g.pcfg:1:8: start symbol T has no rules"),
        ("# nothing\n", "g.pcfg:1:1: the grammar has no rules"),
    ],
)
def test_errors_have_positions(text, expected):
    assert error(text).startswith(expected)


def test_import_errors_have_positions(tmp_path):
    (tmp_path / "bank.regex").write_text("NUM: /[0-9]+/\nWORD: /[a-z]+/\n")
    ok = tmp_path / "ok.pcfg"
    ok.write_text('%import "bank.regex" (NUM)\nS -> NUM [1.0]\n')
    assert isinstance(read_pcfg(ok).productions[0].rhs[0], RegexTerm)
    cases = {
        '%import "missing.regex" (NUM)\nS -> \'a\'': ":1:9: no such file missing.regex",
        '%import "bank.regex" (NUM, DATE)\nS -> NUM': ":1:28: bank.regex does not define DATE (it defines NUM, WORD)",
        '%import "bank.regex" (NUM, NUM)\nS -> NUM': ":1:28: NUM is imported twice",
        '%import "bank.regex" (NUM)\nS -> NUM\nNUM -> \'1\'': ":3:1: NUM is a regex terminal (imported at line 1); it cannot have rules",
        '%import "bank.regex" (NUM)\n%start NUM\nS -> NUM': ":2:8: start symbol NUM has no rules (it is a regex terminal)",
        '%import "bank.regex"\nS -> \'a\'': ':1:9: bad %import directive; write %import "file.regex" (NAME, ...)',
        '%import "ok.pcfg" (NUM)\nS -> NUM': ":1:9: %import takes terminals from a regex bank (.regex); ok.pcfg is a .pcfg file",
    }
    for text, where in cases.items():
        f = tmp_path / "bad.pcfg"
        f.write_text(text)
        with pytest.raises(SourceError) as err:
            read_pcfg(f)
        assert str(err.value).startswith(f"{f}{where}"), str(err.value)
    (tmp_path / "broken.regex").write_text("NUM: /[0-9/\n")
    f = tmp_path / "bad.pcfg"
    f.write_text('%import "broken.regex" (NUM)\nS -> NUM\n')
    with pytest.raises(SourceError, match=re.escape(str(tmp_path / "broken.regex"))):
        read_pcfg(f)


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(NeurosymError, match="no such file"):
        read_pcfg(tmp_path / "nope.pcfg")
    bad = tmp_path / "latin1.pcfg"
    bad.write_bytes("S -> 'caf\xe9'".encode("latin-1"))
    with pytest.raises(SourceError, match=r"latin1.pcfg:1:10: the file is not UTF-8"):
        read_pcfg(bad)


def test_docs_pcfg_blocks_parse():
    doc = (ROOT / "docs" / "pcfg.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```pcfg\n(.*?)```", doc, re.S)
    assert len(blocks) >= 3
    from neurosym.compile.pcfg_check import check_pcfg

    for text in blocks:
        check_pcfg(parse_pcfg(text, ROOT / "docs" / "example.pcfg"))
