"""The regularisation path in real runs: points, choice, refits, the dense refit."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from vflfs.strategies import STRATEGIES, VFL
from vflfs.strategies.path import PathPoint, PathSettings, PathStrategy, choose

from helpers import run_local, tiny_config

QUICK = (
    "training.epochs=6 strategy.path.points=5 strategy.path.max_points=5 "
    "strategy.path.steps_per_point=12"
)


def test_vfl_is_plain_vfl_and_the_path_is_no_strategy_of_its_own():
    assert STRATEGIES["vfl"] is VFL
    assert PathStrategy not in STRATEGIES.values()


def test_the_choice_tolerance_in_standard_errors_is_followed(tmp_path):
    """``strategy.path.standard_errors``: the choice's slack is that many binomial standard
    errors of the best path score on the validation rows (here half of one)."""
    cfg = tiny_config(f"strategy=stg {QUICK} strategy.path.standard_errors=0.5")
    summary = run_local(cfg, tmp_path)
    best = max(p["val_metric"] for p in summary["path"])
    n = summary["samples"]["val"]
    one = math.sqrt(max(best * (1 - best), 1 / n) / n)
    assert summary["extra"]["path_choice"]["tolerance"] == pytest.approx(0.5 * one)
    with pytest.raises(ValueError, match="standard_errors must be >= 0"):
        PathSettings.from_cfg({"standard_errors": -1.0})


@pytest.mark.parametrize("strategy", ["stg", "group_lasso"])
def test_path_records_points_chooses_within_tolerance_and_refits(tmp_path, strategy):
    summary = run_local(tiny_config(f"strategy={strategy} {QUICK}"), tmp_path)
    path = summary["path"]
    assert path[0]["penalty"] == 0.0 and len(path) >= 2
    assert all(b["penalty"] > a["penalty"] for a, b in zip(path, path[1:], strict=False))
    assert all({"val_metric", "per_party", "components_kept", "mb"} <= set(p) for p in path)
    choice = summary["extra"]["path_choice"]
    points = [
        PathPoint(
            **{k: p[k] for k in ("point", "penalty", "epoch", "val_metric", "val_loss")},
            selected=p["selected"],
            components=p["components"],
            mb=p["mb"],
        )
        for p in path
    ]
    one_se = choose(points, choice["tolerance"], None)
    refits = choice["refits"]
    assert one_se.point == 0 or one_se.point in [r["point"] for r in refits if not r["top_k"]]
    # the dense point is refit once (path.refit_dense), the plain model on every feature,
    # after the candidates and the probes
    dense_refits = [i for i, r in enumerate(refits) if r["point"] == 0 and not r["top_k"]]
    every = sum(len(p["columns"]) for p in summary["parties"])
    assert len(dense_refits) == 1 and refits[dense_refits[0]]["kept"] == every
    assert all(r["top_k"] for r in refits[dense_refits[0] + 1 :])
    for r in refits:  # what each refit read, per party (None: every feature)
        assert (r["features"] is None) == (r["kept"] == every)
        assert r["features"] is None or sum(map(len, r["features"])) == r["kept"]
    candidates = [r["kept"] for r in refits[: dense_refits[0]] if not r["top_k"]]
    assert candidates == sorted(candidates, reverse=True)  # the probes follow them
    # the dense model competes with its warm-up score too
    dense = {"point": 0, "kept": path[0]["kept"], "val_metric": path[0]["val_metric"]}
    scored = [{**dense, "good": choice["dense_good"]}, *refits]
    top = max(r["val_metric"] for r in scored)
    good = [r for r in scored if r["good"]]
    assert good and all(r["val_metric"] >= top - choice["tolerance"] for r in good)
    assert choice["point"] == min(good, key=lambda r: r["kept"])["point"]
    assert ("fallback" in choice) == (choice["point"] == 0)
    chosen = path[choice["point"]]
    best = max(p["val_metric"] for p in path)
    slack = PathSettings().candidate_slack * choice["tolerance"]
    assert "fallback" in choice or chosen["val_metric"] >= best - slack
    stages = (tmp_path / "history.csv").read_text().splitlines()
    column = stages[0].split(",").index("stage")
    order = [line.split(",")[column] for line in stages[1:]]
    assert order[0] == "warmup" and order[-1] == "refit" and "path" in order
    assert summary["best_epoch"] > chosen["epoch"]  # the reported model is the refit's
    if choice["top_k"]:  # a probe of the ranking won
        assert summary["selection"]["selected_features"] == choice["top_k"]
    elif "fallback" not in choice:
        assert summary["selection"]["selected_features"] == chosen["kept"]
        assert [p["selected"] for p in summary["selection"]["per_party"]] == chosen["per_party"]


@pytest.mark.parametrize(
    ("strategy", "loss_unit"),
    [("stg", True), ("group_lasso", False), ("group_lasso strategy.optimizer=sgd", True)],
)
def test_the_penalty_unit_is_the_dense_loss_unless_adam_steps_the_prox(
    tmp_path, strategy, loss_unit
):
    """A gate's penalty (and a prox after plain SGD steps) starts at ``path.start`` times the
    dense model's training loss; a prox after Adam's steps, whose size does not follow the
    loss, at ``path.start`` itself."""
    overrides = "training.epochs=4 strategy.path.points=1 strategy.path.max_points=1"
    summary = run_local(tiny_config(f"strategy={strategy} {overrides}"), tmp_path)
    dense, first = summary["path"][:2]
    with (tmp_path / "history.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if int(r["epoch"]) == dense["epoch"])
    loss = float(row["train_loss"])
    start = PathSettings().start
    assert loss < 0.9  # a unit of one and a unit of the loss differ
    assert first["penalty"] == pytest.approx(start * loss if loss_unit else start, rel=1e-6)


def test_each_name_is_its_own_strategy():
    from vflfs.strategies import STRATEGIES, VFL
    from vflfs.strategies.group_lasso import GroupLasso
    from vflfs.strategies.stg import STG

    assert STRATEGIES["vfl"] is VFL
    assert STRATEGIES["stg"] is STG and STRATEGIES["group_lasso"] is GroupLasso


@pytest.mark.parametrize("budget", ["max_features=3", "max_fraction=0.08"])
def test_a_budget_caps_the_refit(tmp_path, budget):
    """A count, or a share of the 40 features (0.08: 3 of them)."""
    cfg = tiny_config(
        f"strategy=stg {QUICK} strategy.path.points=2 strategy.path.max_points=2 "
        f"strategy.path.{budget}"
    )
    summary = run_local(cfg, tmp_path)
    assert 1 <= summary["selection"]["selected_features"] <= 3
    point = summary["extra"]["path_choice"]["point"]
    chosen = next(p for p in summary["path"] if p["point"] == point)
    assert chosen["kept"] <= 3 or all(p["kept"] > 3 for p in summary["path"])


def test_a_denser_probe_refits_twice_the_winning_candidates_features(tmp_path):
    """On the tiny set the one candidate keeps 15 of 40 features: the probe refits the top
    30 of the ranking."""
    cfg = tiny_config(
        f"strategy=stg {QUICK} strategy.path.refit_candidates=1 strategy.path.refit_probes=0 "
        "strategy.path.denser_probes=1"
    )
    refits = run_local(cfg, tmp_path)["extra"]["path_choice"]["refits"]
    probes = [r for r in refits if r["top_k"]]
    assert len(probes) == 1  # the one allowed, after the candidate
    assert probes[0]["top_k"] // 2 in [r["kept"] for r in refits if not r["top_k"]]
    assert probes[0]["top_k"] % 2 == 0 and probes[0]["kept"] == probes[0]["top_k"]


def test_a_refit_of_the_same_features_scores_the_same_wherever_it_comes(tmp_path):
    """The one-standard-error point refit alone, and refit after a denser candidate: the
    same features train from the same initialisation on the same batches, so the two refits'
    validation scores and losses are the same (on the CPU, whose kernels are deterministic)."""
    only = (
        f"strategy=stg {QUICK} strategy.path.refit_probes=0 strategy.path.denser_probes=0 "
        "strategy.path.floor_probes=0 strategy.path.add_back=0 strategy.path.refit_dense=false "
        "device=cpu"
    )
    alone, second = (
        {
            r["point"]: r
            for r in run_local(tiny_config(f"{only} strategy.path.refit_candidates={n}"), out)[
                "extra"
            ]["path_choice"]["refits"]
        }
        for n, out in ((1, tmp_path / "alone"), (3, tmp_path / "second"))
    )
    (point,) = alone
    assert len(second) > 1 and second[point]["epochs"][0] > alone[point]["epochs"][0]
    for key in ("kept", "val_metric", "val_loss"):
        assert second[point][key] == alone[point][key]
    assert second[point]["epochs"][1] - second[point]["epochs"][0] == (
        alone[point]["epochs"][1] - alone[point]["epochs"][0]
    )


def test_a_refit_waits_twice_the_training_patience_past_its_best(tmp_path):
    """On a few columns a refit's validation score can stall and then climb again: each refit
    stops no sooner than 2 x training.patience epochs after its best (or at its epoch cap)."""
    cfg = f"strategy=stg {QUICK} training.patience=2 training.patience_steps=1"
    summary = run_local(tiny_config(cfg), tmp_path)
    lines = (tmp_path / "history.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    val = {int(r[0]): float(r[header.index("val_metric")]) for r in rows}
    refits = summary["extra"]["path_choice"]["refits"]
    assert refits
    for refit in refits:
        first, stop = refit["epochs"]
        best = max(range(first, stop), key=lambda e: (val[e], -e))  # the earliest best
        assert stop - first == 3 * 6 or stop - 1 - best >= 2 * 2, refit


@pytest.mark.parametrize("strategy", ["stg", "group_lasso"])
def test_the_dense_refit_is_the_all_features_run(tmp_path, strategy):
    """The dense point's refit is strategy=vfl's model trained as strategy=vfl trains it
    (every feature and component, the same initialisation, batches and learning rate): its
    epochs score as the vfl run's do, whatever the warm-up and the path did before it."""
    vfl = run_local(tiny_config("strategy=vfl training.epochs=6"), tmp_path / "vfl")
    run = run_local(tiny_config(f"strategy={strategy} {QUICK}"), tmp_path / "path")
    dense = run["extra"]["path_choice"]["refits"][-1]
    every = sum(len(p["columns"]) for p in run["parties"])
    assert (dense["point"], dense["top_k"], dense["kept"]) == (0, None, every)

    def rows(folder, first: int) -> list[tuple[float, float, float]]:
        with open(folder / "history.csv", newline="") as f:
            history = list(csv.DictReader(f))[first:]
        return [
            (float(r["train_loss"]), float(r["val_loss"]), float(r["val_metric"])) for r in history
        ]

    expected = rows(tmp_path / "vfl", 0)
    refit = rows(tmp_path / "path", dense["epochs"][0])[: len(expected)]
    assert len(refit) == len(expected) == vfl["epochs_run"]
    assert np.allclose(refit, expected, rtol=1e-5)


