"""Decoding: generation with composable logits processors (masks, grammar priors,
sampling transforms) over neurosym's compiled grammars."""

from neurosym.decode.generate import Generation, PromptError, feature_inputs, generate
from neurosym.decode.idea import IdeaGate, ungated
from neurosym.decode.mask import GrammarMask, states_allowing
from neurosym.decode.pcfg import PCFGMask, PCFGPrior
from neurosym.decode.priors import FSGPrior, MixturePrior, Prior, RegexPrior
from neurosym.decode.processor import LogitsProcessor
from neurosym.decode.sampling import ClassMixture, Nucleus, RepetitionPenalty, Temperature, TopK
from neurosym.decode.steer import FeatureSteer

__all__ = [
    "ClassMixture", "FSGPrior", "FeatureSteer", "Generation", "GrammarMask", "IdeaGate", "LogitsProcessor", "MixturePrior",
    "Nucleus", "PCFGMask", "PCFGPrior", "Prior", "PromptError", "RegexPrior", "RepetitionPenalty", "Temperature", "TopK",
    "feature_inputs", "generate", "states_allowing", "ungated",
]
