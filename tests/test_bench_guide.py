"""``neurosym bench guide`` (neurosym/bench/guide.py) on a small local BPE: every part runs
through the public guide API, reports its figures, and the reference engine is compared
where it is installed (XGrammar, the ``bench`` extra) and left out, said so, where not."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from neurosym.bench import guide as bench
from neurosym.bench.decode_cfg import json_documents
from neurosym.vocab import Vocab

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bpe():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    lines = [line for d in json_documents() for line in d.splitlines()] + ["Alice wrote 1999 to bob@mail.org"] * 5
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return tok, Vocab.from_tokenizer(tok)


@pytest.mark.parametrize("reference", [False, True], ids=["alone", "xgrammar"])
def test_every_part_runs_and_reports(bpe, reference):
    tok, vocab = bpe
    xg = bench._xgrammar(vocab) if reference else None
    if reference and xg is None:
        pytest.skip("xgrammar is not installed (the bench extra)")
    rows = bench.compile_times(vocab, 2, xg)
    assert [r["grammar"] for r in rows] == ["capitalised", "year", "email", "json"]
    for r in rows:
        assert r["neurosym_compile_ms"] > 0 and r["neurosym_first_mask_ms"] > 0 and r["neurosym_cached_ms"] >= 0
        assert ("xgrammar_compile_ms" in r) == reference
    steps = bench.json_steps(tok, vocab, xg)
    assert steps["refused"]["neurosym"] == 0 and steps["documents"] == len(json_documents())
    assert steps["neurosym"]["steps"] > 100 and steps["neurosym"]["p50_us"] <= steps["neurosym"]["p90_us"] <= steps["neurosym"]["p99_us"]
    assert ("xgrammar_builtin_json" in steps) == reference
    if not reference:
        assert steps["documents_compared"] == steps["documents"]  # alone, every document counts
    prior = bench.json_prior(tok, vocab, max_tokens=12)
    assert prior["steps"] > 50 and prior["rows_sum_to_one_within"] < 1e-9 and prior["p50_ms"] > 0
    text = bench.format_results({"bpe_size": len(vocab), "vocabulary": {"build_ms": 1.0, "again_ms": 0.01}, "compile": rows,
                                 "json_steps": steps, "json_prior": prior})
    assert "JSON step" in text and "exact prior" in text


def test_the_command_says_what_it_needs_without_the_shared_data(monkeypatch, tmp_path):
    import neurosym.data
    from neurosym.cli.main import main

    monkeypatch.setenv("NEUROSYM_SHARED_DATA", str(tmp_path / "absent"))
    monkeypatch.setattr(neurosym.data, "CHECKOUT_SHARED_DATA", tmp_path / "absent too")
    r = CliRunner().invoke(main, ["bench", "guide", "--repeats", "1"])
    assert r.exit_code != 0 and "Traceback" not in r.output and "shared" in r.output, r.output
