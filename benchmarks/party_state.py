"""What a party's state costs its handler: ``train.step`` through the real ClientApp.

One party (the real ClientApp, called as Flower calls it: ``app(message, context)``) is set
up with a ``query.setup`` message, then serves ``--steps`` ``train.step`` messages, each with
the gradient of its pending batch and the plan of its next batch, as the server sends them
with K = 1. Between two messages the party's ``Context`` goes through protobuf and back, as
deployment sends it (the local engine and simulation pickle it); the party cache of the
process is kept (one run in one process: the engine=local and simulation case).

Each message's handler time is measured (CPU seconds of the process, so that other jobs on the
machine do not count), and within it the time of the state part: restoring
the party (:attr:`vflfs.client_app.session.Session.party`, first use) and saving it
(:meth:`~vflfs.client_app.session.Session.save`). The share printed is state / handler,
both measured in the same run; ``handler - state`` is the handler without the state part.
``--cold`` also measures messages whose process holds no cached party (a fresh process per
message: deployment), where restoring rebuilds the party from ``context.state``.

Sizes (per party; bottom MLP of ``conf/model/mlp.yaml``: hidden 64, embedding 16; batch 64;
Adam): ``madelon``, 2000 training rows x 250 columns; ``arcene``, 100 x 5000. The data is
synthetic MADELON of that shape (no file needed). Run from the repository root::

    python -m benchmarks.party_state --steps 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import numpy as np
from flwr.app import Context, Message, RecordDict
from flwr.common.serde import (
    context_from_proto,
    context_to_proto,
    message_from_proto,
    message_to_proto,
)
from flwr.supercore.task_identity import TaskIdentity

from vflfs.federation.payload import decode, encode
from vflfs.protocol import SETUP, STEP, BatchPlan, SetupRequest, StepRequest

RUN_ID, NODE_ID = 1, 11
PARTIES = 2
BATCH = 64
EMBEDDING = 16


@dataclass(frozen=True)
class Size:
    """A party's shape: training rows and columns."""

    name: str
    train_rows: int
    columns: int

    def overrides(self) -> str:
        samples = int(np.ceil(self.train_rows / 0.64)) + 2  # test 20 %, then validation 20 %
        return (
            f"dataset=synthetic_madelon dataset.params.n_samples={samples} "
            f"dataset.params.n_features={self.columns * PARTIES} split=even "
            f"split.num_parties={PARTIES} model=mlp model.bottom.embedding_size={EMBEDDING} "
            f"training.batch_size={BATCH} device=cpu threads=1"
        )


SIZES = {"madelon": Size("madelon", 2000, 250), "arcene": Size("arcene", 100, 5000)}


class StateClock:
    """Seconds spent in the session's restore (first use of ``party``) and save."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def installed(self):
        from vflfs.client_app.session import Session

        party, save = Session.party, Session.save
        clock = self

        def timed_party(session):
            if _loaded(session):
                return party.fget(session)
            start = time.process_time()
            try:
                return party.fget(session)
            finally:
                clock.seconds += time.process_time() - start

        def timed_save(session):
            start = time.process_time()
            try:
                return save(session)
            finally:
                clock.seconds += time.process_time() - start

        Session.party, Session.save = property(timed_party), timed_save
        try:
            yield self
        finally:
            Session.party, Session.save = party, save


def _loaded(session) -> bool:
    """Whether the session restored its party already (before the party store: ``_party``)."""
    store = getattr(session, "store", None)
    return (session._party if store is None else store.party) is not None


def message(operation, request, group: int) -> Message:
    """The message as the party receives it (through protobuf, as on the wire)."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = RUN_ID, 0, 1
    msg = Message(
        encode(request.to_payload()),
        dst_node_id=NODE_ID,
        message_type=operation.name,
        group_id=str(group),
    )
    msg.metadata.__dict__["_message_id"] = uuid4().hex
    msg.metadata.__dict__["_run_id"] = RUN_ID
    return message_from_proto(message_to_proto(msg))


