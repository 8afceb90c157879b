"""Reports behind ``neurosym inspect`` and ``neurosym sample`` for `.fsg`, `.pcfg` and `.lex`
files (regex banks and automata are in :mod:`neurosym.inspect`).

Each ``describe_*`` returns a JSON-safe dict; ``format_*`` turns it into lines of text.
"""

from __future__ import annotations

from pathlib import Path

from neurosym.compile.regex import Limits
from neurosym.errors import NeurosymError


# ---------------------------------------------------------------------- FSG
def describe_fsg(path: str | Path, limits: Limits = Limits(), samples: int = 5, seed: int = 0, max_len: int = 60) -> dict:
    """Analysis of the state graph, the compiled automaton's size, the exact entropy and
    perplexity floor of the language, and sample sentences."""
    from neurosym.compile.fsg import analyze, compile_fsg
    from neurosym.dsl.fsg import read_fsg

    g = read_fsg(path)
    analysis = analyze(g)
    auto = compile_fsg(g, limits=limits)
    return {
        "path": str(path),
        "grammar": analysis.to_dict(),
        "automaton": {"states": auto.num_states, "final_states": int(auto.final.sum()), "vocab_size": len(auto.vocab)},
        "roles": sorted(auto.role_tables),
        "entropy": auto.entropy().to_dict(),
        "samples": [" ".join(auto.vocab.tokens[i] for i in s) for s in auto.sample(samples, max_len=max_len, seed=seed)],
    }


def format_fsg(r: dict) -> str:
    g, a, e = r["grammar"], r["automaton"], r["entropy"]
    lines = [
        f"{r['path']}: {g['states']} grammar states, {g['arcs']} arcs ({g['eps_arcs']} <eps>), start {g['start']}, finals {', '.join(g['finals'])}",
        f"  compiled: {a['states']} deterministic states ({a['final_states']} final) over {a['vocab_size']} tokens"
        + (f"; roles: {', '.join(r['roles'])}" if r["roles"] else ""),
        "  cycles: " + ("; ".join(" ".join(c) for c in g["cyclic_components"]) if g["cyclic_components"] else "none (finite language)"),
        f"  entropy: {e['per_sentence']:.6g} nats ({e['per_sentence_bits']:.6g} bits) per sentence; expected length {e['expected_length']:.6g} tokens",
        f"  per token: {e['per_token']:.6g} nats -> perplexity floor {e['ppl_floor']:.6g} ({e['ppl_floor_with_eos']:.6g} counting an end-of-sentence token)",
    ]
    lines += [f"  warning: {w}" for w in g["warnings"]]
    lines.append("  samples:")
    lines += [f"    {s}" for s in r["samples"]]
    return "\n".join(lines)


def draw_fsg(path: str | Path, out: str | Path) -> Path:
    """Draw the grammar as written (states, arcs labelled ``label p``) to ``.dot`` or an image."""
    from neurosym.compile.artifact import atomic_write_bytes
    from neurosym.compile.fsg import state_graph
    from neurosym.dsl.fsg import read_fsg
    from neurosym.inspect import draw_labelled

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
        atomic_write_bytes(out, ("\n".join(lines) + "\n}\n").encode())
        return out
    return draw_labelled(list(graph.nodes), finals, {k: "\n".join(v) for k, v in labels.items()}, out, f"{graph.name} (start {g.start_state}, finals shaded)")


# ---------------------------------------------------------------------- PCFG
def describe_pcfg(path: str | Path, samples: int = 5, seed: int = 0, max_len: int = 60) -> dict:
    """Rule counts, consistency (spectral radius), the CNF's size, findings and sample trees."""
    from neurosym.compile.pcfg import summary
    from neurosym.compile.pcfg_check import check_pcfg
    from neurosym.compile.pcfg_sample import sample_trees
    from neurosym.dsl.pcfg import read_pcfg

    grammar = read_pcfg(path)
    check_pcfg(grammar, strict=True)
    out = summary(grammar)
    out["path"] = str(path)
    out["samples"] = [str(t) for t in sample_trees(grammar, samples, seed=seed, max_len=max_len)]
    return out


def format_pcfg(r: dict) -> str:
    from neurosym.compile.pcfg import format_summary

    return format_summary(r) + "\n  samples:\n" + "\n".join(f"    {t}" for t in r["samples"])


# ---------------------------------------------------------------------- lexicon
def describe_lexicon(path: str | Path, words: list[str] | None = None, rows: int = 12) -> dict:
    """The lexicon's features, classes and modifiers, and for every feature with fuzzy
    terms a table of static memberships: the given ``words``, or about ``rows`` words,
    the ones with the largest membership in each term."""
    from neurosym.compile.lexicon import static_memberships
    from neurosym.dsl.lexicon import read_lexicon

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
    from neurosym.dsl.lexicon import format_lexicon_summary

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
    from neurosym.compile.artifact import load_artifact
    from neurosym.compile.lexicon import FeatureBank

    obj = load_artifact(path)
    if isinstance(obj, FeatureBank):
        return {"path": str(path), "kind": "features", "columns": obj.names, "vocab_size": len(obj.vocab), "roles": obj.roles}
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
    if r["kind"] == "features":
        roles = f"; roles: {', '.join(r['roles'])}" if r["roles"] else ""
        return f"{r['path']}: feature bank, {len(r['columns'])} columns over {r['vocab_size']} tokens{roles}\n  columns: {', '.join(r['columns'])}"
    lines = [f"{r['path']}: PCFG rule tensors, start {r['start']}, {r['nonterminals']} nonterminals, {r['preterminals']} preterminals, {r['vocab_size']} tokens", "  samples:"]
    return "\n".join(lines + [f"    {s}" for s in r["samples"]])
