"""The README's main command, `neurosym reproduce semantic-fusion` (issue 28, point 4): by
default a first run in minutes (--quick: the baseline and the fusion model, one seed),
one progress bar over every training step, and at the end the trained models'
perplexities next to the grammar's exact floor and a few samples constrained to the
grammar. --seeds 5 and --full are the multi-seed tables."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from neurosym.cli.main import main
from neurosym.compile.fsg import load_fsg
from neurosym.data import resolve_data_path
from neurosym.experiments import harness
from neurosym.experiments import semantic_fusion as recipe
from neurosym.lm.config import Config

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--train-sentences", "64", "--epochs", "1", "--threads", "1"]  # one step per model: what the command prints, not what it learns


def install_and_run() -> str:
    """The README's "## Install and run" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Install and run")
    return readme[start : readme.index("\n## ", start + 1)]


def grammar_log_prob(text: str) -> float:
    """The exact log-probability of a sentence under the shipped clause.fsg (-inf outside it)."""
    auto = load_fsg(resolve_data_path("grammars/clause.fsg"))
    words = text.split()
    if any(w not in auto.vocab for w in words):
        return -math.inf
    return float(auto.log_prob(torch.tensor([[auto.vocab.id(w) for w in words]]))[0])


def test_readme_main_command_is_the_quick_recipe_with_its_measured_time():
    section = install_and_run()
    assert "\nneurosym reproduce semantic-fusion   " in section  # the command, with no option
    assert re.search(r"\d+(\.\d+)? min", section), "the section states the measured time"
    assert "--seeds 5" in section and "--full" in section
    r = CliRunner().invoke(main, ["reproduce", "semantic-fusion", "--help"])
    shown = " ".join(r.output.split())  # click wraps long help lines
    assert r.exit_code == 0 and "--quick / --full" in shown and "default: quick" in shown
    assert "default: 1 quick, 5 full" in shown and "default: 0 quick, 200 full" in shown


def test_presets_name_known_variants():
    assert recipe.QUICK.seeds == 1 and recipe.QUICK.variants == ("baseline", "fusion") and recipe.QUICK.control_samples == 0
    assert recipe.FULL.seeds == 5 and recipe.FULL.variants == recipe.MAIN and recipe.FULL.control_samples == 200
    assert all(v in recipe.VARIANTS for v in recipe.QUICK.variants + recipe.FULL.variants)


