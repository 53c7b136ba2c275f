"""benchmarks/stall.py: its table counts restarts and runs that ended at chance."""

from __future__ import annotations

import csv

from benchmarks.stall import SETTINGS, write


def test_the_table_counts_restarts_and_chance_runs(tmp_path):
    rows = [
        {
            "setting": "a",
            "seed": 0,
            "test_metric": 0.8,
            "majority": 0.5,
            "restarts": 0,
            "at_chance": False,
            "wall_s": 1.0,
        },
        {
            "setting": "a",
            "seed": 1,
            "test_metric": 0.5,
            "majority": 0.5,
            "restarts": 2,
            "at_chance": True,
            "wall_s": 1.0,
        },
    ]
    table = write(rows, tmp_path)
    assert "| a | 2 | 1 | 1 | 0.500 / 0.650 / 0.800 |" in table
    with (tmp_path / "stall.csv").open() as f:
        assert [r["restarts"] for r in csv.DictReader(f)] == ["0", "2"]


def test_every_setting_trains_the_all_features_baseline_on_generated_data():
    for overrides in SETTINGS.values():
        assert any(o.startswith("dataset=") for o in overrides)
        assert not any(o.startswith("strategy=") for o in overrides)
