"""The structured suite (issue 20): the Tomita cold start, the priors' settings, compute
records, and ``neurosym reproduce structured-suite`` on a tiny configuration."""

from __future__ import annotations

import functools
import json
import math
import random
from dataclasses import replace

import pytest
import torch
from click.testing import CliRunner

from neurosym.cli.main import main
from neurosym.errors import NeurosymError
from neurosym.experiments import structured_suite as suite
from neurosym.experiments import suite_heads as heads
from neurosym.layers.encoders import PCFGEncoder
from neurosym.tasks import IGNORE, Agreement, Split, Task, TaskData, Tomita, accuracy, get_task, train_test_duplicates
from neurosym.tasks.base import tagging_split
from neurosym.vocab import Vocab

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
    # the pos bank's search: 0.2 CPU s per class, not the recipe's 1 s (the same search, cut short)
    monkeypatch.setattr(suite, "synthesise_bank", functools.partial(suite.synthesise_bank, seconds_per_class=0.2))
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
    assert "translation" in report["skipped"] and report["not_applicable"]["agreement"]["regex-hard"]
    assert {p.name for p in out.iterdir()} >= {"report.md", "results.json", "heatmap.png", "length.png", "results"}
    assert "| tomita2 |" in (out / "report.md").read_text()
    files = sorted((out / "results").rglob("*.json"))
    assert len(files) == 7  # tomita2 x 3, agreement x 1, pos x 3 (mean and the synthesised bank hard and soft)
    bank = out / "banks" / "pos.regex"
    assert bank.is_file() and {b["class"] for b in report["banks"]["pos"]} >= {"PUNCT", "NOUN"}
    assert "## Regex banks synthesised" in (out / "report.md").read_text()
    # by-construction cells are labelled (Tomita's own automaton), and duplicates counted for every task
    assert report["by_construction"] == {"tomita2": {e: Tomita.by_construction[e] for e in ("regex-hard", "regex-soft")}}
    assert set(report["duplicates"]) == {"tomita2", "agreement", "pos"}
    assert all(0 <= d["in_train"] <= d["test"] == 100 for d in report["duplicates"].values())
    md = (out / "report.md").read_text()
    assert "## By construction (c)" in md and "* tomita2, regex-hard: the bank holds the compiled automaton" in md
    assert "## Test inputs also in training" in md
    row = next(line for line in md.splitlines() if line.startswith("| tomita2 |"))
    assert row.count("(c)") == 2
    stamps = [f.stat().st_mtime_ns for f in [*files, bank]]
    again = CliRunner().invoke(main, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    assert [f.stat().st_mtime_ns for f in [*files, bank]] == stamps  # reused, not retrained or re-synthesised
    assert json.loads(again.stdout)["tasks"] == report["tasks"]


def test_cli_bad_names_are_clear_errors(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "structured-suite", "--tasks", "nope", "--out-dir", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown task 'nope'" in r.output
    r = CliRunner().invoke(main, ["reproduce", "structured-suite", "--tasks", "translation", "--out-dir", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown task 'translation'" in r.output and "no parallel text" in r.output
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


# ---------------------------------------------------------------------- the new families
class Reverse(Task):
    """A synthetic seq2seq task: the target is the source reversed (tokens a-d, 1-4 long)."""

    name, family, metric = "reverse", "seq2seq", "exact_match"

    def build(self, n_train=None, n_test=None, seed=0):
        gen = torch.Generator().manual_seed(seed)
        vocab = Vocab.words(list("abcd"))
        targets = ["<bos>", "<eos>", *"abcd"]

        def split(n):
            lengths = torch.randint(1, 5, (n,), generator=gen)
            ids = torch.randint(4, 8, (n, 4), generator=gen) * (torch.arange(4) < lengths[:, None])
            labels = torch.full((n, 5), IGNORE)
            for i, k in enumerate(lengths.tolist()):  # the reference: reverse by hand, words -> target ids
                labels[i, :k] = torch.tensor([targets.index(vocab.tokens[t]) for t in ids[i, :k].tolist()[::-1]])
                labels[i, k] = 1
            return Split(ids, lengths, labels)

        return TaskData(split(n_train), split(n_test), vocab, len(targets), targets, targets)

    def evaluate(self, pred, labels, names=()):
        same = [p[: list(g).index(1) + 1] == g[: list(g).index(1) + 1] for p, g in zip(pred.tolist(), labels.tolist())]
        return {"exact_match": sum(same) / len(same)}


def test_seq2seq_head_learns_to_reverse():
    task = Reverse()
    data = task.build(400, 100, seed=0)
    rec = suite.run_one(task, data, "lstm", 0, replace(TINY, steps=250, lr=1e-2))
    assert rec["metric"] == "exact_match" and rec["scores"]["exact_match"] >= 0.9
    assert rec["flops_per_token"] > 0 and rec["cpu_seconds"] > 0


def test_greedy_decoding_agrees_with_the_teacher_forced_pass():
    task = Reverse()
    data = task.build(8, 16, seed=1)
    for name in ("mean", "lstm", "attention"):
        model = suite.build_model(task, data, name, 16, seed=3).eval()
        with torch.no_grad():
            pred = model.predict(data.test.ids, data.test.lengths, 7)
            assert pred.shape[0] == 16 and pred.shape[1] <= 7
            ended = (pred == 1).any(1)
            for row in pred[ended].tolist():  # tokens, one EOS, then IGNORE
                k = row.index(1)
                assert IGNORE not in row[:k] and all(x == IGNORE for x in row[k + 1 :])
            forced = model(data.test.ids, data.test.lengths, pred.clamp_min(0)).argmax(-1)
        keep = pred != IGNORE
        assert torch.equal(forced[keep], pred[keep])  # step-by-step decoding = the batched pass on its own output


def test_seq2seq_memory_of_a_pooled_only_encoder_is_one_slot():
    enc = suite.build_encoder("mean", 8, 16)
    model = heads.Seq2SeqModel(enc, 5, pooled_only=True)
    mem, mask, h0 = model.memory(torch.tensor([[4, 5, 0], [6, 0, 0]]), torch.tensor([2, 1]))
    assert mem.shape == (2, 1, 16) and mask.all() and h0.shape == (1, 2, 16)
    with pytest.raises(NeurosymError, match="max_len >= 1"):
        model.predict(torch.tensor([[4]]), torch.tensor([1]), 0)


class Successor(Task):
    """A synthetic next-token task: the label is the token after the window's last one."""

    name, family = "successor", "next-token"

    def build(self, n_train=None, n_test=None, seed=0):
        gen = torch.Generator().manual_seed(seed)
        vocab = Vocab.words([str(i) for i in range(6)])

        def split(n):
            lengths = torch.randint(1, 4, (n,), generator=gen)
            ids = torch.randint(4, 10, (n, 3), generator=gen) * (torch.arange(3) < lengths[:, None])
            last = ids.gather(1, (lengths - 1)[:, None])[:, 0]
            return Split(ids, lengths, torch.where(last == 9, 4, last + 1))

        return TaskData(split(n_train), split(n_test), vocab, len(vocab))


def test_next_token_records_perplexity_as_exp_of_the_test_cross_entropy():
    task = Successor()
    data = task.build(300, 60, seed=0)
    rec = suite.run_one(task, data, "rnn", 0, replace(TINY, steps=150, lr=1e-2))
    assert rec["scores"]["accuracy"] >= 0.9 and rec["scores"]["ppl"] == pytest.approx(math.exp(rec["test_nll"]))
    model = suite.build_model(task, data, "mean", 8, seed=0)
    pred, nll = suite.evaluate(model, data.test, batch_size=7)
    with torch.no_grad():
        logits = model(data.test.ids, data.test.lengths)
    assert nll == pytest.approx(float(torch.nn.functional.cross_entropy(logits, data.test.labels)), rel=1e-5)
    assert torch.equal(pred, logits.argmax(-1))  # batches run shortest first, results back in row order


# ---------------------------------------------------------------------- memoised fixed features
def test_memoised_pcfg_features_equal_fresh_ones_and_are_computed_once():
    task = get_task("arithmetic")
    data = task.build(60, 30, seed=0)
    model = suite.build_model(task, data, "pcfg-hard", 8, seed=0)
    enc = model.encoder
    assert isinstance(enc, heads.MemoPCFGEncoder)
    calls = []
    fresh = enc.memo.fn
    enc.memo.fn = lambda ids, n: calls.append(len(ids)) or fresh(ids, n)
    enc.memo.warm(data.train.ids, data.train.lengths, batch_size=16)
    distinct = len({tuple(r[:n]) for r, n in zip(data.train.ids.tolist(), data.train.lengths.tolist())})
    assert sum(calls) == distinct
    batch = data.train.subset(range(20))
    with torch.no_grad():
        memo = enc.sentence_features(batch.ids, batch.lengths)
        direct = PCFGEncoder.sentence_features(enc, batch.ids, batch.lengths)
    assert sum(calls) == distinct and torch.allclose(memo, direct, atol=1e-5)
    prefix = suite.build_model(task, data, "pcfg-prefix-removed", 8, seed=0)
    with torch.no_grad():
        first = prefix(batch.ids, batch.lengths)
        prefix.encoder.memo.enabled = False
        assert torch.allclose(first, prefix(batch.ids, batch.lengths), atol=1e-5)


# ---------------------------------------------------------------------- regex banks per token
WORDS = ["".join(random.Random(i).choices("abcdefghijklmnopqrstuvwxyz", k=7)) for i in range(30)]  # a memorised list: ~150 states
BANK = f"NUM: /[0-9]+/\nPUNCT: /[.,!?]/\nWORDS: /{'|'.join(WORDS)}/\n"


def tagging_data():
    vocab = Vocab.words(["the", "cat", "42", ".", "7", "dog"])
    ids = torch.tensor([[4, 5, 6, 7], [4, 9, 8, 0]])
    return TaskData(Split(ids, torch.tensor([4, 3]), torch.tensor([[0, 1, 2, 3], [0, 1, 2, IGNORE]])), None, vocab, 4, ["DET", "NOUN", "NUM", "PUNCT"])


def test_bank_listing_leaves_out_large_and_empty_patterns():
    listing = suite.bank_listing(BANK + "NONE: /[^\\s\\S]/\n")
    used = {b["class"]: b["used"] for b in listing}
    assert used == {"NUM": True, "PUNCT": True, "WORDS": False, "NONE": False}
    assert [b["states"] for b in listing if b["class"] == "NONE"] == [1]
    assert all(b["states"] > suite.MAX_BANK_STATES for b in listing if b["class"] == "WORDS")


def test_token_regex_settings_read_each_words_spelling():
    data = tagging_data()
    task = get_task("pos")
    hard = suite.build_model(task, data, "regex-hard", 8, seed=0, bank=BANK)
    enc = hard.encoder
    assert isinstance(enc, heads.TokenRegexEncoder) and not any(p.requires_grad for p in enc.layer.parameters())
    feats = enc.features(data.train.ids)  # (B, L, 2): NUM, PUNCT
    assert feats.shape == (2, 4, 2)
    words = [data.vocab.tokens[i] for i in data.train.ids.flatten().tolist()]
    expect = torch.tensor([[w.isdigit(), w in ".,!?"] for w in words], dtype=torch.bool).view(2, 4, 2)
    assert torch.equal(feats > 0.5, expect)
    soft = suite.build_model(task, data, "regex-soft", 8, seed=0, bank=BANK)
    assert all(p.requires_grad for p in soft.encoder.layer.parameters())
    assert torch.allclose(soft.encoder.features(data.train.ids), feats, atol=1e-6)  # per-batch words = the table
    removed = suite.build_model(task, data, "regex-removed", 8, seed=0, bank=BANK)
    assert not torch.allclose(removed.encoder.features(data.train.ids), feats, atol=1e-2)
    total, n = soft.loss(data.train.ids, data.train.lengths, data.train.labels)
    total.backward()
    assert n == 7 and soft.encoder.layer.log_weights.grad.abs().sum() > 0
    with pytest.raises(NeurosymError, match="bank synthesised"):
        suite.build_model(task, data, "regex-hard", 8, seed=0)
    assert suite.prior_of(task, "regex-others") is not None and suite.prior_of(get_task("nli"), "regex-soft") is not None


def test_length_buckets_score_each_bucket_with_the_tasks_metric():
    task = Reverse()
    data = task.build(4, 40, seed=2)
    labels = data.test.labels
    pred = labels.clone()
    wrong = data.test.lengths >= 3  # rows of length 3-4 get their first target token wrong
    pred[wrong, 0] = (pred[wrong, 0] - 1) % 4 + 2
    buckets = suite.length_buckets(data.test, pred, edges=2, task=task, labels=labels)
    assert buckets == {"1-2": 1.0, "3-4": 0.0}
    tokens = suite.length_buckets(data.test, pred, edges=2)  # no task: token accuracy
    assert tokens["1-2"] == 1.0 and 0 < tokens["3-4"] < 1


def test_token_regex_reads_the_spelling_of_words_unseen_in_training():
    """With a form table the regexes see a test word the vocabulary only knows as <unk>."""
    vocab = Vocab.words(["the", "cat", "42", "."])
    forms = {"": 0}
    tags = [[0, 1, 2, 3], [0, 1, 2, 3]]
    train = tagging_split([["the", "cat", "42", "."], ["the", "cat", "42", "."]], tags, vocab, forms=forms)
    test = tagging_split([["the", "gnu", "1999", "!"]], tags[:1], vocab, forms=forms)
    data = TaskData(train, test, vocab, 4, ["DET", "NOUN", "NUM", "PUNCT"], forms=list(forms))
    assert data.forms == ["", "the", "cat", "42", ".", "gnu", "1999", "!"]
    assert test.ids.tolist() == [[4, vocab.unk, vocab.unk, vocab.unk]] and test.forms.tolist() == [[1, 5, 6, 7]]
    assert torch.equal(test.subset([0]).forms, test.forms)
    model = suite.build_model(get_task("pos"), data, "regex-hard", 8, seed=0, bank=BANK)
    enc = model.encoder
    assert enc.word_of_form.tolist() == [0, 4, 5, 6, 7, vocab.unk, vocab.unk, vocab.unk]
    feats = enc.features(suite.as_forms(test).ids)[0] > 0.5  # (L, 2): NUM, PUNCT
    assert feats.tolist() == [[False, False], [False, False], [True, False], [False, True]]
    assert suite.training_pairs(data)[:4] == [("the", "DET"), ("cat", "NOUN"), ("42", "NUM"), (".", "PUNCT")]
    states, _ = enc.tokens(suite.as_forms(test).ids, test.lengths)
    assert states.shape == (1, 4, 8)


def test_train_test_duplicates_counts_test_inputs_seen_in_training():
    v = Vocab.words(["a", "b"])
    mk = lambda rows: Split(torch.tensor([r + [0] * (3 - len(r)) for r in rows]), torch.tensor([len(r) for r in rows]),  # noqa: E731
                            torch.zeros(len(rows), dtype=torch.long))
    data = TaskData(mk([[1, 2], [2], [1, 1, 1]]), mk([[1, 2], [1, 2], [2, 2], [1], [2]]), v, 2)
    assert train_test_duplicates(data) == {"test": 5, "in_train": 3, "share": 0.6, "distinct_in_train": 2}
    # padding is not part of the input: [1] is not [1, 0]
    assert train_test_duplicates(TaskData(mk([[1, 0]]), mk([[1]]), v, 2))["in_train"] == 0


def test_agreement_duplicates_match_a_count_by_hand():
    """Agreement's rows are i.i.d. samples of one grammar: repeats between train and test
    happen, and the count is the number of test prefixes found among the training ones."""
    data = Agreement().load(300, 300, seed=0)
    got = train_test_duplicates(data)
    words = lambda split: [tuple(r[: int(n)].tolist()) for r, n in zip(split.ids, split.lengths)]  # noqa: E731
    train = set(words(data.train))
    assert got["in_train"] == sum(w in train for w in words(data.test)) and got["test"] == 300
    assert Agreement.by_construction.keys() == {"pcfg-prefix-hard"} and "labelling function" in Agreement.by_construction["pcfg-prefix-hard"]
