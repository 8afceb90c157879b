"""PCFGs compiled to :class:`RuleTensors`, and their summaries.

``load_pcfg(path, vocab)`` parses a `.pcfg` file, checks it (:func:`check_pcfg`),
converts it to CNF (:mod:`neurosym.compile.cnf`) and builds log-space tensors in
pytorch-struct ``SentCFG`` layout: ``root`` (N,), ``binary`` (N, N+T, N+T) and
``emit`` (T, V), plus ``root_term`` (T,) and ``empty`` for sentences of length 1 and 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from neurosym.compile.cnf import CNFGrammar, to_cnf
from neurosym.compile.dfa import DEFAULT_VOCAB_CAP, finite_strings
from neurosym.compile.pcfg_check import analyze, check_pcfg
from neurosym.compile.pcfg_sample import sample_token_ids
from neurosym.compile.dfa import CharDFA
from neurosym.compile.regex import Limits, pattern_dfa, rule_dfa
from neurosym.dsl.pcfg import NT, Grammar, Terminal, as_grammar, lexeme_text, read_pcfg
from neurosym.errors import CompileError, SourceError, Span
from neurosym.semiring import LOG_ZERO
from neurosym.vocab import Vocab
from neurosym.compile.automaton import token_delta



def summary(grammar: Grammar | str | Path) -> dict:
    """Rule counts per kind, sizes, consistency radius, expected sentence length, the CNF's
    size and P(empty sentence) (when the grammar has no errors), and every finding."""
    grammar = as_grammar(grammar)
    kinds = dict.fromkeys(("epsilon", "lexical", "unit", "binary", "mixed", "long"), 0)
    for p in grammar.productions:
        nts = sum(isinstance(s, NT) for s in p.rhs)
        if not p.rhs:
            kinds["epsilon"] += 1
        elif len(p.rhs) == 1:
            kinds["unit" if nts else "lexical"] += 1
        elif nts < len(p.rhs):
            kinds["mixed"] += 1
        else:
            kinds["binary" if len(p.rhs) == 2 else "long"] += 1
    findings = check_pcfg(grammar, strict=False)
    a = analyze(grammar)
    terms = grammar.terminals
    out = {
        "path": grammar.path,
        "start": grammar.start,
        "weights": grammar.weights,
        "normalize": grammar.normalize,
        "nonterminals": len(grammar.nonterminals),
        "terminals": {"literal": sum(t.kind == "literal" for t in terms), "regex": sum(t.kind != "literal" for t in terms)},
        "rules": {"total": len(grammar.productions), **kinds},
        "consistency_radius": a.radius,
        "expected_length": a.expected_length,
        "findings": [str(f) for f in findings],
        "cnf": None,
        "empty_probability": None,
    }
    if not any(f.severity == "error" for f in findings):
        cnf = to_cnf(grammar, check=False)
        out["cnf"] = {
            "nonterminals": cnf.N,
            "preterminals": cnf.T,
            "binary_rules": len(cnf.binary_prob),
            "lexical_rules": int((cnf.lexical > 0).sum()),
        }
        out["empty_probability"] = cnf.empty
    return out


def format_summary(s: dict) -> str:
    """Human-readable lines for a :func:`summary` dict."""
    rules = ", ".join(f"{k} {v}" for k, v in s["rules"].items() if k != "total" and v)
    lines = [
        f"{s['path'] or 'grammar'}: start {s['start']}, {s['nonterminals']} nonterminals, "
        f"{s['terminals']['literal']} literal + {s['terminals']['regex']} regex terminals, weights: {s['weights']}",
        f"  rules: {s['rules']['total']} ({rules})",
        f"  consistency: spectral radius {s['consistency_radius']:.4g}"
        + (f", expected sentence length {s['expected_length']:.4g}" if s["expected_length"] is not None else " (inconsistent)"),
    ]
    if s["cnf"]:
        c = s["cnf"]
        lines.append(
            f"  CNF: {c['nonterminals']} nonterminals, {c['preterminals']} preterminals, "
            f"{c['binary_rules']} binary + {c['lexical_rules']} lexical rules; P(empty sentence) = {s['empty_probability']:.4g}"
        )
    lines += [f"  {f}" for f in s["findings"]]
    return "\n".join(lines)


@dataclass
class RuleTensors:
    """A PCFG in CNF as log-probability tensors (``-inf`` = impossible).

    Attributes:
        root: (N,) ``log P(sentence has >= 2 tokens, root nonterminal A)``.
        binary: (N, N+T, N+T) ``log P(A -> B C | A)``; children index nonterminals
            first, then preterminals.
        emit: (T, V) ``log P(token v | preterminal t)`` over ``vocab``.
        root_term: (T,) ``log P(sentence is one token, under preterminal t)``.
        empty: () ``log P(empty sentence)``.
        nonterminals, preterminals: names (N) and (T).
        lexemes: ``{token id: regex source}`` for the tokens of ``vocab`` that each stand
            for a whole ``/regex/`` terminal (a lexeme: any one string of the pattern's
            language, spelled by its byte DFA at the string level). Filled for the
            grammar's default vocabulary, where such a token is written ``/source/``;
            empty for a grammar without ``/regex/`` terminals and over a given vocabulary
            (there a lexeme emits the tokens it fully matches, as an imported regex does).

    ``root.exp().sum() + root_term.exp().sum() + empty.exp() == 1``.
    """

    root: torch.Tensor
    binary: torch.Tensor
    emit: torch.Tensor
    root_term: torch.Tensor
    empty: torch.Tensor
    nonterminals: list[str]
    preterminals: list[str]
    vocab: Vocab
    start: str = "S"
    path: str | None = None
    lexemes: dict[int, str] = field(default_factory=dict)

    @property
    def N(self) -> int:
        return len(self.nonterminals)

    @property
    def T(self) -> int:
        return len(self.preterminals)

    def __repr__(self) -> str:
        return f"RuleTensors(N={self.N}, T={self.T}, V={len(self.vocab)}, start={self.start!r}, dtype={self.binary.dtype})"

    def to(self, *args, **kwargs) -> "RuleTensors":
        """A copy with every tensor moved/cast like ``Tensor.to`` (device and/or dtype)."""
        moved = {k: getattr(self, k).to(*args, **kwargs) for k in ("root", "binary", "emit", "root_term", "empty")}
        return RuleTensors(**moved, nonterminals=self.nonterminals, preterminals=self.preterminals, vocab=self.vocab, start=self.start, path=self.path,
                           lexemes=dict(self.lexemes))

    def potentials(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``SentCFG`` log-potentials for token ids (B, L): terms (B, L, T), rules
        (B, N, N+T, N+T) and roots (B, N) (views, not copies, of the rule tensors)."""
        B = ids.shape[0]
        terms = self.emit.T[ids]
        return terms, self.binary.expand(B, *self.binary.shape), self.root.expand(B, self.N)

    def sample(self, n: int, seed: int = 0, max_len: int = 64) -> list[list[int]]:
        """``n`` sentences as lists of token ids, conditioned on at most ``max_len`` tokens
        (:func:`neurosym.compile.pcfg_sample.sample_token_ids`)."""
        return sample_token_ids(self, n, seed, max_len)


