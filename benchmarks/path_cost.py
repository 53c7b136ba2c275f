"""What a default selecting run costs against a 40-epoch dense run, measured in the same run.

Each repeat runs, one after the other in fresh processes (``python -m vflfs.runtime.cli``,
``engine=local``, interpreter start and imports included, as a user runs them): the
all-features model for 40 epochs without early stopping (``strategy=vfl training.epochs=40
training.patience=null``), then every strategy asked for with its defaults. A strategy's
ratio is its wall time over the dense run's of the same repeat, so a load that changes
between repeats changes both; the table gives each one's median over the repeats, with the
CPU seconds of the process and its children (steadier on a shared machine) beside them, and
the epochs a run trained with, of them, those of the models trained after the path (refits,
probes, add-backs and the dense refit: where a path run's time goes) and how many, and the
seconds of those epochs (``history.csv``'s ``wall_s``) and of the run outside its epochs
(process start, imports, data, setup and results).

    python -m benchmarks.path_cost --repeats 3 --out outputs/path_cost
    python -m benchmarks.path_cost --dataset synthetic_madelon --strategies stg --repeats 1

With ``--reference COMMIT`` each repeat also runs the 40-epoch dense run of vflfs as it was
at that commit (its files from ``git archive``, imported as ``vflfs`` ahead of the installed
package), right after today's, and the table gives each run's ratio to it too: a cost target
set against the code of a given day is measured against that code's run on this machine, in
the same repeat. The commit's code must run with today's installed packages.

    python -m benchmarks.path_cost --strategies stg fedsdg_fs group_lasso --reference ff66036

The runs land in ``<out>/runs/<repeat>/<name>/`` (each with its usual files); the table in
``<out>/path_cost.json`` and ``path_cost.md``. Datasets that read files need
``VFLFS_DATA_DIR`` (docs/datasets.md).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

DENSE = ("vfl_40_epochs", ["strategy=vfl", "training.epochs=40", "training.patience=null"])
REPO = Path(__file__).resolve().parents[1]
CAPTURE = {"capture_output": True, "text": True}


def reference_env(commit: str, root: Path) -> dict[str, str]:
    """The environment of a process that imports vflfs as it was at ``commit``: the commit's
    files (``git archive`` of this repository) as the package ``vflfs`` in ``root/<its full
    hash>``, which goes first on ``PYTHONPATH`` (ahead of the installed package's finder). A
    name that moves (a branch, ``HEAD``) gets the files of the commit it names now."""
    git = ["git", "-C", str(REPO)]
    found = subprocess.run([*git, "rev-parse", "--verify", f"{commit}^{{commit}}"], **CAPTURE)
    if found.returncode != 0:
        raise SystemExit(
            f"--reference {commit}: not a commit here ({found.stderr.strip()}); fix: name a "
            "commit of this repository's history, from a git checkout of it"
        )
    folder = root / found.stdout.strip()
    package = folder / "vflfs"
    if not (package / "__init__.py").exists():
        files = subprocess.run([*git, "archive", found.stdout.strip()], capture_output=True)
        package.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(files.stdout)) as tar:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(package, **safe)
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def child_cpu() -> float:
    """CPU seconds of the finished child processes so far, user + system."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_command(overrides: list[str], folder: Path) -> list[str]:
    """``python -m vflfs.runtime.cli`` (local engine, run afresh) writing to ``folder``; Hydra's
    own folder (its log, ``.hydra/``) is the run's too, not one under ``./outputs``."""
    cmd = [sys.executable, "-m", "vflfs.runtime.cli", "engine=local", "rerun=true"]
    return [*cmd, *overrides, f"output_dir={folder}", f"hydra.run.dir={folder}"]


def run(name: str, overrides: list[str], folder: Path, env: dict[str, str] | None = None) -> dict:
    """One run in a fresh process (of ``env``, default this one's): its wall and CPU seconds
    and what it reported."""
    cmd = cli_command(overrides, folder)
    cpu, start = child_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall, cpu = time.perf_counter() - start, child_cpu() - cpu
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"{name} failed (exit {done.returncode}): {' | '.join(tail)}")
    r = json.loads((folder / "results.json").read_text())
    refits = refit_spans(r)
    with open(folder / "history.csv", newline="") as f:
        ends = [float(row["wall_s"]) for row in csv.DictReader(f)]
    return {
        "name": name,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "epochs": r.get("epochs_run"),
        "refits": len(refits),
        "refit_epochs": sum(stop - first for first, stop in refits),
        "refit_s": round(span_seconds(ends, refits), 2),
        "outside_s": round(wall - (ends[-1] if ends else 0.0), 2),
        "test_metric": round(float(r["test_metric"]), 4),
        "kept": r.get("selection", {}).get("selected_features"),
    }


