"""The party store: a message writes only the parts of the party it changed, the cache of live
parties is bounded and never used when stale, and the records hold the whole party."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, Context
from flwr.common.serde import (
    context_from_proto,
    context_to_proto,
    recorddict_from_proto,
    recorddict_to_proto,
)

from vflfs.benchmarks.party_state import (
    Size,
    call,
    forget_cached_parties,
    measure,
    message,
    set_up,
    step_request,
)
from vflfs.client_app import party_store
from vflfs.client_app.app import app
from vflfs.client_app.flat_record import FLAT
from vflfs.client_app.party_store import META, SPEC, Cached, PartyCache, PartyStore
from vflfs.protocol import IMPORTANCE, KEEP, PENALTY, STEP, Empty, KeepRequest, PenaltyRequest

from helpers import run_local, tiny_config

TINY = Size("tiny", 192, 20)  # 3 batches of 64 per epoch


def step(context: Context, n: int) -> None:
    call(app, message(STEP, step_request(n, 3, np.random.default_rng(n)), n + 1), context)


@pytest.fixture
def context() -> Context:
    """A party set up and stepped twice through the real ClientApp."""
    context, _ = set_up(app, TINY)
    step(context, 0)
    step(context, 1)
    return context


def contents(context: Context) -> dict[str, object]:
    """Per record of ``context.state``, its content: a flat record's buffer, else the record."""
    return {
        name: record[FLAT].data if isinstance(record, ArrayRecord) and FLAT in record else record
        for name, record in context.state.items()
    }


def rewritten(context: Context, send) -> set[str]:
    """The records of ``context.state`` whose content ``send()`` replaced."""
    before = contents(context)
    send()
    return {name for name, content in contents(context).items() if before.get(name) is not content}


def version(context: Context) -> int:
    return int(context.state[META]["version"])


def test_a_step_rewrites_only_the_model_optimiser_and_pending_batches(context):
    v = version(context)
    assert rewritten(context, lambda: step(context, 2)) == {
        "vflfs.model",
        "vflfs.optim",
        "vflfs.pending",
    }
    assert version(context) == v + 1


def test_a_query_rewrites_nothing(context):
    v = version(context)
    assert rewritten(context, lambda: call(app, message(IMPORTANCE, Empty(), 9), context)) == set()
    assert version(context) == v


def test_a_penalty_rewrites_only_the_spec_and_keep_the_structure(context):
    scale = PenaltyRequest(scale=0.5)
    assert rewritten(context, lambda: call(app, message(PENALTY, scale, 9), context)) == {SPEC}
    assert '"penalty_scale": 0.5' in str(context.state[SPEC]["json"])
    keep = KeepRequest(features=np.array([0, 2, 4]))
    assert rewritten(context, lambda: call(app, message(KEEP, keep, 10), context)) == {
        "vflfs.structure",
        "vflfs.model",
        "vflfs.optim",
    }
    assert PartyStore(context).load().model.input_layer.weight.shape[1] == 3


def test_the_cache_keeps_a_few_parties_of_the_latest_run():
    cache, entry = PartyCache(size=2), Cached("n", 0, None, {})
    for node in (1, 2, 3):
        cache.put((1, node), entry)
    assert list(cache) == [(1, 2), (1, 3)]
    assert cache.get((1, 2), "n", 0) is entry  # now the most recently used
    cache.put((1, 4), entry)
    assert list(cache) == [(1, 2), (1, 4)]
    cache.put((2, 1), entry)  # another run: the earlier run's parties leave
    assert list(cache) == [(2, 1)]
    assert cache.get((2, 1), "n", 1) is None and len(cache) == 0  # stale: dropped
    for node in (1, 2, 3, 4):  # a run of 4 parties, all in this process: every one stays
        cache.put((3, node), entry, parties=4)
    assert list(cache) == [(3, 1), (3, 2), (3, 3), (3, 4)]


def test_jobs_in_one_process_leave_only_the_last_jobs_parties_cached(tmp_path):
    for name in ("a", "b"):
        run_local(tiny_config("training.epochs=1"), tmp_path / name)
    runs = {run for run, _ in party_store.CACHE}
    assert len(runs) == 1 and len(party_store.CACHE) <= party_store.CACHE.size


def test_a_cached_party_of_another_version_is_not_used(context):
    """A message whose context.state is older than this process's cached party (another actor
    served the last one) rebuilds the party from context.state."""
    older = context_from_proto(context_to_proto(context))
    step(context, 2)  # this process caches the newer party
    live = PartyStore(context).load()
    restored = PartyStore(older).load()
    assert restored is not live
    assert restored.steps_taken == live.steps_taken - 1
    assert not np.array_equal(
        restored.model.input_layer.weight.detach(), live.model.input_layer.weight.detach()
    )


