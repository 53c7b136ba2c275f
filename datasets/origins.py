"""Where a benchmark's data comes from: files of an archive, or an OpenML dataset.

An origin's :meth:`retrieve` puts the source into a folder (downloading what is not there yet)
and converts it to the arrays of a ``<name>.npz`` file, with provenance notes for its ``meta``.
"""

from __future__ import annotations

import urllib.error
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rich.progress import Progress

from vflfs.datasets.converters import Arrays, from_openml_frame
from vflfs.datasets.downloads import download, file_sha256
from vflfs.datasets.errors import DataError

Converter = Callable[[Mapping[str, Path]], Arrays]


class Origin(Protocol):
    """Retrieves one dataset's source into a folder and converts it."""

    def describe(self) -> str:
        """Where the data is downloaded from (URLs or the OpenML id)."""
        ...

    def retrieve(self, folder: Path, progress: Progress) -> tuple[Arrays, dict[str, Any]]:
        """The converted arrays and provenance notes (checksums of the source files)."""
        ...


@dataclass(frozen=True)
class RemoteFile:
    """One file of an archive: its local file name and its URL."""

    name: str
    url: str


@dataclass(frozen=True)
class ArchiveOrigin:
    """Files downloaded from an archive (UCI, scikit-feature, a challenge site), then converted
    by ``convert`` from the local file names to paths."""

    files: tuple[RemoteFile, ...]
    convert: Converter

    def describe(self) -> str:
        return ", ".join(f.url for f in self.files)

    def retrieve(self, folder: Path, progress: Progress) -> tuple[Arrays, dict[str, Any]]:
        paths: dict[str, Path] = {}
        for remote in self.files:
            path = folder / remote.name
            if not path.is_file():
                download(remote.url, path, progress)
            paths[remote.name] = path
        notes = {"source_sha256": {name: file_sha256(path) for name, path in paths.items()}}
        return self.convert(paths), notes


@dataclass(frozen=True)
class OpenMLOrigin:
    """An OpenML dataset read with scikit-learn's ``fetch_openml`` (``folder`` is its cache)."""

    data_id: int

    def describe(self) -> str:
        return f"OpenML dataset {self.data_id} (https://www.openml.org/d/{self.data_id})"

    def retrieve(self, folder: Path, progress: Progress) -> tuple[Arrays, dict[str, Any]]:
        from sklearn.datasets import fetch_openml

        task = progress.add_task(f"OpenML {self.data_id}", total=None)
        try:
            bunch = fetch_openml(
                data_id=self.data_id, as_frame=True, data_home=str(folder), parser="liac-arff"
            )
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise DataError(
                f"cannot fetch OpenML dataset {self.data_id} ({exc}); fix: check the internet "
                "connection, or pass --sources FOLDER holding a scikit-learn OpenML cache of it "
                "(fetch_openml(data_home=FOLDER) on a connected machine)"
            ) from exc
        progress.remove_task(task)
        details = bunch.details or {}
        notes = {
            "openml_id": self.data_id,
            "openml_version": details.get("version"),
            "openml_md5": details.get("md5_checksum"),
        }
        return from_openml_frame(bunch.data, bunch.target), notes


def single_file(name: str, convert: Callable[[Path], Arrays], url: str) -> ArchiveOrigin:
    """An origin of one file converted by ``convert(path)``."""
    return ArchiveOrigin((RemoteFile(name, url),), lambda paths: convert(paths[name]))