def refit_spans(results: dict) -> list[tuple[int, int]]:
    """The epochs (first, stop) of each model a path run trained after its path: the refits,
    probes, add-backs and the dense refit (not the path points' own models)."""
    rows = ((results.get("extra") or {}).get("path_choice") or {}).get("refits", [])
    return [
        (int(row["epochs"][0]), int(row["epochs"][1]))
        for row in rows
        if row.get("ranking") != "penalised" and row.get("epochs") and None not in row["epochs"]
    ]


def span_seconds(ends: list[float], spans: list[tuple[int, int]]) -> float:
    """Seconds of the epochs in ``spans`` (first, stop), from each epoch's end time since the
    training began (``history.csv``'s ``wall_s``): what ran between two spans counts with the
    later one (a refit's setup, the screening of the one before)."""
    return float(sum(ends[stop - 1] - (ends[first - 1] if first else 0.0) for first, stop in spans))


def summarise(repeats: list[list[dict]], reference: int | None = None) -> list[dict]:
    """Per name: the medians over repeats, and the wall ratio to the repeat's dense run (and
    to its run number ``reference``, the reference code's dense run, where there is one)."""
    rows = []
    for i, first in enumerate(repeats[0]):
        runs = [rep[i] for rep in repeats]
        row = {
            "name": first["name"],
            "wall_s": round(statistics.median(r["wall_s"] for r in runs), 1),
            "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 1),
            **ratios(repeats, i, 0, "x_dense"),
            "epochs": first["epochs"],
            "refits": first.get("refits", 0),
            "refit_epochs": first.get("refit_epochs", 0),
            "refit_s": round(statistics.median(r.get("refit_s", 0.0) for r in runs), 1),
            "outside_s": round(statistics.median(r.get("outside_s", 0.0) for r in runs), 1),
            "test_metric": first["test_metric"],
            "kept": first["kept"],
        }
        if reference is not None:
            row.update(ratios(repeats, i, reference, "x_reference"))
        rows.append(row)
    return rows


def ratios(repeats: list[list[dict]], i: int, base: int, key: str) -> dict:
    """Run ``i``'s wall time over run ``base``'s, repeat by repeat: their median and range."""
    values = [rep[i]["wall_s"] / rep[base]["wall_s"] for rep in repeats]
    return {
        key: round(statistics.median(values), 2),
        f"{key}_range": [round(min(values), 2), round(max(values), 2)],
    }


def markdown(rows: list[dict], header: str) -> str:
    reference = any("x_reference" in r for r in rows)
    extra = " x the reference's dense run (range) |" if reference else ""
    lines = [
        header,
        "",
        "| run | wall s | CPU s | x the dense run (range) |"
        f"{extra} epochs | of them refits' (refits) | refits' s | s outside the epochs "
        "| test metric | kept |",
        "|---|---|---|---|" + ("---|" if reference else "") + "---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r["name"], r["wall_s"], r["cpu_s"], span(r, "x_dense")]
        cells += [span(r, "x_reference")] if reference else []
        cells += [r["epochs"], f"{r['refit_epochs']} ({r['refits']})", r["refit_s"]]
        cells += [r["outside_s"], r["test_metric"], r["kept"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def span(row: dict, key: str) -> str:
    """A ratio and its range over the repeats: ``3.0 (2.0-5.0)``."""
    low, high = row[f"{key}_range"]
    return f"{row[key]} ({low}-{high})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="madelon")
    parser.add_argument("--strategies", nargs="+", default=["stg", "fedsdg_fs", "group_lasso"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", nargs="*", default=[], help="Hydra overrides for every run")
    parser.add_argument(
        "--reference", metavar="COMMIT", help="also time the dense run of the code at COMMIT"
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/path_cost"))
    args = parser.parse_args(argv)
    common = [f"dataset={args.dataset}", *args.set]
    jobs = [(*DENSE, None)]
    if args.reference:
        env = reference_env(args.reference, args.out / "reference")
        jobs.append((f"{DENSE[0]}@{args.reference}", DENSE[1], env))
    jobs += [(s, [f"strategy={s}"], None) for s in args.strategies]
    repeats = []
    for k in range(args.repeats):
        done = []
        for name, overrides, env in jobs:
            folder = args.out / "runs" / str(k) / name
            done.append(run(name, [*common, *overrides], folder, env))
            print(f"repeat {k}: {json.dumps(done[-1])}", flush=True)
        repeats.append(done)
    rows = summarise(repeats, 1 if args.reference else None)
    header = f"dataset={args.dataset} {' '.join(args.set)}; {args.repeats} repeats (medians)"
    if args.reference:
        header += f"; the reference: the dense run of commit {args.reference}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "path_cost.json").write_text(
        json.dumps({"header": header, "rows": rows, "runs": repeats}, indent=2)
    )
    table = markdown(rows, header)
    (args.out / "path_cost.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
