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
