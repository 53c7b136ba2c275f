"""Hydra configuration: composing it, and the checks that run before any training."""

from __future__ import annotations

import shlex
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names it and the fix."""


def compose_config(overrides: str | list[str] = "") -> DictConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides (``"dataset=madelon seed=1"``)."""
    items = shlex.split(overrides) if isinstance(overrides, str) else list(overrides)
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="vflfs"):
        return compose(config_name="config", overrides=items)


def missing_keys(cfg: DictConfig) -> list[str]:
    """Mandatory (``???``) values left unset."""
    return sorted(OmegaConf.missing_keys(cfg))


def check_config(cfg: DictConfig) -> None:
    """Fail early on values every run needs."""
    missing = missing_keys(cfg)
    if missing:
        raise ConfigError(
            f"these config values must be set: {', '.join(missing)} "
            f"(e.g. {missing[0]}=... on the command line)"
        )
    engine = str(cfg.get("engine", "simulation"))
    if engine not in ("simulation", "local"):
        raise ConfigError(f"engine must be 'simulation' or 'local', got {engine!r}")
    t = cfg.training
    for key in ("epochs", "batch_size", "local_steps"):
        if int(t[key]) < 1:
            raise ConfigError(f"training.{key} must be >= 1, got {t[key]}")
    if float(t.lr) <= 0:
        raise ConfigError(f"training.lr must be > 0, got {t.lr}")
    if int(cfg.split.num_parties) < 1:
        raise ConfigError(f"split.num_parties must be >= 1, got {cfg.split.num_parties}")
