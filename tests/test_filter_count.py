"""The filters' count choice: the halving ladder, the bisection and its stop, and a real run
of each filter."""

from __future__ import annotations

import csv
import math
from itertools import pairwise

import numpy as np
import pytest

from vflfs.runtime.config import compose_config

from helpers import run_local, save_npz, tiny_config


def test_filter_counts_halve_within_the_budget():
    from vflfs.strategies.count_ladder import counts

    assert counts(40, None) == [40, 20, 10, 5, 2, 1]
    assert counts(40, 12) == [12, 6, 3, 1]


def test_a_budget_is_a_count_or_a_share_of_all_features_whichever_is_smaller():
    from vflfs.runtime.config import ConfigError
    from vflfs.strategies.count_ladder import CountSettings
    from vflfs.strategies.path_choice import PathSettings
    from vflfs.strategies.settings import feature_budget

    assert feature_budget(None, None, 40) is None
    assert feature_budget(12, None, 40) == 12
    assert feature_budget(None, 0.25, 40) == 10
    assert feature_budget(None, 0.01, 40) == 1  # at least one
    assert feature_budget(12, 0.5, 40) == 12 and feature_budget(30, 0.5, 40) == 20
    assert PathSettings(max_fraction=0.1).for_features(500).max_features == 50
    assert PathSettings(max_features=8, max_fraction=0.1).for_features(500).max_features == 8
    with pytest.raises(ConfigError, match=r"strategy.path.max_fraction must be in \(0, 1\]"):
        PathSettings(max_fraction=5)
    with pytest.raises(ConfigError, match="strategy.select.max_features must be >= 1"):
        CountSettings(patience=2, max_epochs=None, tolerance=None, max_features=0)


def test_the_halving_stops_after_two_counts_in_a_row_fall_far_short():
    """Far short: more than 3 tolerances (0.02 here) below the best count so far. A count that
    recovers resets the run; two in a row end the halving, and the rest are not tried."""
    from vflfs.strategies.count_ladder import Candidate, CountSettings, halve

    def run(scores: dict[int, float]) -> tuple[list[int], list[int]]:
        tried = [Candidate(40, [np.arange(40)], 0, 0, val_metric=0.90)]

        def attempt(k: int) -> Candidate:
            tried.append(Candidate(k, [np.arange(k)], 0, 0, val_metric=scores[k]))
            return tried[-1]

        s = CountSettings(patience=2, max_epochs=None, tolerance=0.02, max_features=None)
        skipped = halve([20, 10, 5, 2, 1], tried, attempt, None, s)  # type: ignore[arg-type]
        return [c.k for c in tried[1:]], skipped

    assert run({20: 0.89, 10: 0.80, 5: 0.83, 2: 0.5, 1: 0.5}) == ([20, 10, 5], [2, 1])
    assert run({20: 0.89, 10: 0.80, 5: 0.88, 2: 0.83, 1: 0.6}) == ([20, 10, 5, 2, 1], [])


def test_of_two_good_candidates_on_the_same_features_the_narrower_is_chosen():
    """LESS-VFL's second look trains the chosen features again with every component: where
    both score alike, the candidate that reads stage 2's components stays the choice,
    wherever it comes in the list (the dense model's weighing puts the chosen count last)."""
    from vflfs.strategies.count_ladder import Candidate, smallest_good

    kept = [np.arange(5), np.arange(5)]
    narrow = Candidate(10, kept, 0, 0, val_metric=0.90)
    wide = Candidate(10, kept, 0, 0, val_metric=0.91, reopened=(0, 1))
    dense = Candidate(40, [np.arange(20)] * 2, 0, 0, val_metric=0.91, dense=True)
    for order in ([dense, wide, narrow], [dense, narrow, wide]):
        chosen, _ = smallest_good(order, None, 0.05, 1.0)  # type: ignore[arg-type]
        assert chosen is narrow
    short = Candidate(10, kept, 0, 0, val_metric=0.80)
    assert smallest_good([dense, short, wide], None, 0.05, 1.0)[0] is wide  # type: ignore[arg-type]


def test_the_count_bisection_finds_the_smallest_good_count_between_two_powers_of_two():
    """Between the ladder's smallest good count (20) and the next one (10, short), the
    bisection halves the interval: a good count becomes its upper end, a short one its lower,
    until they meet; each count is tried once."""

    from vflfs.strategies.count_ladder import Candidate, bisect

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
    from vflfs.strategies.count_ladder import Candidate, bisect

    def score(k: int) -> float:
        return 0.9 if k >= 1300 else 0.6

    tried = [Candidate(k, [np.arange(k)], 0, 0, val_metric=score(k)) for k in (2000, 1000)]

    def attempt(k: int) -> Candidate:
        tried.append(Candidate(k, [np.arange(k)], 0, 0, val_metric=score(k)))
        return tried[-1]

    bisect(tried, tried[0], 0.05, attempt)
    assert [c.k for c in tried[2:]] == [1500, 1250, 1375]


