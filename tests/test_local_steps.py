"""K > 1 local steps with embedding gates (FedSDG-FS): gates move between the forward pass the
server saw and the party's recomputation; each gradient must follow the components its forward
pass sent."""

from __future__ import annotations

import copy

import numpy as np
import torch

from vflfs.client_app import state
from vflfs.client_app.party import Party, PartySpec
from vflfs.datasets import PartyData

from helpers import run_local, tiny_config

# model=fedsdg's gates move fast enough at this learning rate to change within 8 local steps.
MOVING_GATES = (
    "strategy=fedsdg_fs strategy.init=uniform model=fedsdg split.num_parties=2 "
    "training.local_steps=8 training.epochs=3 training.lr=0.05 strategy.path.enabled=false"
)
GATE = {"sigma": 0.5, "lam": 0.1}


def moving_party() -> Party:
    """A gated party whose SGD steps (lr 1) move its embedding gates across zero."""
    X = np.random.default_rng(0).random((64, 8)).astype(np.float32)
    spec = PartySpec(
        index=0,
        seed=3,
        device="cpu",
        model={"hidden": [6], "embedding_size": 4, "activation": "relu"},
        optimizer={"name": "sgd", "lr": 1.0},
        gates={"input": GATE, "embedding": GATE},
    )
    return Party(spec, PartyData(X=X, columns=np.arange(8), spurious=np.zeros(8, bool)))


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


class _NoCache(dict):
    """A party cache that keeps nothing: every message restores from ``context.state``."""

    def __setitem__(self, key, value) -> None:
        pass


def test_the_sent_masks_travel_with_the_party_state(tmp_path, monkeypatch):
    """A party rebuilt from ``context.state`` each message trains exactly as a cached one."""
    cached = run_local(tiny_config(MOVING_GATES), tmp_path / "cached")
    monkeypatch.setattr(state, "_CACHE", _NoCache())
    restored = run_local(tiny_config(MOVING_GATES), tmp_path / "restored")
    assert restored["step_losses"] == cached["step_losses"]
