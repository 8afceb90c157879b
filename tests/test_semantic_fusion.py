"""The semantic-fusion recipe end to end on a small corpus (the full run is a `slow` test)."""

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from scipy import stats

from neurosym.cli.main import main
from neurosym.errors import ConfigError, NeurosymError
from neurosym.experiments.semantic_fusion import CONTROL, VARIANTS, format_report, recipe_config, reproduce
from neurosym.lm.config import Config, load_config
from neurosym.lm.fusion import LexicalOutput, control_from_features, control_names
from neurosym.lm.semantic_kl import semantic_kl_terms
from neurosym.lm.task import SENTENCE_SEEDS, LMTask
from neurosym.lm.train import seed_all

ROOT = Path(__file__).resolve().parents[1]
TINY = {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "aux_hidden": 16}


def task(config):
    """The recipe's task: the built-in lm task of its config."""
    return LMTask(config)


def first_batch(t):
    return next(iter(t.train_batches(0, torch.Generator().manual_seed(0))))


pytestmark = pytest.mark.usefixtures("one_thread")


def test_shipped_config_loads_and_builds_the_task():
    cfg = load_config(ROOT / "configs" / "semantic_fusion.toml")
    assert cfg.run.task == "lm" and cfg.optim.batch_size == 64 and cfg.optim.epochs == 6 and cfg.model["d_model"] == 128
    t = task(recipe_config("fusion", 0, train=300, valid=50, test=50))
    vocab = t.auto.vocab
    held = {vocab.id(w) for ws in t.holdout.values() for w in ws}
    assert len(held) == 6 and not any(i in held for s in t.sentences("train") for i in s)
    assert any(i in held for s in t.sentences("valid") for i in s)  # validation follows the full grammar
    assert any(i in held for s in t.sentences("test") for i in s)  # and so does the test split
    assert t.floor() == pytest.approx(t.auto.entropy().ppl_floor_with_eos)
    model = t.build_model(None)
    loss, logs = t.loss(model, first_batch(t))
    assert loss.requires_grad and set(logs) == {"ce", "aux", "uniformizer"}


def test_the_test_split_is_sampled_with_its_own_seed_and_chooses_nothing():
    """Validation and test follow the same (full) grammar with seeds data.seed + 10,007 and
    + 20,014; the training evaluation (every choice) reads validation only."""
    t = task(recipe_config("baseline", 0, train=64, valid=400, test=400))
    assert SENTENCE_SEEDS == {"train": 0, "valid": 10_007, "test": 20_014}
    valid, test = t.sentences("valid"), t.sentences("test")
    assert valid != test and len(test) == 400
    shared = sum(a == b for a, b in zip(valid, test))  # not the same draws in another order either
    assert shared < 40
    seen: list = []
    real = t.sentences
    t.sentences = lambda split: (seen.append(split), real(split))[1]
    seed_all(0)
    t.evaluate(t.build_model(None))
    assert seen and set(seen) == {"valid"}


def test_bad_recipe_keys_are_named():
    with pytest.raises(ConfigError, match="kindd"):
        task(recipe_config("fusion", 0, model={"kindd": 1}))
    with pytest.raises(ConfigError, match="holdout"):
        task(recipe_config("fusion", 0, holdout="three"))


