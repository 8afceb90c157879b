"""`Automaton`: a DFA over the tokens of a `Vocab`, as tensors.

A token-level automaton is made from a character DFA by walking the vocabulary's trie
of surfaces through it (:mod:`neurosym.compile.token_index`): characters for character
and word vocabularies, UTF-8 bytes for byte-level vocabularies (so a state may sit in
the middle of a character).

The automaton is stored sparsely — each state's arcs as sorted (token, next state)
pairs — with every state's allowed-token set packed into 32-bit words, so stepping is
a binary search and a decoding mask one row lookup, whatever the vocabulary's size.
A dense ``(Q, V)`` table is built only when asked for (:attr:`Automaton.delta`).
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np
import torch

from neurosym.compile.dfa import CharDFA, sample_paths
from neurosym.compile.token_index import WORD_BITS, TokenArcs, token_arcs
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab


class Automaton:
    """A deterministic automaton over token ids.

    Build one from a dense table (``Automaton(delta, final, vocab)``) or from sparse
    arcs (:meth:`from_arcs`). Every state of a compiled automaton is live (reachable,
    and able to reach a final state), so the allowed tokens of a state are exactly those
    that keep a prefix completable.

    Attributes:
        arcs: the :class:`~neurosym.compile.token_index.TokenArcs` (CSR, numpy).
        keys, targets: (E,) long tensors: arc ``i`` reads token ``keys[i] % V`` in state
            ``keys[i] // V`` (ascending) and goes to ``targets[i]``.
        mask_bits: (M, ceil(V / 32)) int32 tensor of distinct allowed-token sets, bit
            ``v % 32`` of word ``v // 32``; ``mask_row`` (Q,) long picks each state's row.
        start: the start state (always 0).
        final: (Q,) bool tensor.
        vocab: the token vocabulary.
        char_dfa: the character DFA it came from, if any (for inspection and sampling).
        name: a display name (the pattern's name in a bank).
    """

    def __init__(
        self,
        delta: torch.Tensor | None,
        final: torch.Tensor,
        vocab: Vocab,
        start: int = 0,
        char_dfa: CharDFA | None = None,
        name: str | None = None,
        source: str | None = None,
        arcs: TokenArcs | None = None,
    ):
        if arcs is None:
            if delta is None or delta.dim() != 2 or delta.shape[1] != len(vocab):
                shape = None if delta is None else tuple(delta.shape)
                raise NeurosymError(f"delta must be (Q, {len(vocab)}), got {shape}")
            arcs = TokenArcs.from_dense(delta.long().cpu().numpy(), final.bool().cpu().numpy())
        elif arcs.num_tokens != len(vocab):
            raise NeurosymError(f"arcs are over {arcs.num_tokens} tokens, the vocabulary has {len(vocab)}")
        self.arcs = arcs
        self._delta = None if delta is None else delta.long()
        V = max(arcs.num_tokens, 1)
        self.keys = torch.from_numpy(arcs.sources * V + arcs.tokens)
        self.targets = torch.from_numpy(arcs.targets)
        bits, row = arcs.packed_masks()
        self.mask_bits = torch.from_numpy(bits)
        self.mask_row = torch.from_numpy(row)
        self.final = torch.from_numpy(arcs.final) if final is None else final.bool()
        self.vocab = vocab
        self.start = start
        self.char_dfa = char_dfa
        self.name = name
        self.source = source

    @classmethod
    def from_arcs(cls, arcs: TokenArcs, vocab: Vocab, **kwargs) -> "Automaton":
        """An automaton from sparse arcs (no dense table is built)."""
        return cls(None, torch.from_numpy(arcs.final), vocab, arcs=arcs, **kwargs)

    # ------------------------------------------------------------------ shape
    @property
    def num_states(self) -> int:
        return self.arcs.num_states

    @property
    def num_arcs(self) -> int:
        return len(self.arcs.tokens)

    @property
    def delta(self) -> torch.Tensor:
        """(Q, V) long tensor of next states, -1 = reject; built on first use (Q*V*8 bytes)."""
        if self._delta is None:
            self._delta = torch.from_numpy(self.arcs.dense())
        return self._delta

    def index_bytes(self) -> int:
        """Bytes held by the sparse index and the packed masks (not the optional dense table)."""
        return sum(t.numel() * t.element_size() for t in (self.keys, self.targets, self.mask_bits, self.mask_row, self.final))

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
        state = torch.tensor(self.start)
        for t in self.ids(tokens):
            state = self.step(state, torch.tensor(t))
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
        """Next states (...) for states (...) and tokens (...); -1 stays -1, and an
        unknown token (outside ``0..V-1``) rejects."""
        V = max(self.arcs.num_tokens, 1)
        states, tokens = torch.as_tensor(states, dtype=torch.long), torch.as_tensor(tokens, dtype=torch.long)
        keys = self.keys.to(states.device)
        if keys.numel() == 0:
            return torch.full_like(torch.broadcast_tensors(states, tokens)[0], -1)
        want = states.clamp(min=0) * V + tokens
        pos = torch.searchsorted(keys, want).clamp(max=keys.numel() - 1)
        hit = (keys[pos] == want) & (states >= 0) & (tokens >= 0) & (tokens < V)
        return torch.where(hit, self.targets.to(states.device)[pos], torch.full_like(want, -1))

    def mask_words(self, states: torch.Tensor) -> torch.Tensor:
        """Allowed next tokens, packed: states (...) -> (..., ceil(V / 32)) int32 (a row
        gather; all zero after -1)."""
        words = self.mask_bits.to(states.device)[self.mask_row.to(states.device)[states.clamp(min=0)]]
        return torch.where((states >= 0).unsqueeze(-1), words, torch.zeros_like(words))

    def mask(self, states: torch.Tensor) -> torch.Tensor:
        """Allowed next tokens: states (...) -> (..., V) bool; nothing is allowed after -1."""
        return unpack_bits(self.mask_words(states), self.arcs.num_tokens)

    def log_transitions(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Dense (Q, Q, V) transition log-weights: 0 on arcs, -inf elsewhere.

        Memory is Q*Q*V: fine for character vocabularies, large for a 32k BPE vocabulary.
        """
        Q, V = self.num_states, self.arcs.num_tokens
        out = torch.full((Q, Q, V), float("-inf"), dtype=dtype)
        out[torch.from_numpy(self.arcs.sources), self.targets, torch.from_numpy(self.arcs.tokens)] = 0.0
        return out

    # ------------------------------------------------------------------ analysis
    def to_networkx(self) -> nx.MultiDiGraph:
        """States as nodes (``final``, ``start`` attributes); one edge per (src, dst)
        with ``tokens`` (ids) and a short ``label``."""
        g = nx.MultiDiGraph(name=self.name or "automaton")
        for q in range(self.num_states):
            g.add_node(q, final=bool(self.final[q]), start=q == self.start)
        src, tok, dst = self.arcs.sources, self.arcs.tokens, self.arcs.targets
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


# ---------------------------------------------------------------------- bit masks
def unpack_bits(words: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """Packed masks (..., W) int32 -> (..., num_tokens) bool (bit ``v % 32`` of word ``v // 32``)."""
    shifts = torch.arange(WORD_BITS, device=words.device, dtype=torch.int32)
    bits = (words.unsqueeze(-1) >> shifts) & 1
    return bits.flatten(-2)[..., :num_tokens].bool()


def token_delta(dfa: CharDFA, vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """The minimal trim token-level DFA of ``dfa`` as a dense ``(delta (Q, V), final (Q,))``
    (start state 0). Prefer :func:`~neurosym.compile.token_index.token_arcs` for large
    vocabularies: this table has Q*V entries."""
    arcs = token_arcs(dfa, vocab)
    return arcs.dense(), arcs.final
