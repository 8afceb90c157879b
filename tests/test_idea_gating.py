"""The idea-gating recipe (neurosym/experiments/idea_gating.py): the drift corpus and its
exact topic judgement on hand-made continuations, the intervals, stickiness counting,
config errors, a tiny end-to-end run and the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
from click.testing import CliRunner

from neurosym.cli.main import main
from neurosym.data.text import corpus_path
from neurosym.errors import ConfigError, NeurosymError
from neurosym.experiments import harness
from neurosym.experiments.harness import diff_ci, mean_ci, wilson
from neurosym.experiments.idea_gating import (
    DomainText, DriftCorpus, format_report, from_json, hits_per_100, json_report, judge_continuation, recipe_config, reproduce, task,
)
from neurosym.lm.idea import idea_parameters, matched_d_ff


@pytest.fixture(scope="module")
def corpus() -> DriftCorpus:
    return DriftCorpus()


def ids(corpus: DriftCorpus, text: str) -> list[int]:
    return [corpus.vocab.id(w) for w in text.split()]


def test_topic_grammars_accept_their_sentences_only(corpus):
    assert corpus.accepts("zoology", ids(corpus, "the bat hunts moths ."))
    assert not corpus.accepts("comics", ids(corpus, "the bat hunts moths ."))
    assert corpus.accepts("comics", ids(corpus, "the bat fights thugs on the rooftop ."))
    shared = ids(corpus, "the bat sleeps at night .")
    assert corpus.accepts("zoology", shared) and corpus.accepts("comics", shared)
    assert corpus.accepts("zoology", ids(corpus, "the owl eats seeds . the spider waits in the cave ."))  # several sentences
    assert not corpus.accepts("zoology", ids(corpus, "the bat hunts thugs ."))  # mixed: neither topic
    assert not corpus.accepts("comics", ids(corpus, "the bat hunts thugs ."))


def test_judge_hand_made_continuations(corpus):
    prompt = [corpus.bos, *ids(corpus, "the owl eats worms . the bat")]
    judge = lambda text: judge_continuation(corpus, "zoology", prompt, ids(corpus, text))  # noqa: E731
    assert judge("hunts moths . the moth eats seeds .") == {"drift": False, "invalid": False, "complete": True}
    assert judge("fights thugs .") == {"drift": True, "invalid": False, "complete": True}  # the bridge sentence drifts
    assert judge("hunts moths . the villain defeats robots .") == {"drift": True, "invalid": False, "complete": True}  # a later one
    assert judge("sleeps at night . the hero")["drift"] is False  # shared sentence, unfinished rest ignored
    assert judge("hunts thugs .") == {"drift": False, "invalid": True, "complete": True}
    assert judge("hunts") == {"drift": False, "invalid": False, "complete": False}
    eos = [corpus.eos]
    assert judge_continuation(corpus, "zoology", prompt, ids(corpus, "fights thugs .") + eos)["drift"]
    comics = [corpus.bos, *ids(corpus, "the hero fights robots . the spider")]
    assert judge_continuation(corpus, "comics", comics, ids(corpus, "eats insects ."))["drift"]


def test_prompts_alternate_topics_and_end_with_a_bridge(corpus):
    prompts = corpus.prompts(6, seed=1)
    assert [t for t, _ in prompts] == ["zoology", "comics"] * 3
    for topic, p in prompts:
        assert p[0] == corpus.bos and p[-2] == corpus.the and p[-1] in corpus.bridges
        first = p[1:-2]
        other = "comics" if topic == "zoology" else "zoology"
        assert corpus.accepts(topic, first) and not corpus.accepts(other, first)
    assert corpus.prompts(6, seed=1) == prompts  # deterministic


def test_floor_is_the_grammar_entropy(corpus):
    h = corpus.auto.entropy()
    assert corpus.floor() == pytest.approx(math.exp(h.per_sentence / (h.expected_length + 1)))
    assert 1.0 < corpus.floor() < 5.0


def test_intervals_and_stickiness_counts():
    lo, hi = wilson(0, 100)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.037, abs=1e-3)
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    m, lo, hi = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.303 * 1 / math.sqrt(3), rel=1e-3)
    d, lo, hi = diff_ci([3.0, 4.0, 5.0], [1.0, 2.0, 3.0])
    assert d == 2.0 and lo < 2.0 < hi
    assert hits_per_100([5, 6, 7, 1], {5, 7}, ignore={1}) == pytest.approx(100 * 2 / 3)
    assert hits_per_100([1], {5}, ignore={1}) is None


def test_config_errors_name_keys(tmp_path):
    with pytest.raises(ConfigError, match=r"model\.idea_alpha"):
        task(recipe_config("drift", "idea", 0, tmp_path, overrides={"idea": {"alpha": -1.0}}))
    with pytest.raises(ConfigError, match=r"model\.idea_ramp"):
        task(recipe_config("drift", "idea", 0, tmp_path, overrides={"idea": {"ramp": 2.0}}))
    with pytest.raises(ConfigError, match=r"unknown key 'alfa'"):
        task(recipe_config("drift", "idea", 0, tmp_path, overrides={"idea": {"alfa": 0.5}}))
    with pytest.raises(ConfigError, match=r"model\.max_len: expected at least the longest document row"):
        task(recipe_config("drift", "idea", 0, tmp_path, overrides={"model": {"max_len": 10}}))
    with pytest.raises(ConfigError, match=r"model\.match_idea: sizes a native baseline"):
        task(recipe_config("drift", "idea", 0, tmp_path, overrides={"model": {"match_idea": 8}}))
    with pytest.raises(NeurosymError, match="unknown idea-gating dataset"):
        recipe_config("ptb", "idea", 0)
    with pytest.raises(NeurosymError, match="--budget: expected one of"):
        recipe_config("drift", "idea", 0, budget="huge")
    shipped = corpus_path("wikitext-2", "valid").parents[1]
    cpu = recipe_config("wikitext-2", "idea", 0, tmp_path, data_dir=shipped, budget="cpu")
    assert cpu.optim.epochs == 1 and recipe_config("wikitext-2", "idea", 0, tmp_path, data_dir=shipped).optim.epochs == 2
    assert recipe_config("drift", "idea", 0, tmp_path, budget="cpu").optim.epochs == 6  # the budget is WikiText-2's


TINY = {"model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}, "idea": {"hidden": 8},
        "data": {"train_sentences": 128, "valid_sentences": 64}, "optim": {"epochs": 1, "batch_size": 32}}
TINY_TEXT = {"model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}, "idea": {"hidden": 8},
             "data": {"max_train_windows": 64}, "optim": {"epochs": 1, "batch_size": 32}}


def test_drift_configs_are_lm_task_configs_of_the_recipe_data(tmp_path):
    """The drift runs are lm-task configs: documents of drift.fsg as rows (<bos> doc -> doc
    <eos>), the recipe's sampling seeds and length cap; the baseline's d_ff matched to the
    tied idea model's size; the ramp over half the steps."""
    base, idea = (task(recipe_config("drift", v, 0, tmp_path, overrides=TINY)) for v in ("baseline", "idea"))
    assert base.config.run.task == "lm" and base.data_cfg.layout == "documents"
    corpus = DriftCorpus()
    docs = corpus.documents(128, 0, 60)
    ids, targets = idea.train_windows()
    assert len(ids) == 128
    for row, doc in enumerate(docs[:20]):
        n = len(doc)
        assert ids[row, : n + 1].tolist() == [corpus.bos, *doc] and targets[row, : n + 1].tolist() == [*doc, corpus.eos]
        assert (ids[row, n + 1 :] == corpus.pad).all() and (targets[row, n + 1 :] == corpus.pad).all()
    assert idea.eval_windows("valid")[0].shape[0] == 64
    assert idea.eval_windows("valid")[1][0, : len(corpus.documents(64, 10_007, 60)[0]) + 1].tolist() == [*corpus.documents(64, 10_007, 60)[0], corpus.eos]
    torch.manual_seed(0)
    b, m = base.build_model(base.config), idea.build_model(idea.config)
    V = len(corpus.vocab)
    assert b.config.d_ff == matched_d_ff(16, 1, 32, idea_parameters(16, V, 8, True))
    count = lambda model: sum(p.numel() for p in model.parameters())  # noqa: E731
    assert abs(count(b) - count(m)) <= 2 * 16 + 1
    assert m.output.config.ramp_steps == round(0.5 * 4 * 1)  # 128 documents / 32 = 4 steps, one epoch
    # the stop words leave out every special token (<eos> is the most frequent target)
    assert corpus.eos not in idea.stop_ids.tolist() and len(idea.stop_ids) == 3
    batch = next(iter(idea.train_batches(0, torch.Generator().manual_seed(0))))
    assert int((batch["targets"] != corpus.pad).sum(1).max()) == batch["targets"].shape[1]  # trimmed to the longest row


