"""LESS-VFL: pre-training, embedding component selection, local feature selection.

Castiglia, Zhou, Wang, Kadhe, Baracaldo and Patterson, "LESS-VFL: Communication-Efficient
Feature Selection for Vertical Federated Learning", ICML 2023 (Algorithm 1; spec section 5).

1. Stage 1: standard VFL (spec section 3) for ``strategy.pretrain_epochs`` epochs, or with
   ``null`` until the validation score stops improving (``strategy.pretrain_patience``
   epochs, at most ``training.epochs``), so that the bottom models have learnt which columns
   matter before stage 3 reconstructs their embeddings.
2. Stage 2 (phase ``stage2``): every party uploads its embeddings of all training rows once;
   the server trains its model on these cached embeddings with proximal SGD, a group lasso on
   its input columns, and tells each party only its own significant component set K_m. That
   message is the last of stage 2. With ``server.path_points`` > 0 (the default) lambda_s
   follows a path and K_m is chosen on the validation rows' embeddings, which the same upload
   carries (:meth:`vflfs.ml.component_path.ComponentPath.select`): a party of pure
   noise keeps no component, so its stage 3 keeps no feature. After a pre-training that did
   not beat the constant prediction on validation, stage 2 is skipped and every party keeps
   every component (:meth:`LessVFL.pretraining_learned`).
3. Stage 3 (phase ``stage3``, no message): each party, inside the handler of the message that
   delivered K_m, fits its frozen stage-1 embeddings on K_m with proximal SGD on its
   input-layer columns and removes the features whose column is zero. Along its local path
   of lambdas each feature gets a score, the point at which its column leaves
   (:func:`vflfs.ml.embedding_selection.leave_scores`); the reply carries one per feature.
4. With ``strategy.select`` (the default), the server ranks all features by these scores and
   chooses how many to keep on validation (:class:`CountChoice`: the best d, d/2, ... 1
   features, each trained on stage 2's components with early stopping, the pre-trained model
   standing for all d; the smallest within one standard error). A party stage 2 closed
   ranks its features in stage 3 all the same (on all its components) and keeps none. One
   more candidate reads every component at the parties that keep a feature, with the closed
   parties' features that rank with those kept
   (:class:`~vflfs.strategies.less_vfl_review.Stage2Review`); it wins only where validation
   says stage 2's cut cost accuracy. With
   ``select: null`` (the paper) standard VFL continues on stage 3's own selection, up to
   ``training.epochs`` epochs in all. Removed features and components are no longer computed
   or sent.
"""

from __future__ import annotations

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import MB, Federation
from vflfs.ml.component_path import ComponentPath
from vflfs.ml.embedding_selection import ProxSGD, select_components
from vflfs.ml.metrics import paired_excess, prior_losses
from vflfs.protocol import (
    LOCAL_SELECT,
    TRAIN_EMBEDDINGS,
    LocalSelectReply,
    LocalSelectRequest,
    TrainEmbeddingsRequest,
)
from vflfs.runtime.config import ConfigError
from vflfs.runtime.settings import RunSettings
from vflfs.server_app.experiment import Experiment

from .checkpoint_hooks import resuming
from .count_ladder import Candidate
from .early_stopping import learned_level
from .filter_choice import CountChoice
from .gini import global_ranks
from .less_vfl_review import Stage2Review
from .path_choice import good_scores, tolerance
from .registry import register
from .result import RunResult
from .settings import PartyStageSettings, ServerStageSettings, StageSettings, typed
from .strategy import EpochCallback, log
from .vfl import VFL


