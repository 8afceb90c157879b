"""The recipe harness (neurosym.experiments.harness) with a toy recipe: a line fit whose
variants differ in the learning rate."""

from __future__ import annotations

import json
import math
import statistics

import pytest
import torch
from scipy import stats
from torch import nn

from neurosym.errors import NeurosymError
from neurosym.experiments import harness
from neurosym.lm.config import Config

LR = {"slow": 0.01, "fast": 0.1}


class LineTask:
    """Fit y = 3x - 1 with one linear layer (the trainer's task protocol)."""

    def __init__(self, config: Config):
        self.batch_size = config.optim.batch_size
        self.x = torch.linspace(-1, 1, 32).unsqueeze(1)
        self.y = 3 * self.x - 1

    def build_model(self, config: Config) -> nn.Module:
        return nn.Linear(1, 1)

    def train_batches(self, epoch: int, generator: torch.Generator):
        order = torch.randperm(len(self.x), generator=generator)
        return [(self.x[order[i : i + self.batch_size]], self.y[order[i : i + self.batch_size]]) for i in range(0, len(order), self.batch_size)]

    def loss(self, model, batch):
        x, y = batch
        loss = ((model(x) - y) ** 2).mean()
        return loss, {"mse": float(loss.detach())}

    def evaluate(self, model) -> dict[str, float]:
        return {"mse": float(((model(self.x) - self.y) ** 2).mean())}


def toy_config(out_dir, variant: str, seed: int) -> Config:
    return Config.from_dict({
        "run": {"name": f"line-{variant}-seed{seed}", "out_dir": str(out_dir), "seed": seed, "threads": 1},
        "optim": {"lr": LR[variant], "batch_size": 8, "epochs": 2, "warmup": 0.0},
        "log": {"every": 2, "checkpoint_every": 4, "progress": False},
    })


def grid(out_dir, resume=False, lines=None, measure=None):
    progress = harness.Progress(2 * len(LR), lines.append) if lines is not None else None
    return harness.train_grid(list(LR), 2, lambda v, seed: toy_config(out_dir, v, seed), LineTask, resume=resume,
                              progress=progress, measure=measure)


def test_grid_trains_every_variant_and_seed_and_says_how_long_is_left(tmp_path):
    lines: list[str] = []
    runs = grid(tmp_path, lines=lines, measure=lambda run: {"weight": float(run.model.weight.detach())})
    assert list(runs) == ["slow", "fast"] and [r.seed for r in runs["fast"]] == [0, 1]
    for v, rs in runs.items():
        for r in rs:
            assert set(r.figures) == {"mse", "seed", "seconds", "run_dir", "train_loss", "weight"}
            assert r.figures["run_dir"] == str(tmp_path / f"line-{v}-seed{r.seed}") and r.how == "trained" and r.params == 2
            assert r.result.steps == 8  # 2 epochs of 4 batches
    # the fast learning rate gets closer to the line, at every seed
    assert all(f.figures["mse"] < s.figures["mse"] for f, s in zip(runs["fast"], runs["slow"]))
    starts = [line for line in lines if line.startswith("[")]
    assert starts == ["[1/4] slow, seed 0", "[2/4] fast, seed 0", "[3/4] slow, seed 1", "[4/4] fast, seed 1"]
    ends = [line for line in lines if not line.startswith("[")]
    assert len(ends) == 4 and all(line.strip().startswith("trained:") for line in ends)
    assert all("min left" in line for line in ends[:3]) and "min left" not in ends[3]


def test_resume_reuses_finished_runs_and_a_rerun_without_it_is_refused(tmp_path):
    first = grid(tmp_path)
    with pytest.raises(NeurosymError, match="--resume"):
        grid(tmp_path)
    lines: list[str] = []
    again = grid(tmp_path, resume=True, lines=lines)
    for v in LR:
        for a, b in zip(first[v], again[v]):
            assert b.how == "finished earlier, reused"
            assert b.figures["mse"] == a.figures["mse"] and b.figures["train_loss"] == a.figures["train_loss"]
    assert "[1/4] slow, seed 0 (resuming)" in lines


class BrokenTask(LineTask):
    """A task whose model cannot be built: the worker's error must reach the caller."""

    def build_model(self, config: Config) -> nn.Module:
        raise NeurosymError("no model for this run")


def test_jobs_train_the_grid_in_worker_processes_with_the_same_figures(tmp_path):
    serial = grid(tmp_path / "serial")
    lines: list[str] = []
    progress = harness.Progress(2 * len(LR), lines.append)
    parallel = harness.train_grid(list(LR), 2, lambda v, seed: toy_config(tmp_path / "jobs", v, seed), LineTask, progress=progress, jobs=2)
    for v in LR:
        for a, b in zip(serial[v], parallel[v]):
            assert b.how == "finished earlier, reused"  # trained by a worker, then measured here
            assert b.figures["mse"] == a.figures["mse"] and b.figures["train_loss"] == a.figures["train_loss"]
    assert lines[0] == "training 4 runs, 2 at a time in worker processes"
    assert sorted(line.split("]")[0] for line in lines if line.startswith("  [")) == [f"  [{k}/4" for k in range(1, 5)]
    with pytest.raises(NeurosymError, match="--resume"):  # checked before any worker starts
        harness.train_grid(list(LR), 2, lambda v, seed: toy_config(tmp_path / "jobs", v, seed), LineTask, jobs=2)
    with pytest.raises(NeurosymError, match="no model for this run"):
        harness.train_grid(["slow"], 2, lambda v, seed: toy_config(tmp_path / "broken", v, seed), BrokenTask, jobs=2)
    with pytest.raises(NeurosymError, match="cannot be sent to a worker process"):
        harness.train_grid(["slow"], 2, lambda v, seed: toy_config(tmp_path / "local", v, seed), lambda c: LineTask(c), jobs=2)


