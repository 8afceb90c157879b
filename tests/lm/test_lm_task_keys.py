"""The lm task's keys the recipes use: data.bos, data.format, data.layout (document rows),
data.pos / pos_tags, model.match_idea, model.idea.ramp; checked against direct readings."""

from __future__ import annotations

import pytest
import torch

from neurosym.data.text import SPECIALS, WordVocab, lm_windows
from neurosym.errors import ConfigError
from neurosym.lm.config import Config
from neurosym.lm.idea import idea_parameters, matched_d_ff
from neurosym.lm.metrics import embedding_health
from neurosym.lm.task import LMTask, document_rows, read_documents
from neurosym.vocab import Vocab

TAGGED = "The\tDET\ncat\tNOUN\nsat\tVERB\n.\tPUNCT\n\nA\tDET\ndog\tNOUN\nran\tVERB\n.\tPUNCT\n\n"


def config(tmp_path, data: dict, model: dict | None = None, optim: dict | None = None) -> Config:
    return Config.from_dict({"run": {"name": "k", "out_dir": str(tmp_path / "runs"), "task": "lm"},
                             "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32, **(model or {})},
                             "data": data, "optim": {"batch_size": 2, "epochs": 2, **(optim or {})}})


def test_document_rows_with_and_without_bos():
    with_bos = Vocab.words(["a", "b", "c"], specials=("<pad>", "<unk>", "<eos>", "<bos>"))
    ids, targets = document_rows(with_bos, ["a b", "c", "b c a"])
    a, b, c, pad, eos, bos = (with_bos.id(w) for w in ("a", "b", "c", "<pad>", "<eos>", "<bos>"))
    assert ids.tolist() == [[bos, a, b, pad], [bos, c, pad, pad], [bos, b, c, a]]
    assert targets.tolist() == [[a, b, eos, pad], [c, eos, pad, pad], [b, c, a, eos]]
    plain = Vocab.words(["a", "b", "c"], specials=SPECIALS)
    ids, targets = document_rows(plain, ["a b", "c"])
    a, b, c = (plain.id(w) for w in "abc")
    assert ids.tolist() == [[a, b], [c, 0]] and targets.tolist() == [[b, 2], [2, 0]]


def test_bos_false_and_tagged_files_read_as_the_recipe_did(tmp_path):
    (tmp_path / "train.tsv").write_text(TAGGED * 20, encoding="utf-8")
    assert read_documents(tmp_path / "train.tsv", format="tagged")[:2] == ["The cat sat .", "A dog ran ."]
    assert read_documents(tmp_path / "train.tsv")[0] == "The\tDET"  # auto: a .tsv is plain lines
    t = LMTask(config(tmp_path, {"train": str(tmp_path / "train.tsv"), "format": "tagged", "bos": False, "window": 4,
                                  "pos": str(tmp_path / "train.tsv")}))
    lines = [["The", "cat", "sat", "."], ["A", "dog", "ran", "."]] * 20
    vocab = WordVocab.build(lines)
    assert list(t.vocab.tokens) == list(vocab.tokens) and "<bos>" not in t.vocab.tokens
    ids, targets = lm_windows(vocab.encode_lines(lines), 4)
    assert torch.equal(t.train_windows()[0], ids) and torch.equal(t.train_windows()[1], targets)
    torch.manual_seed(0)
    model = t.build_model(t.config)
    t.files["valid"] = t.files["train"]
    got = t.figures(model, "valid")
    health = embedding_health(model.lm_head.weight[3:])
    assert got["mean_cosine"] == pytest.approx(health["mean_cosine"]) and got["effective_rank"] == pytest.approx(health["effective_rank"])
    assert 0 <= got["same_pos_miss"] <= 1 and got["tokens"] == targets[: len(ids)].numel()


def test_match_idea_and_ramp(tmp_path):
    (tmp_path / "t.txt").write_text("a b c d e f . " * 200 + "\n", encoding="utf-8")
    base = LMTask(config(tmp_path, {"train": str(tmp_path / "t.txt"), "window": 8}, {"match_idea": 8}))
    idea = LMTask(config(tmp_path, {"train": str(tmp_path / "t.txt"), "window": 8}, {"idea": {"hidden": 8, "ramp": 0.5}}))
    V = len(base.vocab)
    assert base.build_model(base.config).config.d_ff == matched_d_ff(16, 1, 32, idea_parameters(16, V, 8, True))
    steps = idea.steps_per_epoch() * 2
    assert idea.build_model(idea.config).output.config.ramp_steps == round(0.5 * steps)
    with pytest.raises(ConfigError, match="model.match_idea"):
        LMTask(config(tmp_path, {"train": str(tmp_path / "t.txt"), "window": 8}, {"match_idea": 8, "idea": {"hidden": 8}}))
    with pytest.raises(ConfigError, match="data.layout: expected one of"):
        LMTask(config(tmp_path, {"train": str(tmp_path / "t.txt"), "layout": "pages"}))
