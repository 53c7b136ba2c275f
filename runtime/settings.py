"""Typed views of configuration sections, built once and read as attributes.

:func:`typed` turns a section (a DictConfig or a dict) into a frozen dataclass by OmegaConf's
structured merge: a value of the wrong type or a misspelt key is a :class:`ConfigError` naming
``<section>.<key>``, and each dataclass's ``__post_init__`` checks its values' ranges. The
run-wide sections here (``training``, ``samples``, ``cv``, ``federation``, ``split``,
``alignment``, ``deployment``, ``simulation``) and the top-level values (``seed``, ``engine``,
``scaling``, ``rerun``, ``resume``, ``checkpoint_every_s``) take their defaults from
``conf/config.yaml`` and ``conf/split/``, the one place they are written; the dataclasses
type them and hold their rules. :class:`RunSettings` is all of them, typed once per run
(:func:`~vflfs.runtime.config.check_config`, before any data is loaded) and shared by the
run's experiment, strategy, alignment, federation and engine. The strategies' own sections are
in :mod:`vflfs.strategies.settings`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException, ValidationError

from vflfs.datasets.scaling import SCALINGS

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names it and the fix."""


# A numeric field's annotation -> what its value must be (an integer, a number)
NUMBER_KINDS = {
    "int": "integer",
    "int | None": "integer",
    "float": "number",
    "float | None": "number",
}


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
    types = {f.name: f.type for f in fields(cls)}  # type: ignore[arg-type]
    names = set(types)
    unknown = sorted(set(values) - names)
    if unknown and strict:
        named = ", ".join(dotted(where, k) for k in unknown)
        raise ConfigError(
            f"unknown {where} keys {unknown} ({named}); the settings are {sorted(names)}"
        )
    values = {k: v for k, v in values.items() if k in names}
    try:
        return OmegaConf.to_object(OmegaConf.merge(schema(cls), values))  # type: ignore[return-value]
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", "") or ""
        kind = NUMBER_KINDS.get(str(types.get(key)))
        if kind and isinstance(error, ValidationError) and key in values:
            name, article = dotted(where, key), "an" if kind == "integer" else "a"
            raise ConfigError(
                f"{name} must be {article} {kind}, got {values[key]!r}; fix: {name}=<{kind}>"
            ) from None
        what = str(getattr(error, "msg", error)).splitlines()[0]
        name = dotted(where, key)
        if str(types.get(key, "")).startswith("list[") and key in values:
            raise ConfigError(
                f"{name} must be a list, got {values[key]!r}; fix: '{name}=[first,second]' "
                f"(quoted for the shell), or {name}=null"
            ) from None
        raise ConfigError(f"{name}: {what}; fix: {name}=<value>") from None


def dotted(where: str, key: str) -> str:
    """``where.key``, or ``key`` for a top-level value (``where`` empty)."""
    return f"{where}.{key}" if where else key


S = TypeVar("S", bound="Section")


class Section:
    """A run-wide section of the config (``cfg.<section>``), typed by its dataclass."""

    section = ""  # its key in the config ("": the config's top level)

    @classmethod
    def from_cfg(cls: type[S], cfg: DictConfig) -> S:
        if cls.section:
            return typed(cls, cfg.get(cls.section), cls.section)
        top = {f.name: cfg.get(f.name) for f in fields(cls) if f.name in cfg}  # type: ignore[arg-type]
        return typed(cls, top, "")

    def key(self, name: str) -> str:
        """The config key of the field ``name`` (``<section>.<name>``)."""
        return dotted(self.section, name)

    def at_least(self, **lows: float) -> None:
        """Each field named in ``lows`` is >= its low (a None, where the field's type allows
        it, is left alone); else a :class:`ConfigError` naming ``<section>.<field>``."""
        for name, low in lows.items():
            value = getattr(self, name)
            if value is not None and value < low:
                raise ConfigError(f"{self.key(name)} must be >= {low}, got {value}")

    def above(self, *names: str) -> None:
        """The fields ``names`` are > 0 (a None is left alone); else a :class:`ConfigError`
        naming ``<section>.<field>``."""
        for name in names:
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{self.key(name)} must be > 0, got {value}")


def schema(cls: type) -> DictConfig:
    """``cls``'s structured config, writable (a frozen dataclass would make every option
    that sets one of its values fail)."""
    node = OmegaConf.structured(cls)
    OmegaConf.set_readonly(node, False)
    return node


