"""The `.lex` lexicon format: parsing to a Lexicon, raw VADER / AFINN files, and every
error at its file, line and column."""

from pathlib import Path

import pytest

from neurosym.compile.lexicon import load_lexicon
from neurosym.data import shared_data_dir
from neurosym.dsl.lexicon import (
    AndCond,
    ClassCond,
    HasCond,
    Lexicon,
    PrevCond,
    RoleCond,
    SeenCond,
    TokenCond,
    ValueOf,
    read_lexicon,
    parse_lexicon,
)
from neurosym.errors import NeurosymError, SourceError
from neurosym.compile.lexicon import term_words

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "lex"
LEXICONS = sorted((ROOT / "lexicons").glob("*.lex"))


def nonempty_lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").split("\n") if line.strip())


# ---------------------------------------------------------------------- the native format
def test_small_lexicon_ir():
    lex = read_lexicon(DATA / "small.lex")
    assert list(lex.features) == ["polarity", "strength"]
    pol = lex.features["polarity"]
    assert pol.kind == "lexical" and pol.range == (-1.0, 1.0) and pol.columns == ["polarity_neg", "polarity_neu", "polarity_pos"]
    assert pol.terms.kernel.name == "triangular" and pol.terms.centers == (-1.0, 0.0, 1.0)
    st = lex.features["strength"]
    assert st.terms.kernel.params == {"base": 0.9, "tau": 0.35} and st.terms.centers == (0.2, 0.6, 1.0)
    assert (st.span.line, st.span.col) == (3, 10)
    assert lex.class_words("ADJ") == ["good", "bad", "so-so"]
    assert lex.values["good"] == {"polarity": 0.6} and lex.values["can't stand"] == {"polarity": -0.6}
    assert lex.values["plain"] == {}  # a bare word: in the vocabulary, no values
    assert len(lex.entries) == 7 and lex.entries[2].span.line == 11
    very, neg = lex.modifiers["very"], lex.modifiers["not"]
    assert (very.kind, very.amount, very.target, very.window) == ("booster", 0.25, "polarity", 1)
    assert (neg.kind, neg.amount, neg.window) == ("negation", 1.0, 3)
    assert lex.words() == ["slightly", "very", "good", "bad", "so-so", "can't stand", "plain", "not"]
    assert lex.outputs == lex.lexical  # no computed features: the lexical ones are the columns
    assert lex.defines("ADJ") and lex.defines("strength") and not lex.defines("nope")


def test_rule_language_ir():
    lex = parse_lexicon(
        "%class A x\n%class B y\n%feature s range=0..1\n"
        '%feature f = class(A, B) & seen(role(subject)) | !token(".", "?")\n'
        "%feature g = value(s, from=prev(class(A)), part=pos, clip=0..0.5, default=0.25) where has(s)\n"
        "%feature h = value(s, from=prev)\n"
    )
    f, g, h = (lex.features[n] for n in "fgh")
    assert f.kind == "condition" and g.kind == "graded"
    left, right = f.rule.expr.left, f.rule.expr.right  # '&' binds tighter than '|'
    assert isinstance(left, AndCond) and isinstance(left.left, ClassCond)
    assert [c.text for c in left.left.classes] == ["A", "B"]
    assert isinstance(left.right, SeenCond) and left.right.inner == RoleCond("subject", left.right.inner.span)
    assert isinstance(right.inner, TokenCond) and right.inner.texts == (".", "?")
    v = g.rule.expr
    assert isinstance(v, ValueOf) and v.from_prev and isinstance(v.from_cond, ClassCond)
    assert (v.part, v.clip, v.default) == ("pos", (0.0, 0.5), 0.25)
    assert isinstance(g.rule.where, HasCond)
    assert h.rule.expr.from_prev and h.rule.expr.from_cond is None
    assert lex.columns == ["f", "g", "h"]
    rules = [f.get("rule") for f in lex.summary()["features"]]
    assert rules[1:] == [
        '(class(A, B) & seen(role(subject))) | !token(".", "?")',
        "value(s, from=prev(class(A)), part=pos, clip=0..0.5, default=0.25) where has(s)",
        "value(s, from=prev)",
    ]


def test_terms_default_to_an_even_spread_over_the_range():
    lex = parse_lexicon("%feature x range=0..1 terms=a,b,c\n")
    assert lex.features["x"].terms.centers == (0.0, 0.5, 1.0)
    assert lex.features["x"].terms.kernel.name == "triangular"


