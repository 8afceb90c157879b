"""float32 against float64 in the prefix chart (docs/prefix.md, "Precision").

``python -m neurosym.bench.prefix_precision [--grammar grammars/arith.pcfg] [--prefix "( 1 +"] [--json OUT]``
loads a ``.pcfg`` three ways and runs :func:`neurosym.layers.prefix.prefix_state` on one
prefix with each:

* ``float64``: ``load_pcfg(path)`` and the default float64 chart (the reference);
* ``float32``: ``load_pcfg(path, dtype=torch.float32)`` and a float32 chart;
* ``float32_rules_float64_chart``: the float32 rules cast with ``.to(torch.float64)``
  (their rounding kept) and a float64 chart.

Reported per setting: ``prefix_prob``, ``P(prefix ...)`` as a user reads it
(``prefix_log_prob.exp().item()``, the exponential taken in the chart's dtype), and
``prefix_rel_error``, its relative error against the float64 setting (for the float64
setting itself, against ``--exact`` when given: the probability worked out by hand, a
decimal read exactly); the ratios are taken in exact rationals;
``next_rel_error`` and ``conditional_rel_error``, the largest relative error over the
vocabulary of ``P(prefix v ...)`` (``next_log_prob()``) and of ``P(v | prefix)``
(``next_token_log_probs()``), read from the log-probabilities as ``|exp(a - b) - 1|`` in
float64 (the chart's error, not the rounding of a last float32 exponential). The
impossible tokens must be ``-inf`` in every setting (checked: an error otherwise).
Deterministic: no seed, no timing.
"""

from __future__ import annotations

import argparse
import platform
from fractions import Fraction
import sys
from pathlib import Path

import torch

from neurosym.files import emit_report
from neurosym.compile.pcfg import load_pcfg
from neurosym.errors import NeurosymError
from neurosym.layers.prefix import prefix_state

SETTINGS = ("float64", "float32", "float32_rules_float64_chart")


def _largest_rel_error(got: torch.Tensor, ref: torch.Tensor, what: str) -> float:
    """``max |exp(got - ref) - 1|`` over the finite entries of two log-probability tensors
    (any shape); the ``-inf`` entries must coincide."""
    got, ref = got.double(), ref.double()
    finite = torch.isfinite(ref)
    if not torch.equal(finite, torch.isfinite(got)):
        raise NeurosymError(f"{what}: the impossible tokens differ between float32 and float64")
    return torch.expm1(got[finite] - ref[finite]).abs().max().item() if finite.any() else 0.0


def run(grammar: str | Path = "grammars/arith.pcfg", prefix: str = "( 1 +", exact: str | None = "0.0021") -> dict:
    """The report: ``{"grammar", "prefix", "exact", "torch", "settings": {name: {...}}}``
    (the keys of each setting are in the module docstring)."""
    try:
        exact_value = Fraction(exact) if exact else None
    except ValueError:
        raise NeurosymError(f"--exact: expected a decimal such as 0.0021, got {exact!r}") from None
    rules64 = load_pcfg(grammar)
    rules32 = load_pcfg(grammar, dtype=torch.float32)
    unknown = [t for t in prefix.split() if t not in rules64.vocab]
    if unknown or not prefix.split():
        raise NeurosymError(f"--prefix: {prefix!r} " + (f"has tokens the grammar never emits: {unknown}" if unknown else "is empty"))
    ids = torch.tensor([rules64.vocab.encode(prefix)])  # (1, k)
    runs = {"float64": (rules64, torch.float64), "float32": (rules32, torch.float32),
            "float32_rules_float64_chart": (rules32.to(torch.float64), torch.float64)}
    states = {name: prefix_state(rules, ids, dtype=dtype) for name, (rules, dtype) in runs.items()}
    ref = states["float64"]
    ref_cond, _ = ref.next_token_log_probs()
    settings = {}
    rel = lambda a, b: float(abs(Fraction(a) / b - 1))  # noqa: E731  (exact: no rounding in the division)
    for name, state in states.items():
        p = state.prefix_log_prob.exp().item()
        if name == "float64":
            settings[name] = {"prefix_prob": p, "prefix_rel_error": rel(p, exact_value) if exact_value else None}
            continue
        cond, _ = state.next_token_log_probs()
        settings[name] = {"prefix_prob": p,
                          "prefix_rel_error": rel(p, Fraction(ref.prefix_log_prob.exp().item())),
                          "next_rel_error": _largest_rel_error(state.next_log_prob(), ref.next_log_prob(), "P(prefix v ...)"),
                          "conditional_rel_error": _largest_rel_error(cond, ref_cond, "P(v | prefix)")}
    return {"grammar": str(grammar), "prefix": prefix, "exact": float(exact_value) if exact_value else None, "torch": torch.__version__,
            "python": platform.python_version(), "settings": settings}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grammar", default="grammars/arith.pcfg")
    ap.add_argument("--prefix", default="( 1 +", help="space-separated tokens of the grammar")
    ap.add_argument("--exact", default="0.0021", help='P(prefix ...) worked out by hand, as a decimal ("": none)')
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    args = ap.parse_args(argv)
    try:
        report = run(args.grammar, args.prefix, args.exact or None)
    except NeurosymError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    emit_report(report, args.json)


if __name__ == "__main__":
    main()
