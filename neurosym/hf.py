"""The Hugging Face bridge: neurosym grammars as ``transformers`` logits processors.

    from neurosym.hf import GrammarLogitsProcessor
    proc = GrammarLogitsProcessor(r"(19|20)[0-9]{2}", tokenizer)
    out = model.generate(**tokenizer("Year:", return_tensors="pt"), logits_processor=[proc], do_sample=True)

* :func:`tokenizer_vocab`: a :class:`~neurosym.vocab.Vocab` from a fast ``transformers``
  tokenizer: byte-level BPE (GPT-2 style) or SentencePiece-style (``Metaspace``, with
  byte fallback), special tokens spelling nothing, padded to the model's embedding size.
* :class:`GrammarLogitsProcessor`: a ``transformers.LogitsProcessor`` over a regex
  string, a grammar file (``.regex`` bank patterns as ``FILE:NAME``, ``.fsg``, ``.pcfg``,
  a ``.txt`` word list, a compiled artifact) or a compiled object, read by
  :func:`neurosym.kinds.load_grammar` (the one grammar front door, also behind ``neurosym
  generate --grammar``) over the tokenizer's vocabulary, and driving the processors
  :func:`neurosym.decode.grammar_processors` picks (``GrammarMask``, ``FSGPrior``,
  ``PCFGMask``, ``PCFGPrior``). The grammar constrains the *continuation*: the first call of a
  ``generate`` sees the prompt, which only fixes where the continuation starts; each
  later call advances every row by its one new token. End-of-sequence is allowed exactly
  where the continuation is a complete sentence of the grammar; rows that ended, or have
  nothing left, may only end.
"""

from __future__ import annotations

from pathlib import Path

import torch

from neurosym.compile.automaton import Automaton
from neurosym.compile.pcfg import RuleTensors
from neurosym.compile.regex import Limits
from neurosym.decode.guide import Guide, compile_guide
from neurosym.errors import NeurosymError
from neurosym.semiring import LOG_ZERO
from neurosym.vocab import Vocab


class MissingExtra(NeurosymError, ImportError):
    """An optional dependency is not installed."""


try:
    from transformers import LogitsProcessor as HFLogitsProcessor
    from transformers import PreTrainedTokenizerFast
except ImportError:
    raise MissingExtra("neurosym.hf needs transformers: pip install 'neurosym[hf]'") from None

Grammar = str | Path | Automaton | RuleTensors | Guide


# ---------------------------------------------------------------------- vocabularies
def tokenizer_vocab(tokenizer: PreTrainedTokenizerFast, size: int | None = None) -> Vocab:
    """A ``"bytes"`` :class:`Vocab` of a fast tokenizer: each id's exact bytes, through the
    one front door :meth:`Vocab.from_tokenizer` (kept per tokenizer object, so a second
    processor over the same tokenizer does not read its vocabulary again).

    Byte-level tokenizers (GPT-2, RoBERTa, Llama 3, Qwen) and SentencePiece-style ones
    (``Metaspace``, byte fallback ``<0xHH>``) are read; special tokens spell nothing;
    ``size`` (the model's ``config.vocab_size``) pads the vocabulary with unused ids that
    spell nothing, or drops ids the model cannot produce.
    """
    if not isinstance(tokenizer, PreTrainedTokenizerFast) or getattr(tokenizer, "backend_tokenizer", None) is None:
        raise NeurosymError(f"neurosym.hf needs a fast tokenizer (PreTrainedTokenizerFast, use_fast=True), got {type(tokenizer).__name__}")
    return Vocab.from_tokenizer(tokenizer, size)


# ---------------------------------------------------------------------- grammars
def _uses(prior_weight: float, max_new_tokens: int | None) -> str:
    """Which processors :func:`neurosym.decode.grammar_processors` gives: a mask, a
    prior, or a prior bounded by the completion budget's mask."""
    if not (isinstance(prior_weight, (int, float)) and prior_weight >= 0):
        raise NeurosymError(f"prior_weight must be a number >= 0, got {prior_weight!r}")
    if prior_weight == 0:
        return "mask"
    return "prior" if max_new_tokens is None else "both"


