"""Flower's deployment engine on loopback, over TLS with SuperNode authentication.

The session's shared stack (``conftest.deployment``: one HTTPS SuperLink with
``--enable-supernode-auth`` and the test CA of ``deploy/make_certs.sh``, two registered
SuperNodes each naming its own party file in its node config, connected through the Fleet
proxy of ``deploy/fleet_proxy.sh`` where nginx is installed) serves these tests. A short
training on per-party files, stopped after its first checkpoint and resumed, equals the
in-process run of the original dataset (``-m heavy``); a SuperNode with an unregistered key is
refused. Longer (``-m extended``): FedSDG-FS with its secure Gini
phase equals the in-process run; a SuperNode killed mid-run ends the run with an error naming
its party and no result files (on a stack of its own, since it kills a node); a SuperNode
paused past its heartbeats, its request reported lost by Flower, is sent the request again
once it is back, and the run completes as the in-process one. Each
stack's teardown checks that every process it started is gone.
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
from vflfs.runtime.results import CHECKPOINT, RESULTS

from deployment_stack import TINY, party_keys_override, run_config, start_deployment
from flower_procs import REPO
from helpers import run_local


@pytest.fixture
def own_deployment(tmp_path_factory, party_files):
    """A stack for one test only, for a scenario that breaks it."""
    with start_deployment(tmp_path_factory.mktemp("own-deploy"), party_files) as stack:
        yield stack


@pytest.mark.heavy  # two runs over the deployment, a fresh process per message (~3 min)
def test_tls_run_on_party_files_stopped_and_resumed_equals_the_in_process_run(
    deployment, party_files, tmp_path
):
    """Every party proving its identity key, a run on the party files is stopped (``flwr
    stop``) after its first checkpoint and resumed by a new ``flwr run``: the parties'
    SuperNodes name their state folders (node config state-dir), and the run ends as the
    in-process run of the original dataset that was never stopped. Between the two runs the
    parties restart their SuperNodes, as docs/deployment.md asks."""
    # a round-trip per epoch, and a checkpoint at each epoch boundary
    extra = f"training.epochs=3 checkpoint_every_s=0 {party_keys_override(deployment)}"
    out = tmp_path / "out"
    config = run_config(party_files, out, extra)
    _stop_after_first_checkpoint(deployment, config, out)
    # docs/deployment.md: the parties restart their SuperNodes before a resume (a SuperNode
    # kept from the stopped run can leave the new run's first message unanswered)
    deployment.restart_supernodes()

    config = run_config(party_files, out, f"{extra} resume=true")
    resumed = deployment.run_app(".", run_config=config, cwd=REPO)
    output = resumed.output
    assert deployment.run_status(resumed.run_id)["status"] == "finished:completed", output
    assert "identity: all 2 parties proved their partition" in output
    assert "alignment: 300 samples in common" in output
    assert not (out / "error.txt").exists()
    results = json.loads((out / RESULTS).read_text())
    assert results["status"] == "completed"
    assert len(results["extra"]["resumed"]) == 1 and results["epochs_run"] == 3
    assert results["alignment"]["aligned"] == 300 == sum(results["samples"].values())
    assert [p["n_features"] for p in results["parties"]] == [12, 12]
    assert results["devices"]["parties"] == ["cpu", "cpu"]

    # The same training as the in-process run of the original dataset, step by step.
    local = run_local(compose_config(f"{TINY} training.epochs=3"), tmp_path / "local")
    assert len(results["step_losses"]) == len(local["step_losses"]) > 0
    np.testing.assert_allclose(results["step_losses"], local["step_losses"], rtol=1e-6)
    assert results["test_metric"] == pytest.approx(local["test_metric"], rel=1e-6)
    training = results["communication"]["phases"]["training"]
    assert training == {
        **local["communication"]["phases"]["training"],
        "wall_s": training["wall_s"],
    }

    # Where the stack has the Fleet proxy, the parties' replies went through it.
    if deployment.fleet_proxy is not None:
        log = (deployment.workdir / "fleet-proxy" / "access.log").read_text()
        assert '"POST /v1/fleet/push-messages HTTP/1.1" 200' in log

    _assert_tls_only(deployment)


def _stop_after_first_checkpoint(deployment, config: str, out) -> None:
    """Start the run and stop it (``flwr stop``) once its first checkpoint is on disk."""
    run = deployment.run_app(".", run_config=config, stream=False, cwd=REPO)
    assert run.run_id is not None, run.output
    deadline = time.monotonic() + 300
    while not (out / CHECKPOINT).exists():
        assert time.monotonic() < deadline, deployment.run_status(run.run_id)
        time.sleep(0.2)
    deployment.flwr("stop", str(run.run_id), deployment.connection)
    status = deployment.wait_run_finished(run.run_id, timeout=120)
    assert status["status"] == "finished:stopped", status
    time.sleep(5)  # the stopped ServerApp's process ends
    assert not (out / RESULTS).exists()


def _assert_tls_only(deployment) -> None:
    """Everything went over TLS: the CLI trusts the test CA, plain HTTP gets no answer."""
    assert "root-certificates" in (deployment.home / "config.toml").read_text()
    assert "insecure" not in (deployment.home / "config.toml").read_text()
    plain = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        plain.open(f"http://{deployment.superlink.address}/health", timeout=5)


@pytest.mark.extended
def test_fedsdg_fs_with_secure_gini_runs_in_deployment_as_in_process(
    deployment, party_files, tmp_path
):
    """Gates, K > 1 local steps and the Paillier phase (its fork pool in Flower's ServerApp and
    ClientApp processes) over the deployment: the same run as in process."""
    options = (
        "strategy=fedsdg_fs strategy.gini.key_bits=512 training.local_steps=2 "
        "strategy.path.enabled=false"  # two epochs at fixed lambdas: seconds per round-trip here
    )
    out = tmp_path / "out"
    run = deployment.run_app(".", run_config=run_config(party_files, out, options), cwd=REPO)
    status = deployment.run_status(run.run_id)
    assert status["status"] == "finished:completed", (status, run.output)
    results = json.loads((out / "results.json").read_text())
    local = run_local(compose_config(f"{TINY} {options}"), tmp_path / "local")
    assert results["step_losses"] == local["step_losses"]
    assert results["test_metric"] == local["test_metric"]
    assert results["communication"]["phases"]["gini"]["round_trips"] >= 3


@pytest.mark.heavy  # the deployment stack (a SuperLink, SuperNodes)
def test_a_supernode_with_an_unregistered_key_is_refused(deployment, tmp_path):
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "384", "-N", "", "-f", str(key)])
    # Not registered with `flwr supernode register`, unlike the parties' keys.
    stranger = deployment.start_supernode(1, 2, auth_key=key, wait=False)
    assert stranger.proc.wait(120) != 0
    assert "Failed to activate SuperNode" in stranger.log()


def run_until_training(stack, victim, config: str):
    """Submit the app and return its run once ``victim`` has received two training steps."""
    steps_before = victim.log().count("Receiving: train.step")
    run = stack.run_app(".", run_config=config, stream=False, cwd=REPO)
    assert run.run_id is not None, run.output
    deadline = time.monotonic() + 300
    while victim.log().count("Receiving: train.step") < steps_before + 2:  # training is on
        assert time.monotonic() < deadline, victim.log()
        time.sleep(0.5)
    return run


@pytest.mark.extended  # the fault benchmark (benchmarks/faults.py) kills nodes at random
def test_a_killed_supernode_ends_the_run_naming_its_party(own_deployment, party_files, tmp_path):
    stack = own_deployment  # killing a node would break the shared stack
    out = tmp_path / "out"
    extra = (
        "training.epochs=40 training.local_steps=1 federation.timeout=60 "
        "federation.outage_timeout=20"
    )
    victim = stack.supernodes[1]
    run = run_until_training(stack, victim, run_config(party_files, out, extra))
    os.killpg(victim.proc.pid, signal.SIGKILL)
    status = stack.wait_run_finished(run.run_id, timeout=240)
    assert status["status"] == "finished:failed", status
    assert "party 1" in status["status-details"], status
    error = (out / "error.txt").read_text()
    assert "party 1 failed in 'train.step'" in error, error
    # No result files, not even half-written ones (results are written atomically, last).
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "error.txt"]


@pytest.mark.extended
def test_a_supernode_paused_past_its_heartbeats_is_sent_its_request_again(
    own_deployment, party_files, tmp_path
):
    """SIGSTOP for longer than Flower's heartbeat patience (2 x 30 s): the SuperLink reports the
    pending step lost (Node Unavailable); after SIGCONT the server sends it again and the run
    completes with the in-process run's step losses."""
    stack = own_deployment
    out = tmp_path / "out"
    extra = "training.epochs=4 training.patience=null"
    victim = stack.supernodes[1]
    run = run_until_training(stack, victim, run_config(party_files, out, extra))
    os.killpg(victim.proc.pid, signal.SIGSTOP)
    time.sleep(75)
    os.killpg(victim.proc.pid, signal.SIGCONT)
    status = stack.wait_run_finished(run.run_id, timeout=400)
    assert status["status"] == "finished:completed", (status, (out / "error.txt").read_text())
    results = json.loads((out / "results.json").read_text())
    local = run_local(compose_config(f"{TINY} {extra}"), tmp_path / "local")
    np.testing.assert_allclose(results["step_losses"], local["step_losses"], rtol=1e-6)
    training = results["communication"]["phases"]["training"]
    assert training["messages_down"] > local["communication"]["phases"]["training"]["messages_down"]
