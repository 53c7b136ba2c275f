"""Dense training over many seeds: how often it stalls at the uniform prediction, and recovers.

The all-features baseline (``strategy=vfl``, its defaults) on settings where an uncentred
start used to stay at the uniform prediction's loss: synthetic MADELON at batch 64 and at the
default batch, and a teacher dataset of six parties. For each setting and seed the table
gives the test accuracy, the majority-class rate, whether the run restarted after a stalled
start (strategies/stall.py) and whether it ended no better than the majority class.

    python -m benchmarks.stall --seeds 0 1 2 3 4 5 6 7 8 9 --out outputs/stall

Every run lands in ``<out>/runs/<setting>/seed=<s>/`` (a completed one is skipped, so an
interrupted benchmark resumes); the table in ``<out>/stall.csv`` and ``stall.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import time
from pathlib import Path

from vflfs.client_app.app import app as client_app
from vflfs.federation import LocalGrid
from vflfs.runtime.config import compose_config
from vflfs.runtime.results import RESULTS, is_complete
from vflfs.server_app.run import run_experiment

SETTINGS: dict[str, list[str]] = {
    "synthetic_madelon_b64": ["dataset=synthetic_madelon", "training.batch_size=64"],
    "synthetic_madelon": ["dataset=synthetic_madelon"],
    "teacher_6_parties": [
        "dataset=teacher",
        "dataset.params.n_samples=8000",
        "dataset.params.n_features=409",
        "dataset.params.n_classes=3",
        "dataset.params.n_relevant=20",
        "split.num_parties=6",
    ],
}
FIELDS = ("setting", "seed", "test_metric", "majority", "restarts", "at_chance", "wall_s")


def run(setting: str, seed: int, out: Path, epochs: int) -> dict:
    folder = out / "runs" / setting / f"seed={seed}"
    t0 = time.perf_counter()
    if not is_complete(folder):
        overrides = [*SETTINGS[setting], "strategy=vfl", "engine=local", f"seed={seed}"]
        cfg = compose_config([*overrides, f"training.epochs={epochs}"])
        run_experiment(LocalGrid(client_app, int(cfg.split.num_parties)), cfg, folder)
    r = json.loads((folder / RESULTS).read_text())
    majority = float(r.get("baseline_test_metric", 0.0))
    return {
        "setting": setting,
        "seed": seed,
        "test_metric": round(float(r["test_metric"]), 4),
        "majority": round(majority, 4),
        "restarts": len(r.get("extra", {}).get("restarts", [])),
        "at_chance": float(r["test_metric"]) <= majority + 0.01,
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def write(rows: list[dict], out: Path) -> str:
    with (out / "stall.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| setting | runs | restarted | ended at chance | test accuracy min / mean / max |",
        "|---|---|---|---|---|",
    ]
    for setting in dict.fromkeys(r["setting"] for r in rows):
        mine = [r for r in rows if r["setting"] == setting]
        acc = [r["test_metric"] for r in mine]
        lines.append(
            f"| {setting} | {len(mine)} | {sum(r['restarts'] > 0 for r in mine)} | "
            f"{sum(r['at_chance'] for r in mine)} | "
            f"{min(acc):.3f} / {sum(acc) / len(acc):.3f} / {max(acc):.3f} |"
        )
    table = "\n".join(lines) + "\n"
    (out / "stall.md").write_text(table)
    return table


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--out", type=Path, default=Path("outputs/stall"))
    args = p.parse_args(argv)
    logging.getLogger("vflfs").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for setting in args.settings:
        for seed in args.seeds:
            rows.append(run(setting, seed, args.out, args.epochs))
            row = rows[-1]
            print(
                f"{setting:24s} seed {seed:2d}  acc {row['test_metric']:.4f}  "
                f"restarts {row['restarts']}  ({row['wall_s']} s)",
                flush=True,
            )
    print(write(rows, args.out))


if __name__ == "__main__":
    main()