# ---------------------------------------------------------------------- the processor
class GrammarLogitsProcessor(HFLogitsProcessor):
    """A ``transformers.LogitsProcessor`` whose continuations are sentences of a grammar.

    Args:
        grammar: a regex, a grammar file, a compiled grammar or a compiled guide, read by
            :func:`neurosym.compile_guide` (``FILE.regex:NAME``, ``.fsg``, ``.pcfg``, a
            ``.txt`` word list, a compiled ``.safetensors``; docs/words.md for word lists),
            which keeps compiled guides: a second processor of the same grammar and
            tokenizer (its vocabulary is kept per tokenizer object) costs milliseconds.
        tokenizer: the model's fast tokenizer.
        prior_weight: 0 masks; ``> 0`` (an ``.fsg`` or ``.pcfg``) also adds
            ``prior_weight * log P_grammar(token | prefix)`` (a product of experts).
        eos_token_id: the id that ends a continuation (default: the tokenizer's eos).
        vocab_size: the width of the model's scores (``model.config.vocab_size``) when it
            is not ``len(tokenizer)``; wider scores are accepted anyway (extra ids masked).
        max_new_tokens: with an automaton, allow only tokens after which the
            continuation can still end (end-of-sequence included) within this many tokens.
        limits: caps on compiling automata (states, seconds).

    One processor follows one ``generate`` at a time. A call that does not extend the
    previous one by a token per row starts a new generation (that call's ids are its
    prompt); rows reordered by beam search are replayed from the prompt; :meth:`reset`
    forces a new generation. Assisted (speculative) decoding is not supported.
    """

    def __init__(
        self,
        grammar: Grammar,
        tokenizer: PreTrainedTokenizerFast,
        *,
        prior_weight: float = 0.0,
        eos_token_id: int | None = None,
        vocab_size: int | None = None,
        max_new_tokens: int | None = None,
        limits: Limits = Limits(),
    ):
        self.vocab = tokenizer_vocab(tokenizer, vocab_size)
        eos = tokenizer.eos_token_id if eos_token_id is None else eos_token_id
        if eos is None:
            raise NeurosymError("the tokenizer has no eos token; pass eos_token_id= (the id that ends a generation)")
        if not isinstance(eos, int) or not 0 <= eos < len(self.vocab):
            raise NeurosymError(f"eos_token_id must be a token id in [0, {len(self.vocab)}), got {eos!r}")
        if self.vocab.surfaces[eos] is not None:
            raise NeurosymError(f"eos_token_id {eos} is the ordinary token {self.vocab.tokens[eos]!r}; the end needs a special token")
        self.eos_token_id = eos
        use = _uses(prior_weight, max_new_tokens)
        self.guide = compile_guide(grammar, self.vocab, limits)  # compiled once per (grammar, vocabulary): a second processor looks it up
        self.grammar = self.guide.grammar
        self.processors = self.guide.processors(eos, use, prior_weight or 1.0, max_new_tokens)
        self.prompt_length: int | None = None
        self._ids: torch.Tensor | None = None  # the ids of the last call
        self._done = torch.zeros(0, dtype=torch.bool)

    def __repr__(self) -> str:
        return f"GrammarLogitsProcessor({', '.join(map(repr, self.processors))}, vocab={self.vocab!r})"

    def reset(self) -> None:
        """Make the next call the first of a new generation (it sees the prompt)."""
        self.prompt_length, self._ids = None, None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.dim() != 2 or scores.dim() != 2 or input_ids.shape[0] != scores.shape[0]:
            raise NeurosymError(f"expected input_ids (B, L) and scores (B, V), got {tuple(input_ids.shape)} and {tuple(scores.shape)}")
        V = len(self.vocab)
        if scores.shape[1] < V:
            raise NeurosymError(f"the scores have {scores.shape[1]} columns but the tokenizer {V} ids; pass vocab_size={scores.shape[1]} (model.config.vocab_size)")
        self._sync(input_ids.detach(), scores.device)
        out = scores.clone()  # transformers keeps the raw scores: never modify them in place
        head = out[:, :V]
        for proc in self.processors:
            head = proc(head)
        if head.data_ptr() != out.data_ptr():  # a processor that returned a new tensor
            out[:, :V] = head
        out[:, V:] = LOG_ZERO
        stuck = self._done.to(out.device) | (out.amax(dim=1) == LOG_ZERO)  # ended, or nothing left: end (again)
        if bool(stuck.any()):
            out[stuck] = LOG_ZERO
            out[stuck, self.eos_token_id] = 0.0
        return out

    # ------------------------------------------------------------------ row states
    def _sync(self, ids: torch.Tensor, device: torch.device) -> None:
        """Bring every row's grammar state up to ``ids`` (B, L): one token per row past the
        last call; a replay from the prompt if the rows were reordered; else a new start."""
        B, L = ids.shape
        prev = self._ids
        if prev is not None and prev.shape[0] == B and L == prev.shape[1] + 1 and prev.device == ids.device:
            if torch.equal(ids[:, :-1], prev):
                self._advance(ids[:, -1])
                self._ids = ids.clone()
                return
            if _rows_of(ids[:, :-1], prev):  # beam search reordered the rows: replay them
                self._restart(B, device)
                for t in range(self.prompt_length, L):
                    self._advance(ids[:, t])
                self._ids = ids.clone()
                return
        self.prompt_length = L  # a new generation: this call sees its prompt
        self._restart(B, device)
        self._ids = ids.clone()

    def _restart(self, batch_size: int, device: torch.device) -> None:
        for proc in self.processors:
            proc.reset(batch_size, device)
        self._done = torch.zeros(batch_size, dtype=torch.bool, device=device)

    def _advance(self, tokens: torch.Tensor) -> None:
        tokens = tokens.to(self._done.device).long()
        ended = tokens == self.eos_token_id
        for proc in self.processors:
            proc.advance(tokens, done=self._done | ended)
        self._done = self._done | ended


def _rows_of(rows: torch.Tensor, prev: torch.Tensor) -> bool:
    """Whether every row of ``rows`` (B, L) is a row of ``prev`` (B', L)."""
    return bool((rows[:, None, :] == prev[None, :, :]).all(dim=2).any(dim=1).all())


def continuations(tokenizer: PreTrainedTokenizerFast, sequences: torch.Tensor, prompt_length: int, eos_token_id: int | None = None) -> list[str]:
    """The text each row of ``generate``'s output (B, L) generated after the prompt, up to
    its first end-of-sequence token (decoded without clean-up of spaces)."""
    eos = tokenizer.eos_token_id if eos_token_id is None else eos_token_id
    out = []
    for row in sequences[:, prompt_length:].tolist():
        ids = row[: row.index(eos)] if eos in row else row
        out.append(tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))
    return out


__all__ = ["GrammarLogitsProcessor", "MissingExtra", "continuations", "tokenizer_vocab"]