def test_reproduce_reports_every_variant_with_the_test_and_step_times(tmp_path):
    variants = ("baseline", "fusion", "fusion-no-aux")
    r = reproduce(seeds=2, out_dir=tmp_path, epochs=1, progress=None, model=TINY, train=256, valid=64, test=64, variants=variants, threads=1)
    assert r["variants"] == list(variants)
    assert r["splits"]["valid"]["seed"] == 10_007 and r["splits"]["test"]["seed"] == 20_014 and r["splits"]["test"]["sentences"] == 64
    assert all(math.isfinite(run["test_ppl"]) and run["test_ppl"] >= r["floor_ppl"] for v in variants for run in r[v]["runs"])
    head = r["headline"]["recipe"]
    assert head["split"] == "test" and head["reference"] == "baseline" and head["variant"] == "fusion" and "fair" not in r["headline"]
    assert head["diff"] == pytest.approx(r["fusion"]["test_ppl"] - r["baseline"]["test_ppl"])
    assert set(r["baseline"]) >= {"ppl", "seen_ppl", "focus_ce", "ppl_std", "params", "runs"}
    assert "sem_mse" in r["fusion"] and "sem_mse" not in r["baseline"] and "sem_mse" not in r["fusion-no-aux"]
    assert r["fusion-no-aux"]["params"] < r["fusion"]["params"]  # no auxiliary head is built
    assert len(r["fusion"]["runs"]) == 2 and r["all_at_or_above_floor"]
    assert all(run["ppl"] >= r["floor_ppl"] for k in variants for run in r[k]["runs"])
    expected = stats.ttest_ind([x["ppl"] for x in r["fusion"]["runs"]], [x["ppl"] for x in r["baseline"]["runs"]], equal_var=False)
    assert r["welch_ppl"]["p"] == pytest.approx(expected.pvalue)
    assert set(r["step_times"]) == set(variants) and all(v["median_ms"] > 0 for v in r["step_times"].values())
    text = format_report(r)
    assert "| baseline |" in text and "| fusion-no-aux |" in text and "exact floor" in text and f"{r['floor_ppl']:.4f}" in text
    assert f"p = {r['welch_ppl']['p']:.2g}" in text and "ms/step" in text
    json.dumps(r)  # the --json report is plain JSON
    assert math.isfinite(r["fusion_minus_baseline"]["ppl"])


def test_both_models_get_the_same_language_model_losses():
    for variant, keys in (("baseline", {"ce", "uniformizer"}), ("fusion", {"ce", "uniformizer", "aux"}),
                          ("baseline-no-uniformizer", {"ce"}), ("fusion-no-aux", {"ce", "uniformizer"})):
        t = task(recipe_config(variant, 0, model=TINY, train=64, valid=16))
        _, logs = t.loss(t.build_model(None), first_batch(t))
        assert set(logs) == keys, variant


def test_the_fair_pair_gives_the_baseline_every_loss_of_the_fusion_model():
    """baseline-fair: the fusion model's losses (aux head and loss, per-class uniformizer)
    on the plain model; the only difference left is the adapter (features in)."""
    b, f = (task(recipe_config(v, 0, model=TINY, train=64, valid=16)) for v in ("baseline-fair", "fusion-fair"))
    assert b.objective == f.objective and b.objective.aux is not None and b.objective.uniformizer.per_class
    seed_all(0)
    base = b.build_model(None)
    assert base.adapter is None and "aux" in base.heads
    _, logs = b.loss(base, first_batch(b))
    assert set(logs) == {"ce", "uniformizer", "aux"}
    assert "sem_mse" in b.evaluate(base)


def test_training_split_differs_from_validation_only_in_the_held_out_words():
    t = task(recipe_config("baseline", 0, train=4000, valid=4000))
    vocab = t.auto.vocab
    held = {vocab.id(w) for ws in t.holdout.values() for w in ws}
    pronouns = {vocab.id("He"), vocab.id("She")}

    def two_clauses(sentences):
        return sum(any(i in pronouns for i in s) for s in sentences) / len(sentences)

    assert not any(i in held for s in t.sentences("train") for i in s)
    # P(second clause) = 0.6 in both (rejection sampling used to drop it to 0.375 in training)
    sd = math.sqrt(0.6 * 0.4 / 4000)
    assert two_clauses(t.sentences("train")) == pytest.approx(0.6, abs=5 * sd)
    assert two_clauses(t.sentences("valid")) == pytest.approx(0.6, abs=5 * sd)


def test_the_recipe_is_bit_identical_for_a_fixed_thread_count(tmp_path):
    runs = [reproduce(seeds=1, out_dir=tmp_path / str(i), epochs=1, progress=None, model=TINY, train=128, valid=32,
                      threads=1, timing=False) for i in range(2)]
    for kind in ("baseline", "fusion"):
        a, b = (r[kind]["runs"][0] for r in runs)
        assert a["train_loss"] == b["train_loss"] and a["ppl"] == b["ppl"] and a["seen_ppl"] == b["seen_ppl"], kind


