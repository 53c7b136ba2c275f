"""Faults on loopback: do runs survive a paused or a killed SuperNode?

One loopback deployment as ``tests/deployment_stack.py`` sets it up (a TLS SuperLink with
SuperNode authentication, two registered SuperNodes each reading its own party file of a small
MADELON-like set, holding its identity key and keeping a state folder). ``--runs`` runs on it,
one after the other, each with one fault drawn at random (``--seed``):

pause  SIGSTOP to a random SuperNode's process group once it has received a random number of
       training steps of the run, for a random ``--pause-min`` .. ``--pause-max`` seconds, then
       SIGCONT (a machine that froze, or whose network dropped, and came back);
kill   SIGKILL to a random SuperNode's process group at such a point, then the same SuperNode
       started again at once (the same key: the same node, without the party's in-memory
       state);
superlink
       SIGKILL to the SuperLink at such a point (the server's machine crashed); once ``vflfs
       submit`` has given the run up as lost, the SuperLink is started again on the same
       address with the same ``--database`` file and the SuperNodes reconnect by themselves;
serverapp
       SIGKILL to the run's ServerApp process (``flwr-serverapp``) at such a point; the
       SuperLink and the SuperNodes keep running.

``--faults`` names the kinds drawn from (default: pause and kill). Every run is launched with
``vflfs submit``, as an operator's script would, and its exit code is recorded (0 completed, 1
failed, 4 SuperLink lost), with the ``error.txt`` it left. A run that fails and leaves a
checkpoint in its output folder is submitted again with ``resume=true``. Reported per run and
in total: completed (without resuming), resumed (completed after ``resume=true``), failed; and
identical: the completed run's step losses equal those of the same configuration run
undisturbed in process (relative tolerance 1e-6, as the deployment tests compare them).
Run from the repository root::

    python -m benchmarks.faults --runs 4 --seed 0 --out benchmarks/results/faults.json
    python -m benchmarks.faults --runs 4 --faults superlink serverapp

Expect a few minutes per run: every deployment round-trip starts fresh ClientApp processes,
and a pause lasts up to ``--pause-max`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vflfs.runtime.config import compose_config
from vflfs.runtime.results import CHECKPOINT, ERROR, RESULTS

REPO = Path(__file__).resolve().parents[1]
# One round-trip per epoch, a checkpoint at each epoch boundary; a lost request ends the run
# after 90 s without a reply; a ServerApp whose SuperLink refuses connections for 10 s ends
# with error.txt.
TRAINING = (
    "training.epochs=6 training.patience=null checkpoint_every_s=0 federation.timeout=90 "
    "deployment.superlink_timeout=10"
)
STEP_LOG = "Receiving: train.step"
FAULTS = ("pause", "kill", "superlink", "serverapp")
# vflfs submit gives a run up as lost after this long without the SuperLink; longer than the
# ServerApp's own superlink_timeout, so that the ServerApp's error.txt comes first.
LOST_AFTER = 30
SERVERAPP = "flwr-serverapp"


def draw(rng: random.Random, args: argparse.Namespace, parties: int) -> dict:
    """One run's fault: its kind, its SuperNode, after how many of its steps, how long."""
    return {
        "fault": rng.choice(args.faults),
        "party": rng.randrange(parties),
        "after_steps": rng.randint(1, 5),
        "pause_s": round(rng.uniform(args.pause_min, args.pause_max), 1),
    }


def restart(stack, index: int, timeout: float = 180.0) -> None:
    """Start SuperNode ``index`` again with its command (its key: the same node id) on a new
    port. The SuperLink refuses the key while it still holds the killed node online (up to two
    30 s heartbeats: ``Failed to activate SuperNode``); tried again until it is accepted."""
    from flower_procs import free_port

    old = stack.supernodes[index]
    deadline = time.monotonic() + timeout
    while True:
        cmd = list(old.cmd)
        port = free_port()
        cmd[cmd.index("--port") + 1] = str(port)
        node = stack._spawn(old.name, cmd, port)
        settled = time.monotonic() + 15  # a refused activation exits within seconds
        while node.alive() and time.monotonic() < settled:
            time.sleep(0.5)
        if node.alive():
            stack.supernodes[index] = node
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the SuperNode did not come back:\n{node.log()[-2000:]}")
        time.sleep(5)


def restart_superlink(stack, timeout: float = 180.0) -> None:
    """Start the killed SuperLink again with its command: the same address, the same
    ``--database`` file; wait until it answers and both SuperNodes are online again."""
    old = stack.superlink
    stack.superlink = stack._spawn(old.name, list(old.cmd), old.port, https=old.https)
    stack._wait_health(stack.superlink, 60)
    if stack.wait_supernodes(len(stack.supernodes), timeout) is None:
        raise RuntimeError(f"the SuperNodes did not reconnect in {timeout:.0f} s")


