"""Independent reference implementations that the library is checked against.

Slow, obviously-correct oracles (brute-force enumeration, float64 dynamic programs
written the textbook way) live here, not in the library: the library holds each
algorithm once, and the tests compare it with these. In the spirit of
pytorch-struct's ``tests/extensions.py``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import torch

from neurosym.dsl.pcfg import Terminal

# --- automata and edit distances
#     Enumerate a character DFA's language and take the least textbook Levenshtein
#     distance: the reference for neurosym.synth.distance.distances.


def levenshtein(a: str, b: str) -> int:
    """Plain edit distance between two strings ."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def language_strings(dfa, max_len: int, alphabet: Sequence[str]) -> list[str]:
    """Every accepted string over ``alphabet`` of at most ``max_len`` characters."""
    out: list[str] = []
    classes = [(c, dfa.partition.class_of.get(c, 0)) for c in alphabet]
    frontier = [("", 0)]
    for depth in range(max_len + 1):
        nxt = []
        for w, q in frontier:
            if dfa.final[q]:
                out.append(w)
            if depth == max_len:
                continue
            for c, k in classes:
                q2 = int(dfa.trans[q, k])
                if q2 >= 0:
                    nxt.append((w + c, q2))
        frontier = nxt
    return out


def brute_force_distance(dfa, s: str, max_len: int | None = None) -> float:
    """Edit distance to the language by enumeration (slow).

    The alphabet is the characters of ``s`` plus one character of every class (an
    unmentioned one for class 0); words have at most ``max_len`` characters (default
    ``len(s) + states + 2``, enough for the small automata of the tests)."""
    part = dfa.partition
    alphabet = set(s)
    for k, members in enumerate(part.members):
        if members:
            alphabet.add(members[0])
    unmentioned = next(ch for ch in "\u2603\u00a4~#" if ch not in part.class_of)
    alphabet.add(unmentioned)
    max_len = max_len if max_len is not None else len(s) + dfa.num_states + 2
    words = language_strings(dfa, max_len, sorted(alphabet))
    return float(min((levenshtein(s, w) for w in words), default=math.inf))


# --- PCFG oracles
#     CKY by hand over spans: the probability of one sentence under a CNF grammar
#     (float64 numpy) and under compiled RuleTensors (torch, in the tensors' dtype).


def cnf_prob(cnf, sentence) -> float:
    """P(sentence) by CKY; ``sentence`` is a sequence of :class:`Terminal` (or of words,
    read as literal terminals). A reference implementation: loops over spans."""
    seq = [s if isinstance(s, Terminal) else Terminal("literal", s) for s in sentence]
    L = len(seq)
    if L == 0:
        return float(cnf.empty)
    col = {k: i for i, k in enumerate(cnf.terminals)}
    if any(s not in col for s in seq):
        return 0.0
    pre = np.stack([cnf.lexical[:, col[s]] for s in seq])  # (L, T)
    if L == 1:
        return float(cnf.root_term @ pre[0])
    G = cnf.binary_dense()
    chart = np.zeros((L, L + 1, cnf.N + cnf.T))
    for i in range(L):
        chart[i, i + 1, cnf.N :] = pre[i]
    for width in range(2, L + 1):
        for i in range(L - width + 1):
            j = i + width
            acc = np.zeros((cnf.N + cnf.T, cnf.N + cnf.T))
            for k in range(i + 1, j):
                acc += np.outer(chart[i, k], chart[k, j])
            chart[i, j, : cnf.N] = np.einsum("abc,bc->a", G, acc)
    return float(cnf.root @ chart[0, L, : cnf.N])


def rule_tensors_log_prob(rt, ids) -> float:
    """``log P(sentence)`` for one sentence of token ids, by a plain CKY over spans
    (a reference for tests and small inputs; batched inside lives in ``neurosym.layers``)."""
    ids = [int(i) for i in ids]
    L = len(ids)
    if L == 0:
        return float(rt.empty)
    pre = rt.emit[:, ids].T  # (L, T)
    if L == 1:
        return float(torch.logsumexp(rt.root_term + pre[0], 0))
    N, S = rt.N, rt.N + rt.T
    ninf = torch.tensor(float("-inf"), dtype=rt.binary.dtype, device=rt.binary.device)
    chart: dict[tuple[int, int], torch.Tensor] = {}
    for i in range(L):
        chart[i, i + 1] = torch.cat([ninf.expand(N), pre[i]])
    for width in range(2, L + 1):
        for i in range(L - width + 1):
            j = i + width
            left = torch.stack([chart[i, k] for k in range(i + 1, j)])  # (K, S)
            right = torch.stack([chart[k, j] for k in range(i + 1, j)])
            pair = torch.logsumexp(left[:, :, None] + right[:, None, :], 0)  # (S, S)
            inside = torch.logsumexp((rt.binary + pair).reshape(N, S * S), 1)
            chart[i, j] = torch.cat([inside, ninf.expand(rt.T)])
    return float(torch.logsumexp(rt.root + chart[0, L][:N], 0))


