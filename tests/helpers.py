"""Helpers shared by the tests: small run configurations and an in-process runner."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from vflfs.client_app.app import app as client_app
from vflfs.client_app.party import Party, PartySpec
from vflfs.datasets import PartyData
from vflfs.datasets.paths import default_data_dir
from vflfs.federation import LocalGrid
from vflfs.runtime.config import compose_config
from vflfs.runtime.split_files import main as split_main
from vflfs.server_app.run import run_experiment

ROOT = Path(__file__).resolve().parents[1]
# The benchmark files: $VFLFS_DATA_DIR, else the folder `vflfs data fetch all` writes to.
DATA_DIR = Path(os.environ.get("VFLFS_DATA_DIR") or default_data_dir())

# A small MADELON-like problem that trains in a second or two.
TINY = (
    "dataset.params.n_samples=600 dataset.params.n_features=40 dataset.params.n_informative=4 "
    "dataset.params.n_redundant=4 dataset.params.n_clusters_per_class=2 training.batch_size=64"
)


def tiny_config(extra: str = ""):
    """The tiny problem's config with extra Hydra overrides."""
    return compose_config(f"{TINY} {extra}")


def run_local(cfg, out_dir, num_parties: int | None = None, observers=None) -> dict:
    """Run ``cfg`` over a LocalGrid (the real ClientApp, in process)."""
    grid = LocalGrid(client_app, num_parties or int(cfg.split.num_parties))
    return run_experiment(grid, cfg, out_dir, observers=observers)


def save_npz(path: Path, **arrays: np.ndarray) -> Path:
    """Write ``arrays`` to ``path`` (a user ``.npz`` file)."""
    np.savez(path, **arrays)
    return path


def small_xy(n: int = 20, d: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A small seeded feature matrix and alternating binary labels."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), np.arange(n) % 2


def split_files(out: Path, overrides: str, *options: str) -> dict:
    """``vflfs split`` into ``out``; its manifest (``split.json``)."""
    assert split_main([str(out), *options, *overrides.split()]) == 0
    return json.loads((out / "split.json").read_text())


def run_on_files(
    manifest: dict, out, extra: str = "", node_config: dict | None = None, observers=None
) -> dict:
    """Run the manifest's server overrides over a LocalGrid whose nodes name their own files."""
    cfg = compose_config(" ".join(manifest["server_overrides"]) + " " + extra)
    grid = LocalGrid(client_app, len(manifest["parties"]))
    for context in grid._state.values():
        pid = int(context.node_config["partition-id"])
        context.node_config.update(
            {
                "data-path": manifest["parties"][pid]["path"],
                "id-column": "id",
                **(node_config or {}),
            }
        )
    return run_experiment(grid, cfg, out, observers=observers)


def small_party(
    data: PartyData | np.ndarray,
    optimizer: dict,
    gates: dict | None = None,
    seed: int = 3,
    train_rows: np.ndarray | None = None,
) -> Party:
    """A party with a small MLP (6 hidden units, 4 embedding components) on ``data``: a party's
    data view, or a feature matrix whose columns are all the party's own."""
    if isinstance(data, np.ndarray):
        d = data.shape[1]
        data = PartyData(X=data, columns=np.arange(d), spurious=np.zeros(d, bool))
    model = {"hidden": [6], "embedding_size": 4, "activation": "relu"}
    spec = PartySpec(
        index=0, seed=seed, device="cpu", model=model, optimizer=optimizer, gates=gates or {}
    )
    return Party(spec, data, train_rows)
