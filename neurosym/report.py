"""Reports behind ``neurosym inspect``: one ``describe_*`` per kind of file, returning a
JSON-safe dict, and a ``format_*`` that turns it into lines of text; drawings of automata
and FSGs. Regex banks and automata (states, character classes, samples), FSGs (entropy,
perplexity floor, cycles), PCFGs (rule counts, consistency, CNF, sample trees), lexicons
(features, classes, term tables) and FSG / PCFG / lexicon artifacts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from neurosym.compile.artifact import load_artifact
from neurosym.compile.automaton import Automaton
from neurosym.compile.dfa import OTHER, Partition
from neurosym.compile.fsg import analyze, compile_fsg, state_graph
from neurosym.compile.lexicon import FeatureBank, static_memberships
from neurosym.compile.pcfg import format_summary, summary
from neurosym.compile.pcfg_check import check_pcfg
from neurosym.compile.pcfg_sample import sample_trees
from neurosym.compile.regex import Limits, RegexBank
from neurosym.compile.weighted import WeightedAutomaton
from neurosym.dsl.fsg import read_fsg
from neurosym.dsl.lexicon import format_lexicon_summary, read_lexicon
from neurosym.dsl.pcfg import as_grammar
from neurosym.errors import NeurosymError
from neurosym.files import OWN_MARK, atomic_write_bytes, image_metadata


# ---------------------------------------------------------------------- regex banks and automata
def as_bank(obj: RegexBank | Automaton, path: str | None = None) -> RegexBank:
    """A bank to report on: ``obj`` itself, or a lone automaton (a pattern, a word list)
    as a one-pattern bank."""
    if isinstance(obj, RegexBank):
        return obj
    name = obj.name or "PATTERN"
    obj.name = name
    return RegexBank({name: obj}, torch.ones(1), obj.vocab, path=path)


def char_ranges(chars: list[str], limit: int = 60) -> str:
    """A compact class description: ``0-9a-f`` style runs, escaped, cut at ``limit`` characters."""
    codes = sorted(ord(c) for c in chars)
    runs: list[tuple[int, int]] = []
    for c in codes:
        if runs and c == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    parts = []
    for lo, hi in runs:
        a, b = _show(chr(lo)), _show(chr(hi))
        parts.append(a if lo == hi else f"{a}{b}" if hi == lo + 1 else f"{a}-{b}")
    text = "".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(c: str) -> str:
    if c in "-]\\[":
        return "\\" + c
    if c.isprintable() and c != " ":
        return c
    return {" ": "␠", "\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\u{ord(c):04x}")


def describe_classes(part: Partition) -> list[str]:
    """One line per character class; class 0 also holds every character not listed anywhere."""
    out = []
    for k, members in enumerate(part.members):
        desc = f"[{char_ranges(members)}]" if members else ""
        if k == OTHER:
            desc = f"any other character{' or ' + desc if desc else ''}"
        out.append(desc)
    return out


def describe(auto: Automaton, samples: int = 5, seed: int = 0) -> dict:
    """States, finals, arcs, character classes and accepted sample strings of one automaton."""
    info = {
        "name": auto.name,
        "states": auto.num_states,
        "final_states": [int(q) for q in auto.final.nonzero().flatten()],
        "arcs": int((auto.delta >= 0).sum()),
        "vocab": {"kind": auto.vocab.kind, "size": len(auto.vocab)},
    }
    if auto.char_dfa is not None:
        dfa = auto.char_dfa
        info["char_states"] = dfa.num_states
        info["char_classes"] = describe_classes(dfa.partition)
        info["samples"] = dfa.sample(samples, max_len=24, seed=seed)
    else:
        info["samples"] = [auto.vocab.decode(s) for s in auto.sample(samples, max_len=24, seed=seed)]
    return info


def describe_bank(bank: RegexBank, names: list[str] | None = None, samples: int = 5) -> dict:
    names = names or bank.names
    return {
        "path": bank.path,
        "patterns": [
            {**describe(bank.patterns[n], samples), "weight": float(bank.weights[bank.names.index(n)])} for n in names
        ],
        "total_states": int(bank.offsets[-1]),
    }


def format_report(report: dict) -> str:
    lines = [f"{report['path'] or 'bank'}: {len(report['patterns'])} pattern(s) shown; the bank has {report['total_states']} token-level states"]
    for p in report["patterns"]:
        lines.append("")
        lines.append(f"{p['name']}  (weight {p['weight']:g})")
        lines.append(f"  states: {p['states']}  finals: {p['final_states']}  arcs: {p['arcs']}  vocab: {p['vocab']['kind']} x {p['vocab']['size']}")
        for k, desc in enumerate(p.get("char_classes", [])):
            lines.append(f"  class {k}: {desc}")
        lines.append("  samples: " + ", ".join(repr(s) for s in p["samples"]))
    return "\n".join(lines)


def labelled_edges(auto: Automaton) -> tuple[list[tuple[int, bool]], dict[tuple[int, int], str]]:
    """Nodes ``(state, is_final)`` and ``{(src, dst): label}`` for drawing: the character
    DFA's classes when there is one, else the token-level arcs."""
    if auto.char_dfa is not None:
        part, trans = auto.char_dfa.partition, auto.char_dfa.trans
        grouped: dict[tuple[int, int], list[int]] = {}
        for q, k in zip(*np.nonzero(trans >= 0)):
            grouped.setdefault((int(q), int(trans[q, k])), []).append(int(k))
        labels = {}
        for edge, ks in grouped.items():
            chars = [c for k in ks for c in part.members[k]]
            text = f"[{char_ranges(chars)}]" if chars else ""
            labels[edge] = ("other" + (" or " + text if text else "")) if OTHER in ks else text
        nodes = [(q, bool(auto.char_dfa.final[q])) for q in range(trans.shape[0])]
        return nodes, labels
    g = auto.to_networkx()
    return [(q, d["final"]) for q, d in g.nodes(data=True)], {(u, v): d["label"] for u, v, d in g.edges(data=True)}


