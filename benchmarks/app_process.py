"""What one deployment message costs the party's machine: a fresh process serving one step.

In Flower's deployment engine every message starts a fresh ``flwr-clientapp`` process that
imports Flower's runtime, loads the ClientApp, restores the context and handles the message.
This benchmark replays that process on one machine, without the SuperNode around it:

1. a short in-process run (:class:`~vflfs.federation.LocalGrid`, the real ClientApp, the
   party reading its own file as in deployment: synthetic MADELON cut by ``vflfs split`` into
   2 party files of 250 columns, batch 128, K = 1) records one ``train.step`` message to party 0
   together with the party's context as it stood before that message (both as Flower's
   protobuf);
2. ``--repeats`` fresh Python processes each import Flower's ClientApp runtime
   (``flwr.supernode.runtime.run_clientapp``), load the app, decode the message and context,
   call the app, and encode the reply and the context; each reports its CPU seconds (user +
   system, interpreter start included) and wall seconds;
3. the same for Flower's bare echo ClientApp (:mod:`benchmarks.roundtrip_echo`) on the same
   message.

``--profile`` also writes ``importtime.txt`` (``python -X importtime``) and ``step.prof``
(cProfile of the whole process) for the vflfs step. Run from the repository root::

    python -m benchmarks.app_process --repeats 5 --out benchmarks/results/app_process.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from flwr.app import Context, Message
from flwr.common.serde import context_to_proto, message_from_proto, message_to_proto

from vflfs.federation import LocalGrid
from vflfs.protocol import STEP

REPO = Path(__file__).resolve().parents[1]
DATA = "dataset=synthetic_madelon split=even split.num_parties=2"
TRAINING = (
    "model=mlp training.batch_size=128 training.local_steps=1 training.epochs=1 "
    "training.patience=null device=cpu"
)
APPS = {"vflfs": "vflfs.client_app.app:app", "echo": "vflfs.benchmarks.roundtrip_echo:echo"}
STEP_TO_KEEP = 3  # a step with gradients to apply and a next batch to embed

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
import flwr.supernode.runtime.run_clientapp  # Flower's own app-process imports
from flwr.common.serde import context_from_proto, context_to_proto, message_from_proto
from flwr.common.serde import message_to_proto
from flwr.proto.message_pb2 import Context, Message
import importlib
module, attr = sys.argv[1].split(":")
app = getattr(importlib.import_module(module), attr)
message = message_from_proto(Message.FromString(open(sys.argv[2], "rb").read()))
context = context_from_proto(Context.FromString(open(sys.argv[3], "rb").read()))
reply = app(message=message, context=context)
open(sys.argv[4], "wb").write(message_to_proto(reply).SerializeToString())
context_to_proto(context).SerializeToString()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({
    "cpu_s": usage.ru_utime + usage.ru_stime,
    "wall_s": time.perf_counter() - start,
    "failed": reply.has_error() or "error" in reply.content,
    "loaded": {m: m in sys.modules for m in ("torch._dynamo", "sklearn", "scipy", "pandas", "phe")},
    "modules": len(sys.modules),
}))
"""


class RecordingGrid(LocalGrid):
    """A LocalGrid that keeps party 0's ``STEP_TO_KEEP``-th step message, its context before
    the message and the reply."""

    def __init__(self, client_app, num_nodes: int) -> None:
        super().__init__(client_app, num_nodes)
        self.steps = 0
        self.kept: tuple[bytes, bytes] | None = None
        self.reply: Message | None = None

    def push_messages(self, messages):
        ids = []
        for message in messages:
            node = message.metadata.dst_node_id
            keep = message.metadata.message_type == STEP.name and self.contexts[node][0] == 0
            self.steps += keep
            if keep and self.steps == STEP_TO_KEEP:
                self.kept = (self._message_bytes(message), self._context_bytes(node))
            ids += super().push_messages([message])
            if keep and self.steps == STEP_TO_KEEP:
                self.reply = self._replies[ids[-1]]
        return ids

    def _message_bytes(self, message: Message) -> bytes:
        message.metadata.__dict__["_message_id"] = "kept"
        message.metadata.__dict__["_run_id"] = self.run_id
        return message_to_proto(message_from_proto(message_to_proto(message))).SerializeToString()

    def _context_bytes(self, node: int) -> bytes:
        context: Context = self._state[node]
        return context_to_proto(context).SerializeToString()