# training.batch_size=auto: batches of AUTO_BATCH rows, unless that leaves an epoch fewer than
# AUTO_MIN_STEPS optimiser steps; then the batch that gives it that many, of at least
# AUTO_MIN_BATCH rows. On a few hundred rows one or two steps an epoch leave the path's points
# and the lasso's proximal steps too few updates (docs/selection_limits.md).
AUTO = "auto"
AUTO_BATCH, AUTO_MIN_STEPS, AUTO_MIN_BATCH = 128, 8, 16


def auto_batch_size(rows: int) -> int:
    """The ``auto`` batch size for ``rows`` training rows: 128 from 897 rows up (8 steps an
    epoch or more), ceil(rows / 8) below, never under 16 (e.g. 16 for 128 rows, 63 for 500)."""
    if math.ceil(rows / AUTO_BATCH) >= AUTO_MIN_STEPS:
        return AUTO_BATCH
    return max(AUTO_MIN_BATCH, math.ceil(rows / AUTO_MIN_STEPS))


@dataclass(frozen=True)
class TrainingSettings(Section):
    """``training``: the split-learning step protocol's settings (spec section 3)."""

    section = "training"

    epochs: int
    batch_size: int | str  # rows per batch, or "auto" (:func:`auto_batch_size`)
    optimizer: str  # the weights' optimiser, on the parties and the server
    lr: float
    local_steps: int  # K batches per round (FedBCD; 1: the exact protocol)
    patience: int | None  # epochs without a better validation score that stop (None: never)
    patience_steps: int  # ... and at least this many optimiser steps
    score_train: bool  # also score the training rows every epoch
    eval_chunk: int  # rows per evaluation chunk on the parties

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, str):
            size = self.batch_size.strip().lower()
            if size != AUTO and not size.isdigit():
                name = self.key("batch_size")
                raise ConfigError(
                    f"{name} must be a number of rows or auto, got {self.batch_size!r}; "
                    f"fix: {name}=auto or {name}=<rows>"
                )
            object.__setattr__(self, "batch_size", AUTO if size == AUTO else int(size))
        if self.batch_size != AUTO:
            self.at_least(batch_size=1)
        self.at_least(
            epochs=1,
            local_steps=1,
            patience=1,
            patience_steps=0,
            eval_chunk=1,
        )
        self.above("lr")

    def for_rows(self, rows: int) -> TrainingSettings:
        """These settings for ``rows`` training rows: an ``auto`` batch size resolved."""
        if self.batch_size != AUTO:
            return self
        return replace(self, batch_size=auto_batch_size(rows))

    @property
    def optimizer_spec(self) -> dict:
        """The optimiser as the parties' and the server's models take it."""
        return {"name": self.optimizer, "lr": self.lr}


@dataclass(frozen=True)
class SampleSettings(Section):
    """``samples``: how the rows are split into training, validation and test rows."""

    section = "samples"

    test_fraction: float
    val_fraction: float  # share of the training rows
    stratify: bool
    official_split: bool  # keep a dataset's official test rows where it has them


@dataclass(frozen=True)
class CrossValidationSettings(Section):
    """``cv``: k-fold cross-validation (``folds`` > 1), its folds seeded by ``seed``."""

    section = "cv"

    folds: int
    seed: int | None  # None: the run's seed

    def __post_init__(self) -> None:
        self.at_least(folds=1)

    @property
    def enabled(self) -> bool:
        return self.folds > 1


@dataclass(frozen=True)
class FederationSettings(Section):
    """``federation``: how long the server waits for the parties, and how often it polls."""

    section = "federation"

    timeout: float  # seconds to wait for a party's reply
    connect_timeout: float  # seconds to wait for every party's node at start
    outage_timeout: float  # seconds a party may be unreachable (0: a lost request ends the run)
    poll_interval: float
    # One public key per partition (a .pub file's path or its PEM text), or None;
    # :mod:`vflfs.server_app.identity` loads and checks them
    party_keys: list[str] | None = None

    def __post_init__(self) -> None:
        self.above("timeout", "connect_timeout")
        self.at_least(outage_timeout=0, poll_interval=0)


@dataclass(frozen=True)
class SplitSettings(Section):
    """``split``: how the columns are dealt out to the parties (``conf/split/``)."""

    section = "split"

    kind: str  # even, random, sizes, columns, image-rows
    num_parties: int
    sizes: list[int] | None = None  # split=sizes: each party's column count, contiguous
    columns: Any = None  # split=columns: each party's list of column indices

    def __post_init__(self) -> None:
        self.at_least(num_parties=1)


