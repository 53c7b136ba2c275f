"""The deployment stack the tests share: a TLS SuperLink and two registered SuperNodes that read
their own party files, as docs/deployment.md sets them up.

One stack serves the whole test session (``conftest.deployment``): a SuperLink runs any number
of runs one after another, so each scenario is a ``flwr run`` against it, not a new stack. A
scenario that breaks the stack (killing a SuperNode) starts its own (:func:`start_deployment`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flower_procs import FlowerStack, make_tls, run_process, tool

PARTIES = 2
# The data the SuperNodes hold: a small MADELON-like set cut into two party files. A run's own
# settings (epochs, steps, strategy) come with its Hydra overrides.
SPLIT = (
    "dataset.params.n_samples=300 dataset.params.n_features=24 dataset.params.n_informative=4 "
    f"dataset.params.n_redundant=4 dataset.params.n_clusters_per_class=2 "
    f"split.num_parties={PARTIES} split=random"
)
# The training every deployment scenario starts from: one round-trip per epoch.
TRAINING = "training.batch_size=64 training.local_steps=100 training.epochs=2 device=cpu"
TINY = f"{SPLIT} {TRAINING}"


def write_party_files(out: Path) -> dict:
    """Per-party files and a labels file, written by the documented ``vflfs-split`` command;
    returns its ``split.json`` (``parties``, ``server_overrides``)."""
    result = run_process([tool("vflfs-split"), str(out), "--format", "csv", *TINY.split()])
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((out / "split.json").read_text())


def run_config(files: dict, out: Path, extra: str = "") -> str:
    """``flwr run``'s run config for a run on the party files: the server's overrides (labels
    file, ``dataset=party_files``), ``extra`` and the output folder."""
    overrides = " ".join(files["server_overrides"]) + (f" {extra}" if extra else "")
    return f"hydra-overrides='{overrides}' output-dir='{out}'"


@contextmanager
def start_deployment(workdir: Path, files: dict) -> Iterator[FlowerStack]:
    """A TLS SuperLink with SuperNode authentication and one registered SuperNode per party
    file; on exit, checks that every process it started is gone and nothing was installed."""
    tls = make_tls(workdir / "tls", PARTIES)
    env = {**os.environ, "VFLFS_CACHE_DIR": str(workdir / "cache")}
    stack = FlowerStack(workdir / "stack", env=env, tls=tls)
    try:
        stack.start_superlink()
        stack.start_supernodes(
            PARTIES,
            node_configs=[
                # Each party's own file, and its own folder for the state a run resumes from.
                {"data-path": p["path"], "id-column": "id", "state-dir": str(workdir / "state")}
                for p in files["parties"]
            ],
        )
        yield stack
    finally:
        stack.stop()
    assert not stack.leftovers(), stack.leftovers()
    assert not (stack.home / "runtime-envs").exists()  # nothing was installed at run time