def serverapp_pids(stack) -> list[int]:
    """The stack's ServerApp processes (``flwr-serverapp``, started by the SuperLink's
    SuperExec in a session of its own; found by the stack's process tag)."""
    return [pid for pid in stack.tag.pids() if SERVERAPP in _cmdline(pid)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def wait_gone(pids: list[int], timeout: float) -> bool:
    """Whether every process of ``pids`` has exited within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() and _cmdline(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def inject(stack, fault: dict, steps_before: int, submission: subprocess.Popen) -> dict:
    """Wait for the SuperNode's steps of this run, then inject the fault; what was seen."""
    victim = stack.supernodes[fault["party"]]
    deadline = time.monotonic() + 600
    while victim.log().count(STEP_LOG) < steps_before + fault["after_steps"]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the SuperNode got no step in 600 s:\n{victim.log()[-2000:]}")
        time.sleep(0.2)
    seen: dict = {}
    if fault["fault"] == "pause":
        os.killpg(victim.proc.pid, signal.SIGSTOP)
        time.sleep(fault["pause_s"])
        os.killpg(victim.proc.pid, signal.SIGCONT)
    elif fault["fault"] == "kill":
        os.killpg(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(30)
        restart(stack, fault["party"])
    elif fault["fault"] == "superlink":
        apps = serverapp_pids(stack)
        os.kill(stack.superlink.proc.pid, signal.SIGKILL)
        stack.superlink.proc.wait(30)
        submission.wait(LOST_AFTER + 120)  # vflfs submit gives the run up (exit 4)
        seen["serverapp_ended"] = wait_gone(apps, 60)
        down = time.monotonic()
        restart_superlink(stack)
        seen["reconnect_s"] = round(time.monotonic() - down, 1)
    else:
        apps = serverapp_pids(stack)
        if len(apps) != 1:
            raise RuntimeError(f"expected one ServerApp process, found {apps}")
        os.kill(apps[0], signal.SIGKILL)
    return seen


def submit(stack, config: str, log: Path) -> subprocess.Popen:
    """``vflfs submit`` of the run in the background; its output goes to ``log``."""
    from flower_procs import tool

    args = [tool("vflfs"), "submit", "--quiet", "--poll", "1", "--lost-after", str(LOST_AFTER)]
    with log.open("ab") as out:
        return subprocess.Popen(
            [*args, ".", stack.connection, "-c", config],
            env=stack.env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def one_run(stack, files: dict, out: Path, fault: dict, reference: dict) -> dict:
    """One run with ``fault``, resumed once if it failed with a checkpoint; its record."""
    from deployment_stack import run_config

    victim = stack.supernodes[fault["party"]]
    start = time.monotonic()
    before = victim.log().count(STEP_LOG)
    log = out.with_name(f"{out.name}.submit.log")
    first = submit(stack, run_config(files, out, TRAINING), log)
    seen = inject(stack, fault, before, first)
    code = first.wait(900)
    record = {**fault, **seen, "first_exit": code, "outcome": "completed"}
    if code != 0:
        record["error"] = _read(out / ERROR)
        if not (out / CHECKPOINT).exists():
            return {**record, "outcome": "failed", "wall_s": time.monotonic() - start}
        again = submit(stack, run_config(files, out, f"{TRAINING} resume=true"), log).wait(900)
        record["outcome"] = "resumed" if again == 0 else "failed"
    record["wall_s"] = time.monotonic() - start
    if record["outcome"] == "failed":
        record["error"] = _read(out / ERROR)
        return record
    results = json.loads((out / RESULTS).read_text())
    losses, expected = results["step_losses"], reference["step_losses"]
    record["identical"] = len(losses) == len(expected) and bool(
        np.allclose(losses, expected, rtol=1e-6, atol=0)
    )
    record["resent"] = _training_messages(results) - _training_messages(reference)
    return record


def _training_messages(summary: dict) -> int:
    """Requests the server sent in the training phase (a request sent again counts twice)."""
    return int(summary["communication"]["phases"]["training"]["messages_down"])


def _read(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


def run(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from deployment_stack import PARTIES, TINY, start_deployment, write_party_files
    from helpers import run_local

    work = Path(args.work or tempfile.mkdtemp(prefix="vflfs-faults-")).absolute()
    files = write_party_files(work / "data")
    reference = run_local(compose_config(f"{TINY} {TRAINING}"), work / "reference")
    rng = random.Random(args.seed)
    records = []
    database = work / "deploy" / "superlink.db"  # a restarted SuperLink keeps keys and runs
    with start_deployment(work / "deploy", files, database=database) as stack:
        for i in range(args.runs):
            fault = draw(rng, args, PARTIES)
            print(f"run {i}: {fault}", flush=True)
            record = one_run(stack, files, work / f"run-{i}", fault, reference)
            print(f"run {i}: {record}", flush=True)
            records.append(record)
    outcomes = [r["outcome"] for r in records]
    return {
        "setup": f"TLS loopback, {PARTIES} SuperNodes, `{TRAINING}`, {os.cpu_count()} CPUs",
        "runs": len(records),
        "completed": outcomes.count("completed"),
        "resumed": outcomes.count("resumed"),
        "failed": outcomes.count("failed"),
        "identical": sum(bool(r.get("identical")) for r in records),
        "records": records,
        "work": str(work),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=4, help="runs, one fault each")
    parser.add_argument("--seed", type=int, default=0, help="seed of the faults' draw")
    parser.add_argument(
        "--faults", nargs="+", choices=FAULTS, default=["pause", "kill"], help="kinds drawn from"
    )
    parser.add_argument("--pause-min", type=float, default=10.0, help="shortest pause (s)")
    parser.add_argument("--pause-max", type=float, default=90.0, help="longest pause (s)")
    parser.add_argument("--work", default="", help="work folder (default: a new temp folder)")
    parser.add_argument("--out", default="benchmarks/results/faults.json", help="JSON file")
    args = parser.parse_args(argv)
    results = run(args)
    print(
        f"{results['runs']} runs: {results['completed']} completed, {results['resumed']} "
        f"resumed, {results['failed']} failed; {results['identical']} identical to the "
        "undisturbed run"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
