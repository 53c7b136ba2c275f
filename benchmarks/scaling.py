"""How vflfs's cost grows with parties, rows and columns, in ``engine=local`` and simulation.

Sweeps parties x rows x columns per party on generated data (``--dataset teacher`` or
``synthetic_madelon``), each point in a fresh process (:mod:`benchmarks.scaling_point`, so
peak memory is the point's own), and reports per point: training steps per second, seconds
and MB (bytes carried in Flower messages) per epoch, peak memory of the server and of one
party. A point trains at most ``--steps`` batches and extrapolates the epoch from them (plus
the epoch's measured evaluation), and says so (``extrapolated``); a point whose generated
matrix (rows x parties x cols float32, which the server's and the parties' processes each
generate) exceeds ``--max-data-gib`` is skipped with the reason. Ratios are against the
smallest point measured in the same run, per engine; the log-log slopes of seconds per epoch
against rows and parties and of a party's memory against parties are printed beside the
shapes expected (1, at most 1, 0). docs/scaling.md explains the measured ones.

    python -m benchmarks.scaling --out outputs/scaling                   # the default sweep
    python -m benchmarks.scaling --engines local simulation --parties 2 4 \
        --rows 10000 100000 --cols 100 --steps 100 --out outputs/scaling_small

Writes ``<out>/scaling.csv``, ``scaling.json``, ``scaling.md`` (the table) and the plots
(:mod:`benchmarks.scaling_plots`); ``<out>/points/<point>/`` holds each point's
``point.json`` and log. A point whose folder holds a result of the same ``--steps`` is not
run again (``--rerun`` runs it).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .scaling_point import DATASETS, ENGINES, MAX_TRAIN_S, RESULT, Point

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30
DEFAULT_PARTIES = (2, 4, 8, 16)
DEFAULT_ROWS = (10_000, 100_000, 1_000_000)
DEFAULT_COLS = (100, 10_000)
COLUMNS = (
    "engine", "dataset", "parties", "rows", "cols", "status", "steps_per_epoch",
    "steps_measured", "extrapolated", "steps_per_s", "s_per_epoch", "mb_per_epoch",
    "server_rss_mb", "party_rss_mb", "party_traced_mb", "train_s", "eval_s", "setup_s",
    "point_wall_s", "load_avg", "party_cache", "epoch_x", "mb_x", "rows_x", "parties_x",
    "cols_x", "note",
)  # fmt: skip
EXPECTED = {"rows": "1", "parties": "<= 1", "party_memory": "0"}


def plan(args: argparse.Namespace) -> list[tuple[Point, str]]:
    """Every point of the sweep, smallest first, with a skip reason ('' to run it)."""
    points = [
        Point(engine, p, n, d, args.dataset)
        for engine in args.engines
        for d in sorted(args.cols)
        for n in sorted(args.rows)
        for p in sorted(args.parties)
    ]
    return [(point, skip_reason(point, args.max_data_gib)) for point in points]


def skip_reason(point: Point, max_gib: float) -> str:
    size = point.matrix_bytes / GIB
    if size <= max_gib:
        return ""
    return (
        f"the generated matrix is {point.rows} x {point.parties * point.cols} float32 "
        f"= {size:.1f} GiB, over --max-data-gib {max_gib:g} (the server's and the parties' "
        "processes each generate it, and a party keeps it beside its own view)"
    )


def run_in_process(
    point: Point, args: argparse.Namespace, folder: Path, party_cache: int = 0
) -> dict:
    """``python -m benchmarks.scaling_point`` for ``point``; its result, or why it failed."""
    cmd = [
        sys.executable, "-m", "benchmarks.scaling_point", "--engine", point.engine,
        "--parties", str(point.parties), "--rows", str(point.rows), "--cols", str(point.cols),
        "--dataset", point.dataset, "--steps", str(args.steps), "--out", str(folder),
        "--party-cache", str(party_cache), "--max-train-s", str(args.max_train_s),
    ]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    log, timeout = folder / "point.log", args.point_timeout
    try:
        with log.open("w") as out:
            done = subprocess.run(
                cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
            )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "note": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0 or not (folder / RESULT).exists():
        tail = log.read_text().strip().splitlines()[-1:] or [""]
        return {"status": "failed", "note": f"exit status {done.returncode}: {tail[0][:200]}"}
    return {"status": "completed", **json.loads((folder / RESULT).read_text())}


def sweep(args: argparse.Namespace, report: Callable[[str], None] = print) -> list[dict]:
    """Run (or reuse, or skip) every point; one CSV-ready dict per point."""
    rows, points = [], plan(args)
    for i, (point, reason) in enumerate(points, 1):
        row: dict = {**vars(point), "status": "skipped", "note": reason}
        cache = args.party_cache if point.engine == "local" else 0
        folder = Path(args.out) / "points" / (point.name + (f"_cache{cache}" if cache else ""))
        kept = folder / RESULT
        old = json.loads(kept.read_text()) if kept.exists() and not args.rerun else {}
        asked = {"steps_requested": args.steps, "max_train_s": args.max_train_s}
        if not reason and reusable(old, asked):
            row = {**old, "note": note(old) if old["status"] == "completed" else old["note"]}
        elif not reason:
            row = {**row, **run_in_process(point, args, folder, cache), **asked}
            if row["status"] == "completed":
                row["note"] = note(row)
            kept.write_text(json.dumps(row, indent=2))
        rows.append(row)
        report(f"[{i:2d}/{len(points)}] {describe(row)}")
    add_ratios(rows)
    return rows


def reusable(old: dict, asked: dict) -> bool:
    """Whether a point's earlier record answers this run: the same ``--steps``, and the same
    training time limit or none."""
    if not old or old.get("steps_requested") != asked["steps_requested"]:
        return False
    return old.get("max_train_s") in (None, asked["max_train_s"])


def note(row: dict) -> str:
    """How a completed point's epoch was obtained."""
    if not row["extrapolated"]:
        return "a whole epoch measured"
    by_time = row.get("stopped_by_time")
    limit = row.get("max_train_s") or MAX_TRAIN_S  # a point's own default when not given
    why = f"{limit:g} s of training" if by_time else "--steps"
    return f"extrapolated from {row['steps_measured']} steps (stopped by {why})"


