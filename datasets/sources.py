"""The benchmarks' sources: one :class:`DatasetSpec` per dataset.

``checksum`` is the SHA256 of the converted arrays (:func:`arrays_sha256`), the same for every
correct conversion of the published data, so a fetch is refused when the source changed, was
truncated, or the conversion went wrong. OpenML is used where its copy has the same rows,
columns and split as the published benchmark (Phishing); MADELON and ARCENE come from UCI for
their official train/validation split (OpenML 1485 and 1458 merge it), ISOLET from the
scikit-feature repository (its 1560-row subset; OpenML 300 has all 7797 rows) and SYLVA from the
challenge archive (its official training rows; OpenML 1036 adds the validation rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vflfs.datasets.converters import (
    Arrays,
    from_challenge_files,
    from_scikit_feature_mat,
    zip_member,
)
from vflfs.datasets.errors import DataError
from vflfs.datasets.origins import ArchiveOrigin, OpenMLOrigin, Origin, RemoteFile, single_file

UCI = "https://archive.ics.uci.edu/static/public"
SCIKIT_FEATURE = "https://jundongl.github.io/scikit-feature/files/datasets"
SCIKIT_FEATURE_PAGE = "https://jundongl.github.io/scikit-feature/datasets.html"
AGNOSTIC = "https://www.agnostic.inf.ethz.ch/datasets/DataAgnos"
UCI_LICENCE = "CC BY 4.0 (UCI Machine Learning Repository)"
NO_LICENCE = "none stated by the scikit-feature repository"


@dataclass(frozen=True)
class DatasetSpec:
    """One benchmark: where it comes from, under which licence, and its converted checksum."""

    name: str
    source: str
    licence: str
    page: str
    split: str
    shape: tuple[int, int]
    checksum: str
    origin: Origin


def _nips2003(name: str, uci_id: int, with_test: bool) -> ArchiveOrigin:
    """UCI's archive of a NIPS 2003 challenge dataset: ``NAME/name_{train,valid,test}.data``,
    ``NAME/name_train.labels`` and ``name_valid.labels`` (published after the challenge)."""
    archive = f"{name}.zip"

    def convert(paths: Mapping[str, Path]) -> Arrays:
        def member(part: str) -> bytes:
            return zip_member(paths[archive], f"{name}_{part}")

        return from_challenge_files(
            member("train.data"),
            member("train.labels"),
            member("valid.data"),
            member("valid.labels"),
            member("test.data") if with_test else None,
        )

    return ArchiveOrigin((RemoteFile(archive, f"{UCI}/{uci_id}/{archive}"),), convert)


def _sylva(paths: Mapping[str, Path]) -> Arrays:
    archive = paths["SYLVA.zip"]
    return from_challenge_files(
        zip_member(archive, "sylva_train.data"), zip_member(archive, "sylva_train.labels")
    )


def _scikit_feature(name: str, file_stem: str, shape: tuple[int, int], checksum: str, what: str):
    return DatasetSpec(
        name=name,
        source=f"scikit-feature repository, Arizona State University ({what})",
        licence=NO_LICENCE,
        page=SCIKIT_FEATURE_PAGE,
        split="none (no official split)",
        shape=shape,
        checksum=checksum,
        origin=single_file(
            f"{file_stem}.mat", from_scikit_feature_mat, f"{SCIKIT_FEATURE}/{file_stem}.mat"
        ),
    )


SPECS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="madelon",
            source="UCI MADELON (NIPS 2003 feature selection challenge, Guyon 2003)",
            licence=UCI_LICENCE,
            page="https://archive.ics.uci.edu/dataset/171/madelon",
            split="train_idx = official train (2000), test_idx = official validation (600); "
            "X_test_unlabeled = official test (1800, labels never released)",
            shape=(2600, 500),
            checksum="c2174234039783328ccf07f37a195256d3bf48e6cb9c9ab808536ecf0cf21f2e",
            origin=_nips2003("madelon", 171, with_test=True),
        ),
        DatasetSpec(
            name="arcene",
            source="UCI ARCENE (NIPS 2003 feature selection challenge)",
            licence=UCI_LICENCE,
            page="https://archive.ics.uci.edu/dataset/167/arcene",
            split="train_idx = official train (100), test_idx = official validation (100)",
            shape=(200, 10000),
            checksum="4b637e4a0a6b6e805bb56d17b939d44bee26ac00afbe02bb74c4d405c5887048",
            origin=_nips2003("arcene", 167, with_test=False),
        ),
        _scikit_feature(
            "basehock",
            "BASEHOCK",
            (1993, 4862),
            "58c34178da013aed33318480e77227371198552a5b71b62eeb382e24de1f28f5",
            "text, from 20 Newsgroups",
        ),
        _scikit_feature(
            "pcmac",
            "PCMAC",
            (1943, 3289),
            "e4de45307376f640436b5bd81275d46157f11d19b28292675119a4961d29e947",
            "text, from 20 Newsgroups",
        ),
        _scikit_feature(
            "relathe",
            "RELATHE",
            (1427, 4322),
            "d6e3a51b14169229369d5d516937310b37212f0229169a08967dc404b66a466a",
            "text, from 20 Newsgroups",
        ),
        _scikit_feature(
            "coil20",
            "COIL20",
            (1440, 1024),
            "57406843e2036c5a42c6da7cb01fccb33f04eb4949524b2d8949f1f18a46ef94",
            "32x32 images, from the Columbia Object Image Library",
        ),
        _scikit_feature(
            "isolet",
            "Isolet",
            (1560, 617),
            "d74305ff393ced27a01cdcdc2b86f0a8f122ca461efd2bc240e95948beb4f529",
            "spoken letters, a subset of UCI ISOLET",
        ),
        DatasetSpec(
            name="phishing",
            source="UCI Phishing Websites (Mohammad, Thabtah, McCluskey 2012) via OpenML 4534",
            licence="CC BY 4.0 (UCI Machine Learning Repository, dataset 327)",
            page="https://www.openml.org/d/4534",
            split="none",
            shape=(11055, 30),
            checksum="3a5a7e1cafe0a855b4e1e99e112b61aa73412856080fffd278dfdbb2e269e4f3",
            origin=OpenMLOrigin(4534),
        ),
        DatasetSpec(
            name="sylva",
            source="SYLVA, Agnostic Learning vs. Prior Knowledge challenge (Guyon et al. 2007), "
            "agnostic format",
            licence="none stated by the challenge site (published for the challenge)",
            page="https://www.agnostic.inf.ethz.ch/datasets.php",
            split="official training rows only (13086 of 14395 labelled)",
            shape=(13086, 216),
            checksum="916520dedf2f561b4f96cb6243480953ce9e29d3c71e4cbbee11026febc14524",
            origin=ArchiveOrigin((RemoteFile("SYLVA.zip", f"{AGNOSTIC}/SYLVA.zip"),), _sylva),
        ),
    )
}


def get_spec(name: str) -> DatasetSpec:
    """The spec of benchmark ``name``, or a DataError listing the names."""
    if name not in SPECS:
        raise DataError(f"no benchmark named {name!r}; fix: use one of {list(SPECS)} or 'all'")
    return SPECS[name]
