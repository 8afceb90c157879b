"""`neurosym bench compile`'s token-index part: the figures docs/automata.md quotes
(arcs, the automaton's own index, dense masks) over a small BPE the shared data trains."""

from __future__ import annotations

import pytest
import torch

from neurosym.bench import compile as bench_compile
from neurosym.compile.regex import pattern_dfa, to_automaton
from neurosym.data import shared_data_dir
from neurosym.vocab import Vocab

needs_data = pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data (WikiText-2, UD English-EWT)")


@needs_data
def test_token_index_rows_count_what_they_say():
    r = bench_compile.bench_token_index(1000)
    vocab = Vocab.from_tokenizer(bench_compile.bpe_tokenizer(1000))
    assert r["vocab_size"] == len(vocab) and [x["name"] for x in r["regexes"]] == list(bench_compile.TOKEN_REGEXES)
    for row in r["regexes"]:
        auto = to_automaton(pattern_dfa(row["pattern"]), vocab)
        Q, V = auto.num_states, len(vocab)
        assert row["token_states"] == Q and row["index_bytes"] == auto.index_bytes()
        assert row["allowed_arcs"] == int(auto.mask(torch.arange(Q)).sum())  # every allowed (state, token) pair, from the packed masks
        assert row["mask_bool_bytes"] == Q * V and row["mask_bitset_bytes"] == Q * ((V + 7) // 8)
    assert "index" in bench_compile.format_results({"word_list": {"words": 1, "trie_seconds": 1.0, "trie_states": 2, "interegular_seconds": None,
                                                                   "interegular_states": None, "interegular_timeout": 5.0, "speedup": None, "trie_cpu_seconds": 0.5},
                                                    "token_index": r})


@needs_data
def test_word_list_part_times_both_in_wall_and_cpu_seconds():
    w = bench_compile.bench_words(40, reference_timeout=120)
    assert w["words"] == 40 and w["interegular_timeout"] is None
    assert w["trie_states"] <= w["interegular_states"]  # ours is minimal; interegular's need not be
    assert w["trie_cpu_seconds"] >= 0 and w["interegular_cpu_seconds"] > 0
    assert w["speedup"] == w["interegular_seconds"] / w["trie_seconds"]
    assert w["speedup_cpu"] is None if w["trie_cpu_seconds"] == 0 else w["speedup_cpu"] == w["interegular_cpu_seconds"] / w["trie_cpu_seconds"]
