"""The semantic-KL recipe on tiny settings: lm-task configs, WikiText-2's two protocols, the
report's shape, config errors, the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
from click.testing import CliRunner

from neurosym.data import shared_data_dir
from neurosym.data.text import WordVocab, corpus_path, lm_windows, majority_upos, read_lines, read_tagged
from neurosym.errors import ConfigError, NeurosymError
from neurosym.experiments import semantic_kl as recipe
from neurosym.lm.config import Config
from neurosym.lm.metrics import same_pos_miss_rate
from neurosym.lm.task import LMTask

TINY_MODEL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
TINY_DATA = {"window": 16, "min_freq": 5, "max_train_windows": 16, "max_eval_windows": 4}
TINY_OPTIM = {"epochs": 1, "batch_size": 8}


def fake_wikitext(root, with_train: bool):
    """A tiny WikiText-2 folder: train.txt (optional), valid.txt, test.txt."""
    folder = root / "wikitext-2"
    folder.mkdir(parents=True)
    words = [f"w{i}" for i in range(12)]
    for split, n in (("train", 120), ("valid", 40), ("test", 40)):
        if split == "train" and not with_train:
            continue
        rng = torch.Generator().manual_seed(len(split))
        lines = ["", " = Heading = ", ""] + [" ".join(words[int(j)] for j in torch.randint(12, (9,), generator=rng)) + " <unk> ."
                                            for _ in range(n)]
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


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
    run = tmp_path / "ud-english-ewt-kl-cos-0.3-to-0.05-seed0"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["temperature"] for r in rows if r["kind"] == "train"] == [pytest.approx(0.175)]
    # a recipe run is an lm-task run: neurosym eval gives the recipe's test figures back
    from neurosym.lm.task import evaluate_run, is_lm_run

    assert is_lm_run(run)
    again = evaluate_run(run, "test")
    first = section["kl-cos-0.3-to-0.05"]["runs"][0]
    for k in ("ppl", "top1", "ece", "same_pos_miss", "mean_cosine"):
        assert again[k] == pytest.approx(first[k], rel=1e-9), k
    # finished runs are reused with resume, refused without it
    again = recipe.reproduce(seeds=1, out_dir=tmp_path, datasets=("ud-english-ewt",), variants=("baseline",), progress=None,
                             resume=True, model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    assert again["ud-english-ewt"]["baseline"]["runs"][0]["ppl"] == section["baseline"]["runs"][0]["ppl"]
    with pytest.raises(NeurosymError, match="--resume"):
        recipe.reproduce(seeds=1, out_dir=tmp_path, datasets=("ud-english-ewt",), variants=("baseline",), progress=None,
                         model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    assert recipe.plot_curves(report, tmp_path / "curves.png").stat().st_size > 0
    # reliability diagrams: each seed's test bins, pooled per variant, their ECE the reported one
    from neurosym.lm.metrics import ece_of_bins

    for v in ("baseline", "kl-cos-0.3-to-0.05"):
        runs = section[v]["runs"]
        for r in runs:
            assert ece_of_bins(r["reliability"]) == pytest.approx(r["ece"], abs=1e-12) and sum(r["reliability"]["count"]) == r["tokens"]
        assert section[v]["reliability"]["count"] == [a + b for a, b in zip(*(r["reliability"]["count"] for r in runs))]
    assert recipe.plot_reliability(report, tmp_path / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(NeurosymError, match="no reliability bins"):
        recipe.plot_reliability({**report, "ud-english-ewt": {**report["ud-english-ewt"], "baseline": {"runs": []}, "kl-cos-0.3-to-0.05": {}}},
                                tmp_path / "none.png")


def test_ud_data_and_same_pos_equal_the_recipe_reading():
    """The lm task's windows (bos = false, tagged files) and its same-POS miss rate equal a
    direct reading with neurosym.data.text and same_pos_miss_rate (the recipe's old path)."""
    config = recipe.recipe_config("baseline", "ud-english-ewt", 0, model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    t = recipe.task(config)
    train, test = read_tagged(corpus_path("ud-english-ewt", "train")), read_tagged(corpus_path("ud-english-ewt", "test"))
    vocab = WordVocab.build([list(s.forms) for s in train], min_freq=5)
    assert list(t.vocab.tokens) == list(vocab.tokens)
    ids, targets = lm_windows(vocab.encode_lines([list(s.forms) for s in train]), 16)
    got_ids, got_targets = t.train_windows()
    assert torch.equal(got_ids, ids[:16]) and torch.equal(got_targets, targets[:16])
    ids, targets = lm_windows(vocab.encode_lines([list(s.forms) for s in test]), 16)
    assert torch.equal(t.eval_windows("test")[0], ids[:4])
    torch.manual_seed(0)
    model = t.build_model(config).eval()
    tag_of = majority_upos(train)
    tags = [None] * 3 + [tag_of.get(w) for w in vocab.tokens[3:]]
    untagged = torch.tensor([tag is None for tag in tags])
    with torch.no_grad():  # the first data.max_eval_windows = 4 windows of UD test
        preds = model(ids[:4]).logits.masked_fill(untagged, -math.inf).argmax(-1)
    want = same_pos_miss_rate(preds, targets[:4], tags)["same_pos_miss"]
    assert t.figures(model, "test")["same_pos_miss"] == pytest.approx(want, abs=1e-12)


def test_wikitext_standard_protocol_reads_train_valid_test(tmp_path):
    root = fake_wikitext(tmp_path / "data", with_train=True)
    files = recipe.dataset_files("wikitext-2", root)
    assert files["train_split"] == "train" and files["train"].endswith("train.txt") and files["valid"].endswith("valid.txt")
    config = recipe.recipe_config("baseline", "wikitext-2", 0, tmp_path / "runs", model=TINY_MODEL, data={"window": 8}, optim=TINY_OPTIM,
                                  data_dir=root)
    assert config.data["min_freq"] == 1 and config.data["max_eval_windows"] is None  # the standard vocabulary, the whole test split
    t = recipe.task(config)
    lines = read_lines(root / "wikitext-2" / "train.txt")
    vocab = WordVocab.build(lines, min_freq=1)
    assert list(t.vocab.tokens) == list(vocab.tokens)
    assert len(t.train_windows()[0]) == (vocab.encode_lines(lines).numel() - 1) // 8
    assert len(t.eval_windows("test")[0]) == (vocab.encode_lines(read_lines(root / "wikitext-2" / "test.txt")).numel() - 1) // 8
    report = recipe.reproduce(seeds=1, out_dir=tmp_path / "runs", datasets=("wikitext-2",), variants=("baseline", "kl-T0.1"),
                              progress=None, model=TINY_MODEL, data={"window": 8, "max_eval_windows": 8}, optim=TINY_OPTIM, data_dir=root)
    s = report["wikitext-2"]
    assert s["data"]["train_split"] == "train" and s["data"]["valid_split"] == "valid" and "standard protocol" in s["data"]["note"]
    assert s["chosen_on_valid"] == "kl-T0.1" and math.isfinite(s["baseline"]["valid_ppl"])
    assert "(train split: train)" in recipe.format_report(report)


def test_wikitext_fallback_trains_on_valid_and_says_so(tmp_path):
    root = fake_wikitext(tmp_path / "data", with_train=False)
    files = recipe.dataset_files("wikitext-2", root)
    assert files["train_split"] == "valid (fallback)" and files["train"].endswith("valid.txt") and files["valid"] is None
    report = recipe.reproduce(seeds=1, out_dir=tmp_path / "runs", datasets=("wikitext-2",), variants=("baseline",), progress=None,
                              model=TINY_MODEL, data={"window": 8, "min_freq": 1}, optim=TINY_OPTIM, data_dir=root)
    d = recipe.json_report(report)["wikitext-2"]["data"]
    assert d["train_split"] == "valid (fallback)" and "fallback" in d["note"] and d["config"]["data"]["max_eval_windows"] == 1000
    assert "(train split: valid (fallback))" in recipe.format_report(report)
    assert "chosen_on_valid" not in report["wikitext-2"]


@pytest.mark.skipif(shared_data_dir() is None or not (shared_data_dir() / "wikitext-2" / "train.txt").is_file(),
                    reason="the shared data folder has no WikiText-2 train.txt")
def test_real_wikitext_standard_vocabulary():
    files = recipe.dataset_files("wikitext-2")
    assert files["train_split"] == "train"
    config = recipe.recipe_config("baseline", "wikitext-2", 0, model=TINY_MODEL, data={"max_train_windows": 4}, optim=TINY_OPTIM)
    t = recipe.task(config)
    # 33,278 word types with <unk> and <eos> (the standard count), plus <pad>
    assert len(t.vocab) == 33_279 and t.vocab.tokens[:3] == ["<pad>", "<unk>", "<eos>"]
    # words + one <eos> per non-blank line; the standard 2,088,628 also gives each of the 12,951 blank lines an <eos>
    assert sum(len(doc.split()) + 1 for doc in t.train_docs) == 2_075_677


def test_semantic_kl_loss_of_the_task_equals_the_library_loss():
    config = recipe.recipe_config("kl-T0.1", "ud-english-ewt", 0, model=TINY_MODEL, data=TINY_DATA, optim=TINY_OPTIM)
    assert config.run.task == "lm" and config.objective == {"semantic_kl": {"lambda": 0.5, "temperature": 0.1}}
    t = recipe.task(config)
    torch.manual_seed(0)
    model = t.build_model(config).eval()  # no dropout: the two forwards below agree
    batch = next(iter(t.train_batches(0, torch.Generator().manual_seed(0))))
    loss, logs = t.loss(model, batch)
    from neurosym.lm.semantic_kl import semantic_kl

    want = semantic_kl(model(batch["ids"]).logits, batch["targets"], model.lm_head.weight, 0.1, "cosine", lam=0.5)
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert logs["temperature"] == 0.1 and math.isfinite(logs["kl"])


def test_config_errors_name_the_key(tmp_path):
    good = recipe.recipe_config("baseline", "ud-english-ewt", 0, tmp_path).to_dict()

    def build(objective=None, data=None):
        return LMTask(Config.from_dict({**good, "objective": objective or {}, "data": {**good["data"], **(data or {})}}))

    with pytest.raises(ConfigError, match=r"objective.semantic_kl.lambda: expected a number in \[0, 1\]"):
        build(objective={"semantic_kl": {"lambda": 2.0}})
    with pytest.raises(ConfigError, match="objective.semantic_kl.temperature: expected a finite number > 0"):
        build(objective={"semantic_kl": {"temperature": 0}})
    with pytest.raises(ConfigError, match="objective.semantic_kl.temperature_end: expected a final temperature"):
        build(objective={"semantic_kl": {"schedule": "linear"}})
    with pytest.raises(ConfigError, match="data.pos: expected a tagged file"):
        build(data={"pos": str(tmp_path / "none.conllu")})
    with pytest.raises(ConfigError, match="data.pos_tags: tags the words of data.pos"):
        build(data={"pos": None})
    with pytest.raises(ConfigError, match="data.format: expected one of"):
        build(data={"format": "csv"})
    with pytest.raises(NeurosymError, match="unknown semantic-KL variant"):
        recipe.recipe_config("kl-T9", "wikitext-2", 0)
    with pytest.raises(NeurosymError, match="no such folder"):
        recipe.dataset_files("wikitext-2", tmp_path / "none")
    with pytest.raises(NeurosymError, match="no wikitext-2 valid file"):
        recipe.dataset_files("wikitext-2", tmp_path)
    with pytest.raises(NeurosymError, match="--budget: expected one of"):
        recipe.reproduce(seeds=1, out_dir=tmp_path, datasets=("ud-english-ewt",), variants=("baseline",), budget="huge")


def test_cli_reproduce_semantic_kl_help_and_errors(tmp_path):
    from neurosym.cli.main import main

    runner = CliRunner()
    result = runner.invoke(main, ["reproduce", "semantic-kl", "--help"])
    assert result.exit_code == 0 and "--seeds" in result.output and "--resume" in result.output and "--budget" in result.output
    result = runner.invoke(main, ["reproduce", "semantic-kl", "--data", str(tmp_path / "nope")])
    assert result.exit_code != 0 and "no such folder" in result.output
    (tmp_path / "file").write_text("x")
    result = runner.invoke(main, ["reproduce", "semantic-kl", "--out-dir", str(tmp_path / "file" / "runs")])
    assert result.exit_code != 0 and "is a file, not a folder" in result.output
