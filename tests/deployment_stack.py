"""The deployment stack the tests share: a TLS SuperLink and two registered SuperNodes that read
their own party files, as docs/deployment.md sets them up: the SuperNodes connect through the
Fleet proxy (``deploy/fleet_proxy.sh``, section 10) where nginx is installed.

One stack serves the whole test session (``conftest.deployment``): a SuperLink runs any number
of runs one after another, so each scenario is a ``flwr run`` against it, not a new stack. A
scenario that breaks the stack (killing a SuperNode) starts its own (:func:`start_deployment`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vflfs.federation.identity import generate_key_pair

from flower_procs import REPO, FlowerStack, make_tls, nginx_installed, run_process, tool

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


def identity_keys(stack: FlowerStack) -> list[Path]:
    """The parties' identity key pairs (``<prefix>.key``/``.pub``), one prefix per party."""
    return [stack.workdir / "identity" / f"party_{i}" for i in range(PARTIES)]


def party_keys_override(stack: FlowerStack) -> str:
    """The Hydra override that makes the server check every party's identity key."""
    return f'"federation.party_keys=[{",".join(f"{k}.pub" for k in identity_keys(stack))}]"'


@contextmanager
def start_deployment(
    workdir: Path, files: dict, fleet_proxy: bool | None = None
) -> Iterator[FlowerStack]:
    """A TLS SuperLink with SuperNode authentication and one registered SuperNode per party
    file, each holding its identity key (``identity_keys``); on exit, checks that every
    process it started is gone and nothing was installed.

    With ``fleet_proxy`` (default: where nginx is installed) the SuperNodes connect through
    ``deploy/fleet_proxy.sh``; the ``flwr`` CLI (``stack.connection``) reaches the SuperLink
    directly, as the server's operator does."""
    tls = make_tls(workdir / "tls", PARTIES)
    env = {**os.environ, "VFLFS_CACHE_DIR": str(workdir / "cache")}
    stack = FlowerStack(workdir / "stack", env=env, tls=tls)
    try:
        stack.start_superlink()
        if nginx_installed() if fleet_proxy is None else fleet_proxy:
            stack.start_fleet_proxy()
        keys = [generate_key_pair(prefix)[0] for prefix in identity_keys(stack)]
        stack.start_supernodes(
            PARTIES,
            node_configs=[
                # Each party's own file, identity key, and folder for the state a run resumes from.
                {
                    "data-path": p["path"],
                    "id-column": "id",
                    "identity-key": str(key),
                    "state-dir": str(workdir / "state"),
                }
                for p, key in zip(files["parties"], keys, strict=True)
            ],
        )
        yield stack
    finally:
        stack.stop()
    assert not stack.leftovers(), stack.leftovers()
    assert not (stack.home / "runtime-envs").exists()  # nothing was installed at run time


def submit(stack, config: str, *options: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``vflfs submit`` of this repository's app with run config ``config`` on ``stack``."""
    args = [tool("vflfs"), "submit", "--poll", "1", *options, ".", stack.connection]
    return run_process([*args, "-c", config], env=stack.env, cwd=REPO, timeout=timeout)
