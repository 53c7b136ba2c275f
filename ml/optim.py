"""Optimisers, and their state as flat numpy arrays (for Flower's ``context.state``)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}


def make_optimizer(
    params: Iterable[torch.nn.Parameter], name: str = "adam", lr: float = 0.01, **kwargs
) -> torch.optim.Optimizer:
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {sorted(OPTIMIZERS)}")
    return OPTIMIZERS[name](params, lr=lr, **kwargs)


def optimizer_arrays(optimizer: torch.optim.Optimizer) -> dict[str, np.ndarray]:
    """The optimiser's per-parameter state, flattened to ``{"<param>.<key>": array}``."""
    out: dict[str, np.ndarray] = {}
    for pid, state in optimizer.state_dict()["state"].items():
        for key, value in state.items():
            arr = value.detach().cpu().numpy() if torch.is_tensor(value) else np.asarray(value)
            out[f"{pid}.{key}"] = arr
    return out


def load_optimizer_arrays(optimizer: torch.optim.Optimizer, arrays: dict[str, np.ndarray]) -> None:
    """Inverse of :func:`optimizer_arrays` (param groups come from the optimiser itself)."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    state: dict[int, dict] = {}
    for name, arr in arrays.items():
        pid, key = name.split(".", 1)
        device = params[int(pid)].device if key != "step" else "cpu"
        state.setdefault(int(pid), {})[key] = torch.from_numpy(np.array(arr)).to(device)
    optimizer.load_state_dict(
        {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}
    )