def test_class_words_and_term_words():
    lex = read_lexicon(DATA / "small.lex")
    assert term_words(lex, "polarity", "pos") == ["good"]  # triangular: 0.6 in pos
    assert term_words(lex, "polarity", "neu") == ["so-so"]
    assert term_words(lex, "polarity", "neg") == ["bad", "can't stand"]
    assert term_words(lex, "strength", "high", threshold=0.99) == []
    assert term_words(lex, "strength", "low", threshold=0.99) == ["slightly"]
    with pytest.raises(NeurosymError, match="no class 'AJD'.*did you mean 'ADJ'"):
        lex.class_words("AJD")
    with pytest.raises(NeurosymError, match="no feature 'polarty'"):
        term_words(lex, "polarty", "pos")
    with pytest.raises(NeurosymError, match="no term 'hi'.*low, med, high"):
        term_words(lex, "strength", "hi")


def test_summary_lists_features_classes_and_counts():
    s = read_lexicon(DATA / "small.lex").summary()
    assert s["entries"] == 7 and s["classes"] == {"INTENS": 2, "ADJ": 3}
    assert [(f["name"], f["kind"]) for f in s["features"]] == [("polarity", "lexical"), ("strength", "lexical")]
    assert s["features"][1]["terms"] == ["low", "med", "high"] and s["features"][1]["kernel"] == "power(base=0.9, tau=0.35)"
    text = read_lexicon(DATA / "small.lex").format_summary()
    assert "7 entries" in text and "ADJ (3)" in text and "not (negation 1 on polarity)" in text


# ---------------------------------------------------------------------- raw formats
def test_raw_vader_and_afinn_lines_load_as_they_are():
    v = read_lexicon(DATA / "mini_vader.txt", format="vader")
    assert len(v.entries) == nonempty_lines(DATA / "mini_vader.txt") == 9
    assert v.values["good"] == {"polarity": 0.475, "valence_raw": 1.9}
    assert v.values[":-Þ"]["valence_raw"] == 0.9 and v.values["(-:"]["polarity"] == 0.4
    assert v.values["%)"]["polarity"] == -0.1 and v.values["# "]["polarity"] == -0.25
    assert v.values["ok"]["valence_raw"] == 1.2  # a repeated word keeps its last value, like VADER
    assert [e.word for e in v.duplicates] == ["ok"] and v.duplicates[0].span.line == 10
    assert v.features["valence_raw"].range == (-4.0, 4.0) and v.formats == ["vader"]
    a = read_lexicon(DATA / "mini_afinn.txt", format="afinn")
    assert len(a.entries) == 5 and a.values["can't stand"] == {"polarity": -0.6, "valence_raw": -3.0}
    assert a.values["naïve"]["polarity"] == -0.4 and a.values["not good"]["valence_raw"] == -2


def test_include_and_format_sections():
    lex = read_lexicon(DATA / "includes.lex")
    assert len(lex.entries) == 9 + 5 + 1
    assert lex.values["good"] == {"polarity": 0.5, "valence_raw": 3.0}  # afinn after vader, local line last
    assert lex.class_words("EMOTICON") == [":-)", "(-:", "%)"]
    assert lex.columns == ["happy", "pos_low", "pos_high"] and lex.formats == ["vader", "afinn"]
    inline = read_lexicon(DATA / "inline_vader.lex")
    assert len(inline.entries) == 9 and inline.values[":-)"]["polarity"] == 0.325
    assert inline.entries[0].span.line == 4  # raw lines keep their line numbers in the file


@pytest.mark.skipif(shared_data_dir() is None, reason="the shared data folder (../shared/data) is not available")
@pytest.mark.parametrize("folder, name, fmt", [("vader", "vader_lexicon.txt", "vader"), ("afinn", "AFINN-en-165.txt", "afinn")])
def test_every_entry_of_the_shared_files_loads(folder, name, fmt):
    path = shared_data_dir() / folder / name
    lex = read_lexicon(path, format=fmt)
    lines = nonempty_lines(path)
    assert len(lex.entries) == lines
    assert len(lex.values) == lines - len(lex.duplicates)
    assert [e.word for e in lex.entries] == [line.split("\t")[0] for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    if fmt == "vader":
        assert lines == 7520 and len(lex.duplicates) == 14
        assert lex.values["good"]["polarity"] == pytest.approx(0.475) and lex.values["good"]["valence_raw"] == 1.9
        assert lex.values["can't stand"]["polarity"] == -0.5 and lex.values["( '}{' )"]["valence_raw"] == 1.6
    else:
        assert lines == 3382 and not lex.duplicates
        assert lex.values["good"]["polarity"] == pytest.approx(0.6) and lex.values["good"]["valence_raw"] == 3
        assert lex.values["can't stand"]["polarity"] == -0.6 and lex.values["naïve"]["valence_raw"] == -2


@pytest.mark.parametrize("path", LEXICONS, ids=[p.name for p in LEXICONS])
def test_repository_lexicons_load(path):
    bank = load_lexicon(path)
    assert bank.names or bank.lexicon.classes  # features, or word classes only (topics.lex, domains.lex)
    assert bank.table.shape == (len(bank.vocab), len(bank.names))


def test_repository_copies_are_complete():
    assert len(read_lexicon(ROOT / "lexicons" / "vader.lex").entries) == 7520
    assert len(read_lexicon(ROOT / "lexicons" / "afinn.lex").entries) == 3382


# ---------------------------------------------------------------------- errors
BASE = "%feature polarity range=-1..1\n%class ADJ good bad\n"


def lex_error(tmp_path: Path, text: str, files: dict[str, str] | None = None, name: str = "t.lex") -> str:
    for n, body in (files or {}).items():
        (tmp_path / n).write_text(body, encoding="utf-8")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError) as info:
        load_lexicon(path)
    return str(info.value)


