"""How fast is the secure interactive layer? One training step (protocol steps 1-7), new vs old.

One party and the server, a batch of ``B`` embeddings ``g`` (B x e), interactive weights
(width x e), 2048-bit keys by default; the numbers are random, the work is the protocol's.
Measured in one run:

(a) new   :mod:`vflfs.ml.secure_layer` as the strategies call it: G packed along rows and along
          columns (21 fixed-point values per plaintext at 2048 bits), Straus products, DJN
          randomness (``h_s^alpha`` from a fixed-base table), the default workers
          (:func:`~vflfs.ml.secure_layer.default_workers`), obfuscators drawn from the pools
          that each side fills while it waits for the other (here: filled before each timed
          step, their cost reported apart as ``idle``); also with the obfuscators made on the
          spot, with one worker, and with full ``r^n`` randomness (``secure.randomness=full``).
          Each side holds the other's public key only (its obfuscators from the public table;
          the key owner's by CRT). Operation counts: :mod:`benchmarks.secure_layer_counts`.
(b) old   the previous implementation, re-implemented here: one ciphertext per value, one
          ``combine`` (a powmod per coefficient) per output, a full ``r^n`` powmod per
          re-randomisation, CRT obfuscators and decryption for the key owner, one process.

Both must compute z = g W^T and dL/dg = delta W (to fixed-point precision). Times are CPU
seconds of the process and its forked workers (steady on a shared machine), and for the step
also wall seconds (the decryptions run on threads, so on free cores the wall time is below
the CPU time). Per epoch:
``ceil(N_train / B)`` steps of ``P x (2 + 5 + 7) + (1 + 3 + 6)`` (the server works for every
party in turn, the parties work at the same time on their own machines), plus one forward of the
evaluation rows (steps 1-4). Run from the repository root::

    . .venv/bin/activate
    python -m benchmarks.secure_layer --out benchmarks/results/secure_layer.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import time
from pathlib import Path

import numpy as np

from vflfs.ml import paillier
from vflfs.ml import secure_layer as sl
from vflfs.ml.parallel import kept_workers

SERVER, PARTY = ("2", "5", "7"), ("1", "3", "6")


def cpu_seconds() -> float:
    """CPU time of this process, its reaped children (the fork pools) and its kept workers
    (:func:`~vflfs.ml.parallel.standing_map`; read from ``/proc`` where there is one), user +
    system."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + kept_cpu_seconds()


def kept_cpu_seconds() -> float:
    """User + system CPU seconds of the kept workers alive now (0 without ``/proc``)."""
    total = 0.0
    for pid in kept_workers():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class Clock:
    """CPU seconds (``seconds``: steady on a shared machine) and wall seconds (``wall``) per
    protocol step, the least over repeats; before each, the obfuscator pools are filled (CPU
    seconds in ``idle``: the work a side does while it waits for the other)."""

    def __init__(self, pools=()) -> None:
        self.seconds: dict[str, float] = {}
        self.wall: dict[str, float] = {}
        self.idle, self.pools = 0.0, list(pools)

    def __call__(self, step: str, fn, *args):
        cpu = cpu_seconds()
        for pool in self.pools:
            pool.fill()
        self.idle += cpu_seconds() - cpu
        start, cpu = time.perf_counter(), cpu_seconds()
        out = fn(*args)
        cpu, wall = cpu_seconds() - cpu, time.perf_counter() - start
        self.seconds[step] = min(self.seconds.get(step, cpu), cpu)  # the least of the repeats
        self.wall[step] = min(self.wall.get(step, wall), wall)
        return out


def manual_pools(ciphers, precompute: bool) -> list:
    """Pools without the background thread (filled by :class:`Clock`), or none at all."""
    out = []
    for cipher in ciphers:
        cipher.pool.close()  # the constructor's pool would fill in the background meanwhile
        size = sl.POOL_SIZE if precompute else 0
        cipher.pool = paillier.ObfuscatorPool(cipher.obfuscator, size, background=False)
        out.append(cipher.pool)
    return out


