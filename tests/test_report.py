"""``vflfs report``: hand-written run folders (and two real runs) in, table and plots out."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pandas as pd
import pytest

from vflfs import cli as vflfs_cli
from vflfs.report import cli, collect_runs
from vflfs.runtime import cli as run_cli

from helpers import run_local, tiny_config

# (folder, strategy, dataset, seed, test_metric, ratio) of the completed single runs.
RUNS = [
    ("vfl/0", "vfl", "madelon", 0, 0.60, 1.0),
    ("vfl/1", "vfl", "madelon", 1, 0.64, 1.0),
    ("fed/0", "fedsdg_fs", "madelon", 0, 0.80, 0.05),
    ("fed/1", "fedsdg_fs", "madelon", 1, 0.90, 0.07),
    ("reg/0", "vfl", "friedman", 0, 0.75, 1.0),
]
CV_FOLDS = [(0.70, 0.5), (0.72, 0.4), (0.74, 0.3)]  # stg on madelon, 3 folds


def results(strategy, dataset, seed, test, ratio, *, lr=0.01, train=None, removed=None, **extra):
    metric = "r2" if dataset == "friedman" else "accuracy"
    selection = {"ratio": ratio, "selected_features": round(ratio * 20), "total_features": 20}
    if removed is not None:
        selection["spurious_removed"] = removed
    config = {
        "seed": seed,
        "dataset": {"name": dataset},
        "strategy": {"name": strategy},
        "training": {"lr": lr},
        "split": {"kind": "even", "num_parties": 2},
    }
    out = {
        "status": "completed",
        "strategy": strategy,
        "dataset": dataset,
        "seed": seed,
        "metric": metric,
        "test_metric": test,
        "val_metric": test,
        "best_epoch": 3,
        "selection": selection,
        "communication": {"mb": 2.0, "phases": {"training": {"mb": 1.5}}},
        "config": config,
        **extra,
    }
    return out if train is None else {**out, "train_metric": train}


def history(test: float, ratio: float, folds: int = 0) -> pd.DataFrame:
    rows = [
        {
            "epoch": e,
            "train_loss": 1 - e / 4,
            "val_metric": test,
            "test_metric": test * (e + 1) / 4,
            "mb": 0.5 * (e + 1),
            "selected_features": 20 - e,
            "selection_ratio": ratio,
            "spurious_removed": e / 3,
        }
        for e in range(4)
    ]
    frame = pd.DataFrame(rows)
    if folds:
        frame = pd.concat([frame.assign(fold=f) for f in range(folds)])[["fold", *frame.columns]]
    return frame


def write(folder: Path, data: dict | None, frame: pd.DataFrame | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("seed: 0\n")
    if data is not None:
        (folder / "results.json").write_text(json.dumps(data))
    if frame is not None:
        frame.to_csv(folder / "history.csv", index=False)


IMPORTANCE = [{"party": p, "kind": "gate", "values": [0.1 * i for i in range(10)]} for p in (0, 1)]
PARTIES = [
    {"index": p, "columns": list(range(8)), "spurious": [8, 9], "selected": [1, 2, 9]}
    for p in (0, 1)
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Two strategies x two seeds on madelon, one R^2 run, one CV run, two unfinished folders."""
    for folder, strategy, dataset, seed, test, ratio in RUNS:
        extra = {"importance": IMPORTANCE, "parties": PARTIES} if folder == "fed/0" else {}
        write(
            tmp_path / folder,
            results(strategy, dataset, seed, test, ratio, **extra),
            history(test, ratio),
        )
    folds = [{**results("stg", "madelon", 0, t, r), "importance": IMPORTANCE} for t, r in CV_FOLDS]
    cv = {**results("stg", "madelon", 0, 0.72, 0.4), "cv": {"folds": 3}, "folds": folds}
    write(tmp_path / "cv", cv, history(0.7, 0.4, folds=3))
    write(tmp_path / "running", None)
    write(tmp_path / "failed", None)
    (tmp_path / "failed" / "error.txt").write_text("ValueError: bad split\n")
    return tmp_path


