"""What the regularisation path (:mod:`vflfs.strategies.path`) has done so far: the models it
may report, its points, its ranking of the features, and its refits and probes. A checkpoint
keeps it between the path's stages, so a resumed run goes on where it stopped
(:mod:`vflfs.strategies.checkpoint`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from vflfs.federation import Federation

from .path_choice import PathPoint, PathSettings, choose_refit, is_within, penalised_models
from .path_probes import denser_probe, floor_probe, next_probe
from .path_screen import added_back, adjusted_minimum, tested_count
from .result import RunResult
from .strategy import log
from .vfl import party_importance


@dataclass
class Fitted:
    """A trained model the choice may report: its epochs, each party's selection, and how
    much each party's model used each feature, recorded when it finished training."""

    first: int
    stop: int  # the model's epochs are first .. stop - 1
    parties: list[tuple[list[int] | None, list[int], int | None]]  # at best, now, components
    importance: list[dict]
    val_losses: np.ndarray | None = None  # each validation sample's loss at its lowest mean
    pvalues: list[np.ndarray] | None = None  # per party: its features' score tests (screen)

    @classmethod
    def at_point(
        cls, point: PathPoint, importance: list[dict], val_losses: np.ndarray | None
    ) -> Fitted:
        """The path's own model at ``point`` (its last epoch), with the parties' importance
        then, kept compact (float32) as a checkpoint carries every point's."""
        parties = [
            (list(f) if c else [], list(f) if c else [], len(c))
            for f, c in zip(point.selected, point.components, strict=True)
        ]
        compact = [{**d, "values": np.asarray(d["values"], np.float32)} for d in importance]
        return cls(point.epoch, point.epoch + 1, parties, compact, val_losses)

    @classmethod
    def now(
        cls,
        federation: Federation,
        result: RunResult,
        first: int,
        stop: int | None = None,
        val_losses: np.ndarray | None = None,
    ) -> Fitted:
        parties = [(p.selected_at_best, list(p.selected), p.components) for p in result.parties]
        stop = len(result.history) if stop is None else stop
        return cls(first, stop, parties, party_importance(federation), val_losses)

    def features(self, sizes: list[int]) -> list[list[int]] | None:
        """Per party, the features the model reads (none at a party whose embedding the
        server does not read); None where it reads every feature of every party."""
        used = [list(now) if comps != 0 else [] for _, now, comps in self.parties]
        return None if [len(f) for f in used] == sizes else used

    def report(self, result: RunResult) -> None:
        """Make this model the run's result."""
        result.best_from, result.best_to = self.first, self.stop
        for p, (at_best, selected, components) in zip(result.parties, self.parties, strict=True):
            p.selected_at_best, p.selected, p.components = at_best, selected, components


@dataclass
class Refits:
    """The refits of the candidate points: which, on what features, and the models and
    scores so far (the dense model first, with its warm-up score; with ``path.refit_dense``
    the dense point is refit too, after the probes, without gates or penalty)."""

    pool: list[PathPoint]
    keeps: list[list[list[int]]]  # per candidate, per party: the features it refits on
    models: list[Fitted]
    scores: list[tuple[PathPoint, float]]

    @property
    def done(self) -> int:
        """How many candidates are refit."""
        return len(self.scores) - 1


