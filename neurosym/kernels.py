"""Optional kernels behind a front door's ``kernel=`` switch: which implementation a call
runs. Used by :func:`neurosym.layers.inside.inside` and
:func:`neurosym.lm.idea.idea_objective`; triton is not a dependency of neurosym, so each
caller loads its kernel module lazily and passes the loader here. A front door may also
offer ``"compile"``: its torch operators through ``torch.compile`` (which fuses them into
a few generated kernels: Triton on CUDA, C++ on the CPU)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch

from neurosym.errors import NeurosymError

KERNELS = ("auto", "torch", "triton", "compile")
"""``torch``: the batched torch operators (any device); ``triton``: the Triton kernels
(CUDA tensors, or the CPU under Triton's interpreter); ``auto``: Triton on CUDA when
triton imports and the call can use it, else torch; ``compile``: the torch operators
through ``torch.compile``, where the front door offers it (``auto`` never picks it: the
first call compiles, for tens of seconds)."""


def choose_kernel(kernel: str, device: torch.device | str, load: Callable[[], ModuleType | None], caller: str,
                  unsupported: str | None = None, compiled: bool = False) -> str:
    """``"torch"``, ``"triton"`` or ``"compile"``: what ``caller`` runs for ``kernel`` (one of
    :data:`KERNELS`) on tensors of ``device``; ``compiled``: the caller offers ``"compile"``
    (else asking for it is a :class:`~neurosym.errors.NeurosymError`). ``load()`` returns the kernel module (with
    an ``interpreted()`` function) or None when triton does not import; ``unsupported``
    says why this call cannot use the kernels (None: it can). ``auto`` falls back to torch
    quietly; ``triton`` where it cannot run (unsupported, no triton, CPU tensors outside
    the interpreter: ``TRITON_INTERPRET=1`` set before triton is imported) is a
    :class:`~neurosym.errors.NeurosymError`."""
    if kernel not in KERNELS:
        raise NeurosymError(f"{caller}: kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if kernel == "compile":
        if not compiled:
            raise NeurosymError(f"{caller}: kernel='compile' is not offered here; use 'torch', 'triton' or 'auto'")
        return "compile"
    cuda = torch.device(device).type == "cuda"
    if kernel == "torch" or (kernel == "auto" and (not cuda or unsupported is not None)):
        return "torch"
    if unsupported is not None:
        raise NeurosymError(f"{caller}: kernel='triton' {unsupported}; use kernel='torch' or 'auto'")
    module = load()
    if kernel == "auto":
        return "torch" if module is None else "triton"
    if module is None:
        raise NeurosymError(f"{caller}: kernel='triton' needs the triton package, which does not import here "
                            "(it is optional: pip install triton; or use kernel='torch' / 'auto')")
    if not cuda and not module.interpreted():
        raise NeurosymError(f"{caller}: kernel='triton' runs on CUDA tensors (these are on {device}), or on the CPU under "
                            "Triton's interpreter (TRITON_INTERPRET=1 set before triton is imported)")
    return "triton"


def timing_skip_reason(device: torch.device | str, resolve: Callable[[str, torch.device | str], str]) -> str | None:
    """Why a benchmark cannot time Triton kernels on ``device`` (None: it can): they are
    timed on CUDA only (the CPU interpreter is a test tool, not a speed), and
    ``resolve("triton", device)`` (a front door's resolver, e.g.
    :func:`neurosym.layers.inside.resolve_kernel`) must accept them."""
    if torch.device(device).type != "cuda":
        return f"the Triton kernels are timed on CUDA only (device {device})"
    try:
        resolve("triton", device)
    except NeurosymError as e:
        return str(e)
    return None


__all__ = ["KERNELS", "choose_kernel", "timing_skip_reason"]
