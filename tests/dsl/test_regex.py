"""The `.regex` bank format: parsing to IR, and every error at its file, line and column."""

import itertools
import re
from pathlib import Path

import pytest

import neurosym
from neurosym.dsl import regex_ir, read_regex_bank, parse_regex_bank
from neurosym.errors import SourceError

ROOT = Path(__file__).resolve().parents[2]
GRAMMARS = sorted((ROOT / "grammars").glob("*.regex"))


def error_at(text: str, tmp_path: Path, files: dict[str, str] | None = None) -> SourceError:
    for name, body in (files or {}).items():
        (tmp_path / name).write_text(body)
    path = tmp_path / "t.regex"
    path.write_text(text)
    with pytest.raises(SourceError) as info:
        neurosym.load(path)
    err = info.value
    assert err.path == str(path) or err.path.endswith(tuple(files or ()))
    return err


def test_ir_of_a_small_bank():
    bank = parse_regex_bank('YEAR: /(19|20)[0-9]{2}/  # c\n\nD[weight=2.5e0, flags=i]: YEAR "-" (\'a\' | "b\\n")? /x/{2,3}\n')
    assert list(bank.patterns) == ["YEAR", "D"]
    d = bank.patterns["D"]
    assert d.weight == 2.5 and d.flags == "i" and d.span.line == 3 and d.span.col == 1
    ref, lit, opt, rep = d.expr.items
    assert ref == regex_ir.Ref("YEAR", "<string>", ref.span) and (ref.span.line, ref.span.col) == (3, 27)
    assert lit.text == "-"
    assert isinstance(opt, regex_ir.Repeat) and (opt.min, opt.max) == (0, 1)
    assert [o.text for o in opt.item.options] == ["a", "b\n"]
    assert isinstance(rep.item, regex_ir.Regex) and rep.item.pattern == "x" and (rep.min, rep.max) == (2, 3)
    assert bank.resolve(ref) is bank.patterns["YEAR"]


@pytest.mark.parametrize("path", GRAMMARS, ids=[p.name for p in GRAMMARS])
def test_every_shipped_bank_compiles(path):
    bank = neurosym.load(path)
    assert len(bank) >= 3
    for name, auto in bank.patterns.items():
        assert auto.num_states >= 1 and bool(auto.final.any()), name
        for s in auto.char_dfa.sample(20, seed=1):
            assert auto.accepts(s), (name, s)


def test_shipped_examples_mean_what_they_say():
    dates = neurosym.load(ROOT / "grammars" / "dates.regex")
    assert dates["DATE"].accepts("2024-02-29") and not dates["DATE"].accepts("2024-13-01")
    assert dates["LONG_DATE"].accepts("march 3, 1999") and dates["STAMP"].accepts("1999-12-31T23:59:59")
    nums = neurosym.load(ROOT / "grammars" / "numbers.regex")
    for good in ["42", "-3.5", ".5", "6.02e23", "1,234,567", "0xFF"]:
        assert nums["NUMBER"].accepts(good), good
    for bad in ["1,23", "--1", "0xg", "1e"]:
        assert not nums["NUMBER"].accepts(bad), bad
    email = neurosym.load(ROOT / "grammars" / "email.regex")
    assert email["EMAIL"].accepts("first.last+tag@mail.example.org")
    assert not email["EMAIL"].accepts("no@tld") and email["URL"].accepts("HTTPS://example.com:8080/a/b.html")


def _runs(s):
    return [(k, len(list(g))) for k, g in itertools.groupby(s)]


