"""Decoding: generation with composable logits processors (masks, grammar priors,
sampling transforms) over neurosym's compiled grammars; :func:`grammar_processors` picks
a grammar's processors, and named processors register through
:func:`register_processor` (``neurosym generate --processor NAME[:ARG]``)."""

from neurosym.decode.generate import Generation, PromptError, feature_inputs, generate
from neurosym.decode.grammar import grammar_processors
from neurosym.decode.idea import IdeaGate, ungated
from neurosym.decode.mask import GrammarMask, TokenBan, check_no_dead_end, states_allowing
from neurosym.decode.pcfg import PCFGMask, PCFGPrior
from neurosym.decode.priors import FSGPrior, MixturePrior, Prior, RegexPrior
from neurosym.decode.processor import (
    LogitsProcessor, NamedProcessor, ProcessorContext, build_processor, processor_names, register_processor, unregister_processor,
)
from neurosym.decode.sampling import ClassMixture, Nucleus, RepetitionPenalty, Temperature, TopK, WithinClassMixture
from neurosym.decode.steer import FeatureSteer

__all__ = [
    "ClassMixture", "FSGPrior", "FeatureSteer", "Generation", "GrammarMask", "IdeaGate", "LogitsProcessor", "MixturePrior",
    "NamedProcessor", "Nucleus", "PCFGMask", "PCFGPrior", "Prior", "ProcessorContext", "PromptError", "RegexPrior",
    "RepetitionPenalty", "Temperature", "TokenBan", "TopK", "WithinClassMixture", "build_processor", "check_no_dead_end",
    "feature_inputs", "generate", "grammar_processors", "processor_names", "register_processor", "states_allowing", "ungated",
    "unregister_processor",
]
