"""Selection on sets from another generator than the project's: scikit-learn's.

The selection benchmark (:mod:`benchmarks.selection`) draws its labels from random teacher
networks; the defaults were measured there and on the Table III datasets. These sets come from
``sklearn.datasets`` instead: ``make_classification`` (Gaussian clusters on hypercube
vertices), ``make_regression`` (a linear target), ``make_gaussian_quantiles`` and
``make_hastie_10_2`` (classes by the distance from the centre, which no column's mean shows),
``load_digits`` (8x8 images, the pixels that vary) and a regression on products of columns
(two pairs that matter only together: no column alone says anything about the target), with
shapes, class counts, label noise, scales and party counts that no default was chosen on,
and the columns permuted so that the informative ones
land at random parties (``split=random``). Every strategy runs on its defaults through the
bring-your-own-data path (``dataset=npz`` with ``dataset.params.relevant``), as a user runs it
(``python -m vflfs.runtime.cli engine=local``, a fresh process each), beside ``oracle_vfl``: the
all-features model on the informative columns alone, split over the same number of parties.

    python -m benchmarks.sklearn_sets --out outputs/sklearn_sets
    python -m benchmarks.sklearn_sets --sets wide_4_classes --strategies vfl less_vfl

Each run lands in ``<out>/runs/<set>/<strategy>/`` (a completed one is not run again); the
table (test score, precision and recall of the kept columns, columns kept, MB, wall seconds) in
``<out>/sklearn_sets.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.datasets import (
    load_digits,
    make_classification,
    make_gaussian_quantiles,
    make_hastie_10_2,
    make_regression,
)

from .path_cost import cli_command

STRATEGIES = (
    "vfl",
    "stg",
    "fedsdg_fs",
    "group_lasso",
    "less_vfl",
    "local_lasso",
    "gini_filter",
    "fstat_filter",
)


@dataclass(frozen=True)
class SklearnSet:
    """One generated set: the generator (``kind``) and its arguments, the number of parties,
    the Gaussian noise columns appended (``noise``; ``make_classification`` and
    ``make_regression`` draw their own), and whether every column is then scaled by
    10^U(-3, 3) and shifted."""

    name: str
    parties: int
    kwargs: dict = field(default_factory=dict)
    kind: str = "classification"  # or regression, quantiles, hastie, digits, products
    noise: int = 0
    rescale: bool = False

    @property
    def regression(self) -> bool:
        return self.kind in ("regression", "products")

    def draw(self) -> tuple[np.ndarray, np.ndarray, int]:
        """X (the informative columns first), y, and the number of informative columns."""
        kw = dict(self.kwargs)
        if self.kind == "classification":
            X, y = make_classification(n_redundant=0, n_repeated=0, shuffle=False, **kw)
            return X, y, kw["n_informative"]
        if self.kind == "regression":
            X, y = make_regression(shuffle=False, **kw)
            return X, y, kw["n_informative"]
        if self.kind == "quantiles":
            X, y = make_gaussian_quantiles(**kw)
        elif self.kind == "hastie":
            X, y = make_hastie_10_2(**kw)
            y = (y > 0).astype(np.int64)
        elif self.kind == "digits":
            X, y = load_digits(return_X_y=True)
            X = X[:, X.std(axis=0) > 0]
        elif self.kind == "products":
            X, y = products(**kw)
        else:
            raise ValueError(f"unknown kind {self.kind!r}")
        return X, y, X.shape[1]

    def make(self, folder: Path) -> tuple[Path, list[int]]:
        """Write ``<folder>/<name>.npz`` (``X``, ``y``); return its path and the informative
        columns' positions after the seeded permutation."""
        X, y, informative = self.draw()
        rng = np.random.default_rng(self.kwargs["random_state"])
        if self.noise:
            X = np.hstack([X, rng.normal(size=(len(X), self.noise))])
        order = rng.permutation(X.shape[1])
        X = X[:, order]
        if self.rescale:
            X = X * 10 ** rng.uniform(-3, 3, X.shape[1]) + rng.normal(0, 100, X.shape[1])
        relevant = sorted(int(np.flatnonzero(order == j)[0]) for j in range(informative))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.name}.npz"
        np.savez(path, X=X.astype(np.float32), y=y)
        return path, relevant


