"""The regularisation path: dense warm-up, growing penalty, validation choice, refit."""

from __future__ import annotations

import csv
import math
from itertools import pairwise

import numpy as np
import pytest

from vflfs.strategies import STRATEGIES, VFL
from vflfs.strategies.path import PathPoint, PathSettings, PathStrategy, choose
from vflfs.strategies.path_choice import candidates, choose_refit, denser_probe, next_probe
from vflfs.strategies.path_progress import Ranking
from vflfs.strategies.stall import stalled

from helpers import run_local, tiny_config

QUICK = (
    "training.epochs=6 strategy.path.points=5 strategy.path.max_points=5 "
    "strategy.path.steps_per_point=12"
)


def point(k: int, val: float, kept: list[int], penalty: float | None = None) -> PathPoint:
    return PathPoint(
        point=k,
        penalty=float(k) if penalty is None else penalty,
        epoch=k,
        val_metric=val,
        val_loss=0.0,
        selected=[list(range(n)) for n in kept],
        components=[[0] for _ in kept],
        mb=0.0,
    )


def test_vfl_is_plain_vfl_and_the_path_is_no_strategy_of_its_own():
    assert STRATEGIES["vfl"] is VFL
    assert PathStrategy not in STRATEGIES.values()


def test_choice_is_the_sparsest_point_within_the_tolerance():
    points = [point(0, 0.80, [10, 10]), point(1, 0.84, [6, 5]), point(2, 0.82, [2, 1])]
    assert choose(points, 0.03, None).point == 2  # 0.82 >= 0.84 - 0.03, and sparsest
    assert choose(points, 0.01, None).point == 1  # 0.82 < 0.84 - 0.01
    assert choose(points, 0.01, 4).point == 2  # the budget leaves only point 2
    # never a point worse than the dense one by more than the tolerance:
    assert choose([point(0, 0.9, [5]), point(1, 0.7, [1])], 0.05, None).point == 0


def test_candidates_are_the_choice_and_sparser_points_near_the_best():
    points = [
        point(0, 0.80, [10, 10]),
        point(1, 0.86, [6, 5]),
        point(2, 0.85, [3, 2]),
        point(3, 0.84, [2, 1]),
        point(4, 0.83, [1, 1]),
        point(5, 0.60, [1, 0]),
    ]
    settings = PathSettings(refit_candidates=3, candidate_slack=3.0)
    chosen = choose(points, 0.01, None)
    assert chosen.point == 2
    # the 1-SE point, the best point, then the sparsest within 3 x 0.01 of 0.86 (point 4;
    # point 5 scores too low), densest first
    assert [p.point for p in candidates(points, chosen, 0.01, settings)] == [1, 2, 4]
    two = PathSettings(refit_candidates=2, candidate_slack=3.0)
    assert [p.point for p in candidates(points, chosen, 0.01, two)] == [1, 2]
    one = PathSettings(refit_candidates=1)
    assert [p.point for p in candidates(points, chosen, 0.01, one)] == [2]
    # the same selection twice is refit once
    twin = [*points[:3], point(3, 0.85, [3, 2])]
    assert [p.point for p in candidates(twin, chosen, 0.01, settings)] == [1, 2]


def test_the_refit_choice_is_the_sparsest_refit_within_the_tolerance():
    a, b, c = point(1, 0.8, [6]), point(2, 0.8, [3]), point(3, 0.8, [1])
    assert choose_refit([(a, 0.90), (b, 0.89), (c, 0.85)], 0.02) == 1
    assert choose_refit([(a, 0.90), (b, 0.89), (c, 0.89)], 0.02) == 2
    assert choose_refit([(a, 0.90), (b, 0.80), (c, 0.70)], 0.02) == 0
    with pytest.raises(ValueError, match="refit_candidates"):
        PathSettings.from_cfg({"refit_candidates": 0})


