"""One point of the scaling benchmark (:mod:`benchmarks.scaling`), in a process of its own.

A point is (engine, parties, rows, columns per party) on a generated dataset (``teacher`` or
``synthetic_madelon``: ``rows`` x ``parties * cols`` float32, ``split=even``), trained with
``strategy=vfl``, ``model=mlp``, batch 128, K = 1 (one ``train.step`` round-trip per batch), on
the CPU. The server runs the VFL strategy's own steps (:meth:`VFL.configure`,
:meth:`VFL.exchange`, :meth:`VFL.server_steps`, the layer's evaluation) over the first
``steps`` batches of epoch 0, then the epoch's closing round-trip with the evaluation of the
validation and test rows, exactly as ``run_epochs`` does for an epoch of ``steps`` batches.
Training also stops once it has taken ``max_train_s`` seconds (after at least
:data:`MIN_STEPS` steps). When fewer steps than the epoch's batch count were measured, the
epoch's seconds and bytes are the measured training per step times the batch count, plus the
measured evaluation (``extrapolated`` in the result).

Engines: ``local`` (the real ClientApp over :class:`~vflfs.federation.LocalGrid`, every party
in this process, one after the other) and ``simulation`` (``flwr run`` of :data:`server` and
:data:`client` on a :class:`~vflfs.runtime.superlink.SimulationSuperLink`, parties in Ray
actors with :func:`~vflfs.runtime.simulation.backend_config`'s resources).

Memory, in MB (2^20 bytes):
``server_rss_mb``  peak RSS (``ru_maxrss``) of the process running the server's loop; with
                   ``local`` that process hosts every party too;
``party_rss_mb``   peak RSS of the process hosting party 0 (``local``: the same process;
                   ``simulation``: its Ray actor, which hosts every party with one actor);
``party_traced_mb`` tracemalloc's peak during party 0's setup message, started from an empty
                   dataset cache as in a process of its own: the party generating the dataset
                   and building its data view (numpy and Python allocations; torch's, e.g.
                   the bottom model, are not traced).

    python -m benchmarks.scaling_point --engine local --parties 2 --rows 10000 --cols 100 \
        --steps 100 --out outputs/point
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import tracemalloc
from dataclasses import asdict, dataclass
from pathlib import Path

from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp
from omegaconf import DictConfig, OmegaConf

from vflfs.client_app.app import build_client_app
from vflfs.datasets.loading import clear_dataset_cache
from vflfs.protocol import SETUP, STEP

MB = 2**20
RESULT = "point.json"
PROBE_KEY = "scaling-probe-dir"  # run-config key: where the parties' memory probe writes
BATCH = 128
MIN_STEPS = 5
MAX_TRAIN_S = 120.0
DATASETS = ("teacher", "synthetic_madelon")
ENGINES = ("local", "simulation")


@dataclass(frozen=True)
class Point:
    """One configuration of the sweep."""

    engine: str
    parties: int
    rows: int
    cols: int
    dataset: str = "teacher"

    @property
    def name(self) -> str:
        return f"{self.engine}_p{self.parties}_n{self.rows}_d{self.cols}_{self.dataset}"

    @property
    def matrix_bytes(self) -> int:
        """The generated float32 matrix: rows x (parties x cols)."""
        return 4 * self.rows * self.parties * self.cols

    def overrides(self) -> str:
        return (
            f"dataset={self.dataset} dataset.params.n_samples={self.rows} "
            f"dataset.params.n_features={self.parties * self.cols} split=even "
            f"split.num_parties={self.parties} strategy=vfl model=mlp training.epochs=1 "
            f"training.batch_size={BATCH} training.local_steps=1 training.patience=null "
            f"engine={self.engine} device=cpu"
        )


def rss_mb() -> float:
    """This process's peak resident set size (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


# -- the parties' memory probe: a ClientApp mod ----------------------------------------------
_written_rss = 0.0


def memory_probe(msg: Message, context: Context, call_next) -> Message:
    """Trace party 0's setup (from an empty dataset cache); record the peak RSS of each
    process hosting party 0. Writes under the run-config's :data:`PROBE_KEY` folder."""
    global _written_rss
    folder = str(context.run_config.get(PROBE_KEY, "") or "")
    if not folder or int(context.node_config["partition-id"]) != 0:
        return call_next(msg, context)
    traced = msg.metadata.message_type == SETUP.name
    if traced:
        _import_setup_code()  # modules' own objects are not the party's data
        clear_dataset_cache()  # a party process of its own generates the dataset itself
        tracemalloc.start()
    try:
        reply = call_next(msg, context)
    finally:
        if traced:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            _write(Path(folder) / "party0_setup.json", {"traced_mb": peak / MB})
    rss = rss_mb()
    if rss > _written_rss:
        _written_rss = rss
        _write(Path(folder) / f"party0_rss_{os.getpid()}.json", {"rss_mb": rss})
    return reply


