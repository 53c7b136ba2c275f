"""LESS-VFL, local lasso and group lasso over the real ClientApp, in process (LocalGrid)."""

from __future__ import annotations

import csv
import time

import numpy as np
import pytest

from vflfs.client_app.app import app as client_app
from vflfs.client_app.flat_record import unpack
from vflfs.federation import DOWN, MB, UP, LocalGrid
from vflfs.federation.payload import from_array
from vflfs.protocol import LOCAL_SELECT, STEP, TRAIN_EMBEDDINGS
from vflfs.runtime.config import ConfigError, compose_config
from vflfs.server_app.run import run_experiment
from vflfs.strategies.less_vfl import LessVFL

from helpers import run_local, save_npz

# A small linear problem (9 informative columns, 3 parties) where each party appends as many
# Gaussian-noise columns as it has real ones: 3 real + 3 spurious per party.
SMALL = (
    "dataset.params.n_samples=1200 dataset.params.n_features=9 dataset.params.n_informative=9 "
    "dataset.params.n_redundant=0 dataset.params.n_clusters_per_class=1 "
    "+dataset.params.class_sep=1.5 model=linear training.batch_size=50 training.lr=0.05 "
    "training.patience=null training.epochs=14"
)
LESS = (
    "strategy=less_vfl noise.ratio=1.0 strategy.pretrain_epochs=10 strategy.party.lam=0.5 "
    "strategy.party.epochs=30 strategy.server.epochs=30 strategy.server.lam=0.1 "
    "strategy.party.path_points=0 "  # the paper's stage 3: one fixed lambda
    "strategy.select=null"  # the paper: VFL continues on stage 3's selection
)


class TimedRecorder:
    """An observer keeping every message with the time the server saw it."""

    def __init__(self) -> None:
        self.messages: list[tuple[float, str, int, str, object]] = []

    def __call__(self, direction, party, operation, content) -> None:
        self.messages.append((time.time(), direction, party, operation, content))


@pytest.fixture(scope="module")
def less_run(tmp_path_factory):
    """One LESS-VFL run with its message log, and the party contexts it left behind."""
    out = tmp_path_factory.mktemp("less")
    recorder = TimedRecorder()
    grid = LocalGrid(client_app, 3)
    summary = run_experiment(grid, compose_config(f"{SMALL} {LESS}"), out, [recorder])
    return summary, recorder, grid, out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """VFL (original): all features, no spurious ones."""
    return run_local(compose_config(f"{SMALL} strategy=vfl"), tmp_path_factory.mktemp("vfl"))


def test_stage3_sends_no_message(less_run):
    summary, recorder, _, _ = less_run
    stage3 = summary["extra"]["stage3"]["parties"]
    assert len(stage3) == 3
    for p in stage3:
        during = [m for m in recorder.messages if p["started"] < m[0] < p["ended"]]
        assert during == [], f"party {p['party']} exchanged {len(during)} messages in stage 3"
        # K_m went down before stage 3 started; its reply came back after it ended.
        select = [m for m in recorder.messages if m[3] == LOCAL_SELECT.name and m[2] == p["party"]]
        assert [m[1] for m in select] == [DOWN, UP]
        assert select[0][0] < p["started"] < p["ended"] < select[1][0]
    phases = summary["communication"]["phases"]
    assert phases["stage3"]["messages_up"] == phases["stage3"]["messages_down"] == 0
    assert phases["stage3"]["bytes_up"] == phases["stage3"]["bytes_down"] == 0
    assert phases["stage3"]["wall_s"] > 0


def test_stage2_is_one_upload_then_the_component_sets(less_run):
    summary, recorder, _, _ = less_run
    ops = [m[3] for m in recorder.messages]
    first = ops.index(TRAIN_EMBEDDINGS.name)
    # Stage 2 = one embedding upload, then K_m; the next message is the training's.
    assert ops[first : first + 12] == [TRAIN_EMBEDDINGS.name] * 6 + [LOCAL_SELECT.name] * 6
    assert ops[first + 12] == STEP.name
    assert ops.count(TRAIN_EMBEDDINGS.name) == 6
    upload = [m[4] for m in recorder.messages if m[3] == TRAIN_EMBEDDINGS.name and m[1] == UP]
    n_train = summary["samples"]["train"]
    assert [from_array(c["arrays"]["embeddings"]).shape for c in upload] == [(n_train, 16)] * 3
    phases = summary["communication"]["phases"]
    assert phases["stage2"]["bytes_up"] >= 3 * n_train * 16 * 4
    # The paper's analytic count: every training-row embedding float uploaded, 32 bits each.
    pre, post = 10, 4
    kept = sum(summary["extra"]["components_kept"])
    floats = n_train * (3 * 16 * pre + 3 * 16 + kept * post)
    assert summary["extra"]["analytic_mb"] == pytest.approx(floats * 4 / MB)