def test_the_refit_choice_rejects_a_model_the_paired_losses_find_worse():
    rng = np.random.default_rng(0)
    a, b, c = point(1, 0.8, [6]), point(2, 0.8, [3]), point(3, 0.8, [1])
    base = rng.exponential(0.4, 400)
    noise = lambda: rng.normal(0, 0.05, 400)  # noqa: E731
    # c's accuracy is within the slack, but every row's loss is higher: it misses a feature
    losses = [base, base + noise(), base + 0.03 + noise()]
    scores = [(a, 0.90), (b, 0.89), (c, 0.89)]
    assert choose_refit(scores, 0.02) == 2  # accuracy alone cannot tell
    assert choose_refit(scores, 0.02, losses) == 1
    # without every model's losses (e.g. an older checkpoint) the accuracy rule stands
    assert choose_refit(scores, 0.02, [base, None, base]) == 2


def test_the_refit_choice_ties_perfect_models_whose_losses_differ_by_a_trifle():
    a, b, c = point(1, 0.8, [6]), point(2, 0.8, [3]), point(3, 0.8, [1])
    rng = np.random.default_rng(0)
    # every model right on every row; the losses 1e-5 to 1e-4 apart, with a smaller spread
    losses = [rng.uniform(1, 2, 400) * s for s in (1e-5, 5e-5, 1e-4)]
    scores = [(a, 1.0), (b, 1.0), (c, 1.0)]
    assert choose_refit(scores, 0.002, losses) == 2  # the sparsest, not the most confident
    # a real gap (0.03 nats a row) still counts
    losses[2] = losses[0] + 0.03
    assert choose_refit(scores, 0.002, losses) == 1


def test_probes_halve_the_gap_below_the_winner_then_above_it():
    path = [50, 33, 8, 5]
    # 8 lost to 33: try between them
    assert next_probe([50, 33, 8], 1, path) == 16
    # 8 won and nothing sparser was refit: toward the next sparser path point first
    assert next_probe([50, 8], 1, path) == 6
    # ... 6 lost: between them; 7 lost too: the gap above, to 16, then the gaps are closed
    assert next_probe([50, 8, 16, 6], 1, path) == 7
    assert next_probe([50, 8, 16, 6, 7], 1, path) == 11
    assert next_probe([50, 8, 16, 6, 7, 11], 1, path) is None
    # the dense model won over 8: between them, never above it
    assert next_probe([50, 8], 0, path) == 20
    assert next_probe([50], 0, [50]) is None
    # the winner lies within 1.2x of the next sparser path point, never refit: past it
    assert next_probe([200, 165, 150], 2, [200, 136, 43]) == 80
    assert next_probe([200, 165, 150, 80], 2, [200, 136, 43]) == 110  # 80 lost: between


def test_probes_go_below_a_winner_whose_next_path_point_kept_nothing():
    path = [500, 120, 59, 0]
    # 59 won, the path fell from 59 to none: down toward 1, then halving as above
    assert next_probe([500, 120, 59], 2, path) == 8
    assert next_probe([500, 120, 59, 8], 3, path) == 3  # 8 won
    assert next_probe([500, 120, 59, 8], 2, path) == 22  # 8 lost
    assert next_probe([500, 120, 59, 8, 3, 2], 5, path) is None
    # from within 1.2x of the winner to none: past that point, toward 1
    assert next_probe([500, 70, 60], 2, [500, 70, 60, 55, 0]) == 8
    # a sparser nonempty point: as before the rule (no probe below it)
    assert next_probe([500, 120, 59], 2, [500, 120, 59, 5, 0]) == 17
    assert next_probe([500, 120, 59], 2, [500, 120, 59, 5]) == 17


def test_a_denser_probe_doubles_a_winner_with_no_refit_model_up_to_twice_its_size():
    assert denser_probe([500, 6, 5, 3], 2) == 10  # 5 won; 6 is not about twice it
    assert denser_probe([500, 12, 5, 3], 2) is None  # 12 is about twice the winner's 5
    assert denser_probe([500, 5, 3], 1) == 10
    assert denser_probe([500, 5, 3, 10], 3) == 20  # 10 won: double again
    assert denser_probe([500, 5, 3, 10], 1) is None  # 10 lost to 5: done
    assert denser_probe([500, 5], 0) is None  # the dense model won
    assert denser_probe([30, 16], 1) is None  # twice 16 is the dense model's size or more


