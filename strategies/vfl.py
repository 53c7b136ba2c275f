"""Standard vertical federated learning on all features: the all-features baseline.

The split-learning protocol of spec section 3 (as in Liu et al., "Vertical Federated Learning:
Concepts, Advances and Challenges", 2024): each step the server sends batch indices, parties
return embeddings, the server steps its top model and returns each party the gradient of the
loss with respect to its embedding. The gradient of step t travels with the indices of step t+1.
With ``training.local_steps = K`` the parties embed K batches per round and apply K (slightly
stale) gradients on the next round (FedBCD, Liu et al. 2022), kept valid by
:mod:`vflfs.ml.stale_gradients`; :mod:`.local_steps` halves a K whose training loss still
blows up. Early stopping on validation.
"""

from __future__ import annotations

import math
import uuid

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import MB, Federation
from vflfs.ml.batches import chunked, epoch_batches
from vflfs.ml.devices import resolve_device
from vflfs.ml.models import TopSpec
from vflfs.ml.stale_gradients import round_learning_rate
from vflfs.ml.top import ServerModel
from vflfs.protocol import IMPORTANCE, SETUP, BatchPlan, Body, SetupReply, SetupRequest
from vflfs.runtime.config import ConfigError
from vflfs.runtime.settings import RunSettings
from vflfs.server_app.experiment import Experiment

from .checkpoint import LoopState
from .checkpoint_hooks import (
    epoch_done,
    parties_set_up,
    resumed_loop,
    resuming,
    snapshot_asked,
    steps_sent,
)
from .early_stopping import EarlyStopping, learned_level, lowest_val_loss
from .interactive import InteractiveLayer, make_layer
from .local_steps import LocalSteps
from .registry import register
from .result import PartyReport, RunResult
from .settings import SecureConfig
from .stall import RESTART_SEED, StallRecovery, lr_scale, restarted
from .strategy import EpochCallback, Strategy, log