def test_the_records_hold_the_whole_party(context):
    """What a snapshot on disk holds (PartyStore.records) rebuilds the party exactly."""
    live = PartyStore(context).load()
    records = recorddict_from_proto(recorddict_to_proto(PartyStore(context).records()))
    elsewhere = Context(
        run_id=99, node_id=5, node_config={}, state=records, run_config=context.run_config
    )
    restored = PartyStore(elsewhere).load()
    assert restored is not live and restored.steps_taken == live.steps_taken == 1
    ours, theirs = live.state_arrays(), restored.state_arrays()
    for group in ours:
        assert ours[group].keys() == theirs[group].keys()
        for name in ours[group]:
            np.testing.assert_array_equal(ours[group][name], theirs[group][name])
    assert [p.tolist() for p in restored.pending] == [p.tolist() for p in live.pending]


def test_the_state_benchmark_measures_the_handler_and_its_state_part():
    result = measure(TINY, 12, cold=False)
    assert 0 < result["mean_without_state_ms"] < result["mean_handler_ms"]
    assert 0 < result["state_share"] < 1


def test_the_model_and_optimiser_are_saved_from_one_buffer_each(context):
    """Their flat buffers hold what state_dict holds, and follow a step, a keep and a load."""
    from vflfs.ml.optim import load_optimizer_arrays

    party = PartyStore(context).load()

    def check() -> None:
        model, optim = party.state_arrays(("model", "optim")).values()
        expected = party.model.state_dict()
        assert list(model) == list(expected)
        for name, tensor in expected.items():
            np.testing.assert_array_equal(model[name], tensor.numpy())
        moments = party.optimizer.state_dict()["state"]
        assert len(optim) == sum(len(s) for s in moments.values())
        for name, value in optim.items():
            pid, key = name.split(".", 1)
            np.testing.assert_array_equal(value, moments[int(pid)][key].numpy())

    buffer = party._flat.model(party.model, list(party.model.parameters())).buffer
    assert party.model.input_layer.weight.data_ptr() >= buffer.data_ptr()  # a view of it
    step(context, 2)
    check()
    party.keep(features=np.array([1, 3]))  # new layers, a new optimiser
    check()
    step(context, 3)
    check()
    load_optimizer_arrays(party.optimizer, dict(party.state_arrays(("optim",))["optim"]))
    check()


def test_a_state_of_an_older_layout_is_refused_with_the_fix(context):
    from vflfs.client_app.flat_record import unpack

    with pytest.raises(ValueError, match="older vflfs; fix: start the run afresh"):
        unpack(ArrayRecord({"bottom.net.0.weight": context.state["vflfs.rows"]["train"]}))
    del context.state[SPEC]
    party_store.CACHE.clear()
    with pytest.raises(ValueError, match="older vflfs; fix: start the run afresh"):
        PartyStore(context).load()


class Gated(Size):
    def overrides(self) -> str:
        return super().overrides() + " strategy=fedsdg_fs"  # input and embedding gates


@pytest.mark.parametrize("size", [TINY, Gated("gated", 192, 20)], ids=["plain", "gates"])
def test_a_live_party_backpropagates_through_its_kept_forward_pass_to_the_bit(size):
    """A party that stays live between messages keeps each batch's forward pass for its
    backward pass (one forward per step, not two); one rebuilt from context.state at every
    message recomputes it. Both end with the same model and optimiser, to the bit."""

    def train(cold: bool) -> tuple[dict, int]:
        context, _ = set_up(app, size)
        step(context, 0)
        forwards = []
        PartyStore(context).load().model.register_forward_hook(lambda *_: forwards.append(1))
        for n in range(1, 6):
            if cold:
                forget_cached_parties()
            step(context, n)
        arrays = PartyStore(context).load().state_arrays(("model", "optim"))
        return {g: {k: np.array(v) for k, v in a.items()} for g, a in arrays.items()}, len(forwards)

    (live, forwards), (cold, _) = train(cold=False), train(cold=True)
    assert forwards == 5  # the recomputation would make it 10
    for group in live:
        for name in live[group]:
            np.testing.assert_array_equal(live[group][name], cold[group][name])


def test_a_kept_forward_pass_is_not_used_once_the_model_changed(context):
    party = PartyStore(context).load()
    assert party._kept_graph(0) is not None
    with torch.no_grad():
        party.model.input_layer.weight.mul_(1.0)  # an in-place change (as a loaded state)
    assert party._kept_graph(0) is None  # recomputed
