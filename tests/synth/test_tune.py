"""The search choices re-derived on development data (``neurosym bench synth-tune``,
issue 31): the knobs, the procedure, the frozen choice against its JSON."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from neurosym.bench import synth_problems as problems
from neurosym.bench import synth_tune as tune
from neurosym.bench.regel_split import TEST
from neurosym.cli.main import main
from neurosym.data import shared_data_dir
from neurosym.synth import regex_ast as ra
from neurosym.synth.beam import ALPHAREGEX_COSTS, FINISH, Finish, generalize
from neurosym.synth.bestfirst import LEAF_CHOICES, LeafChoices, weighted_leaves

ROOT = Path(__file__).resolve().parents[2]
SHARED = shared_data_dir()
HAVE_REGEL = SHARED is not None and (SHARED / "regel" / "deepregex").is_dir()


def test_frozen_choices_are_the_ones_the_committed_run_chose():
    report = json.loads((ROOT / "docs" / "synth_tune.json").read_text())
    chosen = report["chosen"]
    assert report["limit"] is None and report["development"]["regel"]["split"] == "dev"
    assert ALPHAREGEX_COSTS["H"] == chosen["hole"]
    assert LEAF_CHOICES == LeafChoices(**chosen["leaves"])
    assert FINISH == Finish(**chosen["finish"])
    # the committed run never saw a test problem
    names = {row["name"] for run in report["runs"] for rows in run["rows"].values() for row in rows}
    assert names and not names & set(TEST) and not any(n.startswith("no") for n in names)


def test_leaf_choices_change_the_leaves():
    text = (["ab1", "cd2"], ["x"])
    labels = lambda ch: {ra.to_pattern(x): c for x, c in weighted_leaves(*text, choices=ch)}  # noqa: E731
    full = labels(LeafChoices(dot=4, any_string=2, alnum_char=3, vowels=True))
    assert full["."] == 40 and full[".*"] == 20 and full["a"] == 30 and "[AEIOUaeiou]" in full
    bare = labels(LeafChoices(dot=None, any_string=None, alnum_char=2, vowels=False))
    assert "." not in bare and ".*" not in bare and bare["a"] == 20 and "[AEIOUaeiou]" not in bare
    small = (["01", "10"], ["00"])
    assert {ra.to_pattern(x) for x, _ in weighted_leaves(*small, choices=LeafChoices(small_any=True, small_stars=True))} == {
        "0", "1", "[01]", "[01]*", "0*", "1*"}
    assert {ra.to_pattern(x) for x, _ in weighted_leaves(*small, choices=LeafChoices(small_any=False, small_stars=False))} == {"0", "1", "[01]"}


def test_finishing_steps_one_by_one():
    r = ra.parse("[A-Z][0-9]")
    pos, neg = ["A1", "B2x"], ["a1"]
    assert ra.to_pattern(generalize(r, pos, neg, Finish(plus=False, right=False, between=False))) == "[A-Z][0-9]"
    assert ra.to_pattern(generalize(r, pos, neg, Finish(right=True, between=False))) == "[A-Z][0-9].*"
    assert ra.to_pattern(generalize(r, pos, neg, Finish(right=True, between=True))) == "[A-Z].*[0-9].*"
    assert ra.to_pattern(generalize(r, pos, neg, Finish(right=True, between=True, left=True))) == ".*[A-Z].*[0-9].*"
    # the left end stays closed when a negative needs it
    assert ra.to_pattern(generalize(r, pos, neg + ["xA1"], Finish(right=True, between=True, left=True))) == "[A-Z].*[0-9].*"
    star = ra.parse("[0-9]*")
    assert ra.to_pattern(generalize(star, ["1", "23"], ["a"], Finish(plus=False, right=False, between=False))) == "[0-9]*"
    assert ra.to_pattern(generalize(star, ["1", "23"], ["a"], Finish(plus=True, right=False, between=False))) == "[0-9]+"
    assert [f.name for f in tune.FINISHES][0] == "none" and Finish().name == "plus+right+between"


def test_tomita_problems_are_labelled_by_re():
    probs = problems.load_tomita()
    assert [p["name"] for p in probs] == [f"tomita/T{i}" for i in range(1, 8)]
    for p in probs:
        rx = re.compile(p["regex"])
        assert p["positives"] and p["negatives"] and not set(p["positives"]) & set(p["negatives"])
        assert all(rx.fullmatch(s) for s in p["positives"]) and not any(rx.fullmatch(s) for s in p["negatives"])
        # the first members and non-members in shortlex order, none skipped
        universe = problems.binary_strings(12)
        assert p["positives"] == [s for s in universe if rx.fullmatch(s)][:10]
        assert p["negatives"] == [s for s in universe if not rx.fullmatch(s)][:10]


def test_procedure_picks_each_factor_and_breaks_ties_to_the_first_value(monkeypatch):
    """With a fake search whose result depends only on the setting, the procedure picks the
    value that helps, keeps ties on the first (plain) value and scores the combination."""
    dev = {
        "regel": {"usable": [{"name": "deepregex/1", "positives": ["ab", "abcde"], "negatives": ["b", "xy"], "regex": "a.*"}], "total": 3},
        "tomita": {"usable": [{"name": "tomita/T1", "positives": ["", "1"], "negatives": ["0"], "regex": "1*"}], "total": 1},
    }
    monkeypatch.setattr(tune, "dev_problems", lambda limit=None: dev)

    def fake(job):
        problem, setting, *_ = job
        if problem["name"].startswith("tomita"):
            node = ra.parse("1*" if setting.hole == 50 else "1?")
        else:  # only `.` at 2 gives the right regex; the vowel class changes a wrong one
            node = ra.parse("a.*" if setting.leaves.dot == 2 else "ab" if setting.leaves.vowels else "b")
        return {"name": problem["name"], "node": node, "phase": "enumerate", "seconds": 0.0}

    monkeypatch.setattr(tune, "_search", fake)
    report = tune.tune(time_budget=0.1, binary_time_budget=0.1)
    pf = report["per_factor"]
    assert pf["dot"]["chosen"] == 2 and pf["vowels"]["chosen"] is False and pf["hole"]["chosen"] == 50
    assert pf["alnum_char"]["chosen"] == 2  # a tie: the first (plain) value
    assert pf["small_stars"]["chosen"] is False and pf["any_string"]["chosen"] is None
    c = report["chosen"]
    # the leaves come from the combined run: as good as `dot=2` on Regel, with more plain values
    assert c["regel_run"] == "combined" and c["tomita_run"] == "combined" and c["hole"] == 50
    assert c["leaves"] == {"dot": 2, "any_string": None, "alnum_char": 2, "vowels": False, "small_any": False, "small_stars": False}
    assert c["regel_equivalent"] == 1 and c["tomita_equivalent"] == 1 and c["regel_problems"] == 3
    assert c["finish_name"] == "none"  # no finishing step makes the start's `ab` right: ties go to fewer steps
    assert "chosen: hole=50" in tune.format_report(report)
    assert tune.choose(json.loads(json.dumps(report, default=str)))["chosen"] == c


def test_committed_choice_is_redone_from_its_scores():
    report = json.loads((ROOT / "docs" / "synth_tune.json").read_text())
    assert tune.choose(report)["chosen"] == report["chosen"]
    r = CliRunner().invoke(main, ["bench", "synth-tune", "--choose-from", str(ROOT / "docs" / "synth_tune.json")])
    assert r.exit_code == 0 and "chosen: hole=" in r.output, r.output


def test_choose_from_a_file_that_is_not_a_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = CliRunner().invoke(main, ["bench", "synth-tune", "--choose-from", str(bad)])
    assert r.exit_code == 2 and "not a report of neurosym bench synth-tune" in r.output


@pytest.mark.skipif(not HAVE_REGEL, reason="needs the shared data set regel (../shared/data)")
def test_tune_command_on_a_tiny_subset(tmp_path):
    out = tmp_path / "tune.json"
    r = CliRunner().invoke(main, ["bench", "synth-tune", "--limit", "1", "--time-budget", "0.2", "--binary-time-budget", "0.2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads(out.read_text())
    assert {row["run"] for row in report["runs"]} >= {"start", "hole=100", "dot=2", "vowels=False", "small_stars=False"}
    assert "Regel dev equivalent" in r.output and "chosen: hole=" in r.output
    names = {row["name"] for run in report["runs"] for rows in run["rows"].values() for row in rows}
    assert names and not names & set(TEST)