def test_less_vfl_removes_the_noise_and_keeps_accuracy(less_run, reference):
    summary, _, _, _ = less_run
    assert summary["selection"]["spurious_removed"] >= 0.8
    assert summary["selection"]["selected_features"] >= 2
    # LESS-VFL's target (Table 2): >= 0.9 x the best accuracy of VFL on the original features.
    best_reference = max(reference["test_metric"], reference["final_test_metric"])
    assert summary["final_test_metric"] >= 0.9 * best_reference
    assert summary["final_test_metric"] > 0.85
    # Reported: the best validation epoch after selection, with its selection.
    assert summary["best_epoch"] >= 10


def test_removed_features_and_components_leave_the_model(less_run):
    summary, recorder, grid, out = less_run
    stage3 = summary["extra"]["stage3"]["parties"]
    for context, p in zip(grid._state.values(), stage3, strict=True):
        model = unpack(context.state["vflfs.model"])
        weight, output = model["bottom.net.0.weight"], model["bottom.net.2.weight"]
        assert weight.shape == (64, p["features_kept"])  # the input layer lost its columns
        assert output.shape == (len(p["components"]), 64)  # the output layer lost rows
        assert p["features_kept"] < 6
    assert sum(summary["extra"]["components_kept"]) < 48  # stage 2 dropped components
    # Bytes per training step drop: each step's upload carries only K_m components.
    selected_at = next(m[0] for m in recorder.messages if m[3] == LOCAL_SELECT.name)
    steps = [
        (m[0], from_array(m[4]["arrays"]["embeddings#0"]))
        for m in recorder.messages
        if m[3] == STEP.name and m[1] == UP and "embeddings#0" in m[4].get("arrays", {})
    ]
    before = [e for t, e in steps if t < selected_at]
    after = [e for t, e in steps if t > selected_at]
    assert {e.shape[1] for e in before} == {16}
    assert {e.shape[1] for e in after} <= set(summary["extra"]["components_kept"])
    assert np.mean([e.nbytes for e in after]) < np.mean([e.nbytes for e in before])
    history = (out / "history.csv").read_text().splitlines()
    header = history[0].split(",")
    assert {"analytic_mb", "components_kept", "spurious_removed"} <= set(header)
    col = header.index("components_kept")
    kept = [int(line.split(",")[col]) for line in history[1:]]
    assert kept[:10] == [48] * 10 and kept[10:] == [sum(summary["extra"]["components_kept"])] * 4


def test_local_lasso_uploads_no_embedding_and_keeps_every_component(tmp_path):
    cfg = compose_config(
        f"{SMALL} strategy=local_lasso noise.ratio=1.0 training.epochs=4 "
        "strategy.pretrain_epochs=2 strategy.party.epochs=5 strategy.party.lam=3.0 "
        "strategy.party.path_points=0 strategy.select=null"
    )
    summary = run_local(cfg, tmp_path)
    assert summary["extra"]["components_kept"] == [16, 16, 16]
    stage2 = summary["communication"]["phases"]["stage2"]
    assert stage2["messages_up"] == 3  # the replies to the K_m messages, nothing uploaded
    assert stage2["bytes_up"] < summary["samples"]["train"] * 4  # not one embedding column
    assert summary["communication"]["phases"]["stage3"]["messages_up"] == 0
    assert summary["selection"]["selected_features"] < 18


def test_defaults_pretrain_until_validation_stops_then_choose_the_count(tmp_path):
    """The defaults: pre-training until validation stops improving, stage 3's path scores
    every feature (one float each travels), the kept count is chosen on validation over
    them, and the real columns outrank the noise."""
    cfg = compose_config(
        f"{SMALL} strategy=local_lasso noise.ratio=1.0 training.epochs=12 training.patience=2 "
        "strategy.party.epochs=8 strategy.select.refit_patience=1"
    )
    summary = run_local(cfg, tmp_path)
    extra = summary["extra"]
    assert 2 <= extra["selection_epoch"] < 12  # stopped by validation, not the budget
    scores = [np.asarray(p["scores"]) for p in extra["stage3"]["parties"]]
    assert [len(s) for s in scores] == [6, 6, 6]
    spurious = [np.isin(np.arange(6), p["spurious"]) for p in summary["parties"]]
    real = np.concatenate([s[~f] for s, f in zip(scores, spurious, strict=True)])
    noise = np.concatenate([s[f] for s, f in zip(scores, spurious, strict=True)])
    assert np.median(real) > np.max(noise)
    tried = extra["count_choice"]["tried"]
    # The pre-trained model stands for all 18 features: not trained again.
    assert tried[0]["k"] == 18 and tried[0]["dense"]
    assert tried[0]["epochs"] == [0, extra["selection_epoch"]]
    assert tried[1]["epochs"][0] == extra["selection_epoch"]
    assert [c["k"] for c in tried[:5]] == [18, 9, 4, 2, 1]
    assert extra["count_choice"]["refit"]["k"] == extra["count_choice"]["chosen"]
    assert summary["selection"]["selected_features"] == extra["count_choice"]["chosen"]
    assert summary["selection"]["spurious_removed"] >= 0.75  # 7 of the 9 noise columns
    assert summary["test_metric"] > 0.85