def describe(row: dict) -> str:
    head = f"{row['engine']:10s} P={row['parties']:<3d} n={row['rows']:<8d} d={row['cols']:<6d}"
    if row["status"] != "completed":
        return f"{head} {row['status']}: {row['note']}"
    return (
        f"{head} {row['steps_per_s']:7.1f} steps/s {row['s_per_epoch']:9.2f} s/epoch "
        f"{row['mb_per_epoch']:9.2f} MB/epoch  server {row['server_rss_mb']:6.0f} MB  party "
        f"{row['party_traced_mb']:6.0f} MB traced, {row['party_rss_mb']:6.0f} MB process  "
        f"({row['steps_measured']}/{row['steps_per_epoch']} steps"
        f"{', extrapolated' if row['extrapolated'] else ''}; {row['point_wall_s']:.0f} s)"
    )


def add_ratios(rows: list[dict]) -> None:
    """Per engine, each point against the engine's smallest completed point."""
    for engine in {r["engine"] for r in rows}:
        done = [r for r in rows if r["engine"] == engine and r["status"] == "completed"]
        if not done:
            continue
        base = min(done, key=lambda r: (r["cols"], r["rows"], r["parties"]))
        for r in done:
            r["epoch_x"] = r["s_per_epoch"] / base["s_per_epoch"]
            r["mb_x"] = r["mb_per_epoch"] / base["mb_per_epoch"]
            for key in ("rows", "parties", "cols"):
                r[f"{key}_x"] = r[key] / base[key]


def shapes(rows: list[dict]) -> list[dict]:
    """Log-log slopes: seconds per epoch against rows (at fixed parties and columns) and
    against parties (at fixed rows and columns), a party's traced memory against parties."""
    done = [r for r in rows if r["status"] == "completed"]
    fits = []
    for what, x, y, fixed in (
        ("rows", "rows", "s_per_epoch", ("parties", "cols")),
        ("parties", "parties", "s_per_epoch", ("rows", "cols")),
        ("party_memory", "parties", "party_traced_mb", ("rows", "cols")),
    ):
        groups: dict[tuple, list[dict]] = {}
        for r in done:
            groups.setdefault((r["engine"], *(r[k] for k in fixed)), []).append(r)
        for key, group in sorted(groups.items()):
            if len({r[x] for r in group}) < 2:
                continue
            slope = np.polyfit(np.log([r[x] for r in group]), np.log([r[y] for r in group]), 1)
            fits.append(
                {
                    "engine": key[0],
                    "shape": f"{y} vs {x}",
                    "at": ", ".join(f"{k}={v}" for k, v in zip(fixed, key[1:], strict=True)),
                    "exponent": float(slope[0]),
                    "expected": EXPECTED[what],
                }
            )
    return fits


