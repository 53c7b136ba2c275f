"""The scaling benchmark's plots (:mod:`benchmarks.scaling`): small log-log PNGs.

``scaling_rows.png``     seconds per epoch against rows, one line per engine and party count;
``scaling_parties.png``  seconds per epoch against parties, one line per engine and row count;
``scaling_memory.png``   a party's memory against parties: tracemalloc's peak of its setup
                         (solid) and the peak RSS of the process hosting it (dashed).

Each plot shows the smallest column count of the sweep (the one most points share).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

ENGINE_COLOURS = {"local": "tab:blue", "simulation": "tab:orange"}
MARKERS = "os^Dv<>p"


def _lines(rows: list[dict], x: str, y: str, by: str) -> dict[tuple[str, int], list[tuple]]:
    """(engine, value of ``by``) -> sorted (x, y) points of the completed rows."""
    out: dict[tuple[str, int], list[tuple]] = {}
    for r in rows:
        if r["status"] == "completed" and r.get(y) is not None:
            out.setdefault((r["engine"], r[by]), []).append((r[x], r[y]))
    return {k: sorted(v) for k, v in sorted(out.items())}


def _figure(
    rows: list[dict], x: str, y: str, by: str, ylabel: str, path: Path, dashed: str = ""
) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4), dpi=80)
    series = [(y, "-", "")] + ([(dashed, "--", " (process RSS)")] if dashed else [])
    for key, style, suffix in series:
        for (engine, value), points in _lines(rows, x, key, by).items():
            markers = sorted({r[by] for r in rows})
            ax.plot(
                *zip(*points, strict=True),
                style,
                color=ENGINE_COLOURS.get(engine, "gray"),
                marker=MARKERS[markers.index(value) % len(MARKERS)],
                label=f"{engine}, {by}={value}{suffix}",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sorted({r[x] for r in rows}))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_all(rows: list[dict], out: Path) -> list[Path]:
    """The three PNGs in ``out``, for the sweep's smallest column count."""
    done = [r for r in rows if r["status"] == "completed"]
    if not done:
        return []
    cols = min(r["cols"] for r in done)
    shown = [r for r in done if r["cols"] == cols]
    label = f" ({cols} columns per party)"
    return [
        _figure(
            shown, "rows", "s_per_epoch", "parties", "seconds per epoch" + label,
            out / "scaling_rows.png",
        ),
        _figure(
            shown, "parties", "s_per_epoch", "rows", "seconds per epoch" + label,
            out / "scaling_parties.png",
        ),
        _figure(
            shown, "parties", "party_traced_mb", "rows", "party 0 memory, MB" + label,
            out / "scaling_memory.png", dashed="party_rss_mb",
        ),
    ]  # fmt: skip
