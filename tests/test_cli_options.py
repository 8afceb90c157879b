"""One consistent command line (issue 14.6): every --help has examples and every option
help text; --json is a flag everywhere; the same names for the same things; the shared
data and devices are checked before any work."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import neurosym.data
from neurosym.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def commands(group: click.Group = main, prefix: tuple[str, ...] = ()):
    yield prefix, group
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


ALL = list(commands())


@pytest.mark.parametrize("path, cmd", ALL, ids=[" ".join(p) or "neurosym" for p, _ in ALL])
def test_every_help_has_examples_and_every_option_a_help_text(path, cmd):
    r = CliRunner().invoke(main, [*path, "--help"])
    assert r.exit_code == 0, r.output
    examples = r.output.split("Examples:\n", 1)
    assert len(examples) == 2, f"no examples in neurosym {' '.join(path)} --help"
    lines = [x.strip() for x in examples[1].splitlines() if x.strip()]
    assert lines and all(x.startswith(("neurosym", "python", "torchrun")) for x in lines), lines
    if path:  # the examples run this very command
        assert any(x.startswith("neurosym " + " ".join(path)) for x in lines), lines
    for p in cmd.params:
        if isinstance(p, click.Option) and not p.hidden:
            assert p.help, f"neurosym {' '.join(path)} {p.opts[0]} has no help text"


def test_options_mean_the_same_everywhere():
    seen: dict[str, set] = {}
    for path, cmd in ALL:
        for p in cmd.params:
            if not isinstance(p, click.Option):
                continue
            if "--json" in p.opts:
                assert p.is_flag, f"neurosym {' '.join(path)} --json takes a value"
            if "-o" in p.opts:
                assert "--output" in p.opts
            if "-n" in p.opts:
                assert "--samples" in p.opts
            for o in p.opts:
                seen.setdefault(o, set()).add(" ".join(path))
    assert seen["--samples"] == {"inspect", "sample", "generate", "eval", "reproduce idea-gating", "reproduce semantic-fusion"}
    assert "--time" not in seen or all(
        p.hidden for path, cmd in ALL for p in cmd.params if isinstance(p, click.Option) and "--time" in p.opts
    )
    assert {"synth", "bench synth"} <= seen["--time-budget"]
    for command in ("inspect", "sample", "check", "compile"):
        r = CliRunner().invoke(main, [command, "--help"])
        assert "per regex terminal of an FSG or PCFG" in " ".join(r.output.split()) and "Lexicons ignore it" in r.output


def test_samples_is_one_option_for_inspect_and_sample():
    fsg = ROOT / "grammars" / "clause.fsg"
    short = CliRunner().invoke(main, ["sample", str(fsg), "-n", "3", "--seed", "2"]).output
    long = CliRunner().invoke(main, ["sample", str(fsg), "--samples", "3", "--seed", "2"]).output
    assert short == long and len(short.strip().splitlines()) == 3
    report = json.loads(CliRunner().invoke(main, ["inspect", str(fsg), "-n", "3", "--seed", "2", "--json"]).output)
    assert report["samples"] == short.strip().splitlines()  # the same draws from the same seed


def test_synth_time_budget_and_its_deprecated_alias(tmp_path):
    pos, neg = tmp_path / "pos.txt", tmp_path / "neg.txt"
    pos.write_text("a\naa\naaa\n")
    neg.write_text("b\nab\n")
    base = ["synth", "--pos", str(pos), "--neg", str(neg), "--json"]
    new = CliRunner().invoke(main, [*base, "--time-budget", "5"])
    old = CliRunner().invoke(main, [*base, "--time", "5"])
    assert new.exit_code == old.exit_code == 0, (new.output, old.output)
    assert json.loads(new.output.splitlines()[-1])["pattern"] == json.loads(old.output.splitlines()[-1])["pattern"]
    assert "--time is deprecated; use --time-budget" in old.output and "deprecated" not in new.output
    r = CliRunner().invoke(main, [*base, "--time-budget", "0"])
    assert r.exit_code == 2 and "--time-budget" in r.output


@pytest.fixture
def no_shared_data(monkeypatch, tmp_path):
    monkeypatch.setattr(neurosym.data, "CHECKOUT_SHARED_DATA", tmp_path / "absent")
    monkeypatch.setenv("NEUROSYM_SHARED_DATA", str(tmp_path / "absent-too"))


@pytest.mark.parametrize(
    "args, expected",
    [
        (["bench", "compile"], "neurosym bench compile needs the shared data sets wikitext-2 and ud-english-ewt"),
        (["bench", "synth"], "neurosym bench synth --suites alpharegex needs the shared data set alpharegex/benchmarks"),
        (["bench", "synth", "--suites", "regel"], "neurosym bench synth --suites regel needs the shared data set regel/so"),
    ],
)
def test_benchmarks_without_the_shared_data_say_what_they_need(no_shared_data, args, expected):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {expected}") and "../shared/data" in r.output and "NEUROSYM_SHARED_DATA" in r.output


@pytest.mark.parametrize(
    "args, expected",
    [
        (["bench", "synth", "--suites", "alpharegx"], "--suites: unknown suite(s) alpharegx; expected some of alpharegex, regel"),
        (["bench", "synth", "--methods", "bean"], "--methods: unknown method(s) bean; expected some of beam, evolve, reinforce, beam-posterior, beam-enum, beam-alphaleaves"),
        (["bench", "inside", "--device", "gpu0"], '--device: expected "cpu", "cuda" or "cuda:N", got \'gpu0\''),
        (["bench", "synth", "--json", "out.json"], "unexpected extra argument (out.json)"),  # --json is a flag now; the file is -o
    ],
)
def test_bench_option_errors(args, expected):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and expected in r.output, r.output


def test_bench_inside_refuses_cuda_without_it():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = CliRunner().invoke(main, ["bench", "inside", "--device", "cuda"])
    assert r.exit_code == 2 and "--device: 'cuda' is not available here" in r.output


def test_bench_synth_json_flag_and_output_file(tmp_path):
    if neurosym.data.shared_data_dir() is None or not (neurosym.data.shared_data_dir() / "regel" / "so").is_dir():
        pytest.skip("needs the shared Regel problems (../shared/data/regel)")
    out = tmp_path / "results.json"
    args = ["bench", "synth", "--suites", "regel", "--regel-limit", "1", "--methods", "beam", "--time-budget", "0.2"]
    r = CliRunner().invoke(main, [*args, "--json", "-o", str(out)])
    assert r.exit_code == 0, r.output
    printed = json.loads(r.output[r.output.index("{"):])
    assert json.loads(out.read_text()) == printed and printed["methods"] == ["beam"] and "regel" in printed
    table = CliRunner().invoke(main, args).output
    assert "Regel (examples only;" in table
    r = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "nowhere" / "r.json")])
    assert r.exit_code == 2 and "does not exist" in r.output  # checked before the benchmark runs


def test_reproduce_out_dir_under_a_file(tmp_path):
    (tmp_path / "afile").write_text("")
    r = CliRunner().invoke(main, ["reproduce", "semantic-fusion", "--out-dir", str(tmp_path / "afile" / "runs")])
    assert r.exit_code == 2 and f"{tmp_path / 'afile'} is a file, not a folder" in r.output