def record_step(work: Path, data: str = DATA, training: str = TRAINING) -> RecordingGrid:
    """Run the short job in process (``data``: the Hydra options ``vflfs split`` cuts the party
    files with); write the kept message and context into ``work`` (``message.pb``,
    ``context.pb``); return the grid (its ``reply``: the in-process reply)."""
    from vflfs.client_app.app import app
    from vflfs.runtime.config import compose_config
    from vflfs.server_app.run import run_experiment

    folder = work / "data"
    split = subprocess.run(
        [str(Path(sys.executable).with_name("vflfs-split")), str(folder), *data.split()],
        capture_output=True,
        text=True,
    )
    if split.returncode != 0:
        raise RuntimeError(split.stdout + split.stderr)
    files = json.loads((folder / "split.json").read_text())
    paths = ",".join(p["path"] for p in files["parties"])
    cfg = compose_config(
        " ".join([*files["server_overrides"], training, f"dataset.party_paths=[{paths}]"])
    )
    grid = RecordingGrid(app, 2)
    run_experiment(grid, cfg, work / "out")
    if grid.kept is None:
        raise RuntimeError("the run sent fewer step messages than expected")
    (work / "message.pb").write_bytes(grid.kept[0])
    (work / "context.pb").write_bytes(grid.kept[1])
    return grid


def fresh_process(app: str, message: Path, context: Path, extra: list[str] = ()) -> dict:
    """Run the app process once (``extra``: Python options before the script)."""
    child, reply = message.with_name("app_process_child.py"), message.with_name("reply.pb")
    child.write_text(CHILD)
    result = subprocess.run(
        [sys.executable, *extra, str(child), app, str(message), str(context), str(reply)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-4000:])
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "stderr": result.stderr}


def measure(app: str, message: Path, context: Path, repeats: int) -> dict:
    runs = [fresh_process(app, message, context) for _ in range(repeats)]
    for run in runs:
        run.pop("stderr")
    if any(r["failed"] for r in runs):
        raise RuntimeError(f"{app} answered with an error")
    return {
        "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "median_wall_s": statistics.median(r["wall_s"] for r in runs),
        "runs": runs,
    }


def profile(message: Path, context: Path, out: Path) -> None:
    """``-X importtime`` and cProfile of one fresh vflfs step process, into ``out``."""
    run = fresh_process(APPS["vflfs"], message, context, ["-X", "importtime"])
    (out / "importtime.txt").write_text(run["stderr"])
    fresh_process(APPS["vflfs"], message, context, ["-m", "cProfile", "-o", str(out / "step.prof")])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per app")
    parser.add_argument("--profile", action="store_true", help="importtime and cProfile too")
    parser.add_argument("--out", default="benchmarks/results/app_process.json", help="JSON file")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="vflfs-app-process-"))
    record_step(work)
    message, context = work / "message.pb", work / "context.pb"
    results = {name: measure(ref, message, context, args.repeats) for name, ref in APPS.items()}
    if args.profile:
        profile(message, context, out.parent)
    for name, r in results.items():
        loaded = [m for m, yes in r["runs"][0]["loaded"].items() if yes]
        print(
            f"{name:6s} CPU {r['median_cpu_s']:.2f} s, wall {r['median_wall_s']:.2f} s per "
            f"fresh process (median of {args.repeats}); {r['runs'][0]['modules']} modules, "
            f"of them {loaded or 'none'} of {list(r['runs'][0]['loaded'])}"
        )
    out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
