"""Checkpoints and resume=true: a run stopped after an epoch's checkpoint and resumed ends as
the run that was never stopped (history, scores, selection, byte counts)."""

from __future__ import annotations

import json

import pytest
import torch
from test_privacy import Recorder

from vflfs.federation import DOWN, PartyError
from vflfs.federation.payload import decode
from vflfs.protocol import STEP
from vflfs.runtime.cli import run_job
from vflfs.runtime.output_folder import OutputFolderError
from vflfs.runtime.results import CHECKPOINT, HISTORY, PARTY_STATE, RESULTS
from vflfs.runtime.settings import ConfigError
from vflfs.runtime.simulation import RunFailed
from vflfs.strategies.checkpoint import FAIL_AFTER, FORMAT, StoppedAfterCheckpoint, _load

from flower_procs import ProcessTag, run_process, tool
from helpers import run_local, tiny_config

# A checkpoint at every epoch boundary (the default: one every 10 seconds), so that a run can
# stop after the epoch a test names.
EVERY = "checkpoint_every_s=0"
VFL = f"strategy=vfl training.epochs=6 training.patience=null {EVERY}"
# A short path: 3 warm-up epochs at most, 3 points of 4 epochs, a refit of 3 epochs; the
# penalty starts high enough for the refit to keep a few of the 40 features.
SHORT_PATH = (
    "training.epochs=6 strategy.path.warmup_max_epochs=3 strategy.path.start=2 "
    "strategy.path.points=3 strategy.path.max_points=3 strategy.path.steps_per_point=20 "
    f"strategy.path.refit_max_epochs=3 {EVERY}"
)
# Gate noise 0.5: on this data its choice refits two candidates, then a probe (at the default
# 1.0, one candidate and three probes), so the run stops in both kinds of refit.
STG = f"strategy=stg strategy.sigma=0.5 {SHORT_PATH}"
LASSO = f"strategy=group_lasso {SHORT_PATH}"


def stopped_run(cfg, out_dir, epoch: int, monkeypatch) -> None:
    """Run ``cfg`` until the checkpoint of ``epoch``, where it stops as if killed."""
    monkeypatch.setenv(FAIL_AFTER, str(epoch))
    with pytest.raises(StoppedAfterCheckpoint):
        run_job(cfg, out_dir)
    monkeypatch.delenv(FAIL_AFTER)
    assert (out_dir / CHECKPOINT).exists() and not (out_dir / RESULTS).exists()


def same_run(resumed: dict, reference: dict) -> None:
    """Everything but wall times and the resume's own record is the same."""
    for key in ("test_metric", "val_metric", "best_epoch", "epochs_run", "selection"):
        assert resumed[key] == reference[key], key
    assert resumed["step_losses"] == reference["step_losses"]
    assert resumed["parties"] == reference["parties"]
    assert resumed.get("path") == reference.get("path")
    assert resumed["extra"].get("path_choice") == reference["extra"].get("path_choice")
    a, b = resumed["communication"], reference["communication"]
    assert (a["bytes_up"], a["bytes_down"]) == (b["bytes_up"], b["bytes_down"])
    for phase, counts in b["phases"].items():
        assert {k: v for k, v in a["phases"][phase].items() if k != "wall_s"} == {
            k: v for k, v in counts.items() if k != "wall_s"
        }, phase


def history(out_dir) -> list[list[str]]:
    """history.csv's rows without the wall-time column."""
    lines = [line.split(",") for line in (out_dir / HISTORY).read_text().splitlines()]
    drop = lines[0].index("wall_s")
    return [row[:drop] + row[drop + 1 :] for row in lines]