def test_fusion_beats_the_baseline_on_a_small_fixed_run(tmp_path):
    """What the recipe claims, on a run small enough for CI: the same corpus, seed, losses
    and budget, one thread (so the figures are fixed on a given machine)."""
    r = reproduce(seeds=1, out_dir=tmp_path, epochs=2, progress=None, model=TINY, train=512, valid=128, threads=1, timing=False)
    assert r["fusion"]["ppl"] < 0.9 * r["baseline"]["ppl"], (r["fusion"]["ppl"], r["baseline"]["ppl"])


def test_train_command_and_plot(tmp_path):
    cfg = (ROOT / "configs" / "semantic_fusion.toml").read_text()
    cfg = cfg.replace('out_dir = "runs"', f'out_dir = "{tmp_path.as_posix()}"').replace("train_sentences = 8000", "train_sentences = 128")
    cfg = cfg.replace("valid_sentences = 1200", "valid_sentences = 32")
    cfg = cfg.replace("epochs = 6", "epochs = 1").replace("d_model = 128", "d_model = 32").replace("n_layers = 4", "n_layers = 1").replace("d_ff = 256", "d_ff = 64")
    (tmp_path / "c.toml").write_text(cfg)
    runner = CliRunner()
    r = runner.invoke(main, ["train", str(tmp_path / "c.toml")])
    assert r.exit_code == 0, r.output
    assert "final loss" in r.output and "ppl" in r.output
    r = runner.invoke(main, ["plot", str(tmp_path / "semantic-fusion")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "semantic-fusion" / "curves.png").is_file()
    r = runner.invoke(main, ["train", str(tmp_path / "c.toml")])
    assert r.exit_code == 2 and "--resume" in r.output  # a finished run is not overwritten


def test_reproduce_says_what_is_happening_and_reuses_finished_runs(tmp_path, capsys):
    lines: list[str] = []
    kw = dict(seeds=1, out_dir=tmp_path, epochs=1, model=TINY, train=128, valid=32, threads=1, timing=False, variants=("baseline", "fusion"))
    first = reproduce(progress=lines.append, **kw)
    assert lines[0] == "[1/2] baseline, seed 0" and lines[2] == "[2/2] fusion, seed 0"
    assert lines[1].startswith("      trained: ppl ") and "min left" in lines[1] and "min left" not in lines[3]
    err = capsys.readouterr().err  # one tqdm bar over both runs' steps, on stderr, the run beside it
    assert "training: 100%" in err and "4/4 [" in err and "fusion, seed 0" in err and "semantic-fusion-baseline-seed0" not in err
    with pytest.raises(NeurosymError, match="--resume to reuse finished runs"):
        reproduce(progress=None, **kw)
    lines.clear()
    again = reproduce(progress=lines.append, resume=True, **kw)
    assert lines[0] == "[1/2] baseline, seed 0 (resuming)" and "finished earlier, reused" in lines[1]
    for v in ("baseline", "fusion"):
        a, b = first[v]["runs"][0], again[v]["runs"][0]
        assert a["ppl"] == b["ppl"] and b["seconds"] > 0  # the real training time, not 0 s


# ---------------------------------------------------------------------- issue 16: control and lexical output
def test_shipped_config_trains_with_control_and_the_lexical_output():
    cfg = load_config(ROOT / "configs" / "semantic_fusion.toml")
    fusion = cfg.model["fusion"]
    assert fusion["lexical_output"] is True and fusion["control"]["dropout"] == 0.1
    assert tuple(fusion["control"]["max_prefixes"]) == CONTROL.max_prefixes and tuple(fusion["control"]["final"]) == CONTROL.final
    # the variant reproduce runs: the same lm-task sections (paths aside)
    shipped, ours = task(cfg), task(recipe_config("fusion-lexical", 0))
    assert shipped.objective == ours.objective and shipped.data_cfg.holdout == ours.data_cfg.holdout
    normal = lambda m: {**vars(m), "fusion": {**vars(m.fusion), "lexicon": None}}  # noqa: E731
    assert normal(shipped.model_cfg) == normal(ours.model_cfg)
    assert {k: v for k, v in vars(shipped.data_cfg).items() if k not in ("grammar", "lexicon")} == \
        {k: v for k, v in vars(ours.data_cfg).items() if k not in ("grammar", "lexicon")}
    t = task(recipe_config("fusion-lexical", 0, model=TINY, train=64, valid=16))
    model = t.build_model(None)
    assert model.adapter.n_control == len(control_names(t.bank.names, CONTROL)) and model.adapter.control_dropout == 0.1
    assert isinstance(model.output, LexicalOutput) and model.output.W_o.shape == (len(t.bank.context_free_columns()), TINY["d_model"])


@pytest.mark.parametrize("header, line, message", [
    ("[model.fusion.control]", "dropout = 1.5", "model.fusion.control.dropout: expected a number in [0, 1)"),
    ("[model.fusion.control]", "dropout = -0.1", "model.fusion.control.dropout: expected a number in [0, 1)"),
    ("[model.fusion]", 'lexical_output = "yes"', "model.fusion.lexical_output: expected true or false"),
    ("[model.fusion]", "lexical_output = 1", "model.fusion.lexical_output: expected true or false"),
])
def test_bad_control_keys_are_positioned_config_errors(tmp_path, header, line, message):
    text = (ROOT / "configs" / "semantic_fusion.toml").read_text()
    key = line.split(" = ")[0]
    lines = text.splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith(header))
    at = next(i for i, s in enumerate(lines) if i > start and s.startswith(f"{key} = "))
    lines[at] = line
    (tmp_path / "c.toml").write_text("\n".join(lines))
    with pytest.raises(ConfigError) as err:
        task(load_config(tmp_path / "c.toml"))
    assert str(err.value).startswith(f"{tmp_path / 'c.toml'}:{at + 1}:1: {message}"), str(err.value)


