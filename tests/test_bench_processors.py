"""`neurosym bench decode`'s processor part: GrammarMask per token, NumPy against the
tensor backend, over a small BPE (the shared data trains it)."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from neurosym.bench import decode, processors
from neurosym.cli.main import main
from neurosym.compile.regex import compile_regex
from neurosym.data import shared_data_dir
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab

needs_data = pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (WikiText-2, UD English-EWT)")


def test_walks_end_and_the_check_catches_a_disagreement(monkeypatch):
    vocab = Vocab.words(["a", "b", "c", "bc"])
    auto, eos = compile_regex(r"a(bc)?b*", vocab), vocab.id("<eos>")
    walk = processors.draw_walk(auto, eos, batch=4, max_steps=40, seed=0)
    assert walk and all(t.shape == (4,) for t, _ in walk)
    assert bool((walk[-1][0] == eos).all()) or len(walk) == 40
    scores = torch.randn(4, len(vocab))
    processors.check_same(auto, eos, walk, scores)  # the two backends agree
    monkeypatch.setattr(processors, "replay", lambda mask, walk, scores, times=None: [torch.full((1,), float(mask.tracker.backend == "torch"))])
    with pytest.raises(NeurosymError, match="disagree"):
        processors.check_same(auto, eos, walk, scores)


@needs_data
def test_processor_part_measures_both_backends(monkeypatch):
    monkeypatch.setattr(decode, "BANK_PATTERNS", decode.BANK_PATTERNS[:1])
    r = processors.run(n_words=50, bpe_size=1000, repeats=1, max_steps=8, progress=False)
    assert list(r["patterns"]) == ["numbers:SCIENTIFIC", "50 words"] and r["vocab_size"] == 1001
    for rows in r["patterns"].values():
        assert set(rows) == {1, 32}
        for row in rows.values():
            assert 0 < row["steps"] <= 8
            for clock in processors.CLOCKS:
                c = row[clock]
                for b in processors.BACKENDS:
                    for part in ("call", "advance", "step"):
                        p50, p99 = c[f"{b}_{part}_us"]
                        assert 0 < p50 <= p99
                assert c["ratio_p50"] == pytest.approx(c["torch_step_us"][0] / c["numpy_step_us"][0])
    text = processors.format_results(r)
    assert "torch/numpy" in text and "geometric mean" in text and "CPU time" in text


@needs_data
def test_cli_runs_the_processor_part_alone():
    r = CliRunner().invoke(main, ["bench", "decode", "--skip-index", "--skip-generation", "--words", "20", "--bpe-size", "1000", "--repeats", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert set(out) == {"processors"} and "20 words" in out["processors"]["patterns"]
