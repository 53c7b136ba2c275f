"""The path's screening: the score test of a feature a model does not use, and the add-back
probe it makes (a winner plus the features its test finds)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vflfs.ml.screening import first_layer_gradients, score_test
from vflfs.strategies.path_choice import PathPoint, PathSettings, choose_refit
from vflfs.strategies.path_progress import Fitted, PathProgress, Ranking, Refits
from vflfs.strategies.path_screen import added_back, adjusted_minimum

from helpers import run_local, tiny_config


def trained_on_first_column(x: torch.Tensor, y: torch.Tensor) -> torch.nn.Sequential:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(200):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[:, :1]), y).backward()
        opt.step()
    return model


def test_the_score_test_finds_the_column_a_model_misses_and_not_the_noise():
    """Labels from columns 0 and 1; a model of column 0 alone: column 1's test is far beyond
    any noise column's, and the 40 noise columns' p-values are spread as a test's should be."""
    rng = np.random.default_rng(0)
    n = 3000
    x = torch.tensor(rng.standard_normal((n, 42)), dtype=torch.float32)
    y = ((x[:, 0] + 0.6 * x[:, 1] + 0.3 * torch.randn(n)) > 0).long()
    model = trained_on_first_column(x, y)
    logits = model(x[:, :1]).detach()
    grad = torch.softmax(logits, 1) - torch.nn.functional.one_hot(y, 2)  # dL_i / dlogits_i
    delta = first_layer_gradients(model, model[0], x[:, :1], grad)
    assert delta.shape == (n, 8) and all(p.grad is None for p in model.parameters())
    pvalues, dof = score_test(x[:, 1:] - x[:, 1:].mean(0), delta)
    assert 0.5 < dof < 8
    assert pvalues[0] < 1e-12  # column 1
    noise = pvalues[1:]
    assert noise.min() > 0.05 / 41  # Bonferroni over the 41 tested: nothing added
    assert 0.2 < np.median(noise) < 0.8


def test_the_tail_is_the_quadratic_forms_not_the_chi_square_of_its_variance():
    """Equal weights: the chi-square of that many degrees (exactly); one large weight: a Monte
    Carlo draw's tail, twice that of the chi-square with the same mean and variance."""
    from scipy.stats import chi2

    from vflfs.ml.screening import quadratic_form_sf

    assert quadratic_form_sf(np.array([3.0]), np.full(3, 1 / 3))[0] == pytest.approx(
        chi2.sf(9.0, 3), rel=0.02
    )
    lam = np.array([0.7, 0.2, 0.1])
    draws = np.random.default_rng(0).chisquare(1, (1_000_000, 3)) @ lam
    for q in (0.5, 1.5, 5.0, 8.0):
        assert quadratic_form_sf(np.array([q]), lam)[0] == pytest.approx(
            (draws > q).mean(), rel=0.05
        )
    nu = 1 / (lam**2).sum()
    assert quadratic_form_sf(np.array([8.0]), lam)[0] > 1.8 * chi2.sf(8.0 * nu, nu)


def test_noise_columns_pass_at_the_rate_the_test_says():
    """A model of four columns and 2000 noise columns it does not use: the p-values below 0.01
    are about 1%, and Bonferroni's level is not reached."""
    rng = np.random.default_rng(1)
    torch.manual_seed(1)
    n = 4000
    x = torch.tensor(rng.standard_normal((n, 2004)), dtype=torch.float32)
    logit = torch.stack([x[:, 0] + x[:, 1] * x[:, 2], x[:, 3] - x[:, 0], x[:, 1]], 1)
    y = torch.distributions.Categorical(logits=2 * logit).sample()
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16), torch.nn.ReLU(),
        torch.nn.Linear(16, 3),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(200):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[:, :4]), y).backward()
        opt.step()
    grad = torch.softmax(model(x[:, :4]).detach(), 1) - torch.nn.functional.one_hot(y, 3)
    delta = first_layer_gradients(model, model[0], x[:, :4], grad)
    pvalues, _ = score_test(x[:, 4:] - x[:, 4:].mean(0), delta)
    assert (pvalues < 0.01).mean() < 0.02
    assert pvalues.min() * len(pvalues) > 0.05


