"""`.fsg` grammar -> :class:`WeightedAutomaton`.

1. Labels become token sets: a literal is one word, a lexicon class (``@ADJ_POS``) its
   words, a fuzzy term (``@polarity:pos``) the words whose membership reaches the
   threshold, a regex-bank terminal (``YEAR``) every vocabulary token its pattern
   accepts. An arc's probability is shared evenly among its tokens.
2. The graph is analysed with networkx: an undefined start state, unreachable states,
   dead states (no way to a final state) and states whose outgoing weights (arcs plus
   stopping) do not sum to 1 are errors at their line and column; cycles are reported.
3. ``<eps>`` arcs are closed exactly, C = (I - E)^-1, which also handles epsilon cycles.
4. Weighted subset construction: a deterministic state is the posterior distribution
   over grammar states given the prefix read so far, so every sentence has one path and
   its probability is the sum over the grammar's paths. For an unambiguous grammar the
   posteriors are point masses and the result has one state per grammar state.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp
import torch

from neurosym.compile.closure import sparse_star
from neurosym.compile.dfa import DEFAULT_VOCAB_CAP, finite_strings
from neurosym.compile.lexicon import term_words
from neurosym.compile.regex import Limits, compile_bank, to_automaton
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.dsl.fsg import FsgGrammar, Label, read_fsg
from neurosym.errors import CompileError, NeurosymError, SourceError, Span
from neurosym.vocab import Vocab
from neurosym.dsl.regex import read_regex_bank
from neurosym.dsl.lexicon import read_lexicon

SUM_TOLERANCE = 1e-6


@dataclass
class Analysis:
    """What networkx finds in a grammar's state graph (before any vocabulary)."""

    states: list[str]
    start: str
    num_arcs: int
    num_eps: int
    finals: list[str]
    cycles: list[list[str]] = field(default_factory=list)  # one representative state list per cyclic component
    warnings: list[tuple[Span, str]] = field(default_factory=list)

    @property
    def infinite(self) -> bool:
        """Whether the grammar has a cycle (an infinite language, unless it is all <eps>)."""
        return bool(self.cycles)

    def to_dict(self) -> dict:
        return {
            "states": len(self.states),
            "arcs": self.num_arcs,
            "eps_arcs": self.num_eps,
            "finals": self.finals,
            "start": self.start,
            "cyclic_components": [sorted(c) for c in self.cycles],
            "warnings": [f"{s}: {m}" for s, m in self.warnings],
        }


def load_fsg(path: str | Path, vocab: Vocab | None = None, limits: Limits = Limits(), exclude: Collection[str] = ()) -> WeightedAutomaton:
    """Parse, check and compile an `.fsg` file (``exclude``: see :func:`compile_fsg`)."""
    return compile_fsg(read_fsg(path), vocab, limits, exclude)


def state_graph(g: FsgGrammar) -> nx.MultiDiGraph:
    """The grammar as written: states as nodes (``final`` weight, ``start``), one edge per
    arc with its ``label`` text, ``weight`` as a probability and source ``span``."""
    graph = nx.MultiDiGraph(name=Path(g.path).name if g.path else "fsg")
    start = g.start_state
    first_seen: dict[str, Span] = {}
    for arc in g.arcs:
        first_seen.setdefault(arc.src, arc.span)
        first_seen.setdefault(arc.dst, arc.dst_span)
    for f in g.finals:
        first_seen.setdefault(f.state, f.span)
    for q, at in first_seen.items():
        graph.add_node(q, span=at, final=0.0, start=q == start)
    for f in g.finals:
        graph.nodes[f.state]["final"] = g.probability(f.weight)
    for arc in g.arcs:
        graph.add_edge(arc.src, arc.dst, label=str(arc.label), weight=g.probability(arc.weight), span=arc.span, role=arc.role)
    return graph


def analyze(g: FsgGrammar) -> Analysis:
    """Check the state graph; raise a `SourceError` at the first problem.

    Errors: an undefined start state, unreachable states, dead states, and (without
    ``%normalize``) states whose arc and stopping probabilities do not sum to 1."""
    return _analyze(g, state_graph(g))