def test_welch_is_scipys_unequal_variance_test():
    a, b = [1.0, 1.2, 0.9, 1.1], [1.5, 1.7, 1.4]
    expected = stats.ttest_ind(a, b, equal_var=False)
    w = harness.welch(a, b)
    assert w["t"] == pytest.approx(expected.statistic) and w["p"] == pytest.approx(expected.pvalue)
    assert all(math.isnan(x) for x in harness.welch([1.0], b).values())


def test_summarise_gives_mean_and_spread_and_can_drop_missing_values():
    rows = [{"ppl": 2.0, "rate": 0.1}, {"ppl": 3.0, "rate": math.nan}, {"ppl": 4.0, "rate": 0.3}]
    s = harness.summarise(rows, ("ppl", "rate", "absent"))
    assert s["ppl"] == 3.0 and s["ppl_std"] == statistics.stdev([2.0, 3.0, 4.0])
    assert math.isnan(s["rate"]) and math.isnan(s["rate_std"])
    assert "absent" not in s and "absent_std" not in s
    f = harness.summarise(rows, ("rate",), finite_only=True)
    assert f == {"rate": pytest.approx(0.2), "rate_std": pytest.approx(statistics.stdev([0.1, 0.3]))}
    assert harness.summarise(rows[:1], ("ppl",)) == {"ppl": 2.0, "ppl_std": 0.0}


def test_tables_and_the_json_report(tmp_path):
    assert harness.markdown_table(["model", "PPL"], [["a", "1.0"], ["b", "2.0"]]) == [
        "| model | PPL |", "| --- | --- |", "| a | 1.0 |", "| b | 2.0 |"]
    assert harness.mean_std({"ppl": 2.25, "ppl_std": 0.5}, "ppl", ".2f") == "2.25 ± 0.50"
    assert harness.mean_std({}, "ppl") == "—"
    path = harness.save_json({"seeds": 2, "where": tmp_path, "nan": math.nan}, tmp_path / "out")
    assert path == tmp_path / "out" / "report.json"
    assert json.loads(path.read_text(encoding="utf-8"))["where"] == str(tmp_path)


def test_curves_are_plotted_from_the_runs_metrics(tmp_path):
    runs = grid(tmp_path)
    dirs = [r.figures["run_dir"] for r in runs["fast"]]
    steps, means = harness.mean_curve(dirs, "train", "mse")
    assert len(steps) >= 2 and steps == sorted(steps)
    assert all(math.isfinite(m) for m in means)
    panels = {"line": {v: [r.figures["run_dir"] for r in rs] for v, rs in runs.items()}}
    out = harness.plot_curves(panels, tmp_path / "curves.png", train_key="mse", eval_key="mse")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_verdict_words_follow_the_test_not_the_sign_of_the_difference():
    # lower is better (PPL): a lower mean is "better" only when p < 0.05
    assert harness.ALPHA == 0.05
    assert harness.verdict(-1.6, 0.007) == "better"
    assert harness.verdict(-1.6, 0.082) == harness.NO_DIFFERENCE == "no difference detected"
    assert harness.verdict(+0.5, 0.01) == "worse"
    assert harness.verdict(+0.5, 0.01, lower_is_better=False) == "better"
    assert harness.verdict(-0.5, 0.0499999) == "better" and harness.verdict(-0.5, 0.05) == harness.NO_DIFFERENCE
    assert harness.verdict(-3.0, math.nan) == harness.NO_DIFFERENCE  # one seed: no test, no verdict
    assert harness.verdict(0.0, 1e-9) == harness.NO_DIFFERENCE
    # the sentence states the threshold beside the p-value
    assert harness.verdict_sentence(-1.6, 0.082) == "no difference detected (p = 0.082, not below 0.05)"
    assert harness.verdict_sentence(-1.76, 0.007) == "better (p = 0.007 < 0.05)"
    assert harness.verdict_sentence(-1.0, math.nan) == "no difference detected (no t-test with one seed)"


def test_verdict_on_the_published_three_seed_fusion_figures():
    """docs/semantic_fusion.md's 3-seed PPLs (today's lexicon): fusion's lower mean is not a
    detected difference at 0.05 (the report once said "beats" here)."""
    fusion, baseline = [5.2918, 5.4595, 5.3422], [7.9076, 6.8204, 6.2055]
    w = harness.welch(fusion, baseline)
    assert w["p"] == pytest.approx(0.082, abs=0.001)
    assert harness.verdict(statistics.fmean(fusion) - statistics.fmean(baseline), w["p"]) == "no difference detected"
