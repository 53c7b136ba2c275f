"""Where models run: ``auto`` puts party i on ``cuda:i % n_gpus`` when GPUs exist."""

from __future__ import annotations

import numpy as np
import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(choice: str, index: int = 0) -> torch.device:
    """The torch device for the ``index``-th model under the ``device`` config value."""
    if choice not in DEVICE_CHOICES and not choice.startswith("cuda:"):
        raise ValueError(f"device must be one of {DEVICE_CHOICES} or 'cuda:N', got {choice!r}")
    if choice == "cpu":
        return torch.device("cpu")
    if choice.startswith("cuda:"):
        return torch.device(choice)
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n == 0:
        if choice == "cuda":
            raise RuntimeError("device=cuda but no GPU is visible; use device=auto or cpu")
        return torch.device("cpu")
    return torch.device(f"cuda:{index % n}")


def as_tensor(x, device: torch.device, dtype: np.dtype | type | None = None) -> torch.Tensor:
    """``x`` (an array, or what ``np.array`` reads) as a tensor of its own on ``device``, as
    ``torch.tensor(np.asarray(x))`` makes it (same dtype, a copy: a message's arrays are
    read-only) in a fraction of its time on a batch's arrays."""
    return torch.from_numpy(np.array(x, dtype=dtype)).to(device)
