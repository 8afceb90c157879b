"""Big inputs: parsing and compiling stay linear in the file's size, and what cannot be
done in seconds is a limit with a positioned message, checked before the work (issue 14.3).

The fast path that reads plain lines without lark is checked against lark itself: for
any line, a tree from the fast path equals lark's tree, token types and positions
included."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym import kinds
from neurosym.compile.regex import Limits, compile_regex
from neurosym.dsl import fsg, pcfg
from neurosym.dsl.lexicon import reader
from neurosym.dsl.source import lark_parser
from neurosym.errors import CompileError, SourceError


# ---------------------------------------------------------------------- the fast path equals lark
def _same_as_lark(parser, fast_line, line: str) -> bool:
    """Whether ``fast_line`` declines ``line`` or gives lark's tree for it (lark must parse it)."""
    fast = fast_line(line, 1)
    if fast is None:
        return True
    tree = parser.parse(line + "\n").children[0]  # a line the fast path takes is valid
    assert fast == tree, (line, fast, tree)
    for a, b in zip(fast.scan_values(lambda v: True), tree.scan_values(lambda v: True), strict=True):
        assert (a.type, str(a), a.line, a.column) == (b.type, str(b), b.line, b.column), line
    return True


LEX_PIECES = ["%class", " ", "\t", "A", "w", "good", ":", "-x", "x#y", "#c", "'q'", '"q q"', "=", "polarity", "=0.5", "0.5", "1e3",
              "..", "%feature", "-1", "é", "(", ")", "!"]
FSG_PIECES = [" ", "\t", "S", "A", "q0", "x", "'w'", '"w w"', "<eps>", "<epsilon>", "@C", "@f:t", "0.5", "role=subject",
              "threshold=0.3", "#c", "%start", "=", "@", "<", "(", ",", "a+b", "1e-3"]
PCFG_PIECES = [" ", "\t", "S", "NP", "A-B", "->", "-", "|", "'w'", '"x"', "'a\\'b'", "[0.5]", "[", "]", "#c", "%start", "(", ",", "\\"]


def _lines(pieces):
    return st.lists(st.sampled_from(pieces), min_size=1, max_size=9).map("".join)


@settings(max_examples=400, deadline=None)
@given(_lines(LEX_PIECES))
def test_lexicon_fast_lines_equal_lark(line):
    assert _same_as_lark(lark_parser(reader.GRAMMAR), reader.fast_line, line)


@settings(max_examples=400, deadline=None)
@given(_lines(FSG_PIECES))
def test_fsg_fast_lines_equal_lark(line):
    assert _same_as_lark(lark_parser(fsg.GRAMMAR), fsg.fast_line, line)


@settings(max_examples=400, deadline=None)
@given(_lines(PCFG_PIECES))
def test_pcfg_fast_lines_equal_lark(line):
    assert _same_as_lark(lark_parser(pcfg.GRAMMAR), pcfg.fast_line, line)


def test_the_fast_path_takes_the_plain_lines():
    assert reader.fast_line("%class BIG a b c  # words", 1) is not None
    assert reader.fast_line("good polarity=0.6 strength=1", 1) is not None
    assert fsg.fast_line("S A 'the' 0.5 role=subject", 1) is not None
    assert pcfg.fast_line("NP -> Det N [0.7] | Det Adj N [0.3]", 1) is not None


def test_a_continued_pcfg_rule_is_left_to_lark():
    g = pcfg.parse_pcfg("S -> 'a' [0.5]\n# between\n | 'b' [0.5]\nT -> 'c' [1.0]\n")
    assert [(p.lhs, str(p.rhs[0])) for p in g.productions] == [("S", "'a'"), ("S", "'b'"), ("T", "'c'")]


def test_errors_keep_their_line_numbers_around_fast_lines(tmp_path):
    path = tmp_path / "g.fsg"
    path.write_text("S A x 0.5\nS A y 0.5\nA B ( 1.0\nB 1.0\n")
    with pytest.raises(SourceError) as err:
        kinds.load(path)
    assert err.value.line == 3 and err.value.col == 5


