"""The typed settings: the run-wide sections, the ``secure`` group, the path's schema, the gates."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from vflfs.runtime.config import ConfigError, check_config, compose_config
from vflfs.runtime.settings import (
    DeploymentSettings,
    RunSettings,
    TrainingSettings,
    auto_batch_size,
)
from vflfs.strategies import make_strategy
from vflfs.strategies.path_choice import PathSettings
from vflfs.strategies.settings import GateSettings, SecureConfig


@pytest.mark.parametrize(
    ("strategy", "own"),
    [("stg", {}), ("fedsdg_fs", {"standard_errors": 0.5}), ("group_lasso", {})],
)
def test_the_path_defaults_are_the_schemas(strategy, own):
    """``strategy.path`` comes from PathSettings (its one place) but for what the strategy's
    YAML sets itself, then the command line; typed attributes built once."""
    cfg = compose_config(f"strategy={strategy} strategy.path.points=3")
    assert OmegaConf.to_container(cfg.strategy.path) == asdict(PathSettings(points=3, **own))
    assert make_strategy(cfg).path == PathSettings(points=3, **own)
    cfg = compose_config(f"strategy={strategy} strategy.path.standard_errors=2")
    assert make_strategy(cfg).path == PathSettings(standard_errors=2)


@pytest.mark.parametrize("mode", ["none", "plaintext", "paillier"])
def test_each_secure_option_sets_its_mode_over_the_schemas_defaults(mode):
    cfg = compose_config(f"secure={mode} secure.key_bits=512")
    assert SecureConfig.from_cfg(cfg) == SecureConfig(mode=mode, key_bits=512)
    assert make_strategy(cfg).secure.enabled == (mode != "none")


@pytest.mark.parametrize(
    "overrides",
    [
        "strategy=stg strategy.path.pionts=3",  # a misspelt key
        "strategy=stg strategy.path.points=abc",  # a value of the wrong type
        "secure.keybits=512",
        "secure.key_bits=abc",
        "secure=rsa",  # no such option
    ],
)
def test_hydra_refuses_typos_and_wrong_types(overrides):
    with pytest.raises(ConfigCompositionException):
        compose_config(overrides)


@pytest.mark.parametrize(
    ("overrides", "new"),
    [
        ("strategy.secure=paillier", "secure=<none|plaintext|paillier>"),
        ("strategy.secure_key_bits=512", "secure.key_bits"),
        ("+strategy.secure_lr=0.5", "secure.lr"),
    ],
)
def test_the_old_secure_keys_name_the_new_ones(overrides, new):
    with pytest.raises(ConfigError, match="the `secure` group") as error:
        compose_config(overrides)
    assert new in str(error.value)


def test_a_config_with_the_old_keys_is_refused_naming_the_new_ones():
    """An older run's configuration (strategy.secure_*) is not silently read as secure=none."""
    cfg = OmegaConf.create({"strategy": {"name": "vfl", "secure": "paillier", "secure_lr": 0.5}})
    with pytest.raises(ConfigError, match=r"strategy\.secure_lr -> secure\.lr"):
        SecureConfig.from_cfg(cfg)


def test_a_resolved_plain_config_builds_the_same_settings():
    """``flwr run`` reads the resolved configuration from a file (no schema): same settings."""
    cfg = compose_config("strategy=fedsdg_fs secure=plaintext strategy.path.growth=3")
    plain = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    built, again = make_strategy(cfg), make_strategy(plain)
    assert (built.path, built.secure, built.gating) == (again.path, again.secure, again.gating)
    assert built.path.growth == 3.0 and built.gating == GateSettings(0.5, 1.0, "mean", 0.1)


