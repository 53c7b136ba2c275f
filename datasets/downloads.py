"""Downloading a source file over HTTP(S) with a progress bar, into place in one step."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from vflfs.datasets.errors import DataError

CHUNK = 1 << 16
TIMEOUT_S = 60
USER_AGENT = "vflfs-data-fetch"


def download_progress(**kwargs) -> Progress:
    """A rich progress display with bytes, speed and time left (an open bar for OpenML)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        **kwargs,
    )


def download(url: str, dest: Path, progress: Progress) -> Path:
    """Download ``url`` to ``dest`` (written as ``dest.part``, renamed when complete).

    Raises DataError naming the URL and the way around a machine without internet.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, part.open("wb") as out:
            size = response.headers.get("Content-Length")
            task = progress.add_task(dest.name, total=int(size) if size else None)
            while chunk := response.read(CHUNK):
                out.write(chunk)
                progress.advance(task, len(chunk))
        os.replace(part, dest)
    except (urllib.error.URLError, OSError) as exc:
        part.unlink(missing_ok=True)
        raise DataError(
            f"cannot download {url} ({exc}); fix: check the internet connection, or download "
            f"the file by hand into a folder and pass it with --sources FOLDER (as {dest.name})"
        ) from exc
    return dest


def file_sha256(path: Path) -> str:
    """SHA256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
