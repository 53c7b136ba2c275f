"""A training step's round-trip in deployment, against Flower's floor: the bare echo.

One loopback deployment (a SuperLink and two SuperNodes, with TLS and SuperNode authentication
as ``tests/deployment_stack.py`` sets them up, or ``--insecure``), each SuperNode reading its own
party file of synthetic MADELON (2600 x 500, ``split=even``: 250 columns per party). Two runs on
it, one after the other, each timing every round-trip at the server (first request pushed to
last reply pulled):

echo   Flower's bare echo ClientApp (:mod:`benchmarks.roundtrip_echo`, Flower only), sent a
       128 x 16 float32 array per party (a batch's embedding gradient) that comes straight back;
vflfs  the vflfs app with ``training.local_steps=1`` (K = 1), ``model=mlp``, batch 128: one
       ``train.step`` round-trip per batch (gradients of the last batch down, the next batch's
       embeddings up), over the run's own Federation.

Both runs use the deployment's server poll interval (``deployment.poll_interval``). The result
is the median seconds per round-trip of each and their ratio (target: vflfs <= 1.5 x echo).
Run from the repository root, with vflfs installed::

    python -m benchmarks.roundtrip --round-trips 10 --out benchmarks/results/roundtrip.json

Each run's ServerApp is this module's ``server``; its FAB is a ``pyproject.toml`` written into
the work folder naming the components. Expect a few minutes: every deployment round-trip starts
a fresh ClientApp process per party.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vflfs.federation import DOWN, Federation
from vflfs.protocol import INFO, STEP, Body, Operation

from . import roundtrip_echo

REPO = Path(__file__).resolve().parents[1]
PARTIES = 2
BATCH = 128
EMBEDDING = 16
STEPS_PER_EPOCH = 13  # 1664 training rows of synthetic MADELON in batches of 128
TARGET = 1.5
DATA = f"dataset=synthetic_madelon split=even split.num_parties={PARTIES}"
TRAINING = (
    f"model=mlp training.batch_size={BATCH} training.local_steps=1 training.patience=null "
    "device=cpu"
)
RESULT = "roundtrips.json"


# -- the ServerApp of both runs -------------------------------------------------------------
@dataclass(frozen=True)
class Echo(Body):
    """The echo's request and reply: one embedding-sized array."""

    embedding: np.ndarray


ECHO = Operation(STEP.name, Echo, Echo)
server = ServerApp()