@dataclass
class Ranking:
    """The order in which the path drops features, across parties.

    A feature kept to a later point ranks above one dropped earlier (LassoNet's importance:
    the penalty at which a feature leaves); among those dropped after the same point, the one
    its party's model used more there (gate or column norm) ranks first. Its top ``k`` give
    selections between two path points' (:func:`~vflfs.strategies.path_probes.next_probe`).
    """

    last: list[np.ndarray] = field(default_factory=list)  # per party: last point keeping each
    score: list[np.ndarray] = field(default_factory=list)  # per party: importance there

    def update(
        self, k: int, selected: list[list[int]], components: list[list[int]], values: list
    ) -> None:
        """Point ``k`` keeps ``selected`` (of the parties whose components are open)."""
        if not self.last:
            self.last = [np.full(len(v), -1, np.int64) for v in values]
            self.score = [np.zeros(len(v), np.float64) for v in values]
        for m, (sel, comp, v) in enumerate(zip(selected, components, values, strict=True)):
            if comp and sel:
                idx = np.asarray(sel, np.int64)
                self.last[m][idx] = k
                self.score[m][idx] = np.asarray(v, np.float64)[idx]

    def top(self, k: int) -> list[list[int]]:
        """Per party: the features among the ``k`` highest-ranked that ever were kept."""
        ranked = sorted(
            (
                (int(last[f]), float(score[f]), -m, -int(f))
                for m, (last, score) in enumerate(zip(self.last, self.score, strict=True))
                for f in np.flatnonzero(last >= 0)
            ),
            reverse=True,
        )[:k]
        return [sorted(-f for _, _, n, f in ranked if -n == m) for m in range(len(self.last))]

    @classmethod
    def of_scores(cls, scores: list[np.ndarray]) -> Ranking:
        """Every feature, ranked by a score of its own (per party, one per feature; higher
        first)."""
        score = [np.asarray(v, np.float64) for v in scores]
        return cls([np.zeros(len(v), np.int64) for v in score], score)

    @classmethod
    def of_model(cls, importance: list[dict]) -> Ranking:
        """Every feature, ranked by how much a trained model uses it (:class:`Fitted`'s
        ``importance``: per party, a gate or input-column norm per feature)."""
        score = [np.asarray(d["values"], np.float64) for d in importance]
        return cls([np.zeros(len(v), np.int64) for v in score], score)


