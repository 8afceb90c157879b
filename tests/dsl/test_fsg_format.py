"""`.fsg` files: every error names the file, line and column; the recipe grammar loads."""

from pathlib import Path

import pytest

import neurosym
from neurosym.compile.fsg import compile_fsg
from neurosym.dsl.fsg import read_fsg, parse_fsg
from neurosym.errors import SourceError

ROOT = Path(__file__).resolve().parents[2]


def error_of(tmp_path, text: str, name: str = "g.fsg") -> SourceError:
    """Write ``text`` to a file, compile it, and return the SourceError raised."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError) as info:
        compile_fsg(read_fsg(path))
    err = info.value
    assert str(err).startswith(f"{path}:{err.line}:{err.col}: "), str(err)
    return err


LEX = """%class ADJ good bad
%feature polarity range=-1..1 terms=neg,pos kernel=triangular() centers=-1,1
good polarity=0.8
bad polarity=-0.8
"""


@pytest.mark.parametrize(
    "text, line, col, message",
    [
        ("0 1 a 0.5\n1 1.0\n0 1 'b 0.5\n", 3, 5, "expected"),  # an unterminated quote: syntax
        ("0 1 'a' 1.0\n1 1.0\n0 2 b 0.x\n", 3, 7, "expected a weight"),
        ("0 1 a 0.7\n1 1.0\n", 1, 1, "sum to 0.7"),  # weights out of a state
        ("0 1 a 0.5\n0 0.5\n1 1.0\n2 1 b 1.0\n", 4, 1, "unreachable"),
        ("0 1 a 0.5\n0 2 b 0.5\n1 1.0\n2 2 c 1.0\n", 2, 3, "dead"),
        ("0 1 a 1.5\n1 1.0\n", 1, 7, "out of range"),
        ("0 1 a -0.5\n1 1.0\n", 1, 7, "out of range"),
        ("0 1 a 1.0\n1 1.2\n", 2, 3, "out of range"),
        ("0 1 a 1.0 colour=red\n1 1.0\n", 1, 11, "unknown arc attribute 'colour'"),
        ("0 1 <eps> 1.0 role=subject\n1 1.0\n", 1, 15, "cannot mark a role"),
        ("0 1 a 1.0\n1 1.0\n1 0.5\n", 3, 1, "declared final twice"),
        ("%weights odds\n0 1 a 1.0\n1 1.0\n", 1, 10, "'prob' or 'logprob'"),
        ("%start Q\n0 1 a 1.0\n1 1.0\n", 1, 8, "start state 'Q'"),
        ("0 1 YEAR 1.0\n1 1.0\n", 1, 5, "YEAR"),  # a regex terminal nothing imports
        ("0 1 @ADJ 1.0\n1 1.0\n", 1, 5, "needs a lexicon"),
    ],
)
def test_errors_name_file_line_and_column(tmp_path, text, line, col, message):
    err = error_of(tmp_path, text)
    assert (err.line, err.col) == (line, col), str(err)
    assert message in str(err)


def test_undefined_class_and_unknown_feature_in_an_imported_lexicon(tmp_path):
    (tmp_path / "s.lex").write_text(LEX, encoding="utf-8")
    err = error_of(tmp_path, '%import "s.lex"\n0 1 @NOUN 1.0\n1 1.0\n')
    assert (err.line, err.col) == (2, 5) and "NOUN" in str(err)
    err = error_of(tmp_path, '%import "s.lex"\n0 1 @polarity:high 1.0\n1 1.0\n')
    assert (err.line, err.col) == (2, 5) and "no term 'high'" in str(err)
    err = error_of(tmp_path, '%import "s.lex"\n0 1 @mood:pos 1.0\n1 1.0\n')
    assert (err.line, err.col) == (2, 5) and "mood" in str(err)
    err = error_of(tmp_path, '%import "s.lex" (ADJ, NOUN)\n0 1 @ADJ 1.0\n1 1.0\n')
    assert err.line == 1 and "NOUN" in str(err)


def test_missing_import_file_is_positioned(tmp_path):
    err = error_of(tmp_path, '%import "nope.lex"\n0 1 a 1.0\n1 1.0\n')
    assert (err.line, err.col) == (1, 9) and "no such file" in str(err)


def test_lexicon_classes_and_fuzzy_terms_become_token_sets(tmp_path):
    (tmp_path / "s.lex").write_text(LEX, encoding="utf-8")
    (tmp_path / "g.fsg").write_text('%import "s.lex"\n0 1 @polarity:pos 0.5\n0 1 @ADJ 0.5\n1 1.0\n', encoding="utf-8")
    w = neurosym.load(tmp_path / "g.fsg")
    assert sorted(t for t in w.vocab.tokens if not t.startswith('<')) == ["bad", "good"]
    # @polarity:pos (threshold 0.5) is {good}: good gets 0.5 + 0.25, bad 0.25
    p = {t: float(w.log_prob(__import__("torch").tensor([[w.vocab.id(t)]]))[0].exp()) for t in ("good", "bad")}
    assert p == pytest.approx({"good": 0.75, "bad": 0.25})


def test_normalize_accepts_unnormalised_weights():
    g = parse_fsg("%normalize\n0 1 a 3\n0 1 b 1\n1 2\n")
    w = compile_fsg(g)
    ids = __import__("torch").tensor([[w.vocab.id("a")], [w.vocab.id("b")]])
    assert w.log_prob(ids).exp().tolist() == pytest.approx([0.75, 0.25])


def test_recipe_grammar_loads_and_has_the_issue_words():
    w = neurosym.load(ROOT / "grammars" / "clause.fsg")
    words = set(w.vocab.tokens)
    assert {"Alice", "Bob", "Carol", "Dave", "Eve"} <= words
    assert {"finishes", "reviews", "trains", "starts", "cooks"} <= words
    assert {"task", "paper", "model", "project", "meal"} <= words
    assert {"slightly", "moderately", "very", "extremely"} <= words
    assert {"good", "great", "excellent", "pleasant", "wonderful", "bad", "poor", "terrible", "unpleasant", "awful"} <= words
    assert {"She", "He", ".", "!", "?"} <= words
    sents = [[w.vocab.tokens[i] for i in s] for s in w.sample(4000, seed=3)]
    two = sum(sum(t in ("She", "He") for t in s) == 1 for s in sents) / len(sents)
    assert two == pytest.approx(0.6, abs=0.03)  # the pronoun clause
    for s in sents:  # the pronoun agrees with the subject
        if len(s) > 8:
            assert s[len(s) // 2 :].count("She" if s[0] in ("Alice", "Carol", "Eve") else "He") == 1, s
    roles = w.roles(__import__("torch").tensor([[w.vocab.id(t) for t in "Alice finishes the very good task . She cooks the bad meal !".split()]]))
    assert roles["subject"][0].nonzero().flatten().tolist() == [0, 7]
    assert roles["head"][0].nonzero().flatten().tolist() == [5, 11]
    assert roles["object"][0].nonzero().flatten().tolist() == [2, 3, 4, 5, 9, 10, 11]


def test_threshold_zero_and_logprob_messages(tmp_path):
    err = error_of(tmp_path, "%threshold 0\n0 1 a 1.0\n1 1.0\n")
    assert (err.line, err.col) == (1, 12) and "(0, 1]" in str(err)
    err = error_of(tmp_path, "%weights logprob\n0 1 a 0.5\n1 0\n")
    assert (err.line, err.col) == (2, 7) and "log-probability must be <= 0" in str(err)


def test_unknown_term_error_names_the_place_once(tmp_path):
    (tmp_path / "s.lex").write_text(LEX, encoding="utf-8")
    err = error_of(tmp_path, '%import "s.lex"\n0 1 @polarity:huge 1.0\n1 1.0\n')
    assert str(err).count(str(tmp_path)) == 1 and "(in s.lex)" in str(err)


def test_finite_regex_terminals_join_the_default_vocabulary(tmp_path):
    (tmp_path / "t.regex").write_text("DIGIT: /[0-3]/\nNUM: /[0-9]+/\n", encoding="utf-8")
    (tmp_path / "g.fsg").write_text('%import "t.regex" (DIGIT)\n0 1 DIGIT 1.0\n1 1.0\n', encoding="utf-8")
    w = neurosym.load(tmp_path / "g.fsg")
    assert [t for t in w.vocab.tokens if not t.startswith("<")] == ["0", "1", "2", "3"]
    (tmp_path / "h.fsg").write_text('%import "t.regex" (NUM)\n0 1 NUM 1.0\n1 1.0\n', encoding="utf-8")
    err = error_of(tmp_path, (tmp_path / "h.fsg").read_text(), "h.fsg")
    assert "infinitely many" in str(err) and (err.line, err.col) == (2, 5)


def test_byte_level_vocabularies_match_literals():
    from neurosym.vocab import Vocab

    bpe = Vocab(["<pad>", "a", "b", "ab"], [None, b"a", b"b", b"ab"], "bytes")
    w = compile_fsg(parse_fsg("0 1 a 0.5\n0 1 b 0.5\n1 1.0\n"), vocab=bpe)
    lp = w.log_prob(__import__("torch").tensor([[1]]))
    assert float(lp[0].exp()) == pytest.approx(0.5)


def test_roles_of_one_sentence():
    w = compile_fsg(parse_fsg("0 1 a 1.0 role=subject\n1 2 b 1.0\n2 1.0\n"))
    ids = __import__("torch").tensor([w.vocab.id("a"), w.vocab.id("b")])
    assert w.roles(ids)["subject"].tolist() == [True, False]