@pytest.mark.slow
def test_tiny_end_to_end_drift(tmp_path):
    r = reproduce(seeds=2, out_dir=tmp_path, datasets=("drift",), progress=None, threads=1, samples=20, overrides=TINY)
    rep = r["datasets"]["drift"]
    b, v, u = rep["baseline"], rep["idea"], rep["idea-untied"]
    assert abs(b["params"] - v["params"]) <= 2 * (2 * 16 + 1)  # matched size
    assert u["params"] > v["params"]
    for m in (b, v, u):
        assert m["ppl"] > rep["floor_ppl"] * 0.99 and 0 <= m["drift_rate"] <= 1 and len(m["runs"]) == 2
    assert b["ppl"] == b["ppl_ungated"]
    assert (tmp_path / "xray-drift.png").stat().st_size > 1000
    out = json_report(r)["datasets"]["drift"]
    assert {"ppl", "ppl_std", "params"} <= set(out["baseline"])
    assert {"ppl", "ppl_ungated", "params", "drift_rate", "stickiness", "ppl_std", "drift_rate_std", "stickiness_std"} <= set(out["variant"])
    text = format_report(r)
    assert "exact floor" in text and "x-ray" in text
    assert format_report(from_json(json_report(r))) == text  # a doc's tables print from the committed JSON
    # a second call reuses the finished runs only with resume
    with pytest.raises(NeurosymError, match="--resume"):
        reproduce(seeds=1, out_dir=tmp_path, datasets=("drift",), progress=None, threads=1, samples=5, overrides=TINY)
    again = reproduce(seeds=2, out_dir=tmp_path, datasets=("drift",), progress=None, threads=1, samples=20, overrides=TINY, resume=True)
    assert again["datasets"]["drift"]["idea"]["ppl"] == v["ppl"]
    # a recipe run is an lm-task run: neurosym eval gives its figures back
    from neurosym.lm.task import evaluate_run

    ev = evaluate_run(v["runs"][0]["run_dir"], "valid")
    assert ev["ppl"] == pytest.approx(v["runs"][0]["ppl"], rel=1e-6) and ev["ppl_ungated"] == pytest.approx(v["runs"][0]["ppl_ungated"], rel=1e-6)


