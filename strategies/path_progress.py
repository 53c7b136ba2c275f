"""What the regularisation path (:mod:`vflfs.strategies.path`) has done so far: the models it
may report, its points, and its refits. A checkpoint keeps it between the path's stages, so a
resumed run goes on where it stopped (:mod:`vflfs.strategies.checkpoint`)."""

from __future__ import annotations

from dataclasses import dataclass

from vflfs.federation import Federation

from .path_choice import PathPoint
from .result import RunResult
from .vfl import party_importance


@dataclass
class Fitted:
    """A trained model the choice may report: its epochs, each party's selection, and how
    much each party's model used each feature, recorded when it finished training."""

    first: int
    stop: int  # the model's epochs are first .. stop - 1
    parties: list[tuple[list[int] | None, list[int], int | None]]  # at best, now, components
    importance: list[dict]

    @classmethod
    def now(
        cls, federation: Federation, result: RunResult, first: int, stop: int | None = None
    ) -> Fitted:
        parties = [(p.selected_at_best, list(p.selected), p.components) for p in result.parties]
        stop = len(result.history) if stop is None else stop
        return cls(first, stop, parties, party_importance(federation))

    def report(self, result: RunResult) -> None:
        """Make this model the run's result."""
        result.best_from, result.best_to = self.first, self.stop
        for p, (at_best, selected, components) in zip(result.parties, self.parties, strict=True):
            p.selected_at_best, p.selected, p.components = at_best, selected, components


@dataclass
class Refits:
    """The refits of the candidate points: which, on what features, and the models and
    scores so far (the dense model first, with its warm-up score: it is never refit)."""

    pool: list[PathPoint]
    keeps: list[list[list[int]]]  # per candidate, per party: the features it refits on
    models: list[Fitted]
    scores: list[tuple[PathPoint, float]]

    @property
    def done(self) -> int:
        """How many candidates are refit."""
        return len(self.scores) - 1


@dataclass
class PathProgress:
    """How far the path has come: what a checkpoint keeps between the path's stages."""

    points: list[PathPoint]  # the points so far, the dense one first
    unit: float  # the penalty's unit: the dense model's training loss
    epoch: int  # the first epoch of the next point
    scale: float  # the next point's penalty
    k: int = 0  # points trained after the dense one
    slack: float = 0.0  # the choice's tolerance (set once the path ends)
    refits: Refits | None = None  # set once the path ends