def test_the_ranking_orders_by_last_point_kept_then_importance():
    ranking = Ranking()
    ranking.update(0, [[0, 1, 2], [0, 1]], [[0], [0]], [[1, 1, 1], [1, 1]])
    ranking.update(1, [[0, 2], [1]], [[0], [0]], [[0.9, 0.0, 0.2], [0.0, 0.5]])
    ranking.update(2, [[0], []], [[0], []], [[0.8, 0.0, 0.0], [0.0, 0.0]])
    assert ranking.top(1) == [[0], []]
    assert ranking.top(2) == [[0], [1]]  # kept to point 1, importance 0.5 > 0.2
    assert ranking.top(3) == [[0, 2], [1]]
    assert ranking.top(5) == [[0, 1, 2], [0, 1]]


def test_a_party_without_components_selects_nothing():
    p = PathPoint(0, 0.0, 0, 0.5, 0.0, selected=[[0, 1], [2]], components=[[0], []], mb=0)
    assert p.kept == 2 and p.row()["per_party"] == [2, 0]
    assert "top_k" not in p.row() and "denser" not in p.row()  # a trained point's row


def test_settings_reject_unknown_keys_and_a_shrinking_path():
    with pytest.raises(ValueError, match="unknown strategy.path keys"):
        PathSettings.from_cfg({"grow": 2})
    with pytest.raises(ValueError, match="growth"):
        PathSettings.from_cfg({"growth": 0.5})


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


def test_past_its_planned_points_the_path_goes_on_while_the_last_is_good():
    path = PathStrategy.__new__(PathStrategy)
    path.path = PathSettings(points=2, max_points=6, tolerance=0.02)
    dense, first = point(0, 0.90, [10, 10]), point(1, 0.91, [8, 8])
    assert not path.path_done([dense, point(1, 0.50, [5, 5])], None)  # planned: on
    assert not path.path_done([dense, first, point(2, 0.90, [5, 5])], None)  # good: on
    assert path.path_done([dense, first, point(2, 0.88, [5, 5])], None)  # 0.88 < 0.91 - 0.02
    assert path.path_done([dense, first, point(2, 0.91, [1, 0])], None)  # one feature left
    assert path.path_done([dense, point(1, 0.9, [0, 0])], None)  # nothing left
    # A path that has not removed half the features goes on, even below the tolerance (an
    # overfit dense model's training loss, the penalty's unit, is near zero); then the rule
    # applies again.
    assert not path.path_done([dense, first, point(2, 0.80, [10, 10])], None)
    assert not path.path_done([dense, first, point(2, 0.80, [10, 1])], None)
    assert path.path_done([dense, first, point(2, 0.80, [10, 0])], None)


def test_the_penalty_grows_finer_once_a_feature_has_left_the_path():
    path = PathStrategy.__new__(PathStrategy)
    path.path = PathSettings(growth=2.0, fine_growth=1.5)
    dense = point(0, 0.90, [10, 10])
    assert path.growth([dense, point(1, 0.9, [10, 10])]) == 2.0  # nothing removed yet
    assert path.growth([dense, point(1, 0.9, [10, 10]), point(2, 0.9, [9, 10])]) == 1.5
    path.path = PathSettings(growth=2.0)  # fine_growth unset: growth throughout
    assert path.growth([dense, point(1, 0.9, [3, 1])]) == 2.0
    with pytest.raises(ValueError, match="fine_growth must be > 1"):
        PathSettings.from_cfg({"fine_growth": 1.0})


