"""Human-readable reports and drawings of compiled automata (behind ``neurosym inspect``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from neurosym.compile.automaton import Automaton
from neurosym.compile.dfa import OTHER, Partition
from neurosym.compile.regex import Limits, RegexBank
from neurosym.errors import NeurosymError


def load_any(path: str | Path, **limits) -> RegexBank:
    """A bank from a grammar file or a saved artifact (a lone automaton becomes a one-pattern bank)."""
    import neurosym
    from neurosym.compile.artifact import load_artifact

    path = Path(path)
    obj = load_artifact(path) if path.suffix == ".safetensors" else neurosym.load(path, **limits)
    if isinstance(obj, Automaton):
        name = obj.name or "PATTERN"
        obj.name = name
        return RegexBank({name: obj}, torch.ones(1), obj.vocab)
    return obj


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


def draw_automaton(auto: Automaton, path: str | Path) -> Path:
    """Write ``auto`` as DOT text (``.dot``) or a matplotlib drawing (``.png``/``.svg``/``.pdf``)."""
    path = Path(path)
    if path.suffix == ".dot":
        from neurosym.compile.artifact import atomic_write_bytes

        atomic_write_bytes(path, to_dot(auto).encode())
        return path
    nodes, labels = labelled_edges(auto)
    return draw_labelled([q for q, _ in nodes], {q for q, fin in nodes if fin}, labels, path, f"{auto.name or 'automaton'} (start 0, finals shaded)")


def draw_labelled(nodes: list, finals: set, labels: dict[tuple, str], path: str | Path, title: str) -> Path:
    """Draw a labelled directed graph with matplotlib to ``.png``/``.svg``/``.pdf`` (atomically)."""
    from neurosym.compile.artifact import atomic_write_bytes

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
    fig.savefig(buf, format=path.suffix[1:], bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path
