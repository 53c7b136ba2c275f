"""What centralised scikit-learn models reach on a table: the reference a federated run is read
against.

A federated model sees each party's columns only through its bottom model, and a selection is
chosen on the validation rows; these references see every column at once, with no federation.
Each ``.npz`` (``X``, ``y``: the ``dataset=npz`` format) is cut into ``--folds`` stratified
folds (shuffled with ``--seed``), its columns min-max scaled on each fold's training rows
(Table III's protocol), and every model trains on the other folds and is scored on the fold:

- ``logistic``: ``LogisticRegression`` (L2, C = 1);
- ``l1_logistic_cv``: ``LogisticRegressionCV`` with an L1 penalty (liblinear, one class
  against the rest), C chosen by 5-fold cross-validation on the training rows (a centralised
  lasso; the columns it keeps are reported);
- ``linear_svm``: ``LinearSVC``;
- ``random_forest``: 300 trees;
- ``mlp``: ``MLPClassifier((64, 16))`` with early stopping on a fifth of the training rows;
- ``mlp_no_early_stopping``: the same network trained to convergence (at most 500 epochs) on
  four fifths of the training rows, as many as a vflfs fold trains on.

    python -m benchmarks.centralised path/to/table.npz [more.npz ...] --out outputs/centralised

The table (mean and standard deviation of the folds' test accuracy, and the L1 model's median
columns kept) is printed and written to ``<out>/centralised.md`` and ``.json``. A model that
cannot be fit on a table (a class of two rows leaves some of the L1 model's inner folds
without it) is marked failed there with scikit-learn's reason; the others go on.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold
from sklearn.multiclass import OneVsRestClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import MinMaxScaler
from sklearn.svm import LinearSVC

from vflfs.datasets import draw_rows

MODELS: dict[str, Callable[[int], ClassifierMixin]] = {
    "logistic": lambda seed: LogisticRegression(max_iter=3000),
    "l1_logistic_cv": lambda seed: OneVsRestClassifier(
        LogisticRegressionCV(
            Cs=10, cv=5, l1_ratios=(1.0,), solver="liblinear", max_iter=3000, random_state=seed
        )
    ),
    "linear_svm": lambda seed: LinearSVC(),
    "random_forest": lambda seed: RandomForestClassifier(300, random_state=seed),
    "mlp": lambda seed: MLPClassifier(
        (64, 16), early_stopping=True, validation_fraction=0.2, max_iter=500, random_state=seed
    ),
    "mlp_no_early_stopping": lambda seed: MLPClassifier((64, 16), max_iter=500, random_state=seed),
}
# Share of the training rows a model leaves out (drawn as vflfs draws its validation rows:
# stratified, class by class where a class is too small for it, with a warning).
HELD_OUT = {"mlp_no_early_stopping": 0.2}


def load(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``X`` and ``y`` of a ``dataset=npz`` file."""
    with np.load(path, allow_pickle=False) as data:
        if "X" not in data or "y" not in data:
            raise SystemExit(f"{path}: needs arrays X and y (has {sorted(data.files)})")
        return np.asarray(data["X"], np.float64), np.asarray(data["y"]).ravel()


def kept_columns(model: ClassifierMixin) -> int:
    """Columns a linear model's coefficients use, over its one-vs-rest models if it has them."""
    coefs = [m.coef_ for m in getattr(model, "estimators_", [model])]
    used = np.vstack([np.abs(np.atleast_2d(c)) > 1e-8 for c in coefs])
    return int(used.any(axis=0).sum())


def fold_scores(
    X: np.ndarray, y: np.ndarray, name: str, folds: int, seed: int
) -> tuple[list[float], list[int]]:
    """Each fold's test accuracy of model ``name``, and its columns kept where it has some."""
    scores, kept = [], []
    split = StratifiedKFold(folds, shuffle=True, random_state=seed)
    for train, test in split.split(X, y):
        if name in HELD_OUT:
            train, _ = draw_rows(train, y, HELD_OUT[name], seed, f"{name}'s held-out share")
        scaler = MinMaxScaler().fit(X[train])
        model = MODELS[name](seed)
        with warnings.catch_warnings():
            for category in (ConvergenceWarning, FutureWarning, UserWarning):
                warnings.simplefilter("ignore", category)
            model.fit(scaler.transform(X[train]), y[train])
        scores.append(float(model.score(scaler.transform(X[test]), y[test])))
        if name == "l1_logistic_cv":
            kept.append(kept_columns(model))
    return scores, kept


def markdown(rows: list[dict], models: list[str]) -> str:
    lines = ["| table | " + " | ".join(f"`{m}`" for m in models) + " |"]
    lines.append("|---" * (len(models) + 1) + "|")
    for row in rows:
        cells = []
        for m in models:
            r = row["models"][m]
            if "error" in r:
                cells.append("failed")
                continue
            cell = f"{100 * r['mean']:.1f} ± {100 * r['std']:.1f}"
            if r.get("kept") is not None:
                cell += f" / {r['kept']}"
            cells.append(cell)
        lines.append(f"| {row['table']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="+", type=Path, help=".npz files with X and y")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("outputs/centralised"))
    args = parser.parse_args(argv)
    if args.folds < 2:
        raise SystemExit(f"--folds must be at least 2, got {args.folds}")
    rows = []
    for path in args.tables:
        X, y = load(path)
        row: dict = {"table": path.stem, "rows": len(y), "columns": X.shape[1], "models": {}}
        for name in args.models:
            try:
                scores, kept = fold_scores(X, y, name, args.folds, args.seed)
            except ValueError as exc:
                row["models"][name] = {"error": str(exc)}
                print(f"{path.stem} {name}: failed ({exc})", flush=True)
                continue
            row["models"][name] = {
                "mean": float(np.mean(scores)),
                "std": float(np.std(scores, ddof=1)),
                "folds": scores,
                "kept": int(np.median(kept)) if kept else None,
            }
            print(f"{path.stem} {name}: {100 * np.mean(scores):.1f}%", flush=True)
        rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "centralised.json").write_text(json.dumps(rows, indent=2))
    table = markdown(rows, args.models)
    (args.out / "centralised.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
