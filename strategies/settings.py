"""Typed settings of the strategies' configuration sections, read once per strategy.

A strategy builds its settings when it is constructed (:func:`~vflfs.runtime.settings.typed`:
OmegaConf's structured merge, so a value of the wrong type or a misspelt key is a
:class:`ConfigError` naming the key) and its methods read typed attributes; the run-wide
``training`` section is :class:`~vflfs.runtime.settings.TrainingSettings`, ``self.training``.
:func:`store_schemas` puts the schemas whose defaults live here into Hydra's ConfigStore: the
``secure`` group's base (``conf/secure/*.yaml`` extend it) and the regularisation path
(``strategy/path: default``, which the path strategies' YAML files name in their defaults
lists). Hydra then rejects a typo such as ``secure.keybits=512``
or ``strategy.path.pionts=3`` on the command line, before the run starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from vflfs.runtime.config import ConfigError, moved_secure_key
from vflfs.runtime.settings import schema, typed

SECURE_MODES = ("none", "plaintext", "paillier")
RANDOMNESS = ("djn", "full")
REDUCE = ("mean", "sum")
GATE_OPTIMIZERS = ("shared", "sgd")


def one_of(where: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{where} must be one of {list(choices)}, got {value!r}")


def check_budget(where: str, max_features: int | None, max_fraction: float | None) -> None:
    """A feature budget's two forms (``<where>.max_features``, ``<where>.max_fraction``)
    refused by name when out of range."""
    if max_features is not None and max_features < 1:
        raise ConfigError(
            f"{where}.max_features must be >= 1 (null: no budget), got {max_features}"
        )
    if max_fraction is not None and not 0 < max_fraction <= 1:
        raise ConfigError(
            f"{where}.max_fraction must be in (0, 1], a share of all features "
            f"(null: no budget), got {max_fraction}"
        )


def feature_budget(max_features: int | None, max_fraction: float | None, total: int) -> int | None:
    """The most features a run may keep, of its ``total``: ``max_features``, or
    ``max_fraction`` of the total (rounded down, at least one, as scikit-learn reads a
    fractional ``max_features``), whichever is smaller; None without either."""
    budgets = [] if max_features is None else [int(max_features)]
    if max_fraction is not None:
        budgets.append(max(1, int(max_fraction * total)))
    return min(budgets) if budgets else None


@dataclass(frozen=True)
class SecureConfig:
    """``secure``: the secure interactive layer (spec section 4, Algorithms 2-3;
    docs/secure_layer.md). ``conf/secure/<mode>.yaml`` selects the mode (``secure=paillier``);
    the other settings' defaults are these."""

    mode: str = "none"  # none | plaintext (the protocol unencrypted) | paillier
    key_bits: int = 2048  # the parties' and the server's Paillier keys (smaller only in tests)
    noise: float = 1.0  # std of the party's noise N on the weight gradient (hides W)
    lr: float = 0.1  # SGD step of the interactive weights (the head keeps its optimiser)
    randomness: str = "djn"  # djn (h_s^alpha, k/2-bit alpha; DJN) | full (r^n, ~1.5x slower)
    workers: int | None = None  # Paillier processes and decryption threads (null: every CPU)

    def __post_init__(self) -> None:
        one_of("secure.mode", self.mode, SECURE_MODES)
        one_of("secure.randomness", self.randomness, RANDOMNESS)
        if self.key_bits < 16:
            raise ConfigError(f"secure.key_bits must be >= 16, got {self.key_bits}")

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> SecureConfig:
        """The run's ``secure`` section; a ``strategy.secure*`` key (their place before the
        ``secure`` group) is an error naming the new key."""
        old = sorted(k for k in (cfg.get("strategy") or {}) if str(k).startswith("secure"))
        if old:
            new = ", ".join(f"strategy.{k} -> {moved_secure_key(str(k))}" for k in old)
            raise ConfigError(
                f"the secure layer's settings are the `secure` group now: {new} "
                f"(e.g. secure=paillier secure.key_bits=512)"
            )
        return typed(cls, cfg.get("secure"), "secure")


@dataclass(frozen=True)
class GateSettings:
    """The stochastic gates of ``stg`` (input features) and ``fedsdg_fs`` (input features and
    embedding components): ``strategy.sigma``, ``lambda_input``, ``lambda_embedding``,
    ``reduce``, ``gate_optimizer``, ``gate_lr``. No defaults for the first ones:
    ``conf/strategy/<name>.yaml`` holds them (the schema types them)."""

    sigma: float
    lambda_input: float
    reduce: str
    lambda_embedding: float | None = None  # fedsdg_fs's embedding-component gates
    # shared: the gates' means train with the weights' optimiser (training.optimizer);
    # sgd: plain gradient steps at gate_lr (the weights keep theirs)
    gate_optimizer: str = "shared"
    gate_lr: float | None = None

    def __post_init__(self) -> None:
        one_of("strategy.reduce", self.reduce, REDUCE)
        one_of("strategy.gate_optimizer", self.gate_optimizer, GATE_OPTIMIZERS)
        if self.gate_optimizer == "sgd" and not (self.gate_lr and self.gate_lr > 0):
            raise ConfigError(
                f"strategy.gate_optimizer=sgd needs a positive strategy.gate_lr, got "
                f"{self.gate_lr!r}; set strategy.gate_lr=0.1, say"
            )

    def gate(self, lam: float) -> dict:
        """One kind of gate's party settings at penalty ``lam``."""
        out = {"sigma": self.sigma, "lam": float(lam), "reduce": self.reduce}
        if self.gate_optimizer == "sgd":
            out.update(optimizer="sgd", lr=float(self.gate_lr))
        return out


@dataclass(frozen=True)
class StageSettings:
    """``strategy.server`` (stage 2) or ``strategy.party`` (stage 3): proximal SGD at ``lr``,
    tau = ``lam`` x ``prox_lr``, ``epochs`` over the training rows in batches of
    ``batch_size`` (None: training.batch_size). No defaults: the YAML files hold them."""

    lam: float
    lr: float
    prox_lr: float
    epochs: int
    batch_size: int | None


@dataclass(frozen=True)
class ServerStageSettings(StageSettings):
    """``strategy.server``: stage 2's proximal SGD and its path (``path_points`` 0: the fixed
    ``lam``, the paper; else lambda from ``lam`` x ``path_growth`` per point, chosen on the
    validation rows' embeddings)."""

    path_points: int
    path_growth: float


@dataclass(frozen=True)
class PartyStageSettings(StageSettings):
    """``strategy.party``: stage 3's proximal SGD and its local path (``path_points`` 0: the
    fixed ``lam``)."""

    path_points: int
    path_tolerance: float
    path_extend: int


def store_schemas() -> None:
    """Register the schemas above and the path's (defaults included) in Hydra's ConfigStore."""
    from hydra.core.config_store import ConfigStore

    from .path_choice import PathSettings

    store = ConfigStore.instance()
    store.store(group="secure", name="schema", node=schema(SecureConfig))
    store.store(group="strategy/path", name="default", node=schema(PathSettings))
