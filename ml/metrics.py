"""Scores of predictions: accuracy for classification, R^2 for regression."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import accuracy_score, r2_score

from .models import Task


def score(task: Task, output: torch.Tensor, y: np.ndarray) -> float:
    """Accuracy (classification) or R^2 (regression) of model outputs against ``y``."""
    out = output.detach().cpu()
    if task.kind == "classification":
        return float(accuracy_score(y, out.argmax(dim=1).numpy()))
    # R^2 of the standardised targets: the same as on the original scale
    return float(r2_score(task.target(y).numpy(), out.squeeze(-1).numpy()))


def majority_margin(baseline: float, n: int) -> float:
    """How far above the majority class's accuracy ``baseline`` on ``n`` rows a model must
    score to show it learned something: one standard error of that accuracy (at least 0.005).
    On 36 rows one row is 2.8 points: a model one row above the majority class shows nothing."""
    return max(0.005, float(np.sqrt(baseline * (1 - baseline) / max(n, 1))))