def _import_setup_code() -> None:
    """Import what the setup message's handler imports on first use, torch's lazily imported
    modules included (in a fresh process, a model's first step allocates about 66 MB of
    Python objects)."""
    import torch

    import vflfs.client_app.ops_align  # noqa: F401
    import vflfs.datasets.teacher  # noqa: F401
    from vflfs.client_app.registry import registered

    for operation in (SETUP, STEP):
        registered(operation)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.zeros(1, 2)).sum().backward()
    optimizer.step()


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


client = build_client_app(mods=[memory_probe])


def read_probe(folder: Path) -> dict:
    setup = folder / "party0_setup.json"
    rss = [json.loads(p.read_text())["rss_mb"] for p in folder.glob("party0_rss_*.json")]
    return {
        "party_traced_mb": json.loads(setup.read_text())["traced_mb"] if setup.exists() else None,
        "party_rss_mb": max(rss) if rss else None,
    }


# -- the server's measurement ----------------------------------------------------------------
def measure_epoch(
    grid: Grid, cfg: DictConfig, steps: int, out_dir: Path, max_train_s: float = MAX_TRAIN_S
) -> dict:
    """Set the parties up, time ``steps`` training round-trips (fewer if they take over
    ``max_train_s``) and the epoch's closing evaluation round-trip; seconds, bytes and step
    rate, per epoch."""
    from vflfs.federation import MB as FED_MB
    from vflfs.ml.batches import epoch_batches
    from vflfs.protocol import BatchPlan
    from vflfs.server_app.run import make_federation, prepare

    experiment, strategy = prepare(cfg, out_dir)
    federation = make_federation(grid, experiment)
    traffic = federation.traffic
    with traffic.in_phase("setup"):
        federation.connect()
        strategy.configure(federation, experiment)
    size, seed = experiment.training.batch_size, experiment.seed
    batches = epoch_batches(experiment.splits.train, size, seed, 0)
    wanted = len(batches) if steps <= 0 else min(steps, len(batches))
    grads: list[list] = [[] for _ in range(experiment.num_parties)]
    losses: list[float] = []
    start = time.perf_counter()
    with traffic.in_phase("training"):
        for i, rows in enumerate(batches[:wanted]):
            plan = BatchPlan(seed, 0, size, i, 1)
            replies = strategy.exchange(federation, grads, plan, evaluate=False)
            step_losses, grads = strategy.server_steps(experiment, replies, [rows])
            losses += step_losses
            if i + 1 >= MIN_STEPS and time.perf_counter() - start > max_train_s:
                break
    done = len(losses)
    with traffic.in_phase("evaluation"):
        replies = strategy.exchange(federation, grads, None, evaluate=True)
        rows = sum(len(r) for r in experiment.eval_sets().values())
        parts, _ = strategy.layer.evaluation(replies, rows)
        scores = strategy.evaluate(experiment, parts)
    train_s, eval_s = traffic.seconds["training"], traffic.seconds["evaluation"]
    train_mb = traffic.total_bytes("training") / FED_MB
    eval_mb = traffic.total_bytes("evaluation") / FED_MB
    per_epoch = len(batches)
    return {
        "steps_per_epoch": per_epoch,
        "steps_measured": done,
        "stopped_by_time": done < wanted,
        "extrapolated": done < per_epoch,
        "steps_per_s": done / train_s,
        "s_per_epoch": train_s / done * per_epoch + eval_s,
        "mb_per_epoch": train_mb / done * per_epoch + eval_mb,
        "train_s": train_s,
        "eval_s": eval_s,
        "setup_s": traffic.seconds["setup"],
        "setup_mb": traffic.total_bytes("setup") / FED_MB,
        "train_rows": int(len(experiment.splits.train)),
        "eval_rows": int(rows),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "test_metric": float(scores["test_metric"]),
    }


# -- the engines -------------------------------------------------------------------------------
server = ServerApp()


@server.main()
def serve(grid: Grid, context: Context) -> None:
    """The simulation's ServerApp: :func:`measure_epoch` on the resolved ``config-file``."""
    config = context.run_config
    out = Path(str(config["output-dir"]))
    cfg = OmegaConf.load(str(config["config-file"]))
    steps, max_s = int(config["steps"]), float(config["max-train-s"])
    result = measure_epoch(grid, cfg, steps, out, max_s)  # type: ignore[arg-type]
    result["server_rss_mb"] = rss_mb()
    _write(out / "server.json", result)


