"""How fast is the secure Gini phase? vflfs against a naive per-element ``phe`` implementation.

MADELON size (spec section 4's reference point): 2600 rows, 500 features over 2 parties, 2
classes, 10 bins, 2048-bit key; ``--rows 160 --features 10000`` gives a many-feature case
(synthetic; ``--dataset arcene --data-dir DIR`` the real one). Measured in one run:

(a) vflfs   :func:`vflfs.strategies.gini.secure_gini` over the real ClientApp (LocalGrid: every
            message serialised as on the wire), all rows (or the first ``--rows``); raw gmpy2
            arithmetic, labels encrypted once, all bins and classes of a feature in few
            re-randomised plaintexts, Straus products, both cores (fork pools); once with DJN
            randomness (``strategy.gini.randomness: djn``, the default) and once with ``full``
            (``r^n``), under the same key (keygen timed apart).
(b) naive   Algorithm 1 as spec section 4 writes it with ``phe`` objects, one operation per element:
            ``phe`` encryption of the one-hot labels (N x c, once), per feature, bin and class
            [[n_ik]] by additions, [[u]] = [[n]] + r re-randomised, the server decrypts and
            returns [[u^2]], the party forms [[n^2]] = [[u^2]] - 2 r [[u]] + r^2, weighs bins and
            re-randomises [[Q]]; one process. Timed on ``--naive-features`` features and
            ``--naive-labels`` label encryptions and extrapolated linearly (the rest of the
            encrypted labels are made without obfuscation, untimed: sums cost the same).

Both must equal the plaintext fixed-point Gini bit for bit. Run from the repository root::

    . .venv/bin/activate
    python -m benchmarks.secure_gini --out benchmarks/results/secure_gini.json
    python -m benchmarks.secure_gini --rows 160 --features 10000 --naive-features 0
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

import numpy as np
from phe import EncryptedNumber, paillier

from vflfs.client_app.app import app as client_app
from vflfs.client_app.data import party_data
from vflfs.federation import Federation, LocalGrid
from vflfs.ml import paillier as vflfs_paillier
from vflfs.ml.gini import bin_features, fixed_weight, gini_fixed_point, gini_scores
from vflfs.runtime.config import compose_config
from vflfs.server_app.experiment import Experiment
from vflfs.strategies.gini import secure_gini
from vflfs.strategies.vfl import VFL

BINS, F, SPEC_PHE_S, SPEC_PACKED_S, TARGET_S = 10, 52, 270.0, 90.0, 60.0


def setting(args):
    """A set-up federation of 2 parties over the real ClientApp, and each party's view."""
    extra = f" dataset.data_dir={args.data_dir}" if args.data_dir else ""
    if args.features or (args.rows and args.dataset == "synthetic_madelon"):
        if args.dataset != "synthetic_madelon":
            raise SystemExit("--features needs --dataset synthetic_madelon")
        extra += f" dataset.params.n_samples={args.rows or 2600}"
        extra += f" dataset.params.n_features={args.features or 500}"
    cfg = compose_config(f"dataset={args.dataset} split.num_parties=2 device=cpu{extra}")
    experiment = Experiment.from_config(cfg)
    federation = Federation(LocalGrid(client_app, 2), 2)
    federation.connect()
    VFL(cfg).configure(federation, experiment)
    rows = np.arange(min(args.rows or len(experiment.y), len(experiment.y)))  # spec section 4: all
    train = experiment.splits.train
    views = [party_data(experiment.party_spec(m)["data"], train).X[rows] for m in range(2)]
    return federation, experiment, rows, views


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the fork pools), user + system."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_secure(federation, experiment, rows, key, randomness: str):
    """One secure Gini phase; the traffic counted is this phase's alone."""
    before = federation.traffic.summary()["phases"].get("gini", {})
    start, cpu = time.perf_counter(), cpu_seconds()
    cfg = {"key_bits": key.public.bits, "randomness": randomness}
    scores = secure_gini(federation, experiment, cfg, keys=key, rows=rows)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    after = federation.traffic.summary()["phases"]["gini"]
    traffic = {k: v - before.get(k, 0) for k, v in after.items()}
    return scores, {"seconds": seconds, "cpu_seconds": cpu, **traffic}


