"""LESS-VFL stage 3 along a local path of lambdas, chosen by held-out reconstruction."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from vflfs.ml.embedding_selection import ProxSGD, fit_embeddings_path, leave_scores
from vflfs.ml.prox import nonzero_columns


def test_local_path_keeps_the_columns_the_embeddings_need():
    torch.manual_seed(0)
    X = torch.randn(400, 10)
    model = nn.Sequential(nn.Linear(10, 8), nn.Linear(8, 4))
    with torch.no_grad():
        model[0].weight[:, 3:] = 0.0  # the embeddings depend on columns 0-2 only
        targets = model(X).detach()
        model[0].weight[:, 3:] = 0.05 * torch.randn(8, 7)  # ... but the model uses all ten
    p = ProxSGD(lam=1.0, lr=0.05, prox_lr=0.01, epochs=80, batch_size=50, seed=0)
    _, records = fit_embeddings_path(model, model[0], X, targets, p, points=8, tolerance=0.05)
    assert len(records) == 8
    assert [r["lam"] for r in records] == sorted(r["lam"] for r in records)
    chosen = [r for r in records if r.get("chosen")]
    assert len(chosen) == 1 and chosen[0]["r2"] >= max(r["r2"] for r in records) - 0.05
    kept = nonzero_columns(model[0].weight).tolist()
    assert kept == [0, 1, 2]


def test_local_path_without_components_keeps_nothing():
    model = nn.Sequential(nn.Linear(5, 4))
    p = ProxSGD(lam=1.0, lr=0.05, prox_lr=0.01, epochs=4, batch_size=10, seed=0)
    fit_embeddings_path(model, model[0], torch.randn(20, 5), torch.zeros(20, 0), p)
    assert nonzero_columns(model[0].weight).numel() == 0


def test_leave_scores_rank_by_leaving_point_then_norm():
    norms = [
        np.array([2.0, 1.0, 0.5, 0.0]),
        np.array([1.0, 0.5, 0.0, 0.0]),
        np.array([0.2, 0.0, 0.0, 0.0]),
    ]
    scores = leave_scores(norms)
    assert scores[3] == 0.0  # never non-zero
    assert scores[0] > scores[1] > scores[2] > scores[3]  # leaves later: ranks higher
    same = leave_scores([np.array([0.3, 0.9])])  # same leaving point: the larger norm first
    assert same[1] > same[0] and np.all((same > 1) & (same < 2))


def test_a_diverging_path_point_is_fitted_again_at_a_smaller_step():
    """Large embeddings (a top layer 30 times larger) make SGD at lr 0.05 diverge: the point is
    fitted again from the last point's model at a tenth of the step, and the path still keeps
    the columns the embeddings need."""
    torch.manual_seed(0)
    X = torch.randn(400, 10)
    model = nn.Sequential(nn.Linear(10, 8), nn.Linear(8, 4))
    with torch.no_grad():
        model[1].weight.mul_(30.0)
        model[0].weight[:, 3:] = 0.0
        targets = model(X).detach()
        model[0].weight[:, 3:] = 0.05 * torch.randn(8, 7)
    p = ProxSGD(lam=1.0, lr=0.05, prox_lr=0.01, epochs=80, batch_size=50, seed=0)
    _, records = fit_embeddings_path(model, model[0], X, targets, p, points=8, tolerance=0.05)
    steps = [r["lr"] for r in records]
    assert steps[0] < 0.05 and steps == sorted(steps, reverse=True)
    assert all(np.isfinite(r["r2"]) for r in records)
    assert nonzero_columns(model[0].weight).tolist() == [0, 1, 2]