def report(root: Path, *args: str) -> tuple[pd.DataFrame, str]:
    assert cli.main([str(root), "--out", str(root / "rep"), *args]) == 0
    return pd.read_csv(root / "rep" / "report.csv"), (root / "rep" / "report.md").read_text()


def cell(csv: pd.DataFrame, strategy: str, dataset: str = "madelon", source: str = "vflfs"):
    hit = csv[(csv.strategy == strategy) & (csv.dataset == dataset) & (csv.source == source)]
    assert len(hit) == 1, hit
    return hit.iloc[0]


def md_row(md: str, first: str) -> list[str]:
    lines = [line for line in md.splitlines() if line.startswith(f"| {first} ")]
    assert len(lines) == 1, md
    return [c.strip() for c in lines[0].strip("|").split("|")]


def test_collect_rows_folds_and_skipped(root):
    runs = collect_runs(root)
    table = runs.table
    assert len(table) == len(RUNS) + len(CV_FOLDS)
    assert {"selection.ratio", "config.training.lr", "communication.mb", "run_dir"} <= set(table)
    cv = table[table.strategy == "stg"].sort_values("fold")
    assert cv.fold.tolist() == [0, 1, 2] and cv.test_metric.tolist() == [0.70, 0.72, 0.74]
    assert (cv["cv.folds"] == 3).all()
    reasons = dict(line.split(": ", 1) for line in runs.skipped_summary())
    assert reasons["failed"] == "failed: ValueError: bad split"
    assert reasons["running"].startswith("incomplete")


def test_table_numbers_are_the_files_means_and_stds(root):
    csv, _ = report(root, "--no-plots")
    for strategy in ("vfl", "fedsdg_fs"):
        files = [
            json.loads((root / f / "results.json").read_text())
            for f, s, d, *_ in RUNS
            if s == strategy and d == "madelon"
        ]
        tests = [r["test_metric"] for r in files]
        ratios = [r["selection"]["ratio"] for r in files]
        row = cell(csv, strategy)
        for key, values in (("test_metric", tests), ("selection.ratio", ratios)):
            assert row[f"{key}.mean"] == pytest.approx(statistics.mean(values))
            assert row[f"{key}.std"] == pytest.approx(statistics.stdev(values))
            assert row[f"{key}.n"] == 2
    stg = cell(csv, "stg")
    assert stg["test_metric.mean"] == pytest.approx(0.72) and stg["test_metric.n"] == 3
    assert stg["test_metric.std"] == pytest.approx(statistics.stdev([t for t, _ in CV_FOLDS]))


def test_runs_on_two_files_of_one_dataset_kind_are_two_rows(tmp_path):
    # two .npz files through dataset=npz; the known relevant columns do not make another dataset
    for folder, path, relevant, test in [
        ("a/0", "/data/a.npz", [1, 2], 0.60),
        ("a/1", "/data/a.npz", [3], 0.70),
        ("b/0", "/elsewhere/b.npz", [1, 2], 0.90),
    ]:
        data = results("vfl", "npz", 0, test, 1.0)
        data["config"]["dataset"]["params"] = {"path": path, "relevant": relevant}
        write(tmp_path / folder, data, history(test, 1.0))
    write(tmp_path / "m", results("vfl", "madelon", 0, 0.55, 1.0), history(0.55, 1.0))
    csv, md = report(tmp_path, "--no-plots")
    a, b = cell(csv, "vfl", "npz (path=a.npz)"), cell(csv, "vfl", "npz (path=b.npz)")
    assert a["test_metric.mean"] == pytest.approx(0.65) and a["test_metric.n"] == 2
    assert b["test_metric.mean"] == pytest.approx(0.90) and b["test_metric.n"] == 1
    assert cell(csv, "vfl", "madelon")["test_metric.n"] == 1
    assert md_row(md, "npz (path=a.npz)")[1].startswith("65.0")


