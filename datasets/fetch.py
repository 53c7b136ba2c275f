"""Fetching a benchmark: download its source, convert, check the checksum, write atomically.

``fetch_dataset`` skips a dataset whose file is already present with the recorded checksum,
names the source and the licence before downloading, refuses a conversion whose arrays do not
have the recorded checksum (nothing is written then), and writes ``<name>.npz`` in one step.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from vflfs.datasets.array_digest import arrays_sha256
from vflfs.datasets.converters import Arrays
from vflfs.datasets.downloads import download_progress
from vflfs.datasets.errors import DataError
from vflfs.datasets.npz_files import write_npz_atomic
from vflfs.datasets.sources import DatasetSpec


class FileState(Enum):
    """What the data folder holds for one benchmark."""

    MISSING = "missing"
    VALID = "ok"
    DIFFERENT = "differs"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class FetchOutcome:
    """The result of fetching one benchmark: its file and whether it was already there."""

    name: str
    path: Path
    fetched: bool


def dataset_path(spec: DatasetSpec, data_dir: Path) -> Path:
    """``<data_dir>/<name>.npz``."""
    return data_dir / f"{spec.name}.npz"


def file_state(spec: DatasetSpec, data_dir: Path) -> FileState:
    """Whether the benchmark's file is missing, valid (recorded checksum), different or broken."""
    path = dataset_path(spec, data_dir)
    if not path.is_file():
        return FileState.MISSING
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return FileState.UNREADABLE
    return FileState.VALID if arrays_sha256(arrays) == spec.checksum else FileState.DIFFERENT


def fetch_dataset(
    spec: DatasetSpec,
    data_dir: Path,
    *,
    sources: Path | None = None,
    force: bool = False,
    console: Console | None = None,
) -> FetchOutcome:
    """Make ``<data_dir>/<name>.npz`` hold the published benchmark.

    ``sources`` keeps the downloaded source files (and reuses those already there, e.g. copied
    by hand to a machine without internet); by default they go to a temporary folder. ``force``
    fetches even when a valid file is present. Raises DataError when the download fails or the
    converted arrays do not have the recorded checksum; the data folder is unchanged then.
    """
    console = console or Console(stderr=True, soft_wrap=True)
    path = dataset_path(spec, data_dir)
    state = file_state(spec, data_dir)
    if state is FileState.VALID and not force:
        console.print(f"{spec.name}: present and valid ({path}); skipped")
        return FetchOutcome(spec.name, path, fetched=False)
    if state is FileState.DIFFERENT:
        console.print(f"{spec.name}: {path} differs from the published data; replacing it")
    elif state is FileState.UNREADABLE:
        console.print(f"{spec.name}: {path} is not a readable .npz file; replacing it")
    console.print(f"{spec.name}: source: {spec.source} ({spec.page})")
    console.print(f"{spec.name}: licence: {spec.licence}")
    console.print(f"{spec.name}: from {spec.origin.describe()}")
    arrays, notes = _retrieve(spec, sources, console)
    digest = arrays_sha256(arrays)
    if digest != spec.checksum:
        retry = "retry" if sources is None else f"delete the source files in {sources} and retry"
        raise DataError(
            f"{spec.name}: the converted arrays have SHA256 {digest}, not the recorded "
            f"{spec.checksum}, so the download is not the published data (changed, truncated "
            f"or a different version); {path} was not written. fix: {retry}; if it persists, "
            f"the source has changed ({spec.page})"
        )
    arrays["meta"] = np.array(json.dumps(_meta(spec, arrays, notes, digest)))
    write_npz_atomic(path, arrays)
    console.print(f"{spec.name}: wrote {path} ({_shape(arrays)}, checksum verified)")
    return FetchOutcome(spec.name, path, fetched=True)


def _retrieve(
    spec: DatasetSpec, sources: Path | None, console: Console
) -> tuple[Arrays, dict[str, Any]]:
    with download_progress(console=console, transient=False) as progress:
        if sources is not None:
            sources.mkdir(parents=True, exist_ok=True)
            return spec.origin.retrieve(sources, progress)
        with tempfile.TemporaryDirectory(prefix=f"vflfs-{spec.name}-") as tmp:
            return spec.origin.retrieve(Path(tmp), progress)


def _meta(spec: DatasetSpec, arrays: Arrays, notes: dict[str, Any], digest: str) -> dict:
    classes = arrays["classes"]
    counts = np.bincount(arrays["y"], minlength=len(classes))
    return {
        "source": spec.source,
        "licence": spec.licence,
        "page": spec.page,
        "url": spec.origin.describe(),
        **notes,
        "split": spec.split,
        "name": spec.name,
        "shape": list(arrays["X"].shape),
        "n_classes": len(classes),
        "class_counts": {str(k): int(c) for k, c in zip(classes, counts, strict=True)},
        "label_coding": "y = index into classes (original label values)",
        "arrays_sha256": digest,
    }


def _shape(arrays: Arrays) -> str:
    n, d = arrays["X"].shape
    return f"{n} x {d}, {len(arrays['classes'])} classes"
