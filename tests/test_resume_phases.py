"""Strategies with phases of their own resume too: a filter stopped in its count choice or
after its fixed share's selection, and LESS-VFL stopped in its pre-training or in its count
choice, end as the runs never stopped (history, count choice, scores, selection, byte
counts)."""

from __future__ import annotations

import pytest
from test_privacy import Recorder
from test_resume import EVERY, history, reference_history, same_run, stopped_run

from vflfs.client_app.app import app as client_app
from vflfs.client_app.store import RUN_KEY
from vflfs.federation import LocalGrid
from vflfs.protocol import LOCAL_SELECT, TRAIN_EMBEDDINGS
from vflfs.runtime.cli import run_job
from vflfs.runtime.config import compose_config
from vflfs.runtime.results import PARTY_STATE
from vflfs.server_app.run import run_experiment
from vflfs.strategies import make_strategy
from vflfs.strategies.checkpoint import unsupported
from vflfs.strategies.fstat_filter import FStatFilter

from helpers import tiny_config

FILTER = f"strategy=fstat_filter strategy.fstat.key_bits=512 training.epochs=4 {EVERY}"
# test_less_vfl's small problem (3 real + 3 noise columns at each of 3 parties), LESS-VFL with
# its defaults: pre-training until validation stops, stages 2 and 3, the count choice.
SMALL = (
    "dataset.params.n_samples=1200 dataset.params.n_features=9 dataset.params.n_informative=9 "
    "dataset.params.n_redundant=0 dataset.params.n_clusters_per_class=1 "
    "+dataset.params.class_sep=1.5 model=linear training.batch_size=50 training.lr=0.05 "
    "noise.ratio=1.0 training.epochs=8 training.patience=2 strategy.party.epochs=4 "
    f"strategy.server.epochs=4 {EVERY}"
)
LESS = f"{SMALL} strategy=less_vfl strategy.select.refit_patience=1"


def first_epochs(choice: dict) -> list[int]:
    """The first epoch of each training of a count choice, in the order they ran."""
    rows = [*choice["tried"], *(choice[k] for k in ("refit", "plain") if k in choice)]
    return sorted(r["epochs"][0] for r in rows if not r["dense"])


@pytest.fixture(scope="module")
def filter_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("filter")
    return run_job(tiny_config(FILTER), out), out


# The first training (every feature, as the vfl run), one of the halving's, the last one.
@pytest.mark.parametrize("which", [0, 2, -1])
def test_a_filter_resumes_in_its_count_choice(tmp_path, monkeypatch, filter_reference, which):
    """The scoring is not run again (its traffic comes back with the checkpoint); the
    trainings finished before the stop are taken from the checkpoint's record, and the one it
    stopped in goes on from its epoch."""
    reference, ref_dir = filter_reference
    choice = reference["extra"]["count_choice"]
    starts = first_epochs(choice)
    assert len(starts) >= 5 and choice["tried"][0]["plain"]
    out = tmp_path / "run"
    stopped_run(tiny_config(FILTER), out, starts[which] + 1, monkeypatch)
    resumed = run_job(tiny_config(f"{FILTER} resume=true"), out)
    same_run(resumed, reference)
    assert resumed["extra"]["count_choice"] == choice
    assert resumed["extra"]["filter"] == reference["extra"]["filter"]
    assert [r["after_epoch"] for r in resumed["extra"]["resumed"]] == [starts[which] + 1]
    assert history(out) == history(ref_dir)


def untimed(stage3: dict) -> list[dict]:
    """Stage 3's record at each party without its wall-clock times."""
    return [
        {k: v for k, v in p.items() if k not in ("started", "ended")} for p in stage3["parties"]
    ]


@pytest.fixture(scope="module")
def less_reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("less")
    return run_job(compose_config(LESS), out), out