def test_vfl_resumes_to_the_same_run(tmp_path, monkeypatch):
    cfg = tiny_config(VFL)
    reference = run_job(cfg, tmp_path / "ref")
    assert not (tmp_path / "ref" / CHECKPOINT).exists()  # removed once the run completed
    assert not (tmp_path / "ref" / PARTY_STATE).exists()

    out = tmp_path / "run"
    stopped_run(cfg, out, 2, monkeypatch)
    # Without resume=true the unfinished run is not replaced silently.
    with pytest.raises(OutputFolderError, match=r"after epoch 2.*resume=true.*rerun=true"):
        run_job(cfg, out)
    # Another configuration cannot continue it.
    with pytest.raises(OutputFolderError, match=r"another configuration.*training\.lr"):
        run_job(tiny_config(f"{VFL} training.lr=0.02 resume=true"), out)
    resumed = run_job(tiny_config(f"{VFL} resume=true"), out)
    same_run(resumed, reference)
    assert history(out) == history(tmp_path / "ref")
    assert [r["after_epoch"] for r in resumed["extra"]["resumed"]] == [2]
    assert not (out / CHECKPOINT).exists()
    assert json.loads((out / RESULTS).read_text())["status"] == "completed"


def test_a_run_that_restarted_resumes_its_watched_epochs(tmp_path, monkeypatch):
    """A learning rate too small to leave the uniform prediction: restarts at epochs 3 and 6.
    Stopped at epoch 4, the resumed run watches epochs 3-5 and restarts at 6 again."""
    options = f"{VFL} training.epochs=8 training.lr=1e-9"
    reference = run_job(tiny_config(options), tmp_path / "ref")
    assert [r["epoch"] for r in reference["extra"]["restarts"]] == [3, 6]
    out = tmp_path / "run"
    stopped_run(tiny_config(options), out, 4, monkeypatch)
    resumed = run_job(tiny_config(f"{options} resume=true"), out)
    same_run(resumed, reference)
    assert resumed["extra"]["restarts"] == reference["extra"]["restarts"]
    assert history(out) == history(tmp_path / "ref")


def test_the_dense_refit_starts_at_the_configured_rate_and_resumes_its_restarts(
    tmp_path, monkeypatch
):
    """The gated warm-up stalls and restarts twice (0.3 and 0.09 x the learning rate); the
    dense point's refit is trained as ``strategy=vfl`` trains: at the configured rate, with a
    stall watch of its own, so it restarts twice from its own first epochs. Stopped after its
    first restart, the resumed run ends as the reference."""
    options = (
        "strategy=stg training.lr=1e-9 training.epochs=6 strategy.path.warmup_max_epochs=9 "
        "strategy.path.points=1 strategy.path.max_points=1 strategy.path.steps_per_point=20 "
        "strategy.path.refit_max_epochs=9 strategy.path.refit_probes=0 "
        f"strategy.path.denser_probes=0 {EVERY}"
    )
    reference = run_job(tiny_config(options), tmp_path / "ref")
    restarts = reference["extra"]["restarts"]
    assert [r["lr_scale"] for r in restarts] == pytest.approx([0.3, 0.09, 0.3, 0.09])
    dense = reference["extra"]["path_choice"]["refits"][-1]
    assert (dense["point"], dense["top_k"]) == (0, None)
    # the refit's own watch: three epochs, a restart, three more, a restart; the model it
    # reports is the last restart's
    refit_first = restarts[2]["epoch"] - 3
    assert restarts[3]["epoch"] == refit_first + 6 == dense["epochs"][0]
    out = tmp_path / "run"
    stopped_run(tiny_config(options), out, restarts[2]["epoch"] + 1, monkeypatch)
    resumed = run_job(tiny_config(f"{options} resume=true"), out)
    same_run(resumed, reference)
    assert resumed["extra"]["restarts"] == restarts
    assert history(out) == history(tmp_path / "ref")


def snapshots_asked(messages: list) -> list[bool]:
    """The ``snapshot`` entry of every step request sent, where it has one."""
    configs = (decode(c) for d, _, op, c in messages if d == DOWN and op == STEP.name)
    return [bool(c["snapshot"]) for c in configs if "snapshot" in c]


