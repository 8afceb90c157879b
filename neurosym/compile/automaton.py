"""`Automaton`: a DFA over the tokens of a `Vocab`, as tensors.

A token-level automaton is made from a character DFA by walking every token's
surface through it: characters for character and word vocabularies, UTF-8 bytes for
byte-level vocabularies (so a state may sit in the middle of a character). The walk
is vectorised over all (state, token) pairs, one token position at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np
import torch

from neurosym.compile.dfa import OTHER, CharDFA, minimize_table, sample_paths
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab


class Automaton:
    """A deterministic automaton over token ids.

    Attributes:
        delta: (Q, V) long tensor of next states, -1 = reject. Every state is live
            (reachable, and able to reach a final state), so ``delta >= 0`` is exactly
            the set of tokens that keep a prefix completable.
        start: the start state (always 0).
        final: (Q,) bool tensor.
        vocab: the token vocabulary.
        char_dfa: the character DFA it came from, if any (for inspection and sampling).
        name: a display name (the pattern's name in a bank).
    """

    def __init__(
        self,
        delta: torch.Tensor,
        final: torch.Tensor,
        vocab: Vocab,
        start: int = 0,
        char_dfa: CharDFA | None = None,
        name: str | None = None,
        source: str | None = None,
    ):
        if delta.dim() != 2 or delta.shape[1] != len(vocab):
            raise NeurosymError(f"delta must be (Q, {len(vocab)}), got {tuple(delta.shape)}")
        self.delta = delta.long()
        self.final = final.bool()
        self.vocab = vocab
        self.start = start
        self.char_dfa = char_dfa
        self.name = name
        self.source = source

    # ------------------------------------------------------------------ shape
    @property
    def num_states(self) -> int:
        return self.delta.shape[0]

    def __repr__(self) -> str:
        label = f"{self.name}: " if self.name else ""
        return f"Automaton({label}{self.num_states} states, {int(self.final.sum())} final, vocab={self.vocab!r})"

    # ------------------------------------------------------------------ running
    def ids(self, tokens: str | bytes | Sequence[int] | torch.Tensor) -> list[int]:
        """Token ids for text (encoded with the vocabulary) or ids passed through."""
        if isinstance(tokens, (str, bytes)):
            if isinstance(tokens, bytes):
                if self.vocab.kind != "bytes":
                    raise NeurosymError("bytes input needs a byte vocabulary")
                return self.vocab.encode(tokens.decode("utf-8"))
            return self.vocab.encode(tokens)
        return [int(t) for t in tokens]

    def accepts(self, tokens: str | bytes | Sequence[int] | torch.Tensor) -> bool:
        """Whether the whole token sequence (ids, or text to encode) is accepted."""
        state = self.start
        delta = self.delta
        for t in self.ids(tokens):
            state = int(delta[state, t])
            if state < 0:
                return False
        return bool(self.final[state])

    def run(self, ids: torch.Tensor) -> torch.Tensor:
        """States after each prefix of a batch: ids (B, L) -> states (B, L), -1 once rejected."""
        B, L = ids.shape
        states = torch.full((B,), self.start, dtype=torch.long)
        out = torch.empty(B, L, dtype=torch.long)
        for t in range(L):
            states = self.step(states, ids[:, t])
            out[:, t] = states
        return out

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Next states (...) for states (...) and tokens (...); -1 stays -1."""
        nxt = self.delta[states.clamp(min=0), tokens]
        return torch.where(states < 0, states, nxt)

    def mask(self, states: torch.Tensor) -> torch.Tensor:
        """Allowed next tokens: states (...) -> (..., V) bool; nothing is allowed after -1."""
        allowed = self.delta[states.clamp(min=0)] >= 0
        return allowed & (states >= 0).unsqueeze(-1)

    def log_transitions(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Dense (Q, Q, V) transition log-weights: 0 on arcs, -inf elsewhere.

        Memory is Q*Q*V: fine for character vocabularies, large for a 32k BPE vocabulary.
        """
        Q, V = self.delta.shape
        out = torch.full((Q, Q, V), float("-inf"), dtype=dtype)
        src, tok = (self.delta >= 0).nonzero(as_tuple=True)
        out[src, self.delta[src, tok], tok] = 0.0
        return out

    # ------------------------------------------------------------------ analysis
    def to_networkx(self) -> nx.MultiDiGraph:
        """States as nodes (``final``, ``start`` attributes); one edge per (src, dst)
        with ``tokens`` (ids) and a short ``label``."""
        g = nx.MultiDiGraph(name=self.name or "automaton")
        for q in range(self.num_states):
            g.add_node(q, final=bool(self.final[q]), start=q == self.start)
        d = self.delta.numpy()
        src, tok = np.nonzero(d >= 0)
        dst = d[src, tok]
        groups: dict[tuple[int, int], list[int]] = {}
        for s, t, k in zip(src.tolist(), dst.tolist(), tok.tolist()):
            groups.setdefault((s, t), []).append(k)
        for (s, t), toks in groups.items():
            g.add_edge(s, t, tokens=toks, label=_token_label(self.vocab, toks))
        return g

    def sample(self, n: int, max_len: int = 32, seed: int = 0, stop_prob: float = 0.3) -> list[list[int]]:
        """``n`` accepted token sequences of at most ``max_len`` tokens (random walks that
        stop at final states with ``stop_prob`` and steer to a final state in time).

        Special tokens are never sampled. Returns ``[]`` if no accepted sequence fits."""
        d = self.delta.numpy().copy()
        d[:, [s is None for s in self.vocab.surfaces]] = -1
        return sample_paths(d, self.final.numpy(), n, max_len, seed, stop_prob)


def _token_label(vocab: Vocab, toks: list[int], limit: int = 6) -> str:
    shown = [vocab.tokens[t] for t in toks[:limit]]
    more = f" +{len(toks) - limit}" if len(toks) > limit else ""
    return " ".join(repr(s)[1:-1] if len(s) == 1 else s for s in shown) + more


# ---------------------------------------------------------------------- token walking
def token_delta(dfa: CharDFA, vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """Walk every token through ``dfa``: returns the minimal trim token-level
    ``(delta (Q, V), final (Q,))`` with start state 0.

    Character and word vocabularies walk characters; byte vocabularies walk UTF-8
    bytes through :meth:`CharDFA.byte_dfa`. Special tokens reject, except a character
    vocabulary's ``<unk>``, which stands for "some character not in the vocabulary"
    and moves wherever all such characters agree.
    """
    if vocab.kind == "bytes":
        trans, final = dfa.byte_dfa()
        seqs = [list(s) if s is not None else None for s in vocab.surfaces]
    else:
        trans, final = dfa.trans, dfa.final
        seqs = [dfa.partition.classify(s) if s is not None else None for s in vocab.surfaces]
    delta = walk_sequences(trans, seqs)
    if vocab.kind == "char" and vocab.unk is not None:
        delta[:, vocab.unk] = _unknown_char_column(dfa, vocab)
    delta, final = minimize_table(delta, final)
    return delta, final


def walk_sequences(trans: np.ndarray, seqs: list[list[int] | None]) -> np.ndarray:
    """Run every symbol sequence from every state: trans (Q, K) -> (Q, V) end states.

    ``None`` sequences (special tokens) reject; an empty sequence stays put. Loops over
    the longest sequence's length only, never over states or tokens.
    """
    Q = trans.shape[0]
    V = len(seqs)
    lengths = np.array([len(s) if s is not None else 0 for s in seqs], dtype=np.int64)
    Lmax = int(lengths.max()) if V else 0
    sym = np.zeros((V, max(Lmax, 1)), dtype=np.int64)
    for v, s in enumerate(seqs):
        if s:
            sym[v, : len(s)] = s
    cur = np.repeat(np.arange(Q, dtype=np.int64)[:, None], V, axis=1)  # (Q, V)
    for i in range(Lmax):
        active = (lengths > i)[None, :] & (cur >= 0)
        nxt = trans[np.maximum(cur, 0), sym[None, :, i]]
        cur = np.where(active, nxt, cur)
    special = np.array([s is None for s in seqs])
    cur[:, special] = -1
    return cur


def _unknown_char_column(dfa: CharDFA, vocab: Vocab) -> np.ndarray:
    """Where ``<unk>`` goes from each state: the common target of every character class
    a character outside the vocabulary could be in, or -1 if they disagree."""
    known = {s for s in vocab.surfaces if isinstance(s, str)}
    classes = {OTHER} | {k for c, k in dfa.partition.class_of.items() if c not in known}
    cols = dfa.trans[:, sorted(classes)]
    agree = (cols == cols[:, :1]).all(axis=1)
    return np.where(agree, cols[:, 0], -1)
