"""Variance filter: keep the features whose values vary most, then standard VFL.

An unsupervised filter: each party computes the variance of each of its features over the
training rows (min-max scaled there) and sends it to the server, which keeps the features of
highest variance overall: ``strategy.keep_fraction`` of them, or as many as validation chooses
(:mod:`vflfs.strategies.filter_choice`). No label statistic travels; the server learns each
feature's variance. The worked example of docs/strategies.md ("Adding a strategy").
"""

from __future__ import annotations

import numpy as np

from vflfs.federation import Federation
from vflfs.protocol.variance import VARIANCES
from vflfs.server_app.experiment import Experiment

from .gini_filter import SelectThenTrain
from .registry import register
from .result import RunResult


@register
class VarianceFilter(SelectThenTrain):
    """Keep the features of highest variance (one round-trip), then VFL."""

    name = "variance_filter"
    phase = "selection"  # the traffic phase of the scores and the removal
    lower_is_better = False

    def scores(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        return [np.asarray(r.variances) for r in federation.broadcast(VARIANCES)]