def test_stall_is_the_uniform_prediction_at_the_majority_rate():
    from types import SimpleNamespace

    from vflfs.ml.models import Task

    y = np.array([0, 1] * 50)
    experiment = SimpleNamespace(
        task=Task("classification", 2), y=y, splits=SimpleNamespace(train=np.arange(100))
    )
    flat = [{"train_loss": 0.6931, "val_metric": 0.5}] * 3
    assert stalled(experiment, flat)
    assert not stalled(experiment, [*flat[:2], {"train_loss": 0.5, "val_metric": 0.7}])
    # a slow start goes below the prior's entropy (0.6931) while it predicts the majority class
    slow = [{"train_loss": v, "val_metric": 0.5} for v in (0.6994, 0.6933, 0.6891)]
    assert not stalled(experiment, slow)
    assert stalled(experiment, [{"train_loss": v, "val_metric": 0.5} for v in (0.70, 0.694, 0.693)])


def test_a_restart_lowers_every_learning_rate_of_a_party():
    from vflfs.strategies.stall import MAX_RESTARTS, RESTART_LR, restarted

    spec = {"seed": 1, "optimizer": {"lr": 0.01}, "gates": {"input": {"lam": 1.0, "lr": 0.1}}}
    assert restarted(dict(spec), 0) == spec
    again = restarted(spec, 2)
    assert again["optimizer"]["lr"] == pytest.approx(0.01 * RESTART_LR**2) and again["seed"] != 1
    assert again["gates"]["input"] == {"lam": 1.0, "lr": pytest.approx(0.1 * RESTART_LR**2)}
    last = restarted(dict(spec, optimizer={"lr": 0.01}), MAX_RESTARTS + 1)
    assert last["optimizer"]["lr"] == 0.01 and last["seed"] not in (1, again["seed"])


@pytest.mark.parametrize(("epochs", "scales"), [(12, [0.3, 0.09, 1.0]), (9, [0.3, 0.09])])
def test_a_start_stalled_at_the_smallest_rate_restarts_at_the_configured_one(
    tmp_path, epochs, scales
):
    """At a rate too small to leave the uniform prediction every watched window stalls: two
    restarts at smaller rates, a last one at the configured rate, then no more watching. A
    window ending at the run's last epoch is not restarted."""
    cfg = tiny_config(f"strategy=vfl training.lr=1e-9 training.epochs={epochs}")
    summary = run_local(cfg, tmp_path)
    restarts = summary["extra"]["restarts"]
    assert [r["epoch"] for r in restarts] == [3, 6, 9][: len(scales)]
    assert [r["lr_scale"] for r in restarts] == pytest.approx(scales)
    assert summary["epochs_run"] == epochs


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


def test_filter_counts_halve_within_the_budget():
    from vflfs.strategies.filter_choice import counts

    assert counts(40, None) == [40, 20, 10, 5, 2, 1]
    assert counts(40, 12) == [12, 6, 3, 1]


def test_the_count_bisection_finds_the_smallest_good_count_between_two_powers_of_two():
    """Between the ladder's smallest good count (20) and the next one (10, short), the
    bisection halves the interval: a good count becomes its upper end, a short one its lower,
    until they meet; each count is tried once."""

    from vflfs.strategies.filter_choice import Candidate, bisect

    def score(k: int) -> float:  # 13 or more features carry the signal
        return 0.9 if k >= 13 else 0.6

    tried = [Candidate(k, [np.arange(k)], 0, 0, val_metric=score(k)) for k in (40, 20, 10, 5)]

    def attempt(k: int) -> Candidate:
        tried.append(Candidate(k, [np.arange(k)], 0, 0, val_metric=score(k)))
        return tried[-1]

    bisect(tried, tried[1], 0.05, attempt)
    assert [c.k for c in tried[4:]] == [15, 12, 13]
    good = [c.k for c in tried if c.val_metric >= 0.9 - 0.05]
    assert min(good) == 13


def test_the_count_bisection_stops_once_its_ends_are_within_a_fifth_of_each_other():
    """On thousands of features the bisection does not go down to a gap of one: it stops when
    the short count is within 1.2x of the good one (a gap of 125 here), after three counts."""
    from vflfs.strategies.filter_choice import Candidate, bisect

    def score(k: int) -> float:
        return 0.9 if k >= 1300 else 0.6

    tried = [Candidate(k, [np.arange(k)], 0, 0, val_metric=score(k)) for k in (2000, 1000)]

    def attempt(k: int) -> Candidate:
        tried.append(Candidate(k, [np.arange(k)], 0, 0, val_metric=score(k)))
        return tried[-1]

    bisect(tried, tried[0], 0.05, attempt)
    assert [c.k for c in tried[2:]] == [1500, 1250, 1375]


