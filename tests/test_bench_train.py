"""neurosym bench train on a tiny model: every variant timed, ratios to the baseline."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from neurosym.bench.train import format_results, run
from neurosym.errors import NeurosymError


def test_bench_train_times_every_variant_at_the_same_size():
    r = run(repeats=2, warmup=1, batch_size=2, window=8, model={"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32})
    assert set(r) == {"setup", "baseline", "fusion", "semantic-kl", "semantic-kl-logits", "idea-gating", "idea-gating-triton", "idea-gating-compile"}
    assert r["idea-gating-triton"] == {"skipped": "the Triton kernels are timed on CUDA only (device cpu)"}  # and the reason is in the JSON
    assert r["idea-gating-compile"] == {"skipped": "the compiled objective is timed on CUDA only (device cpu)"}
    assert r["baseline"]["ratio_best"] == 1.0 and r["baseline"]["ratio_median"] == 1.0
    assert r["semantic-kl"]["params"] == r["semantic-kl-logits"]["params"] == r["baseline"]["params"]  # the objective adds no weights
    assert r["fusion"]["params"] > r["baseline"]["params"]  # the adapter and the auxiliary head
    assert r["idea-gating"]["params"] > r["baseline"]["params"]  # the tied idea head's MLP
    for v in ("fusion", "semantic-kl", "semantic-kl-logits", "idea-gating"):
        assert r[v]["best_ms"] > 0 and r[v]["ratio_best"] == pytest.approx(r[v]["best_ms"] / r["baseline"]["best_ms"])
    text = format_results(r)
    assert "| semantic-kl |" in text and "| idea-gating-triton |" not in text and "idea-gating-triton: skipped (the Triton kernels" in text
    with pytest.raises(NeurosymError, match="unknown variant"):
        run(variants=("idea",), repeats=1)


def test_cli_bench_train_help():
    from neurosym.cli.main import main

    result = CliRunner().invoke(main, ["bench", "train", "--help"])
    assert result.exit_code == 0 and "--repeats" in result.output and "--json" in result.output


def test_cli_bench_train_times_the_variants_named_and_refuses_an_unknown_one():
    import json

    from neurosym.cli.main import main

    result = CliRunner().invoke(main, ["bench", "train", "--variants", "semantic-kl-logits", "--repeats", "1", "--warmup", "0", "--batch", "2", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.output)
    assert set(r) == {"setup", "baseline", "semantic-kl-logits"} and r["setup"]["repeats"] == 1 and r["setup"]["batch"] == 2
    bad = CliRunner().invoke(main, ["bench", "train", "--variants", "semantic-kl,fast"])
    assert bad.exit_code != 0 and "unknown variant(s) fast; expected some of baseline" in bad.output and "Traceback" not in bad.output


def test_bench_train_counts_launches_as_a_cpu_proxy():
    r = run(variants=("idea-gating",), repeats=1, warmup=1, batch_size=16, window=8,
            model={"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}, launches=True)
    assert set(r) == {"setup", "baseline", "idea-gating"} and "CPU proxy" in r["setup"]["launches"]
    assert r["baseline"]["launches"] > 50 and r["baseline"]["launch_ratio"] == 1.0
    idea = r["idea-gating"]
    assert idea["launches"] > r["baseline"]["launches"]  # the idea head, the gate and the fused objective add operators
    assert idea["launch_ratio"] == pytest.approx(idea["launches"] / r["baseline"]["launches"])
    # 16 x 8 rows of 4,710 entries: 55 rows per CPU block (3 blocks) against one block, which launches fewer operators
    assert idea["launches_one_block"] < idea["launches_cpu_blocks"]
    assert idea["block_elements"] == 1 << 18  # on the CPU the cache-sized blocks
    text = format_results(r)
    assert "| idea-gating |" in text and "launch ratio" in text and "one block" in text


def test_bench_train_refuses_a_missing_device():
    with pytest.raises(NeurosymError, match="--device"):
        run(repeats=1, device="cuda:7" if __import__("torch").cuda.is_available() else "cuda")
    with pytest.raises(NeurosymError, match="--device"):
        run(repeats=1, device="tpu")


def test_bench_train_on_the_standard_train_split_vocabulary(tmp_path, monkeypatch):
    """--split train reads the vocabulary and the batch from train.txt (the recipes' now);
    without any train.txt it says so instead of falling back silently."""
    folder = tmp_path / "wikitext-2"
    folder.mkdir()
    words = [f"w{i}" for i in range(40)]
    (folder / "train.txt").write_text("\n".join(" ".join(words[(j + k) % 40] for k in range(12)) for j in range(30)) + "\n")
    tiny = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}
    r = run(variants=("baseline",), repeats=1, warmup=1, batch_size=2, window=8, min_freq=1, model=tiny, split="train", data_dir=tmp_path)
    assert r["setup"]["dataset"].startswith("WikiText-2 train.txt") and r["setup"]["vocab_size"] == 40 + 3  # + pad, unk, eos
    with pytest.raises(NeurosymError, match="--split"):
        run(repeats=1, split="test")
    monkeypatch.setenv("NEUROSYM_SHARED_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setattr("neurosym.data.CHECKOUT_SHARED_DATA", tmp_path / "nowhere")
    with pytest.raises(NeurosymError, match="train.txt"):
        run(repeats=1, split="train")
