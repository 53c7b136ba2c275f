"""benchmarks/optimizer_step.py: both optimisers timed on each case, and compared to the bit."""

from __future__ import annotations

import json

from benchmarks.optimizer_step import CASES, main


def test_the_table_times_both_steps_and_finds_them_the_same(tmp_path, capsys):
    main(["--steps", "3", "--repeats", "2", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "optimizer_step.json").read_text())
    assert [r["case"] for r in rows] == list(CASES)
    for r in rows:
        assert r["torch_us"] > 0 and r["vflfs_us"] > 0
        assert abs(r["ratio"] - r["vflfs_us"] / r["torch_us"]) < 0.01
        assert r["same_to_the_bit"] is True
    table = (tmp_path / "optimizer_step.md").read_text()
    assert table.count("| yes |") == len(CASES)
