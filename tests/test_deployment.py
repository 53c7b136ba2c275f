"""Flower's deployment engine on loopback, over TLS with SuperNode authentication.

One SuperLink (HTTPS, ``--enable-supernode-auth``, the test CA of ``deploy/make_certs.sh``) and
two registered SuperNodes, each naming its own party file in its node config, serve the module.
Tests: a short training on per-party files equals the in-process run of the original dataset,
for all-features VFL and for FedSDG-FS with its secure Gini phase; a SuperNode with an
unregistered key is refused; a SuperNode killed mid-run ends the run with
an error naming its party and no result files (this one runs last: it kills a node). The
teardown checks that every process the module started is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from vflfs.runtime.config import compose_config

from flower_procs import REPO, FlowerStack, make_tls, run_process, tool
from helpers import run_local

TINY = (
    "dataset.params.n_samples=300 dataset.params.n_features=24 dataset.params.n_informative=4 "
    "dataset.params.n_redundant=4 dataset.params.n_clusters_per_class=2 split.num_parties=2 "
    "split=random training.batch_size=64 training.local_steps=100 training.epochs=2 device=cpu"
)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """Per-party files and a labels file, written by the documented ``vflfs-split`` command."""
    out = tmp_path_factory.mktemp("party-files")
    result = run_process([tool("vflfs-split"), str(out), "--format", "csv", *TINY.split()])
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((out / "split.json").read_text())


@pytest.fixture(scope="module")
def stack(tmp_path_factory, files):
    work = tmp_path_factory.mktemp("deploy")
    tls = make_tls(work / "tls", 2)
    env = {**os.environ, "VFLFS_CACHE_DIR": str(work / "cache")}
    stack = FlowerStack(work / "stack", env=env, tls=tls)
    try:
        stack.start_superlink()
        stack.start_supernodes(
            2, node_configs=[{"data-path": p["path"], "id-column": "id"} for p in files["parties"]]
        )
        yield stack
    finally:
        stack.stop()
    assert not stack.leftovers(), stack.leftovers()
    assert not (stack.home / "runtime-envs").exists()  # nothing was installed at run time


def run_config(files: dict, out, extra: str = "") -> str:
    overrides = " ".join(files["server_overrides"]) + (f" {extra}" if extra else "")
    return f"hydra-overrides='{overrides}' output-dir='{out}'"


def test_tls_run_on_party_files_equals_the_in_process_run(stack, files, tmp_path):
    out = tmp_path / "out"
    run = stack.run_app(".", run_config=run_config(files, out), cwd=REPO)
    assert run.run_id is not None, run.output
    status = stack.run_status(run.run_id)
    assert status["status"] == "finished:completed", (status, run.output)
    results = json.loads((out / "results.json").read_text())
    assert results["alignment"]["aligned"] == 300 == sum(results["samples"].values())
    assert [p["n_features"] for p in results["parties"]] == [12, 12]
    assert results["epochs_run"] == 2 and results["devices"]["parties"] == ["cpu", "cpu"]
    assert "alignment: 300 samples in common" in run.output

    # The same config on the original dataset, in process: the same training, step by step.
    local = run_local(compose_config(TINY), tmp_path / "local")
    assert len(results["step_losses"]) == len(local["step_losses"]) > 0
    np.testing.assert_allclose(results["step_losses"], local["step_losses"], rtol=1e-6)
    assert results["test_metric"] == pytest.approx(local["test_metric"], rel=1e-6)

    # Everything went over TLS: the CLI trusts the test CA, plain HTTP gets no answer.
    assert "root-certificates" in (stack.home / "config.toml").read_text()
    assert "insecure" not in (stack.home / "config.toml").read_text()
    plain = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        plain.open(f"http://{stack.superlink.address}/health", timeout=5)


def test_fedsdg_fs_with_secure_gini_runs_in_deployment_as_in_process(stack, files, tmp_path):
    """Gates, K > 1 local steps and the Paillier phase (its fork pool in Flower's ServerApp and
    ClientApp processes) over the deployment: the same run as in process."""
    options = "strategy=fedsdg_fs strategy.gini.key_bits=512 training.local_steps=2"
    out = tmp_path / "out"
    run = stack.run_app(".", run_config=run_config(files, out, options), cwd=REPO)
    status = stack.run_status(run.run_id)
    assert status["status"] == "finished:completed", (status, run.output)
    results = json.loads((out / "results.json").read_text())
    local = run_local(compose_config(f"{TINY} {options}"), tmp_path / "local")
    assert results["step_losses"] == local["step_losses"]
    assert results["test_metric"] == local["test_metric"]
    assert results["communication"]["phases"]["gini"]["round_trips"] >= 3


def test_a_supernode_with_an_unregistered_key_is_refused(stack, tmp_path):
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "384", "-N", "", "-f", str(key)])
    # Not registered with `flwr supernode register`, unlike the parties' keys.
    stranger = stack.start_supernode(1, 2, auth_key=key, wait=False)
    assert stranger.proc.wait(120) != 0
    assert "Failed to activate SuperNode" in stranger.log()


def test_a_killed_supernode_ends_the_run_naming_its_party(stack, files, tmp_path):
    out = tmp_path / "out"
    extra = "training.epochs=40 training.local_steps=1 federation.timeout=60"
    victim = stack.supernodes[1]
    steps_before = victim.log().count("Receiving: train.step")
    run = stack.run_app(".", run_config=run_config(files, out, extra), stream=False, cwd=REPO)
    assert run.run_id is not None, run.output
    deadline = time.monotonic() + 300
    while victim.log().count("Receiving: train.step") < steps_before + 2:  # training is on
        assert time.monotonic() < deadline, victim.log()
        time.sleep(1)
    os.killpg(victim.proc.pid, signal.SIGKILL)
    status = stack.wait_run_finished(run.run_id, timeout=240)
    assert status["status"] == "finished:failed", status
    assert "party 1" in status["status-details"], status
    error = (out / "error.txt").read_text()
    assert "party 1 failed in 'train.step'" in error, error
    # No result files, not even half-written ones (results are written atomically, last).
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "error.txt"]