def test_fedsdg_fs_refits_the_top_of_its_gini_ranking_after_the_dense_refit(tmp_path):
    """After the dense refit and the winner's add-backs, fedsdg_fs refits the top 2k of its
    secure Gini ranking (k the winner's count then): the features of that refit are the
    ranking's, lowest impurity first."""
    from vflfs.strategies.fedsdg_fs import gini_ranking

    cfg = tiny_config(
        "strategy=fedsdg_fs strategy.gini.key_bits=512 strategy.path.refit_max_epochs=12"
    )
    summary = run_local(cfg, tmp_path)
    refits = summary["extra"]["path_choice"]["refits"]
    every = sum(len(p["columns"]) for p in summary["parties"])
    dense = next(i for i, r in enumerate(refits) if r["kept"] == every and not r["top_k"])
    prior = [i for i, r in enumerate(refits) if r.get("ranking") == "prior"]
    assert len(prior) == 1 and prior[0] > dense  # one probe (path.prior_probes)
    assert all(r.get("ranking") == "screen" for r in refits[dense + 1 : prior[0]])  # add-backs
    probe = refits[prior[0]]
    assert probe["kept"] == probe["top_k"] and probe["top_k"] // 2 in [
        r["kept"] for r in refits[: prior[0]]
    ]
    top = gini_ranking(summary["extra"]["gini"]).top(probe["top_k"])
    assert probe["features"] == [list(f) for f in top]
    assert all(r["features"] != probe["features"] for r in refits[: prior[0]])