def test_the_count_of_every_feature_is_also_trained_as_the_vfl_run(tmp_path):
    """Once the count is chosen and trained again, the count choice trains every feature and
    component as strategy=vfl trains them (the pre-trained model stood for them until then),
    and weighs that model too: its epochs score as a vfl run's do."""
    common = f"{SMALL} noise.ratio=1.0 training.epochs=12 training.patience=2"
    vfl = run_local(compose_config(f"{common} strategy=vfl"), tmp_path / "vfl")
    lasso = compose_config(
        f"{common} strategy=local_lasso strategy.party.epochs=8 strategy.select.refit_patience=1"
    )
    run = run_local(lasso, tmp_path / "lasso")
    choice = run["extra"]["count_choice"]
    plain = choice["plain"]
    assert plain["plain"] and plain["k"] == 18 and plain["per_party"] == [6, 6, 6]
    assert plain["epochs"][0] == choice["refit"]["epochs"][1]  # after the second training
    assert not any(c["plain"] for c in choice["tried"])
    # results.json gives each party the reported model's features; the plain model, trained
    # last, held every feature when the run ended
    parties = run["parties"]
    assert sum(len(p["selected"]) for p in parties) == run["selection"]["selected_features"] < 18
    assert [len(p["selected_last"]) for p in parties] == [6, 6, 6]
    first, stop = plain["epochs"]
    assert stop - first == vfl["epochs_run"]

    def rows(folder, first: int, stop: int) -> list[list[float]]:
        with open(folder / "history.csv", newline="") as f:
            history = list(csv.DictReader(f))[first:stop]
        return [[float(r[c]) for c in ("train_loss", "val_loss", "val_metric")] for r in history]

    vfl_rows = rows(tmp_path / "vfl", 0, vfl["epochs_run"])
    assert np.allclose(rows(tmp_path / "lasso", first, stop), vfl_rows)


def test_group_lasso_applies_the_prox_every_step_then_prunes(tmp_path):
    """With a huge lambda the prox zeroes every party column and every server column at the
    first step; after ``lasso_epochs`` the zero columns leave the models."""
    cfg = compose_config(
        f"{SMALL} strategy=group_lasso noise.ratio=1.0 training.epochs=3 strategy.lam=1000 "
        "strategy.lam_server=1000 strategy.lasso_epochs=2 strategy.path.enabled=false"
    )
    summary = run_local(cfg, tmp_path)
    rows = (tmp_path / "history.csv").read_text().splitlines()
    header = rows[0].split(",")
    selected = [int(r.split(",")[header.index("selected_features")]) for r in rows[1:]]
    kept = [int(r.split(",")[header.index("components_kept")]) for r in rows[1:]]
    assert selected == [0, 0, 0] and kept == [0, 0, 0]
    assert summary["extra"]["components_kept"] == [0, 0, 0]
    assert summary["communication"]["phases"]["prune"]["round_trips"] == 1
    assert summary["selection"]["spurious_removed"] == 1.0


def test_group_lasso_with_small_lambda_trains(tmp_path):
    cfg = compose_config(
        f"{SMALL} strategy=group_lasso noise.ratio=1.0 training.epochs=5 strategy.lam=0.001 "
        "strategy.optimizer=adam strategy.path.enabled=false"
    )
    summary = run_local(cfg, tmp_path)
    assert summary["final_test_metric"] > 0.85
    assert "prune" not in summary["communication"]["phases"]  # lasso_epochs: null = all


def test_pretraining_must_leave_epochs_for_training(tmp_path):
    cfg = compose_config(f"{SMALL} strategy=less_vfl strategy.pretrain_epochs=14")
    with pytest.raises(ConfigError, match="pretrain_epochs"):
        run_local(cfg, tmp_path)
    assert "pretrain_epochs" in (tmp_path / "error.txt").read_text()