def products(n_samples: int, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Six standard normal columns and y = 2 sin(x0) x1 + x2^2 - x3 + x4 x5 / 2 + N(0, 0.3^2):
    x0, x1, x4 and x5 matter only through their products (each one's mean of y is zero), x2
    only through its square (no linear trend); about 35%, 40%, 20% and 5% of y's variance."""
    rng = np.random.default_rng(random_state)
    X = rng.normal(size=(n_samples, 6))
    y = 2 * np.sin(X[:, 0]) * X[:, 1] + X[:, 2] ** 2 - X[:, 3] + 0.5 * X[:, 4] * X[:, 5]
    return X, y + rng.normal(0, 0.3, n_samples)


SETS = (
    SklearnSet(
        "wide_4_classes",
        4,
        dict(
            n_samples=3000,
            n_features=300,
            n_informative=8,
            n_classes=4,
            n_clusters_per_class=2,
            flip_y=0.02,
            random_state=11,
        ),
    ),
    SklearnSet(
        "imbalanced_rescaled",
        3,
        dict(
            n_samples=5000,
            n_features=120,
            n_informative=6,
            weights=[0.85],
            class_sep=0.8,
            random_state=12,
        ),
        rescale=True,
    ),
    SklearnSet(
        "15_classes",
        2,
        dict(
            n_samples=4000,
            n_features=80,
            n_informative=12,
            n_classes=15,
            n_clusters_per_class=1,
            random_state=13,
        ),
    ),
    SklearnSet(
        "400_rows",
        3,
        dict(n_samples=400, n_features=2000, n_informative=10, random_state=14),
    ),
    SklearnSet(
        "regression",
        3,
        dict(n_samples=3000, n_features=100, n_informative=5, noise=5.0, random_state=22),
        kind="regression",
    ),
    SklearnSet(
        "8_parties_noisy_labels",
        8,
        dict(n_samples=4000, n_features=400, n_informative=10, flip_y=0.1, random_state=23),
    ),
    SklearnSet(
        "radial_3_classes",
        4,
        dict(n_samples=4000, n_features=6, n_classes=3, random_state=24),
        kind="quantiles",
        noise=200,
    ),
    SklearnSet("hastie", 5, dict(n_samples=5000, random_state=25), kind="hastie", noise=290),
    SklearnSet(
        "imbalanced_4_classes",
        5,
        dict(
            n_samples=3000,
            n_features=800,
            n_informative=6,
            n_classes=4,
            n_clusters_per_class=1,
            weights=[0.5, 0.3, 0.15],
            class_sep=1.2,
            flip_y=0.02,
            random_state=26,
        ),
    ),
    SklearnSet("digits", 4, dict(random_state=27), kind="digits", noise=300),
    SklearnSet("products", 3, dict(n_samples=4000, random_state=28), kind="products", noise=244),
)


def run(overrides: list[str], folder: Path) -> dict:
    """One run in a fresh process (skipped when ``folder`` holds a completed one)."""
    done = folder / "results.json"
    if not done.exists():
        start = time.perf_counter()
        proc = subprocess.run(cli_command(overrides, folder), capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise SystemExit(f"{folder} failed (exit {proc.returncode}): {' | '.join(tail)}")
        (folder / "wall_s.txt").write_text(f"{time.perf_counter() - start:.1f}\n")
    r = json.loads(done.read_text())
    selection = r.get("selection") or {}
    return {
        "test_metric": round(float(r["test_metric"]), 4),
        "metric": r["metric"],
        "precision": selection.get("precision"),
        "recall": selection.get("recall"),
        "kept": selection.get("selected_features"),
        "of": selection.get("total_features"),
        "mb": round(float(r["communication"]["mb"]), 1),
        "wall_s": float((folder / "wall_s.txt").read_text()),
        "warnings": r.get("warnings", []),
    }


def jobs(s: SklearnSet, data: Path, strategies: list[str], extra: list[str]):
    """(strategy, overrides) of each run on ``s``: the strategies, then ``oracle_vfl``."""
    path, relevant = s.make(data)
    task = ["dataset.params.task=regression"] if s.regression else []
    common = ["dataset=npz", f"dataset.params.path={path}", "split=random", *task, *extra]
    listed = f"dataset.params.relevant=[{','.join(map(str, relevant))}]"
    for strategy in strategies:
        yield strategy, [*common, listed, f"split.num_parties={s.parties}", f"strategy={strategy}"]
    with np.load(path) as arrays:
        X, y = arrays["X"], arrays["y"]
    oracle = data / f"{s.name}_informative.npz"
    np.savez(oracle, X=X[:, relevant], y=y)
    parties = min(s.parties, len(relevant))
    yield (
        "oracle_vfl",
        [
            *[c for c in common if not c.startswith("dataset.params.path=")],
            f"dataset.params.path={oracle}",
            f"split.num_parties={parties}",
            "strategy=vfl",
        ],
    )


def markdown(rows: list[dict]) -> str:
    lines = [
        "| set | strategy | test | precision | recall | kept / of | MB | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p, q = r["precision"], r["recall"]
        lines.append(
            f"| {r['set']} | {r['strategy']} | {r['test_metric']:.3f} | "
            f"{'' if p is None else f'{p:.2f}'} | {'' if q is None else f'{q:.2f}'} | "
            f"{r['kept']} / {r['of']} | {r['mb']} | {r['wall_s']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=[s.name for s in SETS])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--set", nargs="*", default=["threads=1"], help="overrides for every run")
    parser.add_argument("--out", type=Path, default=Path("outputs/sklearn_sets"))
    args = parser.parse_args(argv)
    by_name = {s.name: s for s in SETS}
    unknown = sorted(set(args.sets) - set(by_name))
    if unknown:
        raise SystemExit(f"unknown sets {unknown}; choose from {sorted(by_name)}")
    rows = []
    for name in args.sets:
        for strategy, overrides in jobs(
            by_name[name], args.out / "data", args.strategies, args.set
        ):
            row = {"set": name, "strategy": strategy}
            row.update(run(overrides, args.out / "runs" / name / strategy))
            rows.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "sklearn_sets.json").write_text(json.dumps(rows, indent=2))
    table = markdown(rows)
    (args.out / "sklearn_sets.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