def test_the_report_prints_the_same_from_its_json():
    run = lambda ppl, sticky: {"ppl": ppl, "ppl_ungated": ppl + 1, "stickiness": sticky, "seconds": 10.0}  # noqa: E731
    rows = {"baseline": [run(500.0, 0.4), run(510.0, 0.5)], "idea": [run(520.0, 0.6), run(530.0, 0.7)]}
    rep = {"floor_ppl": None, "data": {"train_split": "train", "note": "trained on train.txt", "vocab_size": 9}}
    for v, rs in rows.items():
        rep[v] = harness.summarise(rs, ("ppl", "ppl_ungated", "stickiness", "seconds")) | {"params": 1000, "runs": rs, "stickiness_ci": (0.1, 0.9)}
    rep["idea"] |= {"welch": {"ppl": harness.welch([520, 530], [500, 510])}, "stickiness_gain": (0.2, 0.1, 0.3)}
    r = {"seeds": 2, "budget": "cpu", "datasets": {"wikitext-2": rep}}
    text = format_report(r)
    assert "| idea | 1,000 | 525.0000 ± 7.0711" in text and "stickiness gain +0.20 [0.10, 0.30]" in text
    assert format_report(from_json(json_report(r))) == text


def test_wikitext_task_and_stickiness(tmp_path):
    shipped = corpus_path("wikitext-2", "valid").parents[1]  # the shipped corpora/: the fallback on valid.txt (seconds, not minutes)
    config = recipe_config("wikitext-2", "idea", 0, tmp_path, overrides=TINY_TEXT, data_dir=shipped)
    assert config.data["train"].endswith("valid.txt.gz") and config.data["min_freq"] == 5
    t = task(config)
    assert len(t.vocab) > 4000 and len(t.stop_ids) == 50
    batch = next(iter(t.train_batches(0, torch.Generator().manual_seed(0))))
    model = t.build_model(config)
    loss, logs = t.loss(model, batch)
    assert torch.isfinite(loss) and "idea_bce" in logs
    text = DomainText(t)
    prompts = text.prompts(30)
    terms = text.terms
    assert len(prompts) == 30
    for d, p in prompts:
        assert sum(w in terms[d] for w in p) >= 3
    s = text.stickiness(model, n=4, max_len=5)
    assert s["n"] == 4 and len(s["stickiness_samples"]) == 4
    # each seed of the recipe draws its own prompts (issue 31: no prompt set shared by every seed)
    by_seed = [text.prompts(30, seed=seed) for seed in range(3)]
    assert all(len(p) == 30 for p in by_seed) and text.prompts(30, seed=1) == by_seed[1]
    assert len({tuple(w) for _, w in by_seed[0]} & {tuple(w) for _, w in by_seed[1]}) < 30  # not the same prompts
    for d, w in (pair for p in by_seed for pair in p):
        assert len(w) == 32 and sum(x in terms[d] for x in w) >= 3
    # more than n candidates even at n = all of seed None's: every seed has its own cut of the stream
    everything = text.prompts(10**6)
    assert {tuple(w) for _, w in text.prompts(10**6, seed=1)} != {tuple(w) for _, w in everything}