def _controls_seen(model) -> list:
    """Record the control= input of every adapter call."""
    seen: list = []
    model.adapter.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs.get("control")), with_kwargs=True)
    return seen


def test_training_feeds_the_gold_control_and_evaluation_none():
    t = task(recipe_config("fusion-control", 0, model=TINY, train=64, valid=300))
    model = t.build_model(None)
    seen = _controls_seen(model)
    batch = first_batch(t)
    gold = control_from_features(batch["features"], t.bank.names, CONTROL, batch["lengths"])
    assert gold.sum(-1).gt(0).all() and torch.equal(batch["control"], gold)
    model.train()
    t.loss(model, batch)
    assert torch.equal(seen[-1], gold)  # the model gets the gold control (it drops rows itself)
    seen.clear()
    t.evaluate(model)
    valid = list(t.sentence_batches("valid"))
    assert len(seen) == len(valid) == 2
    assert all(c is not None and c.shape == (len(b["ids"]), t.n_control) and c.eq(0).all() for c, b in zip(seen, valid))


def test_the_baseline_has_no_features_and_no_control_whatever_the_keys():
    plain = task(recipe_config("baseline", 0, model=TINY, train=64, valid=16))
    asked = task(recipe_config("baseline", 0, model={**TINY, "control": True, "lexical_output": True}, train=64, valid=16))
    assert asked.n_control == 0 and "control" not in asked.train_rows() and all("control" not in b for b in asked.sentence_batches("valid"))
    models = []
    for t in (plain, asked):
        seed_all(0)
        models.append(t.build_model(None))
    assert all(m.adapter is None and m.output is None and len(m.heads) == 0 for m in models)
    a, b = (m.state_dict() for m in models)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    batch = first_batch(asked)
    for m in models:
        m.eval()
    assert torch.equal(plain.loss(models[0], batch)[0], asked.loss(models[1], batch)[0])