def test_quick_run_ends_with_the_perplexity_the_floor_and_grammatical_samples(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # from an empty folder: the grammar and lexicon are shipped files
    r = CliRunner().invoke(main, ["reproduce", "semantic-fusion", *TINY])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "| baseline |" in out and "| fusion |" in out and "| exact floor | 3.6371 |" in out  # the table, PPL next to the floor
    assert "soft polarity" not in out  # no control tables: --quick leaves controllable decoding to --full
    assert "grammar-constrained samples" in out and "That was the quick run" in out and "--full" in out
    for v in ("baseline", "fusion"):
        run = tmp_path / "runs" / "semantic-fusion" / f"semantic-fusion-{v}-seed0"
        assert (run / "last.pt").is_file() and (run / "curves.png").is_file()  # the trained model, and its curves
        assert re.search(rf"^{v}, seed 0: PPL \d+\.\d{{4}} \(exact floor 3\.6371\), {re.escape(str(Path('runs/semantic-fusion') / run.name))}$",
                         out, re.M)
    samples = [line.strip().split("\t") for line in out.splitlines() if line.startswith("  ") and "\tgrammar logP " in line]
    assert len(samples) == 6  # three per model
    finished = [s for s in samples if len(s) == 3]  # a sample cut at the model's context says so in a fourth column
    assert finished, samples
    for text, printed, _ in finished:
        exact = grammar_log_prob(text)  # every finished sample is a sentence of the grammar, with the log P printed
        assert math.isfinite(exact) and printed == f"grammar logP {exact:.4f}"
    # the progress bar: one over both runs' steps (one step each), with the rate and the time left
    assert "training: 100%" in r.stderr and "2/2 [" in r.stderr and "step" in r.stderr
    assert "[1/2] baseline, seed 0" in r.stderr and "[2/2] fusion, seed 0" in r.stderr


def test_json_report_holds_the_samples_and_more_seeds_are_one_option_away(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "semantic-fusion", *TINY, "--seeds", "2", "-n", "2", "--out-dir", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["seeds"] == 2 and report["variants"] == ["baseline", "fusion"] and report["config"]["data"]["train"] == 64
    assert len(report["fusion"]["runs"]) == 2 and math.isfinite(report["welch_ppl"]["p"])  # Welch's test needs two seeds
    s = report["samples"]
    assert s["grammar"] == "grammars/clause.fsg" and set(s["runs"]) == {"baseline", "fusion"}
    for v, x in s["runs"].items():
        assert x["seed"] == 0 and x["ppl"] == report[v]["runs"][0]["ppl"] and len(x["rows"]) == 2
        for row in x["rows"]:
            if row["status"] == "eos":
                assert row["grammar_log_prob"] == pytest.approx(grammar_log_prob(row["text"]), abs=1e-4)
    assert "training:" not in r.stderr  # --json: no progress on the terminal


# ---------------------------------------------------------------------- the progress bar
class Counter:
    """A task of ``steps`` steps per epoch on one parameter (the trainer's task protocol)."""

    def __init__(self, config: Config):
        self.steps = int(config.data["steps"])

    def build_model(self, config: Config) -> torch.nn.Module:
        return torch.nn.Linear(1, 1)

    def train_batches(self, epoch: int, generator: torch.Generator):
        return [torch.ones(2, 1) for _ in range(self.steps)]

    def loss(self, model, batch):
        return model(batch).pow(2).mean(), {}


def counter_config(out_dir: Path, variant: str, seed: int) -> Config:
    return Config.from_dict({
        "run": {"name": f"{variant}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "threads": 1},
        "data": {"steps": {"short": 3, "long": 5}[variant]},
        "optim": {"lr": 0.1, "batch_size": 2, "epochs": 1, "warmup": 0.0},
        "log": {"every": 1, "checkpoint_every": 100, "progress": False},
    })


def test_the_grid_bar_counts_the_steps_of_every_run(tmp_path, capsys):
    lines: list[str] = []
    progress = harness.Progress(4, lines.append, bar=True)
    harness.train_grid(["short", "long"], 2, lambda v, s: counter_config(tmp_path, v, s), Counter, progress=progress)
    err = capsys.readouterr().err
    assert "16/16 [" in err and "long, seed 1" in err  # 3 + 5 + 3 + 5 steps, the run beside the bar
    assert progress.bar is None and len(lines) == 8  # closed after the last run; the [k/n] lines printed above it
    # a second pass reuses two finished runs (no steps) and trains the two removed ones
    for name in ("short-seed1", "long-seed1"):
        for f in (tmp_path / name).iterdir():
            f.unlink()
    again = harness.Progress(4, None, bar=True)
    harness.train_grid(["short", "long"], 2, lambda v, s: counter_config(tmp_path, v, s), Counter, progress=again, resume=True)
    err = capsys.readouterr().err
    assert "8/8 [" in err and "16/16" not in err


class Failing(Counter):
    """Breaks at its second step (after the bar is drawn)."""

    calls = 0

    def loss(self, model, batch):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the task broke")
        return super().loss(model, batch)


def test_the_bar_is_closed_when_a_run_fails(tmp_path, monkeypatch):
    progress = harness.Progress(2, None, bar=True)
    drawn = []
    monkeypatch.setattr(progress, "close", lambda: drawn.append(progress.bar is not None) or harness.Progress.close(progress))
    with pytest.raises(RuntimeError, match="the task broke"):
        harness.train_grid(["short"], 2, lambda v, s: counter_config(tmp_path, v, s), Failing, progress=progress)
    assert drawn == [True] and progress.bar is None  # the bar was up, and the failure closed it


@pytest.mark.slow
def test_readme_main_command_runs(tmp_path, monkeypatch):
    """The README's main command as a new user runs it, from an empty folder, with its
    defaults: both models at or above the floor, fusion below the baseline on seed 0 (the
    published seed-0 figures, baseline 7.9076 and fusion 5.2918, on 2 threads), and
    samples the grammar accepts."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["reproduce", "semantic-fusion", "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["seeds"] == 1 and report["variants"] == ["baseline", "fusion"] and report["all_at_or_above_floor"]
    assert report["fusion"]["ppl"] < report["baseline"]["ppl"]
    assert report["baseline"]["ppl"] == pytest.approx(7.9076, abs=0.02) and report["fusion"]["ppl"] == pytest.approx(5.2918, abs=0.02)
    rows = [row for x in report["samples"]["runs"].values() for row in x["rows"]]
    assert any(row["status"] == "eos" and math.isfinite(grammar_log_prob(row["text"])) for row in rows)