def write(rows: list[dict], fits: list[dict], args: argparse.Namespace) -> None:
    out = Path(args.out)
    with (out / "scaling.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    setup = {
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0],
        "steps": args.steps,
        "dataset": args.dataset,
        "max_data_gib": args.max_data_gib,
    }
    record = {"setup": setup, "points": rows, "shapes": fits}
    (out / "scaling.json").write_text(json.dumps(record, indent=2, default=str))
    (out / "scaling.md").write_text(markdown(rows))


def markdown(rows: list[dict]) -> str:
    """The points as a Markdown table (skipped and failed ones with their reason)."""
    head = (
        "| engine | parties | rows | cols | steps/s | s/epoch | x base | MB/epoch | server MB "
        "| party MB (traced) | party process MB | steps measured/epoch |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        key = f"| {r['engine']} | {r['parties']} | {r['rows']:,} | {r['cols']:,} |"
        if r["status"] == "skipped":
            size = 4 * r["rows"] * r["parties"] * r["cols"] / GIB
            lines.append(f"{key} skipped: a {size:,.1f} GiB matrix |||||||")
            continue
        if r["status"] != "completed":
            lines.append(f"{key} {r['status']}: {r['note']} |||||||")
            continue
        lines.append(
            f"{key} {r['steps_per_s']:.2f} | {r['s_per_epoch']:,.1f} | {r['epoch_x']:.1f} | "
            f"{r['mb_per_epoch']:,.1f} | {r['server_rss_mb']:,.0f} | {r['party_traced_mb']:,.0f} "
            f"| {r['party_rss_mb']:,.0f} | {r['steps_measured']}/{r['steps_per_epoch']} |"
        )
    return head + "\n".join(lines) + "\n"


def print_ratios(rows: list[dict], report: Callable[[str], None]) -> None:
    report("against each engine's smallest point (x = times the baseline's value):")
    for r in rows:
        if r["status"] == "completed":
            report(
                f"  {r['engine']:10s} P={r['parties']:<3d} n={r['rows']:<8d} d={r['cols']:<6d} "
                f"s/epoch x{r['epoch_x']:8.2f}  MB/epoch x{r['mb_x']:8.2f}  "
                f"(rows x{r['rows_x']:g}, parties x{r['parties_x']:g}, cols x{r['cols_x']:g})"
            )


def print_shapes(fits: list[dict], report: Callable[[str], None]) -> None:
    report("log-log slopes (expected: s/epoch ~ rows^1, ~ parties^<=1, party memory ~ P^0):")
    for f in fits:
        report(
            f"  {f['engine']:10s} {f['shape']:30s} at {f['at']:22s} exponent "
            f"{f['exponent']:5.2f} (expected {f['expected']})"
        )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    p.add_argument("--parties", nargs="+", type=int, default=list(DEFAULT_PARTIES))
    p.add_argument("--rows", nargs="+", type=int, default=list(DEFAULT_ROWS))
    p.add_argument("--cols", nargs="+", type=int, default=list(DEFAULT_COLS))
    p.add_argument("--dataset", choices=DATASETS, default="teacher")
    p.add_argument("--steps", type=int, default=50, help="training steps per point (0: epoch)")
    p.add_argument("--max-data-gib", type=float, default=0.75, help="skip larger matrices")
    p.add_argument(
        "--max-train-s", type=float, default=MAX_TRAIN_S, help="a point's training stops after"
    )
    p.add_argument("--point-timeout", type=float, default=900.0, help="seconds per point")
    p.add_argument(
        "--party-cache",
        type=int,
        default=0,
        help="engine=local: live parties and data views a process keeps (0: the default, "
        "8 or the run's parties if more)",
    )
    p.add_argument("--rerun", action="store_true", help="run points measured before again")
    p.add_argument("--no-plots", action="store_true", help="write no PNG")
    p.add_argument("--out", default="outputs/scaling", help="folder for the results")
    return p


def main(argv: Sequence[str] | None = None) -> list[dict]:
    args = parser().parse_args(argv)
    if min(args.parties + args.rows + args.cols) < 1:
        raise SystemExit("--parties, --rows and --cols must be positive; fix: e.g. --rows 10000")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows = sweep(args)
    fits = shapes(rows)
    print_ratios(rows, print)
    print_shapes(fits, print)
    write(rows, fits, args)
    if not args.no_plots:
        from .scaling_plots import plot_all

        for path in plot_all(rows, Path(args.out)):
            print(f"wrote {path}")
    print(f"wrote {Path(args.out) / 'scaling.csv'} ({time.perf_counter() - start:.0f} s in all)")
    return rows


if __name__ == "__main__":
    main()
