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
from neurosym.compile.token_index import WORD_BITS, TokenArcs, TokenWalker, token_arcs, vocab_trie
from neurosym.errors import NeurosymError
from neurosym.semiring import LOG_ZERO
from neurosym.vocab import Vocab

DENSE_MASK_BYTES = 1 << 20  # mask tables up to this size are stored densely (a mask write is then one row copy)


class Automaton:
    """A deterministic automaton over token ids.

    Build one from a dense table (``Automaton(delta, final, vocab)``), from sparse arcs
    (:meth:`from_arcs`), or from the compiler's index (:meth:`from_index`: arcs are then
    not kept at all — a step reads the token's characters or bytes through a small
    symbol-level table — and are rebuilt only if asked for). Every state of a compiled
    automaton is live (reachable, and able to reach a final state), so the allowed
    tokens of a state are exactly those that keep a prefix completable.

    Attributes:
        mask_row: (Q,) long: the distinct allowed-token set of each state. The sets are
            packed into 32-bit words (bit ``v % 32`` of word ``v // 32``) and stored
            sparsely (set ``m`` has the nonzero words ``mask_index[mask_ptr[m]:mask_ptr[m + 1]]``
            with values ``mask_value[...]``), or, when that would not be smaller or the dense
            table takes at most ``DENSE_MASK_BYTES`` (1 MiB: speed first for small
            indexes), densely as ``mask_dense`` (M, ⌈V/32⌉) int32 (then the sparse tensors
            are empty).
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
        walker: TokenWalker | None = None,
    ):
        if arcs is None:
            if delta is None or delta.dim() != 2 or delta.shape[1] != len(vocab):
                shape = None if delta is None else tuple(delta.shape)
                raise NeurosymError(f"delta must be (Q, {len(vocab)}), got {shape}")
            arcs = TokenArcs.from_dense(delta.long().cpu().numpy(), final.bool().cpu().numpy())
        elif arcs.num_tokens != len(vocab):
            raise NeurosymError(f"arcs are over {arcs.num_tokens} tokens, the vocabulary has {len(vocab)}")
        self._delta = None if delta is None else delta.long()
        self._num_states, self._num_arcs = arcs.num_states, len(arcs.tokens)
        self.words = (len(vocab) + WORD_BITS - 1) // WORD_BITS
        bits, row = arcs.packed_masks()
        m, w = np.nonzero(bits)
        self.mask_row = torch.from_numpy(row)
        if bits.nbytes <= max(len(m) * 8 + (len(bits) + 1) * 8, DENSE_MASK_BYTES):  # dense rows: store them as they are
            self.mask_dense: torch.Tensor | None = torch.from_numpy(np.ascontiguousarray(bits))
            m, w = m[:0], w[:0]
        else:
            self.mask_dense = None
        self.mask_ptr = torch.from_numpy(np.concatenate([[0], np.cumsum(np.bincount(m, minlength=len(bits)))]).astype(np.int64))
        self.mask_index = torch.from_numpy(w.astype(np.intp))  # numpy's own index type: a mask write indexes with it directly
        self.mask_value = torch.from_numpy(bits[m, w])
        self._np_masks = (row, self.mask_ptr.numpy(), self.mask_index.numpy(), self.mask_value.numpy())  # views, for write_mask
        # dense tables (at most DENSE_MASK_BYTES): each state's row as a ready numpy view, for write_mask
        self._dense_rows = None
        if self.mask_dense is not None:
            views = list(self.mask_dense.numpy())  # one view per distinct row, shared by the states that have it
            self._dense_rows = [views[m] for m in row.tolist()]
        self.final = torch.from_numpy(arcs.final.copy()) if final is None else final.bool()
        self.walker = walker
        if walker is None:  # step by binary search over the arcs, kept
            self._arcs: TokenArcs | None = arcs
            self._keys = torch.from_numpy(arcs.sources * max(len(vocab), 1) + arcs.tokens)
            self._targets = torch.from_numpy(arcs.targets)
        else:  # step through the symbol table; arcs rebuilt on demand
            self._arcs = None
            trie = vocab_trie(vocab)
            self._walk = {
                "table": torch.from_numpy(walker.table.astype(np.int64)),
                "columns": torch.from_numpy(walker.columns.astype(np.int64)),
                "enter": torch.from_numpy(walker.enter),
                "leave": torch.from_numpy(walker.leave),
                "symbols": torch.from_numpy(trie.token_symbols),
                "length": torch.from_numpy(np.where(trie.special, -1, trie.token_len)),
                "unk_next": None if walker.unk_next is None else torch.from_numpy(walker.unk_next),
            }
        self.vocab = vocab
        self.start = start
        self.char_dfa = char_dfa
        self.name = name
        self.source = source

    @classmethod
    def from_arcs(cls, arcs: TokenArcs, vocab: Vocab, **kwargs) -> "Automaton":
        """An automaton from sparse arcs (kept; no dense table is built)."""
        return cls(None, torch.from_numpy(arcs.final), vocab, arcs=arcs, **kwargs)

    @classmethod
    def from_index(cls, arcs: TokenArcs, walker: TokenWalker, vocab: Vocab, **kwargs) -> "Automaton":
        """An automaton that keeps only its masks and the walker (see the class docstring)."""
        return cls(None, torch.from_numpy(arcs.final), vocab, arcs=arcs, walker=walker, **kwargs)

    # ------------------------------------------------------------------ shape
    @property
    def num_states(self) -> int:
        return self._num_states

    @property
    def num_arcs(self) -> int:
        return self._num_arcs

    @property
    def arcs(self) -> TokenArcs:
        """The arcs as CSR rows (:class:`~neurosym.compile.token_index.TokenArcs`),
        rebuilt from the walker on first use when they were not kept."""
        if self._arcs is None:
            self._arcs = self.walker.arcs(vocab_trie(self.vocab), self.final.cpu().numpy(), self.vocab.unk if self.vocab.kind == "char" else None)
        return self._arcs

    @property
    def delta(self) -> torch.Tensor:
        """(Q, V) long tensor of next states, -1 = reject; built on first use (Q*V*8 bytes)."""
        if self._delta is None:
            self._delta = torch.from_numpy(self.arcs.dense())
        return self._delta

    def index_bytes(self) -> int:
        """Bytes this automaton holds to step and mask: the packed masks, the final flags,
        and either the kept arcs or the walker's tables (the vocabulary's own symbol
        table, shared by every automaton over it, and optional dense tables not counted)."""
        tensors = [self.mask_ptr, self.mask_index, self.mask_value, self.mask_row, self.final]
        if self.mask_dense is not None:
            tensors.append(self.mask_dense)
        held = sum(t.numel() * t.element_size() for t in tensors)
        if self.walker is None:
            return held + sum(t.numel() * t.element_size() for t in (self._keys, self._targets))
        return held + self.walker.nbytes()

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
        for t in self.ids(tokens):
            state = self.next_state(state, t)
            if state < 0:
                return False
        return bool(self.final[state])

    def next_state(self, state: int, token: int) -> int:
        """One step for one state and one token, in plain Python/numpy (no tensor
        overhead): the next state, or -1."""
        V = len(self.vocab)
        if state < 0 or not 0 <= token < V:
            return -1
        if self._delta is not None:
            return int(self._delta[state, token])
        if self.walker is None:
            keys = self._keys.numpy()
            want = state * max(V, 1) + token
            pos = int(np.searchsorted(keys, want))
            return int(self._targets[pos]) if pos < len(keys) and keys[pos] == want else -1
        w, trie = self.walker, vocab_trie(self.vocab)
        if trie.special[token]:
            return int(w.unk_next[state]) if w.unk_next is not None and token == self.vocab.unk else -1
        s = int(w.enter[state])
        for sym in trie.token_symbols[token, : trie.token_len[token]].tolist():
            col = int(w.columns[sym])
            s = int(w.table[s, col]) if col >= 0 else -1
            if s < 0:
                return -1
        return int(w.leave[s])

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
        V = len(self.vocab)
        states, tokens = torch.broadcast_tensors(torch.as_tensor(states, dtype=torch.long), torch.as_tensor(tokens, dtype=torch.long))
        ok = (states >= 0) & (tokens >= 0) & (tokens < V)
        q, t = states.clamp(min=0), tokens.clamp(0, max(V - 1, 0))
        if self._delta is not None:  # a dense table is at hand (small automata, FSGs): one gather
            return torch.where(ok, self._delta.to(states.device)[q, t], -1)
        if self.walker is None:
            keys = self._keys.to(states.device)
            if keys.numel() == 0:
                return torch.full_like(states, -1)
            want = q * max(V, 1) + t
            pos = torch.searchsorted(keys, want.reshape(-1)).reshape(want.shape).clamp(max=keys.numel() - 1)
            return torch.where(ok & (keys[pos] == want), self._targets.to(states.device)[pos], torch.full_like(want, -1))
        w = {k: (v.to(states.device) if v is not None else None) for k, v in self._walk.items()}
        length = w["length"][t]
        sym = w["symbols"][t].long()  # (..., L), -1 after the end
        s = w["enter"][q]
        for i in range(int(length.max()) if length.numel() else 0):
            col = torch.where(sym[..., i] >= 0, w["columns"][sym[..., i].clamp(min=0)], -1)
            nxt = torch.where((col >= 0) & (s >= 0), w["table"][s.clamp(min=0), col.clamp(min=0)], -1)
            s = torch.where(length > i, nxt, s)
        out = torch.where(s >= 0, w["leave"][s.clamp(min=0)], -1)
        out = torch.where(length < 0, -1, out)  # special tokens never move ...
        if w["unk_next"] is not None and self.vocab.unk is not None:  # ... but a character vocabulary's <unk>
            out = torch.where(t == self.vocab.unk, w["unk_next"][q], out)
        return torch.where(ok, out, -1)

    def mask_words(self, states: torch.Tensor) -> torch.Tensor:
        """Allowed next tokens, packed: states (...) -> (..., ceil(V / 32)) int32 (all
        zero after -1)."""
        states = torch.as_tensor(states, dtype=torch.long)
        if self.mask_dense is not None:
            words = self.mask_dense.to(states.device)[self.mask_row.to(states.device)[states.clamp(min=0)]]
            return torch.where((states >= 0).unsqueeze(-1), words, torch.zeros_like(words))
        flat = states.reshape(-1)
        dev = flat.device
        out = torch.zeros(flat.numel(), self.words, dtype=torch.int32, device=dev)
        rows = self.mask_row.to(dev)[flat.clamp(min=0)]
        ptr = self.mask_ptr.to(dev)
        counts = torch.where(flat >= 0, ptr[rows + 1] - ptr[rows], 0)
        owner = torch.repeat_interleave(torch.arange(flat.numel(), device=dev), counts)
        starts = torch.repeat_interleave(ptr[rows] - (torch.cumsum(counts, 0) - counts), counts)
        idx = starts + torch.arange(int(counts.sum()), device=dev)
        out[owner, self.mask_index.to(dev)[idx].long()] = self.mask_value.to(dev)[idx]
        return out.reshape(*states.shape, self.words)

    def write_mask(self, state: int, out: np.ndarray) -> None:
        """Write one state's packed mask into ``out`` (ceil(V / 32),) int32 in place: the
        single-row fast path of :meth:`mask_words` (numpy, no allocation)."""
        if self._dense_rows is not None:
            out[:] = self._dense_rows[state]
            return
        row, ptr, index, value = self._np_masks
        m = row[state]
        a, b = ptr[m], ptr[m + 1]
        out.fill(0)
        out[index[a:b]] = value[a:b]

    def mask(self, states: torch.Tensor) -> torch.Tensor:
        """Allowed next tokens: states (...) -> (..., V) bool; nothing is allowed after -1."""
        return unpack_bits(self.mask_words(states), len(self.vocab))

    def log_transitions(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Dense (Q, Q, V) transition log-weights: 0 on arcs, -inf elsewhere.

        Memory is Q*Q*V: fine for character vocabularies, large for a 32k BPE vocabulary.
        """
        Q, V = self.num_states, self.arcs.num_tokens
        out = torch.full((Q, Q, V), LOG_ZERO, dtype=dtype)
        out[torch.from_numpy(self.arcs.sources), torch.from_numpy(self.arcs.targets), torch.from_numpy(self.arcs.tokens)] = 0.0
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
