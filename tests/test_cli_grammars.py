"""The `neurosym` command on FSGs, PCFGs and lexicons: check, inspect, sample, compile."""

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

import neurosym
from neurosym.cli.main import main
from references import rule_tensors_log_prob

ROOT = Path(__file__).resolve().parents[1]
CLAUSE = ROOT / "grammars" / "clause.fsg"
ARITH = ROOT / "grammars" / "arith.pcfg"
AGREEMENT = ROOT / "grammars" / "agreement.pcfg"
SENTIMENT = ROOT / "lexicons" / "sentiment.lex"


@pytest.fixture
def runner():
    return CliRunner()


def run(runner, *args, code=0):
    r = runner.invoke(main, [str(a) for a in args])
    assert r.exit_code == code, r.output
    return r


def test_check_every_recipe_file(runner):
    r = run(runner, "check", "--json", CLAUSE, ARITH, AGREEMENT, SENTIMENT)
    kinds = [x["kind"] for x in json.loads(r.output)]
    assert kinds == ["fsg", "pcfg", "pcfg", "lexicon"]
    r = run(runner, "check", CLAUSE, SENTIMENT)
    assert "clause.fsg: ok (" in r.output and "perplexity floor" in r.output
    assert "22 feature columns" in r.output


def test_inspect_fsg_prints_the_perplexity_floor(runner):
    w = neurosym.load(CLAUSE)
    floor = w.entropy().ppl_floor
    r = run(runner, "inspect", CLAUSE)
    assert f"perplexity floor {floor:.6g}" in r.output
    assert "cycles: none" in r.output
    data = json.loads(run(runner, "inspect", "--json", CLAUSE).output)
    assert data["entropy"]["ppl_floor"] == pytest.approx(floor)
    assert math.exp(data["entropy"]["per_token"]) == pytest.approx(floor)
    assert len(data["samples"]) == 5 and data["roles"] == ["head", "object", "subject"]


def test_inspect_fsg_draws_the_grammar(runner, tmp_path):
    run(runner, "inspect", CLAUSE, "--draw", tmp_path / "g.dot")
    dot = (tmp_path / "g.dot").read_text()
    assert '"S" -> "F1"' in dot and "@SUBJ_F 0.6" in dot
    run(runner, "inspect", CLAUSE, "--draw", tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"


def test_inspect_pcfg_shows_rule_counts_and_consistency(runner):
    r = run(runner, "inspect", ARITH)
    assert "rules:" in r.output and "spectral radius" in r.output and "CNF:" in r.output
    data = json.loads(run(runner, "inspect", "--json", AGREEMENT).output)
    assert data["consistency_radius"] < 1 and data["rules"]["total"] > 0
    assert all(t.startswith("(S ") for t in data["samples"])


def test_inspect_lexicon_shows_features_and_term_tables(runner):
    r = run(runner, "inspect", SENTIMENT, "--word", "good", "--word", "awful")
    assert "22 columns" in r.output and "terms of pos:" in r.output
    data = json.loads(run(runner, "inspect", "--json", SENTIMENT, "--word", "good").output)
    row = data["term_tables"]["pos"]["rows"][0]
    # power kernel 0.9 ** (|x - c| / 0.35) at polarity 0.6, centres 0.2, 0.6, 1.0
    assert row["memberships"] == pytest.approx([0.9 ** (0.4 / 0.35), 1.0, 0.9 ** (0.4 / 0.35)], abs=1e-6)
    r = run(runner, "inspect", SENTIMENT, "--word", "zebra", code=2)
    assert "zebra" in r.output


def test_sample_fsg_is_reproducible_and_in_the_language(runner):
    a = run(runner, "sample", CLAUSE, "-n", 20, "--seed", 4).output.splitlines()
    b = run(runner, "sample", CLAUSE, "-n", 20, "--seed", 4).output.splitlines()
    assert a == b and len(a) == 20
    w = neurosym.load(CLAUSE)
    for line in a:
        assert w.accepts([w.vocab.id(t) for t in line.split()]), line


def test_sample_pcfg_sentences_and_trees(runner):
    trees = json.loads(run(runner, "sample", ARITH, "-n", 5, "--trees", "--json").output)
    sents = json.loads(run(runner, "sample", ARITH, "-n", 5, "--json").output)
    assert len(trees) == len(sents) == 5 and all(t.startswith("(") for t in trees)
    rt = neurosym.load(ARITH)
    for s in sents:
        ids = [rt.vocab.id(t) for t in s.split()]
        assert rule_tensors_log_prob(rt, ids) > -math.inf, s


def test_sample_regex_and_lexicon(runner, tmp_path):
    bank = tmp_path / "b.regex"
    bank.write_text("YEAR: /(19|20)[0-9]{2}/\n")
    years = run(runner, "sample", bank, "-n", 3).output.split()
    assert len(years) == 3 and all(len(y) == 4 and y[:2] in ("19", "20") for y in years)
    r = run(runner, "sample", SENTIMENT, code=2)
    assert "does not generate sentences" in r.output
    r = run(runner, "sample", CLAUSE, "--trees", code=2)
    assert "PCFGs only" in r.output


def test_errors_in_new_formats_are_one_line_with_position(runner, tmp_path):
    bad = tmp_path / "bad.fsg"
    bad.write_text("0 1 a 0.7\n1 1.0\n")
    r = run(runner, "check", bad, code=2)
    assert f"{bad}:1:1:" in r.output and "sum to 0.7" in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.pcfg"
    bad.write_text("S -> 'a' [0.5]\n")
    r = run(runner, "inspect", bad, code=2)
    assert f"{bad}:1:" in r.output
    bad = tmp_path / "bad.lex"
    bad.write_text("%feature polarity range=-1..1\ngood polarity=3\n")
    r = run(runner, "sample", CLAUSE, "-n", 1)  # unaffected
    r = run(runner, "check", bad, code=2)
    assert f"{bad}:2:" in r.output and "range" in r.output


@pytest.mark.parametrize("source, words", [(CLAUSE, "22 states"), (ARITH, "CNF with"), (SENTIMENT, "22 feature columns")])
def test_compile_and_inspect_artifacts_of_every_kind(runner, tmp_path, source, words):
    out = tmp_path / "a.safetensors"
    r = run(runner, "compile", source, "-o", out)
    assert words in r.output and out.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    r = run(runner, "inspect", out)
    assert str(out) in r.output or "bank:" in r.output