def test_markdown_cells_look_like_the_papers(root):
    _, md = report(root, "--no-plots")
    header = md_row(md, "dataset \\ strategy")
    assert header[1:] == ["fedsdg_fs", "stg", "vfl"]
    madelon = dict(zip(header, md_row(md, "madelon"), strict=True))
    assert madelon["fedsdg_fs"] == "85.0 ± 7.1 / 0.06 ± 0.01"
    assert madelon["stg"] == "72.0 ± 2.0 / 0.40 ± 0.10"
    assert madelon["vfl"] == "62.0 ± 2.8 / 1.00"  # equal ratios: no "± 0.00"
    friedman = dict(zip(header, md_row(md, "friedman"), strict=True))
    assert friedman["vfl"] == "0.750 / 1.00" and friedman["fedsdg_fs"] == ""  # R^2, one run
    assert "running: incomplete" in md and "failed: failed: ValueError" in md


def test_where_filters_rows(root):
    csv, _ = report(
        root, "--no-plots", "--where", "`selection.ratio` < 0.5", "--where", "seed == 0"
    )
    assert set(csv.strategy) == {"fedsdg_fs", "stg"}
    assert cell(csv, "fedsdg_fs")["test_metric.mean"] == pytest.approx(0.80)
    assert cell(csv, "stg")["test_metric.n"] == 2  # folds 1 and 2 (ratios 0.4, 0.3)


@pytest.fixture
def search(tmp_path: Path) -> Path:
    """A LESS-VFL-style search: three learning rates x two seeds, and a vfl run."""
    grid = {
        0.1: [(0.99, 0.5, 0.70), (0.97, 0.6, 0.72)],
        0.01: [(0.95, 0.9, 0.80), (0.93, 0.85, 0.84)],
        0.001: [(0.90, 0.95, 0.88), (0.92, 0.9, 0.90)],
    }
    for lr, seeds in grid.items():
        for seed, (train, removed, test) in enumerate(seeds):
            data = results(
                "fedsdg_fs", "madelon", seed, test, 0.1, lr=lr, train=train, removed=removed
            )
            write(tmp_path / f"lr{lr}" / str(seed), data)
    write(tmp_path / "vfl", results("vfl", "madelon", 0, 0.6, 1.0, train=0.99, removed=0.0))
    return tmp_path


def test_best_by_keeps_the_best_setting_of_each_group(search):
    where = ["--where", "`selection.spurious_removed` >= 0.8"]
    best = ["--best-by", "train_metric", "--group", "dataset,strategy", "--no-plots"]
    csv, md = report(search, *where, *best)
    assert set(csv.strategy) == {"fedsdg_fs"}  # vfl removes no spurious feature
    row = cell(csv, "fedsdg_fs")  # lr 0.01: mean train 0.94 > 0.91
    assert row["test_metric.mean"] == pytest.approx(0.82) and row["test_metric.n"] == 2
    csv, _ = report(search, *best)  # without the filter lr 0.1 wins
    assert cell(csv, "fedsdg_fs")["test_metric.mean"] == pytest.approx(0.71)
    assert cell(csv, "vfl")["test_metric.mean"] == pytest.approx(0.6)
    csv, _ = report(search, *where, "--best-by", "train_metric:min", "--no-plots")
    assert cell(csv, "fedsdg_fs")["test_metric.mean"] == pytest.approx(0.89)


def test_published_columns_sit_beside_ours(root):
    csv, md = report(root, "--no-plots", "--published", "fedsdg_table3", "heldout_reference")
    header = md_row(md, "dataset \\ strategy")
    assert header[1:4] == ["fedsdg_fs", "fedsdg_fs (paper)", "stg"]
    assert "VFLFS (paper)" in header and "vfl (held-out ref)" in header
    madelon = dict(zip(header, md_row(md, "madelon"), strict=True))
    assert madelon["fedsdg_fs (paper)"] == "99.2 / 0.03"
    assert madelon["vfl (held-out ref)"] == "57.1 / 1.00"
    assert madelon["held-out ceiling (held-out ref)"].startswith("58.2 (LogReg")
    assert dict(zip(header, md_row(md, "friedman"), strict=True))["fedsdg_fs (paper)"] == ""
    paper = cell(csv, "fedsdg_fs", source="fedsdg_table3")
    assert paper["test_metric.mean"] == pytest.approx(0.992)
    assert paper["selection.ratio.mean"] == pytest.approx(0.03)


