"""The refits of a regularisation path (:mod:`vflfs.strategies.path`), and the choice among them.

4. **Refit.** The parties rebuild their bottom models on a candidate's features and
   components only (layers shrunk, no gates, no penalty; the input layer drawn at the scale
   of the kept columns, as a model built on them alone:
   :meth:`~vflfs.ml.party_model.PartyModel.fresh_inputs`), the server its top model, and VFL
   trains them with early stopping on validation, on batches counted from the refit's own
   first epoch (the same features refit to the same model wherever they come). The
   candidates are the chosen point, the best-scoring one and sparser ones near the best
   (:func:`candidates`), then up to ``path.refit_probes`` top-k sets of the path's ranking
   between them (:func:`~.path_probes.next_probe`), twice the winner's
   (:func:`~.path_probes.denser_probe`) and one below the path's last point
   (:func:`~.path_probes.floor_probe`); after the dense model's refit (step 5) and the
   add-backs (step 6), the top of a ranking made before the path, at twice the winner's count
   (``fedsdg_fs``'s Gini scores, :meth:`~.path_progress.PathProgress.add_prior`).
5. **Choice.** The sparsest good model is reported (:func:`choose_refit`: within the
   tolerance of the best score, and within one standard error of the lowest validation loss,
   sample by sample), the dense model included, with its warm-up score and, with
   ``path.refit_dense`` (the default), refit after the probes as the model of
   ``strategy=vfl`` trained as it trains it (every feature, its initialisation, learning rate
   and batches): the gated or penalised warm-up can underfit what the plain model fits, and
   the choice is then never worse on validation than the all-features run by more than the
   tolerance. If the dense model wins, the run says so. A path point's own, penalised model
   competes too where it scored above every refit by more than the tolerance
   (:func:`~vflfs.strategies.path_choice.penalised_models`).
6. **Add-back.** Each refit model's parties test the features it leaves out (a score test,
   :mod:`vflfs.strategies.path_screen`); after the dense refit the winner plus those that
   pass is refit, and replaces the winner when it is good; after the probe of a ranking made
   before the path, once more from that probe if it won (``path.add_back`` times at most in
   all).
"""

from __future__ import annotations

import numpy as np

from vflfs.federation import Federation
from vflfs.ml.top import ServerModel
from vflfs.protocol import IMPORTANCE
from vflfs.server_app.experiment import Experiment

from .checkpoint_hooks import resumed_first, resuming
from .interactive import make_layer
from .path_choice import PathPoint, choose_refit, good_models, refit_rows
from .path_progress import Fitted, PathProgress, Ranking
from .path_screen import adjusted_minimum, screen
from .result import RunResult
from .strategy import EpochCallback, log
from .vfl import VFL