@pytest.mark.parametrize("score", ["fstat", "gini"])
def test_filter_keeps_the_smallest_count_within_the_tolerance(tmp_path, score):
    """Both filters choose their count alike: the halving, then the bisection (each count
    tried once), the smallest good count within half a standard error of the best."""
    cfg = tiny_config(f"strategy={score}_filter strategy.{score}.key_bits=512 training.epochs=4")
    summary = run_local(cfg, tmp_path)
    choice = summary["extra"]["count_choice"]
    tried = {c["k"]: c for c in choice["tried"]}
    ladder = [40, 20, 10, 5, 2, 1]
    assert [c["k"] for c in choice["tried"][:6]] == ladder
    # Then the bisection (select.refine, the default): counts between the ladder's smallest
    # good count and the next smaller one, each tried once.
    extra = [c["k"] for c in choice["tried"][6:]]
    assert extra and len(set(extra)) == len(extra) and not set(extra) & set(ladder)
    assert any(all(lo < k < hi for k in extra) for hi, lo in pairwise(ladder))
    best = max(c["val_metric"] for c in tried.values())
    n = summary["samples"]["val"]  # the filters' default: half a binomial standard error
    assert choice["tolerance"] == pytest.approx(0.5 * math.sqrt(max(best * (1 - best), 1 / n) / n))
    good = [k for k, c in tried.items() if c["good"]]
    assert all(tried[k]["val_metric"] >= best - choice["tolerance"] for k in good)
    assert all(c["val_loss"] is not None for c in tried.values())
    reference = min(tried.values(), key=lambda c: c["val_loss"])  # the paired comparisons'
    if reference["val_metric"] >= best - choice["tolerance"]:
        assert reference["good"]
    assert choice["chosen"] == min(good)
    chosen = tried[choice["chosen"]]
    assert summary["selection"]["selected_features"] == choice["chosen"]
    assert chosen["epochs"][0] <= summary["best_epoch"] < chosen["epochs"][1]
    assert summary["val_metric"] == chosen["val_metric"]


def test_each_name_is_its_own_strategy():
    from vflfs.strategies import STRATEGIES, VFL
    from vflfs.strategies.group_lasso import GroupLasso
    from vflfs.strategies.stg import STG

    assert STRATEGIES["vfl"] is VFL
    assert STRATEGIES["stg"] is STG and STRATEGIES["group_lasso"] is GroupLasso


def test_a_budget_caps_the_refit(tmp_path):
    cfg = tiny_config(
        f"strategy=stg {QUICK} strategy.path.points=2 strategy.path.max_points=2 "
        "strategy.path.max_features=3"
    )
    summary = run_local(cfg, tmp_path)
    assert summary["selection"]["selected_features"] <= 3
    assert summary["selection"]["selected_features"] >= 1


def test_every_input_gate_weighs_the_same_whatever_the_split():
    from types import SimpleNamespace

    from vflfs.strategies.stg import input_share

    experiment = SimpleNamespace(columns=[np.arange(40), np.arange(60), np.arange(100)])
    shares = [input_share(experiment, m, {"reduce": "mean"}) for m in range(3)]
    # lambda x share / d_m is the same for each party's gates
    assert np.allclose([s / n for s, n in zip(shares, (40, 60, 100), strict=True)], 3 / 200)
    assert input_share(experiment, 0, {"reduce": "sum"}) == 1.0
    even = SimpleNamespace(columns=[np.arange(50)] * 4)
    assert input_share(even, 2, {"reduce": "mean"}) == 1.0


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


