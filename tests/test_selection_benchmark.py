"""The selection benchmark's jobs and tables on one tiny teacher shape."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks.selection import ORACLE, ORACLE_VFL, Job, Shape, parser, plan, run_benchmark
from benchmarks.selection_table import ALL_SHAPES, summarize
from vflfs.datasets.teacher import load_teacher
from vflfs.runtime.config import compose_config
from vflfs.server_app.experiment import Experiment

TINY = Shape(n_samples=300, n_features=20, n_classes=2, n_relevant=3)


def test_jobs_split_uneven_parties_with_a_party_of_pure_noise():
    assert TINY.party_sizes() == [4, 6, 10]
    cfg = compose_config(Job(TINY, "stg", seed=1).overrides(epochs=3))
    experiment = Experiment.from_config(cfg)
    assert [len(c) for c in experiment.columns] == [4, 6, 10]
    assert set(experiment.relevant) <= set(range(10))  # none in the last party's columns
    assert cfg.strategy.name == "stg" and cfg.training.epochs == 3 and cfg.seed == 1
    assert cfg.engine == "local" and cfg.dataset.params.seed == 1
    oracle = Experiment.from_config(compose_config(Job(TINY, ORACLE, 1).overrides(3)))
    assert oracle.num_parties == 1 and len(oracle.columns[0]) == 3
    assert oracle.y.tolist() == experiment.y.tolist()
    assert oracle.splits.test.tolist() == experiment.splits.test.tolist()
    # a strategy's own setting goes to the strategy's jobs, not to the oracles' (strategy=vfl)
    extra = ["strategy.sigma=0.7", "device=cpu"]
    assert compose_config(Job(TINY, "stg", 1).overrides(3, extra)).strategy.sigma == 0.7
    assert compose_config(Job(TINY, ORACLE, 1).overrides(3, extra)).device == "cpu"


def test_the_vfl_oracle_keeps_each_relevant_column_at_its_party():
    full = Experiment.from_config(compose_config(Job(TINY, "vfl", seed=1).overrides(epochs=3)))
    per_party = TINY.relevant_per_party(1)
    assert per_party == [sum(c in full.relevant for c in cols) for cols in full.columns]
    cfg = compose_config(Job(TINY, ORACLE_VFL, seed=1).overrides(epochs=3))
    oracle = Experiment.from_config(cfg)
    assert [len(c) for c in oracle.columns] == [n for n in per_party if n]
    assert oracle.y.tolist() == full.y.tolist()
    # Its columns are the relevant ones in their order, so contiguous parties of these sizes
    # hold what each party held.
    params = dict(seed=1, n_samples=300, n_features=20, n_relevant=3, relevant_within=10)
    data, alone = load_teacher(None, **params), load_teacher(None, **params, only_relevant=True)
    assert alone.X.tolist() == data.X[:, data.relevant].tolist()


def test_tiny_benchmark_runs_resumes_and_tabulates(tmp_path):
    jobs = plan([TINY], seeds=[0, 1], strategies=["vfl"])
    assert [(j.strategy, j.seed) for j in jobs] == [
        (ORACLE, 0),
        (ORACLE_VFL, 0),
        ("vfl", 0),
        (ORACLE, 1),
        (ORACLE_VFL, 1),
        ("vfl", 1),
    ]
    lines: list[str] = []
    extra = ["training.batch_size=64", "device=cpu"]
    rows = run_benchmark(jobs, tmp_path, epochs=1, extra=extra, report=lines.append)
    assert len(rows) == len(lines) == 6 and all(r["status"] == "completed" for r in rows)
    assert "[  1/6] n300_d20_c2_r3" in lines[0] and "oracle" in lines[0]
    oracle = [r for r in rows if r["strategy"] in (ORACLE, ORACLE_VFL)]
    assert all(r["precision"] == r["recall"] == 1.0 and r["kept"] == 3 for r in oracle)
    vfl = [r for r in rows if r["strategy"] == "vfl"]
    assert all(r["recall"] == 1.0 and r["precision"] == pytest.approx(3 / 20) for r in vfl)

    summary = pd.read_csv(tmp_path / "summary.csv")
    by = summary.set_index(["shape", "strategy"])
    acc = {(r["strategy"], r["seed"]): r["test_metric"] for r in rows}
    gap = ((acc[(ORACLE, 0)] - acc[("vfl", 0)]) + (acc[(ORACLE, 1)] - acc[("vfl", 1)])) / 2
    assert by.loc[(TINY.name, "vfl"), "gap_mean"] == pytest.approx(gap)
    vfl_gap = sum(acc[(ORACLE_VFL, s)] - acc[("vfl", s)] for s in (0, 1)) / 2
    assert by.loc[(TINY.name, "vfl"), "gap_vfl_mean"] == pytest.approx(vfl_gap)
    assert by.loc[(TINY.name, ORACLE), "gap_mean"] == 0
    assert by.loc[(TINY.name, "vfl"), "seeds"] == 2
    assert by.loc[(ALL_SHAPES, "vfl"), "gap_mean"] == pytest.approx(gap)
    records = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert len(records) == len(summary)
    table = (tmp_path / "summary.md").read_text()
    assert f"| {TINY.name} | vfl |" in table and "gap to VFL oracle" in table
    assert len(pd.read_csv(tmp_path / "jobs.csv")) == 6

    # A second run finds every job done and runs nothing.
    stamps = {j: (j.folder(tmp_path) / "results.json").stat().st_mtime_ns for j in jobs}
    lines.clear()
    again = run_benchmark(jobs, tmp_path, epochs=1, extra=extra, report=lines.append)
    assert again == rows and all("done before" in line for line in lines)
    assert stamps == {j: (j.folder(tmp_path) / "results.json").stat().st_mtime_ns for j in jobs}


def test_a_failed_job_is_a_row_not_the_end(tmp_path):
    jobs = plan([TINY], seeds=[0], strategies=["vfl"])
    rows = run_benchmark(jobs, tmp_path, epochs=1, extra=["training.lr=-1"], report=lambda s: None)
    assert [r["status"] for r in rows] == ["failed", "failed", "failed"]
    assert "training.lr must be > 0" in (jobs[2].folder(tmp_path) / "error.txt").read_text()
    table = summarize(pd.read_csv(tmp_path / "jobs.csv"))
    assert table["failed"].tolist()[:3] == [1, 1, 1]
    assert "(1 failed)" in (tmp_path / "summary.md").read_text()


def test_cli_defaults():
    args = parser().parse_args([])
    assert args.preset == "quick" and args.epochs == 30 and ORACLE not in args.strategies
    assert len(args.strategies) == 9
