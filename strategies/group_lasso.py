"""Group lasso: standard VFL with proximal SGD on every input layer (LESS-VFL's baseline).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML (Eq. 2 and Section 5, "Group Lasso"; spec section 5): every step,
after the optimiser step, each party applies the group-lasso prox to its input-layer columns
(tau = ``strategy.lam`` x ``strategy.lr``) and the server to its input columns (tau =
``strategy.lam_server`` x ``strategy.lr``), with SGD at ``strategy.lr`` (the official code's
P-SGD). A feature is selected while its column is non-zero. With ``strategy.lasso_epochs`` = L
below ``training.epochs``, after L epochs the zero columns are removed for good (``train.prune``)
and VFL continues without prox, with ``training.optimizer`` (the official code: 150 P-SGD epochs,
then 100 Adam epochs).
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from vflfs.federation import Federation
from vflfs.ml.prox import nonzero_columns
from vflfs.ml.top import ServerModel
from vflfs.protocol import PRUNE, PruneRequest
from vflfs.runtime.settings import RunSettings
from vflfs.server_app.experiment import Experiment

from .checkpoint_hooks import resuming
from .path import PathStrategy
from .registry import register
from .result import RunResult
from .settings import typed
from .strategy import EpochCallback


@dataclass(frozen=True)
class LassoSettings:
    """``strategy.lam``, ``lam_server``, ``optimizer``, ``lr``, ``lasso_epochs`` (the meaning
    above). No defaults: conf/strategy/group_lasso.yaml holds them."""

    lam: float
    lam_server: float
    optimizer: str | None
    lr: float | None
    lasso_epochs: int | None


@register
class GroupLasso(PathStrategy):
    """Group lasso by P-SGD over VFL (Castiglia et al., ICML 2023, baseline of Section 5)."""

    name = "group_lasso"

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        super().__init__(cfg, run_settings)
        self.lasso = typed(LassoSettings, cfg.strategy, "strategy", strict=False)

    @property
    def optimizer(self) -> dict:
        """The proximal phase's optimiser (``strategy.optimizer`` and ``strategy.lr``; null:
        ``training``'s)."""
        s, t = self.lasso, self.training
        return {"name": s.optimizer or t.optimizer, "lr": s.lr or t.lr}

    def party_spec(self, experiment: Experiment, m: int) -> dict:
        spec = super().party_spec(experiment, m)
        if not self.refitting:
            spec["optimizer"] = dict(self.optimizer)
            spec["prox"] = {"lam": self.lasso.lam, "lr": self.optimizer["lr"]}
        return spec

    def make_server_model(self, experiment: Experiment) -> ServerModel:
        server = super().make_server_model(experiment)
        server.reset_optimizer(dict(self.optimizer))
        server.prox_tau = 0.0 if self.path.enabled else self.server_tau(1.0)
        return server

    def penalty_unit(self, dense: dict) -> float:
        """1 when the proximal phase's optimiser normalises its steps (Adam, AdamW), else the
        dense model's training loss.

        The prox shrinks a column by tau = lam x lr x scale after each optimiser step, and
        what keeps the column is that step: with Adam about lr per weight whatever the loss's
        size, so the penalty at which columns start to close does not follow the loss. Over
        the 7 Table III datasets (5 folds each) the loss unit put the first point at penalties
        from 0.0001 to 0.05, 450x apart, while 10% of the columns first closed between 0.34
        and 5.7: on COIL20, ISOLET and BASEHOCK, whose dense models fit their training rows,
        the 12 planned points kept 45-100% of the columns. With plain SGD the step is lr x
        gradient, which does scale with the loss."""
        if self.optimizer["name"] in ("adam", "adamw"):
            return 1.0
        return super().penalty_unit(dense)

    def server_tau(self, scale: float) -> float:
        return self.lasso.lam_server * self.optimizer["lr"] * scale

    def set_penalty(self, federation: Federation, scale: float) -> None:
        super().set_penalty(federation, scale)
        self.server.prox_tau = self.server_tau(scale)

    def current_selection(self, federation: Federation) -> tuple[list[list[int]], list[list[int]]]:
        """The parties' non-zero input columns; the components whose column of the server's
        input layer is non-zero."""
        selected, _ = super().current_selection(federation)
        layers = self.server.input_layers
        return selected, [nonzero_columns(layer.weight).cpu().numpy().tolist() for layer in layers]

    @property
    def lasso_epochs(self) -> int:
        total, lasso = self.training.epochs, self.lasso.lasso_epochs
        return total if lasso is None else min(lasso, total)

    def fit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> None:
        if self.path.enabled:
            super().fit(federation, experiment, result, on_epoch)
            return
        total, lasso = self.training.epochs, self.lasso_epochs
        # a run resumed after the pruning has its pruned models back
        if not (resuming(self) and "pruned_at_epoch" in result.extra):
            stopped = self.run_epochs(federation, experiment, result, on_epoch, 0, lasso)
            if stopped or lasso >= total:
                return
            self.prune(federation, result)
        self.run_epochs(federation, experiment, result, on_epoch, lasso, total)

    def prune(self, federation: Federation, result: RunResult) -> None:
        """Remove the zero columns everywhere, stop the prox, switch to the VFL optimiser."""
        t = self.training
        keep = [nonzero_columns(layer.weight).cpu().numpy() for layer in self.server.input_layers]
        self.server.prox_tau = 0.0
        self.server.reset_optimizer(t.optimizer_spec)
        for m, k in enumerate(keep):
            self.server.keep_components(m, k)
            self.widths[m] = len(k)
        requests = {
            m: PruneRequest(optimizer=t.optimizer, lr=t.lr, components=k)
            for m, k in enumerate(keep)
        }
        with federation.traffic.in_phase("prune"):
            replies = federation.send(PRUNE, requests)
        result.extra["pruned_at_epoch"] = self.lasso_epochs
        result.extra["components_kept"] = [len(r.components) for _, r in sorted(replies.items())]

    def components_in_use(self, m: int, reply) -> int | None:
        """Components whose column of the server's input layer is non-zero."""
        if self.refitting:
            return super().components_in_use(m, reply)
        return len(nonzero_columns(self.server.input_layers[m].weight))

    def row_extras(self) -> dict:
        if self.refitting:
            return {**super().row_extras(), "components_kept": int(sum(self.widths))}
        layers = self.server.input_layers
        kept = sum(len(nonzero_columns(layer.weight)) for layer in layers)
        return {**super().row_extras(), "components_kept": int(kept)}
