"""Stochastic gates, gated party models, and what gated parties send."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from vflfs.client_app.party import Party
from vflfs.ml.gates import GaussianGate

from helpers import run_local, small_party, tiny_config

GATE = {"sigma": 0.5, "lam": 0.1}


def test_gate_is_deterministic_at_evaluation_and_noisy_in_training():
    gate = GaussianGate(5, sigma=1.0, init=torch.tensor([-1.0, 0.0, 0.3, 0.9, 2.0]))
    x = torch.ones(2, 5)
    gate.eval()
    np.testing.assert_allclose(gate(x)[0].detach().numpy(), [0, 0, 0.3, 0.9, 1.0])
    assert gate.open().tolist() == [False, False, True, True, True]
    gate.train()
    torch.manual_seed(0)
    a = gate(x)
    torch.manual_seed(0)
    assert torch.equal(a, gate(x))  # same draw from the same seed
    assert not torch.equal(a, gate(x))  # another draw otherwise
    assert torch.equal(a[0], a[1])  # one draw per gate per batch


def test_gate_penalty_is_lambda_times_mean_phi():
    gate = GaussianGate(3, sigma=2.0, lam=0.5, init=torch.tensor([0.0, 2.0, -2.0]))
    phi = torch.distributions.Normal(0, 1).cdf(torch.tensor([0.0, 1.0, -1.0]))
    assert gate.penalty().item() == pytest.approx(0.5 * phi.mean().item(), rel=1e-6)
    summed = GaussianGate(3, sigma=2.0, lam=0.5, init=torch.tensor([0.0, 2.0, -2.0]), reduce="sum")
    assert summed.penalty().item() == pytest.approx(0.5 * phi.sum().item(), rel=1e-6)


def gated_party(embedding_gate: bool = True) -> Party:
    X = np.random.default_rng(0).random((50, 8)).astype(np.float32)
    gates = {"input": GATE, "embedding": GATE if embedding_gate else None}
    party = small_party(X, {"name": "sgd", "lr": 0.1}, gates)
    with torch.no_grad():
        party.model.embedding_gate.mu.copy_(torch.tensor([0.8, -3.0, 0.6, -3.0]))
        party.model.input_gate.mu.copy_(torch.tensor([0.9, -1, 0.5, 0.5, -2, 0.7, 0.1, 0.3]))
    return party


def test_closed_embedding_components_are_not_sent():
    party = gated_party()
    embeddings, mask = party.embed(np.arange(10))
    assert mask.tolist() == [True, False, True, False]
    assert embeddings.shape == (10, 2)
    assert party.open_components().tolist() == [0, 2]
    assert party.selected().tolist() == [0, 2, 3, 5, 6, 7]


def test_gradient_of_open_components_equals_the_full_gradient():
    """Sending only open components' gradients loses nothing: closed gates have zero slope."""
    party = gated_party()
    twin = copy.deepcopy(party)
    rows = np.arange(16)
    emb, mask = party.forward(rows, seed=11)
    emb_again, mask_again = party.forward(rows, seed=11)
    np.testing.assert_array_equal(emb, emb_again)  # the recomputed pass draws the same noise
    grad = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    party.apply_gradient(rows, grad[:, mask], seed=11)
    twin._open = lambda: None  # the twin takes the full gradient, closed components included
    twin.apply_gradient(rows, grad, seed=11)
    for a, b in zip(party.model.parameters(), twin.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_a_seeded_pass_draws_its_gate_noise_from_its_own_generator():
    """The same numbers as seeding torch (input gates first, then embedding gates), and
    torch's global generator neither read nor reseeded."""
    party = gated_party()
    rows = np.arange(16)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    emb, _ = party.forward(rows, seed=11)
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(11)
    with torch.no_grad():
        expected = party.model(party._rows(rows))
    mask = party._open()
    np.testing.assert_array_equal(emb, expected.numpy()[:, mask])
    assert party.model.input_gate.noise is None and party.model.embedding_gate.noise is None


def test_stg_selects_few_features_and_fedsdg_sends_less_at_prediction(tmp_path):
    """At a fixed lambda (no path): gates close during training."""
    common = "training.epochs=15 training.patience=null"
    vfl = run_local(tiny_config(common), tmp_path / "vfl")
    common += " strategy.path.enabled=false"
    stg = run_local(tiny_config(f"strategy=stg {common}"), tmp_path / "stg")
    assert stg["selection"]["ratio"] < 0.5
    assert stg["importance"][0]["kind"] == "gate"
    sdg = run_local(
        tiny_config(
            f"strategy=fedsdg_fs strategy.init=uniform strategy.lambda_embedding=2.0 {common}"
        ),
        tmp_path / "sdg",
    )
    history = (tmp_path / "sdg" / "history.csv").read_text().splitlines()
    column = history[0].split(",").index("prediction_bytes_per_sample")
    per_sample = [float(line.split(",")[column]) for line in history[1:]]
    assert per_sample[0] == vfl["prediction_bytes_per_sample"] == 3 * 16 * 4
    assert per_sample[-1] < per_sample[0]  # closed components are no longer sent
    evaluation = lambda s: s["communication"]["phases"]["evaluation"]["bytes_up"]  # noqa: E731
    assert evaluation(sdg) < evaluation(vfl)


def test_fedsdg_fs_initialises_gates_from_secure_gini(tmp_path):
    cfg = tiny_config(
        "strategy=fedsdg_fs strategy.gini.key_bits=512 strategy.lambda_embedding=0.02 "
        "training.epochs=3 strategy.path.enabled=false"
    )
    summary = run_local(cfg, tmp_path)
    phases = summary["communication"]["phases"]
    assert phases["gini"]["round_trips"] >= 3 and phases["gini"]["bytes_up"] > 0
    gini = summary["extra"]["gini"]
    assert [len(g) for g in gini] == [14, 13, 13]
    assert all(0.0 <= g <= 1.0 for party in gini for g in party)


def test_gate_init_opens_the_globally_best_fraction():
    from vflfs.strategies.fedsdg_fs import gate_init

    scores = [np.array([0.40, 0.10, 0.45]), np.array([0.20, 0.48])]
    top = gate_init(scores, "top_fraction", 0.4)  # 2 of 5 features: 0.10 and 0.20
    np.testing.assert_allclose(np.concatenate(top), [0.1, 0.9, 0.1, 0.9, 0.1])
    assert [len(m) for m in top] == [3, 2]
    inverse = gate_init(scores, "inverse", 0.5)
    assert inverse[0][1] == pytest.approx(1.0)  # the smallest G gets the largest mu
    assert inverse[1][1] == pytest.approx(0.10 / 0.48)
    with pytest.raises(ValueError, match="init_mode"):
        gate_init(scores, "nosuch", 0.5)


def party_with(optimizer: dict, gate_settings: dict) -> Party:
    X = np.random.default_rng(0).random((50, 8)).astype(np.float32)
    gate = {**GATE, **gate_settings}
    return small_party(X, optimizer, {"input": gate, "embedding": gate})


def test_sgd_gates_take_plain_steps_while_the_weights_keep_adam():
    adam, sgd = {"name": "adam", "lr": 0.01}, {"name": "sgd", "lr": 0.5}
    mixed = party_with(adam, {"optimizer": "sgd", "lr": 0.5})
    all_sgd, all_adam = party_with(sgd, {}), party_with(adam, {})
    rows = np.arange(16)
    grad = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    for party in (mixed, all_sgd, all_adam):  # one step from the same start
        party.forward(rows, seed=11)
        party.apply_gradient(rows, grad, seed=11)
    for gate in ("input_gate", "embedding_gate"):
        mu = getattr(mixed.model, gate).mu
        torch.testing.assert_close(mu, getattr(all_sgd.model, gate).mu)
        assert not torch.allclose(mu, getattr(all_adam.model, gate).mu)
    for a, b in zip(
        mixed.model.bottom.parameters(), all_adam.model.bottom.parameters(), strict=True
    ):
        torch.testing.assert_close(a, b)
    # the gates hold no optimiser state, and the party's state still round-trips
    saved = {k: dict(v) for k, v in mixed.state_arrays().items()}
    saved = {k: {n: np.array(a) for n, a in v.items()} for k, v in saved.items()}
    gate_ids = {0, len(list(mixed.model.parameters())) - 1}  # the first and last groups
    assert saved["optim"] and not any(int(n.split(".")[0]) in gate_ids for n in saved["optim"])
    twin = party_with(adam, {"optimizer": "sgd", "lr": 0.5})
    twin.load_state_arrays(saved, mixed.steps_taken)
    for party in (mixed, twin):
        party.forward(rows, seed=12)
        party.apply_gradient(rows, grad, seed=12)
    for a, b in zip(mixed.model.parameters(), twin.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_sgd_gates_need_a_learning_rate():
    from vflfs.strategies.settings import ConfigError, GateSettings

    with pytest.raises(ConfigError, match="strategy.gate_lr"):
        GateSettings(sigma=0.5, lambda_input=1.0, reduce="mean", gate_optimizer="sgd")
    gate = GateSettings(0.5, 1.0, "mean", gate_optimizer="sgd", gate_lr=0.2).gate(0.3)
    assert gate == {"sigma": 0.5, "lam": 0.3, "reduce": "mean", "optimizer": "sgd", "lr": 0.2}


def test_stg_gates_draw_their_noise_at_one_and_fedsdg_fs_gates_at_one_half():
    """The defaults measured in docs/selection.md and docs/selection_limits.md."""
    from vflfs.runtime.config import compose_config
    from vflfs.strategies.fedsdg_fs import FedSDGFS
    from vflfs.strategies.stg import STG

    stg = STG(compose_config(["strategy=stg"])).gates()
    fedsdg = FedSDGFS(compose_config(["strategy=fedsdg_fs"])).gates()
    assert stg["input"]["sigma"] == 1.0
    assert fedsdg["input"]["sigma"] == fedsdg["embedding"]["sigma"] == 0.5