# ---------------------------------------------------------------------- compilation
def compile_pcfg(
    source: Grammar | CNFGrammar,
    vocab: Vocab | None = None,
    limits: Limits | None = None,
    dtype: torch.dtype = torch.float64,
) -> RuleTensors:
    """Compile a parsed grammar (checked, then converted to CNF) or a :class:`CNFGrammar`.

    The rule probabilities stay float64 from the text to the tensors unless ``dtype``
    asks for less (``torch.float32`` rounds every log-probability to 24 bits, a relative
    error of about 6e-8 per rule).

    Without ``vocab``, the vocabulary is ``Vocab.words`` of the literal terminals, every
    string of each imported regex terminal (which must then match finitely many, at most
    10,000) and one opaque token ``/source/`` per ``/regex/`` lexeme (``lexemes`` maps
    its id to the pattern). With ``vocab``, each literal must be a token of it and each
    regex terminal, imported or ``/regex/``, emits uniformly over the tokens its pattern
    fully matches (at least one)."""
    limits = limits or Limits()
    cnf = source if isinstance(source, CNFGrammar) else to_cnf(source, check=True, max_symbols=limits.max_cnf_symbols)
    S = cnf.N + cnf.T
    _check_size(cnf, "binary", (cnf.N, S, S), limits)
    dfas = {name: rule_dfa(imp.bank, imp.rule, limits) for name, imp in cnf.imports.items()}
    dfas.update(lexeme_dfas(cnf, limits))
    lexemes: dict[int, str] = {}
    if vocab is None:
        vocab = _default_vocab(cnf, dfas)
        lexemes = {vocab.id(lexeme_text(t.value)): t.value for t in cnf.terminals if t.kind == "lexeme"}
    _check_size(cnf, "emit", (cnf.T, len(vocab)), limits)
    emit = _emissions(cnf, vocab, dfas, lexemes_opaque=bool(lexemes) or not any(t.kind == "lexeme" for t in cnf.terminals))  # (T, V)

    def log(x) -> torch.Tensor:
        with np.errstate(divide="ignore"):
            return torch.from_numpy(np.array(np.log(np.asarray(x, dtype=np.float64)))).to(dtype)

    binary = torch.full((cnf.N, S, S), LOG_ZERO, dtype=dtype)
    if len(cnf.binary_prob):
        a, b, c = torch.from_numpy(cnf.binary_index).T
        binary[a, b, c] = log(cnf.binary_prob)  # rule keys are unique
    return RuleTensors(
        root=log(cnf.root),
        binary=binary,
        emit=log(emit),
        root_term=log(cnf.root_term),
        empty=log(cnf.empty),
        nonterminals=list(cnf.nonterminals),
        preterminals=list(cnf.preterminals),
        vocab=vocab,
        start=cnf.start,
        path=cnf.path,
        lexemes=lexemes,
    )


