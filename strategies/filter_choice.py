"""How many features a filter (or LESS-VFL) keeps, chosen on validation.

A filter (Gini, F-statistic, random) ranks every feature of every party once; LESS-VFL and
local lasso rank them by stage 3's scores. Instead of a fixed share, the server tries the best
k features for k = d, d/2, d/4, ... 1 (d: all features; with ``strategy.select.max_features``
or ``max_fraction`` only counts within that budget): for each, the parties rebuild their
models on their part of the best k, drawn as models built on those features alone (a party
with none sends nothing), and VFL trains with
early stopping on validation, on batches counted from that training's own first epoch (so a
count trains alike whichever counts came before it). The halving stops once two counts in a
row score more than three standard errors below the best so far (:func:`halve`); the counts
left out are in ``results.json`` (``extra.count_choice.not_tried``).
The count d is ``strategy=vfl``'s model, trained as that run trains it, so that the choice is
never worse on validation than the all-features run by more than the tolerance. A strategy
that already holds a model on every feature, trained no longer than a count may (LESS-VFL's
pre-training, until validation stopped improving), lets it stand for d instead, as the path
strategies' warm-up model stands for their dense point; once the count is chosen (and
trained again, below) it trains d as the vfl run too, which joins the choice (as the path
strategies refit their dense model). The kept count is
the smallest whose best validation score is within the tolerance of the best count's (one
standard error by default, :func:`vflfs.strategies.path.tolerance`) and whose validation loss,
sample by sample, the paired comparison cannot tell from the lowest, and the reported model is
that training's best epoch. With ``select.refine`` the server then bisects between that count
and the next smaller one tried (k/2, which fell short), until the two are within 1.2x of each
other, so that the count need not be a power of two; with ``select.refit_patience`` the
chosen count trains once more with that patience, and the better of its two trainings on
validation is reported. Before that, a strategy may weigh one more candidate its counts could
not offer (:meth:`CountChoice.second_look`: LESS-VFL's with every embedding component, and
with the features of parties stage 2 closed); the smallest good count still wins. With
``strategy.keep_fraction`` set, a filter keeps that share instead.

A count that reads the same features as one trained before (its others at parties that send
no embedding component: a party LESS-VFL's stage 2 closed) has that one's model, and takes it
instead of training it again (:meth:`CountChoice.twin`; ``tried[].same_as``).

Each training starts from fresh models, so its outcome depends on its candidate alone: a run
resumed from a checkpoint (:mod:`vflfs.strategies.checkpoint`) goes through the choice again,
takes each training it had finished from the checkpoint's record
(:meth:`CountChoice.recorded`), and goes on with the one it stopped in from its epoch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import MB, Federation
from vflfs.runtime.config import ConfigError
from vflfs.runtime.settings import RunSettings
from vflfs.server_app.experiment import Experiment

from .checkpoint_hooks import resuming
from .count_ladder import (
    Candidate,
    CountSettings,
    best_k,
    bisect,
    counts,
    halve,
    smallest_good,
)
from .interactive import make_layer
from .result import RunResult
from .settings import feature_budget, typed
from .strategy import EpochCallback, log


class CountChoice:
    """Mix-in for a select-then-train strategy: the kept count chosen on validation."""

    choosing: list[np.ndarray] | None = None
    plain = False  # training strategy=vfl's model (every feature and component)
    reopened: tuple[int, ...] = ()  # the parties of the candidate in training (or reported)
    # that read every component again (Candidate.reopened)
    # The choice's trainings so far, in order, and the one in training (a resumed run's
    # record of them: the module's docstring).
    trainings: list[Candidate] = []
    in_training: Candidate | None = None
    next_training = 0  # how many of the choice's trainings it has gone through
    held: tuple[int, int | None] = (0, None)  # restarts and patience while d trains as vfl

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        super().__init__(cfg, run_settings)  # type: ignore[call-arg]
        section = cfg.strategy.get("select")
        self.select_settings: CountSettings | None = (
            None if section is None else typed(CountSettings, section, "strategy.select")
        )

    def choose_count(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        ranks: list[np.ndarray],
    ) -> None:
        s = self.select_settings
        if s is None:
            raise ConfigError(f"{self.name} chooses its count on validation: set strategy.select")
        epochs = s.max_epochs or self.training.epochs
        self.patience = s.patience
        if not resuming(self):  # a resumed run goes through its trainings again
            self.trainings = []
        self.next_training = 0
        tried: list[Candidate] = []
        total = sum(len(r) for r in ranks)

        def attempt(k: int, like: Candidate | None = None) -> Candidate:
            twin = None
            if like is None:  # the best k of the ranking
                like = Candidate(k, best_k(ranks, k), 0, 0)
                twin = self.twin(like, tried)
            candidate = Candidate(k, like.kept, 0, 0, reopened=like.reopened)
            if twin is None:
                self.train_candidate(federation, experiment, result, on_epoch, candidate, epochs)
            else:  # its model is the twin's: not trained again
                mb = federation.traffic.total_bytes() / MB
                vars(candidate).update(
                    vars(twin), k=k, kept=like.kept, same_as=twin.k, good=False, mb=mb
                )
            tried.append(candidate)
            self.log_candidate(candidate, twin)
            return candidate

        budget = feature_budget(s.max_features, s.max_fraction, total)
        ladder = counts(total, budget)
        dense = self.dense_candidate() if ladder[0] == total else None
        if dense is not None and dense.stop - dense.first > epochs:
            dense = None  # trained longer than a count may: it cannot stand for one
        if ladder[0] == total and dense is None:
            # No model on every feature yet (the filters): d is strategy=vfl's model, trained
            # as that run trains it, so that the choice is never worse on validation than that
            # run by more than the tolerance. A count's short training underfit it where no
            # column's mean shows the classes (5000 rows, 10 radial columns among 300: 0.685 on
            # validation; the F-statistic's count of 131 then won, 65.3% against vfl's 69.6%).
            plain = Candidate(total, best_k(ranks, total), 0, 0, plain=True)
            self.train_plain(federation, experiment, result, on_epoch, plain)
            tried.append(plain)
        elif dense is None:  # a budget's largest count
            attempt(ladder[0])
        else:
            tried.append(dense)
            log.info("%s: all %d features: validation %.4f", self.name, total, dense.val_metric)
        self.choose_among(federation, experiment, result, on_epoch, ladder, tried, attempt, dense)

    def log_candidate(self, candidate: Candidate, twin: Candidate | None) -> None:
        """One line on a count's model: its features and validation score."""
        what = (
            "best" if not candidate.reopened else f"(all components at {list(candidate.reopened)})"
        )
        if twin is not None:
            what += f" (the model of the best {twin.k}: the others at parties that send nothing)"
        k, score = candidate.k, candidate.val_metric
        log.info("%s: %s %d features: validation %.4f", self.name, what, k, score)

    def choose_among(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        ladder: list[int],
        tried: list[Candidate],
        attempt: Callable[..., Candidate],
        dense: Candidate | None,
    ) -> None:
        """After the count d (first in ``tried``): the halving down ``ladder``, the bisection,
        the second look, the chosen count's second training and, where a pre-trained model
        stood for d (``dense``), d trained as the vfl run; reports the choice."""
        s = self.select_settings
        assert s is not None
        total = sum(p.n_features for p in result.parties)
        skipped = halve(ladder[1:], tried, attempt, experiment, s)
        if skipped:
            log.info("%s: counts %s not tried: the last two fell far short", self.name, skipped)
        chosen, slack = smallest_good(tried, experiment, s.tolerance, s.standard_errors)
        if s.refine:
            bisect(tried, chosen, slack, attempt)
            chosen, slack = smallest_good(tried, experiment, s.tolerance, s.standard_errors)
        wider = self.second_look(chosen, tried)
        if wider is not None and wider.k <= ladder[0]:  # the smallest good still wins
            attempt(wider.k, wider)
            chosen, slack = smallest_good(tried, experiment, s.tolerance, s.standard_errors)
        record = {
            "tried": [c.row() for c in tried],
            "chosen": chosen.k,
            "tolerance": slack,
            "not_tried": skipped,
        }
        if s.refit_patience and not chosen.plain:
            # The chosen count once more, with a longer patience; the better of the two.
            self.patience = s.refit_patience
            refit = attempt(chosen.k, chosen)
            tried.pop()
            record["refit"] = refit.row()
            chosen = refit if refit.val_metric >= chosen.val_metric else chosen
        if dense is not None and any(c is dense for c in tried):
            plain = Candidate(dense.k, dense.kept, 0, 0, plain=True)
            self.train_plain(federation, experiment, result, on_epoch, plain)
            chosen, slack = self.weigh_plain(experiment, tried, chosen, plain)
            record.update(plain=plain.row(), chosen=chosen.k, tolerance=slack)
        if chosen.k == total:
            record["fallback"] = "dense"  # no smaller count was good: every feature is kept
        self.report(result, chosen)
        result.extra["count_choice"] = record
        log.info("%s: keeps the best %d features (of %d)", self.name, chosen.k, total)

    def weigh_plain(
        self, experiment: Experiment, tried: list[Candidate], chosen: Candidate, plain: Candidate
    ) -> tuple[Candidate, float]:
        """The pre-trained model stood for d: d, trained once more as ``strategy=vfl``'s run
        (``plain``), joins the choice, so that it is never worse on validation than that run by
        more than the tolerance (a short pre-training scored below it on ISOLET). Returns the
        choice among the counts tried (``chosen`` as trained last) and that run, and the
        tolerance."""
        s = self.select_settings
        assert s is not None
        others = [c for c in tried if (c.k, c.reopened) != (chosen.k, chosen.reopened)]
        chosen, slack = smallest_good(
            [*others, chosen, plain], experiment, s.tolerance, s.standard_errors
        )
        return chosen, slack

    def second_look(self, chosen: Candidate, tried: list[Candidate]) -> Candidate | None:
        """One more candidate to weigh against the count ``chosen`` among ``tried``, which
        reads every component at the parties it names (``Candidate.reopened``); None: none."""
        return None

    def dense_candidate(self) -> Candidate | None:
        """A model on every feature trained before the choice, to stand for the count d
        (None: the choice trains d itself, as it does when that model trained more epochs
        than a count may)."""
        return None

    def train_plain(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        candidate: Candidate,
    ) -> None:
        """``candidate`` (every feature and component) trained as ``strategy=vfl`` trains
        its model: the same initialisation, learning rate (however often an earlier stage
        restarted), batches, patience and stall watch."""
        if self.recorded(candidate):
            return
        if not resuming(self):  # a resumed training has its restarts back, and ``held``
            self.held, self.restarts = (self.restarts, self.patience), 0
        self.plain, self.patience = True, self.training.patience
        try:
            self.train_candidate(
                federation, experiment, result, on_epoch, candidate, self.training.epochs
            )
        finally:
            self.plain = False
            self.restarts, self.patience = self.held
        log.info(
            "%s: all %d features, as vfl: validation %.4f",
            self.name,
            candidate.k,
            candidate.val_metric,
        )

    def report(self, result: RunResult, chosen: Candidate) -> None:
        """The reported model: ``chosen``'s best epoch, its features and components."""
        result.best_from, result.best_to = chosen.first, chosen.stop
        self.reopened = chosen.reopened
        size = int(self.cfg.model.bottom.embedding_size)
        for m, (p, kept) in enumerate(zip(result.parties, chosen.kept, strict=True)):
            p.selected_at_best = kept.tolist()
            sent = len(self.candidate_components(m)) if len(kept) else 0
            p.components = None if chosen.dense or chosen.plain or sent == size else sent

    def recorded(self, candidate: Candidate) -> bool:
        """Whether the choice's next training finished before the checkpoint a resumed run
        started from: then ``candidate`` takes its recorded outcome."""
        i = self.next_training
        if i >= len(self.trainings):
            return False
        done = self.trainings[i]
        if (done.k, done.plain, done.reopened) != (
            candidate.k,
            candidate.plain,
            candidate.reopened,
        ):
            raise RuntimeError(
                f"the resumed count choice asked for {candidate.k} features as its training "
                f"{i + 1}, but its checkpoint recorded {done.k}; fix: rerun=true"
            )
        # its flag among the good ones is the choice's to set again, as it was when it finished
        vars(candidate).update(vars(done), good=False)
        self.next_training += 1
        return True

    def train_candidate(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        candidate: Candidate,
        epochs: int,
    ) -> None:
        """The choice's next training, on ``candidate``'s features (:meth:`train_on`), from
        the next epoch on; in a resumed run, its recorded outcome (:meth:`recorded`) or, for
        the one in training at the checkpoint, the rest of it."""
        if self.recorded(candidate):
            return
        if resuming(self):
            assert self.in_training is not None
            candidate.first = self.in_training.first
        else:
            candidate.first = len(result.history)
        self.in_training = candidate
        self.train_on(federation, experiment, result, on_epoch, candidate, epochs)
        self.trainings.append(candidate)
        self.next_training += 1

    def train_on(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        candidate: Candidate,
        epochs: int,
    ) -> None:
        """Fresh models on ``candidate``'s features, VFL with early stopping (a resumed
        training has its models back)."""
        self.choosing, self.reopened = candidate.kept, candidate.reopened
        first = candidate.first
        if not resuming(self):
            with federation.traffic.in_phase("setup"):
                self.setup_parties(federation, experiment)
            self.widths = [
                len(self.candidate_components(m)) if len(k) else 0
                for m, k in enumerate(candidate.kept)
            ]
            self.server = self.make_server_model(experiment)
            self.layer = make_layer(self.secure, federation, experiment, self.server)
            for p, kept in zip(result.parties, candidate.kept, strict=True):
                p.selected = kept.tolist()
            result.best_from, result.best_to = first, None  # early stopping within it
        # Its batches count from its own first epoch: a count's training is the same whichever
        # counts were trained before it (or left out, ``halve``).
        origin, self.shuffle_origin = self.shuffle_origin, first
        try:
            if self.plain:  # strategy=vfl's run: a stalled start restarts
                self.start_reliably(federation, experiment, result, on_epoch, first + epochs, first)
                candidate.first = result.best_from
            else:
                self.run_epochs(federation, experiment, result, on_epoch, first, first + epochs)
        finally:
            self.shuffle_origin = origin
        candidate.stop = len(result.history)
        rows = result.history[candidate.first : candidate.stop]
        candidate.val_metric = max(r["val_metric"] for r in rows) if rows else -math.inf
        candidate.val_losses = self.val_losses_at_lowest if rows else None
        candidate.mb = federation.traffic.total_bytes() / MB

    def twin(self, candidate: Candidate, tried: list[Candidate]) -> Candidate | None:
        """A count trained before whose model ``candidate``'s would be: the same features at
        the parties that send embedding components (a party LESS-VFL's stage 2 closed sends
        none, so its features among the best k change nothing), trained the same way."""
        use = self.in_use(candidate)
        for c in tried:
            trained = not (c.dense or c.plain or c.reopened or c.same_as is not None)
            if trained and all(map(np.array_equal, self.in_use(c), use)):
                return c
        return None

    def in_use(self, candidate: Candidate) -> list[np.ndarray]:
        """Per party: a ranking count's features that reach the top model (none at a party
        that sends no component)."""
        return [k if self.count_components(m) else k[:0] for m, k in enumerate(candidate.kept)]

    def keep_spec(self, m: int) -> dict | None:
        """While choosing: party ``m``'s ``keep`` instruction (no feature: no component)."""
        if self.choosing is None:
            return None
        kept = self.choosing[m].tolist()
        return {"features": kept, "components": self.candidate_components(m) if kept else []}

    def candidate_components(self, m: int) -> list[int]:
        """The embedding components party ``m`` sends while it keeps a feature: all while
        training strategy=vfl's model or where the candidate reopened the party, else
        :meth:`count_components`."""
        if self.plain or m in self.reopened:
            return list(range(int(self.cfg.model.bottom.embedding_size)))
        return self.count_components(m)

    def count_components(self, m: int) -> list[int]:
        """The embedding components party ``m`` sends while it keeps a feature (here: all)."""
        return list(range(int(self.cfg.model.bottom.embedding_size)))
