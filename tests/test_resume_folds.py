"""A cross-validation run resumes too: stopped in a fold, it takes the folds it completed from
``folds_done.json`` and goes on with that fold from its last checkpoint (or from its start),
ending as the run never stopped."""

from __future__ import annotations

import json

import pytest
from test_resume import EVERY, STG, history, stopped_run

from vflfs.runtime import results
from vflfs.runtime.cli import run_job
from vflfs.runtime.output_folder import OutputFolderError
from vflfs.runtime.results import CHECKPOINT, FOLDS_DONE, PARTY_STATE, RESULTS
from vflfs.runtime.simulation import RunFailed
from vflfs.strategies.checkpoint import FAIL_AFTER

from helpers import tiny_config

CV = f"cv.folds=3 strategy=vfl training.epochs=4 training.patience=null {EVERY}"


def same_folds(resumed: dict, reference: dict) -> None:
    """Every fold's scores, selection, steps and traffic are the same (wall times aside)."""
    assert resumed["cv"]["test_metric"] == reference["cv"]["test_metric"]
    for a, b in zip(resumed["folds"], reference["folds"], strict=True):
        for key in ("test_metric", "val_metric", "best_epoch", "epochs_run", "selection"):
            assert a[key] == b[key], key
        assert a["step_losses"] == b["step_losses"]
        assert a["communication"]["phases"]["training"] == {
            **b["communication"]["phases"]["training"],
            "wall_s": a["communication"]["phases"]["training"]["wall_s"],
        }


@pytest.fixture(scope="module")
def cv_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("cv")
    return run_job(tiny_config(CV), out), out


@pytest.mark.parametrize("at", ["0:1", "1:2"])
def test_cross_validation_resumes_in_a_fold_from_its_checkpoint(
    tmp_path, monkeypatch, cv_reference, at
):
    reference, ref_dir = cv_reference
    out = tmp_path / "run"
    stopped_run(tiny_config(CV), out, at, monkeypatch)
    fold = int(at.split(":")[0])
    if fold:  # the folds before the stop, recorded
        assert len(json.loads((out / FOLDS_DONE).read_text())["folds"]) == fold
    else:
        assert not (out / FOLDS_DONE).exists()
    resumed = run_job(tiny_config(f"{CV} resume=true"), out)
    same_folds(resumed, reference)
    assert history(out) == history(ref_dir)
    assert [r["after_epoch"] for r in resumed["folds"][fold]["extra"]["resumed"]] == [
        int(at.split(":")[1])
    ]
    assert [r["after_fold"] for r in resumed["cv"].get("resumed", [])] == [0] * (fold > 0)
    assert not any((out / name).exists() for name in (CHECKPOINT, FOLDS_DONE, PARTY_STATE))


def test_a_fold_without_a_checkpoint_starts_afresh_after_the_folds_done(
    tmp_path, monkeypatch, cv_reference
):
    """Stopped between two folds (fold 1 left no checkpoint yet): fold 0 comes from the
    record, fold 1 trains from its start, and the run ends as the one never stopped."""
    reference, ref_dir = cv_reference
    out = tmp_path / "run"
    stopped_run(tiny_config(CV), out, "1:0", monkeypatch)
    (out / CHECKPOINT).unlink()
    resumed = run_job(tiny_config(f"{CV} resume=true"), out)
    same_folds(resumed, reference)
    assert history(out) == history(ref_dir)
    assert "resumed" not in resumed["folds"][1]["extra"]