def _analyze(g: FsgGrammar, graph: nx.MultiDiGraph) -> Analysis:
    start = g.start_state
    if start not in graph:
        at = g.start[1] if g.start else Span(g.path, 1, 1)
        raise SourceError.at(at, f"start state {start!r} has no arcs and is not final")
    live = {u: d for u, d in graph.nodes(data=True)}
    positive = nx.DiGraph()
    positive.add_nodes_from(graph.nodes)
    positive.add_edges_from((u, v) for u, v, w in graph.edges(data="weight") if w > 0)
    reachable = nx.descendants(positive, start) | {start}
    for q, data in live.items():
        if q not in reachable:
            raise SourceError.at(data["span"], f"state {q!r} is unreachable from the start state {start!r}")
    finals = [q for q, data in live.items() if data["final"] > 0]
    coreachable = _backwards(positive, finals)
    for q, data in live.items():
        if q not in coreachable:
            raise SourceError.at(data["span"], f"state {q!r} is dead: no path from it reaches a final state (its probability mass would be lost)")
    warnings: list[tuple[Span, str]] = []
    for arc in g.arcs:
        if g.probability(arc.weight) == 0:
            warnings.append((arc.weight_span or arc.span, f"arc {arc.src} -> {arc.dst} {arc.label} has weight 0 and is never taken"))
    if not g.normalize:
        _check_sums(g, graph)
    cycles = [sorted(c) for c in nx.strongly_connected_components(positive) if len(c) > 1 or positive.has_edge(next(iter(c)), next(iter(c)))]
    return Analysis(
        states=list(graph.nodes),
        start=start,
        num_arcs=len(g.arcs),
        num_eps=sum(a.label.kind == "eps" for a in g.arcs),
        finals=finals,
        cycles=cycles,
        warnings=warnings,
    )


def _backwards(graph: nx.DiGraph, targets: list[str]) -> set[str]:
    """Every node with a path to one of ``targets`` (one search from all of them at once)."""
    seen = set(targets)
    todo = list(targets)
    while todo:
        for u in graph.predecessors(todo.pop()):
            if u not in seen:
                seen.add(u)
                todo.append(u)
    return seen


def _check_sums(g: FsgGrammar, graph: nx.MultiDiGraph) -> None:
    out = defaultdict(float)
    first: dict[str, Span] = {}
    for arc in g.arcs:
        out[arc.src] += g.probability(arc.weight)
        first.setdefault(arc.src, arc.span)
    for f in g.finals:
        out[f.state] += g.probability(f.weight)
        first.setdefault(f.state, f.span)
    for q, total in out.items():
        if abs(total - 1.0) > SUM_TOLERANCE:
            parts = "arcs" + (" and stopping" if graph.nodes[q]["final"] > 0 else "")
            raise SourceError.at(first[q], f"the weights out of state {q!r} ({parts}) sum to {total:.6g}, expected 1 (or add %normalize)")


# ---------------------------------------------------------------------- labels -> tokens
class _Imports:
    """The regex banks and lexicons a grammar imports, by the names they make visible."""

    def __init__(self, g: FsgGrammar, limits: Limits):
        self.terminals: dict[str, object] = {}  # name -> CharDFA
        self.lexicons: list[tuple[object, set[str] | None]] = []
        for imp in g.imports:
            if imp.kind == "regex":
                self._regex(imp, limits)
            else:
                self._lexicon(imp)

    def _regex(self, imp, limits: Limits) -> None:
        bank = read_regex_bank(imp.path)
        names = imp.names if imp.names is not None else [(n, imp.span) for n in bank.patterns]
        for name, at in names:
            if name not in bank.patterns:
                raise SourceError.at(at, f"{imp.path.name} defines no pattern {name!r}; it has {', '.join(sorted(bank.patterns)) or 'none'}")
        wanted = {n for n, _ in names}
        sub = compile_bank(_restrict(bank, wanted), limits=limits)
        for name in wanted:
            self.terminals[name] = sub.patterns[name].char_dfa

    def _lexicon(self, imp) -> None:
        lex = read_lexicon(imp.path)
        names = None
        if imp.names is not None:
            names = set()
            for name, at in imp.names:
                if not lex.defines(name):
                    raise SourceError.at(at, f"{imp.path.name} defines no class or feature {name!r}")
                names.add(name)
        self.lexicons.append((lex, names))

    def words(self, label: Label, threshold: float) -> list[str]:
        """The words of a class or fuzzy-term label, from the first lexicon that has it."""
        for lex, names in self.lexicons:
            if names is not None and label.text not in names:
                continue
            if not lex.defines(label.text):
                continue
            try:
                if label.kind == "class":
                    return list(lex.class_words(label.text))
                return term_words(lex, label.text, label.term, threshold)
            except NeurosymError as err:
                message = str(err)
                prefix = f"{lex.path}: " if lex.path else ""
                if prefix and message.startswith(prefix):  # the label's position says where
                    message = message[len(prefix) :]
                raise SourceError.at(label.span, f"{message} (in {Path(lex.path).name if lex.path else 'the lexicon'})") from None
        what = "class" if label.kind == "class" else "feature"
        if not self.lexicons:
            raise SourceError.at(label.span, f"{label} needs a lexicon: add %import \"file.lex\"")
        raise SourceError.at(label.span, f"undefined {what} {label.text!r}: no imported lexicon makes it visible")


