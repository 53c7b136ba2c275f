"""How much of Flower's speed does vflfs keep? Four step rates on MADELON-size data.

All measured in one run on the synthetic MADELON-like set (2600 x 500, ``split=even``,
``model=mlp``, batch 128: 13 steps per epoch on the 1664 training rows), on the CPU:

(a) floor  the same split model trained in one process (:class:`vflfs.ml.reference.SplitModel` on
           the parties' views, built as the parties build them); best of 5 runs after a warm-up;
(b) echo   Flower's bare message rate: Flower's in-process ``run_simulation`` (deprecated; the
           benchmark's only use of it, as a reference rate) with the same supernodes and Ray
           resources as vflfs, a ServerApp driving :class:`vflfs.federation.Federation` (the same
           push/pull loop) and an echo ClientApp returning a 128x16 float32 array per party.
           One round-trip per step, so round-trips/s = steps/s of a per-step protocol;
(c) K=1    ``vflfs.runtime.simulation.simulate`` (``flwr run`` on a SuperLink of its own) with
           ``training.local_steps=1``: step losses over the wall time of the training phase as
           vflfs accounts it (it includes each epoch's closing round-trip); "incl. eval" divides
           by training + evaluation time;
(d) K=spe  the same with ``training.local_steps`` = steps per epoch.

Targets: (c)/(b) >= 0.8 (vflfs adds little to Flower's per-message cost) and (d)/(a) >= 0.3
(batched, vflfs gets within ~3x of the one-process floor). Test accuracy of (a), (c), (d).

Run from the repository root (Ray's workers must import this module); ~1.5 min on 2 cores::

    . .venv/bin/activate
    python -m benchmarks.engine_overhead --epochs 20 --out benchmarks/results/engine_overhead.json

The JSON file gets every number (and the step losses); simulation outputs go next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from vflfs.client_app.data import party_data
from vflfs.datasets import center
from vflfs.federation import Federation
from vflfs.federation.payload import encode
from vflfs.ml.models import BottomSpec, TopSpec
from vflfs.ml.reference import SplitModel
from vflfs.protocol import INFO, STEP, Body, InfoReply, Operation
from vflfs.runtime.config import compose_config
from vflfs.runtime.settings import FederationSettings
from vflfs.runtime.simulation import backend_config, simulate
from vflfs.server_app.experiment import Experiment

TARGET_ECHO = 0.8  # (c)/(b)
TARGET_FLOOR = 0.3  # (d)/(a)
EMBEDDING_SHAPE = (128, 16)


# -- (b) the echo ClientApp (module level, so Ray's workers can import it) ---------------------
@dataclass(frozen=True)
class Echo(Body):
    """The echo's request and reply: one embedding-sized array."""

    embedding: np.ndarray


ECHO = Operation(STEP.name, Echo, Echo)  # a step-sized round-trip without a step's work
echo_app = ClientApp()


@echo_app.query(INFO.action)
def echo_info(msg: Message, context: Context) -> Message:
    """Report the partition id, as Federation.connect expects."""
    reply = InfoReply(partition_id=int(context.node_config["partition-id"]))
    return Message(encode(reply.to_payload()), reply_to=msg)


@echo_app.train(ECHO.action)
def echo_step(msg: Message, context: Context) -> Message:
    """Send the payload straight back."""
    return Message(msg.content, reply_to=msg)


# -- configuration -----------------------------------------------------------------------------
def make_config(parties: int, epochs: int, local_steps: int) -> DictConfig:
    return compose_config(
        f"dataset=synthetic_madelon split=even split.num_parties={parties} model=mlp "
        f"training.batch_size=128 training.epochs={epochs} training.local_steps={local_steps} "
        "training.patience=null device=cpu"
    )


