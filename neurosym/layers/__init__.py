"""Differentiable symbolic layers: the inside algorithm over PCFG rule tensors and exact
prefix probabilities, the WFSA regex layer, soft Levenshtein and the edit distance to
an automaton, differentiable stacks and sequence encoders."""

from neurosym.layers.encoders import (
    ENCODERS,
    AttentionEncoder,
    ConvEncoder,
    Encoder,
    LSTMEncoder,
    MeanPool,
    PCFGEncoder,
    RegexBankEncoder,
    RNNEncoder,
    StackEncoder,
    build_encoder,
)
from neurosym.layers.inside import (
    Marginals,
    Parse,
    expected_rule_counts,
    inside,
    marginals,
    nll_supervised,
    nll_unsupervised,
    sample_parses,
    sentence_log_prob,
    tree_score,
    viterbi,
)
from neurosym.layers.pda import NondeterministicStack, NondeterministicStackRNN, StackRNN
from neurosym.layers.prefix import PrefixGrammar, PrefixState, prefix_state
from neurosym.layers.softlev import soft_levenshtein, soft_levenshtein_to_automaton
from neurosym.layers.wfsa import RegexLayer

__all__ = [
    "ENCODERS",
    "AttentionEncoder",
    "ConvEncoder",
    "Encoder",
    "LSTMEncoder",
    "Marginals",
    "MeanPool",
    "NondeterministicStack",
    "NondeterministicStackRNN",
    "PCFGEncoder",
    "Parse",
    "RNNEncoder",
    "RegexBankEncoder",
    "RegexLayer",
    "StackEncoder",
    "StackRNN",
    "build_encoder",
    "expected_rule_counts",
    "inside",
    "marginals",
    "nll_supervised",
    "nll_unsupervised",
    "sample_parses",
    "sentence_log_prob",
    "soft_levenshtein",
    "soft_levenshtein_to_automaton",
    "tree_score",
    "viterbi",
]
