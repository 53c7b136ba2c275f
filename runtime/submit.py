"""``vflfs submit [flwr run arguments]``: launch a deployment run and exit with its outcome.

vflfs submit . vfl -c "hydra-overrides='dataset=party_files ...' output-dir='/srv/vfl/run1'"

``flwr run`` exits with 0 once the run is submitted, whatever becomes of it. This command
submits the run with ``flwr run`` (the same arguments), streams the run's log (``flwr log``),
follows its status (``flwr ls``) and exits with :data:`EXIT_CODES`' code for the status it ends
with, so that scripts and schedulers see a failure. When the run ends without results and the
run's ``output-dir`` is a folder on this machine that holds no ``error.txt``, it writes one with
the status and Flower's details (a lost SuperLink included), and, when the run left a
checkpoint, that ``resume=true`` continues it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click
from flwr.common.config import parse_config_args

from .results import ERROR, RESULTS, resume_hint, write_atomic

EXIT_COMPLETED = 0
EXIT_FAILED = 1  # finished:failed (the ServerApp raised, a party failed, a bad config...)
EXIT_STOPPED = 3  # finished:stopped (`flwr stop`)
EXIT_LOST = 4  # the SuperLink stopped answering before the run finished
EXIT_NOT_SUBMITTED = 5  # `flwr run` refused the run (bad run config, SuperLink unreachable)
EXIT_CODES = {
    "finished:completed": EXIT_COMPLETED,
    "finished:failed": EXIT_FAILED,
    "finished:stopped": EXIT_STOPPED,
}
LOST_MISSES = 3  # unanswered status checks in a row, at least, before the SuperLink counts as lost
# flwr run's options that take a value (the rest are flags or positionals).
_VALUE_OPTIONS = {"--federation", "--run-config", "-c", "--federation-config", "--format"}


@dataclass(frozen=True)
class Submission:
    """What the command needs from ``flwr run``'s arguments."""

    flwr_args: list[str]  # forwarded to flwr run (without --stream / --format)
    superlink: str | None  # the connection name, for flwr ls / flwr log
    output_dir: Path | None  # the run config's output-dir, when given


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vflfs submit",
        allow_abbrev=False,  # the rest of the line is flwr run's
        description="Submit a run with `flwr run` (same arguments), stream its log, and exit "
        f"with its outcome: {EXIT_COMPLETED} completed, {EXIT_FAILED} failed, {EXIT_STOPPED} "
        f"stopped, {EXIT_LOST} SuperLink lost, {EXIT_NOT_SUBMITTED} not submitted.",
        epilog="Example: vflfs submit . vfl -c \"hydra-overrides='...' output-dir='/abs/out'\"",
    )
    p.add_argument("--poll", type=float, default=5.0, help="seconds between status checks")
    p.add_argument(
        "--lost-after",
        type=float,
        default=60.0,
        help="seconds without an answer from the SuperLink before the run counts as lost",
    )
    p.add_argument("--quiet", action="store_true", help="do not stream the run's log")
    p.add_argument("--flwr", default="flwr", help="the flwr command (default: flwr)")
    return p


def parse_submission(args: list[str]) -> Submission:
    """Split ``flwr run``'s arguments: the connection, the output folder; drop ``--stream``
    and ``--format`` (this command streams and reads JSON itself)."""
    forwarded, positionals, run_config = [], [], []
    i = 0
    while i < len(args):
        arg = args[i]
        name, has_value, value = arg.partition("=")
        if arg == "--stream":
            i += 1
            continue
        if name in _VALUE_OPTIONS:
            value = value if has_value else (args[i + 1] if i + 1 < len(args) else "")
            step = 1 if has_value else 2
            if name in ("-c", "--run-config"):
                run_config.append(value)
            if name != "--format":
                forwarded += args[i : i + step]
            i += step
            continue
        if not arg.startswith("-"):
            positionals.append(arg)
        forwarded.append(arg)
        i += 1
    output = _output_dir(run_config)
    return Submission(
        flwr_args=forwarded,
        superlink=positionals[1] if len(positionals) > 1 else None,
        output_dir=Path(str(output)).expanduser() if output else None,
    )


def _output_dir(run_config: list[str]) -> str | None:
    """The run config's ``output-dir``; None when absent or unreadable (``flwr run`` then
    reports the bad run config itself)."""
    try:
        return parse_config_args(run_config).get("output-dir") if run_config else None
    except (ValueError, OSError, click.ClickException):
        return None


