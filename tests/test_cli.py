"""``vflfs-run`` (the Hydra command line) as a real process: failures and ``-m`` sweeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

from vflfs.runtime.cli import job_output_dir
from vflfs.runtime.config import CONF_DIR, register_schemas
from vflfs.runtime.results import is_complete

from flower_procs import ProcessTag, run_process, tool

TINY = ["dataset.params.n_samples=600", "dataset.params.n_features=40", "device=cpu"]


@pytest.fixture
def tag():
    """Marks the processes a test starts; fails the test if any is left running."""
    tag = ProcessTag()
    yield tag
    left = tag.wait_gone(20.0)
    killed = tag.kill_all() if left else []
    assert not left, f"processes left behind: {killed}"


def vflfs_run(tag: ProcessTag, cwd: Path, *args: str):
    result = run_process([tool("vflfs-run"), *args], env=tag.env(), cwd=cwd, timeout=600)
    return result, result.stdout + result.stderr


def test_unknown_dataset_fails_and_lists_the_datasets(tag, tmp_path):
    """With ``VFLFS_DEBUG=1`` the error keeps its traceback (without, one line: below)."""
    out = tmp_path / "out"
    args = ("dataset.name=nosuch", "training.epochs=1", f"output_dir={out}")
    result = run_process(
        [tool("vflfs-run"), *args, f"hydra.run.dir={tmp_path}/h"],
        env=tag.env(VFLFS_DEBUG="1"), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    text = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" in text
    assert "unknown dataset 'nosuch'" in text
    assert "synthetic_madelon" in text and "madelon" in text
    assert not (out / "results.json").exists()
    assert "unknown dataset 'nosuch'" in (out / "error.txt").read_text()


def test_multirun_writes_one_complete_folder_per_job_and_resumes(tag, tmp_path):
    """``-m``: the first sweep in parallel (``hydra/launcher=joblib``, each job in a loky
    worker process), the sweep's callbacks numbering the jobs and each job writing its own
    complete folder; the same sweep extended, with the default launcher, skips finished jobs."""
    sweep = tmp_path / "sweep"
    common = (*TINY, "training.epochs=1", f"hydra.sweep.dir={sweep}")
    parallel = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    result, text = vflfs_run(tag, tmp_path, "-m", "seed=0,1", *common, *parallel)
    assert result.returncode == 0, text
    assert "Joblib.Parallel(n_jobs=2,backend=loky" in text
    assert "sweep: job 1/2" in text and "sweep: job 2/2" in text
    assert "sweep: 2 jobs done" in text
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    # Job folders are named by their overrides, e.g. "dataset.params.n_features=40,...,seed=0,...".
    assert len(jobs) == 2 and all(f"seed={i}," in job.name for i, job in enumerate(jobs))
    for seed, job in enumerate(jobs):
        assert is_complete(job), job
        assert (job / "history.csv").exists() and (job / "config.yaml").exists()
        assert f"sweep: job {seed + 1}/2 done" in (job / "cli.log").read_text()
        results = json.loads((job / "results.json").read_text())
        assert results["seed"] == seed
        assert results["epochs_run"] == 1
    # Nothing landed in the working directory (Hydra's default ./outputs, ./multirun).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep"]

    # The same sweep, extended: finished jobs are skipped, only the new one runs.
    stamps = {job.name: (job / "results.json").stat().st_mtime_ns for job in jobs}
    result, text = vflfs_run(tag, tmp_path, "-m", "seed=0,1,2", *common)
    assert result.returncode == 0, text
    assert text.count("already holds a completed run") == 2
    assert {j: (sweep / j / "results.json").stat().st_mtime_ns for j in stamps} == stamps
    (new,) = [p for p in sweep.iterdir() if p.is_dir() and p.name not in stamps]
    assert "seed=2," in new.name and is_complete(new)


@pytest.mark.extended  # a Ray simulation; tests/test_simulation.py compares it with local
def test_local_engine_trains_like_the_simulation_engine(tag, tmp_path):
    sweep = tmp_path / "sweep"
    result, text = vflfs_run(
        tag, tmp_path, "-m", "engine=simulation,local", *TINY, "training.epochs=2",
        f"hydra.sweep.dir={sweep}",
    )  # fmt: skip
    assert result.returncode == 0, text
    runs = {
        job.name.split("engine=")[1].split(",")[0]: json.loads((job / "results.json").read_text())
        for job in sweep.iterdir()
        if job.is_dir()
    }
    assert sorted(runs) == ["local", "simulation"]
    sim, local = runs["simulation"], runs["local"]
    assert len(local["step_losses"]) >= 5
    assert local["step_losses"] == pytest.approx(sim["step_losses"], rel=1e-6)
    assert local["test_metric"] == pytest.approx(sim["test_metric"])
    for key in ("bytes_up", "bytes_down"):
        assert local["communication"][key] == sim["communication"][key]


def test_config_error_is_one_line_naming_the_key(tag, tmp_path):
    out = tmp_path / "out"
    args = (*TINY, "training.epochs=abc", f"output_dir={out}", f"hydra.run.dir={tmp_path}/h")
    result, text = vflfs_run(tag, tmp_path, *args)
    assert result.returncode == 1
    assert "Traceback" not in text
    (line,) = [x for x in text.splitlines() if "error:" in x]
    assert "training.epochs must be an integer, got 'abc'" in line and "VFLFS_DEBUG=1" in line
    assert "training.epochs" in (out / "error.txt").read_text()


def test_the_old_secure_key_is_refused_naming_the_new_one(tag, tmp_path):
    result, text = vflfs_run(tag, tmp_path, "strategy.secure=paillier", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 1 and "Traceback" not in text
    assert "use secure=<none|plaintext|paillier>" in text


def test_output_folder_of_another_configuration_is_refused(tag, tmp_path):
    out = tmp_path / "out"
    common = (*TINY, "training.epochs=1", f"output_dir={out}", f"hydra.run.dir={tmp_path}/h")
    result, text = vflfs_run(tag, tmp_path, *common)
    assert result.returncode == 0, text
    before = (out / "results.json").read_text()

    result, text = vflfs_run(tag, tmp_path, *common, "seed=1")
    assert result.returncode == 1
    assert "already holds a completed run with a different configuration (seed" in text
    assert "rerun=true" in text and "Traceback" not in text
    assert (out / "results.json").read_text() == before and not (out / "error.txt").exists()

    # rerun is strictly true or false, checked before the folder is read or written
    result, text = vflfs_run(tag, tmp_path, *common, "seed=1", "rerun=no")
    assert result.returncode == 1 and "rerun must be true or false, got 'no'" in text
    assert (out / "results.json").read_text() == before and not (out / "error.txt").exists()

    # A rerun that fails leaves no results behind that could be taken for its own.
    result, text = vflfs_run(
        tag, tmp_path, *common, "rerun=true", "split=sizes", "split.sizes=[10,10]"
    )
    assert result.returncode == 1
    assert not (out / "results.json").exists() and not (out / "history.csv").exists()
    assert "add up to 20" in (out / "error.txt").read_text()


@pytest.mark.parametrize(("mode", "expected"), [("RUN", "out"), ("MULTIRUN", "out/3")])
def test_output_dir_gets_one_folder_per_sweep_job(tmp_path, mode, expected):
    """With ``output_dir`` set, jobs of a sweep must not overwrite each other's results."""
    register_schemas()  # the structured configs conf/ names (vflfs-run registers them first)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[f"output_dir={tmp_path}/out", f"hydra.mode={mode}", "hydra.job.num=3"],
            return_hydra_config=True,
        )
    HydraConfig.instance().set_config(cfg)
    try:
        assert job_output_dir(cfg) == tmp_path / expected
    finally:
        HydraConfig.instance().cfg = None
        GlobalHydra.instance().clear()