def _restrict(bank, wanted: set[str]):
    """The bank with only ``wanted`` marked as patterns (their references still resolve)."""
    from dataclasses import replace

    return replace(bank, patterns={n: r for n, r in bank.patterns.items() if n in wanted})


def _token_sets(g: FsgGrammar, imports: _Imports, vocab: Vocab | None, opaque: bool = False) -> tuple[Vocab, list[list[int]]]:
    """The vocabulary and, per arc, the token ids its label reads ([] for <eps>). With
    ``opaque`` (and no vocabulary), a regex terminal of infinitely many strings is one
    token ``/NAME/`` (:func:`opaque_terminal`), spelled later by its DFA."""
    words_of: list[list[str] | None] = []
    for arc in g.arcs:
        lab = arc.label
        if lab.kind == "literal":
            words_of.append([lab.text])
        elif lab.kind in ("class", "term"):
            threshold = arc.threshold if arc.threshold is not None else g.threshold
            words = imports.words(lab, threshold)
            if not words:
                raise SourceError.at(lab.span, f"{lab} has no words" + (f" at threshold {threshold:g}" if lab.kind == "term" else ""))
            words_of.append(words)
        elif lab.kind == "terminal":
            if lab.text not in imports.terminals:
                raise SourceError.at(lab.span, f"undefined terminal {lab.text!r}: import it from a .regex bank, or quote it ('{lab.text}') for a literal word")
            words_of.append(None)
        else:
            words_of.append([])
    if vocab is None:
        seen: dict[str, None] = {}
        for arc, ws in zip(g.arcs, words_of):
            if ws is None:  # a regex terminal: its strings, when they are few
                ws = finite_strings(imports.terminals[arc.label.text], DEFAULT_VOCAB_CAP)
                if ws is None and opaque:
                    ws = [opaque_terminal(arc.label.text)]
                if ws is None:
                    raise SourceError.at(
                        arc.label.span,
                        f"regex terminal {arc.label.text} matches infinitely many strings (or over {DEFAULT_VOCAB_CAP:,}), so a "
                        "default vocabulary cannot list them; pass a vocabulary (vocab=...)",
                    )
            for w in ws:
                seen.setdefault(w, None)
        vocab = Vocab.words(list(seen))
    by_surface: dict = {}
    for i, surface in enumerate(vocab.surfaces):
        if surface is not None:
            by_surface.setdefault(surface, i)
    ids_of: list[list[int]] = []
    for arc, ws in zip(g.arcs, words_of):
        if ws is None and opaque and opaque_terminal(arc.label.text) in vocab:
            ws = [opaque_terminal(arc.label.text)]
        if ws is None:
            ids_of.append(_terminal_ids(imports.terminals[arc.label.text], vocab, arc.label))
            continue
        ids = []
        for w in dict.fromkeys(ws):
            key = w.encode("utf-8") if vocab.kind == "bytes" else w
            if key not in by_surface:
                raise SourceError.at(arc.label.span, f"{w!r} (from {arc.label}) is not a token of the vocabulary {vocab!r}")
            ids.append(by_surface[key])
        ids_of.append(ids)
    return vocab, ids_of


def opaque_terminal(name: str) -> str:
    """The one token that stands for regex terminal ``name`` under ``opaque_terminals``."""
    return f"/{name}/"


