"""Feature selection benchmark on teacher datasets: every strategy with its default settings.

Each shape is a teacher dataset (``dataset=teacher``, datasets/teacher.py: the label is a random
network of a few known columns) cut into three uneven parties, 20%, 30% and 50% of the columns;
the relevant columns lie among the first two parties' columns, so the last and largest party
holds pure noise. Every strategy runs with its default configuration (``strategy=<name>``,
nothing tuned) and the same epoch budget through :func:`vflfs.server_app.run.run_experiment`
over a :class:`vflfs.federation.LocalGrid` (the real ClientApp in this process, as
``engine=local``). The oracle is the same model (``strategy=vfl``, one party) trained on the
relevant columns alone, on the same rows and labels: the accuracy a perfect selection reaches
with this model and budget when one party holds every relevant column. The VFL oracle
(``oracle_vfl``) keeps the relevant columns at the parties that hold them (the noise columns
dropped, a party left without any dropped too): what a perfect selection reaches in the
strategies' own federation, where each party's bottom model sees only its own columns.

    python -m benchmarks.selection --preset quick --out outputs/selection
    python -m benchmarks.selection --preset full --out outputs/selection_full --epochs 50

Per job, ``<out>/runs/<shape>/<strategy>/seed=<s>/`` holds the run's folder; a job whose folder
holds a completed run is skipped, so an interrupted benchmark resumes. The table per (shape,
strategy), test accuracy (mean ± std over seeds), its gap to the oracle, precision and recall of
the kept columns, columns kept, MB communicated and wall time, lands in ``<out>/summary.csv``,
``summary.json`` and ``summary.md`` (:mod:`benchmarks.selection_table`); one row per job in
``jobs.csv``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vflfs.client_app.app import app as client_app
from vflfs.datasets.teacher import teacher_relevant
from vflfs.federation import LocalGrid
from vflfs.runtime.config import compose_config
from vflfs.runtime.results import RESULTS, is_complete
from vflfs.server_app.run import run_experiment

from .selection_table import ORACLE, ORACLE_VFL, job_row, write_tables

STRATEGIES = (
    "vfl",
    "stg",
    "fedsdg_fs",
    "less_vfl",
    "group_lasso",
    "local_lasso",
    "gini_filter",
    "fstat_filter",
    "random_fs",
)
PARTY_SHARES = (0.2, 0.3, 0.5)  # the last party: pure noise
DEFAULT_EPOCHS = 30


@dataclass(frozen=True)
class Shape:
    """One teacher dataset shape: rows, columns, classes, relevant columns."""

    n_samples: int
    n_features: int
    n_classes: int
    n_relevant: int

    @property
    def name(self) -> str:
        return f"n{self.n_samples}_d{self.n_features}_c{self.n_classes}_r{self.n_relevant}"

    def party_sizes(self) -> list[int]:
        """Column counts of the three parties (:data:`PARTY_SHARES`)."""
        first = max(1, round(PARTY_SHARES[0] * self.n_features))
        second = max(1, round(PARTY_SHARES[1] * self.n_features))
        return [first, second, self.n_features - first - second]

    def signal_columns(self) -> int:
        """The relevant columns lie among these first columns (the first two parties')."""
        return sum(self.party_sizes()[:2])

    def relevant_per_party(self, seed: int) -> list[int]:
        """How many relevant columns each party holds (the last one: none)."""
        relevant = teacher_relevant(
            seed, self.n_features, self.n_relevant, relevant_within=self.signal_columns()
        )
        edges = np.cumsum([0, *self.party_sizes()])
        return np.histogram(relevant, bins=edges)[0].astype(int).tolist()

    def dataset_overrides(self, seed: int) -> list[str]:
        return [
            "dataset=teacher",
            f"dataset.params.seed={seed}",
            f"dataset.params.n_samples={self.n_samples}",
            f"dataset.params.n_features={self.n_features}",
            f"dataset.params.n_classes={self.n_classes}",
            f"dataset.params.n_relevant={self.n_relevant}",
            f"dataset.params.relevant_within={self.signal_columns()}",
        ]


PRESETS: dict[str, tuple[tuple[Shape, ...], tuple[int, ...]]] = {
    "quick": ((Shape(2000, 50, 2, 5), Shape(2000, 200, 3, 10)), (0,)),
    "full": (
        (
            Shape(2000, 50, 2, 5),
            Shape(2000, 2000, 2, 20),
            Shape(5000, 500, 4, 10),
            Shape(10000, 1000, 10, 20),
            Shape(20000, 200, 10, 50),
            Shape(20000, 5000, 3, 50),
        ),
        (0, 1, 2),
    ),
}


@dataclass(frozen=True)
class Job:
    """One run: a strategy (or the oracle) on one shape with one seed."""

    shape: Shape
    strategy: str
    seed: int

    def folder(self, out: Path) -> Path:
        return out / "runs" / self.shape.name / self.strategy / f"seed={self.seed}"

    def overrides(self, epochs: int, extra: Sequence[str] = ()) -> list[str]:
        common = [
            *self.shape.dataset_overrides(self.seed),
            f"seed={self.seed}",
            "engine=local",
            f"training.epochs={epochs}",
        ]
        if self.strategy == ORACLE:
            split = ["strategy=vfl", "dataset.params.only_relevant=true", "split.num_parties=1"]
        elif self.strategy == ORACLE_VFL:
            held = [n for n in self.shape.relevant_per_party(self.seed) if n]
            sizes = ",".join(map(str, held))
            split = ["strategy=vfl", "dataset.params.only_relevant=true", "split=sizes"]
            split += [f"split.sizes=[{sizes}]", f"split.num_parties={len(held)}"]
        else:
            sizes = ",".join(map(str, self.shape.party_sizes()))
            split = [f"strategy={self.strategy}", "split=sizes", f"split.sizes=[{sizes}]"]
            split.append("split.num_parties=3")
            return [*common, *split, *extra]
        # The oracles are strategy=vfl: a strategy's own settings are not theirs.
        return [*common, *split, *(e for e in extra if not _strategy_key(e))]


def _strategy_key(override: str) -> bool:
    return override.lstrip("+~").startswith("strategy.")


def plan(shapes: Sequence[Shape], seeds: Sequence[int], strategies: Sequence[str]) -> list[Job]:
    """Every job: per shape and seed, the two oracles first, then each strategy."""
    return [
        Job(shape, strategy, seed)
        for shape in shapes
        for seed in seeds
        for strategy in (ORACLE, ORACLE_VFL, *strategies)
    ]


def run_one(job: Job, out: Path, epochs: int, extra: Sequence[str] = ()) -> dict | None:
    """Run ``job`` unless its folder holds a completed run; its ``results.json`` content, or
    None when it failed (the error is in its folder's ``error.txt``)."""
    folder = job.folder(out)
    if is_complete(folder):
        return json.loads((folder / RESULTS).read_text())
    cfg = compose_config(job.overrides(epochs, extra))
    try:
        return run_experiment(LocalGrid(client_app, int(cfg.split.num_parties)), cfg, folder)
    except Exception as error:  # noqa: BLE001 - one failed job must not end the benchmark
        logging.getLogger("vflfs").error("%s failed: %s", folder, error)
        return None


def run_benchmark(
    jobs: Sequence[Job],
    out: Path,
    epochs: int = DEFAULT_EPOCHS,
    extra: Sequence[str] = (),
    report: Callable[[str], None] = print,
) -> list[dict]:
    """Run (or resume) ``jobs`` into ``out``, write the tables; one row per job."""
    rows = []
    start = time.perf_counter()
    for i, job in enumerate(jobs, 1):
        done = is_complete(job.folder(out))
        t0 = time.perf_counter()
        summary = run_one(job, out, epochs, extra)
        row = job_row(job.shape.name, job.strategy, job.seed, summary)
        rows.append(row)
        status = "done before" if done else f"{time.perf_counter() - t0:6.1f} s"
        score = "failed" if summary is None else f"acc {row['test_metric']:.4f}"
        report(
            f"[{i:3d}/{len(jobs)}] {job.shape.name:24s} {job.strategy:12s} seed {job.seed}  "
            f"{score}  ({status}; {time.perf_counter() - start:.0f} s in all)"
        )
    write_tables(rows, out)
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    p.add_argument("--out", type=Path, default=Path("outputs/selection"))
    p.add_argument(
        "--epochs",
        type=int,
        default=DEFAULT_EPOCHS,
        help=f"training.epochs of every job (default {DEFAULT_EPOCHS})",
    )
    p.add_argument(
        "--strategies",
        nargs="+",
        choices=STRATEGIES,
        default=list(STRATEGIES),
        help="the strategies to run (default: all); the two oracles always run",
    )
    p.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the preset's)")
    p.add_argument(
        "--shapes",
        nargs="+",
        metavar="NAME",
        help="only these of the preset's shapes, by name (e.g. n5000_d500_c4_r10)",
    )
    p.add_argument(
        "--set",
        dest="extra",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="Hydra overrides added to every job (e.g. device=cpu; the oracles leave out "
        "strategy.* keys); they change the results, so use a new --out",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.epochs < 1:
        raise SystemExit("--epochs must be at least 1")
    logging.getLogger("vflfs").setLevel(logging.WARNING)
    shapes, seeds = PRESETS[args.preset]
    if args.shapes:
        names = [shape.name for shape in shapes]
        unknown = sorted(set(args.shapes) - set(names))
        if unknown:
            raise SystemExit(f"--shapes: {unknown} not in the {args.preset} preset ({names})")
        shapes = tuple(shape for shape in shapes if shape.name in args.shapes)
    jobs = plan(shapes, args.seeds or seeds, args.strategies)
    print(f"selection benchmark: {len(jobs)} jobs ({args.preset}) -> {args.out}", flush=True)
    run_benchmark(jobs, args.out, args.epochs, args.extra, lambda s: print(s, flush=True))
    print((args.out / "summary.md").read_text())


if __name__ == "__main__":
    main()