def masked_log_sum_exp(x: torch.Tensor) -> torch.Tensor:
    """``log sum exp`` over the last dim, -inf for an all ``-inf`` slice, with a gradient
    that is 0 there (torch.logsumexp's is NaN), so references can be differentiated on
    sparse grammars."""
    m = x.detach().amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    s = (x - m).exp().sum(-1)
    some = s > 0
    return torch.where(some, torch.where(some, s, torch.ones_like(s)).log() + m.squeeze(-1), torch.full_like(s, float("-inf")))


def cky_log_z(terms: torch.Tensor, rules: torch.Tensor, roots: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """log Z (B,) of inside potentials (terms (B, L, T), rules (B, N, N+T, N+T), roots
    (B, N)) by the textbook CKY, a logsumexp at every span, sentence by sentence; -inf for
    sentences of fewer than 2 tokens. Differentiable, NaN-free on ``-inf`` potentials
    (:func:`masked_log_sum_exp`): the reference of neurosym.layers.inside's marginals.

    Symbols 0..N-1 are nonterminals, N..N+T-1 preterminals; a width-1 span holds the
    preterminals, a wider one the nonterminals (the convention of layers/inside.py)."""
    N, T = roots.shape[1], terms.shape[2]
    out = []
    for b in range(terms.shape[0]):
        n = int(lengths[b])
        beta = {}
        for i in range(n):
            beta[i, i] = torch.cat([torch.full((N,), float("-inf"), dtype=terms.dtype), terms[b, i]])
        for w in range(2, n + 1):
            for i in range(n - w + 1):
                j = i + w - 1
                parts = torch.stack([rules[b] + beta[i, k][None, :, None] + beta[k + 1, j][None, None, :] for k in range(i, j)])
                inner = masked_log_sum_exp(parts.transpose(0, 1).reshape(N, -1))  # (N,)
                beta[i, j] = torch.cat([inner, torch.full((T,), float("-inf"), dtype=terms.dtype)])
        out.append(masked_log_sum_exp(roots[b] + beta[0, n - 1][:N]) if n >= 2 else torch.tensor(float("-inf"), dtype=terms.dtype))
    return torch.stack(out)


# --- PCFG prefix probabilities
#     Two oracles for neurosym.layers.prefix: every sentence of a finite grammar with its
#     probability (by recursion over symbols, no chart), and Jelinek & Lafferty's (1991)
#     prefix-inside recursion written the textbook way (float64 numpy, loops over spans).


def _rule_arrays(rt):
    """(binary (N, S, S), emit (T, V), root (N,), root_term (T,), empty) as float64 probabilities."""
    f = lambda x: x.detach().double().exp().cpu().numpy()  # noqa: E731
    return f(rt.binary), f(rt.emit), f(rt.root), f(rt.root_term), float(rt.empty.double().exp())


def finite_language(rt) -> dict[tuple[int, ...], float]:
    """Every sentence (tuple of token ids) of a grammar with a finite language, with its
    probability summed over derivations: ``lang(t) = {(v,): emit[t, v]}``,
    ``lang(A) = sum_{A -> B C} p * lang(B) x lang(C)``. Raises ValueError on recursion."""
    G, E, root, root_term, empty = _rule_arrays(rt)
    N, T = rt.N, rt.T
    memo: dict[int, dict] = {}
    busy: set[int] = set()

    def lang(x: int) -> dict:
        if x in memo:
            return memo[x]
        if x in busy:
            raise ValueError("the grammar is recursive: its language is not finite")
        busy.add(x)
        out: dict[tuple[int, ...], float] = {}
        if x >= N:
            for v in np.nonzero(E[x - N])[0]:
                out[(int(v),)] = E[x - N, v]
        else:
            for b, c in zip(*np.nonzero(G[x])):
                p = G[x, b, c]
                for u, pu in lang(int(b)).items():
                    for w, pw in lang(int(c)).items():
                        out[u + w] = out.get(u + w, 0.0) + p * pu * pw
        busy.discard(x)
        memo[x] = out
        return out

    sentences: dict[tuple[int, ...], float] = {(): empty} if empty > 0 else {}
    for starts, weights, offset in ((root, range(N), 0), (root_term, range(T), N)):
        for i in weights:
            if starts[i] > 0:
                for s, p in lang(i + offset).items():
                    sentences[s] = sentences.get(s, 0.0) + starts[i] * p
    return sentences


def partition_functions(rt, iterations: int = 200_000, tol: float = 1e-15) -> np.ndarray:
    """(N + T,) the total weight of each symbol's finite derivations, by plain fixed-point
    iteration from 0 (Kleene): ``Z_A = sum p Z_B Z_C``, ``Z_t = sum_v emit[t, v]``."""
    G, E, *_ = _rule_arrays(rt)
    N = rt.N
    z = np.concatenate([np.zeros(N), E.sum(1)])
    for _ in range(iterations):
        new = np.einsum("abc,b,c->a", G, z, z)
        done = np.max(np.abs(new - z[:N]), initial=0.0) < tol
        z[:N] = new
        if done:
            break
    return z


def jelinek_lafferty(rt, prefix: Sequence[int]) -> float:
    """``P(prefix ...)``: the weight of every finite derivation whose yield starts with
    ``prefix``, by Jelinek & Lafferty's recursion. With inside ``beta`` and the prefix
    probabilities ``pp[i, A]`` of ``A`` deriving ``w_i .. w_{n-1}`` then anything:

        pp[i, A] = sum_B R_L[A, B] sum_{B -> D E} p (sum_{i<j<n} beta[i, j, D] pp[j, E]
                                                     + [n - i = 1, D preterminal] emit[D, w_i] Z_E)

    where ``R_L = (I - P_L)^-1`` and ``P_L[A, B] = sum_C p(A -> B C) Z_C`` (left corners)."""
    G, E, root, root_term, empty = _rule_arrays(rt)
    N, T = rt.N, rt.T
    z = partition_functions(rt)
    w = [int(v) for v in prefix]
    n = len(w)
    if n == 0:
        return float(empty + root @ z[:N] + root_term @ z[N:])
    if any(not 0 <= v < E.shape[1] for v in w):
        return 0.0
    PL = np.einsum("abc,c->ab", G[:, :N, :], z)
    RL = np.linalg.inv(np.eye(N) - PL)
    beta = np.zeros((n + 1, n + 1, N + T))  # beta[i, j]: span w_i .. w_{j-1}
    for i in range(n):
        beta[i, i + 1, N:] = E[:, w[i]]
    for width in range(2, n + 1):
        for i in range(n - width + 1):
            j = i + width
            for m in range(i + 1, j):
                beta[i, j, :N] += np.einsum("abc,b,c->a", G, beta[i, m], beta[m, j])
    pp = np.zeros((n + 1, N + T))
    for i in range(n - 1, -1, -1):
        if n - i == 1:
            pp[i, N:] = E[:, w[i]]
        q = np.zeros(N)
        for j in range(i + 1, n):
            q += np.einsum("abc,b,c->a", G, beta[i, j], pp[j])
        if n - i == 1:
            q += np.einsum("abc,b,c->a", G[:, N:, :], E[:, w[i]], z)
        pp[i, :N] = RL @ q
    return float(root @ pp[0, :N] + root_term @ pp[0, N:])


def entropy_of(sentences: dict) -> float:
    """Entropy (nats) of the normalised distribution over a finite language."""
    p = np.array(list(sentences.values()))
    p = p / p.sum()
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


RECURSIVE_WORDS = ["a", "b", "c", "(", ")"]


def recursive_pcfg(rng: random.Random) -> str:
    """A PCFG whose rules may be empty, unit, self-recursive on either side, or use any
    nonterminal (so some are unreachable from the start), as text."""
    n = rng.randint(1, 5)
    lines = []
    for i in range(n):
        ws = [rng.random() + 0.05 for _ in range(rng.randint(1, 3))]
        alts = []
        for w in ws:
            shape = rng.random()
            if shape < 0.15:  # left recursion
                rhs = [f"N{i}", repr(rng.choice(RECURSIVE_WORDS))]
            elif shape < 0.3:  # right recursion
                rhs = [repr(rng.choice(RECURSIVE_WORDS)), f"N{i}"]
            else:
                rhs = [f"N{rng.randrange(n)}" if rng.random() < 0.45 else repr(rng.choice(RECURSIVE_WORDS)) for _ in range(rng.choice([0, 1, 1, 2, 2, 3]))]
            alts.append(" ".join(rhs + [f"[{w / sum(ws)!r}]"]))
        lines.append(f"N{i} -> " + " | ".join(alts))
    return "%start N0\n" + "\n".join(lines) + "\n"
