"""Where the time of the secure scoring phases goes: CPU seconds per feature of each step.

The protocol functions of the secure Gini (:mod:`vflfs.ml.gini_secure`) and the secure
F-statistic (:mod:`vflfs.ml.fstat_secure`) on one core (workers = 1), synthetic data of the
given shape (N rows, c classes, 10 bins, 16-bit values), default parameters and randomness;
CPU seconds (steady on a shared machine), per feature, extrapolated to ``--total`` features
(a phase's cost is linear in the features, plus the label encryption once and, for the Gini
of two classes with many features, the party's shifted labels once). Sizes: ARCENE
``--rows 200 --classes 2 --total 10000``, COIL20 ``--rows 1440 --classes 20 --total 1024``::

    python -m benchmarks.secure_scoring_steps --rows 200 --classes 2 --features 50 --total 10000

``--dataset coil20`` times ``--features`` columns of a downloaded benchmark instead (pairs of
neighbouring columns spread evenly over all, its first ``--rows`` rows, its classes): real
columns bin unevenly (COIL20's pixels have a large dark bin), which changes the party's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from vflfs.datasets.benchmarks import load_benchmark
from vflfs.datasets.paths import resolve_data_dir
from vflfs.ml import fstat_secure as fs
from vflfs.ml import gini_product as gp
from vflfs.ml import gini_secure as gs
from vflfs.ml import paillier
from vflfs.ml.fstat import FStatParams, class_weights
from vflfs.ml.gini import GiniParams


def timed(seconds: dict, name: str, fn, *args):
    start = time.process_time()
    out = fn(*args)
    seconds[name] = time.process_time() - start
    return out


def gini(key, X, y, c: int, s: dict, total: int) -> None:
    n, bits = len(y), key.public.bits
    params = GiniParams(10, c, n, 52, 40, bits)
    labels = timed(s, "gini labels", gs.encrypt_labels, key, y, params, 1)
    shifted = None  # what a party with ``total`` features does once (two classes, many features)
    if params.product and gp.use_shifts(params, total):
        shifted = timed(s, "gini labels shifted", gp.shift_labels, key.public, params, labels, 1)
    args = (X, labels, key.public, params, 1, shifted)
    masked = timed(s, "gini mask (party)", gs.party_mask, *args)
    squares = timed(s, "gini square (server)", gs.server_square, key, params, masked.packed, 1)
    q = timed(s, "gini combine (party)", gs.party_combine, key.public, masked, squares, 1)
    timed(s, "gini finish (server)", gs.server_finish, key, params, q, X.shape[1], 1)


def fstat(key, X, y, c: int, s: dict, total: int) -> None:
    n, bits = len(y), key.public.bits
    params = FStatParams(c, n, len(set(y.tolist())), 16, 56, 40, bits)
    labels = timed(s, "fstat labels", fs.encrypt_labels, key, y, params, 1)  # packed per row
    packed, kept = timed(s, "fstat mask (party)", fs.party_mask, X, labels, key.public, params, 1)
    weights, scale = class_weights(y, c)
    ret = timed(s, "fstat square (server)", fs.server_square, key, params, weights, packed, 1)
    enc = [key.encrypt(v) for v in [*weights, scale]]
    args = (key.public, params, kept, ret, enc, 1)
    values = timed(s, "fstat combine (party)", fs.party_combine, *args)
    timed(s, "fstat finish (server)", fs.server_finish, key, params, scale, values, X.shape[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--features", type=int, default=50, help="features timed")
    parser.add_argument("--total", type=int, default=10000, help="features extrapolated to")
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--phases", default="gini,fstat", help="comma-separated")
    parser.add_argument("--dataset", default=None, help="a downloaded benchmark, e.g. coil20")
    parser.add_argument("--data-dir", default=None, help="default: $VFLFS_DATA_DIR")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    print(f"load average {np.round(os.getloadavg(), 2).tolist()}")
    if args.dataset:
        data = load_benchmark(args.dataset, resolve_data_dir(args.data_dir))
        starts = np.linspace(0, data.X.shape[1] - 2, -(-args.features // 2)).astype(int)
        cols = np.stack([starts, starts + 1], axis=1).ravel()[: args.features]
        X = np.asarray(data.X[: args.rows][:, cols], dtype=np.float64)
        y, args.classes = np.asarray(data.y[: args.rows]), data.n_classes
    else:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(args.rows, args.features))
        y = rng.integers(0, args.classes, args.rows)
    key = paillier.generate_keys(args.key_bits)
    paillier.djn_table(key.public.n)
    seconds: dict[str, float] = {}
    phases = args.phases.split(",")
    for phase in phases:
        {"gini": gini, "fstat": fstat}[phase](key, X, y, args.classes, seconds, args.total)
    totals = {}
    for phase in phases:
        steps = {k: v for k, v in seconds.items() if k.startswith(phase) and "labels" not in k}
        per_feature = sum(steps.values()) / args.features
        once = sum(v for k, v in seconds.items() if k.startswith(f"{phase} labels"))
        totals[phase] = once + per_feature * args.total
        parts = ", ".join(
            f"{k.split(' ', 1)[1]} {v / args.features * 1e3:.1f}" for k, v in steps.items()
        )
        print(
            f"{phase}: {per_feature * 1e3:.1f} ms per feature ({parts}); labels "
            f"{once:.1f} s; {args.total} features: {totals[phase]:.0f} s CPU"
        )
    if args.out:
        Path(args.out).write_text(
            json.dumps({"seconds": seconds, "totals": totals, "args": vars(args)})
        )


if __name__ == "__main__":
    main()
