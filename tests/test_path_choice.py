"""The path's rules alone: the choice, the refit candidates and probes, the ranking, and
where the path ends."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vflfs.ml.metrics import paired_excess
from vflfs.strategies.path import PathPoint, PathSettings, PathStrategy, choose
from vflfs.strategies.path_choice import (
    PAIRED_FLOOR,
    candidates,
    choose_refit,
    penalised_models,
)
from vflfs.strategies.path_probes import denser_probe, floor_probe, next_probe
from vflfs.strategies.path_progress import Fitted, PathProgress, Ranking, Refits


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


def test_one_row_does_not_make_a_tied_model_worse():
    a, b = point(1, 0.8, [6]), point(2, 0.8, [3])
    rng = np.random.default_rng(0)
    # both right on all but one of 1300 rows, the sparser model a trifle less sure elsewhere
    dense = rng.uniform(0, 2e-4, 1300)
    dense[7] = 1.5  # the row both get wrong
    sparse = dense + rng.uniform(0, 4e-4, 1300)
    sparse[7] = 4.7  # more confidently wrong there
    scores = [(a, 1299 / 1300), (b, 1299 / 1300)]
    excess, se = paired_excess(sparse, dense)
    assert max(se, PAIRED_FLOOR) < excess  # with that row, the sparser model loses
    assert choose_refit(scores, 0.002, [dense, sparse]) == 1
    # two such rows are evidence, and it loses again
    sparse[9], dense[9] = 3.0, 0.9
    assert choose_refit(scores, 0.002, [dense, sparse]) == 0


def test_path_points_that_beat_every_refit_join_the_choice_as_their_own_models():
    # many classes on few rows: the penalised path scored far above the refits of its points
    points = [
        point(0, 0.14, [134, 133, 133]),
        point(1, 0.38, [130, 130, 123]),
        point(2, 0.43, [100, 101, 102]),
        point(3, 0.20, [7, 7, 6]),
        point(4, 0.02, [0, 0, 0]),
    ]
    refit = point(2, 0.43, [100, 101, 102])
    scores = [(points[0], 0.14), (refit, 0.13), (point(2, 0.0, [116, 116, 116]), 0.18)]
    assert penalised_models(points, scores, 0.04) == [1, 2]  # 0.20 is within 0.18 + 0.04
    assert penalised_models(points, scores, 0.04, max_features=310) == [2]  # the budget
    assert penalised_models(points, scores, 0.30) == []  # none beats them by the tolerance
    # the choice then reports point 2's own model: the sparsest good one of all compared
    losses = [np.full(160, v) for v in (3.4, 3.6, 3.3, 2.9, 2.6)]
    epochs = [(0, 5), (50, 80), (80, 120)]
    fitted = [Fitted(a, b, [([0], [0], 1)] * 3, []) for a, b in epochs]
    progress = PathProgress(points, unit=1.0, epoch=40, scale=1.0, slack=0.04)
    progress.refits = Refits([refit, scores[2][0]], [], fitted, scores)
    progress.models = [Fitted(p.epoch, p.epoch + 1, [], []) for p in points[1:]]
    models, compared = progress.compared(PathSettings())
    assert [p.ranking for p, _ in compared] == ["path"] * 3 + ["penalised"] * 2
    assert [m.first for m in models[3:]] == [1, 2]  # each point's own epoch
    win = choose_refit(compared, 0.04, [*losses[:3], losses[3], losses[4]])
    assert (compared[win][0].point, compared[win][0].ranking, compared[win][1]) == (
        2,
        "penalised",
        0.43,
    )
    assert "own (penalised) model" in compared[win][0].label
    # where a refit matches its point, the path's models stay out
    progress.refits.scores[1] = (refit, 0.42)
    assert len(progress.compared(PathSettings())[1]) == 3


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


def test_a_refit_far_below_its_own_path_point_is_probed_below_first():
    path = [400, 383, 303, 20, 0]
    # the refit of 303 lost to the dense model: the rules above probe toward the dense one
    assert next_probe([400, 303], 0, path) == 348
    # but the path point of 303 had scored far above its refit: below it first, to 20
    assert next_probe([400, 303], 0, path, [303]) == 78
    assert next_probe([400, 303, 78], 2, path, [303]) == 39  # then as above (78 won)
    assert next_probe([400, 303, 78], 0, path, [303]) == 348  # (78 lost)
    # within 1.2x of the next sparser point there is no gap below: the rules above decide
    assert next_probe([400, 22], 1, [400, 22, 20], [22]) == next_probe([400, 22], 1, [400, 22, 20])
    # PathProgress counts the refits of path points that fell that far (candidate_slack
    # tolerances), not the probes' or the dense refit's
    points = [point(0, 0.14, [400]), point(1, 0.43, [303]), point(2, 0.20, [20])]
    scores = [(points[0], 0.14), (points[1], 0.13), (points[2], 0.18)]
    scores += [(replace(points[1], top_k=78), 0.05), (replace(points[0]), 0.01)]
    progress = PathProgress(points, unit=1.0, epoch=0, scale=1.0, slack=0.04)
    progress.refits = Refits([p for p, _ in scores[1:]], [], [], scores)
    assert progress.shrunk(PathSettings(candidate_slack=3.0)) == [303]
    assert progress.shrunk(PathSettings(candidate_slack=8.0)) == []


def test_a_denser_probe_doubles_a_winner_with_no_refit_model_up_to_twice_its_size():
    assert denser_probe([500, 6, 5, 3], 2) == 10  # 5 won; 6 is not about twice it
    assert denser_probe([500, 12, 5, 3], 2) is None  # 12 is about twice the winner's 5
    assert denser_probe([500, 5, 3], 1) == 10
    assert denser_probe([500, 5, 3, 10], 3) == 20  # 10 won: double again
    assert denser_probe([500, 5, 3, 10], 1) is None  # 10 lost to 5: done
    assert denser_probe([500, 5], 0) is None  # the dense model won
    assert denser_probe([30, 16], 1) is None  # twice 16 is the dense model's size or more


def test_a_floor_probe_goes_below_a_last_point_that_fell_to_none():
    """Halfway (geometrically) from one feature to the path's last point that kept any, where
    the path fell from it to none in one step and nothing compared keeps fewer."""
    path = [300, 300, 289, 202, 101, 0]
    assert floor_probe([300, 202, 143, 120], path) == 10  # sqrt(101)
    assert floor_probe([300, 202, 101], path) == 10  # that point's refit is not below it
    assert floor_probe([300, 202, 3], path) is None  # a sparser model was compared
    assert floor_probe([300, 202], [300, 202, 101, 50]) is None  # the path did not empty
    assert floor_probe([300, 202], [300, 202, 7, 0]) is None  # it fell from fewer than 8


@pytest.mark.parametrize("floors", [0, 1])
def test_the_floor_probe_comes_after_the_others_with_a_budget_of_its_own(floors):
    from vflfs.strategies.path_progress import Fitted, PathProgress, Refits

    points = [point(0, 0.7, [6, 6]), point(1, 0.8, [5, 5]), point(2, 0.6, [5, 4])]
    points.append(point(3, 0.5, [0, 0]))
    progress = PathProgress(points=points, unit=1.0, epoch=0, scale=1.0)
    for p in points:
        progress.ranking.update(p.point, p.selected, p.components, [np.ones(6), np.ones(6)])
    model = Fitted(first=0, stop=1, parties=[], importance=[])
    scores = [(points[0], 0.7), (points[1], 0.8)]  # the point of 10 features won
    progress.refits = Refits([points[1]], [[]], [model, model], scores)
    progress.slack = 0.01
    settings = PathSettings(refit_probes=0, denser_probes=0, floor_probes=floors)
    assert progress.add_probe(settings) is bool(floors)
    if floors:
        probe = progress.refits.pool[-1]
        assert (probe.top_k, probe.floor, probe.denser) == (3, True, False)  # sqrt(9)
        progress.refits.models.append(model)
        progress.refits.scores.append((probe, 0.9))
        assert not progress.add_probe(settings)  # its budget is spent


@pytest.mark.parametrize("key", ["refit_probes", "denser_probes", "floor_probes"])
def test_a_negative_probe_budget_is_refused_by_name(key):
    with pytest.raises(ValueError, match=f"{key} must be >= 0"):
        PathSettings.from_cfg({key: -1})
    assert getattr(PathSettings.from_cfg({key: 0}), key) == 0


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


def test_a_ranking_made_before_the_path_is_probed_at_twice_the_winners_count_after_the_rest():
    """``fedsdg_fs``'s Gini scores rank what its path may have dropped: after the path's probes
    and the dense refit, the top 2k of that ranking are refit (k the winner's count, the
    components as the path's probes take them), once by default; no path probe follows it,
    and it is skipped where 2k reaches every feature or it was refit already."""
    points = [point(0, 0.8, [4, 4]), point(1, 0.85, [2, 1]), point(2, 0.6, [1, 0])]
    progress = PathProgress(points=points, unit=1.0, epoch=0, scale=1.0)
    for p in points:
        progress.ranking.update(p.point, p.selected, p.components, [np.ones(4), np.ones(4)])
    model = Fitted(first=0, stop=1, parties=[], importance=[])
    scores = [(points[0], 0.8), (points[2], 0.84)]  # the one-feature point won
    progress.refits = Refits([points[2]], [[]], [model, model], scores)
    progress.slack = 0.01
    # Gini-like: party 1's columns 2 and 3 first, then party 0's column 1
    prior = Ranking.of_scores([np.array([0.1, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.9, 0.8])])
    assert not progress.add_prior(PathSettings(), None)  # no ranking made before the path
    assert not progress.add_prior(PathSettings(prior_probes=0), prior)
    assert progress.add_prior(PathSettings(), prior)
    probe = progress.refits.pool[-1]
    assert (probe.top_k, probe.ranking, probe.kept) == (2, "prior", 2)
    assert probe.selected == [[], [2, 3]] and probe.components == [[0], [0]]
    assert probe.label == "top 2 of the ranking made before the path"
    progress.refits.models.append(model)
    progress.refits.scores.append((probe, 0.95))  # it wins
    assert not progress.add_prior(PathSettings(), prior)  # its budget is spent
    assert not progress.add_probe(PathSettings())  # no path probe follows it
    assert progress.add_prior(PathSettings(prior_probes=2), prior)  # 4 = twice its count
    assert progress.refits.pool[-1].selected == [[0, 1], [2, 3]]
    progress.refits.models.append(model)
    progress.refits.scores.append((progress.refits.pool[-1], 0.96))
    assert not progress.add_prior(PathSettings(prior_probes=3), prior)  # 8: every feature


def test_fedsdg_fs_ranks_its_gini_scores_lowest_impurity_first():
    from vflfs.strategies.fedsdg_fs import gini_ranking

    assert gini_ranking(None) is None  # init=uniform: no Gini phase
    assert gini_ranking([[0.30, 0.10], [0.05, 0.45]]).top(2) == [[1], [0]]