TOMITA = {
    "T1": lambda s: "0" not in s,
    "T2": lambda s: s == "10" * (len(s) // 2),
    "T3": lambda s: not any(
        a[0] == "1" and a[1] % 2 and b[0] == "0" and b[1] % 2 for a, b in zip(_runs(s), _runs(s)[1:])
    ),
    "T4": lambda s: "000" not in s,
    "T5": lambda s: s.count("0") % 2 == 0 and s.count("1") % 2 == 0,
    "T6": lambda s: (s.count("0") - s.count("1")) % 3 == 0,
    "T7": lambda s: all(not (a == "1" and b == "0") for a, b in zip(s, s[1:])) or _alternations(s) <= 3,
}


def _alternations(s):
    return sum(1 for a, b in zip(s, s[1:]) if a != b) + (1 if s.startswith("1") else 0)


def test_tomita_languages_by_brute_force():
    bank = neurosym.load(ROOT / "grammars" / "tomita.regex")
    assert bank.names == [f"T{i}" for i in range(1, 8)]
    for n in range(11):
        for t in itertools.product("01", repeat=n):
            s = "".join(t)
            for name, pred in TOMITA.items():
                assert bank[name].accepts(s) == pred(s), (name, s)


def test_imports_and_words(tmp_path):
    (tmp_path / "lib.regex").write_text('DIGIT: /[0-9]/\nTWO: DIGIT DIGIT\nHIDDEN: "h"\n')
    (tmp_path / "w.txt").write_text("# comment\nred\n\ngreen\n")
    main = tmp_path / "main.regex"
    main.write_text('%import "lib.regex" (TWO)\nCOLOR[flags=i]: %words "w.txt"\nX: TWO COLOR\n')
    bank = neurosym.load(main)
    assert bank.names == ["TWO", "COLOR", "X"]
    assert bank["X"].accepts("42GREEN") and not bank["X"].accepts("4red")
    parsed = read_regex_bank(main)
    words = parsed.patterns["COLOR"].expr
    assert isinstance(words, regex_ir.Words) and words.words == ("red", "green")


@pytest.mark.parametrize(
    "text, line, col, fragment",
    [
        ("A /x/\n", 1, 3, "expected ':'"),
        ("A: /x/ |\n", 1, 9, "expected"),
        ("a: /x/\n", 1, 1, "a pattern name"),
        ("A: /x/\nB: C\n", 2, 4, "undefined pattern C"),
        ("A: /x/\n\nA: /y/\n", 3, 1, "duplicate pattern A (first defined at line 1)"),
        ("A: B\nB: \"x\" A\n", 2, 8, "cannot recurse"),
        ("A[colour=red]: /x/\n", 1, 3, "unknown attribute 'colour'"),
        ("A[weight=heavy]: /x/\n", 1, 10, "weight must be"),
        ("A[flags=m]: /x/\n", 1, 9, "flags must be"),
        ("A: /x{3,1}/\n", 1, 7, "invalid regex"),
        ("A: 'x'{3,1}\n", 1, 7, "reversed"),
        ("A: \"a\\qb\"\n", 1, 6, "unknown escape"),
        ("A: /(a)\\1/\n", 1, 8, "backreferences"),
        ("A: /(?P<n>a)(?P=n)/\n", 1, 13, "backreferences"),
        ("A: /a(?=b)b/\n", 1, 6, "lookahead"),
        ("A: /a(?!b)./\n", 1, 6, "negative lookahead"),
        ("A: /(?<=a)b/\n", 1, 5, "lookbehind"),
        ("A: /(?<!a)b/\n", 1, 5, "negative lookbehind"),
        ("A:   /^ab/\n", 1, 7, "anchors"),
        ("A: /ab$/\n", 1, 7, "anchors"),
        ("A: /\\Aab/\n", 1, 5, "anchors"),
        ("A: /ab\\Z/\n", 1, 7, "anchors"),
        ("A: /a\\bc/\n", 1, 6, "word boundaries"),
        ("A: /(?x)a b/\n", 1, 5, "inline flag"),
        ("A: /(?m)a/\n", 1, 5, "inline flag"),
        ("A: /(a/\n", 1, 5, "missing )"),
        ("A: %words \"nope.txt\"\n", 1, 11, "no such word list"),
        ('%import "nope.regex" (A)\n', 1, 9, "no such file"),
    ],
)
def test_errors_have_positions(tmp_path, text, line, col, fragment):
    err = error_at(text, tmp_path)
    assert (err.line, err.col) == (line, col), str(err)
    assert fragment in err.message
    assert str(err).startswith(f"{err.path}:{line}:{col}: ")


def test_import_errors(tmp_path):
    err = error_at('%import "lib.regex" (A, B)\n', tmp_path, {"lib.regex": "A: /a/\n"})
    assert (err.line, err.col) == (1, 25) and "does not define B" in err.message
    err = error_at('%import "t.regex" (A)\nA: /a/\n', tmp_path)
    assert "import cycle" in err.message
    err = error_at('X: %words "empty.txt"\n', tmp_path, {"empty.txt": "# nothing\n\n"})
    assert (err.line, err.col) == (1, 11) and "is empty" in err.message


def test_character_class_contents_are_not_mistaken_for_features():
    bank = parse_regex_bank("A: /[$^]+/\nB: /[\\b]/\nC: /[]a]/\nD: /\\101/\n")
    compiled = neurosym.compile.compile_bank(bank)
    assert compiled["A"].accepts("$^$") and compiled["B"].accepts("\b")
    assert compiled["D"].accepts("A")
    assert all(compiled["C"].accepts(s) == bool(re.fullmatch("[]a]", s)) for s in ["]", "a", "[]a]", "]a"])


def test_a_pattern_given_as_text_reports_its_column():
    with pytest.raises(SourceError) as info:
        neurosym.compile_regex("ab(?=c)")
    assert (info.value.line, info.value.col) == (1, 3) and info.value.path is None