def test_checkpoints_come_every_checkpoint_every_s_and_change_nothing_else(tmp_path, monkeypatch):
    """With an interval of an hour a short run writes no checkpoint (the stop asked after
    epoch 2's never comes, no party is asked to save) and ends as the run checkpointed at every
    boundary, message bytes included; a run stopped at a boundary resumes under another
    interval."""
    every, hourly = Recorder(), Recorder()
    reference = run_local(tiny_config(VFL), tmp_path / "ref", observers=[every])
    monkeypatch.setenv(FAIL_AFTER, "2")
    hourly_cfg = tiny_config(f"{VFL} checkpoint_every_s=3600")
    quiet = run_local(hourly_cfg, tmp_path / "quiet", observers=[hourly])
    monkeypatch.delenv(FAIL_AFTER)
    same_run(quiet, reference)
    asked, not_asked = snapshots_asked(every.messages), snapshots_asked(hourly.messages)
    assert len(asked) == len(not_asked) and any(asked) and not any(not_asked)

    out = tmp_path / "run"
    stopped_run(tiny_config(VFL), out, 2, monkeypatch)
    resumed = run_job(tiny_config(f"{VFL} checkpoint_every_s=3600 resume=true"), out)
    same_run(resumed, reference)
    with pytest.raises(ConfigError, match=r"checkpoint_every_s must be .* >= 0.*fix"):
        run_job(tiny_config(f"{VFL} checkpoint_every_s=-1"), tmp_path / "bad")


def test_resume_without_checkpoint_starts_afresh(tmp_path):
    summary = run_job(tiny_config(f"{VFL} training.epochs=2 resume=true"), tmp_path)
    assert summary["epochs_run"] == 2 and "resumed" not in summary["extra"]


@pytest.fixture(scope="module")
def stg_reference(tmp_path_factory) -> tuple[dict, object]:
    out = tmp_path_factory.mktemp("stg") / "ref"
    return run_job(tiny_config(STG), out), out


# Where the run stops: the stage and which of its epochs. Mid-path: after the first point (its
# points so far, its penalty); in the refits: the first's, then the last's: the dense model's,
# added once the two candidates and a probe of the path's ranking were refit (their scores and
# losses kept).
STOPS = [("warmup", 1), ("path", 5), ("refit", 1), ("refit", -2)]


@pytest.mark.parametrize(("stage", "index"), STOPS)
def test_stg_path_resumes_in_every_stage(tmp_path, monkeypatch, stg_reference, stage, index):
    reference, ref_dir = stg_reference
    assert reference["selection"]["selected_features"] < 40  # the refits keep fewer
    refits = reference["extra"]["path_choice"]["refits"]
    assert len(refits) == 4 and refits[-2]["top_k"]  # two candidates, a probe, ...
    assert refits[-1]["point"] == 0 and refits[-1]["kept"] == 40  # ... the dense model
    epochs = [r["epoch"] for r in reference_history(ref_dir) if r["stage"] == stage]
    out = tmp_path / "run"
    stopped_run(tiny_config(STG), out, epochs[index], monkeypatch)
    resumed = run_job(tiny_config(f"{STG} resume=true"), out)
    same_run(resumed, reference)
    assert history(out) == history(ref_dir)


