"""Fuzzy membership kernels: differentiable torch functions of ``x``, centres and widths.

Every kernel maps values ``x`` of shape ``(...)`` and per-term parameters of shape
``(K,)`` (or scalars) to memberships of shape ``(..., K)`` in ``[0, 1]``: ``x`` gets a
trailing terms axis that broadcasts against the parameters. Gradients flow to ``x`` and
to every parameter (the kinks of ``|x - c|`` and of ``min``/``max`` use torch's
subgradients).

=============  ====================================================  ==================
kernel         membership                                             spec string
=============  ====================================================  ==================
power          ``base ** (|x - c| / tau)``, ``0 < base < 1, tau > 0``  ``power(base=0.9, tau=0.35)``
triangular     ``max(0, min((x-a)/(b-a), (c-x)/(c-b)))``              ``triangular(width=0.4)``
trapezoidal    ``max(0, min((x-a)/(b-a), 1, (d-x)/(d-c)))``           ``trapezoidal(top=0.1, slope=0.3)``
gaussian       ``exp(-(x - c)**2 / (2 sigma**2))``                     ``gaussian(sigma=0.2)``
=============  ====================================================  ==================

A :class:`LinguisticVariable` holds named terms (``low, med, high``) with one kernel
and centres; a :class:`KernelSpec` is what the `.lex` format's ``kernel=...`` parses to.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from neurosym.errors import NeurosymError

Number = float | Tensor


def _t(v: Number, like: Tensor) -> Tensor:
    return v.to(like.dtype) if isinstance(v, Tensor) else torch.as_tensor(v, dtype=like.dtype, device=like.device)


def _float(x: Tensor) -> Tensor:
    return x if x.is_floating_point() else x.float()


# ---------------------------------------------------------------------- kernels
def power(x: Tensor, c: Number, base: Number = 0.9, tau: Number = 0.35) -> Tensor:
    """``base ** (|x - c| / tau)``: 1 at the centre, decaying geometrically; (...) -> (..., K)."""
    x = _float(x).unsqueeze(-1)
    c, base, tau = _t(c, x), _t(base, x), _t(tau, x)
    return torch.exp(torch.log(base) * (x - c).abs() / tau)


def gaussian(x: Tensor, c: Number, sigma: Number) -> Tensor:
    """``exp(-(x - c)^2 / (2 sigma^2))``; (...) -> (..., K)."""
    x = _float(x).unsqueeze(-1)
    c, sigma = _t(c, x), _t(sigma, x)
    return torch.exp(-0.5 * ((x - c) / sigma) ** 2)


def _rise(x: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``(x - a) / (b - a)``; a vertical edge (``a == b``) is a step at ``a``; ``a = -inf``
    is an open shoulder (1 everywhere)."""
    open_ = torch.isneginf(a)
    flat = (b <= a) & ~open_
    a_safe = torch.where(open_, b - 1, a)
    slope = (x - a_safe) / torch.where(flat | open_, torch.ones_like(b - a_safe), b - a_safe)
    return torch.where(open_, torch.ones_like(slope), torch.where(flat, (x >= a_safe).to(x.dtype), slope))


def triangular(x: Tensor, a: Number, b: Number, c: Number) -> Tensor:
    """Feet at ``a`` and ``c``, peak 1 at ``b`` (``a <= b <= c``); ``a == b`` or ``b == c`` is a
    vertical edge, ``a = -inf`` / ``c = +inf`` an open shoulder; (...) -> (..., K)."""
    x = _float(x).unsqueeze(-1)
    a, b, c = _t(a, x), _t(b, x), _t(c, x)
    up = _rise(x, a, b)
    down = _rise(-x, -c, -b)
    return torch.minimum(up, down).clamp(0.0, 1.0)


def trapezoidal(x: Tensor, a: Number, b: Number, c: Number, d: Number) -> Tensor:
    """Feet at ``a`` and ``d``, plateau 1 on ``[b, c]`` (``a <= b <= c <= d``; infinite feet are
    open shoulders); (...) -> (..., K)."""
    x = _float(x).unsqueeze(-1)
    a, b, c, d = _t(a, x), _t(b, x), _t(c, x), _t(d, x)
    up = _rise(x, a, b)
    down = _rise(-x, -d, -c)
    return torch.minimum(up, down).clamp(0.0, 1.0)


