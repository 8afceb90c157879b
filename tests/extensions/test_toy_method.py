"""A synthesis method added from outside the package (issue 27.5): one call to
``register_method`` and ``neurosym synth --method toy``, ``neurosym.synth.synthesize``
and ``neurosym bench synth``'s runner all offer it; the registration is removed after."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest
from click.testing import CliRunner

from neurosym.bench import synth as bench
from neurosym.cli.main import main
from neurosym.synth import regex_ast as ra
from neurosym.synth import synthesize
from neurosym.synth.methods import method_names, register_method, unregister_method


def toy_search(
    positives: Sequence[str],
    negatives: Sequence[str] = (),
    time_budget: float = 10.0,
    seed: int = 0,
    lam: float = 0.02,
    progress: bool = False,
    leaves: Sequence[ra.Node] | None = None,
    longest_first: bool = False,
) -> tuple[ra.Node, dict]:
    """The toy method: the alternation of the positives, literally (consistent whenever
    no string is both positive and negative, which synthesize() already refuses)."""
    words = sorted(positives, key=len, reverse=True) if longest_first else list(positives)
    return ra.alt(*(ra.lit(w) for w in words)), {"phase": "toy", "words": len(words)}


@pytest.fixture
def toy():
    method = register_method("toy", toy_search, summary="the positives, alternated")
    try:
        yield method
    finally:
        unregister_method("toy")
    assert "toy" not in method_names()


def test_the_toy_declares_its_option(toy):
    assert toy.options == ("longest_first",) and "toy" in method_names()


def test_neurosym_synth_runs_the_toy(toy, tmp_path):
    pos, neg = ["cat", "dog", "horse"], ["ca", "cats", "do"]
    (tmp_path / "pos.txt").write_text("\n".join(pos) + "\n")
    (tmp_path / "neg.txt").write_text("\n".join(neg) + "\n")
    bank = tmp_path / "animals.regex"
    args = ["synth", "--pos", str(tmp_path / "pos.txt"), "--neg", str(tmp_path / "neg.txt"), "--method", "toy"]
    help_text = CliRunner().invoke(main, ["synth", "--help"]).output
    assert "[beam|evolve|reinforce|toy]" in help_text
    r = CliRunner().invoke(main, [*args, "-o", str(bank), "--name", "ANIMAL", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output[r.output.index("{") :])
    assert res["method"] == "toy" and res["solved"]
    assert all(re.fullmatch(res["pattern"], s) for s in pos) and not any(re.fullmatch(res["pattern"], s) for s in neg)
    assert bank.read_text() == f"ANIMAL: /{res['pattern']}/\n"
    r = CliRunner().invoke(main, [*args, "--select", "posterior"])
    assert r.exit_code == 2 and "--select applies to --method beam only" in r.output


def test_the_library_and_the_benchmark_run_the_toy(toy):
    res = synthesize(["ab", "abcd"], ["abc"], method="toy", longest_first=True)
    assert res.solved and res.method == "toy" and res.info == {"phase": "toy", "words": 2}
    assert "toy" in bench.bench_methods()
    problem = {"name": "no1_toy", "positives": ["0", "01"], "negatives": ["1"], "has_x": False}
    out = bench.run_alpharegex(("toy",), time_budget=1, problems=[problem])
    assert out["toy"]["solved"] == 1 and out["toy"]["rows"][0]["pattern"] in ("01?", "0(1)?", "0|01")


def test_without_the_registration_the_command_refuses_it(tmp_path):
    (tmp_path / "pos.txt").write_text("a\n")
    r = CliRunner().invoke(main, ["synth", "--pos", str(tmp_path / "pos.txt"), "--method", "toy"])
    assert r.exit_code == 2 and "'toy' is not one of 'beam', 'evolve', 'reinforce'" in r.output
