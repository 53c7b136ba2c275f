"""Scores of predictions: accuracy for classification, R^2 for regression; what a model that
learned nothing scores; paired comparisons of per-sample losses."""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.metrics import r2_score

from .models import Task


def score(task: Task, output: torch.Tensor, y: np.ndarray) -> float:
    """Accuracy (classification) or R^2 (regression) of model outputs against ``y``."""
    out = output.detach().cpu()
    if task.kind == "classification":
        # sklearn's accuracy_score to the bit, without its argument checks (~0.4 ms a call)
        return float(np.mean(out.argmax(dim=1).numpy() == np.asarray(y).ravel()))
    # R^2 of the standardised targets: the same as on the original scale
    return float(r2_score(task.target(y).numpy(), out.squeeze(-1).numpy()))


def majority_margin(baseline: float, n: int) -> float:
    """How far above the majority class's accuracy ``baseline`` on ``n`` rows a model must
    score to show it learned something: one standard error of that accuracy (at least 0.005).
    On 36 rows one row is 2.8 points: a model one row above the majority class shows nothing."""
    return max(0.005, float(np.sqrt(baseline * (1 - baseline) / max(n, 1))))


def prior_losses(task: Task, y: np.ndarray, y_val: np.ndarray) -> np.ndarray:
    """Each of ``y_val``'s rows' loss under the constant prediction of a model that learned
    nothing from training labels ``y``: their class frequencies (add-one smoothed), or their
    mean."""
    target = task.target(y_val)
    if task.kind == "classification":
        counts = np.bincount(np.asarray(y, np.int64), minlength=task.n_classes) + 1.0
        prior = torch.tensor(np.log(counts / counts.sum()), dtype=torch.float32)
        out = prior.expand(len(target), -1)
    else:
        out = torch.full((len(target), 1), float(task.target(y).mean()))
    return task.loss(out, target, reduction="none").float().numpy()


def paired_excess(losses: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """How much higher ``losses`` are than ``reference``'s on the same rows: the mean of the
    per-row differences and its standard error (:func:`mean_and_se`)."""
    return mean_and_se(np.asarray(losses, np.float64) - np.asarray(reference, np.float64))


def mean_and_se(values: np.ndarray) -> tuple[float, float]:
    """The mean of ``values`` and its standard error (0 for a single value)."""
    se = float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return float(values.mean()), se
