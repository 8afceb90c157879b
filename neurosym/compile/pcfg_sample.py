"""The prior sampler of a PCFG as written: derivation trees top-down, regex terminals
drawn from their DFAs (:func:`sample_trees`, :func:`sample_sentences`).

The posterior sampler, trees of a given sentence, is
:func:`neurosym.layers.inside.sample_parses`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurosym.compile.regex import Limits, rule_dfa
from neurosym.dsl.pcfg import NT, Grammar, as_grammar
from neurosym.errors import CompileError


@dataclass
class Tree:
    """A derivation: ``label`` and children (trees or leaf strings). Prints bracketed."""

    label: str
    children: list

    def leaves(self) -> list[str]:
        out: list[str] = []
        stack: list = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, Tree):
                stack.extend(reversed(node.children))
            else:
                out.append(node)
        return out

    def __str__(self) -> str:
        parts = [str(c) if isinstance(c, Tree) else _leaf(c) for c in self.children]
        return f"({' '.join([self.label, *parts])})"


def _leaf(s: str) -> str:
    return s if s and not any(c.isspace() or c in "()" for c in s) else repr(s)


def sample_trees(grammar: Grammar | str | Path, n: int, seed: int = 0, max_len: int = 50, limits: Limits = Limits()) -> list[Tree]:
    """``n`` derivation trees of the grammar itself (regex terminals sample a string of
    their pattern), conditioned on at most ``max_len`` tokens (longer ones are redrawn)."""
    grammar = as_grammar(grammar)
    rng = np.random.default_rng(seed)
    table: dict[str, tuple[list, np.ndarray]] = {}
    for lhs, prods in grammar.by_lhs.items():
        prods = [p for p in prods if p.prob > 0]
        table[lhs] = (prods, np.cumsum([p.prob for p in prods]))
    dfas: dict[str, object] = {}
    out = []
    for _ in range(n):
        for _attempt in range(1000):
            tree = _grow(grammar, table, dfas, rng, max_len, limits)
            if tree is not None:
                out.append(tree)
                break
        else:
            raise CompileError(f"could not sample a sentence of at most {max_len} tokens in 1000 tries; raise max_len")
    return out


def sample_sentences(grammar: Grammar | str | Path, n: int, seed: int = 0, max_len: int = 50, limits: Limits = Limits()) -> list[list[str]]:
    """``n`` sentences (lists of token strings) from the grammar itself; see :func:`sample_trees`."""
    return [t.leaves() for t in sample_trees(grammar, n, seed, max_len, limits)]


def _grow(grammar: Grammar, table, dfas, rng, max_len: int, limits: Limits) -> Tree | None:
    root = Tree(grammar.start, [])
    stack = [root]
    tokens = nodes = 0
    while stack:
        node = stack.pop()
        nodes += 1
        if nodes > 100 * max_len + 1000:
            return None
        prods, cdf = table[node.label]
        p = prods[min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(prods) - 1)]
        kids: list[Tree] = []
        for s in p.rhs:
            if isinstance(s, NT):
                child = Tree(s.name, [])
                node.children.append(child)
                kids.append(child)
                continue
            tokens += 1
            if tokens > max_len:
                return None
            if s.terminal.kind == "literal":
                node.children.append(s.text)
            else:
                if s.name not in dfas:
                    imp = grammar.imports[s.name]
                    dfas[s.name] = rule_dfa(imp.bank, imp.rule, limits)
                words = dfas[s.name].sample(1, max_len=24, seed=int(rng.integers(2**31)))
                if not words:
                    raise CompileError(f"{s.span}: regex terminal {s.name} has no string of at most 24 characters to sample")
                node.children.append(Tree(s.name, [words[0]]))
        stack.extend(reversed(kids))
    return root


# ---------------------------------------------------------------------- tensors


__all__ = ["Tree", "sample_sentences", "sample_trees"]
