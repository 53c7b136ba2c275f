"""The SHA256 of a dataset's arrays: the check that a converted file holds the expected data.

The digest covers the arrays a benchmark file is made of (features, labels, original label
values, official split, unlabelled test rows), each with its name, dtype and shape, and not the
``meta`` note, so files converted from different but equal sources (an archive, OpenML) compare
equal, and a different row order, dtype or label coding does not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

DIGEST_KEYS = ("X", "y", "classes", "train_idx", "test_idx", "X_test_unlabeled")


def arrays_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA256 (hex) over the name, dtype, shape and bytes of each of :data:`DIGEST_KEYS` present."""
    digest = hashlib.sha256()
    for key in DIGEST_KEYS:
        if key not in arrays:
            continue
        array = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
