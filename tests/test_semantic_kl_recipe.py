"""The semantic-KL recipe on tiny settings: the task, the report's shape, config errors, the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
from click.testing import CliRunner

from neurosym.errors import ConfigError, NeurosymError
from neurosym.experiments import semantic_kl as recipe
from neurosym.lm.config import Config

TINY_MODEL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
TINY_DATA = {"window": 16, "min_freq": 5, "max_train_windows": 16, "max_eval_windows": 4}
TINY_OPTIM = {"epochs": 1, "batch_size": 8}


def test_report_shape_and_metrics(tmp_path):
    report = recipe.reproduce(seeds=2, out_dir=tmp_path, datasets=("ud-english-ewt",), variants=("baseline", "kl-cos-0.3-to-0.05"),
                              progress=None, model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    out = recipe.json_report(report)
    section = out["ud-english-ewt"]
    assert section["data"]["train_split"] == "train" and section["data"]["eval_split"] == "test"
    for v in ("baseline", "kl-cos-0.3-to-0.05"):
        m = section[v]
        for k in ("ppl", "ppl_std", "params", "same_pos_miss", "same_pos_miss_std", "ece", "mean_cosine", "effective_rank"):
            assert k in m, k
        assert len(m["runs"]) == 2 and m["ppl"] > 1 and 0 <= m["same_pos_miss"] <= 1
    assert section["baseline"]["params"] == section["kl-cos-0.3-to-0.05"]["params"]  # the same size
    assert set(section["welch"]["kl-cos-0.3-to-0.05"]) == {"ppl", "same_pos_miss"}
    json.dumps(out)  # serialisable
    text = recipe.format_report(report)
    assert "| baseline |" in text and "kl-cos-0.3-to-0.05: PPL" in text
    # the schedule reached the training loop: 2 steps at T = 0.3 then 0.05, logged as their mean
    rows = [json.loads(line) for line in (tmp_path / "ud-english-ewt-kl-cos-0.3-to-0.05-seed0" / "metrics.jsonl").read_text().splitlines()]
    assert [r["temperature"] for r in rows if r["kind"] == "train"] == [pytest.approx(0.175)]
    # finished runs are reused with resume, refused without it
    again = recipe.reproduce(seeds=1, out_dir=tmp_path, datasets=("ud-english-ewt",), variants=("baseline",), progress=None,
                             resume=True, model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    assert again["ud-english-ewt"]["baseline"]["runs"][0]["ppl"] == section["baseline"]["runs"][0]["ppl"]
    with pytest.raises(NeurosymError, match="--resume"):
        recipe.reproduce(seeds=1, out_dir=tmp_path, datasets=("ud-english-ewt",), variants=("baseline",), progress=None,
                         model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    assert recipe.plot_curves(report, tmp_path / "curves.png").stat().st_size > 0


def test_wikitext_task_reads_valid_and_evaluates_on_test():
    config = recipe.recipe_config("baseline", "wikitext-2", 0, model=TINY_MODEL, data={"window": 16, "min_freq": 5}, optim=TINY_OPTIM)
    t = recipe.task(config)
    assert t.vocab.tokens[1] == "<unk>"
    assert len(t.train_ids) == (t.vocab.encode_lines(recipe.read_lines(recipe.corpus_path("wikitext-2", "valid"))).numel() - 1) // 16
    assert len(t.pos_ids) > 0 and any(tag is not None for tag in t.tags)  # UD test read through the WikiText vocabulary


def test_semantic_kl_loss_of_the_task_equals_the_library_loss():
    config = recipe.recipe_config("kl-T0.1", "ud-english-ewt", 0, model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    t = recipe.task(config)
    torch.manual_seed(0)
    model = t.build_model(config).eval()  # no dropout: the two forwards below agree
    batch = t.train_batches(0, torch.Generator().manual_seed(0))[0]
    loss, logs = t.loss(model, batch)
    from neurosym.lm.semantic_kl import semantic_kl

    want = semantic_kl(model(batch["ids"]).logits, batch["targets"], model.lm_head.weight, 0.1, "cosine", lam=0.5)
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert logs["temperature"] == 0.1 and math.isfinite(logs["kl"])


def test_config_errors_name_the_key(tmp_path):
    def build(model=None, data=None):
        return recipe.task(Config.from_dict({"run": {"name": "x"}, "model": model or {}, "data": data or {}}))

    with pytest.raises(ConfigError, match=r"model.kl_lambda: expected a number in \[0, 1\]"):
        build(model={"kl_lambda": 2.0})
    with pytest.raises(ConfigError, match="model.temperature: expected a finite number > 0"):
        build(model={"temperature": 0})
    with pytest.raises(ConfigError, match="model.temperature_end: expected a final temperature"):
        build(model={"temperature_schedule": "linear"})
    with pytest.raises(ConfigError, match="model.objective: expected one of"):
        build(model={"objective": "kl"})
    with pytest.raises(ConfigError, match="unknown key 'temprature' in \\[model\\]; did you mean 'temperature'"):
        build(model={"temprature": 1.0})
    with pytest.raises(ConfigError, match="data.dataset: expected one of"):
        build(data={"dataset": "ptb"})
    with pytest.raises(ConfigError, match="data.data_dir: expected a folder"):
        build(data={"data_dir": str(tmp_path / "none")})
    with pytest.raises(ConfigError, match="data.data_dir: .*no wikitext-2 valid file"):
        build(data={"data_dir": str(tmp_path)})
    with pytest.raises(NeurosymError, match="unknown semantic-KL variant"):
        recipe.recipe_config("kl-T9", "wikitext-2", 0)


def test_cli_reproduce_semantic_kl_help_and_errors(tmp_path):
    from neurosym.cli.main import main

    runner = CliRunner()
    result = runner.invoke(main, ["reproduce", "semantic-kl", "--help"])
    assert result.exit_code == 0 and "--seeds" in result.output and "--resume" in result.output and "--json" in result.output
    result = runner.invoke(main, ["reproduce", "semantic-kl", "--data", str(tmp_path / "nope")])
    assert result.exit_code != 0 and "no such folder" in result.output
    (tmp_path / "file").write_text("x")
    result = runner.invoke(main, ["reproduce", "semantic-kl", "--out-dir", str(tmp_path / "file" / "runs")])
    assert result.exit_code != 0 and "is a file, not a folder" in result.output