@register
class LessVFL(Stage2Review, CountChoice, VFL):
    """LESS-VFL (Castiglia et al., ICML 2023): the three stages, then VFL on what was kept."""

    name = "less_vfl"

    patience: int | None = None  # set while an early-stopped training runs
    learned_above: float | None = None  # :func:`learned_level`, during the pre-training
    components: list[list[int]] | None = None  # K_m of each party, once stage 2 has run
    scores: list[np.ndarray]  # stage 3's score of every feature of each party
    pretrained: Candidate | None = None  # stage 1's model, when validation ended it
    closed_scores: dict[int, np.ndarray]  # stage 3's ranking at each party stage 2 closed

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        super().__init__(cfg, run_settings)
        s = cfg.strategy
        self.stages: dict[str, StageSettings] = {
            name: typed(kind, s[name], f"strategy.{name}")
            for name, kind in (("server", ServerStageSettings), ("party", PartyStageSettings))
            if s.get(name) is not None
        }
        self.pretrain_patience = int(s.pretrain_patience)
        pre, total = s.pretrain_epochs, self.training.epochs
        if pre is not None and not 0 <= int(pre) < total:
            raise ConfigError(
                f"strategy.pretrain_epochs must be null (until validation stops improving) or "
                f"in 0..training.epochs - 1 = {total - 1}, got {pre}; training.epochs counts "
                "the pre-training and the epochs after selection"
            )
        self.pretrain_epochs = None if pre is None else int(pre)

    def configure(self, federation: Federation, experiment: Experiment) -> RunResult:
        result = super().configure(federation, experiment)
        result.best_from = self.pretrain_epochs or 0
        return result

    def party_spec(self, experiment: Experiment, m: int) -> dict:
        spec = super().party_spec(experiment, m)
        keep = self.keep_spec(m)  # while the kept count is chosen
        if keep is not None:
            spec["keep"] = keep
        return spec

    def count_components(self, m: int) -> list[int]:
        """While the kept count is chosen, party ``m`` sends its stage-2 components K_m."""
        assert self.components is not None
        return self.components[m]

    def fit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> None:
        total = self.training.epochs
        # A run resumed after stage 1 has stages 2 and 3's outcome back (components, scores).
        if not resuming(self) or self.stage == "pretrain":
            self.pretrain(federation, experiment, result, on_epoch)
            self.select(federation, experiment, result)
        if self.cfg.strategy.get("select") is not None:
            self.stage = "select"
            ranks = global_ranks(self.scores, lower_is_better=False)
            self.choose_count(federation, experiment, result, on_epoch, ranks)
            return
        self.stage = "dense"
        self.run_epochs(federation, experiment, result, on_epoch, self.pretrain_epochs, total)

    def pretrain(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> None:
        """Stage 1: every feature, until validation stops improving (or
        ``strategy.pretrain_epochs`` epochs)."""
        self.stage = "pretrain"
        if self.pretrain_epochs is None:
            self.learned_above = learned_level(experiment)
            self.patience = self.pretrain_patience
            self.start_reliably(federation, experiment, result, on_epoch, self.training.epochs)
            self.pretrained = self.pretrained_candidate(federation, result)
            self.pretrain_epochs = result.best_from = len(result.history)
            self.patience = None
            log.info("%s: pre-trained %d epochs", self.name, self.pretrain_epochs)
        else:
            self.run_epochs(federation, experiment, result, on_epoch, 0, self.pretrain_epochs)

    def pretrained_candidate(self, federation: Federation, result: RunResult) -> Candidate:
        """Stage 1's model (trained on every feature until validation stopped improving) as
        the count choice's candidate d: its window of epochs, best validation score and
        per-sample validation losses."""
        first, stop = result.best_from, len(result.history)
        rows = result.history[first:stop]
        everything = [np.arange(p.n_features, dtype=np.int64) for p in result.parties]
        return Candidate(
            k=sum(len(f) for f in everything),
            kept=everything,
            first=first,
            stop=stop,
            val_metric=max(r["val_metric"] for r in rows),
            mb=federation.traffic.total_bytes() / MB,
            val_losses=self.val_losses_at_lowest,
            dense=True,
        )

    def dense_candidate(self) -> Candidate | None:
        """The pre-trained model stands for all d features when validation ended stage 1
        (a fixed number of pre-training epochs need not have trained it to its best)."""
        return self.pretrained

    def stop_early(self, epoch: int, result: RunResult) -> bool:
        """While ``patience`` is set (adaptive pre-training, one kept count's training): that
        many epochs without a better validation score, and the ``training.patience_steps``
        floor; the pre-training keeps the floor only until it has learned something
        (:func:`learned_level`: at batch 1000 on Phishing, 8 steps an epoch, it waited 7 epochs
        past its best instead of 2). Otherwise never before selection (``training.patience``
        counts from the first epoch after it)."""
        if self.patience is not None:
            learned = self.learned_above if self.stage == "pretrain" else None
            return self.patience_over(epoch, result, self.patience, learned)
        assert self.pretrain_epochs is not None
        return epoch >= self.pretrain_epochs and super().stop_early(epoch, result)

    def row_extras(self) -> dict:
        return {**super().row_extras(), "components_kept": int(sum(self.widths))}

    # -- stages 2 and 3 -------------------------------------------------------------------
    def prox_sgd(self, section: str, experiment: Experiment) -> ProxSGD:
        """The proximal SGD settings of ``strategy.<section>`` (``server``: stage 2,
        ``party``: stage 3); a null batch size means ``training.batch_size``."""
        s = self.stages[section]
        batch = s.batch_size or self.training.batch_size
        return ProxSGD(s.lam, s.lr, s.prox_lr, s.epochs, batch, experiment.seed)

    def significant_components(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        """Stage 2: one upload of the training embeddings (and, for the path, the validation
        rows'), then P-SGD at the server alone: at the fixed lambda_s, or along a path of
        lambdas, keeping the fewest components whose top model scores within the tolerance of
        the path's best on validation (:meth:`~vflfs.ml.component_path.ComponentPath.select`)."""
        server = self.stages["server"]
        assert isinstance(server, ServerStageSettings)
        if not self.pretraining_learned(experiment):
            log.warning(
                "%s: stage 2 skipped: the pre-trained model's validation losses are no lower "
                "than the constant prediction's, so its embeddings cannot tell which parties "
                "matter; every component kept (stage 3 as local_lasso)",
                self.name,
            )
            result.extra["stage2"] = {"skipped": "pre-training learned nothing"}
            return [np.arange(w, dtype=np.int64) for w in self.widths]
        val = experiment.splits.val
        path = server.path_points > 0 and len(val) > 0
        request = TrainEmbeddingsRequest(validation=len(val) if path else 0)
        replies = federation.broadcast(TRAIN_EMBEDDINGS, request)
        embeddings = [r.embeddings for r in replies]
        self.uploaded_floats += sum(int(e.size) for e in embeddings)
        p = self.prox_sgd("server", experiment)
        y = experiment.y[experiment.splits.train]
        record: dict = {"settings": p.as_dict()}
        if path:
            validation = ([r.val_embeddings for r in replies], experiment.y[val])
            s = self.select_settings  # the count choice's tolerance, if it has one
            setting, errors = (None, 1.0) if s is None else (s.tolerance, s.standard_errors)
            path = ComponentPath(self.server, embeddings, y, validation, p, server.path_points)
            keep, losses, record["path"] = path.select(
                server.path_growth,
                lambda metrics, losses: good_scores(
                    metrics, tolerance(setting, experiment, max(metrics), errors), losses
                ),
                learned=learned_level(experiment) or 0.0,  # regression: R^2 above the mean's
            )
            chosen = next(r for r in record["path"] if r.get("chosen"))
            if chosen["chosen"] is not True:  # a reason: the path could not judge
                log.warning("%s: stage 2 %s: every component kept", self.name, chosen["chosen"])
            else:
                log.info(
                    "%s: stage 2 keeps %s components per party (lambda_s %.3g of %d points)",
                    self.name,
                    chosen["kept"],
                    chosen["lam"],
                    len(record["path"]),
                )
        else:
            keep, losses = select_components(self.server, embeddings, y, p)
        record.update(
            loss_first=losses[0] if losses else None,
            loss_last=losses[-1] if losses else None,
            components=[k.tolist() for k in keep],
        )
        result.extra["stage2"] = record
        return keep

    def pretraining_learned(self, experiment: Experiment) -> bool:
        """Whether stage 1's model (trained until validation stopped improving) beat the
        constant prediction on the validation rows: their losses, where their mean was lowest,
        below the class frequencies' (or the mean's) by one standard error of the paired
        differences. True without those losses (a fixed pre-training, no validation rows).

        Stage 2 judges the parties by what a top model reads from the pre-trained embeddings.
        A pre-training that memorised its rows and learned nothing that generalises leaves
        embeddings whose top models score near chance at every lambda, and the sparsest of them
        within the tolerance of that best is an arbitrary choice: on 1920 training rows of 2000
        sparse columns (training loss 0.011, validation loss 0.693 at its lowest: the class
        frequencies' own) stage 2 closed a party and kept 5 of 48 components, 79.5% on test
        against 83.8% for stage 3 on every component (``local_lasso``)."""
        losses = None if self.pretrained is None else self.pretrained.val_losses
        val = experiment.splits.val
        if losses is None or not len(val):
            return True
        prior = prior_losses(
            experiment.task, experiment.y[experiment.splits.train], experiment.y[val]
        )
        excess, se = paired_excess(losses, prior)
        return excess + se < 0

    def select(self, federation: Federation, experiment: Experiment, result: RunResult) -> None:
        """Stages 2 and 3; the K_m delivery is the last message of stage 2 and its handler
        runs stage 3, whose wall time moves from phase ``stage2`` to phase ``stage3``."""
        p = self.prox_sgd("party", experiment)
        traffic = federation.traffic
        with traffic.in_phase("stage2"):
            keep = self.significant_components(federation, experiment, result)
            for m, k in enumerate(keep):
                self.server.keep_components(m, k)
                self.widths[m] = len(k)
            party = self.stages["party"]
            assert isinstance(party, PartyStageSettings)
            requests = {
                m: LocalSelectRequest(
                    components=k,
                    path_points=party.path_points,
                    path_tolerance=party.path_tolerance,
                    path_extend=party.path_extend,
                    prox=p,
                )
                for m, k in enumerate(keep)
            }
            replies = federation.send(LOCAL_SELECT, requests)
        span = max(r.ended for r in replies.values()) - min(r.started for r in replies.values())
        traffic.seconds["stage2"] -= span
        traffic.seconds["stage3"] += span
        self.components = [np.asarray(k).tolist() for k in keep]
        self.scores = [np.asarray(replies[m].scores, dtype=np.float64) for m in range(len(keep))]
        # A closed party's scores rank its features on all its components: they serve
        # reopen(); the count choice's ranking holds only the open parties' features.
        self.closed_scores = {m: self.scores[m] for m, k in enumerate(keep) if not len(k)}
        for m in self.closed_scores:
            self.scores[m] = np.zeros_like(self.scores[m])
        self.record_selection(result, replies, p)

    def record_selection(
        self, result: RunResult, replies: dict[int, LocalSelectReply], p: ProxSGD
    ) -> None:
        """What stage 3 did at each party, into ``results.json``'s ``extra``."""
        result.extra["selection_epoch"] = self.pretrain_epochs
        result.extra["stage3"] = {
            "settings": p.as_dict(),
            "parties": [
                {
                    "party": m,
                    "started": float(r.started),
                    "ended": float(r.ended),
                    "loss_first": float(r.loss_first),
                    "loss_last": float(r.loss_last),
                    "features_kept": len(r.features),
                    "path_r2": np.asarray(r.path_r2).tolist(),
                    "path_kept": np.asarray(r.path_kept).tolist(),
                    "path_lr": np.asarray(r.path_lr).tolist(),
                    "components": np.asarray(r.components).tolist(),
                    "scores": np.asarray(r.scores).tolist(),
                }
                for m, r in sorted(replies.items())
            ],
        }
        result.extra["components_kept"] = [len(r.components) for _, r in sorted(replies.items())]
        for m, r in sorted(replies.items()):
            if len(r.path_lr) and min(r.path_lr) < p.lr:
                log.warning(
                    "party %d: stage 3 diverged at SGD step %g; its path went on at %g",
                    m,
                    p.lr,
                    min(r.path_lr),
                )