class RoundTripTimer:
    """A Federation observer: seconds from a step's first request to its last reply."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._open = 0
        self._start = 0.0

    def __call__(self, direction: str, party: int, operation: str, content) -> None:
        if operation != STEP.name:
            return
        now = time.perf_counter()
        if direction == DOWN:
            self._start = now if self._open == 0 else self._start
            self._open += 1
            return
        self._open -= 1
        if self._open == 0:
            self.seconds.append(now - self._start)


@server.main()
def serve(grid: Grid, context: Context) -> None:
    from vflfs.runtime.config import compose_config
    from vflfs.server_app.run import poll_interval, run_experiment

    config = context.run_config
    out = Path(str(config["output-dir"]))
    cfg = compose_config(str(config["hydra-overrides"]))
    timer = RoundTripTimer()
    if str(config["mode"]) == "echo":
        assert (INFO.action, STEP.action) == (
            roundtrip_echo.INFO_ACTION,
            roundtrip_echo.STEP_ACTION,
        )
        federation = Federation(grid, PARTIES, poll_interval=poll_interval(grid, cfg))
        federation.observers.append(timer)
        federation.connect()
        payload = Echo(np.random.default_rng(0).random((BATCH, EMBEDDING), dtype=np.float32))
        for _ in range(int(config["round-trips"])):
            replies = federation.send(ECHO, dict.fromkeys(range(PARTIES), payload))
            assert all(np.array_equal(r.embedding, payload.embedding) for r in replies.values())
    else:
        run_experiment(grid, cfg, out, observers=[timer])
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULT).write_text(json.dumps({"seconds": timer.seconds}))


# -- the deployment and the two runs ------------------------------------------------------------
def app_folder(work: Path, mode: str) -> Path:
    """A FAB folder: a ``pyproject.toml`` naming this module's server and the mode's ClientApp."""
    client = "vflfs.benchmarks.roundtrip_echo:app" if mode == "echo" else "vflfs.client_app.app:app"
    folder = work / f"app_{mode}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "vflfs-roundtrip-{mode}"\nversion = "0.1.0"\ndependencies = []\n\n'
        '[tool.flwr.app]\npublisher = "vflfs"\n\n'
        '[tool.flwr.app.components]\nserverapp = "vflfs.benchmarks.roundtrip:server"\n'
        f'clientapp = "{client}"\n\n'
        '[tool.flwr.app.config]\nmode = ""\noutput-dir = ""\nhydra-overrides = ""\n'
        "round-trips = 10\n"
    )
    return folder


def measure(stack, work: Path, mode: str, overrides: str, round_trips: int) -> dict:
    """One ``flwr run`` of ``mode`` on ``stack``; its per-round-trip seconds."""
    out = work / f"out_{mode}"
    start = time.perf_counter()
    run = stack.run_app(
        app_folder(work, mode),
        run_config={
            "mode": mode,
            "output-dir": str(out),
            "hydra-overrides": overrides,
            "round-trips": round_trips,
        },
        timeout=3600,
    )
    status = stack.run_status(run.run_id)["status"] if run.run_id else "not started"
    if status != "finished:completed" or not (out / RESULT).exists():
        raise RuntimeError(f"{mode} run ended {status}:\n{run.output()}")
    seconds = json.loads((out / RESULT).read_text())["seconds"]
    return {
        "round_trips": len(seconds),
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "seconds": seconds,
        "run_wall_s": time.perf_counter() - start,
    }


def run(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from flower_procs import FlowerStack, make_tls, run_process, tool

    work = Path(args.work or tempfile.mkdtemp(prefix="vflfs-roundtrip-")).absolute()
    data = work / "data"
    split = run_process([tool("vflfs-split"), str(data), "--format", "csv", *DATA.split()])
    if split.returncode != 0:
        raise RuntimeError(split.stdout + split.stderr)
    files = json.loads((data / "split.json").read_text())
    tls = None if args.insecure else make_tls(work / "tls", PARTIES)
    env = {**os.environ, "VFLFS_CACHE_DIR": str(work / "cache")}
    stack = FlowerStack(work / "stack", env=env, tls=tls)
    epochs = math.ceil(args.round_trips / STEPS_PER_EPOCH)
    vflfs = " ".join([*files["server_overrides"], TRAINING, f"training.epochs={epochs}"])
    try:
        stack.start_superlink()
        stack.start_supernodes(
            PARTIES,
            node_configs=[{"data-path": p["path"], "id-column": "id"} for p in files["parties"]],
        )
        echo = measure(stack, work, "echo", DATA, args.round_trips)
        step = measure(stack, work, "vflfs", vflfs, args.round_trips)
    finally:
        stack.stop()
    return {
        "setup": f"synthetic_madelon, {PARTIES} parties x 250 columns, batch {BATCH}, K = 1, "
        f"{'insecure' if args.insecure else 'TLS'} loopback, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "echo": echo,
        "vflfs_k1": step,
        "ratio": step["median_s"] / echo["median_s"],
        "target": TARGET,
        "work": str(work),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--round-trips", type=int, default=10, help="echo round-trips timed")
    parser.add_argument("--insecure", action="store_true", help="no TLS (default: TLS)")
    parser.add_argument("--work", default="", help="work folder (default: a new temp folder)")
    parser.add_argument("--out", default="benchmarks/results/roundtrip.json", help="JSON file")
    args = parser.parse_args(argv)
    results = run(args)
    echo, step = results["echo"], results["vflfs_k1"]
    print(results["setup"])
    for name, r in (("Flower echo", echo), ("vflfs K=1 step", step)):
        print(
            f"{name:15s} median {r['median_s']:6.2f} s per round-trip "
            f"(min {r['min_s']:.2f}, max {r['max_s']:.2f}, n = {r['round_trips']})"
        )
    verdict = "PASS" if results["ratio"] <= TARGET else "MISS"
    print(f"ratio vflfs / echo = {results['ratio']:.2f} (target <= {TARGET}): {verdict}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
