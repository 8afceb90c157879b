"""The ``evolve`` method: a genetic algorithm over regex ASTs.

A population of random small regexes (plus simple seeds) evolves by tournament
selection, subtree crossover and mutation (one random single edit: replace a node by
a leaf, wrap it in ``*``/``+``/``?``, unwrap it, concatenate or alternate it with a
leaf, delete an item). Fitness is ``-(objective)``: minus the median edit distance of
the positives to the language, minus the penalty per accepted negative, minus
``lam * size`` (:func:`~neurosym.synth.distance.objective`). The best ``elite``
individuals survive unchanged. Seeded by ``seed``; stops at the time budget or when
an individual satisfies every example.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurosym.synth import clock
from neurosym.synth import regex_ast as ra
from neurosym.synth.beam import Progress, Scorer, seeds
from neurosym.synth.bestfirst import default_leaves
from neurosym.synth.edits import replace_at, subtrees
from neurosym.synth.simplify import simplify


def random_regex(leaves: Sequence[ra.Node], rng: np.random.Generator, depth: int = 3) -> ra.Node:
    """A random regex of at most ``depth`` levels."""
    if depth <= 1 or rng.random() < 0.3:
        return leaves[int(rng.integers(len(leaves)))]
    k = int(rng.integers(5))
    if k == 0:
        return ra.Cat((random_regex(leaves, rng, depth - 1), random_regex(leaves, rng, depth - 1)))
    if k == 1:
        return ra.Alt((random_regex(leaves, rng, depth - 1), random_regex(leaves, rng, depth - 1)))
    if k == 2:
        return ra.Cat((random_regex(leaves, rng, depth - 1), random_regex(leaves, rng, depth - 1), random_regex(leaves, rng, depth - 1)))
    return (ra.Star, ra.Plus, ra.Opt)[k - 3 if k < 5 else 0](random_regex(leaves, rng, depth - 1))


def _pick(rng: np.random.Generator, items: list):
    return items[int(rng.integers(len(items)))]


def mutate(r: ra.Node, leaves: Sequence[ra.Node], rng: np.random.Generator) -> ra.Node:
    """One random single edit of ``r`` (simplified)."""
    path, node = _pick(rng, list(subtrees(r)))
    leaf = _pick(rng, list(leaves))
    t = type(node)
    kind = int(rng.integers(8))
    if kind == 0:
        new = leaf
    elif kind == 1:
        new = (ra.Star, ra.Plus, ra.Opt)[int(rng.integers(3))](node)
    elif kind == 2 and t in ra.UNARY:
        new = node.child
    elif kind == 2 and t in ra.NARY:
        items = list(node.items)
        del items[int(rng.integers(len(items)))]
        new = items[0] if len(items) == 1 else t(tuple(items))
    elif kind == 3:
        new = ra.Cat((node, leaf))
    elif kind == 4:
        new = ra.Cat((leaf, node))
    elif kind == 5:
        new = ra.Alt((node, leaf))
    elif kind == 6:
        new = random_regex(leaves, rng, 2)
    else:
        new = ra.Cat((node, random_regex(leaves, rng, 2)))
    return simplify(replace_at(r, path, new))


def crossover(a: ra.Node, b: ra.Node, rng: np.random.Generator) -> ra.Node:
    """``a`` with a random subtree replaced by a random subtree of ``b``."""
    path, _ = _pick(rng, list(subtrees(a)))
    _, donor = _pick(rng, list(subtrees(b)))
    return simplify(replace_at(a, path, donor))


def _select(pop: list, fit: list, rng: np.random.Generator, k: int) -> ra.Node:
    """Tournament selection: the fittest of ``k`` random individuals."""
    idx = rng.integers(len(pop), size=k)
    return pop[int(min(idx, key=lambda i: fit[int(i)]))]


def search(
    positives: Sequence[str],
    negatives: Sequence[str] = (),
    time_budget: float = 10.0,
    seed: int = 0,
    lam: float = 0.02,
    progress: bool = False,
    leaves: Sequence[ra.Node] | None = None,
    population: int = 60,
    elite: int = 4,
    tournament: int = 3,
    p_crossover: float = 0.3,
    max_size: int = 40,
    max_generations: int | None = None,
) -> tuple[ra.Node, dict]:
    """Run the ``evolve`` method; returns ``(best regex, info)`` (a
    :class:`~neurosym.synth.methods.Search`, registered in :mod:`neurosym.synth.methods`).
    It stops when solved, at the time budget, or after ``max_generations`` (then the
    result depends on ``seed`` alone, not on the machine's speed)."""
    t_end = clock.now() + time_budget
    rng = np.random.default_rng(seed)
    leaves = list(leaves) if leaves is not None else default_leaves(positives, negatives)
    scorer = Scorer(positives, negatives, lam)
    pop = [simplify(x) for x in seeds(positives, leaves)] + list(leaves)
    while len(pop) < population:
        pop.append(simplify(random_regex(leaves, rng, 4)))
    pop = pop[:population]
    bar = Progress(progress, time_budget, "synth evolve")
    generations = 0
    try:
        fit = [scorer(x) for x in pop]
        while clock.now() < t_end and (max_generations is None or generations < max_generations):
            order = np.argsort(fit, kind="stable")
            best = pop[int(order[0])]
            if scorer.solved(best):
                break
            nxt = [pop[int(i)] for i in order[:elite]]
            while len(nxt) < population and clock.now() < t_end:
                if rng.random() < p_crossover:
                    child = crossover(_select(pop, fit, rng, tournament), _select(pop, fit, rng, tournament), rng)
                else:
                    child = _select(pop, fit, rng, tournament)
                child = mutate(child, leaves, rng)
                if ra.size(child) > max_size or type(child) in (ra.Empty, ra.Hole):
                    continue
                nxt.append(child)
            pop = nxt
            fit = [scorer(x) if clock.now() < t_end else float("inf") for x in pop]
            generations += 1
            bar.tick(f"gen {generations} best {min(fit):.2f}")
    finally:
        bar.close()
    best = pop[int(np.argmin(fit))]
    return best, {"generations": generations, "evaluations": scorer.evaluations}


__all__ = ["crossover", "mutate", "random_regex", "search"]