def steps_per_epoch(experiment: Experiment) -> int:
    return -(-len(experiment.splits.train) // experiment.training.batch_size)


# -- (a) the floor -----------------------------------------------------------------------------
def _split_model(cfg: DictConfig, experiment: Experiment, views: list[np.ndarray]) -> SplitModel:
    return SplitModel(
        views,
        experiment.task,
        BottomSpec.from_dict(dict(cfg.model.bottom)),
        TopSpec.from_dict(dict(cfg.model.top)),
        experiment.training.optimizer_spec,
        experiment.seed,
    )


def measure_floor(cfg: DictConfig, epochs: int, repeats: int = 5) -> dict:
    """Train SplitModel on the parties' views: one warm-up epoch, then ``repeats`` timed runs.

    The floor is the best run (the machine may be shared); the median is kept in the JSON.
    It runs on the parties' torch thread count (``threads``), so that (d)/(a) compares the
    same arithmetic.
    """
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    experiment = Experiment.from_config(cfg)
    train, test, y = experiment.splits.train, experiment.splits.test, experiment.y
    views = [
        center(party_data(experiment.party_spec(m)["data"], train).X, train)
        for m in range(experiment.num_parties)
    ]
    batch = experiment.training.batch_size
    _split_model(cfg, experiment, views).fit(train, y, 1, batch, experiment.seed)  # warm-up
    rates, losses, accuracy = [], [], 0.0
    for _ in range(repeats):
        model = _split_model(cfg, experiment, views)
        start = time.perf_counter()
        losses = model.fit(train, y, epochs, batch, experiment.seed)
        rates.append(len(losses) / (time.perf_counter() - start))
        accuracy = model.evaluate(test, y[test])
    return {
        "steps": len(losses),
        "steps_per_s": max(rates),
        "median_steps_per_s": statistics.median(rates),
        "rates": rates,
        "final_test_accuracy": accuracy,
        "step_losses": losses,
    }


# -- (b) Flower's bare message rate ------------------------------------------------------------
def measure_echo(cfg: DictConfig, steps: int, warmup: int = 3) -> dict:
    """Round-trips/s of a 128x16 float32 echo to every party, over the same Federation loop."""
    parties = int(cfg.split.num_parties)
    payload = Echo(np.random.default_rng(0).random(EMBEDDING_SHAPE, dtype=np.float32))
    out: dict = {}
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        poll = FederationSettings.from_cfg(cfg).poll_interval
        federation = Federation(grid, parties, poll_interval=poll)
        federation.connect()
        for _ in range(warmup):
            federation.send(ECHO, dict.fromkeys(range(parties), payload))
        start = time.perf_counter()
        for _ in range(steps):
            replies = federation.send(ECHO, dict.fromkeys(range(parties), payload))
        wall = time.perf_counter() - start
        assert all(np.array_equal(r.embedding, payload.embedding) for r in replies.values())
        out.update(steps=steps, wall_s=wall, steps_per_s=steps / wall)

    run_in_process(server_app, echo_app, cfg)
    if "steps_per_s" not in out:
        raise RuntimeError("the echo simulation ended without a result")
    return out


def run_in_process(server_app: ServerApp, client_app: ClientApp, cfg: DictConfig) -> None:
    """Flower's in-process simulation of ``server_app`` and ``client_app``, quietly."""
    import logging
    import warnings

    from flwr.simulation import run_simulation

    fed = backend_config(cfg)
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    logging.getLogger("flwr").setLevel(logging.ERROR)  # includes the deprecation banner
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=int(fed["num-supernodes"]),
            backend_config={
                "client_resources": {
                    "num_cpus": fed["client-resources-num-cpus"],
                    "num_gpus": fed["client-resources-num-gpus"],
                },
                "init_args": {
                    "num_cpus": fed["init-args-num-cpus"],
                    "num_gpus": fed["init-args-num-gpus"],
                    "logging_level": "ERROR",
                },
            },
        )


# -- (c), (d) the vflfs simulation -------------------------------------------------------------
def measure_vflfs(cfg: DictConfig, out_dir: Path) -> dict:
    """Steps/s over the training phase of one ``simulate`` run, and its test accuracy."""
    start = time.perf_counter()
    summary = simulate(cfg, out_dir)
    total = time.perf_counter() - start
    phases = summary["communication"]["phases"]
    training = phases["training"]
    steps = len(summary["step_losses"])
    epoch_wall = float(training["wall_s"]) + float(phases.get("evaluation", {}).get("wall_s", 0))
    return {
        "local_steps": int(cfg.training.local_steps),
        "steps": steps,
        "round_trips": int(training["round_trips"]),
        "wall_s": float(training["wall_s"]),
        "steps_per_s": steps / float(training["wall_s"]),
        "ms_per_round_trip": 1000 * float(training["wall_s"]) / int(training["round_trips"]),
        "training_mb": float(training["mb"]),
        "train_and_eval_wall_s": epoch_wall,
        "steps_per_s_with_eval": steps / epoch_wall,
        "round_trips_with_eval": sum(int(p["round_trips"]) for p in phases.values())
        - int(phases.get("setup", {}).get("round_trips", 0)),
        "test_accuracy": float(summary["test_metric"]),
        "final_test_accuracy": float(summary["final_test_metric"]),
        "simulation_wall_s": total,
        "out_dir": str(out_dir),
        "step_losses": [float(x) for x in summary["step_losses"]],
    }


