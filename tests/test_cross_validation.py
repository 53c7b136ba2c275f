"""k-fold cross-validation over one federation: folds recorded, disjoint, aggregated."""

from __future__ import annotations

import csv
import json
import logging

import numpy as np
import pytest

from vflfs.runtime.cli import outcome
from vflfs.server_app.cross_validation import aggregate_folds

from helpers import run_local, tiny_config


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def cv_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cv")
    log, lines = logging.getLogger("vflfs"), Lines()
    level = log.level
    log.addHandler(lines)
    log.setLevel(logging.INFO)
    try:
        summary = run_local(tiny_config("cv.folds=3 training.epochs=2"), out)
    finally:
        log.removeHandler(lines)
        log.setLevel(level)
    summary["log"] = lines.lines
    return out, summary


def test_epoch_lines_name_their_fold_and_the_summary_gives_mean_and_std(cv_run):
    _, summary = cv_run
    epochs = [line.split("  loss")[0] for line in summary["log"] if "  loss" in line]
    expected = [f"fold {f}/3 epoch   {e}" for f in (1, 2, 3) for e in (0, 1)]
    assert epochs == expected
    test = summary["cv"]["test_metric"]
    best = ", ".join(str(f["best_epoch"]) for f in summary["folds"])
    assert outcome(summary).startswith(
        f"test accuracy {test['mean']:.4f} ± {test['std']:.4f} over 3 folds (best epochs {best})"
    )
    selection = summary["selection"]  # vfl keeps all: precision is the relevant columns' share
    total, share = selection["total_features"], selection["precision"]
    kept = f"{total} of {total} features (precision {share:.2f}, recall 1.00)"
    assert f"); {kept} on average; " in outcome(summary)
    one = summary["folds"][0]  # a run without folds closes on its own numbers
    assert outcome(one).startswith(
        f"test accuracy {one['test_metric']:.4f} (best epoch {one['best_epoch']}); {kept}; "
    )


def test_folds_are_disjoint_and_cover_the_data(cv_run):
    out, _ = cv_run
    folds = json.loads((out / "folds.json").read_text())
    assert len(folds) == 3
    tests = [set(f["test"]) for f in folds]
    assert set().union(*tests) == set(range(600))
    assert sum(len(t) for t in tests) == 600
    for fold in folds:
        parts = [set(fold[k]) for k in ("train", "val", "test")]
        assert sum(len(p) for p in parts) == 600 and len(set().union(*parts)) == 600


def test_results_hold_mean_and_std_over_folds(cv_run):
    out, summary = cv_run
    on_disk = json.loads((out / "results.json").read_text())
    values = [f["test_metric"] for f in on_disk["folds"]]
    assert on_disk["cv"]["test_metric"]["values"] == values
    assert on_disk["test_metric"] == pytest.approx(np.mean(values))
    assert on_disk["test_metric_std"] == pytest.approx(np.std(values, ddof=1))
    assert len(set(values)) > 1  # different folds, different test rows
    rows = list(csv.DictReader((out / "history.csv").open()))
    assert [r["fold"] for r in rows] == ["0", "0", "1", "1", "2", "2"]


def test_wall_times_are_per_fold_and_the_run_total_covers_them(cv_run):
    _, summary = cv_run
    folds = [f["wall_time_s"] for f in summary["folds"]]
    total = summary["wall_time_s"]["total"]
    # Each fold's total is its own time, not the time since the run started.
    assert sum(f["total"] for f in folds) <= total + 1e-6
    assert all(f["total"] >= f["training"] for f in folds)
    assert summary["wall_time_s"]["training"] == pytest.approx(sum(f["training"] for f in folds))


def test_folds_are_seeded(cv_run, tmp_path):
    out, _ = cv_run
    again = run_local(tiny_config("cv.folds=3 training.epochs=2"), tmp_path / "again")
    assert json.loads((out / "folds.json").read_text()) == json.loads(
        (tmp_path / "again" / "folds.json").read_text()
    )
    assert again["cv"]["test_metric"]["values"] == cv_run[1]["cv"]["test_metric"]["values"]
    other = run_local(tiny_config("cv.folds=3 cv.seed=7 training.epochs=1"), tmp_path / "other")
    assert other["folds"][0]["samples"] == again["folds"][0]["samples"]
    assert (
        json.loads((tmp_path / "other" / "folds.json").read_text())[0]["test"]
        != json.loads((out / "folds.json").read_text())[0]["test"]
    )