@pytest.mark.parametrize("warmup", [0.8, 0.88])
def test_a_winning_dense_refit_is_probed_below_by_its_own_ranking_if_the_path_failed(warmup):
    """Below a dense refit that beat every model of the path by more than
    ``path.candidate_slack`` tolerances, the probes take the dense refit's own ranking (its
    input-column norms), halving from its count down toward one feature; a probe of that
    ranking that wins is probed below by the same ranking. After a near miss (0.88 against
    0.9, two tolerances) the path's ranking probes, counting from the path's densest point
    (the dense refit keeps every feature, more than the path's densest point when the
    warm-up closed a gate)."""
    from vflfs.strategies.path_progress import Fitted, PathProgress, Refits

    points = [point(0, 0.8, [3, 3]), point(1, 0.7, [2, 2]), point(2, 0.6, [1, 1])]
    progress = PathProgress(points=points, unit=1.0, epoch=0, scale=1.0)
    for p in points:
        progress.ranking.update(p.point, p.selected, p.components, [np.ones(5), np.ones(5)])
    every = PathPoint(0, 0.0, 0, 0.8, 0.0, [list(range(5))] * 2, [[0], [0]], 0.0)
    model = Fitted(first=0, stop=1, parties=[], importance=[])
    norms = [{"values": [0.1, 0.2, 0.3, 5.0, 0.5]}, {"values": [4.0, 0.0, 0.0, 0.0, 3.0]}]
    dense = Fitted(first=0, stop=1, parties=[], importance=norms)
    scores = [(points[0], warmup), (every, 0.9)]
    progress.refits = Refits([every], [[]], [model, dense], scores)
    progress.slack = 0.01
    assert progress.add_probe(PathSettings())
    probe = progress.refits.pool[-1]
    if warmup == 0.88:  # halfway from the path's next point (4) to its densest (6)
        assert (probe.top_k, probe.ranking, probe.point) == (5, "path", 0)
        return
    # halfway (geometrically) from the dense refit's 10 to 1
    assert (probe.top_k, probe.ranking, probe.point) == (3, "dense", 0)
    assert probe.selected == [[3], [0, 4]] and probe.components == [[0], [0]]
    assert probe.label == "top 3 of the dense refit's ranking"
    progress.refits.models.append(model)
    progress.refits.scores.append((probe, 0.95))
    assert progress.add_probe(PathSettings())
    probe = progress.refits.pool[-1]
    assert (probe.top_k, probe.ranking, probe.selected) == (2, "dense", [[3], [0]])


@pytest.mark.parametrize(("path_score", "probed"), [(0.5, True), (0.89, False)])
def test_the_dense_refits_ranking_has_probes_of_its_own(path_score, probed):
    """The path's three probes are spent before the dense refit; where it beat the path by
    far, its own ranking still has its probes; after a near miss nothing is left."""
    from vflfs.strategies.path_progress import Fitted, PathProgress, Refits

    points = [point(0, 0.8, [3, 3]), point(1, 0.7, [2, 2]), point(2, 0.6, [1, 1])]
    progress = PathProgress(points=points, unit=1.0, epoch=0, scale=1.0)
    for p in points:
        progress.ranking.update(p.point, p.selected, p.components, [np.ones(5), np.ones(5)])
    probes = [progress.path_probe(k, False) for k in (5, 3, 2)]
    every = PathPoint(0, 0.0, 0, 0.8, 0.0, [list(range(5))] * 2, [[0], [0]], 0.0)
    model = Fitted(first=0, stop=1, parties=[], importance=[])
    norms = [{"values": [0.1, 0.2, 0.3, 5.0, 0.5]}, {"values": [4.0, 0.0, 0.0, 0.0, 3.0]}]
    dense = Fitted(first=0, stop=1, parties=[], importance=norms)
    scores = [(points[0], path_score), *((p, path_score) for p in probes), (every, 0.9)]
    progress.refits = Refits([*probes, every], [[]] * 4, [model] * 4 + [dense], scores)
    progress.slack = 0.01
    assert progress.add_probe(PathSettings()) is probed
    if probed:
        assert progress.refits.pool[-1].ranking == "dense"
