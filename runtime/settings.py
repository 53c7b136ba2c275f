"""Typed views of configuration sections, built once and read as attributes.

:func:`typed` turns a section (a DictConfig or a dict) into a frozen dataclass by OmegaConf's
structured merge: a value of the wrong type or a misspelt key is a :class:`ConfigError` naming
``<section>.<key>``. The run-wide sections here (``training``, ``samples``, ``cv``) take their
defaults from ``conf/config.yaml``, the one place they are written; the dataclasses only type
them. The strategies' own sections are in :mod:`vflfs.strategies.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .config import ConfigError

T = TypeVar("T")


def typed(cls: type[T], section: Any, where: str, *, strict: bool = True) -> T:
    """``section`` (a DictConfig, a dict or None) as a ``cls`` dataclass: its defaults for the
    keys it leaves out, values converted to the fields' types (``"3"`` for an int is 3).

    ``strict``: a key that is no field of ``cls`` is an error (else ignored: a strategy
    section may hold other strategies' keys, as sweeps over strategies set them). Errors are
    :class:`ConfigError` naming ``where.<key>``."""
    if isinstance(section, DictConfig):
        values = OmegaConf.to_container(section, resolve=True)
    else:
        values = dict(section or {})
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - names)
    if unknown and strict:
        named = ", ".join(f"{where}.{k}" for k in unknown)
        raise ConfigError(
            f"unknown {where} keys {unknown} ({named}); the settings are {sorted(names)}"
        )
    values = {k: v for k, v in values.items() if k in names}
    try:
        return OmegaConf.to_object(OmegaConf.merge(schema(cls), values))  # type: ignore[return-value]
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", "") or ""
        what = str(getattr(error, "msg", error)).splitlines()[0]
        raise ConfigError(f"{where}.{key}: {what}; fix: {where}.{key}=<value>") from None


def schema(cls: type) -> DictConfig:
    """``cls``'s structured config, writable (a frozen dataclass would make every option
    that sets one of its values fail)."""
    node = OmegaConf.structured(cls)
    OmegaConf.set_readonly(node, False)
    return node


@dataclass(frozen=True)
class TrainingSettings:
    """``training``: the split-learning step protocol's settings (spec section 3)."""

    epochs: int
    batch_size: int
    optimizer: str  # the weights' optimiser, on the parties and the server
    lr: float
    local_steps: int  # K batches per round (FedBCD; 1: the exact protocol)
    patience: int | None  # epochs without a better validation score that stop (None: never)
    patience_steps: int  # ... and at least this many optimiser steps
    score_train: bool  # also score the training rows every epoch
    eval_chunk: int  # rows per evaluation chunk on the parties

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> TrainingSettings:
        return typed(cls, cfg.get("training"), "training")

    @property
    def optimizer_spec(self) -> dict:
        """The optimiser as the parties' and the server's models take it."""
        return {"name": self.optimizer, "lr": self.lr}


@dataclass(frozen=True)
class SampleSettings:
    """``samples``: how the rows are split into training, validation and test rows."""

    test_fraction: float
    val_fraction: float  # share of the training rows
    stratify: bool
    official_split: bool  # keep a dataset's official test rows where it has them

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> SampleSettings:
        return typed(cls, cfg.get("samples"), "samples")


@dataclass(frozen=True)
class CrossValidationSettings:
    """``cv``: k-fold cross-validation (``folds`` > 1), its folds seeded by ``seed``."""

    folds: int
    seed: int | None  # None: the run's seed

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> CrossValidationSettings:
        return typed(cls, cfg.get("cv"), "cv")

    @property
    def enabled(self) -> bool:
        return self.folds > 1