def test_selection_survives_a_fresh_process_per_message(tmp_path, monkeypatch):
    """Dropping the in-process cache before every message (a fresh process, another Ray actor)
    must not change a LESS-VFL run: the shrunk model lives in context.state."""
    from vflfs.client_app import party_store

    cfg = compose_config(
        f"{SMALL} {LESS} training.epochs=4 strategy.pretrain_epochs=2 "
        "strategy.party.epochs=3 strategy.server.epochs=3"
    )
    cached = run_local(cfg, tmp_path / "a")
    monkeypatch.setattr(party_store, "CACHE", party_store.PartyCache(size=0))
    restored = run_local(cfg, tmp_path / "b")
    assert restored["extra"]["components_kept"] == cached["extra"]["components_kept"]
    assert sum(cached["extra"]["components_kept"]) < 48
    np.testing.assert_allclose(restored["step_losses"], cached["step_losses"], rtol=1e-6)


def test_a_pretraining_that_learned_stops_on_its_patience_alone():
    """The steps floor (here 50 steps of one batch) holds the pre-training back only while its
    best validation score is no better than the majority class's; once it has learned
    something, ``pretrain_patience`` epochs without a better score end it."""
    from vflfs.strategies import RunResult

    strategy = LessVFL(compose_config(f"{SMALL} strategy=less_vfl training.patience_steps=50"))
    strategy.epoch_steps, strategy.patience, strategy.learned_above = 1, 2, 0.6
    strategy.stage = "pretrain"

    def after(best: float, waited: int) -> RunResult:
        rows = [{"epoch": 0, "val_metric": best}]
        rows += [{"epoch": e, "val_metric": best - 0.05} for e in range(1, waited + 1)]
        return RunResult("less_vfl", "accuracy", history=rows)

    assert strategy.stop_early(2, after(0.8, 2))  # learned: two epochs
    assert not strategy.stop_early(1, after(0.8, 1))
    assert not strategy.stop_early(2, after(0.55, 2))  # at the majority class: the floor
    assert strategy.stop_early(50, after(0.55, 50))
    strategy.stage = "select"  # a count's training: the floor as for every training
    assert not strategy.stop_early(2, after(0.8, 2))
    # the path's warm-up: the same rule (STG on the same settings)
    from vflfs.strategies.stg import STG

    gates = STG(compose_config(f"{SMALL} strategy=stg training.patience_steps=50"))
    gates.epoch_steps, gates.patience, gates.learned_above = 1, 2, 0.6
    gates.stage = "warmup"
    assert gates.stop_early(2, after(0.8, 2))
    assert not gates.stop_early(2, after(0.55, 2)) and gates.stop_early(50, after(0.55, 50))


def stage2_run(tmp_path, y_of) -> tuple[dict, list[str]]:
    """less_vfl with its adaptive pre-training and stage-2 path on 900 rows of 12 Gaussian
    columns (three parties), labels ``y_of(X)``; the summary and the operations sent."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(900, 12))
    path = save_npz(tmp_path / "data.npz", X=x, y=y_of(x, rng))
    recorder = TimedRecorder()
    cfg = compose_config(
        f"dataset=npz dataset.params.path={path} strategy=less_vfl training.epochs=12 "
        "training.batch_size=64 strategy.server.epochs=24 strategy.party.epochs=6 "
        "strategy.select.refit_patience=1"
    )
    summary = run_local(cfg, tmp_path / "out", observers=[recorder])
    return summary, [op for _, direction, _, op, _ in recorder.messages if direction == DOWN]


def test_stage2_reads_the_embeddings_of_a_pretraining_that_learned(tmp_path):
    summary, sent = stage2_run(tmp_path, lambda x, rng: (x[:, 0] + x[:, 4] > 0).astype(int))
    stage2 = summary["extra"]["stage2"]
    assert "skipped" not in stage2 and stage2["path"]
    assert sent.count(TRAIN_EMBEDDINGS.name) == 3


def test_stage2_is_skipped_after_a_pretraining_that_learned_nothing(tmp_path):
    """Labels independent of every column: the pre-trained model's validation losses are no
    lower than the class frequencies', so no embedding is uploaded and every party keeps
    every component for stage 3, as local_lasso."""
    summary, sent = stage2_run(tmp_path, lambda x, rng: rng.integers(0, 2, len(x)))
    assert summary["extra"]["stage2"] == {"skipped": "pre-training learned nothing"}
    assert TRAIN_EMBEDDINGS.name not in sent and sent.count(LOCAL_SELECT.name) == 3
    assert summary["extra"]["components_kept"] == [16, 16, 16]