@dataclass
class PathProgress:
    """How far the path has come: what a checkpoint keeps between the path's stages."""

    points: list[PathPoint]  # the points so far, the dense one first
    unit: float  # the penalty's unit (:meth:`PathStrategy.penalty_unit`)
    epoch: int  # the first epoch of the next point
    scale: float  # the next point's penalty
    k: int = 0  # points trained after the dense one
    slack: float = 0.0  # the choice's tolerance (set once the path ends)
    refits: Refits | None = None  # set once the path ends
    ranking: Ranking = field(default_factory=Ranking)  # the order the path drops features
    models: list[Fitted] = field(default_factory=list)  # the points' own models, after the dense

    def compared(
        self, settings: PathSettings
    ) -> tuple[list[Fitted], list[tuple[PathPoint, float]]]:
        """The models the final choice compares, and their scores: the dense model and the
        refits, then the path points' own models that scored above all of them
        (:func:`penalised_models`)."""
        refits = self.refits
        assert refits is not None
        models, scores = list(refits.models), list(refits.scores)
        for k in penalised_models(self.points, scores, self.slack, settings.max_features):
            point = self.points[k]
            models.append(self.models[k - 1])
            scores.append((replace(point, ranking="penalised"), point.val_metric))
        return models, scores

    def add_probe(self, settings: PathSettings) -> bool:
        """Add the next top-k set of the ranking to refit (:func:`next_probe`, within
        ``path.refit_probes``; once those are done :func:`denser_probe`, within
        ``path.denser_probes``, then :func:`floor_probe`, within ``path.floor_probes``) and
        the feature budget; False when there is none.

        The ranking is the path's, or the dense refit's once it has won where the path
        failed (:meth:`path_ranking_failed`); each ranking has its own probes."""
        refits = self.refits
        assert refits is not None
        if any(p.ranking in ("prior", "screen") for p in refits.pool):  # these come last
            return False
        win = choose_refit(refits.scores, self.slack, [m.val_losses for m in refits.models])
        dense = self.dense_refit()
        by_dense = (
            dense is not None
            and (win == dense or refits.scores[win][0].ranking == "dense")
            and self.path_ranking_failed(dense, settings)
        )
        ranking = "dense" if by_dense else "path"
        probes = [p for p in refits.pool if p.top_k is not None and p.ranking == ranking]
        denser, floor = sum(p.denser for p in probes), sum(p.floor for p in probes)
        floors = 0 if by_dense else settings.floor_probes  # below the path's own last point
        between = len(probes) - denser - floor
        if (
            between >= settings.refit_probes
            and denser >= settings.denser_probes
            and floor >= floors
        ):
            return False
        if by_dense:  # from the dense refit's count down toward one feature, by halving
            scores = refits.scores
            compared = [dense] + [i for i, (p, _) in enumerate(scores) if p.ranking == "dense"]
            kept = [scores[i][0].kept for i in compared]
            win, path_kept = compared.index(win), [kept[0], 0]
        else:
            path_kept = [p.kept for p in self.points]
            # the dense refit keeps every feature; the ranking holds those the path ever kept
            kept = [min(p.kept, max(path_kept)) for p, _ in refits.scores]
        k, kind = None, ""
        if between < settings.refit_probes:
            k = next_probe(kept, win, path_kept, [] if by_dense else self.shrunk(settings))
        if k is None and denser < settings.denser_probes:
            k, kind = denser_probe(kept, win), "denser"
        if k is None and floor < floors:
            k, kind = floor_probe(kept, path_kept), "floor"
        budget = settings.max_features
        if k is None or (budget is not None and k > budget):
            return False
        if by_dense:
            assert dense is not None  # by_dense holds only once the dense refit is trained
            probe = self.dense_probe(dense, k, kind == "denser")
        else:
            probe = self.path_probe(k, kind == "denser", kind == "floor")
        refits.pool.append(probe)
        refits.keeps.append(probe.selected)
        return True

    def shrunk(self, settings: PathSettings) -> list[int]:
        """The feature counts of the path points' refits that scored below the point itself by
        more than ``path.candidate_slack`` tolerances (:func:`next_probe`)."""
        assert self.refits is not None
        margin = settings.candidate_slack * self.slack
        return [
            p.kept
            for p, score in self.refits.scores[1:]
            if p.top_k is None and p.point > 0 and not is_within(score, p.val_metric, margin)
        ]

    def path_probe(self, k: int, denser: bool, floor: bool = False) -> PathPoint:
        """The top ``k`` of the path's ranking, with the components of the sparsest point
        that kept as many features (``denser``, ``floor``: which probe it is)."""
        near = min((p for p in self.points if p.kept >= k), key=lambda p: p.kept)
        components = [
            c if c else next((q.components[m] for q in self.points if q.components[m]), [])
            for m, c in enumerate(near.components)
        ]
        return PathPoint(
            near.point, near.penalty, near.epoch, near.val_metric, near.val_loss,
            self.ranking.top(k), components, near.mb, top_k=k, denser=denser, floor=floor,
        )  # fmt: skip

    def path_ranking_failed(self, dense: int, settings: PathSettings) -> bool:
        """Whether every model of the path (its dense point, the refits of its points and
        of its ranking) scored below the dense refit by more than ``path.candidate_slack``
        tolerances: not a near miss of the ranking (on ARCENE's 80 training rows the dense
        refit won a fold by 1.2 tolerances, and the path's ranking probed below it held up
        where the dense refit's column norms did not) but a path that never learned (a
        cross-party XOR whose gated warm-up stayed at the uniform prediction: its models
        scored 17-34 tolerances below)."""
        assert self.refits is not None
        scores = self.refits.scores
        path = [s for i, (p, s) in enumerate(scores) if i != dense and p.ranking == "path"]
        return not is_within(max(path), scores[dense][1], settings.candidate_slack * self.slack)

    def dense_probe(self, dense: int, k: int, denser: bool) -> PathPoint:
        """The top ``k`` features of the dense refit's ranking (its input-column norms), on
        its components, for a path whose ranking failed (:meth:`path_ranking_failed`): the
        plain model's own ranking then chooses (on a cross-party XOR the path ranked noise,
        and the dense refit's two largest norms were the XOR's columns)."""
        assert self.refits is not None
        model, (point, _) = self.refits.models[dense], self.refits.scores[dense]
        selected = Ranking.of_model(model.importance).top(k)
        return replace(point, selected=selected, top_k=k, denser=denser, ranking="dense")

    def dense_refit(self) -> int | None:
        """The index of the dense point's refit among the models compared, once trained."""
        assert self.refits is not None
        scores = self.refits.scores
        return next(
            (
                i
                for i in range(1, len(scores))
                if scores[i][0].point == 0 and not scores[i][0].top_k
            ),
            None,
        )

    def add_dense(
        self, settings: PathSettings, everything: tuple[list[list[int]], list[list[int]]]
    ) -> bool:
        """Add the dense point to refit once the probes are done (``path.refit_dense``, and no
        feature budget) as the plain model on ``everything`` (per party: every feature, every
        embedding component), no gates, no penalty: the model of ``strategy=vfl``. The gated
        or penalised warm-up can underfit what it fits (a product of two columns held by two
        parties), and the choice measures every model against the best. False when it is
        refit already or not asked for."""
        refits = self.refits
        assert refits is not None
        dense = self.points[0]
        if not settings.refit_dense or settings.max_features is not None or not dense.kept:
            return False
        if any(p.point == 0 and p.top_k is None for p in refits.pool):
            return False
        features, components = everything
        refits.pool.append(replace(dense, selected=features, components=components))
        refits.keeps.append(features)
        return True

    def add_prior(self, settings: PathSettings, prior: Ranking | None) -> bool:
        """Add the top 2k features of ``prior``, a ranking made before the path (``fedsdg_fs``:
        its secure Gini scores), k the winner's count or the last such probe's if larger (up
        to ``path.prior_probes`` of them), once the path's probes, the dense refit and the
        add-backs from their winner are done (a winner that missed a relevant feature is
        grown by its score test first, and k counts it: the top 2k of a one-column ranking
        carry about k noise features). A score of one column at a time can rank what the path
        dropped: a product of two columns held by two parties, which the dense models among
        the noise never learned, changes the target's spread along each
        (docs/selection_limits.md). False when there is no such ranking, 2k reaches every
        feature or the budget, or the top 2k were refit already."""
        refits = self.refits
        assert refits is not None
        if prior is None:
            return False
        done = [p.kept for p in refits.pool if p.ranking == "prior"]
        if len(done) >= settings.prior_probes:
            return False
        win = choose_refit(refits.scores, self.slack, [m.val_losses for m in refits.models])
        k = 2 * max([refits.scores[win][0].kept, *done])
        budget = settings.max_features
        if not k or k >= self.points[0].kept or (budget is not None and k > budget):
            return False
        probe = replace(self.path_probe(k, False), selected=prior.top(k), ranking="prior")
        if any(q.selected == probe.selected for q in refits.pool):
            return False
        refits.pool.append(probe)
        refits.keeps.append(probe.selected)
        return True

    def add_back(self, settings: PathSettings) -> bool:
        """Add the winner plus the features its score test added (:func:`added_back`) to
        refit, once the probes and the dense refit are done: up to ``path.add_back`` times,
        each from the last add-back while it is good (:func:`choose_refit` then chooses it) or
        from the probe of a ranking made before the path once that won (:meth:`add_prior`),
        never with a feature budget. False when there is none."""
        refits = self.refits
        assert refits is not None
        if settings.max_features is not None:
            return False
        done = sum(p.ranking == "screen" for p in refits.pool)
        if done >= settings.add_back:
            return False
        win = choose_refit(refits.scores, self.slack, [m.val_losses for m in refits.models])
        model, (point, _) = refits.models[win], refits.scores[win]
        if model.pvalues is None or (done and point.ranking not in ("screen", "prior")):
            return False
        selected = added_back(model.pvalues, point, settings.screen_alpha)
        if selected is None:
            return False
        kept = sum(len(f) for f, c in zip(selected, point.components, strict=True) if c)
        log.info(
            "add-back: the score test adds %d features to %s (%d): smallest p-value x %d "
            "tested = %.3g",
            kept - point.kept,
            point.label,
            point.kept,
            tested_count(model.pvalues),
            adjusted_minimum(model.pvalues),
        )
        probe = replace(
            point,
            selected=selected,
            top_k=kept,
            denser=False,
            floor=False,
            ranking="screen",
            parent=win,
        )
        refits.pool.append(probe)
        refits.keeps.append(selected)
        return True
