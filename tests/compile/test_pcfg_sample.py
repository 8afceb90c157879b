"""The one PCFG sampler (compile/pcfg_sample.expand): trees of the grammar as written
and token ids of the compiled tensors both follow the grammar's exact sentence
probabilities, epsilon and unit rules included, and both condition on ``max_len``."""

from __future__ import annotations

from collections import Counter

from neurosym.compile.pcfg import compile_pcfg
from neurosym.compile.pcfg_sample import Tree, sample_sentences, sample_trees
from neurosym.dsl.pcfg import parse_pcfg

GRAMMAR = """
S -> A B [0.5] | 'c' [0.3] | U [0.2]
A -> 'a' [0.6] | [0.4]
B -> 'b' [0.7] | 'b' 'b' [0.3]
U -> A [1]
"""
# every sentence, with the sum over its derivations
EXACT = {
    ("a", "b"): 0.5 * 0.6 * 0.7, ("a", "b", "b"): 0.5 * 0.6 * 0.3, ("b",): 0.5 * 0.4 * 0.7, ("b", "b"): 0.5 * 0.4 * 0.3,
    ("c",): 0.3, ("a",): 0.2 * 0.6, (): 0.2 * 0.4,
}
N = 20_000


def frequencies_match(counts: Counter, exact: dict, n: int) -> None:
    assert set(counts) <= set(exact)
    for s, p in exact.items():
        sd = (p * (1 - p) / n) ** 0.5
        assert abs(counts[s] / n - p) <= 5 * sd, (s, counts[s] / n, p)


def test_trees_of_the_grammar_as_written_follow_its_probabilities():
    g = parse_pcfg(GRAMMAR)
    sentences = sample_sentences(g, N, seed=1)
    frequencies_match(Counter(map(tuple, sentences)), EXACT, N)
    tree = sample_trees(g, 1, seed=3)[0]
    assert isinstance(tree, Tree) and tree.label == "S" and all(isinstance(c, (Tree, str)) for c in tree.children)
    assert sample_sentences(g, 50, seed=7) == sample_sentences(g, 50, seed=7)


def test_compiled_tensors_sample_the_same_language():
    rt = compile_pcfg(parse_pcfg(GRAMMAR))
    sentences = rt.sample(N, seed=2)
    frequencies_match(Counter(tuple(rt.vocab.tokens[i] for i in s) for s in sentences), EXACT, N)


def test_max_len_conditions_both_samplers():
    g = parse_pcfg(GRAMMAR)
    short = {s: p for s, p in EXACT.items() if len(s) <= 1}
    total = sum(short.values())
    short = {s: p / total for s, p in short.items()}
    frequencies_match(Counter(map(tuple, sample_sentences(g, N, seed=4, max_len=1))), short, N)
    rt = compile_pcfg(g)
    got = Counter(tuple(rt.vocab.tokens[i] for i in s) for s in rt.sample(N, seed=5, max_len=1))
    frequencies_match(got, short, N)
    assert max(len(t.leaves()) for t in sample_trees(g, 500, seed=6, max_len=2)) <= 2
