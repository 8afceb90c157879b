"""Soft Levenshtein: exact at T -> 0 against plain references, padding, gradients."""

import random
import zlib

import pytest
import torch

import neurosym
from neurosym.errors import NeurosymError
from neurosym.layers.softlev import soft_levenshtein, soft_levenshtein_to_automaton
from neurosym.vocab import Vocab


pytestmark = pytest.mark.usefixtures("one_thread")


def edit_distance(x, y, sub=lambda p, q: float(p != q), ins=1.0, dele=1.0) -> float:
    """The textbook dynamic programme, one cell at a time."""
    prev = [j * ins for j in range(len(y) + 1)]
    for i, p in enumerate(x, 1):
        cur = [i * dele]
        for j, q in enumerate(y, 1):
            cur.append(min(prev[j] + dele, cur[j - 1] + ins, prev[j - 1] + sub(p, q)))
        prev = cur
    return prev[-1]


def pad(seqs, fill=-1):
    L = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), L), fill, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in seqs])


def random_pairs(n, V, max_len, seed):
    rng = random.Random(seed)
    xs = [[rng.randrange(V) for _ in range(rng.randint(0, max_len))] for _ in range(n)]
    ys = [[rng.randrange(V) for _ in range(rng.randint(0, max_len))] for _ in range(n)]
    return xs, ys


# ---------------------------------------------------------------------- between sequences
@pytest.mark.parametrize("seed", [0, 1])
def test_small_temperature_is_the_edit_distance(seed):
    xs, ys = random_pairs(300, 4, 10, seed)
    a, la = pad(xs)
    b, lb = pad(ys)
    exact = torch.tensor([edit_distance(x, y) for x, y in zip(xs, ys)])
    torch.testing.assert_close(soft_levenshtein(a, b, 0.0, la, lb), exact, rtol=0, atol=0)
    soft = soft_levenshtein(a, b, 1e-3, la, lb)
    assert (soft <= exact + 1e-4).all() and (soft > exact - 0.02).all()
    assert torch.equal(soft.round(), exact)
    # larger temperatures only lower it (more alignments count)
    assert (soft_levenshtein(a, b, 0.5, la, lb) <= soft + 1e-5).all()


def test_cost_matrix_and_costs():
    V = 5
    g = torch.Generator().manual_seed(0)
    C = torch.rand(V, V, generator=g) * 2
    xs, ys = random_pairs(100, V, 7, 2)
    a, la = pad(xs)
    b, lb = pad(ys)
    exact = torch.tensor([edit_distance(x, y, lambda p, q: float(C[p, q]), 0.7, 1.3) for x, y in zip(xs, ys)])
    got = soft_levenshtein(a, b, 0.0, la, lb, cost_matrix=C, ins_cost=0.7, del_cost=1.3)
    torch.testing.assert_close(got, exact)
    got = soft_levenshtein(a, b, 1e-3, la, lb, cost_matrix=C, ins_cost=0.7, del_cost=1.3)
    assert (got - exact).abs().max() < 0.02


def test_embeddings_use_euclidean_substitution_costs():
    xs, ys = random_pairs(50, 4, 6, 3)
    a, la = pad(xs, fill=0)
    b, lb = pad(ys, fill=0)
    eye = torch.eye(4) / 2**0.5  # distinct one-hot rows are at distance 1
    by_ids = soft_levenshtein(a, b, 0.1, la, lb)
    by_vectors = soft_levenshtein(eye[a], eye[b], 0.1, la, lb)
    torch.testing.assert_close(by_vectors, by_ids)


def test_padding_values_do_not_matter():
    xs, ys = random_pairs(40, 3, 6, 4)
    a, la = pad(xs, fill=-1)
    b, lb = pad(ys, fill=-1)
    a2, _ = pad(xs, fill=2)
    b2, _ = pad(ys, fill=0)
    torch.testing.assert_close(soft_levenshtein(a, b, 0.3, la, lb), soft_levenshtein(a2, b2, 0.3, la, lb))
    one = soft_levenshtein(torch.tensor([xs[5]]).reshape(1, -1), torch.tensor([ys[5]]).reshape(1, -1), 0.3)
    torch.testing.assert_close(one[0], soft_levenshtein(a, b, 0.3, la, lb)[5])


def test_gradcheck_costs():
    a = torch.tensor([[0, 1, 2, 1], [2, 2, 0, 0]])
    b = torch.tensor([[1, 2, 0], [0, 1, 1]])
    la, lb = torch.tensor([4, 2]), torch.tensor([3, 3])
    C = torch.rand(3, 3, dtype=torch.double, generator=torch.Generator().manual_seed(0)).requires_grad_()
    ins = torch.tensor(0.8, dtype=torch.double, requires_grad=True)
    dele = torch.tensor(1.1, dtype=torch.double, requires_grad=True)
    fn = lambda C, ins, dele: soft_levenshtein(a, b, 0.5, la, lb, cost_matrix=C, ins_cost=ins, del_cost=dele)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (C, ins, dele))
    ea = torch.randn(2, 4, 3, dtype=torch.double, requires_grad=True)
    eb = torch.randn(2, 3, 3, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y: soft_levenshtein(x, y, 0.5, la, lb), (ea, eb))