def test_values_are_converted_or_named_with_their_key():
    assert PathSettings.from_cfg({"points": "3", "start": 1}).points == 3
    with pytest.raises(ConfigError, match=r"strategy\.path\.points must be an integer, got 'abc'"):
        PathSettings.from_cfg({"points": "abc"})
    with pytest.raises(ConfigError, match=r"secure\.randomness must be one of"):
        SecureConfig(randomness="rsa")


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ("+training.epochz=5", r"training\.epochz"),
        ("training.lr=fast", r"training\.lr must be a number, got 'fast'"),
    ],
)
def test_a_misspelt_or_mistyped_training_key_is_named(overrides, named):
    """``training`` keeps conf/config.yaml's defaults, typed once for the run."""
    assert make_strategy(compose_config("training.epochs=5")).training.epochs == 5
    with pytest.raises(ConfigError, match=named):
        TrainingSettings.from_cfg(compose_config(overrides))


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ("training.epochs=0", r"training\.epochs must be >= 1, got 0"),
        ("training.patience=0", r"training\.patience must be >= 1"),
        ("cv.folds=0", r"cv\.folds must be >= 1"),
        ("federation.timeout=0", r"federation\.timeout must be > 0"),
        ("federation.outage_timeout=-1", r"federation\.outage_timeout must be >= 0"),
        ("federation.poll_interval=soon", r"federation\.poll_interval must be a number"),
        ("seed=-1", r"^seed must be >= 0, got -1$"),
        ("seed=abc", r"^seed must be an integer, got 'abc'; fix: seed=<integer>$"),
        ("alignment.min_samples=0", r"alignment\.min_samples must be >= 1, got 0"),
        ("alignment.workers=0", r"alignment\.workers must be >= 1, got 0"),
        ("deployment.superlink_timeout=-1", r"deployment\.superlink_timeout must be > 0"),
        ("deployment.poll_interval=0", r"deployment\.poll_interval must be > 0"),
        ("+deployment.pol_interval=0.1", r"deployment\.pol_interval"),
        ("simulation.client_cpus=abc", r"simulation\.client_cpus must be an integer, got 'abc'"),
        ("simulation.client_gpus=-1", r"simulation\.client_gpus must be >= 0"),
        ("split.num_parties=0", r"split\.num_parties must be >= 1, got 0"),
        ("split=sizes split.sizes=[a,b]", r"split\.sizes"),
        ("split=sizes split.sizes=3", r"split\.sizes must be a list, got 3; fix: 'split\.sizes=\["),
        ("federation.party_keys=/k.pub", r"federation\.party_keys must be a list, got '/k\.pub'"),
    ],
)
def test_a_value_out_of_its_range_is_refused_by_its_section(overrides, named):
    """The range rules live on the typed sections; ``check_config`` builds them once."""
    with pytest.raises(ConfigError, match=named):
        check_config(compose_config(overrides))


def test_the_run_settings_are_built_once_and_shared():
    cfg = compose_config("training.patience=null federation.timeout=30")
    settings = check_config(cfg)
    assert settings == RunSettings.from_cfg(cfg) and settings.training.patience is None
    assert settings.federation.timeout == 30.0
    assert (settings.seed, settings.alignment.min_samples, settings.simulation.client_cpus) == (
        0,
        10,
        None,
    )
    assert check_config(compose_config("deployment.superlink_timeout=null")).deployment == (
        DeploymentSettings(poll_interval=0.05, superlink_timeout=None)
    )
    assert make_strategy(cfg, settings).training is settings.training


def test_the_top_level_values_are_typed_with_the_run_settings():
    """Seed, engine, scaling and the output folder's options are one typed section: a wrong
    value is refused before any data is loaded, naming the key and the fix."""
    settings = check_config(compose_config("seed=3 checkpoint_every_s=5 resume=true"))
    assert settings.seed == 3 and settings.top.checkpoint_every_s == 5.0
    assert (settings.top.engine, settings.top.scaling, settings.top.rerun) == (
        "local",
        "auto",
        False,
    )
    assert settings.top.resume is True
    for overrides, named in [
        ("rerun=no", r"rerun must be true or false, got 'no'; fix: rerun=true"),
        ("resume=1", r"resume must be true or false, got 1"),
        ("checkpoint_every_s=-1", r"checkpoint_every_s must be a number of seconds >= 0"),
        ("checkpoint_every_s=true", r"checkpoint_every_s must be a number of seconds"),
        ("engine=ray", r"engine must be 'local' or 'simulation', got 'ray'"),
        ("seed=-1", r"seed must be >= 0"),
    ]:
        with pytest.raises(ConfigError, match=named):
            check_config(compose_config(overrides))


def test_an_auto_batch_gives_an_epoch_of_few_rows_several_steps():
    """``training.batch_size=auto`` (the default): 128 rows where that makes 8 steps an epoch
    or more, else the batch of 8 steps, at least 16 rows; a number is kept as it is."""
    rows = [10, 100, 128, 500, 896, 897, 5000]
    assert [auto_batch_size(n) for n in rows] == [16, 16, 16, 63, 112, 128, 128]
    auto = check_config(compose_config()).training
    assert auto.batch_size == "auto" and auto.for_rows(500).batch_size == 63
    fixed = check_config(compose_config("training.batch_size=64")).training
    assert fixed.batch_size == 64 and fixed.for_rows(100) is fixed
    assert check_config(compose_config("training.batch_size='32'")).training.batch_size == 32
    for overrides, named in [
        (
            "training.batch_size=big",
            r"training\.batch_size must be a number of rows or auto, "
            r"got 'big'; fix: training\.batch_size=auto or training\.batch_size=<rows>",
        ),
        ("training.batch_size=0", r"training\.batch_size must be >= 1, got 0"),
    ]:
        with pytest.raises(ConfigError, match=named):
            check_config(compose_config(overrides))
