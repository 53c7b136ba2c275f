"""Stochastic gates on the input features only: FedSDG-FS's "original-Gate" baseline.

Yamada, Lindenbaum, Negahban and Kluger, "Feature Selection using Stochastic Gates", ICML 2020,
applied at each party as in Li et al., "FedSDG-FS", INFOCOM 2023 (Sec. VI, original-Gate):
every party multiplies its inputs by Gaussian stochastic gates s = clamp(mu + eps, 0, 1) and adds
lambda * mean Phi(mu / sigma) to its loss; no importance initialisation, no embedding gates.
A feature is selected when its evaluation gate clamp(mu, 0, 1) is open (spec section 4).
By default lambda follows a regularisation path from a dense warm-up, the sparsest model
within the validation tolerance is chosen and refit (:mod:`vflfs.strategies.path`);
``strategy.path.enabled=false`` trains at the fixed lambda instead.
"""

from __future__ import annotations

from omegaconf import DictConfig

from vflfs.runtime.settings import RunSettings
from vflfs.server_app.experiment import Experiment

from .path import PathStrategy
from .registry import register
from .settings import GateSettings, typed


@register
class STG(PathStrategy):
    """VFL with Gaussian stochastic gates on every party's input features."""

    name = "stg"

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        super().__init__(cfg, run_settings)
        self.gating = typed(GateSettings, cfg.strategy, "strategy", strict=False)

    def gates(self) -> dict:
        return {"input": self.gating.gate(self.gating.lambda_input)}

    def party_spec(self, experiment: Experiment, m: int) -> dict:
        spec = super().party_spec(experiment, m)
        if not self.refitting:
            spec["gates"] = self.gates()
            spec["gates"]["input"]["lam"] *= input_share(experiment, m, spec["gates"]["input"])
        return spec


def input_share(experiment: Experiment, m: int, gate: dict) -> float:
    """Party ``m``'s factor on its input gates' lambda: M d_m / D (d_m: its features, D: all).

    Each party's regulariser is the mean over its own gates, so without it a gate of a party
    with few columns would weigh more than one of a party with many, and the relevant features
    of a small party would close before the noise of a large one. With it every input gate
    weighs lambda M / D, whatever the split (parties of equal size: a factor of 1).
    """
    if gate.get("reduce", "mean") != "mean":
        return 1.0
    sizes = [len(c) for c in experiment.columns]
    total = sum(sizes)
    return len(sizes) * sizes[m] / total if total else 1.0
