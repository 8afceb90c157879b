"""`Automaton`: a DFA over the tokens of a `Vocab`, as tensors.

A token-level automaton is made from a character DFA by walking the vocabulary's trie
of surfaces through it (:mod:`neurosym.compile.token_index`): characters for character
and word vocabularies, UTF-8 bytes for byte-level vocabularies (so a state may sit in
the middle of a character).

The automaton is stored sparsely — each state's arcs as sorted (token, next state)
pairs, or no arcs at all and a small symbol table that reads each token's bytes or
characters (:class:`~neurosym.compile.token_index.TokenWalker`) — with every state's
allowed-token set packed into 32-bit words, so a decoding mask is one row lookup,
whatever the vocabulary's size. A dense ``(Q, V)`` table is built only when asked for
(:attr:`Automaton.delta`).

The per-token step runs in NumPy on the CPU (:class:`~neurosym.compile.token_index.TokenStepper`):
``next_state`` for one row in plain Python, ``step_numpy`` / ``step`` for a batch with one
gather per symbol position and no per-row Python work; ``step_torch`` is the same step as
tensor operations, used for tensors on an accelerator.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np
import torch

from neurosym.compile.dfa import CharDFA, sample_paths
from neurosym.compile.token_index import WORD_BITS, TokenArcs, TokenStepper, TokenWalker, expand, token_arcs, vocab_trie
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
        self._delta_np: np.ndarray | None = None  # its numpy view, made on first use
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
        self.stepper: TokenStepper | None = None
        if walker is None:  # step by binary search over the arcs, kept
            self._arcs: TokenArcs | None = arcs
            self._keys = torch.from_numpy(arcs.sources * max(len(vocab), 1) + arcs.tokens)
            self._targets = torch.from_numpy(arcs.targets)
        else:  # step through the symbol table; arcs rebuilt on demand
            self._arcs = None
            trie = vocab_trie(vocab)
            self.stepper = TokenStepper(walker, trie, vocab.unk if vocab.kind == "char" else None)
        self._walk_on: dict[torch.device, dict] = {}  # the walker's tables as tensors per device, made by step_torch
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

    def delta_numpy(self) -> np.ndarray:
        """:attr:`delta` as a NumPy array (Q, V) int64 (a view where it lives on the CPU)."""
        if self._delta_np is None:
            self._delta_np = self.delta.cpu().numpy()
        return self._delta_np

    def index_bytes(self) -> int:
        """Bytes this automaton holds to step and mask: the packed masks, the final flags,
        and either the kept arcs or the walker's tables and their stepping layout (the
        vocabulary's own symbol table, shared by every automaton over it, and optional
        dense tables not counted)."""
        tensors = [self.mask_ptr, self.mask_index, self.mask_value, self.mask_row, self.final]
        if self.mask_dense is not None:
            tensors.append(self.mask_dense)
        held = sum(t.numel() * t.element_size() for t in tensors)
        if self.walker is None:
            return held + sum(t.numel() * t.element_size() for t in (self._keys, self._targets))
        return held + self.walker.nbytes() + self.stepper.nbytes()

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
        """One step for one state and one token, in plain Python (no numpy or tensor
        overhead): the next state, or -1."""
        stepper = self.stepper
        if stepper is not None:
            return stepper.next_state(state, token)
        V = len(self.vocab)
        state, token = int(state), int(token)
        if not (0 <= state < self._num_states and 0 <= token < V):
            return -1
        if self._delta is not None:
            return int(self.delta_numpy()[state, token])
        keys = self._keys.numpy()
        want = state * max(V, 1) + token
        pos = int(np.searchsorted(keys, want))
        return int(self._targets[pos]) if pos < len(keys) and keys[pos] == want else -1

    def run(self, ids: torch.Tensor) -> torch.Tensor:
        """States after each prefix of a batch: ids (B, L) -> states (B, L), -1 once rejected."""
        B, L = ids.shape
        ids_np = torch.as_tensor(ids).cpu().numpy()
        states = np.full(B, self.start, dtype=np.int64)
        out = np.empty((B, L), dtype=np.int64)
        for t in range(L):
            states = self.step_numpy(states, ids_np[:, t])
            out[:, t] = states
        return torch.from_numpy(out).to(ids.device)

    def step_numpy(self, states: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Next states (...) for int arrays states (...) and tokens (...), broadcast
        together: the NumPy fast path of :meth:`step` (-1 stays -1; a token outside
        ``0..V-1`` rejects)."""
        if np.ndim(states) == np.ndim(tokens) == 0:
            return np.int64(self.next_state(int(states), int(tokens)))
        if self.stepper is not None and self._delta is None:
            return self.stepper.step(states, tokens)
        V = len(self.vocab)
        states, tokens = np.broadcast_arrays(np.asarray(states, dtype=np.int64), np.asarray(tokens, dtype=np.int64))
        ok = (states >= 0) & (states < self._num_states) & (tokens >= 0) & (tokens < V)
        q, t = np.where(ok, states, 0), np.where(ok, tokens, 0)
        if self._delta is not None:  # a dense table at hand (small automata, FSGs): one gather
            return np.where(ok, self.delta_numpy()[q, t], -1)
        keys, targets = self._keys.numpy(), self._targets.numpy()
        if not len(keys):
            return np.full(states.shape, -1, dtype=np.int64)
        want = q * max(V, 1) + t
        pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        return np.where(ok & (keys[pos] == want), targets[pos], -1)

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Next states (...) for states (...) and tokens (...); -1 stays -1, and an
        unknown token (outside ``0..V-1``) rejects. Tensors (or ints, or arrays) on the
        CPU step through NumPy tables (:meth:`step_numpy`); tensors on an accelerator
        step there (:meth:`step_torch`). Returns a long tensor on the inputs' device."""
        device = states.device if isinstance(states, torch.Tensor) else tokens.device if isinstance(tokens, torch.Tensor) else None
        if device is not None and device.type != "cpu":
            return self.step_torch(states, tokens)
        as_np = [x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x) for x in (states, tokens)]
        if as_np[0].ndim == as_np[1].ndim == 0:  # one pair: plain Python beats any array call
            return torch.tensor(self.next_state(int(as_np[0]), int(as_np[1])), dtype=torch.long)
        return torch.from_numpy(np.asarray(self.step_numpy(*as_np), dtype=np.int64))

    def step_torch(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """:meth:`step` as tensor operations on the inputs' device (for tensors on an
        accelerator; the same states as the NumPy path)."""
        V = len(self.vocab)
        states, tokens = torch.broadcast_tensors(torch.as_tensor(states, dtype=torch.long), torch.as_tensor(tokens, dtype=torch.long))
        ok = (states >= 0) & (states < self._num_states) & (tokens >= 0) & (tokens < V)
        q, t = torch.where(ok, states, 0), tokens.clamp(0, max(V - 1, 0))
        if self._delta is not None:  # a dense table is at hand (small automata, FSGs): one gather
            return torch.where(ok, self._delta.to(states.device)[q, t], -1)
        if self.walker is None:
            keys = self._keys.to(states.device)
            if keys.numel() == 0:
                return torch.full_like(states, -1)
            want = q * max(V, 1) + t
            pos = torch.searchsorted(keys, want.reshape(-1)).reshape(want.shape).clamp(max=keys.numel() - 1)
            return torch.where(ok & (keys[pos] == want), self._targets.to(states.device)[pos], torch.full_like(want, -1))
        w = self._walk_on.get(states.device)
        if w is None:
            walker, trie = self.walker, vocab_trie(self.vocab)
            tables = {
                "table": walker.table.astype(np.int64),
                "columns": walker.columns.astype(np.int64),
                "enter": walker.enter,
                "leave": walker.leave,
                "symbols": trie.token_symbols,
                "length": np.where(trie.special, -1, trie.token_len),
                "unk_next": walker.unk_next,
            }
            w = self._walk_on[states.device] = {k: (torch.from_numpy(np.ascontiguousarray(v)).to(states.device) if v is not None else None) for k, v in tables.items()}
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

    def mask_words_numpy(self, states: np.ndarray) -> np.ndarray:
        """Allowed next tokens, packed: int array states (...) -> (..., ceil(V / 32)) int32
        (all zero after -1); the NumPy path of :meth:`mask_words`."""
        states = np.asarray(states, dtype=np.int64)
        flat = states.reshape(-1)
        rows = self._np_masks[0][np.maximum(flat, 0)]
        if self.mask_dense is not None:
            out = self.mask_dense.numpy()[rows]
        else:
            _, ptr, index, value = self._np_masks
            out = np.zeros((len(flat), self.words), dtype=np.int32)
            counts = ptr[rows + 1] - ptr[rows]
            at, counts = expand(ptr[rows], counts)
            out[np.repeat(np.arange(len(flat)), counts), index[at]] = value[at]
        out[flat < 0] = 0
        return out.reshape(*states.shape, self.words)

    def mask_numpy(self, states: np.ndarray) -> np.ndarray:
        """Allowed next tokens: int array states (...) -> (..., V) bool; the NumPy path of
        :meth:`mask` (the packed rows unpacked with ``np.unpackbits``)."""
        words = self.mask_words_numpy(states)
        bits = np.unpackbits(words.astype("<i4", copy=False).view(np.uint8), axis=-1, bitorder="little")
        return np.ascontiguousarray(bits[..., : len(self.vocab)]).view(bool)

    def mask_words(self, states: torch.Tensor) -> torch.Tensor:
        """Allowed next tokens, packed: states (...) -> (..., ceil(V / 32)) int32 (all
        zero after -1). CPU tensors go through NumPy (:meth:`mask_words_numpy`)."""
        if not (isinstance(states, torch.Tensor) and states.device.type != "cpu"):
            return torch.from_numpy(self.mask_words_numpy(states.numpy() if isinstance(states, torch.Tensor) else states))
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
        """Allowed next tokens: states (...) -> (..., V) bool; nothing is allowed after -1.
        CPU tensors go through NumPy (:meth:`mask_numpy`)."""
        if not (isinstance(states, torch.Tensor) and states.device.type != "cpu"):
            return torch.from_numpy(self.mask_numpy(states.numpy() if isinstance(states, torch.Tensor) else states))
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
