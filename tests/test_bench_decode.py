"""`neurosym bench decode`: the flattened bank patterns mean what the banks mean, the
index comparison runs (and agrees with XGrammar's masks where it is installed), and the
generation timings are measured."""

from __future__ import annotations

import importlib.util
import re

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import neurosym
from neurosym.bench import decode
from neurosym.cli.main import main
from neurosym.data import shared_data_dir, shipped_file
from neurosym.dsl.regex import read_regex_bank
from neurosym.errors import NeurosymError

HYP = dict(deadline=None, derandomize=True, database=None, max_examples=200)


@pytest.mark.parametrize("file, name", decode.BANK_PATTERNS)
def test_flat_regex_accepts_what_the_bank_pattern_accepts(file, name):
    bank = neurosym.load(shipped_file(f"grammars/{file}"))
    auto = bank[name]
    flat = decode.flat_regex(read_regex_bank(shipped_file(f"grammars/{file}")), name)
    for s in auto.char_dfa.sample(300, max_len=40, seed=1):
        assert re.fullmatch(flat, s, re.ASCII), s
    flat_auto = neurosym.compile_regex(flat)
    for s in flat_auto.char_dfa.sample(300, max_len=40, seed=2):
        assert auto.char_dfa.accepts(s), s


@settings(**HYP)
@given(st.text(alphabet="ab\\dws[]^.-_ ", max_size=8))
def test_ascii_shorthands_keep_re_ascii_semantics(text):
    pattern = r"[\w.+-]+@\d\s" + re.escape(text)
    flat = decode.ascii_shorthands(pattern)
    for probe in ["a.b@1 " + text, "é@1 " + text, "a@١ " + text, "a@1\u00a0" + text]:
        assert bool(re.fullmatch(pattern, probe, re.ASCII)) == bool(re.fullmatch(flat, probe)), (probe, flat)


def test_negated_shorthands_are_refused():
    with pytest.raises(NeurosymError, match=r"\\W"):
        decode.ascii_shorthands(r"\W+")


def test_generation_timings_are_measured():
    g = decode.bench_generation(batch=2, steps=8, repeats=1)
    for clock in ("wall", "cpu"):
        t = g[clock]
        assert t["forward_cached_ms"] > 0 and t["forward_recomputed_ms"] > 0 and t["processor_chain_ms"] > 0 and t["sampling_ms"] > 0
        assert t["chain_share_of_forward"] == pytest.approx(t["processor_chain_ms"] / t["forward_cached_ms"])
        assert t["kv_speedup"] == pytest.approx(t["forward_recomputed_ms"] / t["forward_cached_ms"])
    assert "GrammarMask" in g["chain"][0]
    assert "processor chain / cached forward" in decode.format_generation(g)


@pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (WikiText-2, UD English-EWT)")
def test_index_comparison_runs_and_agrees_with_xgrammar(monkeypatch):
    monkeypatch.setattr(decode, "BANK_PATTERNS", decode.BANK_PATTERNS[:1])
    monkeypatch.setattr(decode, "rss_growth", lambda *a, **k: None)  # the child processes are the slow part
    r = decode.run(n_words=50, bpe_size=1000, repeats=1, progress=False)
    assert [row["pattern"] for row in r["patterns"]] == ["numbers:SCIENTIFIC", "50 words"]
    for row in r["patterns"]:
        ours = row["engines"]["neurosym"]
        assert ours["build_seconds"] > 0 and ours["build_cpu_seconds"] > 0 and ours["memory_bytes"] > 0 and ours["strings_refused"] == 0
        for part in ("mask", "advance", "step"):  # per-token times, the step being mask + advance
            assert 0 < ours[f"{part}_median_us"] <= ours[f"{part}_p99_us"]
        assert ours["step_median_us"] >= ours["mask_median_us"]
        assert set(row["batched_step"]) == set(decode.BATCHES) and all(t["numpy_us"] > 0 and t["torch_us"] > 0 for t in row["batched_step"].values())
        xgr = row["engines"]["xgrammar"]
        if importlib.util.find_spec("xgrammar") is None:
            assert "not installed" in xgr["error"]
        else:
            assert xgr["mask_disagreements"] == 0 and xgr["mask_steps_compared"] == row["steps"] and xgr["strings_refused"] == 0
            assert xgr["advance_median_us"] > 0 and xgr["step_p99_us"] > 0
    text = decode.format_results(r)
    assert "masks differing" in text and "batched advance" in text
    if importlib.util.find_spec("xgrammar") is not None:
        g = r["ratios"]["xgrammar"]
        assert set(g) == {f"{part}_{q}_us" for part in ("mask", "advance", "step") for q in ("median", "p99")} and all(x > 0 for x in g.values())
        assert "theirs/ours xgrammar:" in text and "geometric mean" in text


def test_step_ratios_are_geometric_means_of_theirs_over_ours():
    def engine(t: float) -> dict:
        return {f"{part}_{q}_us": t * k for part, k in (("mask", 1), ("advance", 2), ("step", 3)) for q in ("median", "p99")}

    r = {"patterns": [
        {"engines": {"neurosym": engine(1.0), "other": engine(4.0), "broken": {"error": "x"}}},
        {"engines": {"neurosym": engine(2.0), "other": engine(2.0)}},
        {"engines": {"neurosym": {"error": "refused"}, "other": engine(9.0)}},
    ]}
    g = decode.step_ratios(r)
    assert set(g) == {"other"}
    assert all(x == pytest.approx(2.0) for x in g["other"].values())  # sqrt(4 * 1)


def test_cli_runs_the_generation_part():
    r = CliRunner().invoke(main, ["bench", "decode", "--skip-index", "--skip-processors", "--batch", "2", "--repeats", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert '"kv_speedup"' in r.output
