"""How long does sample alignment by private set intersection take, and how many bytes travel?

The protocol's steps (:mod:`vflfs.datasets.alignment`) on synthetic IDs: a labels file of
``--ids`` IDs and ``--parties`` party files of ``--ids`` IDs each, ``--overlap`` of them shared
with the labels file (the rest the party's own). Every step runs in this process, one after the
other, so the parties' steps (which run in parallel on their own machines in a deployment) are
timed one by one. Bytes are the serialised Flower messages of the ``query.align`` round-trip
(``message_bytes`` of the encoded payloads) and the positions list of each party's setup.
CPU seconds are recorded beside wall seconds: on a shared machine they are the steadier figure.

Baseline, measured in the same run: the salted-hash alignment that the PSI replaced (HMAC-SHA256
of every ID by the server and by each party), which the server could reverse by hashing
candidate IDs. Run from the repository root::

    . .venv/bin/activate
    python -m benchmarks.psi --ids 100000 --out benchmarks/results/psi_1e5.json
    python -m benchmarks.psi --ids 1000000 --workers 0   # every CPU
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path

import numpy as np

from vflfs.datasets.alignment import (
    blind,
    check_points,
    intersect,
    new_key,
    party_blinding,
    raise_to_key,
)
from vflfs.federation.payload import encode
from vflfs.federation.traffic import message_bytes
from vflfs.ml.parallel import resolve_workers


def make_ids(n: int, parties: int, overlap: float, seed: int) -> tuple[list, list]:
    """The labels file's IDs and each party's (shuffled): ``overlap`` of n shared."""
    rng = np.random.default_rng(seed)
    labels = [f"cust-{i:09d}" for i in range(n)]
    shared = int(round(overlap * n))
    party_ids = []
    for m in range(parties):
        chosen = rng.choice(n, size=shared, replace=False)
        own = [labels[i] for i in chosen] + [f"p{m}-{i:09d}" for i in range(n - shared)]
        party_ids.append(np.asarray(own)[rng.permutation(n)])
    return labels, party_ids


CPU: dict[str, float] = {}


def timed(fn, *args):
    """``fn(*args)`` and its wall seconds; its CPU seconds (this process and finished forked
    workers) accumulate in ``CPU`` under ``fn``'s name."""
    start, cpu = time.perf_counter(), _cpu()
    result = fn(*args)
    CPU[fn.__name__] = CPU.get(fn.__name__, 0.0) + _cpu() - cpu
    return result, time.perf_counter() - start


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_psi(labels: list, party_ids: list, workers: int) -> dict:
    """The protocol's steps, timed, and the bytes of its messages."""
    key = new_key()
    points, t_blind = timed(blind, key, labels, workers)
    down = message_bytes(encode({"labels": points, "alignment": "x" * 32, "id_column": "id"}))
    parties, up, theirs = [], [], []
    for ids in party_ids:
        blinding, seconds = timed(party_blinding, new_key(), points, ids, workers)
        parties.append(seconds)
        reply = {"labels": blinding.labels, "ids": blinding.own, "n_features": 100}
        up.append(message_bytes(encode(reply)))
        check_points(blinding.own, None, "party", None)
        raised, seconds = timed(raise_to_key, key, blinding.own, workers)
        theirs.append((blinding, raised, seconds))
    (keep, positions), t_match = timed(
        intersect, [b.labels for b, _, _ in theirs], [r for _, r, _ in theirs]
    )
    for (blinding, _, _), found, ids in zip(theirs, positions, party_ids, strict=True):
        assert [ids[r] for r in blinding.order[found][:100]] == [labels[k] for k in keep[:100]]
    setup = [len(json.dumps(p.tolist())) for p in positions]
    server = t_blind + sum(s for _, _, s in theirs) + t_match
    return {
        "aligned": int(len(keep)),
        "seconds": {
            "server_blind_labels": round(t_blind, 2),
            "party_step": [round(s, 2) for s in parties],
            "server_raise_party_ids": [round(s, 2) for _, _, s in theirs],
            "server_match": round(t_match, 2),
            "server_total": round(server, 2),
            "sequential_total": round(server + sum(parties), 2),
            "deployment_estimate": round(server + max(parties), 2),
        },
        "cpu_seconds": {name: round(v, 2) for name, v in CPU.items()},
        "bytes": {
            "down_per_party": down,
            "up_per_party": up,
            "setup_positions_per_party": setup,
            "total": down * len(party_ids) + sum(up) + sum(setup),
        },
    }


def run_salted_hashes(labels: list, party_ids: list) -> dict:
    """The replaced method: HMAC-SHA256 of every ID, server and parties."""
    salt = secrets.token_bytes(32)

    def hashes(ids):
        return [hmac.new(salt, str(v).encode(), hashlib.sha256).digest() for v in ids]

    start, cpu = time.perf_counter(), _cpu()
    mine = {h: i for i, h in enumerate(hashes(labels))}
    sets = [set(hashes(ids)) for ids in party_ids]
    kept = [i for h, i in mine.items() if all(h in s for s in sets)]
    return {
        "aligned": len(kept),
        "seconds": round(time.perf_counter() - start, 2),
        "cpu_seconds": round(_cpu() - cpu, 2),
        "bytes_up": 32 * sum(len(ids) for ids in party_ids),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ids", type=int, default=100_000, help="IDs per file")
    parser.add_argument("--parties", type=int, default=2)
    parser.add_argument("--overlap", type=float, default=0.8)
    parser.add_argument("--workers", type=int, default=1, help="0: every CPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    workers = resolve_workers(args.workers)
    labels, party_ids = make_ids(args.ids, args.parties, args.overlap, args.seed)
    result = {
        "ids_per_file": args.ids,
        "parties": args.parties,
        "overlap": args.overlap,
        "workers": workers,
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg()[0],
        "psi": run_psi(labels, party_ids, workers),
        "salted_hash_baseline": run_salted_hashes(labels, party_ids),
    }
    result["load_average_end"] = os.getloadavg()[0]
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return result


if __name__ == "__main__":
    main()
