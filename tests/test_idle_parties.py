"""A party with no embedding component (a filter's count or a refit that keeps none of its
features) is left out of the training batches: it is sent only the epochs' evaluation
requests, and the run is the one that sent it every batch."""

from __future__ import annotations

import csv

from test_privacy import Recorder

from vflfs.federation import DOWN, UP, decode
from vflfs.protocol import STEP
from vflfs.strategies.interactive import InteractiveLayer, PlainLayer

from helpers import run_local, tiny_config

# fstat_filter tries d, d/2, ... 1 features: its counts of one or two leave parties idle
FILTER = "strategy=fstat_filter training.epochs=4"


def steps(recorder: Recorder, direction: str) -> list[tuple[int, dict]]:
    return [
        (party, decode(content))
        for d, party, operation, content in recorder.messages
        if d == direction and operation == STEP.name
    ]


def rows(out) -> list[dict]:
    """history.csv without the bytes on the wire and the time (the uploaded embedding floats,
    ``analytic_mb``, stay: an idle party uploaded none)."""
    with open(out / "history.csv", newline="") as f:
        return [
            {k: v for k, v in row.items() if k not in ("mb", "training_mb", "wall_s")}
            for row in csv.DictReader(f)
        ]


def test_an_idle_party_is_sent_only_the_evaluation_requests_and_the_run_is_the_same(
    tmp_path, monkeypatch
):
    skipping, every = Recorder(), Recorder()
    left_out = run_local(tiny_config(FILTER), tmp_path / "idle", observers=[skipping])
    with monkeypatch.context() as m:  # the layer as before: every party gets every batch
        m.setattr(PlainLayer, "leave_out", InteractiveLayer.leave_out)
        sent = run_local(tiny_config(FILTER), tmp_path / "every", observers=[every])

    assert left_out["step_losses"] == sent["step_losses"]
    assert rows(tmp_path / "idle") == rows(tmp_path / "every")  # scores, columns, stages

    # What was left out: the step round-trips of a party whose embeddings had no component,
    # but not its evaluations (its selection, a checkpoint's snapshot).
    idle_batches = [
        (party, reply)
        for party, reply in steps(every, UP)
        if reply.get("embeddings")
        and all(e.shape[1] == 0 for e in reply["embeddings"])
        and reply.get("eval_embeddings") is None
    ]
    assert idle_batches  # the check can fail: some counts left parties idle
    assert len(steps(skipping, UP)) == len(steps(every, UP)) - len(idle_batches)
    assert len(steps(skipping, DOWN)) == len(steps(every, DOWN)) - len(idle_batches)
    for _, request in steps(skipping, DOWN):
        if "plan_seed" not in request and not request.get("grads"):
            assert request["evaluate"]  # an idle party's request: an evaluation only
