"""`GrammarMask`: only the tokens that keep each row inside an automaton's language.

Any :class:`~neurosym.compile.automaton.Automaton` works: a regex or bank pattern, an
FSG's :class:`~neurosym.compile.weighted.WeightedAutomaton`, a word list, over
character, word or byte-level vocabularies. Each row holds one automaton state; a step
reads the allowed tokens of every row at once and ``advance`` moves the states. Rows
decoded on the CPU keep their states as NumPy arrays (:class:`StateTracker`): a call
gathers each row's bias (0 or -inf per token) from precomputed rows or from the packed
masks and adds it to the scores, an advance is one gather through integer tables; rows
on an accelerator keep them as tensors there (``backend="torch"`` forces that path on
the CPU too: the same states, and the same scores wherever they are finite).
End-of-sequence is allowed exactly in final states. Compiled automata are trim (every
state can reach a final state), so a row is never stuck: it can always go on or end.

With ``max_len``, a token is allowed only if the row can still reach a final state and
end within ``max_len`` tokens counted from :meth:`~GrammarMask.reset` (prompt and
end-of-sequence included), so every row ends accepted inside that budget.

:class:`TokenBan` forbids a fixed set of tokens at every step (``--processor
ban:TOKEN,...``); :func:`check_no_dead_end` says whether an automaton restricted by such
a ban can still end from every state it reaches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from neurosym.compile.automaton import Automaton
from neurosym.compile.token_index import WORD_BITS, expand
from neurosym.decode.processor import LogitsProcessor, ProcessorContext, register_processor
from neurosym.errors import NeurosymError
from neurosym.semiring import LOG_ZERO

UNREACHABLE = 2**31 - 1  # distance to a final state from a rejecting state
DENSE_LIMIT = 2**20  # automata with at most this many (state, token) pairs get dense per-state tables


NUMPY_FLOATS = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64)}  # score dtypes added to in NumPy
BACKENDS = ("auto", "numpy", "torch")  # where per-row states live: auto = NumPy for CPU rows, tensors on an accelerator


def check_backend(owner: str, backend: str) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else a NeurosymError naming ``owner``."""
    if backend not in BACKENDS:
        raise NeurosymError(f"{owner}: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


class StateTracker:
    """Per-row automaton states for a batch: ``states`` (B,) long, -1 once rejected, and
    ``steps`` (B,) long, the tokens each row has read since :meth:`reset`.

    backend: ``"numpy"`` keeps the states as NumPy arrays on the CPU and advances them
    with integer tables (a dense ``(Q + 1, V)`` next-state table for small automata, else
    the automaton's :meth:`~neurosym.compile.automaton.Automaton.step_numpy`), one gather
    per step for the whole batch; ``"torch"`` keeps them as tensors on the reset's device
    (the path for accelerators); ``"auto"`` (the default) picks NumPy when the reset's
    device is the CPU. Both give the same states; ``states`` and ``steps`` read as long
    tensors either way (views of the arrays under NumPy).
    """

    def __init__(self, automaton: Automaton, backend: str = "auto"):
        self.automaton, self.backend = automaton, check_backend("StateTracker", backend)
        self.uses_numpy = False  # decided at each reset
        self._states: np.ndarray | torch.Tensor = torch.empty(0, dtype=torch.long)
        self._steps: np.ndarray | torch.Tensor = torch.empty(0, dtype=torch.long)
        Q, V = automaton.num_states, len(automaton.vocab)
        # small automata: a dense (Q + 1, V) next-state table, row Q for the rejected state -1
        self.table = None
        self.table_np: np.ndarray | None = None
        if Q * V <= DENSE_LIMIT:
            self.table = torch.cat([automaton.delta.long(), torch.full((1, V), -1, dtype=torch.long)])
            self.table_np = self.table.numpy()  # a view: the CPU copy stays with the tracker
        self.final_np = automaton.final.cpu().numpy().astype(bool)

    # ------------------------------------------------------------------ the rows' states
    @property
    def states(self) -> torch.Tensor:
        """(B,) long: each row's state (-1 once rejected)."""
        return torch.from_numpy(self._states) if self.uses_numpy else self._states

    @states.setter
    def states(self, value: torch.Tensor | np.ndarray) -> None:
        self._states = as_rows(value) if self.uses_numpy else torch.as_tensor(value, dtype=torch.long)

    @property
    def steps(self) -> torch.Tensor:
        """(B,) long: the tokens each row has read since :meth:`reset`."""
        return torch.from_numpy(self._steps) if self.uses_numpy else self._steps

    @steps.setter
    def steps(self, value: torch.Tensor | np.ndarray) -> None:
        self._steps = as_rows(value) if self.uses_numpy else torch.as_tensor(value, dtype=torch.long)

    @property
    def states_np(self) -> np.ndarray:
        """(B,) int64: the states as a NumPy array (a view under the NumPy backend)."""
        return self._states if self.uses_numpy else self._states.cpu().numpy()

    @property
    def steps_np(self) -> np.ndarray:
        """(B,) int64: the steps as a NumPy array (a view under the NumPy backend)."""
        return self._steps if self.uses_numpy else self._steps.cpu().numpy()

    # ------------------------------------------------------------------ the protocol
    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        device = torch.device(device)
        self.uses_numpy = self.backend == "numpy" or (self.backend == "auto" and device.type == "cpu")
        if self.uses_numpy:
            self._states = np.full(batch_size, self.automaton.start, dtype=np.int64)
            self._steps = np.zeros(batch_size, dtype=np.int64)
            return
        self._states = torch.full((batch_size,), self.automaton.start, dtype=torch.long, device=device)
        self._steps = torch.zeros(batch_size, dtype=torch.long, device=device)
        if self.table is not None:
            self.table = self.table.to(device)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B,) the states each row would reach on ``tokens`` (B,); -1 if rejected (a long
        tensor on the states' device: the CPU under NumPy)."""
        if self.uses_numpy:
            return torch.from_numpy(self.step_numpy(as_rows(tokens)))
        tokens = tokens.to(self._states.device).long()
        if self.table is None:
            return self.automaton.step(self._states, tokens)
        V = self.table.shape[1]
        nxt = self.table[self._states, tokens.clamp(0, V - 1)]  # state -1 indexes the last row: rejected
        return torch.where((tokens >= 0) & (tokens < V), nxt, -1)

    def step_numpy(self, tokens: np.ndarray) -> np.ndarray:
        """(B,) int64: :meth:`step` on NumPy rows (any backend; the states are read as NumPy)."""
        states = self.states_np
        if self.table_np is None:
            return np.asarray(self.automaton.step_numpy(states, tokens), dtype=np.int64)
        V = self.table_np.shape[1]
        nxt = self.table_np[states, np.clip(tokens, 0, V - 1)]  # state -1 indexes the last row: rejected
        return np.where((tokens >= 0) & (tokens < V), nxt, -1)

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        """Move every row not ``done`` by its sampled token (ids in [0, V): the sampler's)."""
        if self.uses_numpy:  # one gather over the batch, no per-row Python work
            if len(self._states) == 1:  # one row: plain Python beats any array call (a NumPy call costs ~1 µs)
                if done is not None and bool(done.tolist()[0]):
                    return
                q, v = int(self._states[0]), int(tokens.tolist()[0])
                self._states = np.array([self.table_np[q, v] if self.table_np is not None else self.automaton.next_state(q, v)], dtype=np.int64)
                self._steps[0] += 1
                return
            t = as_rows(tokens)
            if self.table_np is not None:
                nxt = self.table_np[self._states, t]
            else:
                nxt = np.asarray(self.automaton.step_numpy(self._states, t), dtype=np.int64)
            if done is None:
                self._states = nxt
                self._steps += 1
            else:
                d = as_rows(done, np.bool_)
                self._states = np.where(d, self._states, nxt)
                self._steps += ~d
            return
        tokens = tokens.to(self._states.device)
        if self.table is not None:  # one gather: the hot path of every step
            nxt = self.table[self._states, tokens]
        else:
            nxt = self.automaton.step(self._states, tokens.long())
        if done is None:
            self._states = nxt
            self._steps += 1
        else:
            done = done.to(self._states.device)
            self._states = torch.where(done, self._states, nxt)
            self._steps += ~done

    def final(self) -> torch.Tensor:
        """(B,) bool: each row's state is final."""
        if self.uses_numpy:
            return torch.from_numpy(self.final_numpy())
        final = self.automaton.final.to(self._states.device)
        return (self._states >= 0) & final[self._states.clamp(min=0)]

    def final_numpy(self) -> np.ndarray:
        """(B,) bool: :meth:`final` as a NumPy array."""
        states = self.states_np
        return (states >= 0) & self.final_np[np.maximum(states, 0)]


def add_rows(scores: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
    """``scores += rows`` in place, ``rows`` (B, V) a NumPy float array: through NumPy
    when the scores are a CPU tensor of the rows' dtype outside autograd, else one
    ``add_`` of the rows copied over (cast to the scores' dtype: 0 and -inf stay exact)."""
    if scores.device.type == "cpu" and not scores.requires_grad and NUMPY_FLOATS.get(scores.dtype) == rows.dtype:
        view = scores.numpy()
        np.add(view, rows, out=view)
        return scores
    return scores.add_(torch.from_numpy(rows).to(device=scores.device, dtype=scores.dtype))


def byte_bias(dtype: np.dtype) -> np.ndarray:
    """(256, 8) of ``dtype``: for each byte of a packed mask, its 8 tokens' bias (0 where
    the bit is set, -inf where not; bit i of a byte is token 8 * byte + i)."""
    hit = BYTE_BIAS.get(dtype)
    if hit is None:
        bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(bool)
        hit = BYTE_BIAS[dtype] = np.where(bits, 0.0, LOG_ZERO).astype(dtype)
    return hit


BYTE_BIAS: dict[np.dtype, np.ndarray] = {}


def as_rows(x: torch.Tensor | np.ndarray, dtype: type = np.int64) -> np.ndarray:
    """A (B,) tensor or array as a NumPy array of ``dtype`` on the CPU (no copy when it
    already is one; tensors on an accelerator are copied over)."""
    if isinstance(x, torch.Tensor):  # integer and bool tensors never need a detach
        x = (x if x.device.type == "cpu" else x.cpu()).numpy()
    return x if isinstance(x, np.ndarray) and x.dtype == dtype else np.asarray(x, dtype=dtype)


def distance_to_final(automaton: Automaton) -> torch.Tensor:
    """(Q,) long: the fewest tokens that lead from each state to a final state (0 at final
    states, ``UNREACHABLE`` where none does). A breadth-first search on the reversed arcs."""
    from scipy.sparse import csr_matrix  # lazy: scipy is slow to import and only budgets need it
    from scipy.sparse.csgraph import dijkstra  # lazy: as above

    Q = automaton.num_states
    src, dst = arc_endpoints(automaton)
    finals = np.nonzero(automaton.final.cpu().numpy())[0]
    if finals.size == 0:
        return torch.full((Q,), UNREACHABLE, dtype=torch.long)
    reverse = csr_matrix((np.ones(len(src)), (dst, src)), shape=(Q, Q))
    dist = dijkstra(reverse, directed=True, indices=finals, unweighted=True, min_only=True)
    return torch.from_numpy(np.where(np.isfinite(dist), dist, UNREACHABLE).astype(np.int64))


def arc_endpoints(automaton: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """(source states, target states) of every arc, as numpy arrays (E,)."""
    arcs = getattr(automaton, "arcs", None)  # the sparse index, where the automaton keeps one
    if arcs is not None:
        return np.asarray(arcs.sources), np.asarray(arcs.targets)
    d = automaton.delta.cpu().numpy()
    src, tok = np.nonzero(d >= 0)
    return src, d[src, tok]


class GrammarMask(LogitsProcessor):
    """Forbid (``-inf``) every token the automaton rejects from each row's state;
    ``eos_id`` only in final states. See the module docstring for ``max_len``.

    automaton: over the model's vocabulary (V tokens, the scores' width).
    eos_id: the end-of-sequence token (a special token the automaton never reads).
    backend: where the rows' states live and how a step runs (:class:`StateTracker`):
        ``"auto"`` (NumPy when reset on the CPU, tensors on an accelerator), ``"numpy"``
        or ``"torch"``. Under NumPy a call builds each row's bias (0 where allowed, -inf
        elsewhere) in NumPy (:meth:`bias_numpy`) and adds it to the scores; the advance
        is one gather (plain Python for a single row). The two backends give the same
        states and, for finite scores, the same scores (the tensor path of large automata
        writes -inf with ``masked_fill_``, where a +inf score would stay -inf, not NaN).
    """

    def __init__(self, automaton: Automaton, eos_id: int, max_len: int | None = None, backend: str = "auto"):
        V = len(automaton.vocab)
        if not 0 <= eos_id < V:
            raise NeurosymError(f"GrammarMask: eos_id must be a token id in [0, {V}), got {eos_id}")
        if max_len is not None and max_len < 1:
            raise NeurosymError(f"GrammarMask: max_len must be a positive number of tokens, got {max_len}")
        self.automaton, self.eos_id, self.max_len, self.vocab_size = automaton, eos_id, max_len, V
        self.tracker = StateTracker(automaton, check_backend("GrammarMask", backend))
        self._distance = distance_to_final(automaton) if max_len is not None else None
        self._distance_np = None if self._distance is None else self._distance.numpy()
        # small automata: every state's allowed tokens (end-of-sequence included) as one
        # (Q + 1, V) bool table, built once; row Q is the rejected state (nothing allowed)
        self.table = None
        self.table_np: np.ndarray | None = None  # the same table in NumPy (a view of the CPU copy)
        self._bias_np: dict[np.dtype, np.ndarray] = {}  # (Q + 1, V): 0 where allowed, -inf elsewhere, per NumPy dtype
        self._one_row = np.zeros((1, automaton.words), dtype=np.int32)  # a single row's packed mask, rewritten per call
        self._buffers: dict[tuple, np.ndarray] = {}  # (rows, width, dtype) -> the bias rows' buffer
        Q = automaton.num_states
        if Q * V <= DENSE_LIMIT:
            states = torch.arange(Q)
            table = torch.cat([self.token_mask(states), torch.zeros(1, V, dtype=torch.bool)])
            table[:, eos_id] = torch.cat([automaton.final.bool().cpu(), torch.zeros(1, dtype=torch.bool)])
            self.table = table
            self.table_np = table.numpy()
        self._bias: torch.Tensor | None = None  # (Q + 1, V): 0 where allowed, -inf elsewhere, in the scores' dtype

    def __repr__(self) -> str:
        name = self.automaton.name or type(self.automaton).__name__
        budget = f", max_len={self.max_len}" if self.max_len is not None else ""
        return f"GrammarMask({name}{budget})"

    # ------------------------------------------------------------------ the protocol
    def reset(self, batch_size: int, device: torch.device | str = "cpu") -> None:
        self.tracker.reset(batch_size, device)
        if self.table is not None and not self.tracker.uses_numpy:
            self.table = self.table.to(device)

    def advance(self, tokens: torch.Tensor, done: torch.Tensor | None = None) -> None:
        self.tracker.advance(tokens, done)

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.shape[-1] != self.vocab_size:
            raise NeurosymError(f"{self!r}: scores have {scores.shape[-1]} tokens, the automaton's vocabulary {self.vocab_size}")
        if self.tracker.uses_numpy:  # the rows' bias built in NumPy (gathers, no masked writes), one add
            return add_rows(scores, self.bias_numpy(NUMPY_FLOATS.get(scores.dtype, np.dtype(np.float32))))
        if self.table is not None and self._distance is None:  # small automata: one gather and one add per step
            bias = self._bias
            if bias is None or bias.dtype != scores.dtype or bias.device != scores.device:
                zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
                bias = self._bias = torch.where(self.table.to(scores.device), zero, LOG_ZERO)
            return scores.add_(bias[self.tracker.states.to(scores.device)])  # state -1 reads the last row: nothing allowed
        return scores.masked_fill_(~self.allowed_matrix().to(scores.device), LOG_ZERO)

    def bias_numpy(self, dtype: np.dtype = np.dtype(np.float32)) -> np.ndarray:
        """(B, V) of ``dtype``: 0 where each row may go next, -inf where not (any backend;
        NumPy work). Small automata: the rows of a precomputed (Q + 1, V) table (a view
        for one row); large ones: their packed masks, each byte looked up in a (256, 8)
        table of biases (masks stored densely), or -inf and then only the nonzero words
        (stored sparsely, :meth:`write_bias`); a masked write over V tokens costs several
        times more; with a
        budget: from :meth:`allowed_numpy`. The rows are written into a buffer kept per
        batch size and dtype (a fresh 128 KB array per call would be mapped and faulted
        in by the allocator every time): valid until the next call; read-only."""
        states = self.tracker.states_np
        if self._distance is not None:
            return np.where(self.allowed_numpy(states, self.tracker.steps_np), 0.0, LOG_ZERO).astype(dtype)
        B = len(states)
        if self.table_np is not None:
            table = self._bias_np.get(dtype)
            if table is None:
                table = self._bias_np[dtype] = np.where(self.table_np, 0.0, LOG_ZERO).astype(dtype)
                table.flags.writeable = False  # its rows are handed out as views
            if B == 1:
                return table[int(states[0])][None]  # a view; state -1 reads the last row: nothing allowed
            return np.take(table, states, axis=0, out=self.buffer(B, table.shape[1], dtype), mode="wrap")  # -1: the last row
        if self.automaton.mask_dense is None and B > 1:  # sparse masks: each state's nonzero words, as stored
            return self.sparse_bias(states, dtype)
        if B == 1:  # one row: the automaton's single-row copy into a kept buffer
            words = self._one_row
            if states[0] >= 0:
                self.automaton.write_mask(int(states[0]), words[0])
            else:
                words.fill(0)
        else:
            words = self.automaton.mask_words_numpy(states)  # (B, W) int32, all zero after -1
        packed = words.astype("<i4", copy=False).view(np.uint8)  # (B, 4W): token 8j + i is bit i of byte j
        out = self.buffer(B, packed.shape[1] * 8, dtype)
        np.take(byte_bias(dtype), packed, axis=0, out=out.reshape(B, -1, 8))  # every byte: dense masks have few zero words
        bias = out[:, : self.vocab_size]
        self.set_eos(bias, states)
        return bias

    def sparse_bias(self, states: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """:meth:`bias_numpy` for automata whose masks are stored sparsely (each state's
        nonzero words of its packed set), read from that storage as it is."""
        mask_row, ptr, index, value = (t.numpy() for t in (self.automaton.mask_row, self.automaton.mask_ptr, self.automaton.mask_index, self.automaton.mask_value))
        rows = mask_row[np.maximum(states, 0)]
        at, counts = expand(ptr[rows], np.where(states >= 0, ptr[rows + 1] - ptr[rows], 0))  # state -1: no words
        return self.write_bias(states, np.repeat(np.arange(len(states)), counts), index[at], value[at], dtype)

    def write_bias(self, states: np.ndarray, owner: np.ndarray, index: np.ndarray, value: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """(B, V) bias rows from the nonzero words of the rows' packed masks (row
        ``owner``, word ``index``, bits ``value``; (K,) each): -inf everywhere, then each
        nonzero word's 32 tokens through the byte table (work in K, not B * V, beyond the
        fill), end-of-sequence where the row's state is final."""
        B, W = len(states), self.automaton.words
        out = self.buffer(B, W * WORD_BITS, dtype)
        out.fill(LOG_ZERO)
        packed = value.astype("<i4", copy=False).view(np.uint8).reshape(-1, 4)  # (K, 4): token 8j + i is bit i of byte j
        out.reshape(B, W, WORD_BITS)[owner, index] = np.take(byte_bias(dtype), packed, axis=0).reshape(-1, WORD_BITS)
        bias = out[:, : self.vocab_size]
        self.set_eos(bias, states)
        return bias

    def set_eos(self, bias: np.ndarray, states: np.ndarray) -> None:
        """Write the end-of-sequence column of ``bias`` (B, V): 0 where the row's state is
        final, -inf elsewhere."""
        if len(states) == 1:
            q = int(states[0])
            bias[0, self.eos_id] = 0.0 if q >= 0 and self.tracker.final_np[q] else LOG_ZERO
        else:
            bias[:, self.eos_id] = np.where(self.tracker.final_numpy(), 0.0, LOG_ZERO)

    def buffer(self, rows: int, width: int, dtype: np.dtype) -> np.ndarray:
        """A (rows, width) array of ``dtype`` kept between calls (the bias rows' buffer)."""
        buf = self._buffers.get((rows, width, dtype))
        if buf is None:
            buf = self._buffers[(rows, width, dtype)] = np.empty((rows, width), dtype=dtype)
        return buf

    def allowed(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.tracker.uses_numpy:
            t = as_rows(tokens)
            nxt = self.tracker.step_numpy(t)
            is_eos = t == self.eos_id
            ok = np.where(is_eos, self.tracker.final_numpy(), nxt >= 0)
            if self._distance_np is not None:
                left = self.max_len - self.tracker.steps_np - 1  # tokens left after this one
                dist = self._distance_np[np.maximum(nxt, 0)]
                ok &= np.where(is_eos, left >= 0, dist + 1 <= left)
            return torch.from_numpy(ok).to(tokens.device)
        states = self.tracker.states
        tokens = tokens.to(states.device)
        nxt = self.tracker.step(tokens)
        ok = torch.where(tokens == self.eos_id, self.tracker.final(), nxt >= 0)
        if self._distance is not None:
            left = self.max_len - self.tracker.steps - 1  # tokens left after this one
            dist = self._distance.to(states.device)[nxt.clamp(min=0)]
            ok &= torch.where(tokens == self.eos_id, left >= 0, dist + 1 <= left)
        return ok

    def describe_allowed(self, row: int, limit: int = 8) -> list[int]:
        allowed = self.allowed_matrix(torch.tensor([row], device=self.tracker.states.device))[0]
        return allowed.nonzero().flatten()[:limit].tolist()

    # ------------------------------------------------------------------ masks
    def allowed_matrix(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """(B, V) bool: the tokens each row (or each of ``rows``) may take next."""
        if self.tracker.uses_numpy:
            states, steps = self.tracker.states_np, self.tracker.steps_np
            if rows is not None:
                pick = as_rows(rows)
                states, steps = states[pick], steps[pick]
            return torch.from_numpy(self.allowed_numpy(states, steps))
        states = self.tracker.states if rows is None else self.tracker.states[rows]
        steps = self.tracker.steps if rows is None else self.tracker.steps[rows]
        if self.table is not None and self._distance is None:
            return self.table[states]  # state -1 reads the last row: nothing allowed
        allowed = self.token_mask(states)  # (B, V)
        final = (states >= 0) & self.automaton.final.to(states.device)[states.clamp(min=0)]
        if self._distance is not None:
            left = self.max_len - steps - 1  # (B,) tokens left after the next one
            allowed &= self._completable(states, left)
            final &= left >= 0
        allowed[:, self.eos_id] = final
        return allowed

    def allowed_numpy(self, states: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """(B, V) bool: the tokens rows in ``states`` (B,) after ``steps`` (B,) tokens may
        take next; :meth:`allowed_matrix` in NumPy."""
        if self.table_np is not None and self._distance_np is None:
            return self.table_np[states]  # a fresh array (state -1 reads the last row: nothing allowed)
        allowed = self.automaton.mask_numpy(states)  # (B, V), a fresh array
        final = (states >= 0) & self.tracker.final_np[np.maximum(states, 0)]
        if self._distance_np is not None:
            left = self.max_len - steps - 1  # (B,) tokens left after the next one
            uniq, inverse = np.unique(states, return_inverse=True)
            nxt = np.asarray(self.automaton.step_numpy(uniq[:, None], np.arange(self.vocab_size)[None, :]), dtype=np.int64)  # (U, V)
            dist = np.where(nxt >= 0, self._distance_np[np.maximum(nxt, 0)], UNREACHABLE)
            allowed &= dist[inverse.reshape(-1)] + 1 <= left[:, None]
            final &= left >= 0
        allowed[:, self.eos_id] = final
        return allowed

    def token_mask(self, states: torch.Tensor) -> torch.Tensor:
        """(B, V) bool: the automaton's allowed tokens, end-of-sequence aside (its packed
        bitsets, unpacked; the NumPy calls read them through ``mask_words_numpy`` /
        ``mask_numpy``)."""
        return self.automaton.mask(states).clone()

    def _completable(self, states: torch.Tensor, left: torch.Tensor) -> torch.Tensor:
        """(B, V) bool: the token leads to a state at most ``left - 1`` tokens from a final
        one (then end-of-sequence fits too). One step over the batch's distinct states."""
        uniq, inverse = torch.unique(states, return_inverse=True)
        V = self.vocab_size
        nxt = self.automaton.step(uniq[:, None].expand(-1, V), torch.arange(V, device=states.device)[None, :])  # (U, V)
        dist = torch.where(nxt >= 0, self._distance.to(states.device)[nxt.clamp(min=0)], UNREACHABLE)
        return dist[inverse] + 1 <= left[:, None]


def states_allowing(automaton: Automaton, tokens: Sequence[int] | torch.Tensor) -> list[int]:
    """The states of ``automaton`` in which at least one of ``tokens`` may come next (for
    :class:`~neurosym.decode.steer.FeatureSteer`'s ``at_states``)."""
    tokens = torch.as_tensor(list(tokens) if not isinstance(tokens, torch.Tensor) else tokens, dtype=torch.long)
    states = torch.arange(automaton.num_states)
    hit = automaton.step(states[:, None].expand(-1, len(tokens)), tokens[None, :]) >= 0
    return states[hit.any(dim=1)].tolist()


# ---------------------------------------------------------------------- fixed bans
class TokenBan(LogitsProcessor):
    """Forbid (``-inf``) a fixed set of tokens at every step."""

    def __init__(self, token_ids: Sequence[int], vocab_size: int):
        ids = sorted({int(t) for t in token_ids})
        if ids and not (0 <= ids[0] and ids[-1] < vocab_size):
            raise NeurosymError(f"TokenBan: token ids must be in [0, {vocab_size}), got {ids}")
        self.banned = torch.zeros(vocab_size, dtype=torch.bool)
        self.banned[ids] = True

    def __repr__(self) -> str:
        return f"TokenBan({int(self.banned.sum())} tokens)"

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.shape[-1] != self.banned.shape[0]:
            raise NeurosymError(f"{self!r}: scores have {scores.shape[-1]} tokens, expected {self.banned.shape[0]}")
        return scores.masked_fill_(self.banned.to(scores.device)[None, :], LOG_ZERO)

    def allowed(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.long().cpu()
        inside = (t >= 0) & (t < self.banned.shape[0])
        return (inside & ~self.banned[t.clamp(0, self.banned.shape[0] - 1)]).to(tokens.device)


def check_no_dead_end(automaton: Automaton, banned: Sequence[int]) -> None:
    """A NeurosymError unless every state reachable without ``banned`` tokens can still
    reach a final state without them (so a ban on top of the grammar mask never leaves a
    row without a token)."""
    delta = automaton.delta.cpu().numpy().copy()
    delta[:, list(banned)] = -1
    Q = delta.shape[0]
    reach = np.zeros(Q, dtype=bool)
    reach[automaton.start] = True
    todo = [automaton.start]
    while todo:
        q = todo.pop()
        for r in set(delta[q][delta[q] >= 0].tolist()):
            if not reach[r]:
                reach[r] = True
                todo.append(r)
    alive = automaton.final.cpu().numpy().astype(bool).copy()
    changed = True
    while changed:
        nxt = alive | np.array([bool(alive[delta[q][delta[q] >= 0]].any()) for q in range(Q)])
        changed = bool((nxt != alive).any())
        alive = nxt
    stuck = np.nonzero(reach & ~alive)[0]
    if stuck.size:
        raise NeurosymError(f"forbidding {', '.join(automaton.vocab.tokens[t] for t in banned)} leaves state(s) {stuck.tolist()[:5]} "
                            "of the grammar without a way to end")


def _ban(arg: str | None, ctx: ProcessorContext) -> TokenBan:
    """``ban:WORD,WORD``: forbid these tokens of the vocabulary at every step."""
    words = [w for w in (arg or "").split(",") if w]
    if not words:
        raise NeurosymError("--processor ban: expected ban:TOKEN[,TOKEN...]")
    missing = [w for w in words if w not in ctx.vocab]
    if missing:
        raise NeurosymError(f"--processor ban: {', '.join(map(repr, missing))} not in the vocabulary")
    return TokenBan([ctx.vocab.id(w) for w in words], len(ctx.vocab))


register_processor("ban", _ban, "ban:TOKEN[,TOKEN...]: forbid these tokens at every step")


__all__ = [
    "BACKENDS", "DENSE_LIMIT", "GrammarMask", "NUMPY_FLOATS", "StateTracker", "TokenBan", "UNREACHABLE", "add_rows", "arc_endpoints", "as_rows", "byte_bias", "check_backend", "check_no_dead_end", "distance_to_final",
    "states_allowing",
]
