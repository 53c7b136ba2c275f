"""``vflfs submit``: a deployment run's outcome as the command's exit status, and ``error.txt``
for every failure, on a real TLS SuperLink and SuperNodes on loopback.

The shared stack (``conftest.deployment``) serves a failing run (the completed one, with every
party proving its identity key, is tests/test_deployment.py's TLS run); a SuperLink killed
mid-run (``-m extended``) gets a stack of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from vflfs.runtime.submit import (
    EXIT_FAILED,
    EXIT_LOST,
    EXIT_NOT_SUBMITTED,
    EXIT_STOPPED,
    conclude,
    follow,
    parse_submission,
)
from vflfs.server_app.interrupted import ExitWatch

from deployment_stack import run_config, start_deployment, submit
from flower_procs import REPO, tool


def test_the_submission_arguments_are_read_as_flwr_run_reads_them(tmp_path):
    got = parse_submission(
        [".", "vfl", "--stream", "-c", f"hydra-overrides='a=1 b=2' output-dir='{tmp_path}'",
         "--format", "json", "--federation-config=num-supernodes=2"]
    )  # fmt: skip
    assert got.superlink == "vfl" and got.output_dir == tmp_path
    assert "--stream" not in got.flwr_args and "--format" not in got.flwr_args
    assert got.flwr_args[-1] == "--federation-config=num-supernodes=2"


def test_the_outcome_is_written_where_the_run_left_none(tmp_path):
    lost = tmp_path / "lost"
    lost.mkdir()
    assert conclude(9, None, lost, 60) == EXIT_LOST
    assert "run 9 the SuperLink stopped answering for 60 s" in (lost / "error.txt").read_text()
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    (stopped / "error.txt").write_text("the ServerApp's own reason\n")
    status = {"status": "finished:stopped", "status-details": "stopped by user"}
    assert conclude(9, status, stopped, 60) == EXIT_STOPPED
    assert (stopped / "error.txt").read_text() == "the ServerApp's own reason\n"
    assert conclude(9, {"status": "finished:completed"}, tmp_path / "absent", 60) == 0


class ScriptedStatus:
    """``flwr ls``'s answers in order (None: the call timed out or failed)."""

    def __init__(self, answers: list[dict | None]) -> None:
        self.answers = iter(answers)

    def status(self, run_id: int) -> dict | None:
        return next(self.answers)


def test_one_unanswered_status_check_is_not_a_lost_superlink():
    done = {"status": "finished:completed"}
    assert follow(ScriptedStatus([None, None, done]), 1, poll=0, lost_after=0) == done
    assert follow(ScriptedStatus([None, {"status": "running"}, None, None, done]), 1, 0, 0) == done
    assert follow(ScriptedStatus([None, None, None, done]), 1, poll=0, lost_after=0) is None
    assert follow(ScriptedStatus([None] * 3 + [done]), 1, poll=0, lost_after=3600) == done


def test_an_ended_run_with_a_checkpoint_is_told_to_resume(tmp_path):
    # A ServerApp process killed after a checkpoint: vflfs submit's error.txt says how to go on;
    # a ServerApp that Flower ends (its SuperLink lost) says the same in its own error.txt.
    killed, ended = tmp_path / "killed", tmp_path / "ended"
    for out in (killed, ended):
        out.mkdir()
        (out / "checkpoint.pt").write_bytes(b"")
    status = {"status": "finished:failed", "status-details": "No heartbeat received from the task"}
    assert conclude(9, status, killed, 60) == EXIT_FAILED
    lines = (killed / "error.txt").read_text().splitlines()
    assert lines[0] == "RunEnded: run 9 finished:failed: No heartbeat received from the task"
    assert f"checkpoint is in {killed}" in lines[1] and "resume=true" in lines[1]
    ExitWatch(ended).on_exit()
    lines = (ended / "error.txt").read_text().splitlines()
    assert lines[0].startswith("RunInterrupted: ") and "resume=true" in lines[1]


@pytest.mark.heavy  # the deployment stack (a SuperLink, SuperNodes)
def test_a_failing_run_exits_non_zero_and_leaves_error_txt(deployment, party_files, tmp_path):
    out = tmp_path / "out"
    done = submit(deployment, run_config(party_files, out, "training.epochs=0"))
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "finished:failed" in done.stderr
    assert "training.epochs must be >= 1" in (out / "error.txt").read_text()


@pytest.mark.heavy  # the deployment stack (a SuperLink, SuperNodes)
def test_a_refused_submission_has_its_own_exit_code(deployment, tmp_path):
    done = submit(deployment, "no-such-key=1")
    assert done.returncode == EXIT_NOT_SUBMITTED, done.stdout + done.stderr
    assert "not submitted" in done.stderr


@pytest.mark.extended
def test_a_lost_superlink_exits_with_its_code_and_leaves_error_txt(party_files, tmp_path):
    with start_deployment(tmp_path / "stack", party_files) as stack:
        out = tmp_path / "out"
        extra = "training.epochs=40 training.local_steps=1 deployment.superlink_timeout=10"
        args = [tool("vflfs"), "submit", "--poll", "1", "--lost-after", "45", ".",
                stack.connection, "-c", run_config(party_files, out, extra)]  # fmt: skip
        proc = subprocess.Popen(
            args, env=stack.env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        try:
            node = stack.supernodes[0]
            deadline = time.monotonic() + 300
            while node.log().count("Receiving: train.step") < 2:  # training is on
                assert time.monotonic() < deadline and proc.poll() is None, node.log()
                time.sleep(1)
            os.kill(stack.superlink.proc.pid, signal.SIGKILL)
            stack.superlink.proc.wait(30)
            output, _ = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == EXIT_LOST, output
        error = (out / "error.txt").read_text()
        # The ServerApp's own record: its SuperLink watch fired, or Flower's monitor ended it.
        assert error.startswith("RunInterrupted: ") and "SuperLink" in error, error
        assert not (out / "results.json").exists()
