"""The LESS-VFL reproduction's experiments: the paper-protocol ones and their *_defaults."""

from __future__ import annotations

import pytest

from vflfs.runtime.config import compose_config
from vflfs.strategies.registry import strategy_class


@pytest.mark.parametrize(
    "setting", ["less_vfl_phishing", "less_vfl_sylva", "less_vfl_sylva_uneven"]
)
def test_defaults_keep_the_papers_data_settings(setting):
    """Same data, split, noise, model, batch and epoch cap as the paper-protocol experiment;
    early stopping is the project's default."""
    job = compose_config([f"+experiment={setting}_defaults", "strategy=less_vfl"])
    paper = compose_config([f"+experiment={setting}", "strategy=less_vfl"])
    for key in ("dataset", "split", "noise", "model", "samples"):
        assert job[key] == paper[key], key
    assert job.training.batch_size == paper.training.batch_size == 1000
    assert job.training.epochs == paper.training.epochs == 40
    assert paper.training.patience is None and job.training.patience == 10
    assert job.strategy != paper.strategy  # the paper's protocol: tuned, fixed lambda_m


@pytest.mark.parametrize("strategy", ["group_lasso", "local_lasso", "less_vfl"])
def test_defaults_take_each_strategys_default_configuration(strategy):
    """Nothing is chosen per dataset: the strategy section is conf/strategy/<name>.yaml's."""
    job = compose_config(["+experiment=less_vfl_phishing_defaults", f"strategy={strategy}"])
    plain = compose_config(["dataset=phishing", f"strategy={strategy}"])
    assert job.strategy == plain.strategy


@pytest.mark.parametrize("setting", ["less_vfl_phishing", "less_vfl_sylva_uneven_defaults"])
def test_every_strategy_of_the_sweep_reads_its_settings(setting):
    """The sweep's strategies share one strategy section: each must accept it (local lasso
    reads LESS-VFL's keys; group lasso its own and the path's)."""
    for strategy in ["vfl", "group_lasso", "local_lasso", "less_vfl"]:
        cfg = compose_config([f"+experiment={setting}", f"strategy={strategy}"])
        built = strategy_class(strategy)(cfg)
        assert built.name == strategy
