"""K > 1 local steps with embedding gates (FedSDG-FS): gates move between the forward pass the
server saw and the party's recomputation; the gradient must follow the open components."""

from __future__ import annotations

import pytest

import vflfs.client_app.operations as ops
from vflfs.federation import PartyError

from helpers import run_local, tiny_config

# model=fedsdg's gates move fast enough at this learning rate to change within 8 local steps.
MOVING_GATES = (
    "strategy=fedsdg_fs strategy.init=uniform model=fedsdg split.num_parties=2 "
    "training.local_steps=8 training.epochs=3 training.lr=0.05"
)


def test_fedsdg_fs_trains_with_many_local_steps(tmp_path, monkeypatch):
    changed = []
    regate = ops._regate

    def spy(party, rows, seed, grad, sent):
        out = regate(party, rows, seed, grad, sent)
        changed.append(out is not grad)
        return out

    monkeypatch.setattr(ops, "_regate", spy)
    result = run_local(tiny_config(MOVING_GATES), tmp_path / "out")
    assert result["epochs_run"] == 3
    assert any(changed), "the gates never moved: the test does not exercise the case"


def test_without_regating_the_moved_gates_break_the_step(tmp_path, monkeypatch):
    monkeypatch.setattr(ops, "_regate", lambda party, rows, seed, grad, sent: grad)
    with pytest.raises(PartyError, match="train.step.*shape mismatch"):
        run_local(tiny_config(MOVING_GATES), tmp_path / "out")
