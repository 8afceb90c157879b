"""`neurosym synth --pos/--neg -o BANK --name N`: the result compiles and satisfies the examples."""

import json
import re

from click.testing import CliRunner

import neurosym
from neurosym.cli.main import main


def test_synth_appends_a_compiling_pattern_that_fits(tmp_path):
    pos, neg = ["0", "10", "110", "0110"], ["1", "01", "011", ""]
    (tmp_path / "pos.txt").write_text("\n".join(pos) + "\n")
    (tmp_path / "neg.txt").write_text("\n".join(neg) + "\n")
    bank = tmp_path / "b.regex"
    r = CliRunner().invoke(main, ["synth", "--pos", str(tmp_path / "pos.txt"), "--neg", str(tmp_path / "neg.txt"), "--time", "10", "-o", str(bank), "--name", "END0", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output[r.output.index("{") :])
    assert res["solved"]
    assert all(re.fullmatch(res["pattern"], s) for s in pos) and not any(re.fullmatch(res["pattern"], s) for s in neg)
    auto = neurosym.load(bank).patterns["END0"]
    assert all(auto.char_dfa.accepts(s) for s in pos)
    r = CliRunner().invoke(main, ["synth", "--pos", str(tmp_path / "pos.txt"), "-o", str(bank), "--name", "END0"])
    assert r.exit_code == 2 and "END0" in r.output  # no duplicate names


def test_synth_option_errors(tmp_path):
    r = CliRunner().invoke(main, ["synth", "--pos", str(tmp_path / "missing.txt")])
    assert r.exit_code == 2 and "no such file" in r.output
    (tmp_path / "p.txt").write_text("a\n")
    r = CliRunner().invoke(main, ["synth", "--pos", str(tmp_path / "p.txt"), "-o", str(tmp_path / "b.regex")])
    assert r.exit_code == 2 and "--name" in r.output


def test_synth_select_posterior(tmp_path):
    (tmp_path / "p.txt").write_text("12.5\n33.5\n71.5\n")
    (tmp_path / "n.txt").write_text("12.4\n1.5\nabc\n")
    args = ["synth", "--pos", str(tmp_path / "p.txt"), "--neg", str(tmp_path / "n.txt"), "--time", "5", "--json"]
    r = CliRunner().invoke(main, args + ["--select", "posterior"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output[r.output.index("{") :])
    assert res["solved"] and res["pattern"] == "[0-9][0-9]\\.5"
    r = CliRunner().invoke(main, args + ["--select", "posterior", "--method", "evolve"])
    assert r.exit_code == 2 and "--select" in r.output


def test_readme_synth_example(tmp_path):
    """The README's tour: names start with a capital letter."""
    (tmp_path / "pos.txt").write_text("Alice\nBob\nZoe 2\n")
    (tmp_path / "neg.txt").write_text("alice\n9Bob\n\n bob\n")
    bank = tmp_path / "found.regex"
    r = CliRunner().invoke(main, ["synth", "--pos", str(tmp_path / "pos.txt"), "--neg", str(tmp_path / "neg.txt"), "-o", str(bank), "--name", "NAME"])
    assert r.exit_code == 0, r.output
    assert bank.read_text() == "NAME: /[A-Z].*/\n"
