"""Local lasso: LESS-VFL without embedding component selection (its ablation baseline).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML (Section 5, "Local Lasso"; spec section 5): pre-training, then
stage 3 with K_m = every embedding component (no upload of embeddings, no server selection),
then standard VFL on the kept features.
"""

from __future__ import annotations

import numpy as np

from vflfs.federation import Federation
from vflfs.server_app.experiment import Experiment

from .less_vfl import LessVFL
from .registry import register
from .result import RunResult


@register
class LocalLasso(LessVFL):
    """Local lasso (Castiglia et al., ICML 2023): each party's stage 3 on all its components.

    The message that starts stage 3 (K_m = all components) is counted in phase ``stage2``;
    it carries no embedding.
    """

    name = "local_lasso"

    def significant_components(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        return [np.arange(w, dtype=np.int64) for w in self.widths]
