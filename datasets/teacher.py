"""Teacher datasets: labels from a random small network that reads a known subset of columns.

``X`` (n, d) is drawn column by column (standard normal, or a mix of standardised normal,
uniform, Laplace and +/-1 columns); the label is the argmax of a random MLP
``r -> hidden (tanh) -> c`` (:class:`Teacher`) applied to the ``r`` relevant columns only, so
every other column is pure noise and ``relevant`` lists exactly the columns a selector should
keep. The output biases are tuned so that the classes are about equally frequent, and
``label_noise`` replaces that share of the labels by uniformly random classes (the best
possible accuracy is then about ``1 - label_noise * (c - 1) / c``).

Where the relevant columns sit (``relevant_placement``): ``first`` (columns 0..r-1),
``spread`` (evenly spaced) or ``random`` (a seeded sample), the last two within the first
``relevant_within`` columns (all by default). With ``split=sizes`` this makes parties of pure
noise: ``split.sizes=[20,30,50] dataset.params.relevant_within=50`` leaves the last party of 50
columns without a relevant column. ``only_relevant`` returns the relevant columns alone (the
same rows and labels), the data of an oracle that knows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vflfs.datasets.dataset import Dataset, make_dataset
from vflfs.datasets.errors import DataError
from vflfs.datasets.registry import register_dataset

PLACEMENTS = ("first", "spread", "random")
DISTRIBUTIONS = ("normal", "mixed")
_BALANCE_ROUNDS = 50


@dataclass(frozen=True)
class TeacherShape:
    """What a teacher dataset looks like; checked on construction."""

    n_samples: int
    n_features: int
    n_classes: int
    n_relevant: int
    hidden: int
    gain: float
    label_noise: float
    relevant_placement: str
    relevant_within: int
    distribution: str

    def __post_init__(self) -> None:
        for key in ("n_samples", "n_features", "n_relevant", "hidden"):
            if int(getattr(self, key)) < 1:
                raise DataError(f"dataset 'teacher': {key} must be >= 1; fix: set a positive count")
        if self.n_classes < 2:
            raise DataError(
                "dataset 'teacher': n_classes must be >= 2; fix: set n_classes=2 or more"
            )
        if not self.gain > 0:
            raise DataError(f"dataset 'teacher': gain must be > 0, got {self.gain}; fix: e.g. 1.0")
        if not 0.0 <= self.label_noise < 1.0:
            raise DataError(
                f"dataset 'teacher': label_noise must lie in [0, 1), got {self.label_noise}; "
                "fix: give the share of labels to randomise, e.g. 0.05"
            )
        if not self.n_relevant <= self.relevant_within <= self.n_features:
            raise DataError(
                f"dataset 'teacher': need n_relevant ({self.n_relevant}) <= relevant_within "
                f"({self.relevant_within}) <= n_features ({self.n_features}); fix: change "
                "n_relevant or relevant_within"
            )
        if self.relevant_placement not in PLACEMENTS:
            raise DataError(
                f"dataset 'teacher': unknown relevant_placement {self.relevant_placement!r}; "
                f"fix: use one of {list(PLACEMENTS)}"
            )
        if self.distribution not in DISTRIBUTIONS:
            raise DataError(
                f"dataset 'teacher': unknown distribution {self.distribution!r}; fix: use one "
                f"of {list(DISTRIBUTIONS)}"
            )


def relevant_columns(shape: TeacherShape, rng: np.random.Generator) -> np.ndarray:
    """The sorted indices of the relevant columns under ``shape.relevant_placement``."""
    r, within = shape.n_relevant, shape.relevant_within
    if shape.relevant_placement == "first":
        return np.arange(r, dtype=np.int64)
    if shape.relevant_placement == "spread":
        return np.floor(np.arange(r) * within / r).astype(np.int64)
    return np.sort(rng.choice(within, size=r, replace=False)).astype(np.int64)


def draw_features(n: int, k: int, distribution: str, rng: np.random.Generator) -> np.ndarray:
    """(n, k) float32 features, each column with mean 0 and variance 1."""
    X = rng.standard_normal((n, k), dtype=np.float32)
    if distribution == "normal":
        return X
    kind = rng.integers(0, 4, size=k)  # 0 normal, 1 uniform, 2 Laplace, 3 +/-1
    u = rng.random((n, k), dtype=np.float32)
    uniform = (u - 0.5) * np.float32(np.sqrt(12.0))
    laplace = np.float32(-np.sqrt(0.5)) * np.sign(u - 0.5) * np.log1p(-2 * np.abs(u - 0.5))
    binary = np.where(u < 0.5, np.float32(-1.0), np.float32(1.0))
    for code, values in ((1, uniform), (2, laplace), (3, binary)):
        X[:, kind == code] = values[:, kind == code]
    return X


class Teacher:
    """A random ``r -> hidden (tanh) -> c`` network. The hidden pre-activations have standard
    deviation ``gain`` on standardised inputs (about 1: tanh is clearly curved but the classes
    stay learnable from thousands of rows; larger: more non-linear and harder to learn); the
    output biases balance the classes."""

    def __init__(
        self, r: int, hidden: int, c: int, rng: np.random.Generator, gain: float = 1.0
    ) -> None:
        self.w1 = rng.standard_normal((r, hidden)) * (gain / np.sqrt(r))
        self.b1 = rng.standard_normal(hidden) * 0.5
        self.w2 = rng.standard_normal((hidden, c)) * (3.0 / np.sqrt(hidden))
        self.b2 = np.zeros(c)

    def logits(self, Z: np.ndarray) -> np.ndarray:
        return np.tanh(Z @ self.w1 + self.b1) @ self.w2 + self.b2

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return np.argmax(self.logits(Z), axis=1)

    def balance(self, Z: np.ndarray) -> None:
        """Shift the output biases until every class is about 1/c of ``Z``'s predictions."""
        c = self.b2.size
        for _ in range(_BALANCE_ROUNDS):
            share = np.bincount(self.predict(Z), minlength=c) / len(Z)
            self.b2 -= 0.5 * np.log(np.maximum(share, 0.5 / len(Z)) * c)


