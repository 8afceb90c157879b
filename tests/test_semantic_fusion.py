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
from neurosym.experiments.semantic_fusion import format_report, recipe_config, reproduce, task
from neurosym.lm.config import load_config

ROOT = Path(__file__).resolve().parents[1]
TINY = {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "aux_hidden": 16}


pytestmark = pytest.mark.usefixtures("one_thread")


def test_shipped_config_loads_and_builds_the_task():
    cfg = load_config(ROOT / "configs" / "semantic_fusion.toml")
    assert cfg.optim.batch_size == 64 and cfg.optim.epochs == 6 and cfg.model["d_model"] == 128
    t = task(recipe_config("fusion", 0, train=300, valid=50))
    vocab = t.auto.vocab
    held = {vocab.id(w) for ws in t.holdout.values() for w in ws}
    assert len(held) == 6 and not any(i in held for s in t.train_sentences for i in s)
    assert any(i in held for s in t.valid_sentences for i in s)  # validation follows the full grammar
    assert t.floor() == pytest.approx(t.auto.entropy().ppl_floor_with_eos)
    model = t.build_model(None)
    batch = t.train_batches(0, torch.Generator().manual_seed(0))[0]
    loss, logs = t.loss(model, batch)
    assert loss.requires_grad and set(logs) == {"ce", "aux", "uniformizer"}


def test_bad_recipe_keys_are_named():
    with pytest.raises(ConfigError, match="kindd"):
        task(recipe_config("fusion", 0, model={"kindd": 1}))
    with pytest.raises(ConfigError, match="holdout"):
        task(recipe_config("fusion", 0, holdout="three"))


def test_reproduce_reports_every_variant_with_the_test_and_step_times(tmp_path):
    variants = ("baseline", "fusion", "fusion-no-aux")
    r = reproduce(seeds=2, out_dir=tmp_path, epochs=1, progress=None, model=TINY, train=256, valid=64, variants=variants, threads=1)
    assert r["variants"] == list(variants)
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
        batch = t.train_batches(0, torch.Generator().manual_seed(0))[0]
        _, logs = t.loss(t.build_model(None), batch)
        assert set(logs) == keys, variant


def test_training_split_differs_from_validation_only_in_the_held_out_words():
    t = task(recipe_config("baseline", 0, train=4000, valid=4000))
    vocab = t.auto.vocab
    held = {vocab.id(w) for ws in t.holdout.values() for w in ws}
    pronouns = {vocab.id("He"), vocab.id("She")}

    def two_clauses(sentences):
        return sum(any(i in pronouns for i in s) for s in sentences) / len(sentences)

    assert not any(i in held for s in t.train_sentences for i in s)
    # P(second clause) = 0.6 in both (rejection sampling used to drop it to 0.375 in training)
    sd = math.sqrt(0.6 * 0.4 / 4000)
    assert two_clauses(t.train_sentences) == pytest.approx(0.6, abs=5 * sd)
    assert two_clauses(t.valid_sentences) == pytest.approx(0.6, abs=5 * sd)


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
    cfg = cfg.replace('out_dir = "runs"', f'out_dir = "{tmp_path.as_posix()}"').replace("train = 8000", "train = 128").replace("valid = 1200", "valid = 32")
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
    kw = dict(seeds=1, out_dir=tmp_path, epochs=1, model=TINY, train=128, valid=32, threads=1, timing=False)
    first = reproduce(progress=lines.append, **kw)
    assert lines[0] == "[1/2] baseline, seed 0" and lines[2] == "[2/2] fusion, seed 0"
    assert lines[1].startswith("      trained: ppl ") and "min left" in lines[1] and "min left" not in lines[3]
    assert "semantic-fusion-baseline-seed0" in capsys.readouterr().err  # a tqdm bar per run, on stderr
    with pytest.raises(NeurosymError, match="--resume to reuse finished runs"):
        reproduce(progress=None, **kw)
    lines.clear()
    again = reproduce(progress=lines.append, resume=True, **kw)
    assert lines[0] == "[1/2] baseline, seed 0 (resuming)" and "finished earlier, reused" in lines[1]
    for v in ("baseline", "fusion"):
        a, b = first[v]["runs"][0], again[v]["runs"][0]
        assert a["ppl"] == b["ppl"] and b["seconds"] > 0  # the real training time, not 0 s
