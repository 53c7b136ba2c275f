"""``vflfs report`` on runs that follow a regularisation path, and on runs with warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_report import history, md_row, results, write

from vflfs.report import cli, collect_runs
from vflfs.report.figures import colours
from vflfs.report.path_plots import path_figure, path_runs

from helpers import run_local, tiny_config

LEARNED_NOTHING = (
    "learned nothing: test accuracy 0.5000 is no better than always predicting the majority "
    "class (0.5000)"
)
FELL_BACK = "selection cost accuracy: every refit on a selection scored below the dense model"


def path(kept: list[int], vals: list[float], mb_step: float = 0.5) -> list[dict]:
    """A path in ``results.json``'s layout over two parties (half the features each)."""
    points = []
    for k, (n, val) in enumerate(zip(kept, vals, strict=True)):
        per_party = [n - n // 2, n // 2]
        points.append(
            {
                "point": k,
                "penalty": 0.0 if k == 0 else 0.01 * 2**k,
                "epoch": 5 + 2 * k,
                "val_metric": val,
                "val_loss": 1.0 - val,
                "selected": [list(range(p)) for p in per_party],
                "components": [[0, 1], [0, 1]],
                "mb": mb_step * (k + 1),
                "kept": n,
                "per_party": per_party,
                "components_kept": [2, 2],
            }
        )
    return points


def path_result(strategy: str, seed: int, points: list[dict], choice: dict, warnings: list):
    data = results(strategy, "madelon", seed, 0.8, points[choice["point"]]["kept"] / 500)
    return {
        **data,
        "path": points,
        "warnings": warnings,
        "baseline_test_metric": 0.5,
        "extra": {"path_choice": choice},
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """stg and fedsdg_fs with a path (500 features down to 2), vfl without one."""
    stg = path([500, 120, 30, 8, 2], [0.80, 0.84, 0.86, 0.85, 0.60])
    write(
        tmp_path / "stg/0",
        path_result("stg", 0, stg, {"point": 3, "tolerance": 0.02}, []),
        history(0.85, 0.016),
    )
    fed = path([500, 200, 40, 5], [0.52, 0.50, 0.49, 0.50], mb_step=0.8)
    choice = {"point": 3, "tolerance": 0.03, "fallback": "dense"}
    write(
        tmp_path / "fed/0",
        path_result("fedsdg_fs", 0, fed, choice, [LEARNED_NOTHING, FELL_BACK]),
        history(0.5, 1.0),
    )
    write(tmp_path / "vfl/0", results("vfl", "madelon", 0, 0.6, 1.0), history(0.6, 1.0))
    return tmp_path


def test_path_plots_and_warnings_are_in_the_report(root, capsys):
    out = root / "rep"
    assert cli.main([str(root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in ("path_val_vs_features_madelon.png", "path_val_vs_mb_madelon.png"):
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000, name
    md = (out / "report.md").read_text()
    assert "![path_val_vs_features_madelon](path_val_vs_features_madelon.png)" in md
    assert "![path_val_vs_mb_madelon](path_val_vs_mb_madelon.png)" in md
    section = md.split("## Warnings", 1)[1].split("\n## ", 1)[0]
    assert f"- `fed/0`: {LEARNED_NOTHING}" in section
    assert f"- `fed/0`: {FELL_BACK}" in section and "stg/0" not in section
    assert "madelon: 1 run(s) without a path left out of the path plots (vfl/0)" in md
    assert f"warning: `fed/0`: {LEARNED_NOTHING}" in printed
    header, madelon = md_row(md, "dataset \\ strategy"), md_row(md, "madelon")
    cells = dict(zip(header, madelon, strict=True))
    assert cells["fedsdg_fs"] == "80.0 / 0.01 ⚠1" and cells["stg"] == "80.0 / 0.02"
    csv = pd.read_csv(out / "report.csv").set_index("strategy")
    assert csv.loc["fedsdg_fs", "warned"] == 1 and csv.loc["stg", "warned"] == 0


def test_warnings_are_listed_without_plots(root):
    assert cli.main([str(root), "--out", str(root / "rep"), "--no-plots"]) == 0
    md = (root / "rep" / "report.md").read_text()
    assert "## Warnings" in md and "2 warning(s) in the runs used" in md
    assert not list((root / "rep").glob("*.png"))


def test_warnings_of_folds_name_the_fold(tmp_path):
    folds = [
        {**results("stg", "madelon", 0, t, 0.5), "warnings": w}
        for t, w in ((0.5, [LEARNED_NOTHING]), (0.8, []), (0.5, [LEARNED_NOTHING]))
    ]
    cv = {**results("stg", "madelon", 0, 0.6, 0.5), "warnings": [], "folds": folds}
    write(tmp_path / "cv", cv)
    assert cli.main([str(tmp_path), "--out", str(tmp_path / "rep"), "--no-plots"]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    section = md.split("## Warnings", 1)[1]
    assert f"- `cv` fold 0: {LEARNED_NOTHING}" in section
    assert f"- `cv` fold 2: {LEARNED_NOTHING}" in section and "fold 1" not in section
    assert md_row(md, "madelon")[1] == "60.0 ± 17.3 / 0.50 ⚠2"


def test_runs_without_a_path_get_the_skip_message(tmp_path):
    write(tmp_path / "vfl/0", results("vfl", "madelon", 0, 0.6, 1.0), history(0.6, 1.0))
    assert cli.main([str(tmp_path), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "no run records a regularisation path (path): no path plots" in md
    assert "## Warnings" not in md and not list((tmp_path / "rep").glob("path_*.png"))
    assert (tmp_path / "rep" / "metric_vs_mb_madelon.png").exists()


def test_figure_follows_each_path_and_stars_the_chosen_point(root):
    runs = collect_runs(root)
    found, missing = path_runs(runs.table, runs.results, ["dataset"], ["strategy"])
    assert [r.name for r in found] == ["fed/0", "stg/0"] and missing == [(("madelon",), "vfl/0")]
    fed, stg = found
    assert fed.fallback and not stg.fallback
    assert stg.chosen_row["kept"].tolist() == [8] and stg.points["kept"].tolist()[0] == 500
    palette = colours([("fedsdg_fs",), ("stg",), ("vfl",)])
    fig = path_figure(found, "madelon", "kept", palette, "strategy")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"  # 2 to 500 features: more than two decades
    assert ax.get_xlabel() == "features kept (all parties)"
    assert ax.get_ylabel() == "validation accuracy (%)"
    stars = [c.get_offsets().tolist() for c in ax.collections]
    assert [[5.0, 50.0]] in stars and [[8.0, 85.0]] in stars  # (kept, validation %)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "stg (n=1)" in legend and "chosen point" in legend
    assert "chosen; dense model reported" in legend
    lines = {tuple(line.get_xdata()) for line in ax.get_lines()}
    assert (500, 120, 30, 8, 2) in lines
    fig = path_figure(found, "madelon", "mb", palette)
    assert fig.axes[0].get_xscale() == "linear"  # 0.5 to 4 MB


def test_report_of_a_real_path_run(tmp_path):
    quick = (
        "training.epochs=6 strategy.path.points=3 strategy.path.max_points=3 "
        "strategy.path.steps_per_point=12"
    )
    run_local(tiny_config(f"strategy=stg {quick}"), tmp_path / "runs" / "stg")
    summary = json.loads((tmp_path / "runs" / "stg" / "results.json").read_text())
    out = tmp_path / "rep"
    assert cli.main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    for name in ("path_val_vs_features", "path_val_vs_mb"):
        assert (out / f"{name}_synthetic_madelon.png").stat().st_size > 5000
        assert f"![{name}_synthetic_madelon]({name}_synthetic_madelon.png)" in md
    assert ("## Warnings" in md) == bool(summary["warnings"])


def test_a_path_down_to_no_feature_keeps_zero_on_the_axis(tmp_path):
    points = path([1000, 50, 5, 0], [0.80, 0.84, 0.82, 0.50])
    write(tmp_path / "stg", path_result("stg", 0, points, {"point": 2, "tolerance": 0.03}, []))
    runs = collect_runs(tmp_path)
    found, _ = path_runs(runs.table, runs.results, ["dataset"], ["strategy"])
    ax = path_figure(found, "madelon", "kept", colours([("stg",)])).axes[0]
    assert ax.get_xscale() == "symlog" and ax.get_xlim()[0] < 0 < ax.get_xlim()[1]
    assert ax.get_xlim()[1] > 1000