def problem(batch: int, e: int, width: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "g": rng.normal(size=(batch, e)),
        "w": rng.normal(size=(width, e)) * 0.3,
        "eps": rng.normal(size=(width, e)) * 0.3,
        "delta": rng.normal(size=(batch, width)) * 0.05,
    }


def check(x: dict, z: np.ndarray, grad: np.ndarray) -> dict[str, float]:
    return {
        "z_error": float(np.abs(z - x["g"] @ x["w"].T).max()),
        "grad_error": float(np.abs(grad - x["delta"] @ x["w"]).max()),
    }


def run_new(x: dict, args, workers: int | None, randomness: str, precompute: bool) -> dict:
    """Steps 1-7 through :mod:`vflfs.ml.secure_layer` (keys made and tables built untimed),
    ``args.repeat`` times."""
    party, server, party_pub, server_pub = key_pairs(args.key_bits, workers, randomness)
    clock = Clock(manual_pools([party, server, party_pub, server_pub], precompute))
    for _ in range(args.repeat):
        out = one_step(x, party, server, clock, party_pub, server_pub)
    return {"idle_s": clock.idle / args.repeat, "workers": party.workers, **out}


def key_pairs(bits: int, workers: int | None, randomness: str) -> tuple:
    """The party's and the server's ciphers (key owners), then each one's public side as the
    other holds it (its obfuscators from the public table, not by CRT); tables built."""
    owners = [sl.make_cipher("paillier", bits, workers, randomness) for _ in range(2)]
    public = [sl.public_cipher("paillier", c.public_bytes(), workers, randomness) for c in owners]
    if randomness == "djn":
        for owner in owners:
            paillier.djn_table(owner.public.n)
            paillier.djn_crt_tables(owner.private.p, owner.private.q)
    return (*owners, *public)


def one_step(x: dict, party, server, clock: Clock, party_pub=None, server_pub=None) -> dict:
    """Steps 1-7; the server works with ``party_pub`` and the party with ``server_pub`` (default:
    the owners' ciphers)."""
    party_pub, server_pub = party_pub or party, server_pub or server
    g, w_tilde, eps, delta = x["g"], x["w"] + x["eps"], x["eps"], x["delta"]
    rows, rng = len(g), np.random.default_rng(1)
    wire, wire_t = clock("1", sl.party_encrypt, party, g)
    y, e_s = clock(
        "2", lambda: sl.server_forward(party_pub, party_pub.from_wire(wire), w_tilde, rows)
    )
    z_wire = clock("3", sl.party_forward, party, y, g, eps)
    z = sl.server_z(z_wire, e_s)
    gradw, enc_d, big_r, dw = clock(
        "5",
        lambda: sl.server_backward(party_pub, server, party_pub.from_wire(wire_t), delta, w_tilde),
    )
    m, de, r, _ = clock(
        "6", sl.party_backward, party, server_pub, gradw, enc_d, eps, 0.0, rng, rows
    )
    sl.server_weight_gradient(m, big_r)
    grad_wire = clock("7", sl.server_embedding_gradient, server, de, dw)
    grad = sl.party_gradient(grad_wire, r)
    up = sum(a.nbytes for a in (wire, wire_t, z_wire, m, de))
    down = sum(a.nbytes for a in (y, gradw, enc_d, grad_wire))
    return {
        "steps": dict(clock.seconds),
        "wall": dict(clock.wall),
        "mb_up": up / 1e6,
        "mb_down": down / 1e6,
        **check(x, z, grad),
    }