KERNELS = {"power": power, "triangular": triangular, "trapezoidal": trapezoidal, "gaussian": gaussian}


# ---------------------------------------------------------------------- kernel specs
class KernelSpecError(NeurosymError):
    """A bad kernel spec string; ``offset`` is the 0-based character position of the problem."""

    def __init__(self, message: str, offset: int = 0):
        self.message = message
        self.offset = offset
        super().__init__(message)


# name -> {parameter: (default or None if required, check, description)}
_PARAMS: dict[str, dict[str, tuple[float | None, str]]] = {
    "power": {"base": (0.9, "open01"), "tau": (0.35, "pos")},
    "gaussian": {"sigma": (None, "pos")},
    "triangular": {"width": (math.nan, "pos")},  # nan: from the neighbouring centres
    "trapezoidal": {"top": (None, "nonneg"), "slope": (None, "pos")},
}
_CHECKS = {"open01": ("in (0, 1)", lambda v: 0 < v < 1), "pos": ("> 0", lambda v: v > 0), "nonneg": (">= 0", lambda v: v >= 0)}
_NUM = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"


@dataclass(frozen=True)
class KernelSpec:
    """A kernel name and its scalar parameters, e.g. ``power(base=0.9, tau=0.35)``.

    Parameters are shared by every term; the terms differ by their centres:

    * ``power(base, tau)``: ``base ** (|x - c| / tau)``;
    * ``gaussian(sigma)``: standard deviation ``sigma``;
    * ``triangular(width)``: feet at ``c - width`` and ``c + width``; without ``width``,
      the feet sit on the neighbouring centres and the outer terms are open shoulders
      (a Ruspini partition: the memberships sum to 1 everywhere);
    * ``trapezoidal(top, slope)``: plateau ``[c - top, c + top]``, feet ``slope`` further out.
    """

    name: str
    params: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v:g}" for k, v in self.params.items() if not math.isnan(v))
        return f"{self.name}({inner})"

    @classmethod
    def parse(cls, text: str) -> "KernelSpec":
        """Parse ``name`` or ``name(key=value, ...)``; raises :class:`KernelSpecError`."""
        m = re.match(r"\s*([A-Za-z_]\w*)\s*", text)
        if not m:
            raise KernelSpecError(f"expected a kernel name ({', '.join(_PARAMS)}), got {text!r}", 0)
        name = m.group(1)
        if name not in _PARAMS:
            raise KernelSpecError(f"unknown kernel {name!r}; expected one of {', '.join(_PARAMS)}", m.start(1))
        allowed = _PARAMS[name]
        pos = m.end()
        given: dict[str, float] = {}
        if pos < len(text):
            if text[pos] != "(" or not text.rstrip().endswith(")"):
                raise KernelSpecError(f"expected '(' key=value, ... ')' after {name}", pos)
            body_start = pos + 1
            body = text[body_start : text.rstrip().rindex(")")]
            offset = body_start
            for part in body.split(",") if body.strip() else []:
                pm = re.fullmatch(rf"\s*([A-Za-z_]\w*)\s*=\s*({_NUM})\s*", part)
                if not pm:
                    lead = len(part) - len(part.lstrip())
                    raise KernelSpecError(f"expected key=number in the {name} kernel, got {part.strip()!r}", offset + lead)
                key, value = pm.group(1), float(pm.group(2))
                if key not in allowed:
                    raise KernelSpecError(f"unknown parameter {key!r} of the {name} kernel; expected {', '.join(allowed)}", offset + pm.start(1))
                if key in given:
                    raise KernelSpecError(f"parameter {key!r} given twice", offset + pm.start(1))
                what, ok = _CHECKS[allowed[key][1]]
                if not ok(value):
                    raise KernelSpecError(f"{name} kernel: {key} must be {what}, got {pm.group(2)}", offset + pm.start(2))
                given[key] = value
                offset += len(part) + 1
        params: dict[str, float] = {}
        for key, (default, _) in allowed.items():
            if key in given:
                params[key] = given[key]
            elif default is None:
                raise KernelSpecError(f"the {name} kernel needs {key}=...", m.start(1))
            else:
                params[key] = default
        return cls(name, params)

    def shapes(self, centers: Tensor) -> dict[str, Tensor]:
        """The kernel's per-term parameters (each (K,)) for these centres (K,)."""
        c = centers
        p = self.params
        if self.name == "power":
            return {"c": c, "base": torch.full_like(c, p["base"]), "tau": torch.full_like(c, p["tau"])}
        if self.name == "gaussian":
            return {"c": c, "sigma": torch.full_like(c, p["sigma"])}
        if self.name == "trapezoidal":
            top, slope = p["top"], p["slope"]
            return {"a": c - top - slope, "b": c - top, "c": c + top, "d": c + top + slope}
        w = p["width"]
        if not math.isnan(w):
            return {"a": c - w, "b": c, "c": c + w}
        if c.numel() == 1:
            raise NeurosymError("a triangular kernel with a single term needs width=...")
        inf = torch.full_like(c[:1], math.inf)
        left = torch.cat([-inf, c[:-1]])
        right = torch.cat([c[1:], inf])
        return {"a": left, "b": c, "c": right}


