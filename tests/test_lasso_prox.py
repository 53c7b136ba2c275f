"""The group-lasso maths of LESS-VFL and its baselines, without a federation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vflfs.ml.component_path import ComponentPath
from vflfs.ml.embedding_selection import ProxSGD, fit_embeddings, select_components
from vflfs.ml.metrics import paired_excess, prior_losses
from vflfs.ml.models import BottomModel, BottomSpec, Task, TopSpec
from vflfs.ml.prox import group_lasso_prox_, nonzero_columns
from vflfs.ml.top import ServerModel
from vflfs.report.cost_to_target import (
    cost_to_target,
    format_cost,
    reference_metric,
    summarize_costs,
)


def test_prox_zeroes_a_group_exactly_at_the_threshold_and_shrinks_the_others():
    # Columns (groups) with norms 5, 10, 4.9 and 0: tau = 5.
    w = torch.tensor([[3.0, 6.0, 2.94, 0.0], [4.0, 8.0, 3.92, 0.0]])
    norms = group_lasso_prox_(w, 5.0)
    np.testing.assert_allclose(norms.numpy(), [5.0, 10.0, 4.9, 0.0], rtol=1e-6)
    assert torch.equal(w[:, 0], torch.zeros(2))  # norm == tau: exactly zero
    assert torch.equal(w[:, 2], torch.zeros(2))  # norm < tau: zero
    assert torch.equal(w[:, 3], torch.zeros(2))  # a zero group stays zero (no NaN)
    # norm > tau: scaled by 1 - tau / norm = 0.5, direction kept.
    np.testing.assert_allclose(w[:, 1].numpy(), [3.0, 4.0], rtol=1e-6)
    assert nonzero_columns(w).tolist() == [1]


def test_prox_with_tau_zero_changes_nothing():
    w = torch.randn(4, 6)
    before = w.clone()
    group_lasso_prox_(w, 0.0)
    assert torch.equal(w, before)


def server_model(widths=(3, 2), lr=0.1, optimizer="sgd") -> ServerModel:
    return ServerModel(
        Task("classification", 2),
        list(widths),
        TopSpec(hidden=(), activation="none"),
        {"name": optimizer, "lr": lr},
        seed=0,
        device=torch.device("cpu"),
    )


def test_server_prox_hook_acts_on_the_input_columns_after_every_step():
    server = server_model()
    server.prox_tau = 1e3  # larger than any column: every group becomes zero
    server.step([np.ones((4, 3), np.float32), np.ones((4, 2), np.float32)], np.array([0, 1, 0, 1]))
    assert all(torch.count_nonzero(layer.weight) == 0 for layer in server.input_layers)
    assert torch.count_nonzero(server.model.interactive[0].bias) > 0  # biases are no group


def test_keep_components_shrinks_the_interactive_layer():
    server = server_model()
    before = server.model.interactive[0].weight.detach().clone()
    server.keep_components(0, [0, 2])
    layer = server.model.interactive[0]
    assert layer.weight.shape == (2, 2) and layer.in_features == 2
    assert torch.equal(layer.weight.detach(), before[:, [0, 2]])
    # The model runs on the smaller embedding, and the new optimiser owns the new weight.
    loss, grads = server.step([np.ones((4, 2), np.float32)] * 2, np.array([0, 1, 0, 1]))
    assert math.isfinite(loss) and grads[0].shape == (4, 2)
    assert any(p is layer.weight for g in server.optimizer.param_groups for p in g["params"])


def test_stage2_keeps_the_components_that_carry_the_label():
    """Party 0's first component is the label signal, everything else is noise."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 2000)
    e0 = rng.normal(size=(2000, 4)).astype(np.float32)
    e0[:, 0] = (2 * y - 1) * 2.0 + 0.3 * e0[:, 0]
    e1 = rng.normal(size=(2000, 4)).astype(np.float32)
    server = server_model(widths=(4, 4), lr=0.1)
    p = ProxSGD(lam=0.5, lr=0.1, prox_lr=0.1, epochs=30, batch_size=200, seed=0)
    keep, losses = select_components(server, [e0, e1], y, p)
    assert keep[0].tolist() == [0]
    assert keep[1].tolist() == []
    assert losses[-1] < losses[0]