@pytest.mark.parametrize(
    "text, where, words",
    [
        (BASE + "good polarity=high\n", "3:15", "expected a number, got 'high'"),
        (BASE + "%feature x = class(ADJ\n", "3:23", "expected"),
        (BASE + "%feture x\n", "3:1", "unknown directive '%feture'"),
        (BASE + "good polarty=1\n", "3:6", "unknown feature 'polarty' (did you mean 'polarity'?)"),
        (BASE + "good polarity=1.5\n", "3:15", "polarity=1.5 is outside the declared range -1..1"),
        (BASE + "%feature a = class(ADJ, NOUN)\n", "3:25", "unknown class 'NOUN'"),
        ("%feature p range=-1..1 terms=lo,hi\n%feature b = term(p, high)\n", "2:22", "unknown term 'high' of p"),
        (BASE + "%feature b = term(polarity, high)\n", "3:19", "feature 'polarity' has no terms"),
        (BASE + "%feature a = value(polarty)\n", "3:20", "unknown feature 'polarty'"),
        (BASE + "%feature polarity range=0..1\n", "3:10", "duplicate feature 'polarity' (first declared at"),
        (BASE + "%class ADJ x\n", "3:8", "duplicate class 'ADJ'"),
        (BASE + "%class polarity x\n", "3:8", "has the name of a feature"),
        (BASE + "%class B x y x\n", "3:14", "'x' is listed twice in class B"),
        (BASE + "%modifier not negation\n%modifier not negation\n", "4:11", "duplicate modifier 'not'"),
        (BASE + "good polarity=1\ngood polarity=0.5\n", "4:6", "duplicate value of polarity for 'good' (first at line 3)"),
        (BASE + "%feature s = value(polarity) terms=a,b kernel=power(base=1.5, tau=0.3) centers=0,1\n", "3:58", "bad kernel spec: power kernel: base must be in (0, 1)"),
        (BASE + "%feature s = value(polarity) terms=a,b kernel=powr(base=0.5) centers=0,1\n", "3:47", "unknown kernel 'powr'"),
        (BASE + "%feature s = value(polarity) terms=a,b kernel=1..2 centers=0,1\n", "3:47", "kernel= expects a kernel spec"),
        (BASE + "%feature s = value(polarity) terms=a,b centers=0,1,2\n", "3:48", "3 centers for 2 terms"),
        (BASE + "%feature s = value(polarity) terms=a,a centers=0,1\n", "3:36", "duplicate term names"),
        (BASE + "%feature s = value(polarity) terms=a,b\n", "3:36", "terms need centers="),
        (BASE + "%feature s = value(polarity) kernel=power\n", "3:37", "kernel= needs terms="),
        (BASE + "%feature s = bos terms=a,b centers=0,1\n", "3:10", "is a condition (0 or 1)"),
        (BASE + "%feature s = bos colour=red\n", "3:18", "unknown feature option 'colour'"),
        (BASE + "%feature s = clas(ADJ)\n", "3:14", "unknown function 'clas'"),
        (BASE + "%feature s = boss\n", "3:14", "unknown name 'boss'"),
        (BASE + "%feature s = value(polarity) & bos\n", "3:14", "graded value, not a condition"),
        (BASE + "%feature s = bos where value(polarity)\n", "3:24", "graded value, not a condition"),
        (BASE + "%feature s = value(polarity, from=class(ADJ))\n", "3:35", "from= expects prev or prev(condition)"),
        (BASE + "%feature s = value(polarity, part=up)\n", "3:35", "part= expects pos or neg"),
        (BASE + "%feature s = value(polarity, colour=1)\n", "3:30", "unknown value() option 'colour'"),
        (BASE + "%feature s = class(ADJ, x=1)\n", "3:25", "class() takes no options"),
        (BASE + "%feature s = token(ADJ)\n", "3:20", "token() expects quoted strings"),
        (BASE + "%feature s = role(a, b)\n", "3:14", "role() takes one argument"),
        (BASE + "%feature s = bos\ngood s=1\n", "4:6", "'s' is computed by a rule"),
        (BASE + "%feature s = bos\n%feature t = value(s)\n", "4:20", "'s' is a computed feature"),
        (BASE + "%feature a_b = bos\n%feature a = value(polarity) terms=b range=0..1 kernel=triangular(width=1)\n", "4:10", "column 'a_b' of feature 'a' clashes"),
        ("%feature p range=1..0\n", "1:18", "empty range 1..0"),
        ("%modifier very booster=0.3\n", "1:11", "changes feature 'polarity', which is not declared"),
        (BASE + "%modifier very\n", "3:15", "expected a name, got end of line"),
        (BASE + "%modifier very window=2\n", "3:11", "needs booster=AMOUNT or negation"),
        (BASE + "%modifier very booster\n", "3:16", "booster needs an amount"),
        (BASE + "%modifier very booster=1 negation\n", "3:26", "a booster or a negation, not both"),
        (BASE + "%modifier very booster=1 window=0\n", "3:33", "window= expects a whole number"),
        (BASE + "%modifier very booster=1 on=strength\n", "3:11", "changes feature 'strength', which is not declared"),
        (BASE + "%format vadr\n", "3:9", "unknown format 'vadr'"),
        (BASE + "%format vader\ngood\t1.9\t0.9\t[1]\nbad\tx\n", "5:5", "expected a number (the vader score), got 'x'"),
        (BASE + "%format vader\ngood\n", "4:1", "expected a vader line word<TAB>mean"),
        (BASE + "%format afinn\ngood\t3\nbad\t-7\n", "5:5", "afinn score -7 is outside -5..5"),
        (BASE + "%format afinn\ngood\t3.5\n", "4:6", "expected an integer"),
        ("%feature polarity range=0..1\n%format vader\ngood\t-1.9\n", "3:6", "polarity=-0.475 is outside the declared range 0..1"),
        ('%include "nope.txt" format=vader\n', "1:10", "no such file nope.txt"),
        ('%include "raw.txt"\n', "1:10", "add format=vader or format=afinn"),
        ('%include "raw.txt" format=csv\n', "1:27", "unknown lexicon format 'csv'"),
        ('%include "raw.txt" colour=red\n', "1:20", "unknown include option 'colour'"),
        ('%include "t.lex"\n', "1:10", "include cycle"),
        ('"" polarity=1\n', "1:1", "a word cannot be empty"),
    ],
)
def test_errors_name_file_line_and_column(tmp_path, text, where, words):
    message = lex_error(tmp_path, text, files={"raw.txt": "good\t1\n"})
    assert message.startswith(f"{tmp_path / 't.lex'}:{where}: "), message
    assert words in message, message