def parse_kernel(text: str) -> KernelSpec:
    """``KernelSpec.parse``: ``"power(base=0.9, tau=0.35)"`` -> ``KernelSpec('power', {...})``."""
    return KernelSpec.parse(text)


def membership(spec: KernelSpec, x: Tensor, centers: Tensor) -> Tensor:
    """Memberships of ``x`` (...) in terms centred at ``centers`` (K,) -> (..., K)."""
    return KERNELS[spec.name](x, **spec.shapes(centers.to(_float(x).dtype)))


# ---------------------------------------------------------------------- variables
class LinguisticVariable(nn.Module):
    """Named fuzzy terms over one value: ``var(x) -> (..., K)`` memberships, ``var.names``.

    Args:
        names: the term names, e.g. ``["low", "med", "high"]``.
        centers: one centre per term (K,).
        kernel: a :class:`KernelSpec`, a spec string such as ``"power(base=0.9, tau=0.35)"``,
            or a kernel name (default parameters).
        learnable: make the centres and the kernel's width-like parameters (``tau``,
            ``sigma``, ``width``, ``top``, ``slope``) trainable ``nn.Parameter``s;
            ``base`` stays fixed.
    """

    def __init__(self, names: Sequence[str], centers: Sequence[float] | Tensor, kernel: KernelSpec | str = "power", learnable: bool = False):
        super().__init__()
        self.names = list(names)
        self.spec = kernel if isinstance(kernel, KernelSpec) else KernelSpec.parse(kernel)
        c = torch.as_tensor(centers, dtype=torch.float32).flatten()
        if len(self.names) != c.numel():
            raise NeurosymError(f"{len(self.names)} term names but {c.numel()} centres")
        if len(set(self.names)) != len(self.names):
            raise NeurosymError(f"duplicate term names in {self.names}")
        shapes = self.spec.shapes(c)
        self.learnable = learnable
        self._keys = list(shapes)
        for key, value in shapes.items():
            if learnable and key != "base":
                setattr(self, f"p_{key}", nn.Parameter(value.clone()))
            else:
                self.register_buffer(f"p_{key}", value.clone())

    def params(self) -> dict[str, Tensor]:
        """The per-term kernel parameters, each (K,)."""
        return {k: getattr(self, f"p_{k}") for k in self._keys}

    def forward(self, x: Tensor) -> Tensor:
        """Memberships (..., K) of values ``x`` (...)."""
        return KERNELS[self.spec.name](x, **self.params())

    def __len__(self) -> int:
        return len(self.names)

    def extra_repr(self) -> str:
        return f"terms={self.names}, kernel={self.spec}, learnable={self.learnable}"


__all__ = [
    "KERNELS",
    "KernelSpec",
    "KernelSpecError",
    "LinguisticVariable",
    "gaussian",
    "membership",
    "parse_kernel",
    "power",
    "trapezoidal",
    "triangular",
]