class Follower:
    """``flwr`` calls about one run on one connection."""

    def __init__(self, flwr: str, superlink: str | None) -> None:
        self.flwr = flwr
        self.superlink = [superlink] if superlink else []

    def submit(self, flwr_args: list[str]) -> tuple[int | None, str]:
        """``flwr run ... --format json``: the run id (None if refused) and what it printed."""
        done = _call([self.flwr, "run", *flwr_args, "--format", "json"], timeout=600)
        try:
            reply = json.loads(done.stdout[done.stdout.index("{") :])
        except ValueError:
            return None, done.stdout + done.stderr
        run_id = reply.get("run-id") if reply.get("success") else None
        return (int(run_id) if run_id is not None else None), done.stdout + done.stderr

    def status(self, run_id: int) -> dict | None:
        """The run's ``flwr ls`` entry, or None when the SuperLink did not answer."""
        args = ["ls", *self.superlink, "--run-id", str(run_id), "--format", "json"]
        try:
            done = _call([self.flwr, *args], timeout=60)
            runs = json.loads(done.stdout[done.stdout.index("{") :])["runs"]
        except (ValueError, KeyError, subprocess.TimeoutExpired):
            return None
        return next((r for r in runs if int(r["run-id"]) == run_id), None)

    def stream_log(self, run_id: int) -> subprocess.Popen:
        return subprocess.Popen(
            [self.flwr, "log", str(run_id), *self.superlink, "--stream"],
            stdin=subprocess.DEVNULL,
        )


def follow(follower: Follower, run_id: int, poll: float, lost_after: float) -> dict | None:
    """Poll the run's status until it has finished; None when the SuperLink is lost: no answer
    for ``lost_after`` seconds and to at least :data:`LOST_MISSES` checks in a row (one
    ``flwr ls`` that times out on a loaded machine is not a lost SuperLink)."""
    last_answer, misses = time.monotonic(), 0
    while True:
        status = follower.status(run_id)
        if status is not None:
            last_answer, misses = time.monotonic(), 0
            if str(status.get("status", "")).startswith("finished"):
                return status
        else:
            misses += 1
            if misses >= LOST_MISSES and time.monotonic() - last_answer > lost_after:
                return None
        time.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    options, rest = parser().parse_known_args(argv)
    submission = parse_submission(rest)
    follower = Follower(options.flwr, submission.superlink)
    run_id, printed = follower.submit(submission.flwr_args)
    if run_id is None:
        print(printed.strip(), file=sys.stderr)
        print("vflfs submit: the run was not submitted", file=sys.stderr)
        return EXIT_NOT_SUBMITTED
    print(f"vflfs submit: run {run_id} submitted", file=sys.stderr, flush=True)
    log = None if options.quiet else follower.stream_log(run_id)
    try:
        status = follow(follower, run_id, options.poll, options.lost_after)
    finally:
        _stop_log(log)
    return conclude(run_id, status, submission.output_dir, options.lost_after)


def conclude(run_id: int, status: dict | None, out: Path | None, lost_after: float) -> int:
    """Report the outcome, leave ``error.txt`` where the run left no outcome; the exit code."""
    if status is None:
        code = EXIT_LOST
        text = f"the SuperLink stopped answering for {lost_after:.0f} s before the run finished"
        name = "lost"
    else:
        name = str(status.get("status"))
        code = EXIT_CODES.get(name, EXIT_FAILED)
        details = status.get("status-details")
        text = f"{name}: {details}" if details else name
    print(f"vflfs submit: run {run_id} {text} (exit {code})", file=sys.stderr)
    if code != EXIT_COMPLETED and out is not None and _no_outcome(out):
        note = resume_hint(out)
        write_atomic(
            out / ERROR, f"RunEnded: run {run_id} {text}\n" + (f"{note}\n" if note else "")
        )
        print(f"vflfs submit: wrote {out / ERROR}", file=sys.stderr)
    return code


def _no_outcome(out: Path) -> bool:
    """A folder on this machine in which the run left neither results nor an error."""
    return out.is_dir() and not (out / ERROR).exists() and not (out / RESULTS).exists()


def _stop_log(log: subprocess.Popen | None, grace: float = 10.0) -> None:
    """Let ``flwr log`` print the run's last lines, then stop it."""
    if log is None:
        return
    try:
        log.wait(grace)
    except subprocess.TimeoutExpired:
        log.terminate()
        try:
            log.wait(grace)
        except subprocess.TimeoutExpired:
            log.kill()


def _call(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
