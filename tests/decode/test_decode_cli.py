"""`neurosym generate`: a tiny run trained by `neurosym train`, sampled under an FSG (exact
grammar log-probabilities), a bank pattern, a word list; positioned prompt errors."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
from click.testing import CliRunner

from neurosym.cli.main import main
from neurosym.compile.fsg import load_fsg
from neurosym.data import shipped_file
from tiny_runs import tiny_fusion_config



@pytest.fixture(scope="module", params=["fusion", pytest.param("baseline", marks=pytest.mark.slow)])
def run_dir(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    cfg = folder / "tiny.toml"
    cfg.write_text(tiny_fusion_config(folder, kind=request.param))
    result = CliRunner().invoke(main, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    return folder / "tiny"


def generate(*args: str):
    return CliRunner().invoke(main, ["generate", *args])


def test_fsg_samples_with_their_exact_grammar_log_probability(run_dir):
    result = generate(str(run_dir), "--grammar", "grammars/clause.fsg", "-n", "4", "--seed", "3", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    wa = load_fsg(shipped_file("grammars/clause.fsg"))
    assert len(rows) == 4
    for r in rows:
        assert r["status"] == "eos" and r["tokens"] == wa.vocab.encode(r["text"])
        assert math.isclose(r["grammar_log_prob"], float(wa.log_prob(torch.tensor([r["tokens"]]))[0]), rel_tol=1e-12)
        assert r["model_log_prob"] < 0
    again = json.loads(generate(str(run_dir / "last.pt"), "--grammar", "grammars/clause.fsg", "-n", "4", "--seed", "3", "--json").output)
    assert again == rows  # a checkpoint file works as well as its folder; the seed fixes the samples
    text = generate(str(run_dir), "--grammar", "grammars/clause.fsg", "-n", "2", "--prompt", "Bob cooks", "--top-p", "0.9")
    lines = text.output.strip().splitlines()
    assert text.exit_code == 0 and len(lines) == 2
    assert all(re.fullmatch(r"Bob cooks the .*\tgrammar logP -\d+\.\d{4}\tmodel logP -\d+\.\d{4}", line) for line in lines), lines


def test_patterns_and_word_lists_have_no_grammar_probability(run_dir, tmp_path):
    result = generate(str(run_dir), "--grammar", "grammars/email.regex:LABEL", "-n", "3", "--json", "--max-len", "6")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert all(r["grammar_log_prob"] is None and re.fullmatch(r"[A-Za-z]+", r["text"].replace(" ", "")) for r in rows)
    assert all(len(r["tokens"]) <= 5 for r in rows)  # --max-len counts the end too
    words = tmp_path / "words.txt"
    words.write_text("good\nbad\n")
    out = generate(str(run_dir), "--grammar", str(words), "-n", "5")
    assert out.exit_code == 0 and {line.split("\t")[0] for line in out.output.splitlines()} <= {"good", "bad"}
    assert all("grammar logP n/a" in line for line in out.output.splitlines())


def test_errors_are_one_line_and_positioned(run_dir):
    out = generate(str(run_dir), "--grammar", "grammars/clause.fsg", "--prompt", "Bob the")
    assert out.exit_code == 2
    assert out.output.startswith("error: prompt 0, position 1: token 'the' (") and "allowed there: 'finishes'" in out.output
    missing = generate(str(run_dir), "--grammar", "grammars/dates.regex:NOPE")
    assert missing.exit_code == 2 and "no pattern named NOPE; the bank has YEAR" in missing.output
    nothing = generate(str(run_dir / "nope"), "--grammar", "grammars/clause.fsg")
    assert nothing.exit_code == 2 and "no such checkpoint" in nothing.output
    lex = generate(str(run_dir), "--grammar", "lexicons/sentiment.lex")
    assert lex.exit_code == 2 and "is not a grammar to decode with; expected a .regex bank" in lex.output


TINY_PCFG = """
S -> NP VP [1.0]
NP -> 'Alice' [0.5] | 'Bob' [0.5]
VP -> 'finishes' OBJ [1.0]
OBJ -> 'the' N [1.0]
N -> 'task' [0.5] | 'paper' [0.5]
"""


def test_pcfg_samples_with_their_exact_grammar_log_probability(run_dir, tmp_path):
    grammar = tmp_path / "tiny.pcfg"
    grammar.write_text(TINY_PCFG)
    result = generate(str(run_dir), "--grammar", str(grammar), "-n", "6", "--seed", "2", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == 6
    for r in rows:
        assert r["status"] == "eos"
        assert re.fullmatch(r"(Alice|Bob) finishes the (task|paper)", r["text"]), r["text"]
        assert r["grammar_log_prob"] == pytest.approx(math.log(0.25), rel=1e-6)  # the rule tensors are float32


def test_a_folder_that_is_not_a_run_is_named(tmp_path):
    """Issue 44, point 8: eval and generate on a folder without a checkpoint name the folder."""
    for command in (["generate", str(tmp_path)], ["eval", str(tmp_path)]):
        r = CliRunner().invoke(main, command)
        assert r.exit_code == 2 and f"{tmp_path}: not a run folder" in r.output and r.output.count("\n") == 1, r.output
