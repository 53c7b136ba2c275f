"""benchmarks/path_cost.py: each run's ratio is to the dense run of its own repeat."""

from __future__ import annotations

from benchmarks.path_cost import markdown, refit_spans, span_seconds, summarise


def run(name: str, wall: float) -> dict:
    return {"name": name, "wall_s": wall, "cpu_s": wall, "epochs": 1, "test_metric": 0.5, "kept": 3}


def test_ratios_are_taken_within_a_repeat_then_the_median():
    repeats = [
        [run("dense", 10.0), run("stg", 30.0)],  # 3x
        [run("dense", 20.0), run("stg", 40.0)],  # 2x under another load
        [run("dense", 10.0), run("stg", 50.0)],  # 5x
    ]
    dense, stg = summarise(repeats)
    assert dense["x_dense"] == 1.0
    assert stg["x_dense"] == 3.0 and stg["x_dense_range"] == [2.0, 5.0]
    assert stg["wall_s"] == 40.0  # the median wall time, not the ratio's run
    assert "| stg | 40.0 | 40.0 | 3.0 (2.0-5.0) | 1 | 0 (0) | 0.0 | 0.0 |" in markdown(
        [dense, stg], "header"
    )


def test_the_refits_epochs_are_those_trained_after_the_path():
    """The path points' own models (ranking ``penalised``) trained no epoch of their own."""
    rows = [
        {"epochs": [48, 79]},
        {"epochs": [79, 158], "ranking": "path"},
        {"epochs": [30, 31], "ranking": "penalised"},
        {"epochs": [158, 179], "ranking": "screen"},
    ]
    results = {"extra": {"path_choice": {"refits": rows}}}
    assert refit_spans(results) == [(48, 79), (79, 158), (158, 179)]
    assert refit_spans({"extra": {}}) == []  # a run without a path


def test_a_spans_seconds_run_from_the_end_of_the_epoch_before_it():
    ends = [1.0, 2.0, 4.0, 7.0, 11.0]  # wall_s at the end of epochs 0-4
    assert span_seconds(ends, [(2, 4)]) == 5.0  # epochs 2 and 3: from 2.0 to 7.0
    assert span_seconds(ends, [(0, 1), (4, 5)]) == 1.0 + 4.0
    assert span_seconds(ends, []) == 0.0
