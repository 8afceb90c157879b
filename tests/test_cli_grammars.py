"""The `neurosym` command on FSGs, PCFGs and lexicons: check, inspect, sample, compile."""

import json
import math
import warnings
from pathlib import Path

import pytest
import torch
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
    assert "23 feature columns" in r.output


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
    assert "23 columns" in r.output and "terms of pos:" in r.output
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
    assert "grammars with rules (.pcfg, JSON Schemas, .lark, .gbnf) only" in r.output


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


@pytest.mark.parametrize("source, words", [(CLAUSE, "22 states"), (ARITH, "CNF with"), (SENTIMENT, "23 feature columns")])
def test_compile_and_inspect_artifacts_of_every_kind(runner, tmp_path, source, words):
    out = tmp_path / "a.safetensors"
    r = run(runner, "compile", source, "-o", out)
    assert words in r.output and out.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    r = run(runner, "inspect", out)
    assert str(out) in r.output or "bank:" in r.output


CYCLIC = "%start S\nS A 'a' 0.5\nS A 'c' 0.25\nA S 'b' 1.0\nS 0.25\n"


@pytest.mark.parametrize("text", [None, CYCLIC])
def test_inspect_of_an_fsg_artifact_shows_what_its_source_shows(runner, tmp_path, text):
    source = CLAUSE if text is None else tmp_path / "cyc.fsg"
    if text is not None:
        source.write_text(text)
    out = tmp_path / "g.safetensors"
    run(runner, "compile", source, "-o", out)
    src = json.loads(run(runner, "inspect", "--json", "--samples", 7, "--seed", 3, source).output)
    art = json.loads(run(runner, "inspect", "--json", "--samples", 7, "--seed", 3, out).output)
    assert art["grammar"] is None and art["source"] == str(source)
    for key in ("automaton", "roles", "entropy", "samples"):
        assert art[key] == src[key], key
    assert len(art["samples"]) == 7
    # the compiled automaton has a cycle exactly when the grammar as written has one
    assert bool(art["automaton"]["cyclic_components"]) == bool(src["grammar"]["cyclic_components"])
    text_src, text_art = run(runner, "inspect", source).output, run(runner, "inspect", out).output
    for line in ("compiled:", "entropy:", "per token:", "samples:"):
        assert [x for x in text_src.splitlines() if line in x] == [x for x in text_art.splitlines() if line in x]
    assert ("cycles: none (finite language)" in text_art) == (text is None)
    assert "cycles: states 0 1" in text_art or text is None
    r = run(runner, "inspect", out, "--draw", tmp_path / "x.dot", code=2)
    assert "draw its source grammar" in r.output
    assert run(runner, "sample", out, "-n", 9, "--seed", 4).output == run(runner, "sample", source, "-n", 9, "--seed", 4).output


def test_sample_of_a_pcfg_or_lexicon_artifact_says_to_sample_the_source(runner, tmp_path):
    for source in (ARITH, SENTIMENT):
        out = tmp_path / f"{source.stem}.safetensors"
        run(runner, "compile", source, "-o", out)
        r = run(runner, "sample", out, code=2)
        assert f"{out}: sample the source grammar; of compiled artifacts only FSGs sample" in r.output


@pytest.mark.parametrize("source", [CLAUSE, ARITH, SENTIMENT, ROOT / "grammars" / "dates.regex"])
def test_neurosym_load_of_an_artifact_returns_the_compiled_object(runner, tmp_path, source):
    out = tmp_path / "a.safetensors"
    run(runner, "compile", source, "-o", out)
    compiled, loaded = neurosym.load(source), neurosym.load(out)
    assert type(loaded) is type(compiled)
    assert loaded.vocab.tokens == compiled.vocab.tokens
    for name in ("delta", "final", "log_probs", "final_log_probs", "root", "binary", "emit", "table", "offsets", "weights"):
        if hasattr(compiled, name):
            assert torch.equal(getattr(loaded, name), getattr(compiled, name)), name
    with pytest.raises(neurosym.NeurosymError, match="keeps its own vocabulary"):
        neurosym.load(out, vocab=compiled.vocab)


def test_normalize_with_huge_weights_check_inspect_and_sample_agree_without_warnings(runner, tmp_path):
    """Issue 14.3: `check` said ok next to a raw RuntimeWarning from `inspect`/`sample`.
    Weights above 1e300 are a positioned error in every command; weights up to it (and
    tiny ones beside them) normalise without any warning."""
    big = tmp_path / "big.fsg"
    big.write_text("%start S\n%normalize\nS A 'a' 1e308\nS A 'b' 1e308\nA 1.0\n")
    for command in ("check", "inspect", "sample"):
        r = run(runner, command, big, code=2)
        assert f"{big}:3:9: weight 1e308 is out of range" in r.output
    ok = tmp_path / "ok.fsg"
    ok.write_text("%start S\n%normalize\nS A 'a' 1e300\nS A 'b' 1e300\nS A 'd' 1e-300\nA B 'c' 1e300\nA 1e-300\nB 1e300\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "ok (" in run(runner, "check", ok).output
        data = json.loads(run(runner, "inspect", "--json", ok).output)
        sampled = run(runner, "sample", "-n", 20, ok).output.split("\n")
    assert data["entropy"]["per_sentence"] == pytest.approx(math.log(2))  # a or b, then c: two equal sentences
    assert set(s for s in sampled if s) == {"a c", "b c"}


def test_files_lists_what_ships_and_every_name_resolves_from_any_folder(tmp_path, monkeypatch):
    """`neurosym files` (issue 32): the shipped grammars, lexicons and configs, each name
    usable from a folder that has none of them."""
    import json as _json

    from click.testing import CliRunner

    from neurosym.cli.main import main as cli_main

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli_main, ["files", "--json"])
    assert result.exit_code == 0, result.output
    rows = _json.loads(result.output)
    names = {r["file"]: r["kind"] for r in rows}
    assert names["grammars/clause.fsg"] == "fsg" and names["lexicons/sentiment.lex"] == "lexicon"
    assert names["configs/semantic_fusion.toml"] == "config"
    assert not any("__init__" in n for n in names)
    for name, kind in names.items():
        if kind in ("fsg", "pcfg", "regex"):
            checked = CliRunner().invoke(cli_main, ["check", name])
            assert checked.exit_code == 0, (name, checked.output)
