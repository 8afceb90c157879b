import re

import pytest

import neurosym
from neurosym.errors import NeurosymError
from neurosym.synth import score_on_examples, synthesize, write_to_bank
from neurosym.synth import regex_ast as ra
from neurosym.synth.bestfirst import BestFirst

ENDS_IN_0 = (["0", "10", "00", "110", "1010", "0110"], ["", "1", "01", "11", "011", "0101"])
ZERO_ONE_STAR = (["", "01", "0101", "010101"], ["0", "1", "10", "011", "0110", "0100"])
STARTS_WITH_0 = (["0", "00", "01", "010", "011"], ["1", "10", "11", "101", ""])


def check_solution(res, pos, neg):
    auto = neurosym.compile_regex(res.pattern)  # always compiles
    rx = re.compile(res.pattern)
    if res.solved:
        assert all(rx.fullmatch(s) for s in pos)
        assert not any(rx.fullmatch(s) for s in neg)
        assert all(auto.char_dfa.accepts(s) for s in pos)
    assert res.size == ra.size(ra.parse(res.pattern))


@pytest.mark.parametrize("examples, expected", [(ENDS_IN_0, "[01]*0"), (ZERO_ONE_STAR, "(01)*"), (STARTS_WITH_0, "0[01]*")])
def test_beam_solves_easy_problems_quickly(examples, expected):
    pos, neg = examples
    res = synthesize(pos, neg, method="beam", time_budget=5)
    assert res.solved and res.pattern == expected
    assert res.seconds < 5
    check_solution(res, pos, neg)


@pytest.mark.parametrize("method", ["evolve", "reinforce"])
def test_other_methods_return_compiling_regexes(method):
    pos, neg = ENDS_IN_0
    res = synthesize(pos, neg, method=method, time_budget=1.5, seed=1)
    assert res.method == method and res.seconds < 6
    check_solution(res, pos, neg)


def test_evolve_is_seeded():
    # a generation cap instead of a short time budget: the run then depends on the seed
    # alone; the examples (alternating strings) are not solved in 4 generations, so every
    # run evolves for all of them
    pos = ["0", "1", "01", "10", "101", "010", "1010", "0101", "10101"]
    neg = ["00", "11", "011", "001", "110", "1001", "101101", "010010"]
    a, b, c = (synthesize(pos, neg, method="evolve", time_budget=300, seed=s, max_generations=4) for s in (3, 3, 4))
    assert a.info["generations"] == b.info["generations"] == 4
    assert (a.pattern, a.score, a.info) == (b.pattern, b.score, b.info)
    assert (c.pattern, c.info) != (a.pattern, a.info)  # another seed, another search


def test_unsolvable_within_budget_falls_back_to_best_candidate():
    # the local beam (phase 2) runs when enumeration finds nothing
    pos = ["0", "1", "01", "10", "101", "010", "1010", "0101", "10101"]
    neg = ["00", "11", "011", "001", "110", "1001", "101101", "010010"]
    res = synthesize(pos, neg, method="beam", time_budget=1.0, enum_fraction=0.05)
    check_solution(res, pos, neg)
    assert res.score >= 0


def test_bestfirst_finds_smallest_with_unit_costs():
    bf = BestFirst(["0", "00", "000"], ["", "1", "01"])
    r = bf.search(5)
    assert ra.to_pattern(r) == "0+"
    assert bf.consistent(bf.space.vector(r))


def test_bad_inputs():
    with pytest.raises(NeurosymError, match="both positive and negative"):
        synthesize(["a"], ["a"])
    with pytest.raises(NeurosymError, match="at least one positive"):
        synthesize([], ["a"])
    with pytest.raises(NeurosymError, match="unknown synthesis method"):
        synthesize(["a"], method="magic")
    with pytest.raises(NeurosymError):
        synthesize("abc")