def test_errors_inside_included_files_name_that_file(tmp_path):
    message = lex_error(tmp_path, '%include "raw.txt" format=afinn\n', files={"raw.txt": "good\t3\nbad\t-9\n"})
    assert message.startswith(f"{tmp_path / 'raw.txt'}:2:5: afinn score -9"), message
    message = lex_error(tmp_path, '%include "other.lex"\n', files={"other.lex": "%feature p range=0..1\nx p=2\n"})
    assert message.startswith(f"{tmp_path / 'other.lex'}:2:5: p=2 is outside"), message
    message = lex_error(tmp_path, '%feature p range=0..1\n%include "other.lex"\n', files={"other.lex": "%feature p range=0..1\n"})
    assert message.startswith(f"{tmp_path / 't.lex'}:1:10: duplicate feature 'p': other.lex declares it too"), message


def test_raw_file_and_missing_file_errors(tmp_path):
    raw = tmp_path / "v.txt"
    raw.write_text("good\t1.9\t0.9\t[1]\nbad\t9\t0.1\t[1]\n", encoding="utf-8")
    with pytest.raises(SourceError, match=rf"^{raw}:2:5: vader score 9 is outside -4..4"):
        read_lexicon(raw, format="vader")
    with pytest.raises(NeurosymError, match="unknown lexicon format 'csv'"):
        read_lexicon(raw, format="csv")
    with pytest.raises(NeurosymError, match="no such file"):
        read_lexicon(tmp_path / "missing.lex")
    bad = tmp_path / "latin1.lex"
    bad.write_bytes(b"caf\xe9 \n")
    with pytest.raises(SourceError, match=rf"^{bad}:1:4: the file is not UTF-8"):
        read_lexicon(bad)


def test_parse_lexicon_without_a_path():
    lex = parse_lexicon("%feature p\nx p=3\n")
    assert isinstance(lex, Lexicon) and lex.values == {"x": {"p": 3.0}}
    with pytest.raises(SourceError, match=r"^<string>:2:3: unknown feature 'q'"):
        parse_lexicon("%feature p\nx q=3\n")
