"""``vflfs split OUT_DIR [options] [overrides]``: per-party files plus a labels file, any dataset.

    vflfs split /tmp/madelon-parts dataset=madelon split=random split.num_parties=2
    vflfs split /tmp/parts --format parquet --drop 0.05 dataset=phishing split.num_parties=3

The dataset and the column split come from the same Hydra config as ``vflfs-run`` (so party m's
file holds exactly the columns that party m holds in simulation, in the same order). Writes
``party_<m>.<ext>`` (an ``id`` column plus the party's columns, named ``c<original index>``),
``labels.<ext>`` (``id``, ``y`` and, where the dataset has an official split, ``split``) and
``split.json`` (what went where), then prints the commands that use them. Each party file's
rows are shuffled (``--keep-order`` to keep them) so that alignment has work to do; with
``--drop F`` every file leaves out its own random fraction F of the samples.
Spurious noise columns are not written: parties add them at run time (``noise.ratio``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

FORMATS = ("csv", "parquet", "npz")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vflfs split",
        description="Split a dataset into one file per party (with an ID column) plus a labels "
        "file, to try per-party files and deployment on one machine.",
    )
    p.add_argument("out", type=Path, help="output folder (created)")
    p.add_argument("--format", choices=FORMATS, default="csv", help="file format (csv)")
    p.add_argument(
        "--keep-order", action="store_true", help="keep the rows in dataset order in every file"
    )
    p.add_argument(
        "--drop",
        type=float,
        default=0.0,
        metavar="F",
        help="each file leaves out its own random fraction F of the samples (default 0)",
    )
    p.add_argument(
        "overrides", nargs="*", help="Hydra overrides: dataset=..., split=..., split.*, seed"
    )
    return p


def split_to_files(
    out: Path, overrides: list[str], fmt: str = "csv", keep_order: bool = False, drop: float = 0.0
) -> dict:
    """Write the files; returns the manifest (also written to ``out/split.json``)."""
    from vflfs.datasets import load_dataset
    from vflfs.runtime.config import ConfigError, compose_config
    from vflfs.server_app.experiment import PARTY_FILES, Experiment, dataset_params

    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {FORMATS}, got {fmt!r}")
    if not 0.0 <= drop < 1.0:
        raise ConfigError(f"--drop must be in [0, 1), got {drop}")
    cfg = compose_config(overrides)
    if str(cfg.dataset.name) == PARTY_FILES:
        raise ConfigError("choose the dataset to split (dataset=...), not dataset=party_files")
    experiment = Experiment.from_config(cfg)
    dataset = load_dataset(str(cfg.dataset.name), experiment.data_dir, **dataset_params(cfg))
    out = out.expanduser().absolute()
    out.mkdir(parents=True, exist_ok=True)
    n = dataset.n_samples
    ids = np.asarray([f"s{i:0{len(str(n - 1))}d}" for i in range(n)])
    rng = np.random.default_rng(experiment.seed)
    labels_rows = _rows(n, drop, rng, shuffle=False)
    labels = {"id": ids[labels_rows], "y": np.asarray(dataset.y)[labels_rows]}
    if dataset.train_idx is not None and dataset.test_idx is not None:
        split = np.full(n, "train", dtype="<U5")
        split[dataset.test_idx] = "test"
        labels["split"] = split[labels_rows]
    labels_path = _write(out / f"labels.{fmt}", labels, None)
    parties = []
    relevant = set() if dataset.relevant is None else set(dataset.relevant.tolist())
    for m, columns in enumerate(experiment.columns):
        rows = _rows(n, drop, rng, shuffle=not keep_order)
        names = [f"c{int(c)}" for c in columns]
        path = _write(
            out / f"party_{m}.{fmt}", {"id": ids[rows]}, (dataset.X[rows][:, columns], names)
        )
        party = {"path": str(path), "rows": int(len(rows)), "columns": columns.tolist()}
        if dataset.relevant is not None:  # the party file's own column positions
            party["relevant"] = [j for j, c in enumerate(columns.tolist()) if c in relevant]
        parties.append(party)
    manifest = {
        "dataset": str(cfg.dataset.name),
        "overrides": list(overrides),
        "labels": {"path": str(labels_path), "rows": int(len(labels_rows))},
        "parties": parties,
        "server_overrides": server_overrides(overrides, str(labels_path), parties),
    }
    (out / "split.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def _rows(n: int, drop: float, rng: np.random.Generator, shuffle: bool) -> np.ndarray:
    rows = np.arange(n)
    if drop > 0:
        rows = np.sort(rng.choice(n, size=n - int(round(drop * n)), replace=False))
    return rng.permutation(rows) if shuffle else rows


def _write(path: Path, columns: dict, features: tuple[np.ndarray, list[str]] | None) -> Path:
    """One file: the named 1-D ``columns``, then the feature matrix's columns."""
    if path.suffix == ".npz":
        extra = {} if features is None else {"X": features[0]}
        np.savez(path, **columns, **extra)
        return path
    import pandas as pd

    frame = pd.DataFrame(columns)
    if features is not None:
        block = pd.DataFrame(features[0], columns=features[1], index=frame.index)
        frame = pd.concat([frame, block], axis=1)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False, float_format="%.9g")  # 9 digits: float32 exactly
    else:
        frame.to_parquet(path, index=False)
    return path


def server_overrides(overrides: list[str], labels_path: str, parties: list[dict]) -> list[str]:
    """The server's overrides for the files: the user's, with the dataset and column split
    replaced by ``dataset=party_files`` and the labels file (and the parties' known relevant
    columns where the dataset has them)."""
    keep = [
        o for o in overrides if not o.split("=", 1)[0].lstrip("+~").startswith(("dataset", "split"))
    ]
    return [
        "dataset=party_files",
        f"dataset.labels_path={labels_path}",
        f"split.num_parties={len(parties)}",
        *_relevant_override(parties),
        *keep,
    ]


def _relevant_override(parties: list[dict]) -> list[str]:
    if not all("relevant" in p for p in parties):
        return []
    lists = ",".join("[" + ",".join(map(str, p["relevant"])) + "]" for p in parties)
    return [f"dataset.relevant=[{lists}]"]


def usage_text(manifest: dict) -> str:
    """How to run on the files: simulation, and one SuperNode per party."""
    parties = manifest["parties"]
    n = len(parties)
    server = " ".join(manifest["server_overrides"])
    paths = ",".join(p["path"] for p in parties)
    lines = [
        f"wrote {manifest['labels']['path']} and {n} party files ({manifest['dataset']}):",
        *(f"  party {m}: {p['path']} ({p['rows']} rows)" for m, p in enumerate(parties)),
        "",
        "a run on these files (engine=simulation: in Flower's simulation engine):",
        f"  vflfs-run {server} 'dataset.party_paths=[{paths}]'",
        "deployment: one SuperNode per party (docs/deployment.md), each with",
        *(
            f"  --node-config \"partition-id={m} num-partitions={n} data-path='{p['path']}' "
            "id-column='id'\""
            for m, p in enumerate(parties)
        ),
        f"and the run config  -c \"hydra-overrides='{server}' output-dir='/abs/out'\"",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``vflfs split`` / ``vflfs-split``; 0 on success, 2 with the reason on bad input."""
    from hydra.errors import HydraException

    args = parser().parse_intermixed_args(argv)
    try:
        manifest = split_to_files(args.out, args.overrides, args.format, args.keep_order, args.drop)
    except (ValueError, HydraException) as error:  # ConfigError, DataError, bad overrides
        print(f"vflfs split: error: {error}", file=sys.stderr)
        return 2
    print(usage_text(manifest))
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