def run_local(cfg: DictConfig, steps: int, out: Path, max_train_s: float) -> dict:
    from vflfs.federation import LocalGrid

    probe = out / "probe"
    grid = LocalGrid(client, int(cfg.split.num_parties), run_config={PROBE_KEY: str(probe)})
    result = measure_epoch(grid, cfg, steps, out, max_train_s)
    return {**result, "server_rss_mb": rss_mb(), **read_probe(probe)}


def app_folder(work: Path) -> Path:
    """A FAB folder whose ``pyproject.toml`` names this module's server and client."""
    folder = work / "scaling_app"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "vflfs-scaling"\nversion = "0.1.0"\ndependencies = []\n\n'
        '[tool.flwr.app]\npublisher = "vflfs"\n\n'
        "[tool.flwr.app.components]\n"
        'serverapp = "vflfs.benchmarks.scaling_point:server"\n'
        'clientapp = "vflfs.benchmarks.scaling_point:client"\n\n'
        '[tool.flwr.app.config]\nconfig-file = ""\noutput-dir = ""\nsteps = 0\n'
        "max-train-s = 120.0\n"
        f'{PROBE_KEY} = ""\n'
    )
    return folder


def run_simulation(cfg: DictConfig, steps: int, out: Path, max_train_s: float) -> dict:
    from vflfs.runtime.simulation import backend_config
    from vflfs.runtime.superlink import SimulationSuperLink

    lines: list[str] = []
    with SimulationSuperLink() as superlink:
        config_file = superlink.workdir / "config.yaml"
        config_file.write_text(OmegaConf.to_yaml(cfg, resolve=True))
        run_config = {
            "config-file": str(config_file),
            "output-dir": str(out),
            "steps": steps,
            "max-train-s": float(max_train_s),
            PROBE_KEY: str(out / "probe"),
        }
        app = app_folder(superlink.workdir)
        status = superlink.run(app, run_config, backend_config(cfg), on_line=lines.append)
    result_file = out / "server.json"
    if status["status"] != "finished:completed" or not result_file.exists():
        tail = "\n".join(lines[-30:])
        raise RuntimeError(f"the simulation ended {status['status']}:\n{tail}")
    return {**json.loads(result_file.read_text()), **read_probe(out / "probe")}


def set_party_cache(size: int) -> None:
    """Let this process keep ``size`` live parties and data views (default: 8, or the run's
    parties if more).

    ``local`` only: a simulation's parties live in Ray actors, which import the defaults."""
    from vflfs.client_app import data, party_store

    party_store.CACHE.size = size
    data._CACHE_SIZE = size


def run_point(
    point: Point, steps: int, out: Path, party_cache: int = 0, max_train_s: float = MAX_TRAIN_S
) -> dict:
    """Measure ``point`` in this process (and, for ``simulation``, its Flower processes);
    ``party_cache`` > 0 sets :func:`set_party_cache` first."""
    from vflfs.runtime.config import compose_config

    if party_cache > 0:
        if point.engine != "local":
            raise ValueError("--party-cache applies to engine=local only; fix: drop it")
        set_party_cache(party_cache)
    out.mkdir(parents=True, exist_ok=True)
    cfg = compose_config(point.overrides())
    start = time.perf_counter()
    runner = run_local if point.engine == "local" else run_simulation
    result = runner(cfg, steps, out, max_train_s)
    wall = time.perf_counter() - start
    load = os.getloadavg()[0]  # the machine's load average at the end of the point
    return {
        **asdict(point),
        **result,
        "party_cache": party_cache,
        "max_train_s": max_train_s,
        "point_wall_s": wall,
        "load_avg": load,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--parties", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--cols", type=int, required=True, help="columns per party")
    parser.add_argument("--dataset", choices=DATASETS, default="teacher")
    parser.add_argument("--steps", type=int, default=100, help="training steps (0: an epoch)")
    parser.add_argument("--out", required=True, help="folder for point.json")
    parser.add_argument(
        "--party-cache", type=int, default=0, help="live parties per process (0: default)"
    )
    parser.add_argument(
        "--max-train-s", type=float, default=MAX_TRAIN_S, help="stop training steps after this"
    )
    args = parser.parse_args(argv)
    point = Point(args.engine, args.parties, args.rows, args.cols, args.dataset)
    out = Path(args.out).absolute()
    result = run_point(point, args.steps, out, args.party_cache, args.max_train_s)
    (out / RESULT).write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