def to_dot(auto: Automaton) -> str:
    """Graphviz DOT text for an automaton (edges labelled by character classes or tokens)."""
    nodes, edges = labelled_edges(auto)
    out = [f'digraph "{auto.name or "automaton"}" {{', "  rankdir=LR;", "  start [shape=point];", "  start -> 0;"]
    for q, fin in nodes:
        out.append(f'  {q} [shape={"doublecircle" if fin else "circle"}];')
    for (u, v), label in edges.items():
        label = label.replace("\\", "\\\\").replace('"', '\\"')
        out.append(f'  {u} -> {v} [label="{label}"];')
    out.append("}")
    return "\n".join(out) + "\n"


DOT_MARK = b"// drawn by " + OWN_MARK + b"\n"  # a DOT comment after the graph: marks the drawing as neurosym's own output


def draw_automaton(auto: Automaton, path: str | Path) -> Path:
    """Write ``auto`` as DOT text (``.dot``) or a matplotlib drawing (``.png``/``.svg``/``.pdf``)."""
    path = Path(path)
    if path.suffix == ".dot":
        atomic_write_bytes(path, to_dot(auto).encode() + DOT_MARK)
        return path
    nodes, labels = labelled_edges(auto)
    return draw_labelled([q for q, _ in nodes], {q for q, fin in nodes if fin}, labels, path, f"{auto.name or 'automaton'} (start 0, finals shaded)")


def draw_labelled(nodes: list, finals: set, labels: dict[tuple, str], path: str | Path, title: str) -> Path:
    """Draw a labelled directed graph with matplotlib to ``.png``/``.svg``/``.pdf`` (atomically)."""
    path = Path(path)
    if path.suffix not in (".png", ".svg", ".pdf"):
        raise NeurosymError(f"{path}: cannot draw to {path.suffix or 'a file without extension'!r}; use .dot, .png, .svg or .pdf")
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from(labels)
    # numpy-only layouts (kamada_kawai and large spring layouts need scipy)
    pos = nx.spring_layout(g, seed=0) if len(g) <= 200 else nx.circular_layout(g)
    side = max(4.0, 3.0 * len(g) ** 0.5)
    fig, ax = plt.subplots(figsize=(side * 1.3, side))
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=["#9ecae1" if q in finals else "#f0f0f0" for q in g.nodes], edgecolors="black")
    nx.draw_networkx_labels(g, pos, ax=ax)
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, connectionstyle="arc3,rad=0.15")
    nx.draw_networkx_edge_labels(g, pos, edge_labels=labels, ax=ax, font_size=7)
    ax.set_title(title)
    ax.axis("off")
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix[1:], bbox_inches="tight", metadata=image_metadata())
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


# ---------------------------------------------------------------------- FSG
def describe_fsg(path: str | Path, limits: Limits = Limits(), samples: int = 5, seed: int = 0, max_len: int = 60) -> dict:
    """Analysis of the state graph, the compiled automaton's size and cycles, the exact
    entropy and perplexity floor of the language, and sample sentences."""
    g = read_fsg(path)
    analysis = analyze(g)
    auto = compile_fsg(g, limits=limits)
    return {"path": str(path), "grammar": analysis.to_dict(), **describe_weighted(auto, samples, seed, max_len)}