def regex_terminals(g: FsgGrammar, limits: Limits = Limits()) -> dict[str, object]:
    """The character DFA of every regex terminal ``g`` imports, by name."""
    return dict(_Imports(g, limits).terminals)


def _terminal_ids(dfa, vocab: Vocab, label: Label) -> list[int]:
    auto = to_automaton(dfa, vocab)
    first = auto.delta[auto.start]
    ok = (first >= 0) & auto.final[first.clamp(min=0)]
    ids = ok.nonzero().flatten().tolist()
    if not ids:
        raise SourceError.at(label.span, f"no token of the vocabulary {vocab!r} matches the terminal {label.text}")
    return ids


# ---------------------------------------------------------------------- compile
def compile_fsg(g: FsgGrammar, vocab: Vocab | None = None, limits: Limits = Limits(), exclude: Collection[str] = (),
                opaque_terminals: bool = False) -> WeightedAutomaton:
    """Check ``g`` and build its deterministic probabilistic automaton over ``vocab``
    (default: a word vocabulary of the grammar's words, in order of appearance).

    ``exclude``: tokens the automaton never emits, although they stay in its vocabulary.
    Each arc's probability is shared among its remaining tokens, so only those words'
    probabilities change (a held-out split of the same grammar); an arc left without
    tokens is a :class:`CompileError` naming it."""
    graph = state_graph(g)
    _analyze(g, graph)
    imports = _Imports(g, limits)
    vocab, ids_of = _token_sets(g, imports, vocab, opaque_terminals)
    if exclude:
        unknown = sorted(w for w in exclude if w not in vocab)
        if unknown:
            raise CompileError(f"{g.path or '<string>'}: cannot exclude {', '.join(map(repr, unknown))}: not in the vocabulary")
        banned = {vocab.id(w) for w in exclude}
        kept = []
        for arc, ids in zip(g.arcs, ids_of):
            left = [i for i in ids if i not in banned]
            if ids and not left and arc.label.kind != "eps":
                raise CompileError(f"{arc.label.span}: every token of {arc.label} is excluded; the arc {arc.src} -> {arc.dst} would be impossible")
            kept.append(left)
        ids_of = kept
    index = {q: i for i, q in enumerate([g.start_state] + [q for q in graph.nodes if q != g.start_state])}
    n = len(index)
    total = np.zeros(n)
    final = np.zeros(n)
    for f in g.finals:
        final[index[f.state]] = g.probability(f.weight)
    for arc in g.arcs:
        total[index[arc.src]] += g.probability(arc.weight)
    total += final
    scale = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0) if g.normalize else np.ones(n)
    eps: dict[tuple[int, int], float] = {}
    token_arcs: list[tuple[int, int, int, float, tuple[str, ...]]] = []  # src, token, dst, prob, roles
    for arc, ids in zip(g.arcs, ids_of):
        p = g.probability(arc.weight) * scale[index[arc.src]]
        if p == 0:
            continue
        s, d = index[arc.src], index[arc.dst]
        if arc.label.kind == "eps":
            eps[(s, d)] = eps.get((s, d), 0.0) + p
            continue
        share = p / len(ids)
        token_arcs.extend((s, t, d, share, arc.roles) for t in ids)
    final = final * scale
    return _determinize(g, vocab, _eps_closure(g, eps, n), token_arcs, final, graph, limits)


def _eps_closure(g: FsgGrammar, eps: dict[tuple[int, int], float], n: int) -> sp.csr_matrix:
    """(n, n) sparse ``C = (I - E)^-1``: the probability of moving from q to q' by <eps>
    arcs alone (:func:`~neurosym.compile.closure.sparse_star`)."""
    return sparse_star(eps, n, f"{g.path or '<string>'}: the <eps> arcs form a cycle that is never left")