@register
class VFL(StallRecovery, EarlyStopping, Strategy):
    """Standard VFL (split learning) with all features."""

    name = "vfl"
    layer: InteractiveLayer  # the interactive layer: plain, or secure (secure.mode)
    local: LocalSteps  # the K local steps in use (lowered if they blow up)
    # per party, the curvature that goes down with the pending gradients (K > 1; else None)
    curvature: list[np.ndarray] | None = None
    uploaded_floats = 0  # training-row embedding floats the parties uploaded (analytic count)
    stage = "dense"  # the history's "stage" column
    # the epoch whose batches are the training rows' shuffle 0 (a path's dense refit: its own
    # first epoch, so that it draws the batches a run of strategy=vfl draws)
    shuffle_origin = 0
    val_losses: np.ndarray | None = None  # each validation sample's loss at the last epoch
    # ... at the window's lowest mean validation loss: what paired model choices compare, so
    # that a model trained on past its loss minimum (more confident, same accuracy) is not
    # judged worse than one stopped earlier
    val_losses_at_lowest = None

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        super().__init__(cfg, run_settings)
        self.secure = SecureConfig.from_cfg(cfg)  # the interactive layer's settings
        if self.secure.enabled and self.training.local_steps != 1:
            raise ConfigError(
                f"the secure layer (secure={self.secure.mode}) needs training.local_steps=1, "
                f"got {self.training.local_steps}"
            )

    # -- setup ----------------------------------------------------------------------------
    def party_spec(self, experiment: Experiment, m: int) -> dict:
        """Party ``m``'s setup instructions; subclasses add their own keys."""
        return experiment.party_spec(m)

    def configure(self, federation: Federation, experiment: Experiment) -> RunResult:
        self.training = experiment.training  # an ``auto`` batch size resolved on its rows
        replies = self.setup_parties(federation, experiment)
        result = RunResult(strategy=self.name, metric=experiment.task.metric_name)
        for m in range(experiment.num_parties):
            r = replies[m]
            result.parties.append(
                PartyReport(
                    index=m,
                    columns=experiment.columns[m].tolist(),
                    n_features=int(r.n_features),
                    spurious=np.asarray(r.spurious).tolist(),
                    device=str(r.device),
                    selected=list(range(int(r.n_features))),
                )
            )
        self.widths = self.embedding_sizes(experiment)  # each party's embedding size
        self.uploaded_floats = 0
        t = self.training
        steps = -(-len(experiment.splits.train) // t.batch_size)
        self.local = LocalSteps(t.local_steps, steps)
        self.server = self.make_server_model(experiment)
        self.layer = make_layer(self.secure, federation, experiment, self.server)
        result.extra["server_device"] = str(self.server.device)
        return result

    def setup_parties(
        self, federation: Federation, experiment: Experiment
    ) -> dict[int, SetupReply]:
        """The setup message: each party builds its data view and a fresh model from
        :meth:`party_spec` (a new nonce: any earlier state of the run is replaced)."""
        splits = experiment.splits
        eval_rows = np.concatenate(list(experiment.eval_sets().values()))
        requests = {
            m: SetupRequest(
                spec=restarted(self.party_spec(experiment, m), self.restarts),
                nonce=uuid.uuid4().hex,
                train_rows=splits.train,
                eval_rows=eval_rows,
            )
            for m in range(experiment.num_parties)
        }
        parties_set_up(self, {m: r.nonce for m, r in requests.items()})
        return federation.send(SETUP, requests)

    def embedding_sizes(self, experiment: Experiment) -> list[int]:
        size = int(self.cfg.model.bottom.embedding_size)
        return [size] * experiment.num_parties

    def make_server_model(self, experiment: Experiment) -> ServerModel:
        t = self.training
        return ServerModel(
            experiment.task,
            self.widths,
            TopSpec.from_dict(dict(self.cfg.model.top)),
            {"name": t.optimizer, "lr": t.lr * lr_scale(self.restarts)},
            experiment.seed + RESTART_SEED * self.restarts,
            resolve_device(str(self.cfg.device), 0),
        )

    def stage_server_model(self, experiment: Experiment) -> ServerModel:
        """A fresh top model for what the run trains now (a restart builds one too)."""
        return self.make_server_model(experiment)

    def finish(self, federation: Federation, experiment: Experiment, result: RunResult) -> None:
        """Ask each party how much its model uses each input feature (for the report)."""
        result.importance.extend(party_importance(federation))

    # -- training -------------------------------------------------------------------------
    def exchange(
        self,
        federation: Federation,
        grads: list[list[np.ndarray]],
        plan: BatchPlan | None,
        evaluate: bool,
    ) -> dict[int, Body]:
        """One round-trip of the layer's step: the last gradients go down with the next
        batches' plan (and, at an epoch boundary, the evaluation request); embeddings come
        back."""
        # an idle party has no batch and so no gradient pending (InteractiveLayer.idle)
        grads = [[] if m in self.layer.idle else g for m, g in enumerate(grads)]
        steps_sent(self, grads)  # the checkpoints count each party's gradient steps
        curvature, self.curvature = self.curvature, None
        snapshot = snapshot_asked(self)  # a checkpoint of this boundary: the parties save first
        return self.layer.exchange(federation, grads, plan, evaluate, curvature, snapshot)

    def server_steps(
        self, experiment: Experiment, replies: dict[int, Body], batches: list[np.ndarray]
    ) -> tuple[list[float], list[list[np.ndarray]]]:
        """The top model's steps on the returned embeddings, through the interactive layer;
        the gradients for each party (batch k's from the top model after its first k steps:
        with K local steps, later batches carry what the top model learnt from earlier ones;
        docs/deployment.md compares taking all K before the steps).

        A round of K > 1 batches keeps its stale gradients valid
        (:mod:`vflfs.ml.stale_gradients`): the top model steps at ``lr / sqrt(K)``, and each
        gradient goes down with the loss's curvature along it (:attr:`curvature`)."""
        losses: list[float] = []
        parties = experiment.num_parties  # an idle party's reply is not among them
        grads: list[list[np.ndarray]] = [[] for _ in range(parties)]
        curvature: list[list[float]] = [[] for _ in range(parties)]
        local = len(batches) > 1
        with round_learning_rate(self.server.optimizer, len(batches)):
            for k, rows in enumerate(batches):
                batch = self.layer.forward(replies, k, len(rows))
                self.uploaded_floats += batch.uploaded
                if local:  # a round's first batch is applied where it was embedded: no need
                    ks = batch.curvature(self.server, experiment.y[rows]) if k else [0.0] * parties
                    for m, c in enumerate(ks):
                        curvature[m].append(c)
                losses.append(self.server.head_step(batch.z, experiment.y[rows], batch.update))
                for m, g in enumerate(batch.gradients()):
                    grads[m].append(g)
        self.curvature = [np.asarray(c, np.float32) for c in curvature] if local else None
        return losses, grads

    def evaluate(self, experiment: Experiment, parts: list[np.ndarray]) -> dict:
        """Loss and score on each evaluation set (validation, test, maybe training rows) from
        the layer's per-party parts of all evaluation rows."""
        scores: dict[str, float] = {}
        start = 0
        for name, rows in experiment.eval_sets().items():
            z = self.layer.head_input([p[start : start + len(rows)] for p in parts])
            # "train_loss" is the mean step loss of the epoch; the scored one is train_eval_loss.
            loss_key = "train_eval_loss" if name == "train" else f"{name}_loss"
            scored = self.server.evaluate_head(z, experiment.y[rows])
            scores[loss_key], scores[f"{name}_metric"] = scored.loss, scored.metric
            if name == "val":
                self.val_losses = scored.losses
            start += len(rows)
        return scores

    def before_training(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> None:
        """A phase before the first epoch (feature scoring, gate initialisation). None here."""
        return None

    def fit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> None:
        """:meth:`before_training`, then epochs of the step protocol (spec section 3) with
        early stopping on validation."""
        if not resuming(self):
            self.before_training(federation, experiment, result)
        self.start_reliably(federation, experiment, result, on_epoch, self.training.epochs)

    def run_epochs(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        first: int,
        stop: int,
    ) -> bool:
        """Epochs ``first .. stop - 1``; True if early stopping ended them.

        The round-trips never stop at an epoch boundary: epoch e's last gradients and its
        evaluation request travel with epoch e+1's first batches, so an epoch costs
        ceil(steps / K) round-trips, plus one at the very end (after which no gradient is
        pending, so a strategy may do something else and call this again from ``stop``).
        Once an epoch's steps are done the run may checkpoint, and a resumed run re-enters the
        loop there (:mod:`vflfs.strategies.checkpoint`).
        """
        size = self.training.batch_size
        self.layer.leave_out(self.widths)  # no gradient is pending at a call's start
        self.epoch_steps = max(1, math.ceil(len(experiment.splits.train) / size))
        self.majority_level = learned_level(experiment)
        grads: list[list[np.ndarray]] = [[] for _ in range(experiment.num_parties)]
        losses: list[float] = []
        start = first
        resumed = resumed_loop(self, first, stop)  # a resumed run re-enters the loop here
        if resumed is not None:
            start, grads, losses = resumed.epoch + 1, resumed.grads, resumed.losses
        seed, rows = experiment.seed, experiment.splits.train
        for epoch in range(start, stop + 1):
            shuffle = epoch - self.shuffle_origin  # the epoch's shuffle of the training rows
            batches = [] if epoch == stop else epoch_batches(rows, size, seed, shuffle)
            groups = chunked(batches, self.local.k) or [[]]
            r = done = 0  # rounds and batches of the epoch sent so far
            while r < len(groups):
                group = groups[r]
                closing = epoch > first and r == 0
                # the parties draw the same batches from the training rows given at setup
                plan = BatchPlan(seed, shuffle, size, done, len(group)) if group else None
                done += len(group)
                with federation.traffic.in_phase("training"):
                    replies = self.exchange(federation, grads, plan, evaluate=closing)
                if closing and self.close_epoch(
                    federation, experiment, result, epoch - 1, losses, replies, on_epoch
                ):
                    self.settle(federation, experiment, replies, group)
                    return True
                if closing:
                    losses = []
                    # The rest of the epoch in rounds of the K now in use (the guard may
                    # have lowered it at this epoch's close).
                    groups = [group, *chunked(batches[len(group) :], self.local.k)]
                with federation.traffic.in_phase("training"):
                    step_losses, grads = self.server_steps(experiment, replies, group)
                losses += step_losses
                r += 1
            if epoch < stop:
                epoch_done(self, result, LoopState(first, stop, epoch, grads, losses))
        return False

    def settle(
        self,
        federation: Federation,
        experiment: Experiment,
        replies: dict[int, Body],
        batches: list[np.ndarray],
    ) -> None:
        """After an early stop: the server's steps on the batches the parties embedded, and
        their gradients sent back, so that no gradient is pending and the run can go on with
        another phase."""
        with federation.traffic.in_phase("training"):
            _, grads = self.server_steps(experiment, replies, batches)
            self.exchange(federation, grads, None, evaluate=False)

    def close_epoch(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        epoch: int,
        losses: list[float],
        replies: dict[int, Body],
        on_epoch: EpochCallback | None,
    ) -> bool:
        """Score the epoch that just ended and record it; True to stop early."""
        with federation.traffic.in_phase("evaluation"):
            rows = sum(len(r) for r in experiment.eval_sets().values())
            parts, sent = self.layer.evaluation(replies, rows)
            scores = self.evaluate(experiment, parts)
        for m, r in replies.items():
            result.parties[m].selected = np.asarray(r.selected).tolist()
            components = self.components_in_use(m, r)
            if components is not None:
                result.parties[m].components = components
        result.step_losses.extend(losses)
        selection = result.selection(current=True)
        row = {
            "epoch": epoch,
            "train_loss": float(np.mean(losses)),
            **scores,
            **self.row_extras(),
            "selected_features": selection["selected_features"],
            "selection_ratio": selection["ratio"],
            **{k: selection[k] for k in ("spurious_removed",) if k in selection},
            "mb": federation.traffic.total_bytes() / MB,
            "training_mb": federation.traffic.total_bytes("training") / MB,
            # What predicting one sample costs: the embedding values the parties upload.
            "prediction_bytes_per_sample": sent / max(rows, 1),
            "wall_s": sum(federation.traffic.seconds.values()),
            "stage": self.stage,
        }
        result.history.append(row)
        result.extra["analytic_mb"] = row["analytic_mb"]
        if self.local.requested > 1:
            self.local.after_epoch(epoch, row["train_loss"])
            result.extra["local_steps"] = self.local.record()
        if self.reported_row(result)["epoch"] == epoch:
            result.snapshot_best()
        if lowest_val_loss(result) == epoch:
            self.val_losses_at_lowest = self.val_losses
        if on_epoch is not None:
            on_epoch(row)
        if self.watch_stall(experiment, result, epoch):
            return True
        if self.stop_early(epoch, result):
            log.info("early stop at epoch %d (best %d)", epoch, result.best["epoch"])
            return True
        return False

    def reported_row(self, result: RunResult) -> dict:
        """The history row of the epoch the stage in training reports (its selection is kept
        when it comes): the best validation score, ties to the lowest validation loss."""
        return result.best

    def components_in_use(self, m: int, reply: Body) -> int | None:
        """How many of party ``m``'s embedding components reach the top model now (None: all);
        a party with none selects nothing. Here: those its evaluation reply sent."""
        mask = reply.eval_open
        return None if mask is None else int(np.count_nonzero(mask))

    def row_extras(self) -> dict:
        """Columns a strategy adds to every history row (the same keys in every row).

        ``analytic_mb``: the LESS-VFL paper's count, the training-row embedding floats uploaded
        so far x 32 bits, in MB (2^20 bytes).
        """
        return {"analytic_mb": self.uploaded_floats * 4 / MB}


def party_importance(federation: Federation) -> list[dict]:
    """How much each party's model uses each of its input features, and of which kind."""
    return [
        {"party": m, "kind": str(reply.kind), "values": reply.values.tolist()}
        for m, reply in enumerate(federation.broadcast(IMPORTANCE))
    ]