def lexeme_dfas(grammar: CNFGrammar | Grammar, limits: Limits | None = None) -> dict[str, CharDFA]:
    """The minimal character DFA of each ``/regex/`` terminal, keyed by its source. A
    pattern that matches the empty string or no string at all is refused at its first use
    (a lexeme is one non-empty string; write the empty case as an alternative)."""
    limits = limits or Limits()
    spans = grammar.terminal_spans if isinstance(grammar, CNFGrammar) else grammar.terminal_spans()
    out: dict[str, CharDFA] = {}
    for t in grammar.terminals:
        if t.kind != "lexeme" or t.value in out:
            continue
        at = spans.get(t) or Span(grammar.path, 1, 1)
        dfa = pattern_dfa(t.value, limits=limits, span=at.shifted(1))
        if not dfa.final.any():
            raise SourceError.at(at, f"regex terminal {t} matches no string")
        if dfa.final[0]:
            raise SourceError.at(at, f"regex terminal {t} matches the empty string; a lexeme is one non-empty string "
                                     "(make the pattern non-empty and write the empty case as an empty alternative)")
        out[t.value] = dfa
    return out


def _where(cnf: CNFGrammar, t: Terminal) -> Span:
    return cnf.terminal_spans.get(t) or Span(cnf.path, 1, 1)


def _default_vocab(cnf: CNFGrammar, dfas: dict) -> Vocab:
    words = [t.value for t in cnf.terminals if t.kind == "literal"]
    for t in cnf.terminals:
        if t.kind == "lexeme":
            name = lexeme_text(t.value)
            if name in words:
                raise SourceError.at(_where(cnf, t), f"the literal {name!r} is also the name of the regex terminal {name} "
                                                     "in the default vocabulary; rename one or pass a vocabulary")
            words.append(name)
        if t.kind == "regex":
            strings = finite_strings(dfas[t.value], DEFAULT_VOCAB_CAP)
            if strings is None:
                raise SourceError.at(
                    _where(cnf, t),
                    f"regex terminal {t.value} matches infinitely many strings (or over {DEFAULT_VOCAB_CAP:,}), so a default "
                    "vocabulary cannot list them; pass a vocabulary (vocab=...)",
                )
            words += strings
    return Vocab.words(words)