def test_bad_arguments():
    a = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(NeurosymError, match="temperature"):
        soft_levenshtein(a, a, -1.0)
    with pytest.raises(NeurosymError, match="lengths"):
        soft_levenshtein(a, a, 1.0, a_lengths=torch.tensor([4, 1]))
    with pytest.raises(NeurosymError):
        soft_levenshtein(a, a.float().unsqueeze(-1), 1.0)


# ---------------------------------------------------------------------- to an automaton's language
def brute_force_distance(x: list[int], auto: neurosym.Automaton) -> float:
    """Min edit distance from x to every accepted string, enumerated through the DFA up to
    length 2|x| + Q (longer strings are further than the shortest accepted one), with the
    textbook DP row per prefix (a subtree is skipped once its row cannot beat the best)."""
    delta, final = auto.delta.tolist(), auto.final.tolist()
    best = float("inf")
    bound = 2 * len(x) + auto.num_states

    def walk(q, row, depth):
        nonlocal best
        if final[q]:
            best = min(best, row[-1])
        if min(row) >= best or depth == bound:
            return
        for tok, nxt in enumerate(delta[q]):
            if nxt >= 0:
                new = [row[0] + 1]
                for i, p in enumerate(x, 1):
                    new.append(min(row[i] + 1, new[i - 1] + 1, row[i - 1] + (p != tok)))
                walk(nxt, new, depth + 1)

    walk(auto.start, list(range(len(x) + 1)), 0)
    return best


@pytest.mark.parametrize("pattern", ["a(b|c)*a", "(ab)+", "abc|cc", "a*b*c", "(a|b)(a|b)c?", "b{3}", "c"])
def test_distance_to_an_automaton_is_exact_at_small_temperature(pattern):
    vocab = Vocab.chars("abc", specials=())
    auto = neurosym.compile_regex(pattern, vocab=vocab)
    rng = random.Random(zlib.crc32(pattern.encode()))  # hash() of a str changes per process
    xs = [[rng.randrange(3) for _ in range(rng.randint(0, 7))] for _ in range(40)]
    xs += [s for s in auto.sample(5, max_len=6, seed=0)]  # distance 0
    ids, lengths = pad(xs)
    exact = torch.tensor([float(brute_force_distance(x, auto)) for x in xs])
    assert exact[-5:].eq(0).all()
    torch.testing.assert_close(soft_levenshtein_to_automaton(ids, auto, 0.0, lengths), exact, rtol=0, atol=0)
    soft = soft_levenshtein_to_automaton(ids, auto, 1e-3, lengths)
    assert (soft <= exact + 1e-4).all() and (soft > exact - 0.02).all()


def test_distance_to_an_automaton_matches_the_sequence_distance_for_a_literal():
    vocab = Vocab.chars("abcd", specials=())
    auto = neurosym.compile_regex("abcd", vocab=vocab)
    xs = [[0, 1, 2, 3], [], [3, 2, 1, 0], [0, 0, 1, 1, 2]]
    ids, lengths = pad(xs)
    target = torch.tensor([[0, 1, 2, 3]] * len(xs))
    # a single string: the two DPs count the same alignments, at any temperature
    for T in (0.0, 0.3, 1.0):
        torch.testing.assert_close(
            soft_levenshtein_to_automaton(ids, auto, T, lengths),
            soft_levenshtein(ids, target, T, a_lengths=lengths),
        )


def test_gradcheck_automaton_costs():
    vocab = Vocab.chars("abc", specials=())
    auto = neurosym.compile_regex("a(b|c)*", vocab=vocab)
    ids = torch.tensor([[0, 2, 2, 1], [1, 1, 0, 0]])
    lengths = torch.tensor([4, 3])
    C = (torch.rand(3, 3, dtype=torch.double, generator=torch.Generator().manual_seed(1)) + 0.2).requires_grad_()
    ins = torch.tensor(0.9, dtype=torch.double, requires_grad=True)
    dele = torch.tensor(1.2, dtype=torch.double, requires_grad=True)
    fn = lambda C, i, d: soft_levenshtein_to_automaton(ids, auto, 0.5, lengths, cost_matrix=C, ins_cost=i, del_cost=d)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (C, ins, dele))
    out = fn(C, ins, dele)
    out.sum().backward()
    assert C.grad.abs().sum() > 0 and ins.grad != 0 and dele.grad != 0
