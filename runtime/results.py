"""A run's output folder: ``config.yaml``, ``history.csv`` and ``results.json``.

Files are written atomically (a temporary file, then a rename) with the permissions the umask
gives, and ``results.json`` last: its presence means the run completed. A failed run leaves
``error.txt`` instead. A run first removes the outcome files a previous run left in its folder,
so what the folder holds always belongs to the latest run.
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
CHECKPOINT = "checkpoint.pt"  # the last epoch boundary of an unfinished run (resume=true)
FOLDS_DONE = "folds_done.json"  # the folds an unfinished cross-validation completed
PARTY_STATE = "party-state"  # the parties' saved states (engine=local and simulation)
# What a run's outcome consists of; removed before a run starts in a folder.
OUTCOME = (RESULTS, ERROR, HISTORY)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see either nothing or the whole file."""
    write_atomic_bytes(path, text.encode("utf-8"))


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either nothing or the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def clear_outcome(out_dir: Path) -> None:
    """Remove ``results.json``, ``error.txt`` and ``history.csv`` left by an earlier run."""
    for name in OUTCOME:
        (Path(out_dir) / name).unlink(missing_ok=True)


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


def write_folds_done(out_dir: Path, done: dict) -> None:
    """``folds_done.json``: the folds a cross-validation completed so far (its resume's record,
    :mod:`vflfs.server_app.cross_validation`), numbers as ``results.json`` writes them."""
    write_atomic(out_dir / FOLDS_DONE, json.dumps(done, default=_jsonable))


def write_error(out_dir: Path, error: BaseException, note: str = "") -> None:
    """``error.txt``: the error, then ``note`` (what to do next) on a line of its own."""
    write_atomic(
        out_dir / ERROR, f"{type(error).__name__}: {error}\n" + (f"{note}\n" if note else "")
    )


def resume_hint(out_dir: Path) -> str:
    """What to do next when a run ended after a checkpoint or a completed cross-validation
    fold ("" when it left neither)."""
    if not any((Path(out_dir) / name).exists() for name in (CHECKPOINT, FOLDS_DONE)):
        return ""
    return (
        f"The run's last checkpoint is in {out_dir}: the same run with resume=true continues it "
        "from there (each party loads its saved state from its state-dir)."
    )


def is_complete(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a completed run (a readable ``results.json``)."""
    try:
        return json.loads((out_dir / RESULTS).read_text()).get("status") == "completed"
    except (OSError, ValueError):
        return False


def read_results(out_dir: Path) -> dict:
    return json.loads((Path(out_dir) / RESULTS).read_text())


def completed_config(out_dir: Path) -> dict | None:
    """The configuration of the completed run in ``out_dir``, or None if it holds none."""
    if not is_complete(out_dir):
        return None
    return json.loads((out_dir / RESULTS).read_text()).get("config") or {}


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")