@dataclass(frozen=True)
class AlignmentSettings(Section):
    """``alignment``: sample alignment of per-party files (``dataset=party_files``)."""

    section = "alignment"

    min_samples: int  # the fewest samples the labels file and every party must share
    workers: int | None  # CPU processes for the elliptic-curve work (None: every CPU)

    def __post_init__(self) -> None:
        self.at_least(min_samples=1, workers=1)


@dataclass(frozen=True)
class DeploymentSettings(Section):
    """``deployment``: the server's settings in Flower's deployment engine."""

    section = "deployment"

    poll_interval: float  # seconds between polls for replies (each an HTTP request)
    superlink_timeout: float | None  # seconds of refused connections that end the run

    def __post_init__(self) -> None:
        self.above("poll_interval", "superlink_timeout")


@dataclass(frozen=True)
class SimulationSettings(Section):
    """``simulation``: Ray resources per party in Flower's simulation engine."""

    section = "simulation"

    client_cpus: int | None  # None: every CPU (one actor)
    client_gpus: float | None  # None: a share of the GPUs when there are any

    def __post_init__(self) -> None:
        self.at_least(client_cpus=1, client_gpus=0)


# vflfs-run's engines: ``local`` (the ServerApp logic and the real ClientApp over an in-process
# grid) and ``simulation`` (``flwr run`` on a SuperLink of its own, parties in Ray actors).
ENGINES = ("local", "simulation")


@dataclass(frozen=True)
class TopLevelSettings(Section):
    """The config's top-level values that every run reads: its seed, its engine, how its
    columns are scaled, and what happens to its output folder (``rerun``, ``resume``,
    ``checkpoint_every_s``)."""

    section = ""  # the config's top level

    # conf/config.yaml sets each; a default here reads a config written before its key
    # existed (a checkpoint at every boundary is the safe reading of a missing interval)
    seed: int  # seeds the splits, the models and the parties' noise
    engine: str = "local"
    scaling: str = "auto"
    rerun: bool = False  # run again where the output folder holds a run
    resume: bool = False  # continue the unfinished run from its checkpoint
    checkpoint_every_s: float = 0.0  # seconds between checkpoints (0: every epoch boundary)

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> TopLevelSettings:
        # Strictly true or false: OmegaConf would read the string "no" as false, where the
        # code that reads the config as given would take it for true.
        for key in ("rerun", "resume"):
            if not isinstance(cfg.get(key, False), bool):
                raise ConfigError(
                    f"{key} must be true or false, got {cfg.get(key)!r}; fix: {key}=true"
                )
        every = cfg.get("checkpoint_every_s", 0)
        if isinstance(every, bool) or not isinstance(every, int | float) or not every >= 0:
            raise ConfigError(
                f"checkpoint_every_s must be a number of seconds >= 0, got {every!r}; fix: "
                "e.g. checkpoint_every_s=10, or 0 for a checkpoint at every epoch boundary"
            )
        return super().from_cfg(cfg)

    def __post_init__(self) -> None:
        self.at_least(seed=0)
        if self.engine not in ENGINES:
            raise ConfigError(
                f"engine must be 'local' or 'simulation', got {self.engine!r}; fix: engine=local"
            )
        if self.scaling not in SCALINGS:
            raise ConfigError(
                f"scaling must be one of {', '.join(SCALINGS)}, got {self.scaling!r}; fix: "
                "scaling=auto"
            )


@dataclass(frozen=True)
class RunSettings:
    """The run-wide sections and ``seed``, typed once per run and shared by its experiment,
    strategy, alignment, federation and engine."""

    training: TrainingSettings
    samples: SampleSettings
    cv: CrossValidationSettings
    federation: FederationSettings
    split: SplitSettings
    alignment: AlignmentSettings
    deployment: DeploymentSettings
    simulation: SimulationSettings
    top: TopLevelSettings  # seed, engine, scaling, rerun, resume, checkpoint_every_s

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> RunSettings:
        return cls(
            training=TrainingSettings.from_cfg(cfg),
            samples=SampleSettings.from_cfg(cfg),
            cv=CrossValidationSettings.from_cfg(cfg),
            federation=FederationSettings.from_cfg(cfg),
            split=SplitSettings.from_cfg(cfg),
            alignment=AlignmentSettings.from_cfg(cfg),
            deployment=DeploymentSettings.from_cfg(cfg),
            simulation=SimulationSettings.from_cfg(cfg),
            top=TopLevelSettings.from_cfg(cfg),
        )

    @property
    def seed(self) -> int:
        return self.top.seed