def _check_size(cnf: CNFGrammar, name: str, shape: tuple[int, ...], limits: Limits) -> None:
    """A CompileError naming the file, the tensor and the cap when ``shape`` is too big
    (checked before anything of that size is allocated)."""
    size = math.prod(shape)
    if size <= limits.max_elements:
        return
    dims = " x ".join(f"{d:,}" for d in shape)
    why = (f"{cnf.N:,} nonterminals and {cnf.T:,} preterminals in CNF" if name == "binary"
           else f"{cnf.T:,} preterminals over {shape[1]:,} tokens")
    raise CompileError(
        f"{cnf.path or '<string>'}: the rule tensor {name} would be {dims} = {size:,} elements ({why}), over the cap "
        f"of {limits.max_elements:,} (Limits.max_elements); fewer nonterminals (or fewer words) would fit, or raise the cap"
    )


def _emissions(cnf: CNFGrammar, vocab: Vocab, dfas: dict, lexemes_opaque: bool = False) -> np.ndarray:
    """(T, V) ``P(token | preterminal)``: each terminal's column of ``lexical`` spread over
    its tokens (one for a literal or, with ``lexemes_opaque``, a lexeme's ``/source/``
    token; the matching ones for a regex terminal)."""
    by_surface: dict = {}
    for i, s in enumerate(vocab.surfaces):
        if s is not None:
            by_surface.setdefault(s, i)
    out = np.zeros((cnf.T, len(vocab)))
    lit_k, lit_v = [], []
    for k, t in enumerate(cnf.terminals):
        if t.kind == "literal":
            key = t.value.encode("utf-8") if vocab.kind == "bytes" else t.value
            i = by_surface.get(key)
            if i is None:
                raise SourceError.at(_where(cnf, t), f"terminal {t} is not a token of the vocabulary ({vocab!r})")
            lit_k.append(k)
            lit_v.append(i)
        elif t.kind == "lexeme" and lexemes_opaque:
            lit_k.append(k)
            lit_v.append(vocab.id(lexeme_text(t.value)))
        else:
            delta, final = token_delta(dfas[t.value], vocab)
            row = delta[0]
            match = (row >= 0) & final[np.maximum(row, 0)]
            if not match.any():
                raise SourceError.at(_where(cnf, t), f"regex terminal {t} matches no token of the vocabulary ({vocab!r})")
            out[:, match] += cnf.lexical[:, k : k + 1] / match.sum()
    if lit_k:  # several terminals may share a token (a byte vocabulary): accumulate
        cols = np.array(lit_v, dtype=np.int64)
        np.add.at(out.T, cols, cnf.lexical[:, lit_k].T)
    return out


def load_pcfg(path: str | Path | Grammar, vocab: Vocab | None = None, limits: Limits | None = None,
              dtype: torch.dtype = torch.float64) -> RuleTensors:
    """Parse, check and compile a `.pcfg` file or a parsed grammar (the ``neurosym.load``
    loader for ``.pcfg``; ``limits`` caps the regex terminals' DFAs). The tensors are
    float64 (the file's probabilities as parsed) unless ``dtype`` asks for less."""
    grammar = as_grammar(path)
    check_pcfg(grammar, strict=True)
    limits = limits or Limits()
    return compile_pcfg(to_cnf(grammar, check=False, max_symbols=limits.max_cnf_symbols), vocab, limits, dtype)


__all__ = ["RuleTensors", "compile_pcfg", "format_summary", "lexeme_dfas", "load_pcfg", "summary"]
