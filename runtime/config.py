"""Hydra configuration: composing it, and the checks that run before any training."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from .settings import ConfigError, RunSettings

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def compose_config(overrides: str | list[str] = "") -> DictConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides (``"dataset=madelon seed=1"``)."""
    items = shlex.split(overrides) if isinstance(overrides, str) else list(overrides)
    check_overrides(items)
    register_schemas()
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="vflfs"):
        return compose(config_name="config", overrides=items)


def register_schemas() -> None:
    """Put the configuration schemas into Hydra's ConfigStore (before any composition)."""
    from vflfs.strategies.settings import store_schemas

    store_schemas()


# ``strategy.secure=...`` and ``strategy.secure_<setting>=...``: the ``secure`` group's keys
# before it existed.
OLD_SECURE = re.compile(r"^[+~]*strategy\.(secure\w*)")


def moved_secure_key(old: str) -> str:
    """The key that replaces ``strategy.<old>`` (``secure_lr`` -> ``secure.lr``)."""
    if old == "secure":
        return "secure=<none|plaintext|paillier>"
    return "secure." + old.removeprefix("secure_")


def check_overrides(overrides: list[str]) -> None:
    """Overrides of keys that have moved: a :class:`ConfigError` naming the new key."""
    for item in overrides:
        found = OLD_SECURE.match(item)
        if found:
            raise ConfigError(
                f"{item!r}: the secure layer's settings are the `secure` group now; use "
                f"{moved_secure_key(found.group(1))} (e.g. secure=paillier secure.key_bits=512)"
            )


def missing_keys(cfg: DictConfig) -> list[str]:
    """Mandatory (``???``) values left unset."""
    return sorted(OmegaConf.missing_keys(cfg))


def check_config(cfg: DictConfig) -> RunSettings:
    """Fail early, naming the key, on values every run needs; returns the run-wide settings,
    typed (each section's ranges checked by its dataclass), before any data is loaded."""
    missing = missing_keys(cfg)
    if missing:
        raise ConfigError(
            f"these config values must be set: {', '.join(missing)} "
            f"(e.g. {missing[0]}=... on the command line)"
        )
    return RunSettings.from_cfg(cfg)
