"""A run's output folder: ``config.yaml``, ``history.csv`` and ``results.json``.

Files are written atomically (a temporary file, then a rename), and ``results.json`` last: its
presence means the run completed. A failed run leaves ``error.txt`` instead.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from datetime import datetime
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

RESULTS = "results.json"
HISTORY = "history.csv"
CONFIG = "config.yaml"
ERROR = "error.txt"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see either nothing or the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def default_output_dir() -> Path:
    return Path.cwd() / "outputs" / datetime.now().strftime("%Y-%m-%d/%H-%M-%S-%f")


def write_config(out_dir: Path, cfg: DictConfig) -> None:
    write_atomic(out_dir / CONFIG, OmegaConf.to_yaml(cfg, resolve=True))


def write_history(out_dir: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_atomic(out_dir / HISTORY, buf.getvalue())


def write_results(out_dir: Path, results: dict) -> None:
    write_atomic(out_dir / RESULTS, json.dumps(results, indent=2, default=_jsonable))


def write_error(out_dir: Path, error: BaseException) -> None:
    write_atomic(out_dir / ERROR, f"{type(error).__name__}: {error}\n")


def is_complete(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a completed run (a readable ``results.json``)."""
    try:
        return json.loads((out_dir / RESULTS).read_text()).get("status") == "completed"
    except (OSError, ValueError):
        return False


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
