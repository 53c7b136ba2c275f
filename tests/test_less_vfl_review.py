"""LESS-VFL's stage 2 cut weighed again by the count choice
(:mod:`vflfs.strategies.less_vfl_review`): a closed party reopened where validation needs its
columns, one of noise left closed, parties left one component reading all of them."""

from __future__ import annotations

import numpy as np

from vflfs.runtime.config import compose_config
from vflfs.strategies.less_vfl import LessVFL
from vflfs.strategies.registry import register

from helpers import run_local, save_npz


class ClosingParty1(LessVFL):
    """LESS-VFL whose stage 2 closes party 1 whatever the embeddings say (the decision a
    weak pre-training can take), so that the count choice's reopening is what is tested."""

    name = "less_vfl_closing_party_1"

    def significant_components(self, federation, experiment, result):
        keep = [np.arange(w, dtype=np.int64) for w in self.widths]
        keep[1] = keep[1][:0]
        return keep


class OneComponent(LessVFL):
    """LESS-VFL whose stage 2 leaves every party one embedding component (the narrow cut a
    weak pre-training can make)."""

    name = "less_vfl_one_component"

    def significant_components(self, federation, experiment, result):
        return [np.arange(1, dtype=np.int64) for _ in self.widths]


register(ClosingParty1)
register(OneComponent)


def closing_run(tmp_path, holders: list[int]) -> dict:
    """``ClosingParty1`` on 900 rows over three parties of 30 columns; four classes of two
    Gaussian clusters each in six columns, two at each party of ``holders`` (the rest
    noise), where a dense model of all 90 learns little. Seeded."""
    rng = np.random.default_rng(2)
    signal = len(holders) * 2
    centres = rng.choice([-1.5, 1.5], size=(8, signal))  # cluster c // 2 of class c % 4
    cluster = rng.integers(0, 8, 900)
    x = rng.normal(size=(900, 90))
    columns = [30 * m + i for m in holders for i in (0, 1)]
    x[:, columns] += centres[cluster]
    path = save_npz(tmp_path / "data.npz", X=x, y=cluster % 4)
    cfg = compose_config(
        f"dataset=npz dataset.params.path={path} strategy=less_vfl "
        f"strategy.name={ClosingParty1.name} threads=1"
    )
    return run_local(cfg, tmp_path / "out")


def test_a_closed_party_whose_columns_validation_needs_is_reopened(tmp_path):
    """Party 1 holds two of the six signal columns; stage 2 closes it. Its stage 3 still
    ranks its columns (on all its components) and keeps none; the count choice's last
    candidate adds the columns it ranks with those kept, reads all its components, and wins
    on validation: the reported model uses party 1's signal and none of its noise."""
    summary = closing_run(tmp_path, [0, 1, 2])
    parties = summary["extra"]["stage3"]["parties"]
    assert parties[1]["features_kept"] == 0 and parties[1]["components"] == []
    assert max(parties[1]["scores"]) > 0 and np.argmax(parties[1]["scores"]) in (0, 1)
    choice = summary["extra"]["count_choice"]
    reopened = [c for c in choice["tried"] if c["reopened"]]
    assert reopened and all(c["reopened"] == [1] for c in reopened)
    chosen = next(c for c in reopened if c["k"] == choice["chosen"] and c["good"])
    others = [c["val_metric"] for c in choice["tried"] if not (c["reopened"] or c["dense"])]
    assert chosen["val_metric"] > max(others)
    assert summary["parties"][1]["selected"] in ([0], [1], [0, 1])
    assert summary["parties"][1]["components"] is None  # all of them


def test_a_closed_party_of_noise_stays_closed(tmp_path):
    """The signal is at parties 0 and 2 only: party 1, closed, selects nothing."""
    summary = closing_run(tmp_path, [0, 2])
    choice = summary["extra"]["count_choice"]
    assert not any(c["reopened"] and c["k"] == choice["chosen"] for c in choice["tried"])
    assert summary["parties"][1]["selected"] == []


def test_parties_left_one_component_read_all_of_them_where_validation_asks(tmp_path):
    """Four classes, the quadrants of two columns of party 1 (the rest noise), and stage 2
    leaves every party one component. The count choice's last candidate keeps the chosen
    features with every component, and wins on validation: the reported model reads all of
    party 1's components."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(900, 90))
    y = 2 * (x[:, 30] > 0) + (x[:, 31] > 0)
    path = save_npz(tmp_path / "data.npz", X=x, y=y)
    cfg = compose_config(
        f"dataset=npz dataset.params.path={path} strategy=less_vfl "
        f"strategy.name={OneComponent.name} threads=1"
    )
    summary = run_local(cfg, tmp_path / "out")
    assert summary["extra"]["components_kept"] == [1, 1, 1]
    choice = summary["extra"]["count_choice"]
    wider = [c for c in choice["tried"] if c["reopened"]]
    assert len(wider) == 1
    narrow = next(c for c in choice["tried"] if c["k"] == wider[0]["k"] and not c["reopened"])
    assert wider[0]["per_party"] == narrow["per_party"]
    holders = [m for m, n in enumerate(narrow["per_party"]) if n]
    assert wider[0]["reopened"] == holders
    assert wider[0]["good"] and not narrow["good"] and choice["chosen"] == wider[0]["k"]
    assert all(summary["parties"][m]["components"] is None for m in holders)  # all of them


def test_a_count_whose_extra_features_sit_at_a_closed_party_is_not_trained(tmp_path):
    """The signal is at party 1 only, and stage 2 closes it: every count of the open parties'
    features falls short, and the bisection below every feature tries counts that add party
    1's features, which it cannot use (it sends no component). A count that uses the same
    features as one trained before takes that one's model instead of training it again."""
    summary = closing_run(tmp_path, [1])
    tried = summary["extra"]["count_choice"]["tried"]
    twins = [c for c in tried if c["same_as"] is not None]
    assert twins
    for twin in twins:
        model = next(c for c in tried if c["k"] == twin["same_as"] and c["same_as"] is None)
        assert twin["k"] > model["k"] and twin["per_party"][1] > model["per_party"][1]
        assert [twin["per_party"][m] for m in (0, 2)] == [model["per_party"][m] for m in (0, 2)]
        for key in ("epochs", "val_metric", "val_loss"):
            assert twin[key] == model[key]
        assert not twin["good"] or model["good"]
    trained = [tuple(c["epochs"]) for c in tried if c["same_as"] is None]
    assert len(set(trained)) == len(trained)  # no epochs spent on a twin