def test_a_path_point_that_beats_every_refit_is_reported_as_its_own_model(tmp_path):
    """Refits cut to one epoch score below the path's points: the points that beat them all
    by more than the tolerance join the choice as their own (penalised) models, and the
    sparsest good one is reported as it was at its point's last epoch."""
    cfg = tiny_config(f"strategy=stg {QUICK} strategy.path.refit_max_epochs=1")
    summary = run_local(cfg, tmp_path)
    choice, path = summary["extra"]["path_choice"], summary["path"]
    refits = [r for r in choice["refits"] if r.get("ranking") != "penalised"]
    own = [r for r in choice["refits"] if r.get("ranking") == "penalised"]
    top = max([path[0]["val_metric"], *(r["val_metric"] for r in refits)])
    assert own and all(r["val_metric"] > top + choice["tolerance"] for r in own)
    assert [r["point"] for r in own] == [
        p["point"] for p in path[1:] if p["val_metric"] > top + choice["tolerance"]
    ]
    chosen = min((r for r in own if r["good"]), key=lambda r: r["kept"])
    point = path[chosen["point"]]
    assert choice["point"] == chosen["point"] and choice["top_k"] is None
    assert chosen["epochs"] == [point["epoch"], point["epoch"] + 1]
    assert summary["best_epoch"] == point["epoch"]
    with open(tmp_path / "history.csv") as f:
        row = next(r for r in csv.DictReader(f) if int(r["epoch"]) == point["epoch"])
    assert row["stage"] == "path"
    assert summary["test_metric"] == pytest.approx(float(row["test_metric"]))
    assert summary["selection"]["selected_features"] == point["kept"]
    assert [p["selected"] for p in summary["selection"]["per_party"]] == point["per_party"]
    assert len(summary["importance"]) == len(summary["parties"])


def test_a_winning_path_model_that_keeps_every_feature_says_so(tmp_path):
    """Two points that close nothing and refits cut to one epoch: the best model on
    validation is a path point's own model on every feature, and the run warns that the
    selection removed nothing."""
    cfg = tiny_config(
        "strategy=stg training.epochs=6 strategy.path.points=2 strategy.path.max_points=2 "
        "strategy.path.steps_per_point=12 strategy.path.refit_max_epochs=1"
    )
    summary = run_local(cfg, tmp_path)
    choice = summary["extra"]["path_choice"]
    every = sum(len(p["columns"]) for p in summary["parties"])
    assert all(p["kept"] == every for p in summary["path"])
    assert choice["fallback"] == "every_feature" and choice["point"] > 0
    assert summary["selection"]["selected_features"] == every
    assert summary["warnings"] == [
        f"selection removed nothing: the model that scored best on validation, path point "
        f"{choice['point']}'s own (penalised) model, keeps every feature"
    ]