def describe_fsg_artifact(path: str | Path, samples: int = 5, seed: int = 0, max_len: int = 60) -> dict:
    """What :func:`describe_fsg` says of the grammar an FSG artifact was compiled from, as
    far as the compiled automaton knows it: everything but the grammar as written
    (``grammar`` is None; ``source`` names the grammar file it came from)."""
    auto = load_artifact(path)
    if not isinstance(auto, WeightedAutomaton):
        raise NeurosymError(f"{path}: not an FSG artifact (it holds a {type(auto).__name__})")
    return {"path": str(path), "grammar": None, "source": auto.source, **describe_weighted(auto, samples, seed, max_len)}


def describe_weighted(auto: WeightedAutomaton, samples: int = 5, seed: int = 0, max_len: int = 60) -> dict:
    """The compiled FSG: states, finals, vocabulary, cyclic components (compiled states),
    roles, the exact entropy and sample sentences."""
    return {
        "automaton": {"states": auto.num_states, "final_states": int(auto.final.sum()), "vocab_size": len(auto.vocab),
                      "cyclic_components": auto.cyclic_components()},
        "roles": sorted(auto.role_tables),
        "entropy": auto.entropy().to_dict(),
        "samples": [" ".join(auto.vocab.tokens[i] for i in s) for s in auto.sample(samples, max_len=max_len, seed=seed)],
    }


def format_fsg(r: dict) -> str:
    """The FSG report of a grammar file, or of an FSG artifact (``grammar`` None)."""
    g, a, e = r["grammar"], r["automaton"], r["entropy"]
    compiled = f"{a['states']} deterministic states ({a['final_states']} final) over {a['vocab_size']} tokens" + (
        f"; roles: {', '.join(r['roles'])}" if r["roles"] else "")
    if g is not None:
        lines = [
            f"{r['path']}: {g['states']} grammar states, {g['arcs']} arcs ({g['eps_arcs']} <eps>), start {g['start']}, finals {', '.join(g['finals'])}",
            f"  compiled: {compiled}",
            "  cycles: " + ("; ".join(" ".join(c) for c in g["cyclic_components"]) if g["cyclic_components"] else "none (finite language)"),
        ]
    else:
        cycles = a["cyclic_components"]
        lines = [
            f"{r['path']}: compiled FSG" + (f" (from {r['source']})" if r.get("source") else ""),
            f"  compiled: {compiled}",
            "  cycles: " + ("; ".join("states " + " ".join(map(str, c)) for c in cycles) if cycles else "none (finite language)"),
        ]
    lines += [
        f"  entropy: {e['per_sentence']:.6g} nats ({e['per_sentence_bits']:.6g} bits) per sentence; expected length {e['expected_length']:.6g} tokens",
        f"  per token: {e['per_token']:.6g} nats -> perplexity floor {e['ppl_floor']:.6g} ({e['ppl_floor_with_eos']:.6g} counting an end-of-sentence token)",
    ]
    lines += [f"  warning: {w}" for w in (g["warnings"] if g is not None else [])]
    lines.append("  samples:")
    lines += [f"    {s}" for s in r["samples"]]
    return "\n".join(lines)


def draw_fsg(path: str | Path, out: str | Path) -> Path:
    """Draw the grammar as written (states, arcs labelled ``label p``) to ``.dot`` or an image."""
    g = read_fsg(path)
    graph = state_graph(g)
    labels: dict[tuple, list[str]] = {}
    for u, v, d in graph.edges(data=True):
        labels.setdefault((u, v), []).append(f"{d['label']} {d['weight']:.3g}")
    finals = {q for q, d in graph.nodes(data=True) if d["final"] > 0}
    out = Path(out)
    if out.suffix == ".dot":
        esc = lambda s: str(s).replace("\\", "\\\\").replace('"', '\\"')  # noqa: E731
        lines = [f'digraph "{esc(graph.name)}" {{', "  rankdir=LR;", "  start [shape=point];", f'  start -> "{esc(g.start_state)}";']
        for q in graph.nodes:
            lines.append(f'  "{esc(q)}" [shape={"doublecircle" if q in finals else "circle"}];')
        for (u, v), ls in labels.items():
            lines.append(f'  "{esc(u)}" -> "{esc(v)}" [label="{esc(chr(10).join(ls))}"];')
        atomic_write_bytes(out, ("\n".join(lines) + "\n}\n").encode() + DOT_MARK)
        return out
    return draw_labelled(list(graph.nodes), finals, {k: "\n".join(v) for k, v in labels.items()}, out, f"{graph.name} (start {g.start_state}, finals shaded)")