def test_group_lasso_resumes_on_its_path(tmp_path, monkeypatch):
    cfg = tiny_config(LASSO)
    reference = run_job(cfg, tmp_path / "ref")
    path = [r["epoch"] for r in reference_history(tmp_path / "ref") if r["stage"] == "path"]
    out = tmp_path / "run"
    stopped_run(cfg, out, path[len(path) // 2], monkeypatch)
    same_run(run_job(tiny_config(f"{LASSO} resume=true"), out), reference)
    assert history(out) == history(tmp_path / "ref")


def test_fedsdg_fs_resumes_after_its_gini_phase(tmp_path, monkeypatch):
    """Embedding gates at fixed lambdas; the secure Gini phase before training is not run
    again (its traffic comes back from the checkpoint)."""
    options = (
        "strategy=fedsdg_fs strategy.gini.key_bits=512 strategy.path.enabled=false "
        f"training.epochs=4 training.patience=null {EVERY}"
    )
    reference = run_job(tiny_config(options), tmp_path / "ref")
    out = tmp_path / "run"
    stopped_run(tiny_config(options), out, 1, monkeypatch)
    same_run(run_job(tiny_config(f"{options} resume=true"), out), reference)
    assert reference["communication"]["phases"]["gini"]["round_trips"] >= 3


def reference_history(out_dir) -> list[dict]:
    lines = (out_dir / HISTORY).read_text().splitlines()
    keys = lines[0].split(",")
    rows = [dict(zip(keys, line.split(","), strict=True)) for line in lines[1:]]
    return [{**r, "epoch": int(r["epoch"])} for r in rows]


def test_party_refuses_a_state_of_another_run_or_step(tmp_path, monkeypatch):
    cfg = tiny_config(f"{VFL} training.epochs=4")
    out = tmp_path / "run"
    stopped_run(cfg, out, 1, monkeypatch)
    folder = out / PARTY_STATE / "party-1"
    # The party keeps its states of epochs 0 and 1; the checkpoint is of epoch 1's.
    newest, older = sorted(folder.glob("*.state"), key=lambda p: p.stat().st_mtime_ns)[::-1]
    resume = tiny_config(f"{VFL} training.epochs=4 resume=true")

    aside = newest.rename(tmp_path / newest.name)
    with pytest.raises(PartyError, match=r"party 1 .*older \(steps \d+\).*at step \d+"):
        run_job(resume, out)
    foreign = older.rename(folder / f"{'0' * 32}-{older.name.rsplit('-', 1)[1]}")
    with pytest.raises(PartyError, match=r"party 1 .*belongs to another run.*rerun=true"):
        run_job(resume, out)
    foreign.rename(older)
    aside.rename(newest)
    assert run_job(resume, out)["epochs_run"] == 4


@pytest.mark.extended  # two runs in Flower's simulation engine (Ray)
def test_simulation_resumes_to_the_same_run(tmp_path, monkeypatch):
    """The parties, Ray actors, save their state under the run's party-state folder."""
    reference = run_job(tiny_config(VFL), tmp_path / "ref")
    out = tmp_path / "run"
    monkeypatch.setenv(FAIL_AFTER, "3")
    with pytest.raises(RunFailed, match="StoppedAfterCheckpoint"):
        run_job(tiny_config(f"{VFL} engine=simulation"), out)
    monkeypatch.delenv(FAIL_AFTER)
    # Each party keeps its last two states: of epochs 2 and 3.
    assert len(list((out / PARTY_STATE).glob("party-*/*.state"))) == 2 * len(reference["parties"])
    resumed = run_job(tiny_config(f"{VFL} engine=simulation resume=true"), out)
    same_run(resumed, reference)
    assert history(out) == history(tmp_path / "ref")


def test_a_sweep_resumes_its_stopped_jobs(tmp_path):
    """``vflfs-run -m``: jobs killed after a checkpoint; the same command is refused naming
    resume=true, and with it continues each job in its own folder."""
    tag = ProcessTag()
    sweep = tmp_path / "sweep"
    args = [
        tool("vflfs-run"), "-m", "seed=0,1", "dataset.params.n_samples=600",
        "dataset.params.n_features=40", "device=cpu", "training.epochs=3",
        "training.patience=null", f"output_dir={sweep}", EVERY,
    ]  # fmt: skip
    first = run_process(args, env=tag.env(**{FAIL_AFTER: "1"}), cwd=tmp_path)
    jobs = sorted(sweep.iterdir())
    assert first.returncode != 0 and len(jobs) == 2, first.stdout + first.stderr
    assert all((job / CHECKPOINT).exists() for job in jobs)
    again = run_process(args, env=tag.env(), cwd=tmp_path)
    assert again.returncode == 1
    assert "checkpointed after epoch 1; fix: resume=true" in again.stdout + again.stderr
    resumed = run_process([*args, "resume=true"], env=tag.env(), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sorted(sweep.iterdir()) == jobs  # resume=true names no folder
    for job in jobs:
        results = json.loads((job / RESULTS).read_text())
        assert [r["after_epoch"] for r in results["extra"]["resumed"]] == [1]
        assert results["epochs_run"] == 3 and not (job / CHECKPOINT).exists()
    assert not tag.wait_gone(20.0)


def test_a_checkpoint_of_another_format_is_refused_with_the_fix(tmp_path):
    """A checkpoint whose pickled state has another shape (format 2: a path without its
    points' own models) is refused by name, not resumed into an error later."""
    path = tmp_path / CHECKPOINT
    torch.save({"format": FORMAT - 1}, path)
    with pytest.raises(OutputFolderError, match="another vflfs version; fix: rerun=true"):
        _load(path)
    torch.save({"format": FORMAT}, path)
    assert _load(path) == {"format": FORMAT}
