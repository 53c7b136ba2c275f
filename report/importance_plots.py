"""Per-party feature importance (``results.json`` ``importance``): one PNG per run or fold.

One subplot per party: a bar per feature in index order, blue where the run kept the feature,
grey where it dropped it, red / pink for injected spurious columns (kept / dropped). With an
``image-rows`` split whose band fits the image width, the party's real columns are drawn as
its image band instead. Subplot titles name the importance kind (``gate``, ``weight_norm``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from vflfs.report.collect import iter_folds
from vflfs.report.figures import Drawn, new_figure, save, slug

KEPT, DROPPED, SPURIOUS_KEPT, SPURIOUS_DROPPED = "tab:blue", "lightgray", "tab:red", "pink"
MAX_BARS = 1000  # above this, thin lines instead of bars (fast on 10k-feature datasets)


def plot_importance(table: pd.DataFrame, results: dict[str, dict], out_dir: Path) -> Drawn:
    """A figure for every (run, fold) of ``table`` whose results hold ``importance``."""
    drawn = Drawn()
    for record in table[["run_dir", "run", "fold"]].drop_duplicates().to_dict("records"):
        run = results.get(str(record["run_dir"]), {})
        folds = dict(iter_folds(run))
        entry = folds.get(int(record["fold"]), {})
        importance = entry.get("importance")
        if not isinstance(importance, list) or not importance:
            continue
        name = str(record["run"]) + (f" fold {record['fold']}" if len(folds) > 1 else "")
        parties = {p.get("index"): p for p in entry.get("parties") or run.get("parties") or []}
        title = f"{run.get('strategy')} on {run.get('dataset')}, seed {run.get('seed')} ({name})"
        fig = importance_figure(importance, parties, title, _image_width(run.get("config", {})))
        drawn.files.append(save(fig, out_dir / "importance" / f"{slug(name)}.png"))
    if not drawn.files:
        drawn.messages.append("no run records importance: no importance plots")
    return drawn


def importance_figure(
    importance: list[dict[str, Any]],
    parties: dict[Any, dict[str, Any]],
    title: str,
    image_width: int | None = None,
):
    """The figure of one run: a subplot per ``importance`` entry (party)."""
    fig, axes = new_figure(len(importance), 1, size=(9.0, 2.4))
    for ax, entry in zip(axes[:, 0], importance, strict=True):
        values = np.asarray(entry.get("values", []), dtype=float)
        party = parties.get(entry.get("party"), {})
        real = len(party.get("columns", values))
        kind = entry.get("kind", "importance")
        if image_width and real and real <= len(values) and real % image_width == 0:
            image = ax.imshow(values[:real].reshape(-1, image_width), cmap="viridis")
            fig.colorbar(image, ax=ax, shrink=0.8)
            ax.set_title(f"party {entry.get('party')}: {kind} (image band, real columns)")
            continue
        _bars(ax, values, party)
        kept = party.get("selected")
        tail = f", {len(kept)} kept" if isinstance(kept, list) else ""
        ax.set_title(f"party {entry.get('party')}: {kind} ({len(values)} features{tail})")
        ax.set_xlabel("feature index (party-local)")
        ax.set_ylabel(str(kind))
    handles = _legend(parties.values())
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    fig.suptitle(title)
    return fig


def _bars(ax: Any, values: np.ndarray, party: dict[str, Any]) -> None:
    colours = _colours(len(values), party)
    x = np.arange(len(values))
    if len(values) > MAX_BARS:
        ax.vlines(x, 0, values, colors=colours, lw=0.6)
    else:
        ax.bar(x, values, width=0.85 if len(values) <= 200 else 1.0, color=colours)
    ax.set_xlim(-0.5, len(values) - 0.5)


def _legend(parties: Iterable[dict[str, Any]]) -> list[Patch]:
    """Colour keys for what the parties report: selection, and spurious columns."""
    parties = list(parties)
    if not any("selected" in p for p in parties):
        return []
    handles = [Patch(color=KEPT, label="kept"), Patch(color=DROPPED, label="dropped")]
    if any(p.get("spurious") for p in parties):
        handles += [
            Patch(color=SPURIOUS_KEPT, label="spurious, kept"),
            Patch(color=SPURIOUS_DROPPED, label="spurious, dropped"),
        ]
    return handles


def _colours(n: int, party: dict[str, Any]) -> list[str]:
    selected = party.get("selected")
    kept = set(range(n)) if selected is None else set(selected)
    spurious = set(party.get("spurious") or [])
    out = []
    for i in range(n):
        if i in spurious:
            out.append(SPURIOUS_KEPT if i in kept else SPURIOUS_DROPPED)
        else:
            out.append(KEPT if i in kept else DROPPED)
    return out


def _image_width(config: dict[str, Any]) -> int | None:
    """The image width when the split is ``image-rows`` and the shape is known."""
    split, dataset = config.get("split") or {}, config.get("dataset") or {}
    if split.get("kind") != "image-rows":
        return None
    shape = dataset.get("image_shape")
    if not shape:
        from vflfs.datasets.benchmarks import IMAGE_SHAPES

        shape = IMAGE_SHAPES.get(str(dataset.get("name")))
    if shape:
        return int(shape[1])
    total = dataset.get("n_features")
    side = math.isqrt(int(total)) if total else 0
    return side if side and side * side == int(total) else None