@register_dataset("teacher")
def load_teacher(
    data_dir: Path | None,
    *,
    seed: int = 0,
    n_samples: int = 2000,
    n_features: int = 100,
    n_classes: int = 2,
    n_relevant: int = 10,
    hidden: int = 32,
    gain: float = 1.0,
    label_noise: float = 0.05,
    relevant_placement: str = "random",
    relevant_within: int | None = None,
    distribution: str = "normal",
    only_relevant: bool = False,
) -> Dataset:
    """A teacher dataset (module docstring); deterministic given its parameters.

    The relevant columns' values, the teacher, the label noise, the noise columns and the
    placement come from separate random streams of ``seed``: the relevant values and the labels
    do not change with ``n_features`` or the placement, only the noise columns and positions.
    """
    shape = TeacherShape(
        n_samples=int(n_samples),
        n_features=int(n_features),
        n_classes=int(n_classes),
        n_relevant=int(n_relevant),
        hidden=int(hidden),
        gain=float(gain),
        label_noise=float(label_noise),
        relevant_placement=str(relevant_placement),
        relevant_within=int(n_features if relevant_within is None else relevant_within),
        distribution=str(distribution),
    )
    signal, net, flips, noise, places = _streams(seed)
    Z = draw_features(shape.n_samples, shape.n_relevant, shape.distribution, signal)
    y = teacher_labels(shape, Z, net, flips)
    if only_relevant:
        return make_dataset("teacher", Z, y, relevant=np.arange(shape.n_relevant))
    relevant = relevant_columns(shape, places)
    others = np.setdiff1d(np.arange(shape.n_features), relevant)
    X = np.empty((shape.n_samples, shape.n_features), np.float32)
    X[:, relevant] = Z
    X[:, others] = draw_features(shape.n_samples, others.size, shape.distribution, noise)
    return make_dataset("teacher", X, y, relevant=relevant)


def _streams(seed: int) -> list[np.random.Generator]:
    """The separate random streams of ``seed``: signal, teacher, label noise, noise, places."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence([int(seed), 0x7EAC]).spawn(5)]


def teacher_relevant(
    seed: int,
    n_features: int,
    n_relevant: int,
    relevant_placement: str = "random",
    relevant_within: int | None = None,
) -> np.ndarray:
    """The relevant columns of :func:`load_teacher` with these parameters, without drawing
    the data (the placement has a random stream of its own)."""
    within = n_features if relevant_within is None else relevant_within
    placement = TeacherShape(
        n_samples=1,
        n_features=int(n_features),
        n_classes=2,
        n_relevant=int(n_relevant),
        hidden=1,
        gain=1.0,
        label_noise=0.0,
        relevant_placement=str(relevant_placement),
        relevant_within=int(within),
        distribution="normal",
    )
    return relevant_columns(placement, _streams(seed)[4])


def teacher_labels(
    shape: TeacherShape, Z: np.ndarray, net: np.random.Generator, flips: np.random.Generator
) -> np.ndarray:
    """Labels of the relevant columns ``Z``: a balanced random teacher's, with label noise."""
    teacher = Teacher(shape.n_relevant, shape.hidden, shape.n_classes, net, shape.gain)
    Z64 = Z.astype(np.float64)
    teacher.balance(Z64)
    y = teacher.predict(Z64)
    flip = flips.random(shape.n_samples) < shape.label_noise
    y[flip] = flips.integers(0, shape.n_classes, size=int(flip.sum()))
    if np.unique(y).size < shape.n_classes:
        raise DataError(
            f"dataset 'teacher': only {np.unique(y).size} of {shape.n_classes} classes occur "
            f"in {shape.n_samples} rows; fix: draw more rows or fewer classes"
        )
    return y
