"""A model's parameters and its optimiser's state, each kept in one contiguous buffer.

A party saves its model and optimiser after every training step (``client_app/party_store.py``).
Taking their tensors one by one costs Python bookkeeping per tensor, more than copying the
bytes at MADELON size; with every tensor a view of one buffer, a group's bytes are one copy of
that buffer. The optimiser updates parameters and moments in place, into the views, so the
maths is unchanged; each view starts on a 64-byte boundary, as a tensor allocated alone does.

When the tensors are no longer the views (a layer replaced by ``keep``, the optimiser's state
created at its first step or loaded), the next call rebuilds the buffer from their values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ALIGN = 64  # bytes: where torch's CPU allocator starts a tensor

Layout = tuple[tuple[str, str, tuple[int, ...], int], ...]  # name, dtype, shape, byte offset


@dataclass(frozen=True)
class Flat:
    """Tensors as views of ``buffer`` (1-D), placed as ``layout`` says."""

    layout: Layout
    buffer: torch.Tensor
    views: tuple[torch.Tensor, ...]


def flatten(named: list[tuple[str, torch.Tensor]]) -> Flat | None:
    """One buffer holding the values of ``named`` and a view of it per tensor; None when the
    tensors differ in dtype or device, or numpy has no such dtype (they stay as they are)."""
    if len({t.dtype for _, t in named}) > 1 or len({t.device for _, t in named}) > 1:
        return None
    dtype = named[0][1].dtype if named else torch.float32
    device = named[0][1].device if named else torch.device("cpu")
    try:
        numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype.str
    except TypeError:  # bfloat16 and other dtypes numpy lacks
        return None
    itemsize = torch.empty(0, dtype=dtype).element_size()
    step = max(1, ALIGN // itemsize)
    offsets, total = [], 0
    for _, t in named:
        offsets.append(total)
        total += -(-t.numel() // step) * step
    buffer = torch.zeros(total, dtype=dtype, device=device)
    views = []
    for (_, t), start in zip(named, offsets, strict=True):
        view = buffer[start : start + t.numel()].view(t.shape)
        view.copy_(t.detach())
        views.append(view)
    layout = tuple(
        (name, numpy_dtype, tuple(t.shape), start * itemsize)
        for (name, t), start in zip(named, offsets, strict=True)
    )
    return Flat(layout, buffer, tuple(views))


class FlatState:
    """The flat buffers of one model and its optimiser, rebuilt whenever they are stale."""

    def __init__(self) -> None:
        self._model: Flat | None = None
        self._optim: Flat | None = None

    def model(self, module: torch.nn.Module, params: list[torch.Tensor]) -> Flat | None:
        """The module's parameters in one buffer; ``params``: the module's parameters in order
        (those its optimiser holds: cheaper to list than the module's). None: the module has
        registered buffers, or parameters of mixed dtypes."""
        flat = self._model
        if flat is not None and _same(params, flat.views):
            return flat
        named = list(module.named_parameters())
        if len(module.state_dict()) != len(named) or len(named) != len(params):
            return None
        if any(p is not q for (_, p), q in zip(named, params, strict=True)):
            return None  # registered buffers, or params not the module's: not flattened
        flat = self._model = flatten(named)
        if flat is not None:
            with torch.no_grad():
                for p, view in zip(params, flat.views, strict=True):
                    p.data = view
        return flat

    def optim(self, optimizer: torch.optim.Optimizer) -> Flat | None:
        """The optimiser's per-parameter state in one buffer, named ``"<param>.<key>"`` as
        :func:`vflfs.ml.optim.optimizer_arrays` names it (None: a value is not a tensor, or
        mixed dtypes)."""
        entries = [
            (pid, p, key, value)
            for pid, p in enumerate(q for g in optimizer.param_groups for q in g["params"])
            for key, value in optimizer.state.get(p, {}).items()
        ]
        flat = self._optim
        if flat is not None and _held(entries, flat.views):
            return flat
        if not all(torch.is_tensor(e[3]) for e in entries):
            return None
        flat = self._optim = flatten([(f"{pid}.{key}", value) for pid, _, key, value in entries])
        if flat is not None:
            for (_, p, key, _), view in zip(entries, flat.views, strict=True):
                optimizer.state[p][key] = view
        return flat


def _same(params: list[torch.Tensor], views: tuple[torch.Tensor, ...]) -> bool:
    """Whether each parameter still is its view (same storage, place and shape)."""
    return len(params) == len(views) and all(
        p.data_ptr() == v.data_ptr() and p.shape == v.shape
        for p, v in zip(params, views, strict=True)
    )


def _held(entries: list[tuple], views: tuple[torch.Tensor, ...]) -> bool:
    """Whether each optimiser state value (the entries' last item) still is its view."""
    return len(entries) == len(views) and all(
        e[-1] is v for e, v in zip(entries, views, strict=True)
    )
