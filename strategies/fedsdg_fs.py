"""FedSDG-FS: stochastic dual gates with a secure Gini importance initialisation.

Li, Wang, Xu, Tang and Zhou, "FedSDG-FS: Efficient and Secure Feature Selection for Vertical
Federated Learning", INFOCOM 2023. Each party gates its input features (Gaussian stochastic
gates, Eq. 4) and its embedding components; the loss adds
lambda_input * mean Phi(mu / sigma) + lambda_embedding * mean Phi(omega / sigma). Before
training, the Gini impurity of every feature is computed under Paillier encryption (Algorithm
1, :mod:`vflfs.strategies.gini`) and initialises the input gates: by default the globally best
fraction p of features start at mu = 0.9 and the rest at 0.1 (the authors' code); mode
``inverse`` sets mu proportional to 1 / G (the paper's text). Closed embedding components are
not transmitted, which is where FedSDG-FS saves communication.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import Federation
from vflfs.protocol import INIT_GATES, InitGatesRequest
from vflfs.runtime.config import ConfigError
from vflfs.runtime.settings import RunSettings
from vflfs.server_app.experiment import Experiment

from .path_progress import Ranking
from .registry import register
from .result import RunResult
from .settings import typed
from .stg import STG


@dataclass(frozen=True)
class GateInit:
    """How ``fedsdg_fs`` initialises the input gates: ``strategy.init`` (``gini`` | ``uniform``),
    ``init_mode`` and ``top_fraction`` (:func:`gate_init`). No defaults: its YAML holds them."""

    init: str
    init_mode: str
    top_fraction: float


def gate_init(scores: list[np.ndarray], mode: str, fraction: float) -> list[np.ndarray]:
    """Input-gate mu per party from every party's Gini scores (smaller = more important)."""
    flat = np.concatenate(scores)
    if mode == "top_fraction":
        order = np.argsort(flat, kind="stable")
        mu = np.full(len(flat), 0.1, np.float32)
        mu[order[: int(round(fraction * len(flat)))]] = 0.9
    elif mode == "inverse":
        inv = 1.0 / np.maximum(flat, 1e-12)
        mu = (inv / inv.max()).astype(np.float32)
    else:
        raise ValueError(f"strategy.init_mode must be 'top_fraction' or 'inverse', got {mode!r}")
    bounds = np.cumsum([0, *[len(s) for s in scores]])
    return [mu[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@register
class FedSDGFS(STG):
    """Dual stochastic gates (input features and embedding components), Gini-initialised."""

    name = "fedsdg_fs"

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        super().__init__(cfg, run_settings)
        self.initial = typed(GateInit, cfg.strategy, "strategy", strict=False)
        if self.gating.lambda_embedding is None:
            raise ConfigError("fedsdg_fs needs strategy.lambda_embedding (a number)")

    def gates(self) -> dict:
        g = self.gating
        return {"input": g.gate(g.lambda_input), "embedding": g.gate(g.lambda_embedding)}

    def before_training(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> None:
        """The Gini phase: secure importance initialisation of the input gates."""
        init = self.initial
        if init.init == "gini":
            from .gini import secure_gini

            with federation.traffic.in_phase("gini"):
                scores = secure_gini(federation, experiment, self.cfg.strategy.get("gini"))
                inits = gate_init(scores, init.init_mode, init.top_fraction)
                requests = {m: InitGatesRequest(mu=mu) for m, mu in enumerate(inits)}
                federation.send(INIT_GATES, requests)
            result.extra["gini"] = [np.asarray(g).tolist() for g in scores]
        elif init.init != "uniform":
            raise ValueError(f"strategy.init must be 'gini' or 'uniform', got {init.init!r}")

    def prior_ranking(self, result: RunResult) -> Ranking | None:
        """The secure Gini scores' ranking (:func:`gini_ranking`), probed after the path."""
        return gini_ranking(result.extra.get("gini"))


def gini_ranking(scores: list[list[float]] | None) -> Ranking | None:
    """Per-party Gini scores as a ranking, lowest impurity first; None without scores (a run
    with ``init=uniform`` has no Gini phase)."""
    if not scores:
        return None
    return Ranking.of_scores([-np.asarray(g, np.float64) for g in scores])
