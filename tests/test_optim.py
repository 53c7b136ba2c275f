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


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("adam", {"weight_decay": 0.1}),
        ("adamw", {"weight_decay": 0.1, "betas": (0.8, 0.99)}),
        ("adam", {"amsgrad": True}),  # torch's own step
    ],
)
def test_adam_state_and_settings_as_torch(name: str, settings: dict) -> None:
    """Adam's state (step, moments) and its weight decay come out as torch's, also across
    param groups of their own learning rates, a parameter without a gradient on some steps,
    and a resumed optimiser (state loaded as a checkpoint loads it)."""
    from vflfs.ml.optim import load_optimizer_arrays, optimizer_arrays

    reference = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]

    def run(optimizer_of, resume_at: int | None = None) -> tuple[list, dict]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        groups = [
            {"params": list(model[0].parameters()), "lr": 0.02},
            {"params": list(model[2].parameters())},
        ]
        optimizer = optimizer_of(groups)
        x, y = torch.randn(16, 6), torch.randint(0, 2, (16,))
        for t in range(8):
            if t == resume_at:
                arrays = optimizer_arrays(optimizer)
                optimizer = optimizer_of(groups)
                load_optimizer_arrays(optimizer, arrays)
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            if t % 3 == 1:
                model[2].bias.grad = None  # skipped on this step, as torch skips it
            optimizer.step()
        return [p.detach().clone() for p in model.parameters()], optimizer_arrays(optimizer)

    theirs, their_state = run(lambda g: reference(g, lr=0.01, **settings))
    for resume_at in (None, 5):
        ours, our_state = run(lambda g: make_optimizer(g, name, lr=0.01, **settings), resume_at)
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b)
        assert our_state.keys() == their_state.keys()
        for key, value in their_state.items():
            assert our_state[key].dtype == value.dtype
            assert (our_state[key] == value).all(), key


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_a_closure_is_evaluated_with_gradients_and_its_loss_returned(name: str) -> None:
    reference = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}[name]

    def run(optimizer_of) -> tuple[list[torch.Tensor], list[float]]:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        optimizer = optimizer_of(model.parameters())
        x, y = torch.randn(8, 4), torch.randn(8, 2)

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        with torch.no_grad():  # the step turns gradients on for its closure
            losses = [float(optimizer.step(closure)) for _ in range(3)]
        return [p.detach().clone() for p in model.parameters()], losses

    ours, our_losses = run(lambda p: make_optimizer(p, name, lr=0.01))
    theirs, their_losses = run(lambda p: reference(p, lr=0.01))
    assert our_losses == their_losses and our_losses[0] > our_losses[-1]
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