def test_evaluate_reports_distances():
    ev = score_on_examples("0+", ["0", "00", "1"], ["000"])
    assert ev["distances"] == [0.0, 0.0, 1.0] and ev["accepted_negatives"] == ["000"] and not ev["solved"]


def test_write_to_bank(tmp_path):
    path = tmp_path / "found.regex"
    write_to_bank(path, "ENDS_IN_ZERO", "[01]*0")
    write_to_bank(path, "SLASHED", "a/b")
    text = path.read_text()
    assert "ENDS_IN_ZERO: /[01]*0/" in text and "SLASHED: /a\\/b/" in text
    bank = neurosym.load(path)
    assert bank.names == ["ENDS_IN_ZERO", "SLASHED"]
    assert bank["ENDS_IN_ZERO"].accepts("110") and not bank["ENDS_IN_ZERO"].accepts("01")
    assert bank["SLASHED"].accepts("a/b")
    with pytest.raises(NeurosymError, match="already has a pattern named ENDS_IN_ZERO"):
        write_to_bank(path, "ENDS_IN_ZERO", "1")
    with pytest.raises(NeurosymError, match="bad pattern name"):
        write_to_bank(path, "lower", "1")
    before = path.read_text()
    with pytest.raises(NeurosymError):
        write_to_bank(path, "BROKEN", "a(?=b)")  # not regular: nothing written
    assert path.read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_write_synthesised_result_to_existing_bank(tmp_path):
    path = tmp_path / "bank.regex"
    path.write_text("# existing\nYEAR: /(19|20)[0-9]{2}/")  # no final newline
    res = synthesize(*ZERO_ONE_STAR, time_budget=5)
    write_to_bank(path, "PAIRS", res.pattern)
    bank = neurosym.load(path)
    assert bank.names == ["YEAR", "PAIRS"] and bank["PAIRS"].accepts("0101")


def test_generalize_opens_text_patterns_only_while_consistent():
    from neurosym.synth.beam import generalize

    r = ra.parse("[A-Z][0-9]")
    assert ra.to_pattern(generalize(r, ["A1", "B2x"], ["a1", "xA1"])) == "[A-Z].*[0-9].*"
    assert ra.to_pattern(generalize(r, ["A1", "B2x"], ["a1", "xA1", "Ax1"])) == "[A-Z][0-9].*"
    assert ra.to_pattern(generalize(r, ["A1"], ["A1x", "xA1"])) == "[A-Z].*[0-9]"
    assert ra.to_pattern(generalize(r, ["A1"], ["A1x", "xA1", "Ax1"])) == "[A-Z][0-9]"
    digits = ra.parse("[0-9]*")
    assert ra.to_pattern(generalize(digits, ["1", "23"], ["a", "1a"])) == "[0-9]+"  # the empty string was never shown
    assert ra.to_pattern(generalize(digits, ["", "23"], ["a", "1a"])) == "[0-9]*"
    res = synthesize(["Ab1", "Cd22", "Ef3 and more"], ["ab1", "A", "", "1Ab"], time_budget=5)
    assert res.solved and res.pattern.endswith((".*", ".+"))


def test_examples_too_long_for_the_infix_search_are_refused_at_once():
    """The infix space is cubic in an example's length: a 3,000-character example would
    build billions of split entries whatever the time budget (found by the fuzz pass); it is
    refused before the search with the reason."""
    import time

    import pytest

    from neurosym.errors import NeurosymError
    from neurosym.synth import synthesize
    from neurosym.synth.infix import MAX_SPLITS, split_bound

    assert split_bound(["ab"]) == 2 * 2 + 1 * 3  # two infixes of length 1 (2 splits each), one of length 2 (3)
    long = "ab" * 1500
    assert split_bound([long]) > MAX_SPLITS
    started = time.perf_counter()
    with pytest.raises(NeurosymError, match="too long for the infix search.*3,000 characters"):
        synthesize([long, "ab"], ["ba"], method="beam", time_budget=0.2)
    assert time.perf_counter() - started < 10
