import re

import pytest

from neurosym.bench import synth as bench
from neurosym.bench import synth_problems as problems
from neurosym.bench import synth_report as report
from neurosym.bench import synth_score as score
from neurosym.compile.regex import pattern_dfa
from neurosym.data import shared_data_dir
from neurosym.errors import NeurosymError

HAVE_DATA = shared_data_dir() is not None and (shared_data_dir() / "alpharegex").is_dir()


def test_expand_x():
    assert problems.expand_x("1X0") == ["100", "110"]
    assert len(problems.expand_x("XX")) == 4


def test_load_alpharegex_format(tmp_path):
    (tmp_path / "no1_start_with_0").write_text("w starts with 0\n++\n0\n0X\n--\n1\n1X\n")
    (tmp_path / "no2_x").write_text("two lines\nof text\n++\n1\n--\n0\n")
    probs = problems.load_alpharegex(tmp_path)
    assert [p["name"] for p in probs] == ["no1_start_with_0", "no2_x"]
    assert probs[0]["positives"] == ["0", "00", "01"] and probs[0]["negatives"] == ["1", "10", "11"]
    assert probs[1]["description"] == "two lines of text"


@pytest.mark.parametrize(
    "gt, constants, expected",
    [
        ("repeatatleast(<let>,1)", (), "[A-Za-z]+"),
        ("concat(<cap>,contain(or(<low>,<m0>)))", ("!",), "[A-Z].*[!a-z].*"),
        ("concat(repeat(<num>,2),concat(<.>,<5>))", (), "[0-9][0-9]\\.5"),
        ("optional(startwith(<,>))", (), "(,.*)?"),
        ("repeatrange(<a>,1,3)", (), "a(a(a)?)?"),
        ("endwith(or(<vow>,<m1>))", ("x", "@"), ".*[@AEIOUaeiou]"),
    ],
)
def test_regel_translation(gt, constants, expected):
    got = problems.regel_to_regex(gt, constants)
    for s in ["", "a", "aa", "aaa", "aaaa", "Ab!", "12.5", ",x", "x@", "hello", "Z"]:
        assert bool(re.fullmatch(got, s)) == bool(re.fullmatch(expected, s)), (got, s)


def test_regel_rejects_intersection_and_complement():
    with pytest.raises(NeurosymError, match="intersection"):
        problems.regel_to_regex("and(<num>,not(<1>))")


def test_load_regel_format(tmp_path):
    (tmp_path / "so").mkdir()
    (tmp_path / "so" / "1").write_text('// natural language\nletters\n\n// examples\n"ab",+\n"a1",-\n"",-\n\n// gt\nrepeatatleast(<let>,1)')
    (tmp_path / "so" / "2").write_text('// natural language\nx\n\n// examples\n"1",+\n\n// gt\nnot(<num>)')
    usable, skipped = problems.load_regel(tmp_path, suites=("so",))
    assert [p["name"] for p in usable] == ["so/1"] and usable[0]["regex"] == "[A-Za-z]+"
    assert usable[0]["positives"] == ["ab"] and usable[0]["negatives"] == ["a1", ""]
    assert skipped[0]["name"] == "so/2" and "complement" in skipped[0]["reason"]


def test_equivalence_and_f1():
    assert score.equivalent(pattern_dfa("(0|1)*"), pattern_dfa("[01]*"))
    assert score.equivalent(pattern_dfa("a+"), pattern_dfa("aa*"))
    assert not score.equivalent(pattern_dfa("a*"), pattern_dfa("a+"))
    assert not score.equivalent(pattern_dfa(".*"), pattern_dfa("[a-z]*"))
    assert score.f1_score("a+", "a+", ["a", "b"]) == 1.0
    assert score.f1_score("a*", "a+", ["", "a", "aa"]) == pytest.approx(0.8)
    prob = {"regex": "[0-9]+", "positives": ["1", "22"], "negatives": ["a"]}
    fresh = score.fresh_strings(prob, pattern_dfa("[0-9]*"), n=20)
    assert fresh and not set(fresh) & {"1", "22", "a"}


def test_format_results():
    res = {
        "time_budget": 5,
        "seed": 0,
        "alpharegex": {"beam": {"problems": 25, "solved": 23, "median_seconds": 1.2, "max_seconds": 55.0}},
        "regel": {
            "usable": 10,
            "skipped": 2,
            "beam": {"problems": 10, "solved": 7, "equivalent": 3, "success_rate": 0.3, "mean_f1": 0.7, "median_seconds": 0.5},
        },
        "seconds": 12,
    }
    text = report.format_results(res)
    assert "23/25" in text and "30.0%" in text and "equivalent" in text


def test_missing_shared_data_is_a_clear_error(monkeypatch, tmp_path):
    import neurosym.data as data

    monkeypatch.setenv("NEUROSYM_SHARED_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setattr(data, "CHECKOUT_SHARED_DATA", tmp_path / "repo" / "shared" / "data")
    with pytest.raises(NeurosymError, match="shared data"):
        bench.run(methods=("beam",), time_budget=1)


@pytest.mark.skipif(not HAVE_DATA, reason="shared data (../shared/data/alpharegex) not available")
def test_alpharegex_easy_problems_solve():
    probs = [p for p in problems.load_alpharegex() if p["name"].split("_")[0] in ("no1", "no2", "no4", "no6")]
    res = bench.run_alpharegex(("beam",), time_budget=10, problems=probs)
    assert res["beam"]["solved"] == 4


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_DATA, reason="shared data not available")
def test_alpharegex_target():
    res = bench.run_alpharegex(("beam",), time_budget=60)
    assert res["beam"]["solved"] >= 20
    assert res["beam"]["solved_median_seconds"] <= 5