def test_a_filters_count_of_every_feature_is_the_vfl_run(tmp_path):
    """A filter has no model on every feature before its choice: its first count, d, is
    strategy=vfl's model trained as that run trains it (initialisation, batches, learning
    rate, patience), so that the choice weighs the all-features run itself."""
    vfl = run_local(tiny_config("strategy=vfl training.epochs=6"), tmp_path / "vfl")
    cfg = tiny_config("strategy=fstat_filter strategy.fstat.key_bits=512 training.epochs=6")
    run = run_local(cfg, tmp_path / "filter")
    first = run["extra"]["count_choice"]["tried"][0]
    assert first["plain"] and first["k"] == 40 and sum(first["per_party"]) == 40

    def rows(folder, first: int, stop: int) -> list[tuple[float, float, float]]:
        with open(folder / "history.csv", newline="") as f:
            history = list(csv.DictReader(f))[first:stop]
        return [
            (float(r["train_loss"]), float(r["val_loss"]), float(r["val_metric"])) for r in history
        ]

    expected = rows(tmp_path / "vfl", 0, None)
    assert len(expected) == vfl["epochs_run"]
    assert np.allclose(rows(tmp_path / "filter", *first["epochs"]), expected, rtol=1e-5)


def test_a_filter_that_keeps_every_feature_says_so(tmp_path):
    """Classes set by the distance from the centre in two of 12 columns, and the other ten
    shifted a little by class: the F-statistic compares class means, so it ranks the two last,
    every smaller count drops them, and the run reports the model on every feature with a
    flag and a warning."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(900, 12))
    y = (x[:, 3] ** 2 + x[:, 8] ** 2 > np.log(4)).astype(int)  # the median of chi2(2)
    weak = [j for j in range(12) if j not in (3, 8)]
    x[:, weak] += 0.2 * y[:, None]
    path = save_npz(tmp_path / "radial.npz", X=x, y=y)
    cfg = compose_config(
        f"dataset=npz dataset.params.path={path} strategy=fstat_filter "
        "strategy.fstat.key_bits=512 threads=1"
    )
    summary = run_local(cfg, tmp_path / "out")
    choice = summary["extra"]["count_choice"]
    assert choice["chosen"] == 12 and choice["fallback"] == "dense"
    assert summary["selection"]["selected_features"] == 12
    assert any(w.startswith("selection removed nothing") for w in summary["warnings"])


@pytest.mark.parametrize("score", ["fstat", "gini"])
def test_filter_keeps_the_smallest_count_within_the_tolerance(tmp_path, score):
    """Both filters choose their count alike: the halving, then the bisection (each count
    tried once), the smallest good count within half a standard error of the best."""
    cfg = tiny_config(f"strategy={score}_filter strategy.{score}.key_bits=512 training.epochs=5")
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
    assert choice["chosen"] < 40 and "fallback" not in choice and not summary["warnings"]
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


def test_a_counts_training_is_the_same_whichever_counts_came_before(tmp_path):
    """Each count trains on batches counted from its own first epoch: the best 10 features
    train alike after the counts 40 and 20 as first of all (a budget of 10), so that a count
    left out changes no other."""
    base = "strategy=fstat_filter strategy.fstat.key_bits=512 training.epochs=3"
    rows = {}
    for name, extra in (("all", ""), ("budget", " strategy.select.max_features=10")):
        summary = run_local(tiny_config(base + extra), tmp_path / name)
        rows[name] = {c["k"]: c for c in summary["extra"]["count_choice"]["tried"]}
    assert rows["all"][10]["epochs"][0] > 0 == rows["budget"][10]["epochs"][0]
    for key in ("val_metric", "val_loss"):
        assert rows["all"][10][key] == rows["budget"][10][key]
        assert rows["all"][5][key] == rows["budget"][5][key]


def test_a_share_of_the_features_caps_the_counts_tried(tmp_path):
    """``select.max_fraction=0.3`` of the 40 features: the ladder starts at 12."""
    cfg = tiny_config(
        "strategy=fstat_filter strategy.fstat.key_bits=512 training.epochs=2 "
        "strategy.select.max_fraction=0.3 strategy.select.refine=false"
    )
    summary = run_local(cfg, tmp_path)
    assert [c["k"] for c in summary["extra"]["count_choice"]["tried"]] == [12, 6, 3, 1]
    assert summary["selection"]["selected_features"] <= 12


def test_a_pretraining_longer_than_a_count_may_train_leaves_d_to_the_vfl_run(tmp_path):
    """LESS-VFL's pre-trained model stands for d only when it trained no longer than a count
    may (``select.max_epochs``); else d is trained first as the vfl run, as the filters train
    it, and is not trained again at the end."""
    common = (
        "dataset.params.n_samples=1200 dataset.params.n_features=9 "
        "dataset.params.n_informative=9 dataset.params.n_redundant=0 "
        "dataset.params.n_clusters_per_class=1 +dataset.params.class_sep=1.5 model=linear "
        "training.batch_size=50 training.lr=0.05 noise.ratio=1.0 training.epochs=8 "
        "training.patience=2 strategy=local_lasso strategy.party.epochs=4"
    )
    short = run_local(compose_config(f"{common} strategy.select.max_epochs=2"), tmp_path / "s")
    choice = short["extra"]["count_choice"]
    assert short["extra"]["selection_epoch"] > 2  # the pre-training, longer than a count
    first = choice["tried"][0]
    assert first["plain"] and not first["dense"] and first["k"] == 18
    assert first["epochs"][0] == short["extra"]["selection_epoch"]
    assert "plain" not in choice  # not trained twice
    assert all(c["epochs"][1] - c["epochs"][0] <= 2 for c in choice["tried"][1:])
