"""Shared figure plumbing: the Agg backend, colours per table column, file names, saving."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never a window (safe on headless machines and in threads)

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.figure import Figure  # noqa: E402

from vflfs.report.table import order_key  # noqa: E402


@dataclass
class Drawn:
    """What a plotting step wrote and what it skipped (with the reason)."""

    files: list[Path] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def extend(self, other: Drawn) -> None:
        self.files.extend(other.files)
        self.messages.extend(other.messages)


def new_figure(nrows: int = 1, ncols: int = 1, size: tuple[float, float] = (7.0, 4.5)):
    """A figure and its axes array (always 2-D), sized per subplot."""
    width, height = size
    return plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained"
    )


def save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as a PNG and free it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def colours(keys: Iterable[tuple[Any, ...]]) -> dict[tuple[Any, ...], Any]:
    """A stable colour per key (sorted, tab10 then tab20 for more than ten)."""
    ordered = sorted(set(keys), key=lambda k: tuple(order_key(v) for v in k))
    cmap = plt.get_cmap("tab10" if len(ordered) <= 10 else "tab20")
    return {key: cmap(i % cmap.N) for i, key in enumerate(ordered)}


def label(key: Sequence[Any]) -> str:
    """``vfl`` or ``vfl, 0.01`` for a table key."""
    return ", ".join(str(v) for v in key)


def slug(text: str) -> str:
    """A file-name-safe form of ``text``."""
    cleaned = re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_.")
    return cleaned or "all"
