"""`neurosym.load(..., dtype=...)`: a `.pcfg` keeps the file's probabilities at float64
unless asked for less (issue 33), and a kind without floating tensors refuses a dtype."""

from __future__ import annotations

import math

import pytest
import torch

import neurosym
from neurosym.errors import NeurosymError
from neurosym.layers.prefix import prefix_state

GRAMMAR = "S -> 'a' [0.1] | 'b' [0.2] | 'c' S [0.7]\n"


def test_pcfg_loads_at_float64_with_the_files_probabilities(tmp_path):
    path = tmp_path / "g.pcfg"
    path.write_text(GRAMMAR)
    rules = neurosym.load(path)
    assert rules.binary.dtype == torch.float64
    c = rules.vocab.id("c")
    state = prefix_state(rules, torch.tensor([[c, c, c]]))
    assert abs(math.exp(float(state.prefix_log_prob[0])) - 0.343) <= 1e-15  # 0.7 ** 3, exactly as written


def test_dtype_float32_is_the_float64_rules_rounded_once(tmp_path):
    path = tmp_path / "g.pcfg"
    path.write_text(GRAMMAR)
    full, low = neurosym.load(path), neurosym.load(path, dtype=torch.float32)
    assert low.binary.dtype == torch.float32
    for name in ("root", "binary", "emit"):
        assert torch.equal(getattr(full, name).to(torch.float32), getattr(low, name))


def test_dtype_on_a_kind_without_floating_tensors_is_a_clear_error(tmp_path):
    path = tmp_path / "d.regex"
    path.write_text("YEAR: /(19|20)[0-9]{2}/\n")
    with pytest.raises(NeurosymError, match=r"d\.regex: dtype=.*\.pcfg"):
        neurosym.load(path, dtype=torch.float32)