def call(app, msg: Message, context: Context) -> dict:
    reply = app(msg, context)
    content = decode(reply.content)
    if "error" in content or reply.has_error():
        raise RuntimeError(f"{msg.metadata.message_type} failed: {content}")
    return content


def set_up(app, size: Size) -> tuple[Context, np.ndarray]:
    """A party set up by the real setup message; its context and training rows."""
    from vflfs.runtime.config import compose_config
    from vflfs.server_app.experiment import Experiment

    experiment = Experiment.from_config(compose_config(size.overrides()))
    train = experiment.splits.train[: size.train_rows]
    context = Context(
        run_id=RUN_ID,
        node_id=NODE_ID,
        node_config={"partition-id": 0, "num-partitions": PARTIES},
        state=RecordDict(),
        run_config={},
    )
    request = SetupRequest(
        spec=experiment.party_spec(0),
        nonce=uuid4().hex,
        train_rows=train,
        eval_rows=np.concatenate(list(experiment.eval_sets().values())),
    )
    call(app, message(SETUP, request, 0), context)
    return context, train


def step_request(step: int, steps_per_epoch: int, rng: np.random.Generator) -> StepRequest:
    epoch, first = divmod(step, steps_per_epoch)
    grads = [] if step == 0 else [rng.normal(0, 1e-3, (BATCH, EMBEDDING)).astype(np.float32)]
    return StepRequest(grads=grads, plan=BatchPlan(0, epoch, BATCH, first, 1))


def measure(size: Size, steps: int, cold: bool) -> dict:
    """Handler and state times per step message: means, medians and the state's share of the
    handler (``cold``: no cached party at any message)."""
    from vflfs.client_app.app import app

    context, train = set_up(app, size)
    per_epoch = len(train) // BATCH
    rng = np.random.default_rng(0)
    handler, state = [], []
    with StateClock().installed() as clock:
        for step in range(steps):
            msg = message(STEP, step_request(step, per_epoch, rng), step + 1)
            context = context_from_proto(context_to_proto(context))
            if cold:
                forget_cached_parties()
            before = clock.seconds
            start = time.process_time()
            call(app, msg, context)
            handler.append(time.process_time() - start)
            state.append(clock.seconds - before)
    skip = min(10, steps // 10)  # first messages: allocator and import warm-up
    handler_s, state_s = sum(handler[skip:]), sum(state[skip:])
    return {
        "size": size.name,
        "cold": cold,
        "steps": steps - skip,
        "median_handler_ms": 1e3 * statistics.median(handler[skip:]),
        "median_state_ms": 1e3 * statistics.median(state[skip:]),
        "mean_handler_ms": 1e3 * handler_s / (steps - skip),
        "mean_without_state_ms": 1e3 * (handler_s - state_s) / (steps - skip),
        "state_share": state_s / handler_s,
    }


def forget_cached_parties() -> None:
    """Empty this process's party cache (as a fresh process has none)."""
    try:
        from vflfs.client_app.party_store import CACHE
    except ImportError:  # before the party store (the cache was a dict of client_app.state)
        from vflfs.client_app.state import _CACHE as CACHE
    CACHE.clear()


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=300, help="step messages per size")
    parser.add_argument("--sizes", default="madelon,arcene", help="of " + ",".join(SIZES))
    parser.add_argument("--cold", action="store_true", help="also without a cached party")
    parser.add_argument("--out", default="", help="JSON file for the results")
    args = parser.parse_args(argv)
    results = []
    for name in args.sizes.split(","):
        for cold in (False, True) if args.cold else (False,):
            r = measure(SIZES[name], args.steps, cold)
            results.append(r)
            print(
                f"{r['size']:8s} {'cold' if cold else 'cached':6s} handler "
                f"{r['mean_handler_ms']:.2f} ms/step (median {r['median_handler_ms']:.2f}), "
                f"without state {r['mean_without_state_ms']:.2f} ms, state "
                f"{r['median_state_ms']:.2f} ms median: {100 * r['state_share']:.1f} % of "
                f"the handler ({r['steps']} steps)"
            )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