def test_noise_columns_are_not_found_where_many_rows_share_the_gradient():
    """A model sure of every row but sixty alike, whose gradients are one vector: the
    columns' own values on those rows (the conditional form alone) would make every noise
    column of the parties' min-max scale significant; the test finds none of them, and still
    a column that sets those rows apart."""
    rng = np.random.default_rng(0)
    n, m = 960, 200
    delta = rng.normal(scale=1e-4, size=(n, 16))
    group = rng.choice(n, 60, replace=False)
    delta[group] = rng.normal(size=16)
    x = rng.random((n, m))
    pvalues, _ = score_test(torch.tensor(x), torch.tensor(delta))
    assert pvalues.min() * m > 0.05
    relevant = x[:, :1].copy()
    relevant[group] += 0.3
    assert score_test(torch.tensor(relevant), torch.tensor(delta))[0][0] < 1e-8


def test_a_constant_column_or_a_model_without_gradient_is_not_evidence():
    x = torch.zeros((50, 3))
    delta = torch.randn(50, 4)
    pvalues, _ = score_test(x, delta)
    assert np.allclose(pvalues, 1.0)
    pvalues, dof = score_test(torch.randn(50, 3), torch.zeros(50, 4))
    assert np.allclose(pvalues, 1.0) and dof == 0.0


def point(selected: list[list[int]], score_point: int = 3) -> PathPoint:
    return PathPoint(score_point, 1.0, 0, 0.9, 0.3, selected, [[0, 1], [0, 1]], 0.0)


def test_a_feature_is_added_back_below_the_bonferroni_level():
    """Party 0 uses features 0 and 1 and tests 2-9; party 1 uses 0 and tests 1-4. At 0.05 over
    the 12 tested, 0.001 passes and 0.01 does not; no feature passing adds nothing."""
    pvalues = [
        np.array([np.nan, np.nan, 0.001, 0.5, 0.9, 0.3, 0.2, 0.7, 0.6, 0.4]),
        np.array([np.nan, 0.01, 0.8, 0.5, 0.0001]),
    ]
    winner = point([[0, 1], [0]])
    assert added_back(pvalues, winner, 0.05) == [[0, 1, 2], [0, 4]]
    assert adjusted_minimum(pvalues) == pytest.approx(12 * 0.0001)
    assert added_back([np.where(np.isnan(p), p, 0.5) for p in pvalues], winner, 0.05) is None
    assert adjusted_minimum(None) is None and adjusted_minimum([np.full(3, np.nan)]) is None


def progress_won_by(pvalues: list[np.ndarray] | None) -> PathProgress:
    """A path whose one refit (party 0's features 0 and 1, party 1's 0) beat the dense model."""
    dense = PathPoint(0, 0.0, 0, 0.80, 0.5, [list(range(10)), list(range(5))], [[0, 1]] * 2, 0.0)
    progress = PathProgress(points=[dense], unit=1.0, epoch=0, scale=1.0)
    refit = point([[0, 1], [0]])
    models = [Fitted(0, 1, [], []), Fitted(1, 2, [], [], None, pvalues)]
    progress.refits = Refits([refit], [refit.selected], models, [(dense, 0.80), (refit, 0.90)])
    progress.slack = 0.01
    return progress


def test_the_winner_plus_what_its_test_found_is_refit_while_it_wins():
    pvalues = [np.r_[np.nan, np.nan, 1e-6, np.full(7, 0.5)], np.r_[np.nan, np.full(4, 0.5)]]
    settings = PathSettings()
    progress = progress_won_by(pvalues)
    assert progress.add_back(settings)
    probe = progress.refits.pool[-1]
    assert (probe.ranking, probe.top_k, probe.selected) == ("screen", 4, [[0, 1, 2], [0]])
    assert probe.label == "a winner and the features its score test added (4)"
    assert probe.parent == 1
    assert not progress.add_probe(settings)  # the path's probes are over once add-backs begin
    # good (within the tolerance), it replaces the model it extends, and its own test goes on
    more = [np.r_[np.nan, np.nan, np.nan, 1e-7, np.full(6, 0.5)], pvalues[1]]
    progress.refits.models.append(Fitted(2, 3, [], [], None, more))
    progress.refits.scores.append((probe, 0.895))
    assert choose_refit(progress.refits.scores, progress.slack) == 2
    assert progress.add_back(settings)
    assert progress.refits.pool[-1].selected == [[0, 1, 2, 3], [0]]
    assert progress.refits.pool[-1].parent == 2
    # one that is not good ends them: the model it extends stays the choice
    lost = progress_won_by(pvalues)
    assert lost.add_back(settings)
    lost.refits.models.append(Fitted(2, 3, [], [], None, more))
    lost.refits.scores.append((lost.refits.pool[-1], 0.85))
    assert choose_refit(lost.refits.scores, lost.slack) == 1
    assert not lost.add_back(settings)
    # none without a test, with add_back 0, or with a feature budget
    assert not progress_won_by(None).add_back(settings)
    assert not progress_won_by(pvalues).add_back(PathSettings(add_back=0))
    assert not progress_won_by(pvalues).add_back(PathSettings(max_features=3))
    with pytest.raises(ValueError, match="screen_alpha"):
        PathSettings.from_cfg({"screen_alpha": 0.0})


