"""Nested ``results.json`` dicts as flat rows with dotted column names."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# Short lists of scalars (e.g. ``config.split.sizes``) become a JSON string so runs can be
# grouped by them; longer lists and lists of dicts (per-party details) are left out.
MAX_LIST = 16


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists as described at :data:`MAX_LIST`."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list | tuple):
            if len(value) <= MAX_LIST and all(_is_scalar(v) for v in value):
                out[name] = json.dumps(list(value))
        else:
            out[name] = value
    return out


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)
