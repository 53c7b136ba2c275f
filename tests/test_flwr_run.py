"""``flwr run .`` from the repository root, as the README shows it.

A run on a real simulation SuperLink (own free port, own FLWR_HOME, no installs; its teardown
checks that no process it started is left) writes the output folder and equals ``vflfs-run``.
Runs that fail in the ServerApp, and a run config the CLI refuses, go to the session's shared
deployment stack (``conftest.deployment``): they need no training, and a deployment SuperLink
starts their ServerApp without a simulation runtime.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from vflfs.runtime.cli import run_job
from vflfs.runtime.config import compose_config

from deployment_stack import SPLIT
from flower_procs import REPO, FlowerStack

# Tiny and CPU-only, so that both entry points compute the same thing on any machine.
TINY = "training.epochs=2 dataset.params.n_samples=600 dataset.params.n_features=40 device=cpu"
FEDERATION = "num-supernodes=3"  # = split.num_parties (default 3)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    stack = FlowerStack(tmp_path_factory.mktemp("flwr-stack"))
    try:
        stack.start_superlink(simulation=True)
        yield stack
    finally:
        killed = stack.stop()
    assert not killed, f"processes had to be killed: {killed}"
    assert not stack.leftovers(), stack.leftovers()
    # Nothing was installed at run time (runtime-envs/<run_id> would hold a per-run venv).
    assert not (stack.home / "runtime-envs").exists()


def flwr_run(stack: FlowerStack, overrides: str, output_dir: str, federation: str | None = None):
    """The documented command, from the repository root: ``flwr run . <conn> --stream -c
    "hydra-overrides='...' output-dir='...'" [--federation-config "num-supernodes=3"]``."""
    run = stack.run_app(
        ".",
        run_config=f"hydra-overrides='{overrides}' output-dir='{output_dir}'",
        federation_config=federation,
        cwd=REPO,
    )
    assert run.run_id is not None, run.output
    return run


@pytest.fixture(scope="module")
def completed(stack, tmp_path_factory):
    out = tmp_path_factory.mktemp("flwr-run") / "out"
    run = flwr_run(stack, TINY, str(out), FEDERATION)
    return run, out


@pytest.mark.heavy  # Flower's simulation engine (a SuperLink, Ray)
def test_flwr_run_writes_the_output_folder(stack, completed):
    run, out = completed
    assert run.returncode == 0, run.output
    status = stack.run_status(run.run_id)
    assert status["status"] == "finished:completed", status
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "history.csv", "results.json"]

    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "completed"
    # The Hydra overrides reached the ServerApp.
    assert results["config"]["training"]["epochs"] == 2
    assert results["config"]["dataset"]["params"]["n_features"] == 40
    assert results["epochs_run"] == 2
    assert len(results["parties"]) == 3
    assert sum(results["samples"].values()) == 600
    with (out / "history.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2
    assert "n_features: 40" in (out / "config.yaml").read_text()
    # vflfs's log lines are streamed, including where the results went.
    assert str(out) in run.output


@pytest.mark.heavy  # Flower's simulation engine (a SuperLink, Ray)
def test_flwr_run_and_vflfs_run_give_the_same_result(completed, tmp_path):
    """``vflfs-run``'s job (``run_job``, engine=local), in this process: the same training."""
    run, flwr_out = completed
    flwr_results = json.loads((flwr_out / "results.json").read_text())
    cli_results = run_job(compose_config(TINY), tmp_path / "cli")

    assert len(cli_results["step_losses"]) == len(flwr_results["step_losses"]) > 0
    np.testing.assert_allclose(cli_results["step_losses"], flwr_results["step_losses"], rtol=1e-5)
    assert cli_results["test_metric"] == pytest.approx(flwr_results["test_metric"], rel=1e-6)
    assert cli_results["best_epoch"] == flwr_results["best_epoch"]
    for key in ("bytes_up", "bytes_down"):
        assert cli_results["communication"][key] == flwr_results["communication"][key]


@pytest.mark.heavy  # the deployment stack (a SuperLink, SuperNodes)
def test_failed_run_is_reported_failed_with_error_txt(deployment, tmp_path):
    stack = deployment
    out = tmp_path / "out"
    # A configuration error, raised while composing the config, before any check of vflfs's.
    run = flwr_run(stack, f"{SPLIT} training.epochs=1 dataset=nosuch", str(out))
    # `flwr run --stream` exits 0 even when the ServerApp fails: the run's status says it.
    status = stack.wait_run_finished(run.run_id)
    assert status["status"] == "finished:failed", status
    assert "Could not find 'dataset/nosuch'" in status["status-details"]
    assert "synthetic_madelon" in status["status-details"]  # it lists the available ones
    assert "dataset/nosuch" in run.output  # and the stream shows the error
    # The named output folder gets error.txt, and no results.
    assert not (out / "results.json").exists()
    error = (out / "error.txt").read_text()
    assert "Could not find 'dataset/nosuch'" in error and "synthetic_madelon" in error


@pytest.mark.heavy  # the deployment stack (a SuperLink, SuperNodes)
def test_relative_output_dir_is_rejected(deployment):
    stack = deployment
    # The ServerApp runs in the SuperLink's working directory, not in flwr run's.
    run = flwr_run(stack, f"{SPLIT} training.epochs=1", "relative/out")
    status = stack.wait_run_finished(run.run_id)
    assert status["status"] == "finished:failed", status
    assert "output-dir must be an absolute path" in status["status-details"]
    assert not (stack.workdir / "relative").exists() and not (REPO / "relative").exists()


@pytest.mark.heavy  # the deployment stack (a SuperLink, SuperNodes)
def test_unknown_run_config_key_is_refused(deployment):
    result = deployment.flwr("run", str(REPO), deployment.connection, "-c", "no-such-key=1")
    assert result.returncode != 0
    assert "Invalid run configuration" in result.stdout + result.stderr


def test_data_paths_must_be_absolute_under_flwr_run(monkeypatch):
    """The ServerApp runs in the SuperLink's working directory and environment."""
    from vflfs.runtime.config import ConfigError, compose_config
    from vflfs.server_app.app import check_server_paths

    monkeypatch.delenv("VFLFS_DATA_DIR", raising=False)
    for overrides, key in [
        ("dataset=phishing dataset.data_dir=data", "dataset.data_dir"),
        ("dataset=csv dataset.params.path=mine.csv", "dataset.params.path"),
    ]:
        with pytest.raises(ConfigError, match=rf"{key} must be an absolute path.*fix"):
            check_server_paths(compose_config(overrides))
    check_server_paths(compose_config("dataset=csv dataset.data_dir=/d dataset.params.path=m.csv"))
    monkeypatch.setenv("VFLFS_DATA_DIR", "/d")  # a file relative to the data folder is fine
    check_server_paths(compose_config("dataset=csv dataset.params.path=mine.csv"))