def _determinize(g: FsgGrammar, vocab: Vocab, closure: sp.csr_matrix, token_arcs, final: np.ndarray, graph, limits: Limits) -> WeightedAutomaton:
    """Weighted subset construction over posterior distributions of grammar states."""
    n = closure.shape[0]
    V = len(vocab)
    # effective arcs: from q, via <eps>* to q', then a token arc q' -t-> q''
    by_src: dict[int, list[tuple[int, int, float, tuple[str, ...]]]] = defaultdict(list)
    for s, t, d, p, role in token_arcs:
        by_src[s].append((t, d, p, role))
    eff: list[list[tuple[int, int, float, tuple[str, ...]]]] = []
    indptr, indices, data = closure.indptr, closure.indices, closure.data
    for q in range(n):
        row = []
        for j in range(indptr[q], indptr[q + 1]):
            mid, c = int(indices[j]), float(data[j])
            if c > 0:
                row.extend((t, d, c * p, role) for t, d, p, role in by_src.get(mid, ()))
        eff.append(row)
    stop = closure @ final

    def key(dist: dict[int, float]) -> tuple:
        return tuple(sorted((q, round(w, 12)) for q, w in dist.items() if w > 1e-15))

    subsets: list[dict[int, float]] = [{0: 1.0}]
    ids = {key(subsets[0]): 0}
    arcs: list[dict[int, tuple[int, float]]] = []
    role_mass: list[dict[int, dict[str, float]]] = []
    stops: list[float] = []
    started = time.monotonic()
    k = 0
    while k < len(subsets):
        if time.monotonic() - started > limits.time_limit:
            raise CompileError(f"{g.path or '<string>'}: weighted determinization took more than {limits.time_limit:g} s (time_limit)")
        dist = subsets[k]
        mass: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        roles: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for q, w in dist.items():
            for t, d, p, role in eff[q]:
                mass[t][d] += w * p
                for r in role:
                    roles[t][r] += w * p
        row: dict[int, tuple[int, float]] = {}
        for t, nxt in mass.items():
            m = sum(nxt.values())
            post = {d: x / m for d, x in nxt.items()}
            kk = key(post)
            if kk not in ids:
                if (len(subsets) + 1) * V > limits.max_elements:
                    raise CompileError(
                        f"{g.path or '<string>'}: the compiled tables would exceed {len(subsets) + 1:,} states x {V:,} tokens, "
                        f"over the cap of {limits.max_elements:,} elements (Limits.max_elements); a smaller vocabulary or "
                        "fewer states would fit, or raise the cap"
                    )
                if len(subsets) >= limits.max_states:
                    if n > limits.max_states:  # the grammar alone is over the cap: no ambiguity to blame
                        raise CompileError(
                            f"{g.path or '<string>'}: the grammar has {n:,} states, over the cap of {limits.max_states:,} "
                            "deterministic states (max_states); raise max_states (--max-states) to compile it"
                        )
                    raise CompileError(
                        f"{g.path or '<string>'}: the grammar ({n:,} states) is ambiguous enough that its deterministic form "
                        f"exceeds {limits.max_states:,} states (max_states); make arcs out of a state read different tokens"
                    )
                ids[kk] = len(subsets)
                subsets.append(post)
            row[t] = (ids[kk], m)
        arcs.append(row)
        role_mass.append({t: {r: x / sum(mass[t].values()) for r, x in rs.items()} for t, rs in roles.items()})
        p_stop = float(sum(w * stop[q] for q, w in dist.items()))
        # rounding in inv(I - E) leaves ~1e-16 where no stop is possible: not a final state
        stops.append(p_stop if p_stop > 1e-13 else 0.0)
        k += 1
    Q, V = len(subsets), len(vocab)
    delta = torch.full((Q, V), -1, dtype=torch.long)
    logp = torch.full((Q, V), -math.inf, dtype=torch.float64)
    role_names = sorted({r for a in g.arcs for r in a.roles})
    tables = {r: torch.zeros((Q, V), dtype=torch.float64) for r in role_names}
    for q, row in enumerate(arcs):
        if row:
            toks = torch.tensor(list(row))
            delta[q, toks] = torch.tensor([d for d, _ in row.values()])
            logp[q, toks] = torch.tensor([math.log(m) for _, m in row.values()], dtype=torch.float64)
        for t, rs in role_mass[q].items():
            for r, x in rs.items():
                tables[r][q, t] = x
    with np.errstate(divide="ignore"):
        final_lp = torch.from_numpy(np.log(np.clip(np.array(stops), 0.0, None)))
    name = Path(g.path).stem if g.path else None
    return WeightedAutomaton(delta, logp, final_lp, vocab, tables, name=name, source=g.path, graph=graph)
