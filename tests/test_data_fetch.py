"""``vflfs data fetch``: conversion of each source format, checksum refusal, atomic writes.

No test needs the internet: sources are tiny files in each source's own format, either in a
``--sources`` folder (as if downloaded by hand) or behind ``file://`` URLs (a real download).
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from vflfs.datasets import DataError
from vflfs.datasets.array_digest import arrays_sha256
from vflfs.datasets.benchmarks import BENCHMARKS
from vflfs.datasets.converters import from_scikit_feature_mat
from vflfs.datasets.fetch import FileState, fetch_dataset, file_state
from vflfs.datasets.npz_files import write_npz_atomic
from vflfs.datasets.origins import single_file
from vflfs.datasets.sources import SPECS

from openml_cache import write_openml_cache
from source_files import RNG, expected, madelon_sources, text_table, write_uci_zip


def with_checksum(name: str, arrays: dict[str, np.ndarray], **changes):
    """The real spec of ``name`` expecting ``arrays`` (a tiny stand-in for the real data)."""
    return dataclasses.replace(SPECS[name], checksum=arrays_sha256(arrays), **changes)


def assert_file_holds(path: Path, arrays: dict[str, np.ndarray]) -> dict:
    with np.load(path, allow_pickle=False) as archive:
        for key, value in arrays.items():
            np.testing.assert_array_equal(archive[key], value)
            assert archive[key].dtype == value.dtype, key
        return json.loads(str(archive["meta"]))


# --- the specs -------------------------------------------------------------------------------


def test_every_benchmark_has_a_spec_naming_source_and_licence():
    assert list(SPECS) == list(BENCHMARKS)
    for spec in SPECS.values():
        assert spec.source and spec.licence and spec.page.startswith("https://")
        assert len(spec.checksum) == 64


def test_recorded_checksums_match_the_reference_files(data_dir):
    for spec in SPECS.values():
        assert file_state(spec, data_dir) is FileState.VALID, spec.name


# --- scikit-feature .mat (BASEHOCK, PCMAC, RELATHE, COIL20, ISOLET) --------------------------


@pytest.mark.parametrize("sparse", [False, True])
def test_scikit_feature_mat_is_downloaded_and_converted(tmp_path, sparse):
    X = RNG.integers(0, 5, size=(12, 7)).astype(np.float64)
    Y = np.repeat([1, 2, 3], 4).reshape(-1, 1).astype(np.uint8)
    source = tmp_path / "PCMAC.mat"
    scipy.io.savemat(source, {"X": scipy.sparse.csc_matrix(X) if sparse else X, "Y": Y})
    want = expected(X, Y.ravel())
    origin = single_file("PCMAC.mat", from_scikit_feature_mat, source.as_uri())
    spec = with_checksum("pcmac", want, origin=origin)

    outcome = fetch_dataset(spec, tmp_path / "data")

    assert outcome.fetched and outcome.path == tmp_path / "data" / "pcmac.npz"
    meta = assert_file_holds(outcome.path, want)
    assert meta["licence"] == spec.licence and meta["url"] == source.as_uri()
    assert meta["class_counts"] == {"1": 4, "2": 4, "3": 4}
    assert meta["source_sha256"]["PCMAC.mat"] and meta["arrays_sha256"] == spec.checksum
    assert sorted(p.name for p in outcome.path.parent.iterdir()) == ["pcmac.npz"]


def test_mat_without_scikit_feature_variables_is_refused(tmp_path):
    scipy.io.savemat(tmp_path / "x.mat", {"fea": np.ones((2, 2)), "gnd": np.ones((2, 1))})
    with pytest.raises(DataError, match=r"lacks the variable\(s\) \['X', 'Y'\].*fea"):
        from_scikit_feature_mat(tmp_path / "x.mat")


# --- UCI NIPS 2003 text files (MADELON, ARCENE) ----------------------------------------------


def test_madelon_keeps_the_official_split_and_test_rows(tmp_path):
    want = madelon_sources(tmp_path / "sources")
    spec = with_checksum("madelon", want)

    outcome = fetch_dataset(spec, tmp_path / "data", sources=tmp_path / "sources")

    meta = assert_file_holds(outcome.path, want)
    assert set(meta["source_sha256"]) == {f.name for f in spec.origin.files}
    assert "official validation" in meta["split"]


def test_arcene_leaves_out_the_unlabelled_test_rows(tmp_path):
    train, valid = RNG.integers(0, 999, size=(4, 5)), RNG.integers(0, 999, size=(2, 5))
    train_labels, valid_labels = np.array([1, -1, 1, 1]), np.array([-1, 1])
    sources = tmp_path / "sources"
    tables = {
        "train.data": train,
        "train.labels": train_labels[:, None],
        "valid.data": valid,
        "valid.labels": valid_labels[:, None],
        "test.data": RNG.integers(0, 999, size=(3, 5)),
    }
    write_uci_zip(sources / "arcene.zip", "arcene", tables)
    want = expected(
        np.vstack([train, valid]),
        np.concatenate([train_labels, valid_labels]),
        train_idx=np.arange(4, dtype=np.int64),
        test_idx=np.arange(4, 6, dtype=np.int64),
    )

    outcome = fetch_dataset(with_checksum("arcene", want), tmp_path / "data", sources=sources)

    assert_file_holds(outcome.path, want)
    with np.load(outcome.path) as archive:
        assert "X_test_unlabeled" not in archive.files


# --- OpenML through scikit-learn's fetch_openml (Phishing) ----------------------------------

PHISHING_ARFF = """@relation phishing

