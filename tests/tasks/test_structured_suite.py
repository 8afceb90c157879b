"""The structured suite (issue 20): the Tomita cold start, the priors' settings, compute
records, and ``neurosym reproduce structured-suite`` on a tiny configuration."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from click.testing import CliRunner

from neurosym.cli.main import main
from neurosym.experiments import structured_suite as suite
from neurosym.tasks import Agreement, Tomita, accuracy, get_task

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = replace(suite.QUICK, n_train=200, n_test=100, steps=5, shares=(1.0,), share_tasks=())


@pytest.mark.parametrize("index", range(1, 8))
def test_cold_start_is_exact_on_every_tomita_test_set(index):
    task = Tomita(index)
    data = task.build(20, 200, seed=0)
    for setting in ("regex-hard", "regex-soft"):
        model = suite.build_model(task, data, setting, 32, seed=0)
        assert accuracy(suite.predict(model, data.test), data.test.labels) == 1.0
        assert int(data.test.lengths.max()) == 30


def test_regex_settings_freeze_and_remove_the_prior():
    task = Tomita(3)
    data = task.build(50, 50, seed=0)
    hard = suite.build_model(task, data, "regex-hard", 16, seed=0)
    assert not any(p.requires_grad for p in hard.encoder.layer.parameters())
    assert hard.head.weight.requires_grad
    soft = suite.build_model(task, data, "regex-soft", 16, seed=0)
    assert all(p.requires_grad for p in soft.encoder.layer.parameters())
    removed = suite.build_model(task, data, "regex-removed", 16, seed=0)
    prior = removed.encoder.layer.prior_log_weights()
    real = prior > float("-inf")
    assert not torch.allclose(removed.encoder.layer.log_weights[real], soft.encoder.layer.log_weights[real])
    others = suite.build_model(task, data, "regex-others", 16, seed=0)
    assert others.encoder.layer.num_automata == 6 and not any(p.requires_grad for p in others.encoder.layer.parameters())
    assert suite.prior_of(get_task("dyck2"), "regex-hard") is not None
    assert suite.prior_of(get_task("arithmetic"), "pcfg-hard") is None


def test_soft_prior_stays_exact_after_a_little_training():
    task = Tomita(5)
    data = task.build(200, 150, seed=0)
    rec = suite.run_one(task, data, "regex-soft", 0, replace(TINY, steps=10))
    assert rec["cold_start"] == 1.0 and rec["accuracy"] >= 0.99
    assert rec["params"] > rec["trainable"] - 1 and rec["flops_per_token"] > 0
    assert set(rec["by_length"]) and all(0 <= v <= 1 for v in rec["by_length"].values())


@pytest.mark.slow
@pytest.mark.parametrize("index", range(1, 8))
def test_soft_prior_stays_above_99_after_the_quick_budget(index):
    task = Tomita(index)
    data = task.build(suite.QUICK.n_train, suite.QUICK.n_test, seed=0)
    rec = suite.run_one(task, data, "regex-soft", 0, suite.QUICK)
    assert rec["cold_start"] == 1.0 and rec["accuracy"] >= 0.99


def test_random_rules_are_normalised():
    task = Agreement()
    data = task.build(20, 20, seed=0)
    model = suite.build_model(task, data, "pcfg-removed", 8, seed=1)
    rules = model.encoder.rules
    total = rules.root.exp().sum() + rules.root_term.exp().sum() + rules.empty.exp()
    assert torch.isclose(total, torch.tensor(1.0), atol=1e-5)
    assert torch.allclose(rules.emit.exp().sum(-1), torch.ones(rules.T), atol=1e-5)


def test_soft_pcfg_starts_as_the_hard_one_and_trains_the_grammar():
    task = get_task("arithmetic")
    data = task.build(40, 20, seed=0)
    hard = suite.build_model(task, data, "pcfg-hard", 8, seed=0)
    soft = suite.build_model(task, data, "pcfg-soft", 8, seed=0)
    batch = data.train.subset(range(16))
    with torch.no_grad():
        assert torch.allclose(hard.encoder.sentence_features(batch.ids, batch.lengths), soft.encoder.sentence_features(batch.ids, batch.lengths), atol=1e-5)
    soft(batch.ids, batch.lengths).sum().backward()
    grad = soft.encoder.binary_logits.grad
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    rules = soft.encoder.current_rules()
    support = soft.encoder.binary_support
    assert torch.allclose(rules.binary.flatten(1).logsumexp(-1), torch.zeros(rules.N), atol=1e-5)
    assert (rules.binary[~support] == float("-inf")).all()


def test_prefix_pcfg_features_are_the_grammars_next_token_odds():
    task = Agreement()
    data = task.build(20, 10, seed=0)
    model = suite.build_model(task, data, "pcfg-prefix-hard", 8, seed=0)
    vocab = data.vocab
    ids = torch.tensor([[vocab.id("the"), vocab.id("keys"), vocab.id("to"), vocab.id("the"), vocab.id("cabinet")]])
    captured = {}
    model.encoder.proj.register_forward_hook(lambda m, args, out: captured.update(x=args[0]))
    model(ids, torch.tensor([5]))
    feats = captured["x"][0]
    assert feats[vocab.id("are")] > -5 and feats[vocab.id("is")] <= model.encoder.floor  # the plural head noun decides
    assert feats[-1] == 1.0  # a possible prefix


def test_cli_tiny_suite_resumes_and_reports(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "QUICK", TINY)
    out = tmp_path / "suite"
    args = ["reproduce", "structured-suite", "--tasks", "tomita2,agreement,pos", "--encoders", "mean,regex-hard,regex-soft",
            "--out-dir", str(out), "--json"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["cold_start"] == {"tomita2": 1.0}
    assert set(report["tasks"]) == {"tomita2", "agreement", "pos"}
    assert set(report["tasks"]["tomita2"]) == {"mean", "regex-hard", "regex-soft"}
    assert "accuracy" in report["tasks"]["pos"]["mean"]
    assert "scan" in report["skipped"] and report["not_applicable"]["agreement"]["regex-hard"]
    assert {p.name for p in out.iterdir()} >= {"report.md", "results.json", "heatmap.png", "length.png", "results"}
    assert "| tomita2 |" in (out / "report.md").read_text()
    files = sorted((out / "results").rglob("*.json"))
    assert len(files) == 5  # tomita2 x 3, agreement x 1, pos x 1
    stamps = [f.stat().st_mtime_ns for f in files]
    again = CliRunner().invoke(main, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    assert [f.stat().st_mtime_ns for f in files] == stamps  # reused, not retrained
    assert json.loads(again.stdout)["tasks"] == report["tasks"]


def test_cli_bad_names_are_clear_errors(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "structured-suite", "--tasks", "nope", "--out-dir", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown task 'nope'" in r.output
    r = CliRunner().invoke(main, ["reproduce", "structured-suite", "--tasks", "scan", "--out-dir", str(tmp_path / "x")])
    assert r.exit_code == 2 and "decoder head" in r.output
    r = CliRunner().invoke(main, ["reproduce", "structured-suite", "--tasks", "tomita1", "--encoders", "gru", "--out-dir", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown encoder setting 'gru'" in r.output
    (tmp_path / "file").write_text("")
    r = CliRunner().invoke(main, ["reproduce", "structured-suite", "--out-dir", str(tmp_path / "file" / "x")])
    assert r.exit_code == 2 and "is a file" in r.output


def test_missing_data_is_reported_as_skipped_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "QUICK", TINY)
    empty = tmp_path / "data"
    empty.mkdir()
    r = CliRunner().invoke(main, ["reproduce", "structured-suite", "--tasks", "tomita1,sentiment,pos,nli", "--encoders", "mean",
                                  "--data", str(empty), "--out-dir", str(tmp_path / "out"), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert set(report["tasks"]) == {"tomita1"}
    assert "poem-sentiment" in report["skipped"]["sentiment"] and "snli-esnli" in report["skipped"]["nli"]
    assert "ud-english-ewt" in report["skipped"]["pos"]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "* sentiment: poem-sentiment" in text and "* pos:" in text