# ---------------------------------------------------------------------- linear time
def _seconds(path: Path, repeats: int = 5) -> float:
    """The best of ``repeats`` loads (CPU time of this process, so other jobs on the
    machine do not inflate one size more than the other), with Python's cyclic garbage
    collector paused (its passes grow with everything alive in the test process, not with
    the loader's own work)."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            t = time.process_time()
            kinds.load(path)
            best = min(best, time.process_time() - t)
        finally:
            gc.enable()
    return best


def _class_list(path: Path, n: int) -> Path:
    path.write_text("%feature polarity range=-1..1\n%class BIG " + " ".join(f"w{i:07d}" for i in range(n)) + "\n")
    return path


def _lexical_pcfg(path: Path, n: int) -> Path:
    rules = ["S -> NP VP [1.0]", "NP -> Det N [0.7] | Det Adj N [0.3]", "VP -> V NP [0.6] | V [0.4]"]
    for pos in ("Det", "N", "Adj", "V"):
        rules += [f"{pos} -> '{pos.lower()}{i}' [{1 / n!r}]" for i in range(n)]
    path.write_text("\n".join(rules) + "\n")
    return path


def _chain_fsg(path: Path, n: int) -> Path:
    states = n // 4
    arcs = [f"S{i // 4} S{(i // 4 + 1 + i % 3) % states} w{i % 2000} 1.0" for i in range(n)]
    path.write_text("%normalize\n%start S0\n" + "\n".join(arcs) + "\nS0 1.0\n")
    return path


def _ratio(tmp_path: Path, make, small: int) -> float:
    kinds.load(make(tmp_path / ("warm" + make.__name__[-4:]), 50))  # parsers built, modules imported
    t1 = _seconds(make(tmp_path / ("a" + make.__name__[-4:]), small))
    t4 = _seconds(make(tmp_path / ("b" + make.__name__[-4:]), 4 * small))
    return t4 / t1


def test_a_class_list_scales_linearly(tmp_path):
    # quadratic work (a list lookup per word) would make 4x the words take 16x the time
    make = lambda p, n: _class_list(p.with_suffix(".lex"), n)  # noqa: E731
    make.__name__ = "cls_.lex"
    assert _ratio(tmp_path, make, 10_000) < 10


@pytest.mark.slow
def test_big_files_check_in_seconds(tmp_path):
    """A 1.5 MB class list and a 4.7 MB lexical PCFG check in bounded time; the FSG's
    4x larger file takes at most about 4x as long."""
    big = _class_list(tmp_path / "cls.lex", 190_000)
    assert big.stat().st_size > 1_500_000
    assert _seconds(big) < 20
    grammar = _lexical_pcfg(tmp_path / "lex.pcfg", 50_000)
    assert grammar.stat().st_size > 4_500_000
    assert _seconds(grammar) < 60
    small, large = _chain_fsg(tmp_path / "a.fsg", 2_000), _chain_fsg(tmp_path / "b.fsg", 8_000)
    kinds.load(small)
    assert _seconds(large) / _seconds(small) < 8


# ---------------------------------------------------------------------- limits
def test_a_rule_of_100000_terminals_hits_the_cnf_cap_before_any_matrix(tmp_path):
    path = tmp_path / "long.pcfg"
    path.write_text("S -> 'a' [0.5] | T [0.5]\nT -> " + " ".join(f"'w{i}'" for i in range(100_000)) + " [1.0]\n")
    t = time.perf_counter()
    with pytest.raises(CompileError) as err:
        kinds.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2:6: the rule T -> ... (100,000 symbols on its right-hand side)")
    assert "5,000 symbols" in message and "Limits.max_cnf_symbols" in message
    assert time.perf_counter() - t < 30


def test_long_rules_within_the_cap_still_compile(tmp_path):
    path = tmp_path / "long.pcfg"
    path.write_text("S -> " + " ".join(f"'w{i}'" for i in range(300)) + " [1.0]\n")
    rules = kinds.load(path)
    assert rules.T == 300 and rules.N == 299  # one binarisation symbol per position
    assert abs(float(rules.root.exp().sum()) - 1.0) < 1e-6


def test_the_rule_tensor_cap_is_checked_before_allocating(tmp_path):
    path = tmp_path / "wide.pcfg"
    path.write_text("S -> A B [1.0]\nA -> 'a' [0.7] | A A [0.3]\nB -> 'b' [1.0]\n")
    N, S, _ = kinds.load(path).binary.shape
    size = N * S * S
    with pytest.raises(CompileError) as err:
        kinds.load(path, None, Limits(max_elements=size - 1))
    assert str(err.value).startswith(f"{path}: the rule tensor binary would be {N} x {S} x {S} = {size} elements")
    assert f"cap of {size - 1} (Limits.max_elements)" in str(err.value)
    assert kinds.load(path, None, Limits(max_elements=size)).binary.shape == (N, S, S)


def test_the_fsg_table_cap(tmp_path):
    path = _chain_fsg(tmp_path / "c.fsg", 400)
    with pytest.raises(CompileError, match=r"c\.fsg: the compiled tables would exceed .* over the cap of 1,000 elements"):
        kinds.load(path, None, Limits(max_elements=1000))


def test_an_fsg_bigger_than_the_state_cap_is_not_called_ambiguous(tmp_path):
    path = _chain_fsg(tmp_path / "c.fsg", 400)
    with pytest.raises(CompileError, match="the grammar has 100 states, over the cap of 50") as err:
        kinds.load(path, None, Limits(max_states=50))
    assert "ambiguous" not in str(err.value)


def test_the_pattern_cap_names_the_first_pattern_over_it(tmp_path):
    path = tmp_path / "many.regex"
    path.write_text("# a bank\n" + "".join(f"P{i}: /[a-z]{i}x/\n" for i in range(30)))
    with pytest.raises(SourceError, match=r"defines 30 patterns, over the cap of 10 \(Limits.max_patterns\)") as err:
        kinds.load(path, None, Limits(max_patterns=10))
    assert (err.value.path, err.value.line, err.value.col) == (str(path), 12, 1)
    assert len(kinds.load(path, None, Limits(max_patterns=30))) == 30


def test_a_huge_bank_fails_before_parsing(tmp_path):
    path = tmp_path / "huge.regex"
    path.write_text("".join(f"P{i}: /[a-z]{{2}}{i}x/\n" for i in range(200_000)))
    t = time.perf_counter()
    with pytest.raises(SourceError, match="defines 200,000 patterns, over the cap of 5,000"):
        kinds.load(path)
    assert time.perf_counter() - t < 10


def test_the_nfa_cap_names_the_pattern_and_the_repeat(tmp_path):
    path = tmp_path / "rep.regex"
    path.write_text("OK: /a/\nBIG: /(x{1000}){1000}/\n")
    with pytest.raises(CompileError) as err:
        kinds.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2:1: BIG: the pattern needs more than 200,000 NFA states (the NFA cap)")
    assert "the repeat {1000} (1,000 copies of its operand)" in message


def test_the_nfa_cap_blames_an_alternation_not_a_repeat():
    pattern = "|".join(f"abcdefghijklmnopqrstuvwxyz0123456789{i}[a-z]" for i in range(1500))
    with pytest.raises(CompileError) as err:
        compile_regex(pattern, max_states=1000)
    message = str(err.value)
    assert "an alternation of 1,500 options" in message and "repeat" not in message
    assert f"({len(pattern):,} characters)" in message and "100,000 NFA states" in message


def test_the_time_limit_covers_building_the_nfa():
    t = time.perf_counter()
    with pytest.raises(CompileError, match=r"/\(x\{1000\}\)\{1000\}/: the pattern ran over the time limit while building its NFA"):
        compile_regex("(x{1000}){1000}", max_states=1_000_000, time_limit=0.5)
    assert time.perf_counter() - t < 10


def test_the_time_limit_covers_minimisation():
    """A chain of n states needs n refinement rounds (``a{50000}``: about 140 s); the
    check runs before every round, and a compile under a time limit stops whichever
    stage is running, quoting the user's whole budget."""
    import numpy as np

    from neurosym.compile.dfa import minimize_table

    n = 2000
    trans = np.full((n, 1), -1, dtype=np.int64)
    trans[:-1, 0] = np.arange(1, n)
    final = np.zeros(n, dtype=bool)
    final[-1] = True
    rounds = []

    def check():
        rounds.append(1)
        if len(rounds) > 50:
            raise CompileError("stopped")

    with pytest.raises(CompileError, match="stopped"):
        minimize_table(trans, final, check=check)
    t = time.perf_counter()
    with pytest.raises(CompileError, match=r"time limit"):  # NFA building or minimisation, whichever the load reaches
        compile_regex("a{50000}", max_states=200_000, time_limit=2.0)
    assert time.perf_counter() - t < 20


