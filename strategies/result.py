"""What a strategy returns: per-epoch history, the score at the best validation epoch, selection."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class PartyReport:
    """A party as the server knows it: feature count, injected-noise columns, selection."""

    index: int
    columns: list[int]  # original column indices of the party's real features
    n_features: int  # real + spurious columns at the party
    spurious: list[int]  # local indices of injected noise columns
    device: str
    selected: list[int] = field(default_factory=list)  # local indices of kept features, now
    selected_at_best: list[int] | None = None  # ... at the best validation epoch
    components: int | None = None  # embedding components the server reads (None: all)

    def chosen(self, current: bool = False) -> list[int]:
        """The selection of the reported model (best validation epoch), or the current one.

        A party none of whose embedding components reaches the server selects nothing: its
        features cannot change the prediction.
        """
        if self.components == 0:
            return []
        if current or self.selected_at_best is None:
            return self.selected
        return self.selected_at_best

    def as_dict(self) -> dict:
        """The party's entry in ``results.json``: ``selected`` is the reported model's
        selection (:meth:`chosen`), ``selected_last`` the features the party held when the run
        ended (a later training, e.g. the plain model on every feature that a choice weighs,
        may have held others)."""
        out = asdict(self)
        del out["selected_at_best"]
        out["selected"], out["selected_last"] = self.chosen(), list(self.selected)
        return out

    def selected_original(self, current: bool = False) -> list[int]:
        """Kept real features as original dataset column indices."""
        d = len(self.columns)
        return [self.columns[i] for i in self.chosen(current) if i < d]


@dataclass
class RunResult:
    """History and final scores of one run."""

    strategy: str
    metric: str
    history: list[dict] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    parties: list[PartyReport] = field(default_factory=list)
    importance: list[dict] = field(default_factory=list)  # per party: kind and values
    extra: dict = field(default_factory=dict)
    # The reported model is the best validation epoch among epochs best_from .. best_to - 1
    # (best_to None: to the end): e.g. only the epochs trained after a selection.
    best_from: int = 0
    best_to: int | None = None

    @property
    def window(self) -> list[dict]:
        """The history rows of the reported model's epochs (all rows if none is in it)."""
        return [
            r
            for r in self.history
            if r["epoch"] >= self.best_from and (self.best_to is None or r["epoch"] < self.best_to)
        ] or self.history

    @property
    def best(self) -> dict:
        """The reported epoch: the best validation score in the window, and among epochs that
        tie on it the lowest validation loss (then the earliest). On a few dozen validation
        rows the accuracy moves a row at a time and ties for many epochs: the first of them is
        often a model that has not finished learning, the one with the lowest loss the one
        that generalises (docs/selection_results.md, "Ties on few validation rows")."""
        rows = self.window
        if not rows:
            return {}
        return max(rows, key=lambda row: (row["val_metric"], -_loss(row), -row["epoch"]))

    @property
    def first_best(self) -> dict:
        """The first epoch in the window that reached the best validation score: patience
        counts from it (a tie is no better score), and a path starts from it."""
        rows = self.window
        if not rows:
            return {}
        return max(rows, key=lambda row: (row["val_metric"], -row["epoch"]))

    def snapshot_best(self) -> None:
        """Remember the current selection as the best epoch's."""
        for p in self.parties:
            p.selected_at_best = list(p.selected)

    def selection(self, relevant: np.ndarray | None = None, current: bool = False) -> dict:
        """Selected features per party (of the best-epoch model unless ``current``), the overall
        ratio, and where known its quality."""
        chosen = [p.chosen(current) for p in self.parties]
        total = sum(p.n_features for p in self.parties)
        kept = sum(len(c) for c in chosen)
        out: dict = {
            "per_party": [
                {"party": p.index, "selected": len(c), "of": p.n_features}
                for p, c in zip(self.parties, chosen, strict=True)
            ],
            "selected_features": kept,
            "total_features": total,
            "ratio": kept / total if total else 0.0,
        }
        n_spurious = sum(len(p.spurious) for p in self.parties)
        if n_spurious:
            removed = sum(
                len(set(p.spurious) - set(c)) for p, c in zip(self.parties, chosen, strict=True)
            )
            out["spurious_removed"] = removed / n_spurious
        if relevant is not None:
            picked = {c for p in self.parties for c in p.selected_original(current)}
            rel = set(map(int, relevant))
            hits = len(picked & rel)
            out["precision"] = hits / len(picked) if picked else 0.0
            out["recall"] = hits / len(rel) if rel else 0.0
        return out


def _loss(row: dict) -> float:
    """A history row's validation loss; a missing or NaN one counts as the highest."""
    loss = row.get("val_loss")
    return math.inf if loss is None or loss != loss else float(loss)
