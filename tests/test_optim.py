"""The optimisers of ml/optim.py: torch's maths, without torch's compile and profiler wrappers."""

from __future__ import annotations

import pytest
import torch

from vflfs.ml.optim import make_optimizer


def train(optimizer_of, steps: int = 5, set_to_none: bool = True) -> list[torch.Tensor]:
    """A small network's parameters after ``steps`` steps of ``optimizer_of(parameters)``."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    optimizer = optimizer_of(model.parameters())
    x, y = torch.randn(32, 7), torch.randint(0, 3, (32,))
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=set_to_none)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("name", ["adam", "sgd", "adamw"])
@pytest.mark.parametrize("set_to_none", [True, False])
def test_the_same_steps_as_torch(name: str, set_to_none: bool) -> None:
    reference = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
    ours = train(lambda p: make_optimizer(p, name, lr=0.01), set_to_none=set_to_none)
    theirs = train(lambda p: reference[name](p, lr=0.01), set_to_none=set_to_none)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)  # to the bit


def test_no_profiler_records_per_step() -> None:
    """torch's own optimisers open a profiler record per step and per zero_grad (about a sixth
    of a party's training step on small models); these open none."""

    def records(optimizer_of) -> list[str]:
        with torch.autograd.profiler.profile() as prof:
            train(optimizer_of, steps=2)
        return [e.name for e in prof.function_events if e.name.startswith("Optimizer.")]

    assert records(lambda p: torch.optim.Adam(p, lr=0.01))  # the check can fail
    assert records(lambda p: make_optimizer(p, "adam", lr=0.01)) == []