def test_the_top_level_selection_and_baseline_are_the_folds_means(cv_run):
    _, summary = cv_run
    folds = summary["folds"]
    selection = summary["selection"]
    kept = [f["selection"]["selected_features"] for f in folds]
    assert selection["per_fold"] == kept
    assert selection["selected_features"] == pytest.approx(np.mean(kept))
    assert selection["ratio"] == pytest.approx(np.mean([f["selection"]["ratio"] for f in folds]))
    for m, party in enumerate(selection["per_party"]):
        counts = [f["selection"]["per_party"][m]["selected"] for f in folds]
        assert party["selected"] == pytest.approx(np.mean(counts))
    baselines = [f["baseline_test_metric"] for f in folds]
    assert summary["baseline_test_metric"] == pytest.approx(np.mean(baselines))
    assert summary["best_epoch"] == [f["best_epoch"] for f in folds]
    assert summary["epochs_run"] == [f["epochs_run"] for f in folds] == [2, 2, 2]


def test_a_folds_own_entries_stay_in_folds(cv_run):
    _, summary = cv_run
    for key in ("extra", "importance", "communication", "samples", "step_losses"):
        assert key not in summary and all(key in f for f in summary["folds"]), key
    first = summary["folds"][0]["parties"]
    assert [p["columns"] for p in summary["parties"]] == [p["columns"] for p in first]
    assert not any("selected" in p for p in summary["parties"])


def fold(
    test_metric: float, warnings: list[str], baseline: float = 0.5, kept: tuple = (3, 1)
) -> dict:
    """A fold's summary as ``summarize`` writes it, with the keys the aggregate reads
    (``kept``: each party's selected features, of 4)."""
    per_party = [{"party": m, "selected": k, "of": 4} for m, k in enumerate(kept)]
    return {
        "task": "classification",
        "metric": "accuracy",
        "test_metric": test_metric,
        "val_metric": test_metric,
        "baseline_test_metric": baseline,
        "warnings": warnings,
        "best_epoch": 3,
        "epochs_run": 5,
        "samples": {"train": 60, "val": 20, "test": 20},
        "selection": {
            "per_party": per_party,
            "selected_features": sum(kept),
            "total_features": 8,
            "ratio": sum(kept) / 8,
            "recall": 1.0,
        },
        "communication": {"mb": 1.0},
        "parties": [{"index": 0, "columns": [0, 1, 2, 3], "n_features": 4, "selected": [0]}],
    }


def test_the_top_level_selection_is_every_folds_mean_not_the_first_folds():
    folds = [fold(0.9, [], kept=(3, 1)), fold(0.9, [], kept=(1, 0)), fold(0.9, [], kept=(2, 2))]
    selection = aggregate_folds(folds)["selection"]
    assert selection["per_fold"] == [4, 1, 4]
    assert selection["selected_features"] == pytest.approx(3.0)
    assert selection["ratio"] == pytest.approx(3.0 / 8)
    assert [p["selected"] for p in selection["per_party"]] == pytest.approx([2.0, 1.0])
    assert [p["of"] for p in selection["per_party"]] == [4, 4]
    assert "; 3 of 8 features on average; " in outcome(aggregate_folds(folds))
    folds[2] = fold(0.9, [], kept=(2, 1))  # 8 features over 3 folds
    assert "; 2.7 of 8 features on average; " in outcome(aggregate_folds(folds))


def test_every_folds_warning_reaches_the_top_level_named_by_its_fold():
    folds = [fold(0.9, []), fold(0.5, ["learned nothing: fold 2's"]), fold(0.85, ["a", "b"])]
    summary = aggregate_folds(folds)
    assert summary["warnings"] == ["fold 2: learned nothing: fold 2's", "fold 3: a", "fold 3: b"]
    assert summary["selection"]["recall"] == 1.0 and summary["selection"]["per_fold"] == [4] * 3


def test_folds_that_learned_nothing_together_warn_first():
    # Mean 0.55 on 60 test rows at a majority of 0.5: within one standard error (0.065).
    folds = [fold(0.5, ["learned nothing: fold 1's"]), fold(0.6, []), fold(0.55, [])]
    warnings = aggregate_folds(folds)["warnings"]
    assert warnings[0].startswith("learned nothing: mean test accuracy 0.5500 over 3 folds")
    assert "one standard error on 60 test rows" in warnings[0]
    assert warnings[1:] == ["fold 1: learned nothing: fold 1's"]
    assert not aggregate_folds([fold(0.7, []), fold(0.6, []), fold(0.65, [])])["warnings"]


def test_regression_folds_whose_mean_r2_is_not_above_zero_warn():
    folds = [fold(0.1, []), fold(-0.3, ["learned nothing: R^2"])]
    for f in folds:
        f["task"], f["baseline_test_metric"] = "regression", 0.0
    warnings = aggregate_folds(folds)["warnings"]
    assert warnings == [
        "learned nothing: mean test R^2 -0.1000 over 2 folds is no better than predicting the mean",
        "fold 2: learned nothing: R^2",
    ]