@pytest.mark.parametrize("suffix, body", [(".regex", "A: /a/\n"), (".fsg", "S E 'a' 1.0\nE 1.0\n"), (".pcfg", "S -> 'a' [1.0]\n"), (".lex", "%class A a\n")])
def test_source_files_over_the_size_limit_are_refused_before_reading(tmp_path, monkeypatch, suffix, body):
    from click.testing import CliRunner

    from neurosym.cli.main import main

    path = tmp_path / f"big{suffix}"
    path.write_text(body + "# padding\n" * 120_000)  # 1.2 MB
    monkeypatch.setenv("NEUROSYM_MAX_SOURCE_MB", "1")
    r = CliRunner().invoke(main, ["check", str(path)])
    assert r.exit_code == 2 and f"{path}: the file is 1.2 MB, over the 1 MB limit for source files" in r.output
    monkeypatch.setenv("NEUROSYM_MAX_SOURCE_MB", "2")
    assert CliRunner().invoke(main, ["check", str(path)]).exit_code == 0
    monkeypatch.setenv("NEUROSYM_MAX_SOURCE_MB", "lots")
    r = CliRunner().invoke(main, ["check", str(path)])
    assert r.exit_code == 2 and "NEUROSYM_MAX_SOURCE_MB must be a number" in r.output
