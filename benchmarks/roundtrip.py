"""A training step's round-trip in deployment, against Flower's floor: the bare echo.

One loopback deployment (a SuperLink and two SuperNodes, with TLS and SuperNode authentication
as ``tests/deployment_stack.py`` sets them up, or ``--insecure``), each SuperNode reading its own
party file of synthetic MADELON (2600 x 500, ``split=even``: 250 columns per party), and one
run on it: the vflfs app with ``training.local_steps=1`` (K = 1), ``model=mlp``, batch 128, one
``train.step`` round-trip per batch (gradients of the last batch down, the next batch's
embeddings up). Right after each step round-trip the server sends every party Flower's bare
echo (``query.echo``, answered by :mod:`benchmarks.roundtrip_echo` with Flower only): a 128 x 16
float32 array (a batch's embedding gradient) that comes straight back. Step and echo alternate,
so both meet the same load, which on a shared machine changes within minutes.

Each round-trip is timed at the server (first request pushed to last reply pulled), both with
the deployment's server poll interval (``deployment.poll_interval``). Every ClientApp process
also notes when it started, loaded the app and served the message
(:mod:`benchmarks.roundtrip_echo`), so each round-trip splits into Flower's wait before the
process, the process's start, the app's handling and the reply's way back. The result is the
median seconds per round-trip of each and their ratio (target: vflfs <= 1.5 x echo). Run from
the repository root, with vflfs installed::

    python -m benchmarks.roundtrip --round-trips 13 --out benchmarks/results/roundtrip.json

The ServerApp is this module's ``server``; its FAB is a ``pyproject.toml`` written into the
work folder naming the components. Expect several minutes: every deployment round-trip starts
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
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from vflfs.federation import DOWN
from vflfs.protocol import STEP

from . import roundtrip_echo
from .roundtrip_echo import ECHO, now

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
TRACE = "trace.jsonl"


# -- the ServerApp ----------------------------------------------------------------------------
server = ServerApp()


class Alternate:
    """A Federation observer: after each step round-trip, one echo round-trip to every party;
    notes each round-trip's push and its replies on :func:`now`'s clock.

    The echo goes out as soon as the step's last reply is in, as in a run of echoes alone; the
    next step goes out after the server's work on that reply, as in a run of steps alone.
    """

    def __init__(self, grid: Grid, poll: float) -> None:
        self.grid, self.poll = grid, poll
        self.payload = np.random.default_rng(0).random((BATCH, EMBEDDING), dtype=np.float32)
        self.waves: list[dict] = []
        self._open = 0

    def __call__(self, direction: str, party: int, operation: str, content) -> None:
        if operation != STEP.name:
            return
        if direction == DOWN:
            if self._open == 0:
                self.waves.append({"kind": "step", "push": now(), "replies": {}})
            self._open += 1
            return
        self._open -= 1
        self.waves[-1]["replies"][party] = now()
        if self._open == 0:
            self.echo()

    def echo(self) -> None:
        nodes = sorted(self.grid.get_node_ids())
        messages = [
            Message(
                RecordDict({"echo": ArrayRecord({"x": Array(self.payload)})}),
                dst_node_id=node,
                message_type=ECHO,
            )
            for node in nodes
        ]
        wave = {"kind": "echo", "push": now(), "replies": {}}
        waiting = dict(zip(self.grid.push_messages(messages), nodes, strict=True))
        while waiting:
            for reply in self.grid.pull_messages(list(waiting)):
                node = waiting.pop(reply.metadata.reply_to_message_id)
                wave["replies"][nodes.index(node)] = now()
                if reply.has_error():
                    raise RuntimeError(f"the echo failed on node {node}: {reply.error}")
                back = reply.content["echo"]["x"].numpy()
                assert np.array_equal(back, self.payload)
            if waiting:
                time.sleep(self.poll)
        self.waves.append(wave)


@server.main()
def serve(grid: Grid, context: Context) -> None:
    from vflfs.runtime.config import compose_config
    from vflfs.runtime.settings import RunSettings
    from vflfs.server_app.run import poll_interval, run_experiment

    config = context.run_config
    out = Path(str(config["output-dir"]))
    cfg = compose_config(str(config["hydra-overrides"]))
    alternate = Alternate(grid, poll_interval(grid, RunSettings.from_cfg(cfg)))
    run_experiment(grid, cfg, out, observers=[alternate])
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULT).write_text(json.dumps({"waves": alternate.waves}))


# -- where each round-trip's time goes -----------------------------------------------------------
SEGMENTS = {
    "wait": "push to the process's start (SuperNode and SuperExec polling, spawn)",
    "start": "process start to the app loaded (Python, Flower's runtime, FAB, context)",
    "serve": "app loaded to the reply made (the vflfs app's imports and handler; echo: Flower)",
    "back": "reply made to its pull at the server (context and reply pushed, polling)",
}


def breakdown(waves: list[dict], trace: list[dict]) -> list[dict]:
    """Each round-trip with its seconds and, from the party whose reply came last, where they
    went (:data:`SEGMENTS`); a process belongs to the round-trip its app call falls in."""
    rows = []
    for wave in waves:
        replies = {int(party): at for party, at in wave["replies"].items()}  # JSON: str keys
        last = max(replies, key=replies.get)
        end = replies[last]
        echo = wave["kind"] == "echo"
        mine = [
            t
            for t in trace
            if t["partition"] == last
            and wave["push"] <= t["enter"] <= end
            and (t["type"] == ECHO) == echo
        ]
        row = {"kind": wave["kind"], "seconds": end - wave["push"]}
        if len(mine) == 1:
            t = mine[0]
            row |= {
                "wait": t["start"] - wave["push"],
                "start": t["loaded"] - t["start"],
                "serve": t["exit"] - t["loaded"],
                "back": end - t["exit"],
                "vflfs_import": (t["vflfs"] - t["enter"]) if t["vflfs"] else 0.0,
                "cpu_s": t["cpu_s"],
            }
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """Median seconds per round-trip, the range, and the median of each segment."""
    seconds = [r["seconds"] for r in rows]
    half = len(rows) // 2
    out = {
        "round_trips": len(rows),
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "first_half_median_s": statistics.median(seconds[: max(half, 1)]),
        "second_half_median_s": statistics.median(seconds[half:]),
    }
    for key in (*SEGMENTS, "vflfs_import", "cpu_s"):
        values = [r[key] for r in rows if key in r]
        if values:
            out[f"median_{key}"] = statistics.median(values)
    return out


# -- the deployment and the run -------------------------------------------------------------------
def app_folder(work: Path) -> Path:
    """A FAB folder: a ``pyproject.toml`` naming this module's server and the echo-beside-vflfs
    ClientApp."""
    folder = work / "app"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "vflfs-roundtrip"\nversion = "0.1.0"\ndependencies = []\n\n'
        '[tool.flwr.app]\npublisher = "vflfs"\n\n'
        '[tool.flwr.app.components]\nserverapp = "vflfs.benchmarks.roundtrip:server"\n'
        'clientapp = "vflfs.benchmarks.roundtrip_echo:app"\n\n'
        '[tool.flwr.app.config]\noutput-dir = ""\nhydra-overrides = ""\n'
    )
    return folder


def measure(stack, work: Path, overrides: str) -> tuple[list[dict], float]:
    """One ``flwr run`` on ``stack``; its round-trips (:func:`breakdown`) and wall seconds."""
    out = work / "out"
    start = time.perf_counter()
    run = stack.run_app(
        app_folder(work),
        run_config={"output-dir": str(out), "hydra-overrides": overrides},
        timeout=3600,
    )
    status = stack.run_status(run.run_id)["status"] if run.run_id else "not started"
    if status != "finished:completed" or not (out / RESULT).exists():
        raise RuntimeError(f"the run ended {status}:\n{run.output()}")
    waves = json.loads((out / RESULT).read_text())["waves"]
    trace = [json.loads(line) for line in (work / TRACE).read_text().splitlines()]
    return breakdown(waves, trace), time.perf_counter() - start


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
    env = {
        **os.environ,
        "VFLFS_CACHE_DIR": str(work / "cache"),
        roundtrip_echo.TRACE: str(work / TRACE),
    }
    stack = FlowerStack(work / "stack", env=env, tls=tls)
    epochs = math.ceil(args.round_trips / STEPS_PER_EPOCH)
    vflfs = " ".join([*files["server_overrides"], TRAINING, f"training.epochs={epochs}"])
    load = [os.getloadavg()[0]]
    try:
        stack.start_superlink()
        stack.start_supernodes(
            PARTIES,
            node_configs=[{"data-path": p["path"], "id-column": "id"} for p in files["parties"]],
        )
        rows, wall = measure(stack, work, vflfs)
    finally:
        stack.stop()
    load.append(os.getloadavg()[0])
    echo = summary([r for r in rows if r["kind"] == "echo"])
    step = summary([r for r in rows if r["kind"] == "step"])
    return {
        "setup": f"synthetic_madelon, {PARTIES} parties x 250 columns, batch {BATCH}, K = 1, "
        f"{'insecure' if args.insecure else 'TLS'} loopback, {os.cpu_count()} CPUs, "
        f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end",
        "echo": echo,
        "vflfs_k1": step,
        "ratio": step["median_s"] / echo["median_s"],
        "target": TARGET,
        "segments": SEGMENTS,
        "round_trips": rows,
        "run_wall_s": wall,
        "work": str(work),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--round-trips", type=int, default=13, help="step round-trips at least")
    parser.add_argument("--insecure", action="store_true", help="no TLS (default: TLS)")
    parser.add_argument("--work", default="", help="work folder (default: a new temp folder)")
    parser.add_argument("--out", default="benchmarks/results/roundtrip.json", help="JSON file")
    args = parser.parse_args(argv)
    results = run(args)
    print(results["setup"])
    for name, r in (("Flower echo", results["echo"]), ("vflfs K=1 step", results["vflfs_k1"])):
        print(
            f"{name:15s} median {r['median_s']:6.2f} s per round-trip (min {r['min_s']:.2f}, "
            f"max {r['max_s']:.2f}, n = {r['round_trips']}; halves "
            f"{r['first_half_median_s']:.2f}, {r['second_half_median_s']:.2f})"
        )
        parts = [f"{k} {r[f'median_{k}']:.2f} s" for k in SEGMENTS if f"median_{k}" in r]
        if "median_cpu_s" in r:
            parts.append(f"CPU {r['median_cpu_s']:.2f} s per process")
        print("  " + ", ".join(parts))
    verdict = "PASS" if results["ratio"] <= TARGET else "MISS"
    print(f"ratio vflfs / echo = {results['ratio']:.2f} (target <= {TARGET}): {verdict}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
