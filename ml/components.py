"""Embedding components: what a party sent, back to its full embedding width.

With embedding gates a party sends only its open components, with their mask. The server's
interactive layer and the party's stale-gradient correction both need the embedding at full
width, the components not sent as zeros.
"""

from __future__ import annotations

import numpy as np


def full_width(values: np.ndarray, mask: np.ndarray | None, width: int) -> np.ndarray:
    """``values`` (rows x sent components) at ``width`` columns, zeros where not sent
    (``mask`` None: everything was sent)."""
    if mask is None:
        return values
    full = np.zeros((len(values), width), dtype=values.dtype)
    full[:, mask] = values
    return full
