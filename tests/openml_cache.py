"""A scikit-learn OpenML cache made from a local ARFF file, so ``fetch_openml`` runs offline.

``fetch_openml(data_id=ID, data_home=FOLDER)`` reads ``FOLDER/openml/openml.org/<URL path>.gz``
before going to the network; this writes the four responses it reads (description, features,
qualities, the ARFF file) there.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

ATTRIBUTE = re.compile(r"@attribute\s+'?([^\s']+)'?\s+(.+)", re.IGNORECASE)


def _write(folder: Path, path: str, content: bytes) -> None:
    target = folder / "openml" / "openml.org" / f"{path}.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(content))


def _features(arff: str, target: str) -> list[dict]:
    features = []
    for line in arff.splitlines():
        match = ATTRIBUTE.match(line.strip())
        if not match:
            continue
        name, kind = match.groups()
        nominal = kind.strip().startswith("{")
        feature = {
            "index": str(len(features)),
            "name": name,
            "data_type": "nominal" if nominal else "numeric",
            "is_target": "true" if name == target else "false",
            "is_ignore": "false",
            "is_row_identifier": "false",
            "number_of_missing_values": "0",
        }
        if nominal:
            feature["nominal_value"] = [v.strip() for v in kind.strip()[1:-1].split(",")]
        features.append(feature)
    return features


def write_openml_cache(folder: Path, data_id: int, arff: str, target: str) -> Path:
    """Cache ``arff`` (ARFF text) as OpenML dataset ``data_id`` with ``target`` under ``folder``."""
    data = arff.encode()
    n_rows = sum(
        1 for line in arff.split("@data", 1)[-1].splitlines() if line.strip() and line[0] != "%"
    )
    file_id = 90000 + data_id
    url = f"https://www.openml.org/data/v1/download/{file_id}/dataset.arff"
    description = {
        "id": str(data_id),
        "name": f"dataset-{data_id}",
        "version": "1",
        "format": "ARFF",
        "file_id": str(file_id),
        "url": url,
        "default_target_attribute": target,
        "md5_checksum": hashlib.md5(data).hexdigest(),
        "status": "active",
        "description": "A local copy.",
    }
    _write(
        folder,
        f"api/v1/json/data/{data_id}",
        json.dumps({"data_set_description": description}).encode(),
    )
    features = {"data_features": {"feature": _features(arff, target)}}
    _write(folder, f"api/v1/json/data/features/{data_id}", json.dumps(features).encode())
    qualities = {
        "data_qualities": {"quality": [{"name": "NumberOfInstances", "value": str(n_rows)}]}
    }
    _write(folder, f"api/v1/json/data/qualities/{data_id}", json.dumps(qualities).encode())
    _write(folder, f"data/v1/download/{file_id}/dataset.arff", data)
    return folder
