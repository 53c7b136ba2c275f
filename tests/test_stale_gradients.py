"""K > 1 local steps: stale embedding gradients carried to the party's fresh embedding by the
loss's curvature along them (vflfs.ml.stale_gradients)."""

from __future__ import annotations

import numpy as np
import torch

from vflfs.ml.stale_gradients import (
    corrected_gradient,
    curvature_along_gradient,
    round_learning_rate,
)

from helpers import run_local, tiny_config


def quadratic(target: torch.Tensor, scale: float):
    """0.5 * scale * mean over rows of |e - target|^2: Hessian scale / rows times I."""
    return lambda e: 0.5 * scale * ((e[0] - target) ** 2).sum(dim=1).mean()


def test_on_a_quadratic_loss_the_corrected_stale_gradient_is_the_fresh_one():
    rng = np.random.default_rng(0)
    target = torch.tensor(rng.normal(size=(8, 4)), dtype=torch.float64)
    stale = torch.tensor(rng.normal(size=(8, 4)), dtype=torch.float64)
    fresh = stale + torch.tensor(rng.normal(size=(8, 4)), dtype=torch.float64)
    loss = quadratic(target, scale=3.0)
    (c,) = curvature_along_gradient(loss, [stale], [None])
    assert abs(c - 3.0 / 8) < 1e-12

    def gradient(e: torch.Tensor) -> torch.Tensor:
        e = e.clone().requires_grad_(True)
        return torch.autograd.grad(loss([e]), e)[0]

    corrected = corrected_gradient(gradient(stale), fresh, stale, c)
    torch.testing.assert_close(corrected, gradient(fresh))
    # Past the loss's minimum the corrected gradient turns back; the stale one does not.
    past = 2 * target - stale
    assert (corrected_gradient(gradient(stale), past, stale, c) * gradient(stale)).sum() < 0


def test_the_curvature_follows_the_components_a_party_sent():
    """Closed components (not sent) do not count: a loss curved only along them has no
    curvature along what the party sent."""
    e = torch.ones(5, 3, dtype=torch.float64)
    weights = torch.tensor([0.0, 0.0, 10.0], dtype=torch.float64)

    def loss(parts):
        return (weights * parts[0] ** 2).sum() + parts[0][:, 0].sum()

    sent = np.array([True, True, False])
    (c,) = curvature_along_gradient(loss, [e], [sent])
    assert c == 0.0
    (c_all,) = curvature_along_gradient(loss, [e], [None])
    assert c_all > 0.0


def test_the_top_model_steps_slower_only_in_rounds_of_several_batches():
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=0.01)
    with round_learning_rate(optimizer, 1):
        assert optimizer.param_groups[0]["lr"] == 0.01
    with round_learning_rate(optimizer, 16):
        assert optimizer.param_groups[0]["lr"] == 0.01 * 16**-0.5
    assert optimizer.param_groups[0]["lr"] == 0.01


def test_one_round_trip_per_epoch_keeps_k_where_stale_gradients_blew_up(tmp_path):
    """On the tiny problem at lr 0.3, K = one epoch (6 batches) blew up with the stale
    gradients applied as they came (the guard lowered K in the second epoch); corrected,
    it keeps K and learns (measured: 0.617 where the majority class scores 0.5)."""
    cfg = tiny_config(
        "training.epochs=4 training.patience=null training.local_steps=100 training.lr=0.3"
    )
    result = run_local(cfg, tmp_path / "out")
    record = result["extra"]["local_steps"]
    assert record["used"] == 6 and not record["reduced"]
    assert np.isfinite(result["step_losses"]).all()
    assert result["test_metric"] > result["baseline_test_metric"] + 0.05