# In stage 1; in a count's training; in the last training, every feature as the vfl run
# (trained at vfl's patience, then the count choice's again).
@pytest.mark.parametrize(("stage", "index"), [("pretrain", 1), ("select", 2), ("select", -1)])
def test_less_vfl_resumes_in_its_pretraining_and_in_its_count_choice(
    tmp_path, monkeypatch, less_reference, stage, index
):
    """Stopped in stage 1, the resumed run goes on to stages 2 and 3; stopped in a count's
    training, it has their outcome back (stage 3's scores, the parties' components) and sends
    them no message again."""
    reference, ref_dir = less_reference
    choice = reference["extra"]["count_choice"]
    assert choice["tried"][0]["dense"] and "plain" in choice and "refit" in choice
    epochs = [r["epoch"] for r in reference_history(ref_dir) if r["stage"] == stage]
    at = epochs[index] if stage == "pretrain" else first_epochs(choice)[index] + 1
    out = tmp_path / "run"
    stopped_run(compose_config(LESS), out, at, monkeypatch)
    recorder = Recorder()
    # as run_job runs it (engine=local: the parties' states in the output folder), observed
    grid = LocalGrid(client_app, 3, run_config={RUN_KEY: str(out / PARTY_STATE)})
    resumed = run_experiment(grid, compose_config(f"{LESS} resume=true"), out, [recorder])
    same_run(resumed, reference)
    assert resumed["extra"]["count_choice"] == choice
    assert untimed(resumed["extra"]["stage3"]) == untimed(reference["extra"]["stage3"])
    # stopped in the count choice: stages 2 and 3 are not run again
    sent = {operation for _, _, operation, _ in recorder.messages}
    assert {TRAIN_EMBEDDINGS.name, LOCAL_SELECT.name} & sent == (
        set() if stage == "select" else {TRAIN_EMBEDDINGS.name, LOCAL_SELECT.name}
    )
    assert history(out) == history(ref_dir)


@pytest.mark.parametrize("name", ["random_fs", "gini_filter"])
def test_a_filter_keeping_a_fixed_share_resumes_after_its_selection(tmp_path, monkeypatch, name):
    """The selection (scores, the parties' removal of the rest) is not done again."""
    bits = " strategy.gini.key_bits=512" if name == "gini_filter" else ""
    options = (
        f"strategy={name} strategy.keep_fraction=0.25{bits} training.epochs=4 "
        f"training.patience=null {EVERY}"
    )
    reference = run_job(tiny_config(options), tmp_path / "ref")
    out = tmp_path / "run"
    stopped_run(tiny_config(options), out, 1, monkeypatch)
    same_run(run_job(tiny_config(f"{options} resume=true"), out), reference)
    assert reference["selection"]["selected_features"] == 10


STRATEGIES = ("vfl", "stg", "fedsdg_fs", "group_lasso", "less_vfl", "local_lasso")
FILTERS = ("gini_filter", "fstat_filter", "variance_filter", "random_fs")


def test_every_strategy_keeps_checkpoints_but_with_the_secure_layer():
    """With its defaults, a filter with a fixed share and group lasso at a fixed lambda too;
    a run with the secure interactive layer writes none, and says why."""
    for name in (*STRATEGIES, *FILTERS):
        assert unsupported(make_strategy(tiny_config(f"strategy={name}"))) is None, name
    for name in FILTERS:
        fixed = make_strategy(tiny_config(f"strategy={name} strategy.keep_fraction=0.5"))
        assert unsupported(fixed) is None, name
    lasso = make_strategy(tiny_config("strategy=group_lasso strategy.path.enabled=false"))
    assert unsupported(lasso) is None
    secure = make_strategy(tiny_config("strategy=vfl secure=plaintext"))
    assert "secure interactive layer" in unsupported(secure)


def test_a_strategy_with_a_fit_of_its_own_writes_no_checkpoint():
    """A subclass of a strategy that resumes, whose ``fit`` does other things: nothing says
    its fit can re-enter where a checkpoint left it, so it keeps none."""

    class OwnPhases(FStatFilter):
        name = "fstat_filter_own_phases"

        def fit(self, federation, experiment, result, on_epoch) -> None:
            super().fit(federation, experiment, result, on_epoch)

    assert "'fstat_filter_own_phases' trains in phases of its own" in unsupported(
        OwnPhases(tiny_config("strategy=fstat_filter"))
    )
    assert unsupported(FStatFilter(tiny_config("strategy=fstat_filter"))) is None


def test_group_lasso_at_a_fixed_lambda_resumes_before_and_after_its_pruning(tmp_path, monkeypatch):
    options = (
        "strategy=group_lasso strategy.path.enabled=false strategy.lasso_epochs=3 "
        f"training.epochs=6 training.patience=null {EVERY}"
    )
    reference = run_job(tiny_config(options), tmp_path / "ref")
    assert reference["extra"]["pruned_at_epoch"] == 3
    for at in (1, 4):
        out = tmp_path / f"run{at}"
        stopped_run(tiny_config(options), out, at, monkeypatch)
        same_run(run_job(tiny_config(f"{options} resume=true"), out), reference)
        assert history(out) == history(tmp_path / "ref")


def test_resume_on_a_run_that_cannot_resume_says_so(tmp_path, caplog):
    """The secure interactive layer writes no checkpoint: resume=true warns and starts it."""
    cfg = tiny_config("strategy=vfl secure=plaintext training.epochs=1 resume=true")
    with caplog.at_level("WARNING", logger="vflfs"):
        run_job(cfg, tmp_path)
    assert "resume=true, but this run cannot resume: the secure interactive layer" in caplog.text
