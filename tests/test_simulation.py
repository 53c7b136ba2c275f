"""Real Flower simulations (Ray): accuracy, equality with the in-process run, Ray actors."""

from __future__ import annotations

import numpy as np
import pytest

from vflfs.runtime.config import compose_config
from vflfs.runtime.simulation import simulate

from helpers import run_local

# 3 parties on a small MADELON-like set (20 relevant of 60 columns), 4 epochs: most of the
# run's time is Flower's and Ray's start, not training.
SMALL = (
    "split.num_parties=3 dataset.params.n_samples=1200 dataset.params.n_features=60 "
    "dataset.params.n_informative=5 dataset.params.n_redundant=5 "
    "dataset.params.n_clusters_per_class=2 training.epochs=4 training.patience=null"
)


@pytest.fixture(scope="module")
def one_actor(tmp_path_factory):
    cfg = compose_config(SMALL)
    return cfg, simulate(cfg, tmp_path_factory.mktemp("one_actor"))


@pytest.mark.heavy  # Flower's simulation engine (a SuperLink, Ray)
def test_three_party_simulation_learns(one_actor):
    _, summary = one_actor
    assert summary["test_metric"] >= 0.80
    assert len(summary["parties"]) == 3
    # auto batch: 768 training rows (fewer than 897) in 8 batches of 96
    assert (summary["samples"]["train"], summary["extra"]["batch_size"]) == (768, 96)
    assert summary["communication"]["phases"]["training"]["round_trips"] == 4 * 8 + 1
    assert summary["devices"]["parties"] == ["cpu"] * 3


@pytest.mark.heavy  # Flower's simulation engine (a SuperLink, Ray)
def test_simulation_equals_in_process_run(one_actor, tmp_path):
    cfg, summary = one_actor
    local = run_local(cfg, tmp_path)
    np.testing.assert_allclose(summary["step_losses"], local["step_losses"], rtol=1e-6)
    assert summary["communication"]["bytes_up"] == local["communication"]["bytes_up"]


@pytest.mark.extended  # a second Ray simulation of the same run
def test_two_ray_actors_give_the_same_result_as_one(one_actor, tmp_path):
    """With two actors each message may land in either process: context.state keeps one truth."""
    _, summary = one_actor
    cfg = compose_config(f"{SMALL} simulation.client_cpus=1")
    two = simulate(cfg, tmp_path)
    np.testing.assert_allclose(two["step_losses"], summary["step_losses"], rtol=1e-6)
    assert two["test_metric"] == summary["test_metric"]