def test_a_run_stopped_after_its_last_fold_writes_its_results_from_the_record(
    tmp_path, monkeypatch, cv_reference
):
    """Every fold recorded, the results not yet written: the resumed run trains nothing."""
    reference, ref_dir = cv_reference
    out = tmp_path / "run"

    def stopped(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(results, "write_results", stopped)
    with pytest.raises(KeyboardInterrupt):
        run_job(tiny_config(CV), out)
    monkeypatch.undo()
    assert len(json.loads((out / FOLDS_DONE).read_text())["folds"]) == 3
    resumed = run_job(tiny_config(f"{CV} resume=true"), out)
    same_folds(resumed, reference)
    assert history(out) == history(ref_dir)
    assert [r["after_fold"] for r in resumed["cv"]["resumed"]] == [2]
    assert resumed["config"]["resume"] and not reference["config"]["resume"]


def test_folds_done_are_never_replaced_silently(tmp_path, monkeypatch):
    out = tmp_path / "run"
    stopped_run(tiny_config(CV), out, "1:0", monkeypatch)
    (out / CHECKPOINT).unlink()
    with pytest.raises(OutputFolderError, match=r"1 folds done; fix: resume=true.*rerun=true"):
        run_job(tiny_config(CV), out)
    with pytest.raises(OutputFolderError, match=r"another configuration.*training.lr"):
        run_job(tiny_config(f"{CV} training.lr=0.02 resume=true"), out)
    fresh = run_job(tiny_config(f"{CV} rerun=true"), out)
    assert "resumed" not in fresh["cv"] and (out / RESULTS).exists()
    assert not (out / FOLDS_DONE).exists()


FSTAT = "strategy=fstat_filter strategy.fstat.key_bits=512 training.epochs=3"
LESS = "strategy=less_vfl strategy.select.refit_patience=1"


# The filter's scoring and count choice in each fold, stopped in fold 1's choice; stg's path
# and refits (test_resume's short path), stopped in fold 1's path.
@pytest.mark.parametrize(
    ("options", "at", "checkpoint"),
    [(FSTAT, "1:4", True), (FSTAT, "1:4", False), (STG, "1:5", True)],
)
def test_selecting_strategies_resume_in_a_fold(tmp_path, monkeypatch, options, at, checkpoint):
    """Resumed from the fold's checkpoint, or, without one, the fold run again from its
    start: the run ends as the one never stopped."""
    options = f"cv.folds=3 {options} {EVERY}"
    reference = run_job(tiny_config(options), tmp_path / "ref")
    out = tmp_path / "run"
    stopped_run(tiny_config(options), out, at, monkeypatch)
    if not checkpoint:
        (out / CHECKPOINT).unlink()
    resumed = run_job(tiny_config(f"{options} resume=true"), out)
    same_folds(resumed, reference)
    for a, b in zip(resumed["folds"], reference["folds"], strict=True):
        for key in ("count_choice", "path_choice"):
            assert a["extra"].get(key) == b["extra"].get(key)
        assert a.get("path") == b.get("path")
    assert history(out) == history(tmp_path / "ref")


@pytest.mark.extended  # two runs in Flower's simulation engine (Ray)
def test_a_less_vfl_cross_validation_resumes_in_the_simulation_engine(tmp_path, monkeypatch):
    """The parties, Ray actors, save their state under the run's party-state folder; stopped
    in fold 1's count choice, the run resumes to the local engine's run."""
    options = f"cv.folds=3 {LESS} training.epochs=4 {EVERY}"
    reference = run_job(tiny_config(options), tmp_path / "ref")
    at = next(
        c["epochs"][0] + 1 for c in reference["folds"][1]["extra"]["count_choice"]["tried"][1:]
    )
    out = tmp_path / "run"
    monkeypatch.setenv(FAIL_AFTER, f"1:{at}")
    with pytest.raises(RunFailed, match="StoppedAfterCheckpoint"):
        run_job(tiny_config(f"{options} engine=simulation"), out)
    monkeypatch.delenv(FAIL_AFTER)
    assert len(json.loads((out / FOLDS_DONE).read_text())["folds"]) == 1
    resumed = run_job(tiny_config(f"{options} engine=simulation resume=true"), out)
    same_folds(resumed, reference)
    for a, b in zip(resumed["folds"], reference["folds"], strict=True):
        assert a["extra"]["count_choice"] == b["extra"]["count_choice"]
    assert history(out) == history(tmp_path / "ref")