def test_plots_are_written(root):
    assert cli.main([str(root), "--out", str(root / "rep")]) == 0
    out = root / "rep"
    names = [
        "metric_vs_mb_madelon.png",
        "features_vs_epoch_madelon.png",
        "metric_vs_mb_friedman.png",
        "importance/fed_0.png",
        "importance/cv_fold_0.png",
        "importance/cv_fold_2.png",
    ]
    for name in names:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000, name
    assert "![metric_vs_mb_madelon](metric_vs_mb_madelon.png)" in (out / "report.md").read_text()


def test_cli_fails_without_completed_runs(tmp_path, capsys):
    assert cli.main([str(tmp_path)]) != 0
    assert "no completed run" in capsys.readouterr().err
    write(tmp_path / "x", None)
    assert cli.main([str(tmp_path)]) != 0
    assert "x: incomplete" in capsys.readouterr().err


def test_bad_options_fail_with_a_clear_message(root, capsys):
    assert cli.main([str(root), "--rows", "datset"]) != 0
    assert "no column 'datset'" in (err := capsys.readouterr().err) and "dataset" in err
    assert cli.main([str(root), "--where", "`selection.nope` > 1"]) != 0
    assert "--where" in capsys.readouterr().err
    assert cli.main([str(root), "--where", "seed > 5"]) != 0
    assert "no run left after the filters" in capsys.readouterr().err


def test_entry_dispatches_report_and_run(root, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["vflfs", "--help"])
    with pytest.raises(SystemExit) as done:
        vflfs_cli.entry()
    text = capsys.readouterr().out
    assert done.value.code == 0 and all(c in text for c in ("run", "report", "split", "data"))
    monkeypatch.setattr(sys, "argv", ["vflfs", "report", str(root), "--no-plots"])
    with pytest.raises(SystemExit) as done:
        vflfs_cli.entry()
    assert done.value.code == 0 and "85.0 ± 7.1" in capsys.readouterr().out
    seen = []
    monkeypatch.setattr(run_cli, "main", lambda: seen.append(list(sys.argv)))
    monkeypatch.setattr(sys, "argv", ["vflfs", "run", "seed=3", "-m"])
    vflfs_cli.entry()
    assert seen == [["vflfs run", "seed=3", "-m"]]


def test_report_of_two_real_runs(tmp_path):
    for seed in (0, 1):
        run_local(tiny_config(f"training.epochs=2 seed={seed}"), tmp_path / "sweep" / str(seed))
    summaries = [
        json.loads((tmp_path / "sweep" / s / "results.json").read_text()) for s in ("0", "1")
    ]
    tests = [s["test_metric"] for s in summaries]
    warned = sum(bool(s["warnings"]) for s in summaries)
    csv, md = report(tmp_path / "sweep")
    mean, std = statistics.mean(tests), statistics.stdev(tests)
    expected = f"{100 * mean:.1f}" + (f" ± {100 * std:.1f}" if std > 0 else "") + " / 1.00"
    expected += f" ⚠{warned}" if warned else ""
    assert md_row(md, "synthetic_madelon")[1] == expected
    assert cell(csv, "vfl", "synthetic_madelon")["test_metric.mean"] == pytest.approx(mean)
    assert (tmp_path / "sweep" / "rep" / "metric_vs_mb_synthetic_madelon.png").stat().st_size > 0


def test_best_by_on_real_runs_picks_the_better_learning_rate(tmp_path):
    """Real results carry None-valued config entries (NaN in the table): best-by copes."""
    for lr in (0.01, 0.0001):
        for seed in (0, 1):
            cfg = tiny_config(f"training.epochs=3 training.lr={lr} seed={seed}")
            run_local(cfg, tmp_path / "sweep" / f"lr={lr},seed={seed}")
    out = tmp_path / "report"
    code = cli.main(
        [str(tmp_path / "sweep"), "--best-by", "val_metric", "--group", "dataset",
         "--rows", "dataset", "--cols", "config.training.lr", "--no-plots", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    table = pd.read_csv(out / "report.csv")
    assert table["config.training.lr"].tolist() == [0.01]
    assert table["test_metric.n"].tolist() == [2]
