"""Kernel launches of a step, counted with ``torch.profiler`` (issue 30): on CUDA the CUDA
kernels the profiler saw; on the CPU, the proxy: the leaf ``aten::`` operators that are not
views or allocations, each of which would launch at least one kernel on a GPU. Used by
``neurosym bench train --launches`` and ``neurosym bench inside --launches``."""

from __future__ import annotations

from collections.abc import Callable

import torch

NO_KERNEL = frozenset({
    "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::as_strided", "aten::t", "aten::transpose", "aten::permute",
    "aten::expand", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::alias",
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resize_", "aten::split", "aten::chunk", "aten::narrow",
    "aten::unbind", "aten::contiguous", "aten::lift_fresh", "aten::result_type", "aten::item", "aten::_local_scalar_dense",
    "aten::is_nonzero", "aten::numel", "aten::size", "aten::stride", "aten::split_with_sizes", "aten::expand_as", "aten::view_as",
    "aten::set_", "aten::_reshape_alias", "aten::flatten", "aten::unflatten", "aten::diagonal",
})
"""Operators that only make a view or allocate: no kernel on a GPU, left out of the launch count."""


def count_launches(step: Callable[[], None], device: torch.device) -> int:
    """Kernel launches of one call of ``step``, counted with ``torch.profiler``: on the CPU
    the leaf ``aten::`` operators that are not views or allocations (:data:`NO_KERNEL`; the
    CPU proxy), on CUDA the CUDA kernels the profiler saw."""
    from torch.profiler import ProfilerActivity, profile  # lazy: the profiler only when launches are counted

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        step()
        if cuda:
            torch.cuda.synchronize(device)
    events = prof.events()
    if cuda:  # the kernels are device events of their own, and also listed under the operator that launched them
        kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
        return kernels or sum(len(e.kernels) for e in events if e.device_type == torch.autograd.DeviceType.CPU)
    return sum(1 for e in events if e.name.startswith("aten::") and e.name not in NO_KERNEL
               and not any(c.name.startswith("aten::") for c in e.cpu_children))


__all__ = ["NO_KERNEL", "count_launches"]