def run_old(x: dict, bits: int, batch: int) -> dict:
    """The previous implementation: one ciphertext per value, ``combine`` per output, ``r^n``."""
    party, server = paillier.generate_keys(bits), paillier.generate_keys(bits)
    pk, sk = party.public, server.public
    big_g, w_t, eps, d = (sl.encode(x[k]) for k in ("g", "w", "eps", "delta"))
    w_t = sl.encode(x["w"] + x["eps"])
    rows, e = big_g.shape
    width, clock = w_t.shape[0], Clock()

    def masked(key, cts, coeffs, plain):  # Enc(sum coeffs m + plain), re-randomised (r^n)
        return key.rerandomize(key.combine(cts, [int(v) for v in coeffs], int(plain)))

    cts = clock("1", lambda: [[party.encrypt(int(v)) for v in row] for row in big_g])
    e_s = sl.mask((rows, width))
    y = clock("2", lambda: [[masked(pk, cts[i], w_t[k], e_s[i, k]) for k in range(width)]
                            for i in range(rows)])  # fmt: skip
    plain = clock("3", lambda: [[party.decrypt_signed(c) for c in row] for row in y])
    z = sl.decode2(np.array(plain, dtype=object) - big_g.dot(eps.T) - e_s)
    big_r = sl.mask((width, e))

    def step5():
        cols = [[cts[i][j] for i in range(rows)] for j in range(e)]
        gw = [[masked(pk, cols[j], d[:, k], big_r[k, j]) for j in range(e)] for k in range(width)]
        return gw, [[server.encrypt(int(v)) for v in row] for row in d]

    gw, enc_d = clock("5", step5)
    r = sl.mask((rows, e))

    def step6():
        [[party.decrypt_signed(c) for c in row] for row in gw]
        return [[masked(sk, enc_d[i], eps[:, j], r[i, j]) for j in range(e)] for i in range(rows)]

    de = clock("6", step6)
    plain = clock("7", lambda: [[server.decrypt_signed(c) for c in row] for row in de])
    grad = sl.decode2(d.dot(w_t) - np.array(plain, dtype=object) + r)
    nbytes, wire = pk.nbytes, sl.WIRE  # one ciphertext per value, for a full batch
    up = 2 * batch * e * nbytes + (batch * width + width * e) * wire
    down = (2 * batch * width + width * e) * nbytes + batch * e * wire
    return {"steps": clock.seconds, "mb_up": up / 1e6, "mb_down": down / 1e6, **check(x, z, grad)}


def per_epoch(steps: dict, eval_s: float, args, wall: dict | None = None) -> dict:
    server = sum(steps[s] for s in SERVER)
    party = sum(steps[s] for s in PARTY)
    step = args.parties * server + party
    count = math.ceil(args.n_train / args.batch)
    out = {}
    if wall:  # the same sum of the steps' least wall seconds (threads: below the CPU seconds)
        out["step_wall_s"] = per_epoch(wall, 0.0, args)["step_s"]
    return {
        **out,
        "step_s": step,
        "server_s": server,
        "party_s": party,
        "steps": count,
        "eval_s": eval_s,
        "epoch_s": count * step + eval_s,
    }


def eval_forward(x_eval: dict, args, workers: int | None, randomness: str) -> float:
    """Steps 1-4 of the evaluation rows for ``P`` parties (server per party, parties at once;
    obfuscators made on the spot: more than a pool holds)."""
    party, _, party_pub, _ = key_pairs(args.key_bits, workers, randomness)
    g, w_tilde, eps = x_eval["g"], x_eval["w"] + x_eval["eps"], x_eval["eps"]
    clock = Clock(manual_pools([party, party_pub], False))
    (wire,) = clock("1", sl.party_encrypt, party, g, False)
    y, _ = clock(
        "2", lambda: sl.server_forward(party_pub, party_pub.from_wire(wire), w_tilde, len(g))
    )
    clock("3", sl.party_forward, party, y, g, eps)
    s = clock.seconds
    return args.parties * s["2"] + s["1"] + s["3"]


