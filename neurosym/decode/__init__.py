"""Decoding: generation with composable logits processors (masks, grammar priors,
sampling transforms) over neurosym's compiled grammars."""

from neurosym.decode.processor import LogitsProcessor

__all__ = ["LogitsProcessor"]