# -- report ------------------------------------------------------------------------------------
def print_table(results: dict, console: Console) -> None:
    a, b, c, d = (results[k] for k in ("floor", "echo", "vflfs_k1", "vflfs_kepoch"))
    table = Table(title=f"vflfs engine overhead ({results['setup']})")
    for name in ("run", "steps", "steps/s", "ms/step", "w/ eval", "acc final/best"):
        table.add_column(name, justify="left" if name == "run" else "right")
    rows = [
        ("(a) floor", a),
        ("(b) Flower echo", b),
        ("(c) vflfs K=1", c),
        (f"(d) vflfs K={d['local_steps']}", d),
    ]
    for label, r in rows:
        acc = " / ".join(f"{r[k]:.4f}" for k in ("final_test_accuracy", "test_accuracy") if k in r)
        rate, with_eval = r["steps_per_s"], r.get("steps_per_s_with_eval")
        both = "-" if with_eval is None else f"{with_eval:.1f}"
        table.add_row(label, str(r["steps"]), f"{rate:.1f}", f"{1000 / rate:.2f}", both, acc or "-")
    console.print(table)
    ratios = Table(title="targets")
    for name in ("ratio", "value", "target", "verdict"):
        ratios.add_column(name, justify="left" if name == "ratio" else "right")
    for key, target in (("c_over_b", TARGET_ECHO), ("d_over_a", TARGET_FLOOR)):
        label, value = f"({key[0]})/({key[-1]})", results["ratios"][key]
        verdict = "[green]PASS[/green]" if value >= target else "[red]MISS[/red]"
        ratios.add_row(label, f"{value:.3f}", f">= {target}", verdict)
    console.print(ratios)
    console.print(
        f"same model check: max |loss(a) - loss(c)| over {c['steps']} steps = "
        f"{results['max_abs_loss_diff_a_c']:.2e}; floor median {a['median_steps_per_s']:.1f} "
        f"steps/s (best of {len(a['rates'])} shown); K=1 {c['ms_per_round_trip']:.1f} ms and "
        f"K={d['local_steps']} {d['ms_per_round_trip']:.1f} ms per training round-trip"
    )


def run(args: argparse.Namespace, console: Console) -> dict:
    out = Path(args.out)
    runs = out.parent / f"{out.stem}_runs"
    cfg1 = make_config(args.parties, args.epochs, 1)
    spe = steps_per_epoch(Experiment.from_config(cfg1))
    cfgk = make_config(args.parties, args.epochs, spe)
    console.print(f"[bold](a)[/bold] floor, {args.epochs} epochs x {spe} steps ...")
    floor = measure_floor(cfg1, args.epochs)
    console.print("[bold](b)[/bold] Flower echo ...")
    echo = measure_echo(cfg1, args.echo_steps)
    console.print("[bold](c)[/bold] vflfs K=1 ...")
    k1 = measure_vflfs(cfg1, runs / "k1")
    console.print(f"[bold](d)[/bold] vflfs K={spe} ...")
    kepoch = measure_vflfs(cfgk, runs / f"k{spe}")
    return {
        "setup": f"synthetic_madelon, {args.parties} parties, batch 128, {spe} steps/epoch, "
        f"{args.epochs} epochs, {os.cpu_count()} CPUs, {cfg1.get('threads') or 'default'} "
        "torch thread(s) for each party, the server and the floor",
        "steps_per_epoch": spe,
        "backend_config": backend_config(cfg1),
        "floor": floor,
        "echo": echo,
        "vflfs_k1": k1,
        "vflfs_kepoch": kepoch,
        "ratios": {
            "c_over_b": k1["steps_per_s"] / echo["steps_per_s"],
            "d_over_a": kepoch["steps_per_s"] / floor["steps_per_s"],
        },
        "targets": {"c_over_b": TARGET_ECHO, "d_over_a": TARGET_FLOOR},
        "max_abs_loss_diff_a_c": _max_diff(floor["step_losses"], k1["step_losses"]),
    }


def _max_diff(a: list[float], b: list[float]) -> float:
    """Largest step-loss gap between two runs of the same model (inf if lengths differ)."""
    return float(np.max(np.abs(np.subtract(a, b)))) if len(a) == len(b) else float("inf")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--epochs", type=int, default=20, help="epochs for (a), (c), (d)")
    parser.add_argument("--parties", type=int, default=2, help="parties = simulated SuperNodes")
    parser.add_argument("--echo-steps", type=int, default=100, help="round-trips timed in (b)")
    parser.add_argument(
        "--out", default="benchmarks/results/engine_overhead.json", help="JSON file for the numbers"
    )
    args = parser.parse_args(argv)
    console = Console()
    started = time.perf_counter()
    results = run(args, console)
    results["benchmark_wall_s"] = time.perf_counter() - started
    print_table(results, console)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    console.print(f"wrote {out} ({results['benchmark_wall_s']:.0f} s in all)")
    return results


if __name__ == "__main__":
    main()