def naive_feature(pk, sk, labels, bins_of: np.ndarray, n_classes: int) -> float:
    """One feature by spec section 4's steps with ``phe`` objects; returns G (server side)."""
    sizes = np.bincount(bins_of, minlength=BINS)
    total = None
    for i in range(BINS):
        rows = np.flatnonzero(bins_of == i)
        w = fixed_weight(int(sizes[i]), F)
        for k in range(n_classes):
            n_ik = EncryptedNumber(pk, 1, 0)  # [[0]]
            for a in rows:
                n_ik = n_ik + labels[a][k]
            r = int.from_bytes(os.urandom(256), "big") % (pk.max_int // 2)
            u = n_ik + r
            u.obfuscate()  # party -> server, re-randomised
            plain_u = sk.decrypt(u)  # server
            u2 = EncryptedNumber(pk, pk.raw_encrypt(plain_u * plain_u % pk.n), 0)  # -> party
            r2 = EncryptedNumber(pk, pk.raw_encrypt(r * r % pk.n, 1), 0)
            n2 = u2 + u * (-2 * r) + r2  # [[n_ik^2]]
            term = n2 * w
            total = term if total is None else total + term
    total.obfuscate()  # party -> server
    return 1 - sk.decrypt(total) / (len(bins_of) << F)


def run_naive(y, views, n_classes, key_bits, n_features, n_labels) -> tuple[np.ndarray, dict]:
    pk, sk = paillier.generate_paillier_keypair(n_length=key_bits)
    onehot = np.eye(n_classes, dtype=int)[y]
    start = time.perf_counter()
    timed = [[pk.encrypt(int(v)) for v in row] for row in onehot[: n_labels // n_classes]]
    label_s = time.perf_counter() - start
    untimed = [[EncryptedNumber(pk, pk.raw_encrypt(int(v), 1), 0) for v in row] for row in onehot]
    labels = timed + untimed[len(timed) :]
    X = np.concatenate(views, axis=1)
    binned = bin_features(X, BINS)
    start = time.perf_counter()
    G = [naive_feature(pk, sk, labels, binned[:, f], n_classes) for f in range(n_features)]
    feature_s = time.perf_counter() - start
    total = label_s * len(y) / len(timed) + feature_s * X.shape[1] / n_features
    return np.asarray(G), {
        "labels_timed": len(timed) * n_classes,
        "labels_s": label_s,
        "features_timed": n_features,
        "features_s": feature_s,
        "extrapolated_s": total,
    }


def report(secure: dict, naive: dict | None) -> None:
    for name, run in secure.items():
        print(
            f"(a) vflfs secure Gini, {name:4s} randomness: {run['seconds']:7.1f} s wall, "
            f"{run['cpu_seconds']:.1f} s CPU; exact: {run['exact']}, |G - plaintext| <= "
            f"{run['max_abs_error']:.1e}; {run['mb']:.1f} MB, {run['round_trips']} round-trips"
        )
    djn, full = secure.get("djn"), secure.get("full")
    if djn and full:
        print(
            f"    full / djn = {full['seconds'] / djn['seconds']:.2f}x wall, "
            f"{full['cpu_seconds'] / djn['cpu_seconds']:.2f}x CPU (target <= {TARGET_S:.0f} s at "
            f"MADELON size; spec 4: ~{SPEC_PACKED_S:.0f} s packed gmpy2, ~{SPEC_PHE_S:.0f} s phe)"
        )
    if naive and djn:
        print(
            f"(b) naive phe: {naive['extrapolated_s']:7.1f} s, extrapolated from "
            f"{naive['features_timed']} features ({naive['features_s']:.1f} s) and "
            f"{naive['labels_timed']} label encryptions ({naive['labels_s']:.1f} s); "
            f"exact: {naive['exact']}; (b)/(a, djn) = "
            f"{naive['extrapolated_s'] / djn['seconds']:.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="synthetic_madelon", help="or madelon (real file)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--rows", type=int, default=None, help="first rows (synthetic: N)")
    parser.add_argument("--features", type=int, default=None, help="synthetic: all features")
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--naive-features", type=int, default=6, help="0: no naive run")
    parser.add_argument("--naive-labels", type=int, default=200)
    parser.add_argument("--out", default=None, help="JSON file for every number")
    parser.add_argument("--randomness", nargs="+", default=["djn", "full"], choices=["djn", "full"])
    args = parser.parse_args()
    print(f"cpus {os.cpu_count()}, load average {np.round(os.getloadavg(), 2).tolist()}")
    federation, experiment, rows, views = setting(args)
    y, c = experiment.y[rows], experiment.task.n_classes
    d = sum(v.shape[1] for v in views)
    print(f"{args.dataset}: {len(rows)} rows x {d} features, {c} classes, {args.key_bits} bits")
    start = time.perf_counter()
    key = vflfs_paillier.generate_keys(args.key_bits)
    print(f"keygen {time.perf_counter() - start:.1f} s")
    exact = [gini_fixed_point(X, y, BINS, c, F) for X in views]
    plain = np.concatenate([gini_scores(X, y, BINS, c) for X in views])
    secure = {}
    for randomness in args.randomness:
        scores, run = run_secure(federation, experiment, rows, key, randomness)
        run["exact"] = all(np.array_equal(s, e) for s, e in zip(scores, exact, strict=True))
        run["max_abs_error"] = float(np.abs(np.concatenate(scores) - plain).max())
        secure[randomness] = run
    naive = None
    if args.naive_features:
        G, naive = run_naive(y, views, c, args.key_bits, args.naive_features, args.naive_labels)
        naive["exact"] = bool(np.array_equal(G, np.concatenate(exact)[: args.naive_features]))
    report(secure, naive)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        record = {"secure": secure, "naive": naive, "args": vars(args)}
        Path(args.out).write_text(json.dumps(record, indent=2, default=float))


if __name__ == "__main__":
    main()