def _held_out_vs_unk(lexical_output: bool) -> torch.Tensor:
    """Train the fusion model (with control) briefly, without the uniformizer; return, for
    each held-out adjective v, the mean over validation positions whose target is an
    adjective of ``log p(v) - log p(<unk>)``."""
    config = recipe_config("fusion-lexical" if lexical_output else "fusion-control", 0, model={**TINY, "uniformizer_weight": 0.0},
                           train=512, valid=128)
    t = task(config)
    seed_all(0)
    model = t.build_model(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for epoch in range(3):
        for batch in t.train_batches(epoch, generator):
            loss, _ = t.loss(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
    vocab = t.auto.vocab
    held = [vocab.id(w) for ws in t.holdout.values() for w in ws]
    unk = vocab.id("<unk>")
    trained = {i for s in t.sentences("train") for i in s}
    assert not (set(held) | {unk}) & trained and not t.bank.table[unk].any()  # both unseen; <unk> has no description
    model.eval()
    gaps = []
    with torch.no_grad():
        for b in t.sentence_batches("valid"):  # control zero, as at evaluation
            logp = model(b["ids"], features=b["features"], control=b["control"]).logits.log_softmax(-1)
            at = torch.isin(b["targets"], t.focus_ids)
            gaps.append(logp[at][:, held] - logp[at][:, [unk]])
    return torch.cat(gaps).mean(0)


def test_lexical_output_gives_held_out_adjectives_probability_from_their_features():
    """The comparison: a held-out adjective v against ``<unk>``, in the same contexts
    (validation positions whose target is an adjective), by ``log p(v) - log p(<unk>)``.
    Both words never occur in training (not as inputs, not as targets), so their embedding
    rows only ever get the same push down through the softmax; ``<unk>`` has all-zero
    lexicon features, v is described (is_adj, pos_* / neg_*). The uniformizer, which
    would lift held-out adjectives directly, is off. With the lexical output layer every
    held-out adjective beats ``<unk>``; the same training without it is the control: its
    gap is what the embeddings alone give, and the layer adds at least 0.5 nats to it."""
    with_layer, without = _held_out_vs_unk(True), _held_out_vs_unk(False)
    assert (with_layer > 0).all(), with_layer
    assert with_layer.mean() > without.mean() + 0.5, (with_layer, without)


def test_reproduce_runs_the_control_and_lexical_variants(tmp_path):
    variants = ("fusion", "fusion-control", "fusion-lexical")
    r = reproduce(seeds=1, out_dir=tmp_path, epochs=1, progress=None, model=TINY, train=128, valid=32, variants=variants,
                  threads=1, timing=False)
    assert all(r["config"]["variant_optim"][v]["lr"] == r["config"]["optim"]["lr"] and r["config"]["variant_optim"][v]["epochs"] == 1
               for v in variants)
    n_control, n_lexical = 12, 15  # sentiment.lex: 9 max: + 3 final: control columns, 15 context-free columns
    d = TINY["d_model"]
    assert r["fusion-control"]["params"] - r["fusion"]["params"] == 2 * n_control * d  # W_s and W_g read c
    assert r["fusion-lexical"]["params"] - r["fusion-control"]["params"] == n_lexical * d  # W_o
    assert all(r[v]["runs"][0]["ppl"] >= r["floor_ppl"] for v in variants)


def test_the_uniformizer_per_class_is_the_sum_over_the_classes():
    from neurosym.lm.losses import class_uniformizer

    joint = task(recipe_config("fusion", 0, model=TINY, train=64, valid=16))
    per = task(recipe_config("fusion-lexical-uniform", 0, model=TINY, train=64, valid=16))
    assert per.objective.uniformizer.per_class and not joint.objective.uniformizer.per_class
    assert len(per.uniformizer_groups) == 2 and len(joint.uniformizer_groups) == 1
    assert sorted(torch.cat(per.uniformizer_groups).tolist()) == per.focus_ids.tolist() == joint.uniformizer_groups[0].tolist()
    seed_all(0)
    net = per.build_model(recipe_config("fusion-lexical-uniform", 0, model=TINY, train=64, valid=16))
    batch = first_batch(per)
    net.eval()  # no dropout: both passes see the same logits
    _, logs = per.loss(net, batch)
    inputs = {k: batch[k] for k in ("features", "control") if k in batch}
    logits = net(batch["ids"], **inputs).logits
    w = per.objective.uniformizer.weight
    expected = sum(float(class_uniformizer(logits, batch["targets"], ids, w).detach()) for ids in per.uniformizer_groups)
    assert logs["uniformizer"] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ConfigError, match="uniformizer_classes"):
        task(recipe_config("fusion", 0, model={"uniformizer_classes": "both"}))


def test_the_verdict_follows_welchs_test_at_005():
    """The generated sentence says "better" only when p < 0.05 and names the threshold;
    the committed 5-seed report (p = 0.007) and the same figures with p = 0.082."""
    r = json.loads((Path(__file__).parents[1] / "docs" / "semantic_fusion_report.json").read_text())
    assert "fusion against the baseline: better (p = 0.0071 < 0.05)" in format_report(r)
    r["welch_ppl"]["p"] = 0.082
    text = format_report(r)
    assert "fusion against the baseline: no difference detected (p = 0.082, not below 0.05)" in text
    assert "beats" not in text and "better (" not in text


# ---------------------------------------------------------------------- issues 28 and 31: lm-task runs, a test split
def test_a_recipe_variant_is_an_lm_run_that_eval_and_generate_read(tmp_path):
    """Each variant is a config of the built-in lm task, saved in its run folder: `neurosym
    eval RUN --json` gives the report's figures again (validation, and test, which the
    report measured after training), and `neurosym generate` samples from it."""
    r = reproduce(seeds=1, out_dir=tmp_path, epochs=1, progress=None, model=TINY, train=64, valid=32, test=48,
                  variants=("baseline-fair", "fusion-fair"), threads=1, timing=False)
    assert r["headline"]["fair"]["split"] == "test" and r["headline"]["fair"]["losses"] == "fair"
    for v in ("baseline-fair", "fusion-fair"):
        run = r[v]["runs"][0]
        saved = json.loads((Path(run["run_dir"]) / "config.json").read_text())
        assert saved["run"]["task"] == "lm" and saved["data"]["layout"] == "sentences" and "aux" in saved["objective"]
        for split, key in (("valid", "ppl"), ("test", "test_ppl")):
            out = CliRunner().invoke(main, ["eval", run["run_dir"], "--split", split, "--json"])
            assert out.exit_code == 0, out.output
            ev = json.loads(out.output)
            assert ev["ppl"] == pytest.approx(run[key], rel=1e-12) and ev["floor_ppl"] == pytest.approx(r["floor_ppl"])
            assert ev["tokens"] > 0 and "sem_mse" in ev  # both models have the aux head
        gen = CliRunner().invoke(main, ["generate", run["run_dir"], "--grammar", "grammars/clause.fsg", "-n", "2", "--json"])
        assert gen.exit_code == 0, gen.output
        assert len(json.loads(gen.output)) == 2


def test_the_uniformizer_pair_is_tested_on_test(tmp_path):
    """baseline-uniform against fusion-lexical-uniform is a headline pair (issue 31: the
    pair's Welch test comes from the recipe's own report, not a transcription)."""
    r = reproduce(seeds=2, out_dir=tmp_path, epochs=1, progress=None, model=TINY, train=64, valid=32, test=48,
                  variants=("baseline-uniform", "fusion-lexical-uniform"), threads=1, timing=False)
    head = r["headline"]["uniform"]
    assert (head["reference"], head["variant"], head["split"], head["losses"]) == ("baseline-uniform", "fusion-lexical-uniform", "test", "uniform")
    a, b = [x["test_ppl"] for x in r["fusion-lexical-uniform"]["runs"]], [x["test_ppl"] for x in r["baseline-uniform"]["runs"]]
    assert head["p"] == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert head["diff"] == pytest.approx(r["fusion-lexical-uniform"]["test_ppl"] - r["baseline-uniform"]["test_ppl"])
    assert set(r["headline"]) == {"uniform"}
    assert "fusion-lexical-uniform against baseline-uniform on test (the per-class uniformizer at 0.1 on both, aux on fusion only)" in format_report(r)


def test_a_variants_optim_entry_overrides_the_recipes_and_epochs_override_both():
    """``*-ctl2`` carry their own learning rate and epochs (issue 30 point 5); the other
    keys stay the recipe's, ``epochs=`` still wins, and the baseline and fusion of the
    pair get the same optimiser and the same losses."""
    from neurosym.experiments.semantic_fusion import RECIPE_OPTIM

    f, b = (recipe_config(v, 0, model=TINY) for v in ("fusion-ctl2", "baseline-ctl2"))
    assert f.optim.lr == b.optim.lr == VARIANTS["fusion-ctl2"]["optim"]["lr"] != RECIPE_OPTIM["lr"]
    assert f.optim.epochs == b.optim.epochs == 16 and f.optim.weight_decay == RECIPE_OPTIM["weight_decay"]
    assert recipe_config("fusion-ctl2", 0, epochs=2, model=TINY).optim.epochs == 2
    assert recipe_config("fusion", 0, model=TINY).optim.lr == RECIPE_OPTIM["lr"]
    assert "optim" in VARIANTS["fusion-ctl2"]  # recipe_config reads it without changing the table
    for cfg in (f, b):
        objective = task(cfg).objective
        assert objective.uniformizer.weight == 2.0 and objective.uniformizer.per_class and objective.label_smoothing == 0.0


def _with_semantic_kl(variant: str, **kl):
    d = recipe_config(variant, 0, model=TINY, train=64, valid=16).to_dict()
    d["objective"].pop("label_smoothing", None)  # plain CE only: not with semantic KL
    d["objective"]["semantic_kl"] = {"lambda": 0.5, "temperature": 0.5, **kl}
    return Config.from_dict(d)


def test_semantic_kl_on_the_lexical_output_takes_the_logits_path():
    """The lexical output's logits are h . (E + W_o f), not hidden @ E^T: the fast path's
    identity does not hold there, so the task takes the logits path (and refuses path = "hidden")."""
    t = task(_with_semantic_kl("fusion-lexical"))
    seed_all(0)
    model = t.build_model(None)
    assert isinstance(model.output, LexicalOutput)
    with torch.no_grad():
        model.output.W_o.normal_()  # it starts at zero, where the two would agree
    model.eval()
    batch = first_batch(t)
    _, logs = t.loss(model, batch)
    out = model(batch["ids"], **{k: batch[k] for k in ("features", "control") if k in batch})
    args = (out.logits, batch["targets"], model.lm_head.weight, 0.5, "cosine", t.pad_id)
    logits_path = semantic_kl_terms(*args)[0].item()
    fast_path = semantic_kl_terms(*args, hidden=out.hidden)[0].item()
    assert abs(fast_path - logits_path) > 1e-3 and logs["kl"] == pytest.approx(logits_path, rel=1e-6)
    with pytest.raises(ConfigError, match=r"objective\.semantic_kl\.path: the fast path needs logits = hidden @ W\^T"):
        task(_with_semantic_kl("fusion-lexical", path="hidden"))


@pytest.mark.parametrize("path", ["auto", "hidden", "logits"])
def test_semantic_kl_path_key_on_the_plain_model_gives_the_same_loss(path):
    t = task(_with_semantic_kl("baseline", path=path))
    seed_all(0)
    model = t.build_model(None)
    model.eval()
    batch = first_batch(t)
    total, logs = t.loss(model, batch)
    ref = task(_with_semantic_kl("baseline", path="logits")).loss(model, batch)[0]
    assert total.item() == pytest.approx(ref.item(), rel=1e-5) and math.isfinite(logs["kl"])
