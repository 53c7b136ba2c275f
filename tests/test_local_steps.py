"""K > 1 local steps with embedding gates (FedSDG-FS): gates move between the forward pass the
server saw and the party's recomputation; each gradient must follow the components its forward
pass sent."""

from __future__ import annotations

import copy

import numpy as np
import torch

from vflfs.client_app import party_store
from vflfs.client_app.party import Party
from vflfs.strategies.local_steps import LocalSteps, reduced_warning

from helpers import run_local, small_party, tiny_config

# model=fedsdg's gates move fast enough at this learning rate to change within 8 local steps.
MOVING_GATES = (
    "strategy=fedsdg_fs strategy.init=uniform model=fedsdg split.num_parties=2 "
    "training.local_steps=8 training.epochs=3 training.lr=0.05 strategy.path.enabled=false"
)
GATE = {"sigma": 0.5, "lam": 0.1}


def moving_party() -> Party:
    """A gated party whose SGD steps (lr 1) move its embedding gates across zero."""
    X = np.random.default_rng(0).random((64, 8)).astype(np.float32)
    return small_party(X, {"name": "sgd", "lr": 1.0}, {"input": GATE, "embedding": GATE})


def test_each_gradient_follows_the_components_its_forward_pass_sent():
    """Three local steps equal the reference: each batch's gradient from the server, zero
    where nothing was sent, applied over every component (closed gates have zero slope)."""
    party = moving_party()
    reference = copy.deepcopy(party)
    batches = [np.arange(0, 16), np.arange(16, 32), np.arange(32, 48)]
    sent = [mask for _, mask in party.embed_batches(batches)]
    rng = np.random.default_rng(1)
    server = [5 * rng.normal(size=(16, 4)).astype(np.float32) for _ in batches]
    party.apply_pending([g[:, mask] for g, mask in zip(server, sent, strict=True)])

    moved = []
    reference.embed_batches(batches)
    for rows, seed, g, mask in zip(batches, reference.pending_seeds, server, sent, strict=True):
        moved.append(not np.array_equal(reference.forward(rows, seed)[1], mask))
        full = np.where(mask, g, 0).astype(np.float32)
        reference.apply_gradient(rows, full, seed, np.ones(4, dtype=bool))
    assert any(moved), "the gates never moved: the test does not exercise the case"
    for a, b in zip(party.model.parameters(), reference.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_fedsdg_fs_trains_with_many_local_steps(tmp_path):
    result = run_local(tiny_config(MOVING_GATES), tmp_path / "out")
    assert result["epochs_run"] == 3
    assert np.isfinite(result["step_losses"]).all()


def test_the_sent_masks_travel_with_the_party_state(tmp_path, monkeypatch):
    """A party rebuilt from ``context.state`` each message trains exactly as a cached one."""
    cached = run_local(tiny_config(MOVING_GATES), tmp_path / "cached")
    # a cache that keeps nothing: every message restores from context.state
    monkeypatch.setattr(party_store, "CACHE", party_store.PartyCache(size=0))
    restored = run_local(tiny_config(MOVING_GATES), tmp_path / "restored")
    assert restored["step_losses"] == cached["step_losses"]


def test_one_round_trip_per_epoch_learns_as_well_as_one_step(tmp_path):
    """K = steps per epoch (6 on the tiny problem) ends within a few points of K = 1 over the
    same epochs, far from chance (measured: 0.733 against 0.808)."""
    common = "training.epochs=12 training.patience=null"
    exact = run_local(tiny_config(common), tmp_path / "k1")
    epoch = run_local(tiny_config(f"{common} training.local_steps=6"), tmp_path / "k6")
    assert epoch["communication"]["phases"]["training"]["round_trips"] == 12 + 1
    assert epoch["test_metric"] > epoch["baseline_test_metric"] + 0.1
    assert epoch["test_metric"] >= exact["test_metric"] - 0.08


def test_the_guard_halves_k_when_the_training_loss_blows_up():
    guard = LocalSteps(requested=100, steps_per_epoch=13)
    assert guard.k == 13
    assert not guard.after_epoch(0, 0.69)
    assert not guard.after_epoch(1, 0.40)
    assert not guard.after_epoch(2, 0.75)  # above the first epoch, under 2 x the lowest
    assert guard.after_epoch(3, 1.50)  # above both: blown up
    assert guard.k == 6
    assert guard.after_epoch(4, float("nan"))
    assert guard.k == 3
    assert reduced_warning(guard.record()) is not None
    assert guard.record()["reduced"][0] == {"epoch": 3, "from": 13, "to": 6, "train_loss": 1.5}
    exact = LocalSteps(requested=1, steps_per_epoch=13)
    assert not exact.after_epoch(0, 0.69) and not exact.after_epoch(1, 9.0)
    assert exact.k == 1 and reduced_warning(exact.record()) is None


def test_a_blown_up_run_lowers_k_and_says_so(tmp_path):
    """At a learning rate far too large for one round-trip per epoch the run goes on with a
    smaller K, and results.json records it with a warning."""
    cfg = tiny_config(
        "training.epochs=4 training.patience=null training.local_steps=100 training.lr=1.0"
    )
    result = run_local(cfg, tmp_path / "out")
    record = result["extra"]["local_steps"]
    assert record["requested"] == 100 and record["steps_per_epoch"] == 6
    assert record["reduced"] and record["used"] < 6
    assert record["reduced"][0]["from"] == 6
    assert any("training.local_steps=100 did not keep" in w for w in result["warnings"])
    # The rounds follow the lowered K: more than one round-trip per epoch after it.
    assert result["communication"]["phases"]["training"]["round_trips"] > 4 + 1


def test_an_auto_batch_trains_a_small_table_in_eight_steps_an_epoch(tmp_path):
    """200 rows leave 128 for training: batches of 16, 8 optimiser steps an epoch (one at the
    fixed batch of 128), recorded in results.json."""
    small = "dataset.params.n_samples=200 dataset.params.n_features=20 training.epochs=2"
    auto = run_local(tiny_config(f"{small} training.batch_size=auto"), tmp_path / "auto")
    fixed = run_local(tiny_config(f"{small} training.batch_size=128"), tmp_path / "fixed")
    assert (auto["extra"]["batch_size"], len(auto["step_losses"])) == (16, 16)
    assert (fixed["extra"]["batch_size"], len(fixed["step_losses"])) == (128, 2)