class PathRefits:
    """The refit stage of :class:`~vflfs.strategies.path.PathStrategy` (a part of it, as
    :class:`~vflfs.strategies.stall.StallRecovery` is of VFL)."""

    refitting = False  # whether the run is in its refit stage
    reported: Fitted | None = None  # the model the path's choice reports
    refit_stop = 0  # the epoch the refit in training stops at, at the latest
    refit_plain = False  # whether it is the dense point's refit (trained as plain VFL)
    warmup_restarts = 0  # the warm-up's restarts: the other refits train at its learning rate

    def within_budget(self, federation: Federation, chosen: PathPoint) -> list[list[int]]:
        """The chosen point's features, cut to ``path.max_features`` by the parties' own
        importance (gate or input-column norm) when the path never came within the budget."""
        budget = self.path.max_features
        if budget is None or chosen.kept <= budget:
            return chosen.selected
        values = [np.asarray(r.values) for r in federation.broadcast(IMPORTANCE)]
        ranked = sorted(
            (float(v[f]), m, f)
            for m, (v, sel, c) in enumerate(
                zip(values, chosen.selected, chosen.components, strict=True)
            )
            if c
            for f in sel
        )[::-1][:budget]
        log.info("the path ended above the budget: keeping the %d most important features", budget)
        return [sorted(f for _, n, f in ranked if n == m) for m in range(len(values))]

    def refit_candidates(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        progress: PathProgress,
    ) -> None:
        """Refit the candidate points (:func:`candidates`), then the probes of the path's
        ranking (:meth:`PathProgress.add_probe`), and keep the sparsest good model
        (:meth:`choose_model`: its validation score and per-sample losses measured against
        the best); the dense model competes with its warm-up score (the run warns if it wins).

        Each model's epochs, selection and feature importance are recorded as it finishes, so
        the winner is reported wherever it came in the order (the parties hold the last one).
        """
        refits = progress.refits
        assert refits is not None
        pool, models, scores = refits.pool, refits.models, refits.scores
        # A resumed run goes on from its refit; the probes follow the candidates, the dense
        # model's refit the probes (it changes no earlier refit's training; when it wins, a
        # probe below it may follow), the winner's add-backs the dense refit, and the probe of
        # a ranking made before the path the add-backs; add_back is asked again after it, to
        # grow that probe where it won.
        while (
            refits.done < len(pool)
            or progress.add_probe(self.path)
            or progress.add_dense(self.path, self.everything(experiment, result))
            or progress.add_back(self.path)
            or progress.add_prior(self.path, self.prior_ranking(result))
            or progress.add_back(self.path)
        ):
            i = refits.done
            point = pool[i]
            first = self.refit(federation, experiment, result, on_epoch, point, refits.keeps[i])
            models.append(Fitted.now(federation, result, first, None, self.val_losses_at_lowest))
            models[-1].pvalues = self.screen_refit(federation, experiment, result)
            scores.append((point, float(result.best["val_metric"])))
            log.info(
                "refit %d (%s, %d features): validation %.4f",
                i + 1,
                point.label,
                point.kept,
                scores[-1][1],
            )
        self.choose_model(result, progress)

    def prior_ranking(self, result: RunResult) -> Ranking | None:
        """A ranking of the features made before the path, for its probe after the dense
        refit (:meth:`~vflfs.strategies.path_progress.PathProgress.add_prior`); None: none
        (``fedsdg_fs``: its secure Gini scores)."""
        return None

    def choose_model(self, result: RunResult, progress: PathProgress) -> None:
        """Report the sparsest good model (:func:`choose_refit`) among the dense model, the
        refits and the path points' own models that scored above them all
        (:meth:`PathProgress.compared`); the run warns when it is the dense model."""
        models, scores = progress.compared(self.path)
        slack = progress.slack
        losses = [m.val_losses for m in models]
        win, good = choose_refit(scores, slack, losses), good_models(scores, slack, losses)
        choice = result.extra["path_choice"]
        choice["dense_good"] = 0 in good
        choice["refits"] = refit_rows(scores, losses, good, [(m.first, m.stop) for m in models])
        sizes = [p.n_features for p in result.parties]
        for row, model in zip(choice["refits"], models[1:], strict=True):
            row["screen_p"] = adjusted_minimum(model.pvalues)  # below screen_alpha: an add-back
            row["features"] = model.features(sizes)
        chosen = scores[win][0]
        choice["point"], choice["top_k"] = chosen.point, chosen.top_k
        self.reported = models[win]
        self.reported.report(result)
        if chosen.point == 0 and not chosen.top_k:
            log.warning(
                "no sparser model scored within the tolerance %.4f of the dense model "
                "(validation %.4f): reporting the dense model%s",
                slack,
                scores[win][1],
                "" if win == 0 else ", refit",
            )
            choice["fallback"] = "dense"
        elif chosen.ranking == "penalised" and chosen.kept >= sum(
            p.n_features for p in result.parties
        ):
            log.warning("chosen: %s, which keeps every feature", chosen.label)
            choice["fallback"] = "every_feature"  # a better model, but no selection
        else:
            log.info("chosen after refits: %s, %d features", chosen.label, chosen.kept)

    def screen_refit(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray] | None:
        """The refit model's score tests of the features it does not use
        (:func:`~vflfs.strategies.path_screen.screen`); None without add-backs
        (``path.add_back`` 0), with a feature budget, or with the secure layer (whose server
        does not see the embeddings it would differentiate at)."""
        if self.path.add_back <= 0 or self.path.max_features is not None or self.secure.enabled:
            return None
        features = [list(keep["features"]) for keep in self.refit_keep]
        sizes = [p.n_features for p in result.parties]
        return screen(federation, experiment, self.server, features, sizes)

    def everything(
        self, experiment: Experiment, result: RunResult
    ) -> tuple[list[list[int]], list[list[int]]]:
        """Per party: every feature, and every embedding component of the plain VFL model."""
        features = [list(range(p.n_features)) for p in result.parties]
        return features, [list(range(w)) for w in VFL.embedding_sizes(self, experiment)]

    def finish(self, federation: Federation, experiment: Experiment, result: RunResult) -> None:
        """The reported model's feature importance (asked when it finished training)."""
        if self.reported is None:
            super().finish(federation, experiment, result)
        else:
            result.importance.extend(self.reported.importance)

    def refit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        chosen: PathPoint,
        selected: list[list[int]],
    ) -> int:
        """Fresh models on ``selected`` features and the chosen point's components, trained
        without penalty from the next epoch on; returns the refit's first epoch."""
        if resuming(self):  # a resumed refit has its models and settings back
            return self.train_refit(federation, experiment, result, on_epoch)
        epoch = len(result.history)
        self.refit_stop = epoch + (self.path.refit_max_epochs or 3 * self.training.epochs)
        self.refitting, self.stage = True, "refit"
        # The dense point's refit is the model of strategy=vfl, trained as it trains: every
        # feature and component (PathProgress.add_dense), the configured learning rate however
        # often the warm-up restarted, and a stall watch of its own (a cross-party XOR stalled
        # the gated warm-up twice; at its reduced rate the refit learned nothing).
        self.refit_plain = chosen.point == 0 and chosen.top_k is None
        # Every refit's batches count from its own first epoch, as its initialisation is the
        # same cut of the seeded model: the same features score the same wherever they come in
        # the order, and the refits compared are trained on the same batches.
        self.shuffle_origin = epoch
        self.restarts = 0 if self.refit_plain else self.warmup_restarts
        # A party that keeps no feature sends nothing, and one whose components are all
        # closed keeps no feature: neither could change the prediction.
        self.refit_keep = [
            {"features": f if c else [], "components": c if f else []}
            for f, c in zip(selected, chosen.components, strict=True)
        ]
        with federation.traffic.in_phase("setup"):
            self.setup_parties(federation, experiment)
        self.widths = [len(keep["components"]) for keep in self.refit_keep]
        self.server = self.stage_server_model(experiment)
        self.layer = make_layer(self.secure, federation, experiment, self.server)
        for p, keep in zip(result.parties, self.refit_keep, strict=True):
            p.selected = list(keep["features"])
            p.selected_at_best = None
            p.components = len(keep["components"])
        result.best_from = epoch
        # Twice the training's patience by default: on few columns a refit's validation score
        # can stall for more than training.patience epochs and then climb again (MADELON, 5
        # folds: a refit patience of 10 -> 20 moved fedsdg_fs 81.8 -> 85.5%, stg 83.5 -> 85.0%).
        self.patience = self.path.refit_patience or 2 * (self.training.patience or 5)
        return self.train_refit(federation, experiment, result, on_epoch)

    def train_refit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> int:
        """The refit's epochs up to ``refit_stop`` (from a resumed run's loop, if resuming);
        returns the refit model's first epoch (after a restart, the restart's)."""
        first = resumed_first(self) if resuming(self) else result.best_from
        if self.refit_plain:
            self.start_reliably(federation, experiment, result, on_epoch, self.refit_stop, first)
        else:
            self.run_epochs(federation, experiment, result, on_epoch, first, self.refit_stop)
        return result.best_from

    def stage_server_model(self, experiment: Experiment) -> ServerModel:
        """While refitting: plain VFL's top model (no penalty), on the kept components."""
        if self.refitting:
            return VFL.make_server_model(self, experiment)
        return super().stage_server_model(experiment)