def test_the_winner_is_grown_before_a_prior_ranking_is_probed_and_a_winning_probe_after():
    """``fedsdg_fs``: the winner's add-back comes before the top 2k of its Gini ranking is refit,
    and k counts the features it added (a one-column ranking's top 2k carry about k noise
    features, where the add-back adds only what the winner's test found); a probe of that
    ranking that wins is grown by its own test in turn, within ``path.add_back``."""
    pvalues = [np.r_[np.nan, np.nan, 1e-6, np.full(7, 0.5)], np.r_[np.nan, np.full(4, 0.5)]]
    settings = PathSettings()
    progress = progress_won_by(pvalues)
    dense = progress.points[0]
    progress.ranking.update(0, dense.selected, dense.components, [np.ones(10), np.ones(5)])
    refits = progress.refits
    assert progress.add_back(settings)  # 3 -> 4 features
    nothing = [np.r_[np.nan, np.nan, np.nan, np.full(7, 0.5)], pvalues[1]]
    refits.models.append(Fitted(2, 3, [], [], None, nothing))
    refits.scores.append((refits.pool[-1], 0.90))  # good: it replaces the winner
    assert not progress.add_back(settings)  # its own test finds nothing more
    prior = Ranking.of_scores([np.linspace(1.0, 0.1, 10), np.linspace(0.95, 0.05, 5)])
    assert progress.add_prior(settings, prior)
    probe = refits.pool[-1]
    assert (probe.ranking, probe.top_k) == ("prior", 8)  # twice the add-back's 4
    found = [
        np.r_[np.full(6, np.nan), 0.5, 0.5, 1e-7, 0.5],
        np.r_[np.full(2, np.nan), 0.5, 0.5, 0.5],
    ]
    refits.models.append(Fitted(3, 4, [], [], None, found))
    refits.scores.append((probe, 0.95))  # it wins
    assert choose_refit(refits.scores, progress.slack) == 3
    assert progress.add_back(settings)  # the second add-back, from the probe
    assert refits.pool[-1].parent == 3 and refits.pool[-1].kept == 9


def test_every_refit_is_screened_and_an_add_back_follows_below_the_level(tmp_path):
    """A real run: each refit that leaves a feature out records its smallest Bonferroni p-value
    (``screen_p``; the dense refit tests nothing), and where the winner's is below
    ``path.screen_alpha`` (1.0 here: any adjusted p-value below 1) the next refit is the
    winner plus the features below the level. The path starts at a penalty that already
    closes most gates, so the refits keep 2-10 of the 40 features and the winner's test has a
    feature to find."""
    cfg = tiny_config(
        "strategy=stg training.epochs=6 strategy.path.points=5 strategy.path.max_points=5 "
        "strategy.path.steps_per_point=12 strategy.path.screen_alpha=1.0 "
        "strategy.path.add_back=1 strategy.path.start=1.0"
    )
    summary = run_local(cfg, tmp_path)
    refits = summary["extra"]["path_choice"]["refits"]
    every = sum(len(p["columns"]) for p in summary["parties"])
    for r in refits:
        assert (r["screen_p"] is None) == (r["kept"] == every), r
        assert r["screen_p"] is None or 0 <= r["screen_p"] <= 1
    added = [r for r in refits if r.get("ranking") == "screen"]
    assert len(added) == 1 and refits[-1] is added[0]
    before = [r for r in refits[:-1] if r["screen_p"] is not None]
    assert added[0]["kept"] > min(r["kept"] for r in before)
    assert summary["communication"]["phases"]["screening"]["round_trips"] >= 2
