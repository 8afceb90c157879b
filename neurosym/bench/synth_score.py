"""How ``neurosym bench synth`` scores a synthesised regex against a reference language:
exact equivalence of two DFAs, fresh strings to label, and F1 on them.

Regel's notion of success is *equivalence* (the synthesised DFA equals the ground
truth's); F1 is measured on fresh strings labelled by the ground truth with
``re.fullmatch``: samples of the ground truth's and the candidate's languages plus
random edits of the examples.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

import numpy as np

from neurosym.compile.regex import pattern_dfa


def equivalent(d1, d2) -> bool:
    """Whether two character DFAs accept the same language (product BFS)."""
    chars = set(d1.partition.class_of) | set(d2.partition.class_of)
    pairs = {(d1.partition.class_of.get(c, 0), d2.partition.class_of.get(c, 0)) for c in chars} | {(0, 0)}
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        a, b = stack.pop()
        fa = a >= 0 and bool(d1.final[a])
        fb = b >= 0 and bool(d2.final[b])
        if fa != fb:
            return False
        for k1, k2 in pairs:
            na = int(d1.trans[a, k1]) if a >= 0 else -1
            nb = int(d2.trans[b, k2]) if b >= 0 else -1
            if (na, nb) != (-1, -1) and (na, nb) not in seen:
                seen.add((na, nb))
                stack.append((na, nb))
    return True


def fresh_strings(problem: dict, candidate_dfa, n: int = 200, seed: int = 0) -> list[str]:
    """Fresh strings for F1: samples of the ground truth's and the candidate's languages
    and random edits of the examples (examples themselves excluded)."""
    rng = np.random.default_rng(seed)
    gt_dfa = pattern_dfa(problem["regex"])
    out = set(gt_dfa.sample(n, max_len=24, seed=seed))
    if candidate_dfa is not None:
        out |= set(candidate_dfa.sample(n, max_len=24, seed=seed + 1))
    examples = problem["positives"] + problem["negatives"]
    alphabet = sorted({c for s in examples for c in s} | set(string.ascii_letters[:6] + string.digits[:4] + " -.@"))
    for _ in range(n):
        s = list(examples[int(rng.integers(len(examples)))])
        for _ in range(int(rng.integers(1, 4))):
            op = int(rng.integers(3))
            pos = int(rng.integers(len(s) + 1))
            c = alphabet[int(rng.integers(len(alphabet)))]
            if op == 0:
                s.insert(pos, c)
            elif op == 1 and s:
                del s[min(pos, len(s) - 1)]
            elif s:
                s[min(pos, len(s) - 1)] = c
        out.add("".join(s))
    return sorted(out - set(examples))


def f1_score(pattern: str, truth: str, strings: Sequence[str]) -> float:
    """F1 of ``pattern`` against ``truth`` (both full-match regexes) over ``strings``; 1 when
    neither accepts any of them."""
    cand, gt = re.compile(pattern), re.compile(truth)
    tp = fp = fn = 0
    for s in strings:
        a, b = bool(cand.fullmatch(s)), bool(gt.fullmatch(s))
        tp += a and b
        fp += a and not b
        fn += b and not a
    if tp == 0:
        return 1.0 if fp == 0 and fn == 0 else 0.0
    return 2 * tp / (2 * tp + fp + fn)


__all__ = ["equivalent", "f1_score", "fresh_strings"]
