"""The VFL step protocol over the real ClientApp, in process (LocalGrid)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from flwr.app import Context, RecordDict

from vflfs.client_app import party_store
from vflfs.client_app.data import party_data
from vflfs.datasets import center
from vflfs.federation import PartyError
from vflfs.ml.models import BottomSpec, TopSpec
from vflfs.ml.reference import SplitModel
from vflfs.runtime.config import compose_config
from vflfs.server_app.experiment import Experiment

from helpers import run_local, tiny_config


def reference_losses(cfg) -> list[float]:
    """The same split model trained in one process with the same seed and batches."""
    exp = Experiment.from_config(cfg)
    views = [
        center(party_data(exp.party_spec(m)["data"], exp.splits.train).X, exp.splits.train)
        for m in range(3)
    ]
    t = cfg.training
    model = SplitModel(
        views,
        exp.task,
        BottomSpec.from_dict(dict(cfg.model.bottom)),
        TopSpec.from_dict(dict(cfg.model.top)),
        {"name": str(t.optimizer), "lr": float(t.lr)},
        exp.seed,
    )
    return model.fit(exp.splits.train, exp.y, int(t.epochs), int(t.batch_size), exp.seed)


@pytest.mark.parametrize("model", ["mlp", "linear"])
def test_federated_run_equals_centralised_split_model(tmp_path, model):
    cfg = tiny_config(f"model={model} training.epochs=3 training.patience=null")
    federated = run_local(cfg, tmp_path)["step_losses"]
    central = reference_losses(cfg)
    assert len(federated) == len(central) == 3 * 6  # 360 train rows / 64 = 6 batches
    np.testing.assert_allclose(federated, central, rtol=1e-5, atol=1e-6)
    assert central[-1] < central[0]


def test_regression_task_reports_r2(tmp_path):
    cfg = compose_config(
        "dataset=friedman dataset.params.n_samples=500 dataset.params.n_features=30 "
        "training.epochs=15 training.batch_size=64"
    )
    summary = run_local(cfg, tmp_path)
    assert summary["metric"] == "r2"
    assert summary["test_metric"] > 0.3
    assert federated_equals_reference(cfg, summary)


def federated_equals_reference(cfg, summary) -> bool:
    return np.allclose(summary["step_losses"], reference_losses(cfg), rtol=1e-5, atol=1e-6)


def test_local_steps_send_fewer_messages_and_still_learn(tmp_path):
    common = "training.epochs=12 training.patience=null"
    exact = run_local(tiny_config(common), tmp_path / "k1")
    batched = run_local(tiny_config(f"{common} training.local_steps=3"), tmp_path / "k3")
    rt = lambda s: s["communication"]["phases"]["training"]["round_trips"]  # noqa: E731
    # ceil(steps / K) per epoch (each evaluation rides on the next epoch's first round-trip),
    # plus one closing round-trip for the last gradients and evaluation.
    assert rt(exact) == 12 * 6 + 1
    assert rt(batched) == 12 * 2 + 1
    losses = np.reshape(batched["step_losses"], (12, 6)).mean(axis=1)
    assert losses[-1] < losses[0] - 0.05
    assert batched["test_metric"] > 0.65
    assert len(batched["step_losses"]) == len(exact["step_losses"])
    # Embeddings and gradients are the same size whatever K is.
    tb = lambda s, d: s["communication"]["phases"]["training"][f"bytes_{d}"]  # noqa: E731
    assert tb(batched, "up") == pytest.approx(tb(exact, "up"), rel=0.05)


def test_state_is_restored_from_context_when_the_cache_is_dropped(tmp_path, monkeypatch):
    """Dropping the in-process cache before every message (as a fresh process or another Ray
    actor would) must not change the result: context.state is the source of truth."""
    cfg = tiny_config("training.epochs=2")
    cached = run_local(cfg, tmp_path / "a")["step_losses"]
    original = party_store.build_party
    builds = []

    def counted(spec, rows, parties=1):
        builds.append(1)
        return original(spec, rows, parties)

    monkeypatch.setattr(party_store, "CACHE", party_store.PartyCache(size=0))
    monkeypatch.setattr(party_store, "build_party", counted)
    restored = run_local(cfg, tmp_path / "b")["step_losses"]
    assert len(builds) > 20
    np.testing.assert_allclose(restored, cached, rtol=1e-6)


def test_cache_is_ignored_when_context_state_is_newer():
    """A cached party whose version differs from context.state is not used."""
    cfg = tiny_config()
    exp = Experiment.from_config(cfg)
    spec = exp.party_spec(0)
    ctx = _context(1)
    rows = {"train": exp.splits.train, "eval": exp.splits.test}
    mine = party_store.PartyStore(ctx)
    party = mine.create(spec, "n1", rows)
    mine.save()  # version 0
    party.apply_gradient(np.arange(4), np.ones((4, 16), np.float32), 0)  # trained, not saved
    stale = party.model.input_layer.weight.detach().clone()
    # Another actor saved a newer version of this party into context.state:
    theirs = party_store.PartyStore(ctx)
    other = theirs.create(spec, "n1", rows)
    theirs.save()  # version 1
    # this process still caches version 0
    party_store.CACHE.put((7, 1), party_store.Cached("n1", 0, party, spec))
    restored = party_store.PartyStore(ctx).load()
    assert restored is not party and restored is not other
    assert not np.allclose(restored.model.input_layer.weight.detach(), stale)
    np.testing.assert_array_equal(
        restored.model.input_layer.weight.detach(), other.model.input_layer.weight.detach()
    )


def test_party_failure_names_the_party(tmp_path, monkeypatch):
    from vflfs.strategies.vfl import VFL

    original = VFL.party_spec

    def broken(self, experiment, m):
        spec = original(self, experiment, m)
        if m == 1:
            spec["model"]["activation"] = "nosuch"
        return spec

    monkeypatch.setattr(VFL, "party_spec", broken)
    with pytest.raises(PartyError, match=r"party 1 failed in 'query.setup'.*nosuch"):
        run_local(tiny_config(), tmp_path)
    assert not (tmp_path / "results.json").exists()
    assert "party 1" in (tmp_path / "error.txt").read_text()


def test_results_files(tmp_path):
    summary = run_local(tiny_config("training.epochs=4 training.patience=1"), tmp_path)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["test_metric"] == summary["test_metric"]
    lines = (tmp_path / "history.csv").read_text().splitlines()
    assert lines[0].startswith("epoch,train_loss,val_loss,val_metric,test_loss,test_metric")
    assert len(lines) == 1 + summary["epochs_run"]
    assert (tmp_path / "config.yaml").read_text().count("training:") == 1
    comm = summary["communication"]["phases"]
    assert set(comm) == {"setup", "training", "evaluation", "summary"}
    assert all(comm[p]["bytes_up"] > 0 for p in comm)
    assert comm["setup"]["bytes_down"] > 0 and comm["training"]["bytes_down"] > 0
    # Evaluation embeddings: rows x 16 float32 per party per epoch, plus framing.
    n_eval = summary["samples"]["val"] + summary["samples"]["test"]
    per_epoch = comm["evaluation"]["bytes_up"] / summary["epochs_run"]
    assert 3 * n_eval * 16 * 4 <= per_epoch <= 3 * n_eval * 16 * 4 * 1.05
    assert summary["selection"]["ratio"] == 1.0
    assert lines[0].endswith(
        "selected_features,selection_ratio,mb,training_mb,prediction_bytes_per_sample,wall_s,stage"
    )
    assert summary["prediction_bytes_per_sample"] == 3 * 16 * 4  # 3 parties, 16 float32
    # Input-layer column norms of every feature, per party (what the report draws).
    assert [imp["party"] for imp in summary["importance"]] == [0, 1, 2]
    assert all(imp["kind"] == "weight_norm" for imp in summary["importance"])
    assert [len(imp["values"]) for imp in summary["importance"]] == [14, 13, 13]
    assert all(v > 0 for imp in summary["importance"] for v in imp["values"])


def test_training_rows_can_be_scored(tmp_path):
    summary = run_local(tiny_config("training.epochs=3 training.score_train=true"), tmp_path)
    assert 0.4 < summary["train_metric"] <= 1.0
    header = (tmp_path / "history.csv").read_text().splitlines()[0]
    assert {"train_loss", "train_eval_loss", "train_metric"} <= set(header.split(","))


def test_replies_arriving_in_any_order_give_the_same_run(tmp_path):
    """Replies come back in arrival order (several Ray actors, several machines): the server
    must still pair each embedding with its own party."""
    from vflfs.client_app.app import app as client_app
    from vflfs.federation import LocalGrid
    from vflfs.server_app.run import run_experiment

    class Reversed(LocalGrid):
        def pull_messages(self, message_ids):
            return list(reversed(list(super().pull_messages(message_ids))))

    cfg = tiny_config("training.epochs=2")
    expected = run_local(cfg, tmp_path / "a")["step_losses"]
    got = run_experiment(Reversed(client_app, 3), cfg, tmp_path / "b")["step_losses"]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_party_on_kept_features_starts_as_a_model_built_on_them():
    """A refit's (or a kept count's) party draws its input layer at the scale of the kept
    columns' fan-in, as a model built on them alone: the full layer's draws for those columns,
    scaled by sqrt(all / kept) (torch draws weight and bias within 1/sqrt(fan-in))."""
    exp = Experiment.from_config(tiny_config())
    spec = exp.party_spec(0)
    rows = {"train": exp.splits.train, "eval": exp.splits.test}
    full = party_store.PartyStore(_context(1)).create(spec, "n1", rows)
    kept = [0, 3]
    refit = party_store.PartyStore(_context(2)).create(
        {**spec, "keep": {"features": kept}}, "n2", rows
    )
    n = full.n_features
    layer, wide = refit.model.input_layer, full.model.input_layer
    scale = (n / len(kept)) ** 0.5
    np.testing.assert_allclose(
        layer.weight.detach(), wide.weight.detach()[:, kept] * scale, rtol=1e-6
    )
    np.testing.assert_allclose(layer.bias.detach(), wide.bias.detach() * scale, rtol=1e-6)
    bound = 1 / len(kept) ** 0.5
    assert float(layer.weight.abs().max()) <= bound * (1 + 1e-6)
    assert float(layer.weight.abs().max()) > 2 / n**0.5  # not at every column's scale
    # Only the input layer: the kept party's other layers are the full party's
    later = [p.detach() for p in refit.model.bottom.net[1:].parameters()]
    for a, b in zip(later, full.model.bottom.net[1:].parameters(), strict=True):
        np.testing.assert_array_equal(a, b.detach())


def _context(node: int) -> Context:
    """A party node's empty context (run 7), as a SuperNode starts one."""
    return Context(run_id=7, node_id=node, node_config={}, state=RecordDict(), run_config={})