# ---------------------------------------------------------------------- PCFG
def describe_pcfg(path: str | Path, samples: int = 5, seed: int = 0, max_len: int = 60) -> dict:
    """Rule counts, consistency (spectral radius), the CNF's size, findings and sample trees."""
    grammar = as_grammar(path)
    check_pcfg(grammar, strict=True)
    out = summary(grammar)
    out["path"] = str(grammar.path or path)
    out["samples"] = [str(t) for t in sample_trees(grammar, samples, seed=seed, max_len=max_len)]
    return out


def format_pcfg(r: dict) -> str:
    return format_summary(r) + "\n  samples:\n" + "\n".join(f"    {t}" for t in r["samples"])


# ---------------------------------------------------------------------- lexicon
def describe_lexicon(path: str | Path, words: list[str] | None = None, rows: int = 12) -> dict:
    """The lexicon's features, classes and modifiers, and for every feature with fuzzy
    terms a table of static memberships: the given ``words``, or about ``rows`` words,
    the ones with the largest membership in each term."""
    lex = read_lexicon(path)
    out = lex.summary()
    out["path"] = str(path)
    tables = {}
    for f in lex.features.values():
        if f.terms is None:
            continue
        names, table = static_memberships(lex, f.name)
        index = {w: i for i, w in enumerate(names)}
        if words:
            missing = [w for w in words if w not in index]
            if missing:
                raise NeurosymError(f"{path}: no word {', '.join(map(repr, missing))} in the lexicon")
            chosen = [index[w] for w in words]
        else:  # the words most in each term, so the table spans the feature's range
            per_term = -(-rows // len(f.terms.names))
            chosen = []
            for k in range(len(f.terms.names)):
                for i in table[:, k].argsort(descending=True, stable=True).tolist()[:per_term]:
                    if i not in chosen:
                        chosen.append(i)
        tables[f.name] = {
            "terms": list(f.terms.names),
            "rows": [{"word": names[i], "value": lex.value(names[i], f.name), "memberships": [round(float(x), 6) for x in table[i]]} for i in chosen],
        }
    out["term_tables"] = tables
    return out


def format_lexicon(r: dict) -> str:
    lines = [format_lexicon_summary(r)]
    for name, t in r["term_tables"].items():
        lines.append(f"terms of {name}:")
        lines.append("  " + f"{'word':<16}{'value':>8}" + "".join(f"{term:>9}" for term in t["terms"]))
        for row in t["rows"]:
            value = "" if row["value"] is None else f"{row['value']:g}"
            lines.append("  " + f"{row['word']:<16}{value:>8}" + "".join(f"{m:>9.4f}" for m in row["memberships"]))
    return "\n".join(lines)


# ---------------------------------------------------------------------- artifacts
def describe_artifact(path: str | Path, samples: int = 5, seed: int = 0) -> dict:
    """Sizes and samples of a saved PCFG (``RuleTensors``) or lexicon (``FeatureBank``) artifact."""
    obj = load_artifact(path)
    if isinstance(obj, FeatureBank):
        return {"path": str(path), "kind": "lexicon", "columns": obj.names, "vocab_size": len(obj.vocab), "roles": obj.roles}
    sents = obj.sample(samples, seed=seed)
    return {
        "path": str(path),
        "kind": "pcfg",
        "start": obj.start,
        "nonterminals": obj.N,
        "preterminals": obj.T,
        "vocab_size": len(obj.vocab),
        "samples": [" ".join(obj.vocab.tokens[i] for i in s) for s in sents],
    }


def format_artifact(r: dict) -> str:
    if r["kind"] == "lexicon":
        roles = f"; roles: {', '.join(r['roles'])}" if r["roles"] else ""
        return f"{r['path']}: feature bank, {len(r['columns'])} columns over {r['vocab_size']} tokens{roles}\n  columns: {', '.join(r['columns'])}"
    lines = [f"{r['path']}: PCFG rule tensors, start {r['start']}, {r['nonterminals']} nonterminals, {r['preterminals']} preterminals, {r['vocab_size']} tokens", "  samples:"]
    return "\n".join(lines + [f"    {s}" for s in r["samples"]])