@attribute having_IP_Address  {-1,1}
@attribute URL_Length   {1,0,-1}
@attribute SSLfinal_State  {-1,1,0}
@attribute Result  {-1,1}

@data
-1,1,-1,-1
1,1,1,-1
1,0,-1,-1
1,0,1,-1
1,0,1,1
-1,-1,0,1
"""


def test_openml_nominal_columns_become_numbers_in_openml_row_order(tmp_path):
    """fetch_openml itself runs, reading a local OpenML cache of a tiny Phishing-like ARFF."""
    sources = write_openml_cache(tmp_path / "sources", 4534, PHISHING_ARFF, target="Result")
    table = np.array(
        [[int(v) for v in line.split(",")] for line in PHISHING_ARFF.split("@data")[1].split()]
    )
    want = expected(table[:, :3], table[:, 3])
    names = np.array(["having_IP_Address", "URL_Length", "SSLfinal_State"])

    outcome = fetch_dataset(with_checksum("phishing", want), tmp_path / "data", sources=sources)

    meta = assert_file_holds(outcome.path, {**want, "feature_names": names})
    assert meta["openml_id"] == 4534 and meta["class_counts"] == {"-1": 4, "1": 2}


# --- the agnostic-learning challenge archive (SYLVA) -----------------------------------------


def test_sylva_reads_the_training_rows_from_the_challenge_zip(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    rows, labels = RNG.integers(0, 999, size=(5, 4)), np.array([-1, -1, 1, -1, 1])
    with zipfile.ZipFile(sources / "SYLVA.zip", "w") as zf:
        zf.writestr("SYLVA/sylva_train.data", text_table(rows))
        zf.writestr("SYLVA/sylva_train.labels", text_table(labels[:, None]))
        zf.writestr("SYLVA/sylva_valid.data", "1 2 3 4 \n")
    want = expected(rows, labels)

    outcome = fetch_dataset(with_checksum("sylva", want), tmp_path / "data", sources=sources)

    assert_file_holds(outcome.path, want)


# --- checksum, skipping, atomic writes -------------------------------------------------------


def test_checksum_mismatch_is_refused_and_nothing_written(tmp_path):
    want = madelon_sources(tmp_path / "sources")
    bad = dict(want, X=want["X"] + np.float32(1))  # the result of a corrupted download
    spec = with_checksum("madelon", bad)
    with pytest.raises(DataError, match=r"not the recorded .*madelon\.npz was not written"):
        fetch_dataset(spec, tmp_path / "data", sources=tmp_path / "sources")
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def test_present_and_valid_file_is_skipped_and_a_different_one_replaced(tmp_path):
    want = madelon_sources(tmp_path / "sources")
    spec = with_checksum("madelon", want)
    data = tmp_path / "data"
    assert fetch_dataset(spec, data, sources=tmp_path / "sources").fetched
    stamp = (data / "madelon.npz").stat().st_mtime_ns
    assert not fetch_dataset(spec, data, sources=tmp_path / "missing").fetched
    assert (data / "madelon.npz").stat().st_mtime_ns == stamp

    np.savez(data / "madelon.npz", X=np.zeros((2, 2), np.float32), y=np.zeros(2, np.int64))
    assert file_state(spec, data) is FileState.DIFFERENT
    assert fetch_dataset(spec, data, sources=tmp_path / "sources").fetched
    assert file_state(spec, data) is FileState.VALID

    for junk in (b"half a file", b"PK\x03\x04 truncated zip"):
        (data / "madelon.npz").write_bytes(junk)
        assert file_state(spec, data) is FileState.UNREADABLE
    assert fetch_dataset(spec, data, sources=tmp_path / "sources").fetched
    assert file_state(spec, data) is FileState.VALID


class FailsToSave:
    """An array whose conversion fails, as a full disk fails a write half-way."""

    def __array__(self, dtype=None, copy=None):
        raise OSError("No space left on device")


def test_atomic_write_leaves_the_old_file_and_no_partial_file(tmp_path):
    path = tmp_path / "phishing.npz"
    write_npz_atomic(path, {"X": np.ones((3, 2), np.float32), "y": np.zeros(3, np.int64)})
    before = path.read_bytes()
    with pytest.raises(OSError, match="No space left"):
        write_npz_atomic(path, {"X": np.zeros((500, 50), np.float32), "y": FailsToSave()})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["phishing.npz"]


def test_unreachable_url_names_the_url_and_the_offline_route(tmp_path):
    missing = (tmp_path / "nowhere" / "COIL20.mat").as_uri()
    spec = dataclasses.replace(
        SPECS["coil20"], origin=single_file("COIL20.mat", from_scikit_feature_mat, missing)
    )
    with pytest.raises(DataError, match=r"cannot download .*COIL20\.mat.*--sources"):
        fetch_dataset(spec, tmp_path / "data")
    assert not (tmp_path / "data" / "coil20.npz").exists()
