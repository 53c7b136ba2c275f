"""Processes for tests: console scripts, the cores they may use, free loopback ports, and
finding and stopping every process a test started (:class:`ProcessTag`), even children that
left their process group.

Every process is started with ``start_new_session=True`` (its own process group) and with a
per-tag marker in its environment (``VFLFS_TEST_PROCS_TAG``). The marker is inherited by
everything those processes start, including children that detach into their own sessions
(the SuperLink's ``flower-superexec``, the ``flwr-simulation``/``flwr-serverapp``/
``flwr-clientapp`` processes, Ray's raylet and workers), so :meth:`ProcessTag.pids` finds them
even after they were re-parented.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TAG_VAR = "VFLFS_TEST_PROCS_TAG"
HOST = "127.0.0.1"


def tool(name: str) -> str:
    """The path of a console script of this environment (``flwr``, ``vflfs-run``...)."""
    path = BIN / name
    return str(path) if path.exists() else name


def usable_cores() -> int:
    """The cores this process may run on (its affinity, where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# -- ports --------------------------------------------------------------------------------------


def free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` distinct ports that were free a moment ago (bound together, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = HOST) -> int:
    return free_ports(1, host)[0]


# -- finding the processes a test started -------------------------------------------------------


class ProcessTag:
    """A marker put in the environment of started processes, to find all their descendants."""

    def __init__(self) -> None:
        self.value = uuid.uuid4().hex

    def env(self, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env.update(extra)
        env[TAG_VAR] = self.value
        return env

    def pids(self) -> list[int]:
        """Live (non-zombie) processes, other than this one, that this tag's processes started.

        That is every process whose environment has the marker, plus every process in the same
        session as one of them: some grandchildren (Ray's dashboard and runtime-env agents) get
        a cleaned environment, but they stay in the session of the process that started them.
        """
        needle = f"{TAG_VAR}={self.value}".encode()
        me, my_session = os.getpid(), os.getsid(0)
        sessions: dict[int, int] = {}
        tagged = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                state, session = _stat(entry)
                if state == "Z":
                    continue
                sessions[int(entry.name)] = session
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    tagged.add(int(entry.name))
            except (OSError, ValueError, IndexError):  # gone, or not ours to read
                continue
        ours = {sessions[pid] for pid in tagged} - {my_session}
        return sorted(tagged | {pid for pid, session in sessions.items() if session in ours})

    def describe(self) -> list[str]:
        return [f"{pid} {_cmdline(pid)}" for pid in self.pids()]

    def wait_gone(self, timeout: float) -> list[int]:
        """Wait up to ``timeout`` s for every marked process to exit; returns those left."""
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left

    def kill_all(self, grace: float = 5.0) -> list[str]:
        """SIGTERM every marked process, SIGKILL after ``grace`` s; returns what was running."""
        running = self.describe()
        for pid in self.pids():
            _signal(pid, signal.SIGTERM)
        for pid in self.wait_gone(grace):
            _signal(pid, signal.SIGKILL)
        self.wait_gone(5.0)
        return running


def _stat(proc_dir: Path) -> tuple[str, int]:
    """A process's state letter and session id, from ``/proc/<pid>/stat``."""
    stat = (proc_dir / "stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], int(fields[3])


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:300]


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# -- running commands to completion -------------------------------------------------------------


def run_process(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 600.0,
) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group and capture stdout and stderr.

    On timeout the whole group is killed (SIGTERM, then SIGKILL) and ``TimeoutExpired`` is raised
    with the output so far.
    """
    proc = subprocess.Popen(
        list(cmd),
        env=None if env is None else dict(env),
        cwd=None if cwd is None else str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc, grace=5.0)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    except BaseException:
        stop_group(proc, grace=5.0)
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def stop_group(proc: subprocess.Popen, grace: float) -> bool:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``grace`` s; True if it was killed."""
    if proc.poll() is not None:
        signal_group(proc.pid, signal.SIGKILL)  # stragglers of an exited leader
        return False
    signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
        killed = False
    except subprocess.TimeoutExpired:
        killed = True
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)
    return killed


def no_proxy(env: Mapping[str, str] | None) -> str:
    """``NO_PROXY`` with loopback added, so that a configured HTTP proxy is not used for it."""
    current = (env if env is not None else os.environ).get("NO_PROXY", "")
    return ",".join(x for x in (current, HOST, "localhost") if x)