def test_intervals_take_the_seed_as_the_unit():
    from neurosym.experiments.idea_gating import seed_intervals
    from neurosym.experiments.harness import mean_ci, wilson

    rows = [{"drift_rate": r, "drift_ci": wilson(round(400 * r), 400), "stickiness": s} for r, s in ((0.01, 3.0), (0.02, 5.0), (0.04, 4.0))]
    got = seed_intervals(rows)
    assert got["drift_ci"] == pytest.approx(mean_ci([0.01, 0.02, 0.04])[1:])
    assert got["stickiness_ci"] == pytest.approx(mean_ci([3.0, 5.0, 4.0])[1:])
    # three seeds' interval is wider than the Wilson interval of 1,200 pooled continuations would be
    pooled = wilson(28, 1200)
    assert got["drift_ci"][1] - got["drift_ci"][0] > pooled[1] - pooled[0]
    # one seed: its own interval
    assert seed_intervals(rows[:1])["drift_ci"] == pytest.approx(rows[0]["drift_ci"])


def test_cli_reproduce_idea_gating_json(tmp_path):
    from neurosym.experiments import idea_gating

    old = dict(idea_gating.RECIPE["drift"])
    idea_gating.RECIPE["drift"] = {k: {**v, **TINY.get(k, {})} for k, v in old.items()}  # the CLI's own tables, made tiny
    try:
        res = CliRunner().invoke(main, ["reproduce", "idea-gating", "--seeds", "1", "--datasets", "drift", "--samples", "10",
                                        "--threads", "1", "--out-dir", str(tmp_path), "--json"])
    finally:
        idea_gating.RECIPE["drift"] = old
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(data["datasets"]["drift"]) >= {"baseline", "variant", "untied", "floor_ppl"}
    res = CliRunner().invoke(main, ["reproduce", "idea-gating", "--datasets", "drift", "--out-dir", str(tmp_path / "x"), "--seeds", "0"])
    assert res.exit_code != 0
    res = CliRunner().invoke(main, ["reproduce", "idea-gating", "--datasets", "drift", "--variants", "baseline,gated", "--out-dir", str(tmp_path / "y")])
    assert res.exit_code == 2 and "variants among baseline, idea, idea-untied, got gated" in res.output
