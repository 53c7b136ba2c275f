"""What one party builds from its share of the columns: own block + noise, scaled."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vflfs.datasets.noise import add_spurious_features
from vflfs.datasets.scaling import scale_columns
from vflfs.datasets.validation import check_rows


@dataclass(frozen=True, eq=False)
class PartyData:
    """One party's local features.

    ``X`` (n, d_m') float32: its own columns then the spurious ones, scaled to [0, 1] on the
    training rows. ``columns`` (d_m,) are the original indices of the real columns;
    ``spurious`` is a bool mask over the d_m' columns, True on injected noise.
    """

    X: np.ndarray
    columns: np.ndarray
    spurious: np.ndarray


def build_party_data(
    X: np.ndarray,
    columns: np.ndarray,
    train_rows: np.ndarray,
    noise_ratio: float = 0.0,
    noise_seed: int = 0,
    scaling: str = "auto",
) -> PartyData:
    """Take ``X[:, columns]``, append spurious columns, then scale all to [0, 1] on
    ``train_rows`` (:func:`~vflfs.datasets.scaling.scale_columns`: ``auto`` or ``minmax``).

    Deterministic given its arguments, so every process of a party rebuilds the same view.
    """
    X = np.asarray(X)
    cols = check_rows(columns, X.shape[1], "party columns")
    block, spurious = add_spurious_features(X[:, cols], train_rows, noise_ratio, noise_seed)
    scaled = scale_columns(block, train_rows, scaling)
    return PartyData(X=scaled, columns=cols.copy(), spurious=spurious)