def old_path(args) -> dict:
    """The previous implementation on ``--old-batch`` rows, scaled to the batch."""
    old_batch = args.old_batch or args.batch
    old = run_old(problem(old_batch, args.e, args.width), args.key_bits, args.batch)
    scale = args.batch / old_batch  # every cost of the old path is linear in the batch
    old["steps"] = {k: v * scale for k, v in old["steps"].items()}
    s = old["steps"]  # the old evaluation forward: linear in the rows, extrapolated
    old_eval = (args.parties * s["2"] + s["1"] + s["3"]) / args.batch * args.eval_rows
    old["epoch"] = per_epoch(old["steps"], old_eval * bool(args.eval), args)
    return old


def show(name: str, result: dict) -> None:
    steps = "  ".join(f"{k}: {v:6.2f}" for k, v in sorted(result["steps"].items()))
    epoch = result["epoch"]
    idle = f" idle {result['idle_s']:.2f} s" if "idle_s" in result else ""
    wall = f", {epoch['step_wall_s']:.2f} s wall" if "step_wall_s" in epoch else ""
    print(
        f"{name:<30} {steps}  | step {epoch['step_s']:7.2f} s{wall} "
        f"(server {epoch['server_s']:.2f} per party, party {epoch['party_s']:.2f})  "
        f"epoch {epoch['epoch_s'] / 60:7.1f} min"
        f" (eval {epoch['eval_s']:.1f} s)  |z err| {result['z_error']:.1e}"
        f"  |dg err| {result['grad_error']:.1e}{idle}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--e", type=int, default=16, help="embedding width of the party")
    parser.add_argument("--width", type=int, default=32, help="interactive layer's output")
    parser.add_argument("--parties", type=int, default=2)
    parser.add_argument("--n-train", type=int, default=2600)
    parser.add_argument("--eval-rows", type=int, default=1000, help="validation + test rows")
    parser.add_argument("--workers", type=int, default=None, help="default: default_workers()")
    parser.add_argument("--eval", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--repeat", type=int, default=3, help="steps per variant (least kept)")
    parser.add_argument("--old", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--old-batch", type=int, default=None, help="old path on fewer rows")
    parser.add_argument("--out", default=None, help="JSON file for every number")
    args = parser.parse_args()
    print(
        f"cpus {os.cpu_count()}, default workers {sl.default_workers()}, "
        f"load average {np.round(os.getloadavg(), 2).tolist()}"
    )
    x = problem(args.batch, args.e, args.width)
    x_eval = problem(args.eval_rows, args.e, args.width, seed=2)
    results = {}
    for name, workers, randomness, precompute in (
        ("new", args.workers, "djn", True),
        ("new, obfuscators on the spot", args.workers, "djn", False),
        ("new, 1 worker", 1, "djn", True),
        ("new, r^n randomness", args.workers, "full", True),
    ):
        results[name] = run_new(x, args, workers, randomness, precompute)
        eval_s = eval_forward(x_eval, args, workers, randomness) if args.eval else 0.0
        results[name]["epoch"] = per_epoch(
            results[name]["steps"], eval_s, args, results[name]["wall"]
        )
    if args.old:
        results["old"] = old_path(args)
    steps = math.ceil(args.n_train / args.batch)
    print(
        f"{args.key_bits}-bit keys, B = {args.batch}, e = {args.e}, width = {args.width}, "
        f"{args.parties} parties, N_train = {args.n_train}, {args.eval_rows} evaluation rows "
        f"(per epoch: {steps} steps + the evaluation forward); CPU seconds"
    )
    for name, result in results.items():
        show(name, result)
    ratio = None
    if args.old:
        ratio = results["old"]["epoch"]["step_s"] / results["new"]["epoch"]["step_s"]
        print(f"old / new per step: {ratio:.0f}x")
    for name in [n for n in ("new", "old") if n in results]:
        mb = results[name]
        print(f"{name}: {mb['mb_up']:.3f} MB up, {mb['mb_down']:.3f} MB down per step and party")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        record = {"results": results, "ratio": ratio, "args": vars(args)}
        Path(args.out).write_text(json.dumps(record, indent=2, default=float))


if __name__ == "__main__":
    main()