def label_and_noise(n: int, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Party 0's first component carries the label, the rest and party 1's are noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    e0 = rng.normal(size=(n, 4)).astype(np.float32)
    e0[:, 0] = (2 * y - 1) * 0.5 + e0[:, 0]
    return y, [e0, rng.normal(size=(n, 4)).astype(np.float32)]


def within(slack: float):
    """The choice rule: scores within ``slack`` of the best."""
    return lambda metrics, losses: [i for i, m in enumerate(metrics) if m >= max(metrics) - slack]


def test_stage2_path_closes_the_noise_party_where_the_fixed_lambda_keeps_all():
    y, train = label_and_noise(2000, 0)
    val_y, val = label_and_noise(600, 1)
    # The official lambda_s and tau (0.005 x 0.01): nothing leaves in 150 epochs.
    p = ProxSGD(lam=0.005, lr=0.01, prox_lr=0.01, epochs=150, batch_size=128, seed=0)
    keep, _ = select_components(server_model(widths=(4, 4), lr=0.01), train, y, p)
    assert [len(k) for k in keep] == [4, 4]
    server = server_model(widths=(4, 4), lr=0.01)
    slack = 0.02
    keep, losses, records = ComponentPath(server, train, y, (val, val_y), p, 12).select(
        2.0, within(slack), learned=0.55
    )
    assert keep[0].tolist() == [0] and keep[1].tolist() == []
    assert len(losses) == len(records) * (150 // 12)
    lams = [r["lam"] for r in records]
    assert lams == sorted(lams) and lams[0] == 0.005
    assert {0.005 * 2.0**j for j in range(8)} <= set(lams)  # the doublings, and refinements
    chosen = [r for r in records if r.get("chosen")]
    assert len(chosen) == 1 and chosen[0]["kept"] == [1, 0]
    best = max(r["val_metric"] for r in records)
    assert chosen[0]["val_metric"] >= best - slack
    # The empty point (an intercept: chance) scored below; the model is back at the chosen one.
    assert all(r["val_metric"] < best - slack for r in records if sum(r["kept"]) < 1)
    assert [len(c) for c in (nonzero_columns(w.weight) for w in server.input_layers)] == [1, 0]


def test_stage2_path_keeps_both_signal_components_and_refines_between_its_points():
    """Party 0's first two components each carry half the signal; party 1 is noise."""

    def data(n: int, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 2, n)
        e0 = rng.normal(size=(n, 4)).astype(np.float32)
        e0[:, :2] += (2 * y[:, None] - 1) * 0.4
        return y, [e0, rng.normal(size=(n, 4)).astype(np.float32)]

    y, train = data(2000, 0)
    val_y, val = data(600, 1)
    p = ProxSGD(lam=0.005, lr=0.01, prox_lr=0.01, epochs=150, batch_size=128, seed=0)
    keep, _, records = ComponentPath(
        server_model(widths=(4, 4), lr=0.01), train, y, (val, val_y), p, 12
    ).select(2.0, within(0.02), 0.55)
    assert [k.tolist() for k in keep] == [[0, 1], []]
    lams = [r["lam"] for r in records]
    assert len(set(lams)) == len(lams)  # no point trained twice
    assert len(lams) > 8  # the doublings up to the empty point, and points between them


def test_stage2_path_keeps_every_component_when_its_top_model_learns_nothing():
    y, train = label_and_noise(2000, 0)
    val_y, val = label_and_noise(600, 1)
    p = ProxSGD(lam=0.005, lr=0.01, prox_lr=0.01, epochs=24, batch_size=128, seed=0)
    server = server_model(widths=(4, 4), lr=0.01)
    keep, _, records = ComponentPath(server, train, y, (val, val_y), p, 12).select(
        2.0, within(0.02), learned=1.0
    )
    assert [k.tolist() for k in keep] == [[0, 1, 2, 3]] * 2
    assert [r.get("chosen") for r in records][0] == "learned nothing from the cached embeddings"
    assert sum(r.get("chosen") is not None for r in records) == 1
    # A first lambda that closes every component leaves nothing to judge either.
    huge = ProxSGD(lam=1e4, lr=0.01, prox_lr=0.01, epochs=2, batch_size=128, seed=0)
    keep, _, records = ComponentPath(
        server_model(widths=(4, 4), lr=0.01), train, y, (val, val_y), huge, 2
    ).select(2.0, within(0.02), 0.55)
    assert [k.tolist() for k in keep] == [[0, 1, 2, 3]] * 2 and records[0]["kept"] == [0, 0]


def test_stage2_path_keeps_every_component_when_its_top_model_memorises():
    """40 training rows of pure noise: the top model fits them, and on 20 validation rows it
    may score above any accuracy threshold by chance, but its losses are above the class
    frequencies': it learned nothing, and no component is closed on that evidence."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        y, val_y = rng.integers(0, 2, 40), rng.integers(0, 2, 20)
        train = [rng.normal(size=(40, 12)).astype(np.float32) for _ in range(2)]
        val = [rng.normal(size=(20, 12)).astype(np.float32) for _ in range(2)]
        p = ProxSGD(lam=0.005, lr=0.5, prox_lr=0.01, epochs=120, batch_size=128, seed=0)
        keep, _, records = ComponentPath(
            server_model(widths=(12, 12), lr=0.5), train, y, (val, val_y), p, 12
        ).select(2.0, within(0.1), learned=0.0)
        assert [len(k) for k in keep] == [12, 12]
        assert records[0]["chosen"] == "learned nothing from the cached embeddings"


def test_stage2_path_judges_an_overconfident_top_model_by_its_lowest_losses():
    """Cached training embeddings that separate the classes (a pre-trained model that
    memorised its rows), validation embeddings that carry a weak signal: the top model grows
    overconfident as it trains (Adam), and at its best score's epoch its validation losses
    are above the class frequencies' (judged there, stage 2 learned nothing and kept every
    component). At their lowest they are below, so the path learned something, and it
    closes the party of pure noise."""

    def data(n: int, seed: int, signal: float, spread: float):
        rng = np.random.default_rng(seed)
        y = rng.integers(0, 2, n)
        e0 = rng.normal(size=(n, 4)).astype(np.float32)
        e0[:, 0] = (2 * y - 1) * signal + spread * e0[:, 0]
        return y, [e0, rng.normal(size=(n, 4)).astype(np.float32)]

    y, train = data(2000, 0, 3.0, 0.1)
    val_y, val = data(600, 1, 0.3, 1.0)
    server = server_model(widths=(4, 4), lr=0.01, optimizer="adam")
    p = ProxSGD(lam=0.005, lr=0.01, prox_lr=0.01, epochs=150, batch_size=128, seed=0)
    keep, _, records = ComponentPath(server, train, y, (val, val_y), p, 12).select(
        2.0, within(0.02), learned=0.55
    )
    assert [k.tolist() for k in keep] == [[0], []]
    assert [r["chosen"] for r in records if r.get("chosen")] == [True]
    # The records show both: points whose best epoch's loss is above the constant
    # prediction's (ln 2) and whose lowest loss, which the learned test reads, is below it.
    assert any(r["lowest_val_loss"] < np.log(2) < r["val_loss"] for r in records if r["kept"][0])
    assert all(r["lowest_val_loss"] <= r["val_loss"] for r in records)
    lams = [r["lam"] for r in records]
    assert len(set(lams)) == len(lams)  # each bisection narrows its bracket
    # Step 4 looked below the run of points with party 0 alone open, toward the denser
    # point under it: the bracket between them is narrower than one doubling of the path.
    run = min(r["lam"] for r in records if r["kept"][0] and not r["kept"][1])
    below = max(r["lam"] for r in records if r["lam"] < run)
    assert run / below < 2


def test_stage2_path_bisects_toward_denser_points_without_training_a_lambda_twice():
    """Every point good: the choice is the empty point, and the widest one with the same
    (no) parties open is looked for between the empty points and the last open one; ties
    go to the smallest lambda, so each bisection moves on."""
    y, train = label_and_noise(2000, 0)
    val_y, val = label_and_noise(600, 1)
    p = ProxSGD(lam=0.005, lr=0.01, prox_lr=0.01, epochs=150, batch_size=128, seed=0)
    _, _, records = ComponentPath(
        server_model(widths=(4, 4), lr=0.01), train, y, (val, val_y), p, 12
    ).select(2.0, within(1.0), 0.55)
    lams = [r["lam"] for r in records]
    assert len(set(lams)) == len(lams)
    empty = [r["lam"] for r in records if not sum(r["kept"])]
    assert len(empty) >= 2  # the doubling that closed everything, and a bisection below it


def test_prior_losses_are_the_constant_predictions_losses():
    y = np.array([0, 0, 0, 1])
    classification = prior_losses(Task("classification", 3), y, np.array([0, 1, 2]))
    freq = np.array([4, 2, 1]) / 7  # add-one smoothed counts of classes 0, 1, 2
    assert np.allclose(classification, -np.log(freq), atol=1e-6)
    task = Task("regression").fitted(np.array([1.0, 3.0]))  # mean 2, scale 1
    assert np.allclose(prior_losses(task, np.array([1.0, 3.0]), np.array([2.0, 4.0])), [0, 4])
    assert sum(paired_excess(np.array([0.1, 0.2, 0.1]), np.array([0.7, 0.7, 0.7]))) < 0
    excess, se = paired_excess(np.array([0.1, 1.5, 0.1]), np.array([0.7, 0.7, 0.7]))
    assert excess < 0 < excess + se  # lower on average, not by a standard error


def test_stage3_removes_the_inputs_its_embedding_does_not_use():
    """Targets depend on inputs 0 and 1 only: proximal SGD zeroes the other columns."""
    torch.manual_seed(0)
    X = torch.rand(1000, 6)
    targets = torch.stack([X[:, 0] - X[:, 1], 2 * X[:, 1]], dim=1) * 3
    model = BottomModel(6, BottomSpec(hidden=(8,), embedding_size=2, activation="none"))
    p = ProxSGD(lam=0.05, lr=0.1, prox_lr=0.1, epochs=60, batch_size=100, seed=0)
    losses = fit_embeddings(model, model.input_layer, X, targets, p)
    assert nonzero_columns(model.input_layer.weight).tolist() == [0, 1]
    assert losses[-1] < 0.05


def test_stage3_without_components_removes_every_input():
    model = BottomModel(5, BottomSpec(hidden=(8,), embedding_size=0, activation="none"))
    p = ProxSGD(lam=0.1, lr=0.001, prox_lr=0.01, epochs=3, batch_size=10, seed=0)
    assert fit_embeddings(model, model.input_layer, torch.rand(20, 5), torch.zeros(20, 0), p) == []
    assert nonzero_columns(model.input_layer.weight).numel() == 0


def test_prox_sgd_rejects_bad_settings():
    with pytest.raises(ValueError, match="batch_size"):
        ProxSGD(lam=0.1, lr=0.01, prox_lr=0.01, epochs=1, batch_size=0, seed=0)
    with pytest.raises(ValueError, match="bad proximal SGD"):
        ProxSGD(lam=-1, lr=0.01, prox_lr=0.01, epochs=1, batch_size=1, seed=0)


# -- cost to target (LESS-VFL Table 2) --------------------------------------------------------
HISTORY = [  # as csv.DictReader gives them: strings, empty cells
    {"epoch": "0", "test_metric": "0.80", "spurious_removed": "0.0", "mb": "1.5"},
    {"epoch": "1", "test_metric": "0.91", "spurious_removed": "0.5", "mb": "3.0"},
    {"epoch": "2", "test_metric": "0.85", "spurious_removed": "0.9", "mb": "4.5"},
    {"epoch": "3", "test_metric": "0.90", "spurious_removed": "0.8", "mb": "6.0"},
]


def test_cost_to_target_needs_both_accuracy_and_removal():
    # target = 0.9 x 1.0: epoch 1 is accurate but removed too little, epoch 2 not accurate.
    assert cost_to_target(HISTORY, 1.0) == 6.0
    assert cost_to_target(HISTORY, 1.0, min_removed=None) == 3.0
    assert cost_to_target(HISTORY, 1.0, min_removed=0.95) is None
    assert cost_to_target(HISTORY, 0.9, cost="epoch") == 2.0  # target 0.81
    assert cost_to_target(list(reversed(HISTORY)), 1.0) == 6.0  # by epoch, not row order


def test_cost_to_target_without_spurious_column_never_meets_removal():
    rows = [{"epoch": 0, "test_metric": 0.99, "spurious_removed": "", "mb": 1.0}]
    assert cost_to_target(rows, 1.0) is None
    assert cost_to_target(rows, 1.0, min_removed=None) == 1.0


def test_cost_to_target_reads_dataframes_and_summarises():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(HISTORY).astype(float)
    assert cost_to_target(frame, 1.0) == 6.0
    assert reference_metric([HISTORY, frame]) == pytest.approx(0.91)
    summary = summarize_costs([2.0, 4.0, None])
    assert summary["reached"] == 2 and summary["runs"] == 3
    assert summary["mean"] == 3.0 and summary["std"] == pytest.approx(math.sqrt(2))
    assert format_cost(summary) == "3.0 ± 1.4 (2/3)"
    assert format_cost(summarize_costs([None])) == "n/r"
