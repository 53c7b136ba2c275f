"""The FedSDG-FS Table III experiment: its composed settings and the tuning choice."""

from __future__ import annotations

import pandas as pd
import pytest

from vflfs.benchmarks.fedsdg_table3 import choose, epoch_caps, load, with_filters
from vflfs.runtime.config import compose_config

from helpers import run_local, tiny_config

DATASETS = ["madelon", "arcene", "basehock", "pcmac", "relathe", "coil20", "isolet"]
STRATEGIES = ["vfl", "gini_filter", "fstat_filter", "stg", "fedsdg_fs"]


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_job_gets_its_tuned_settings(dataset):
    cfg = compose_config(["+experiment=fedsdg_table3", f"dataset={dataset}"])
    table = cfg.table3[dataset]
    for strategy in STRATEGIES:
        job = compose_config(
            ["+experiment=fedsdg_table3", f"dataset={dataset}", f"strategy={strategy}"]
        )
        assert job.split.kind == "random" and job.split.num_parties == 2
        assert job.cv.folds == 5 and job.training.patience is None
        assert job.training.batch_size == 128  # the paper's, not the default's auto
        tuned = table[strategy]  # every method has its settings for every dataset
        assert job.training.lr == tuned.lr and job.training.epochs == tuned.epochs
        if strategy in ("stg", "fedsdg_fs"):
            assert job.strategy.lambda_input == tuned.lambda_input
            assert job.strategy.sigma == tuned.sigma
        if strategy == "fedsdg_fs":
            assert job.strategy.lambda_embedding == tuned.lambda_embedding
        if strategy.endswith("_filter"):
            assert (tuned.lr, tuned.epochs) == (table.vfl.lr, table.vfl.epochs)
            assert job.strategy.keep_fraction == 0.5
        if strategy in ("stg", "fedsdg_fs"):
            assert job.strategy.path.enabled is False  # the tuned fixed lambdas


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_defaults_protocol_has_no_setting_per_dataset(strategy):
    """+experiment=fedsdg_table3_defaults: each strategy's configuration is the same on every
    dataset (only the data and the key size of the secure scores are the experiment's)."""
    jobs = [
        compose_config(
            ["+experiment=fedsdg_table3_defaults", f"dataset={d}", f"strategy={strategy}"]
        )
        for d in DATASETS
    ]
    default = compose_config([f"strategy={strategy}"])
    for job in jobs:
        assert job.split.kind == "random" and job.cv.folds == 5
        assert job.training == default.training
        assert {k: v for k, v in job.strategy.items() if k not in ("gini", "fstat")} == {
            k: v for k, v in default.strategy.items() if k not in ("gini", "fstat")
        }


def test_choice_is_the_best_validation_epoch_within_the_cap(tmp_path):
    for lam in (0.01, 0.5):
        cfg = tiny_config(
            f"strategy=stg strategy.lambda_input={lam} strategy.path.enabled=false "
            "training.epochs=4 training.patience=null split=random split.num_parties=2"
        )
        run_local(cfg, tmp_path / f"lam={lam}")
    caps = epoch_caps(["2"])
    runs = load([tmp_path], caps)
    assert len(runs) == 2 and all(r["setting"]["training.epochs"] == 2 for r in runs)
    expected = {}
    for lam in (0.01, 0.5):
        history = pd.read_csv(tmp_path / f"lam={lam}" / "history.csv")
        first = history[history["epoch"] < 2]
        expected[lam] = first["val_metric"].max()
    for run in runs:
        assert run["val"] == pytest.approx(expected[run["setting"]["strategy.lambda_input"]])
    (best,) = choose(runs).values()
    others = [r for r in runs if r is not best]
    assert all((best["val"], -best["ratio"]) >= (o["val"], -o["ratio"]) for o in others), (
        "the choice must have the best validation score, then the smaller ratio"
    )
    filled = with_filters(choose(runs))
    assert set(filled) == {(best["dataset"], "stg")}  # filters follow vfl, absent here


def test_epoch_caps_parse_default_and_per_dataset():
    assert epoch_caps(["40", "madelon=400"]) == {None: 40, "madelon": 400}
    assert epoch_caps([]) == {}
