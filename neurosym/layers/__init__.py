"""Differentiable symbolic layers: the inside algorithm over PCFG rule tensors, the
WFSA regex layer, soft Levenshtein, differentiable stacks and sequence encoders."""
