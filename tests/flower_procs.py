"""Real Flower processes for tests: a SuperLink, SuperNodes and the ``flwr`` CLI on loopback.

Every process is started with ``start_new_session=True`` (its own process group) and with a
per-stack marker in its environment (``VFLFS_TEST_PROCS_TAG``). The marker is inherited by
everything those processes start, including children that detach into their own sessions
(the SuperLink's ``flower-superexec``, the ``flwr-simulation``/``flwr-serverapp``/
``flwr-clientapp`` processes, Ray's raylet and workers), so :meth:`ProcessTag.pids` finds them
even after they were re-parented. Teardown sends SIGTERM to each process group, waits, then
SIGKILLs whatever still carries the marker.

    with FlowerStack(tmp_path) as stack:
        stack.start_superlink(simulation=True)
        run = stack.run_app(run_config={"output-dir": str(out)},
                            federation_config={"num-supernodes": 3})
        assert stack.run_status(run.run_id)["status"] == "finished:completed"

Deployment (no ``--simulation``): ``stack.start_superlink()``, then
``stack.start_supernode(partition_id=i, num_partitions=n)`` for each party, then
``stack.wait_supernodes(n)`` before ``stack.run_app(...)``.

Each stack has its own ``FLWR_HOME`` (``<workdir>/flwr-home``) whose ``config.toml`` names one
connection, :attr:`FlowerStack.connection`, pointing at the stack's SuperLink. Runs never
install packages: the SuperLink gets ``--disable-runtime-dependency-installation`` and every
process gets ``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TAG_VAR = "VFLFS_TEST_PROCS_TAG"
HOST = "127.0.0.1"


def tool(name: str) -> str:
    """The path of a console script of this environment (``flwr``, ``vflfs-run``...)."""
    path = BIN / name
    return str(path) if path.exists() else name


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


def _signal_group(pgid: int, sig: int) -> None:
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
        _stop_group(proc, grace=5.0)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    except BaseException:
        _stop_group(proc, grace=5.0)
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def _stop_group(proc: subprocess.Popen, grace: float) -> bool:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``grace`` s; True if it was killed."""
    if proc.poll() is not None:
        _signal_group(proc.pid, signal.SIGKILL)  # stragglers of an exited leader
        return False
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
        killed = False
    except subprocess.TimeoutExpired:
        killed = True
    _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)
    return killed


# -- the stack ----------------------------------------------------------------------------------


@dataclass
class Service:
    """A long-running Flower process (SuperLink or SuperNode) and its log file."""

    name: str
    proc: subprocess.Popen
    log_path: Path
    port: int
    cmd: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class FlwrRun:
    """What ``flwr run`` printed, and the run id it reported."""

    run_id: int | None
    returncode: int
    stdout: str
    stderr: str
    wall_s: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class FlowerError(RuntimeError):
    """A Flower process did not start or a CLI call failed; the message has its log."""


def toml_pairs(values: Mapping[str, object]) -> str:
    """``{"a": 1, "b": "x y"}`` -> ``a=1 b='x y'`` (the form ``-c``/``--node-config`` parse).

    Flower splits the string with a regex that does not understand escapes, so a string value
    may not contain a single quote; pass ``-c file.toml`` for those.
    """
    parts = []
    for key, value in values.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float):
            text = repr(value)
        else:
            value = str(value)
            if "'" in value or "\n" in value:
                raise ValueError(f"{key}: a quoted value cannot contain ' or a newline: {value!r}")
            text = f"'{value}'"
        parts.append(f"{key}={text}")
    return " ".join(parts)


class FlowerStack:
    """A SuperLink (simulation or deployment), optional SuperNodes, and the ``flwr`` CLI."""

    connection = "vflfs-test"

    def __init__(self, workdir: str | Path, env: Mapping[str, str] | None = None) -> None:
        self.workdir = Path(workdir).absolute()
        self.home = self.workdir / "flwr-home"
        self.logs = self.workdir / "logs"
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.tag = ProcessTag()
        self.env = self.tag.env(
            env,
            FLWR_HOME=str(self.home),
            FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
            FLWR_DISABLE_UPDATE_CHECK="1",
            PYTHONUNBUFFERED="1",
            NO_PROXY=_no_proxy(env),
        )
        self.superlink: Service | None = None
        self.supernodes: list[Service] = []
        self.force_killed: list[str] = []

    # -- context manager
    def __enter__(self) -> FlowerStack:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- services
    def start_superlink(
        self,
        *,
        simulation: bool = False,
        port: int | None = None,
        args: Sequence[str] = (),
        timeout: float = 60.0,
    ) -> Service:
        """Start ``flower-superlink --insecure`` on a free port and wait for ``/health``."""
        if self.superlink is not None:
            raise FlowerError("this stack already has a SuperLink")
        port = port or free_port()
        cmd = [
            tool("flower-superlink"),
            "--insecure",
            "--host", HOST,
            "--port", str(port),
            "--disable-runtime-dependency-installation",
            *(["--simulation"] if simulation else []),
            *args,
        ]  # fmt: skip
        self.superlink = self._spawn("superlink", cmd, port)
        self._wait_health(self.superlink, timeout)
        self.write_config()
        return self.superlink

    def start_supernode(
        self,
        partition_id: int,
        num_partitions: int,
        *,
        node_config: Mapping[str, object] | None = None,
        port: int | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        wait: bool = True,
        timeout: float = 60.0,
    ) -> Service:
        """Start ``flower-supernode --insecure`` against this stack's SuperLink.

        ``node_config`` is added to ``partition-id``/``num-partitions``; ``env`` to the
        environment (e.g. ``CUDA_VISIBLE_DEVICES``). With ``wait``, waits for the node's own
        HTTP API (``/health`` on ``port``); registration with the SuperLink comes a little later
        (:meth:`wait_supernodes`).
        """
        if self.superlink is None:
            raise FlowerError("start the SuperLink first")
        port = port or free_port()
        config = {"partition-id": partition_id, "num-partitions": num_partitions}
        config.update(node_config or {})
        cmd = [
            tool("flower-supernode"),
            "--insecure",
            "--superlink", self.superlink.address,
            "--node-config", toml_pairs(config),
            "--host", HOST,
            "--port", str(port),
            *args,
        ]  # fmt: skip
        node = self._spawn(f"supernode-{partition_id}", cmd, port, env)
        self.supernodes.append(node)
        if wait:
            self._wait_health(node, timeout)
        return node

    def start_supernodes(
        self,
        count: int,
        *,
        node_config: Mapping[str, object] | None = None,
        timeout: float = 60.0,
    ) -> list[Service]:
        """Start SuperNodes for partitions 0..count-1 together; wait until all are online."""
        nodes = [
            self.start_supernode(i, count, node_config=node_config, wait=False)
            for i in range(count)
        ]
        for node in nodes:
            self._wait_health(node, timeout)
        self.wait_supernodes(count, timeout)
        return nodes

    def wait_supernodes(self, count: int, timeout: float = 60.0) -> list[dict]:
        """Wait until the SuperLink lists ``count`` online SuperNodes; returns them."""
        deadline = time.monotonic() + timeout
        nodes: list[dict] = []
        while time.monotonic() < deadline:
            result = self.flwr("supernode", "list", self.connection, "--format", "json")
            with contextlib.suppress(ValueError):
                nodes = json.loads(result.stdout).get("nodes", [])
            online = [n for n in nodes if str(n.get("status", "")).lower() == "online"]
            if len(online) >= count:
                return online
            time.sleep(0.5)
        raise FlowerError(f"{count} SuperNodes not online after {timeout} s: {nodes}")

    def write_config(self) -> Path:
        """``$FLWR_HOME/config.toml`` with one connection to this stack's SuperLink."""
        assert self.superlink is not None
        path = self.home / "config.toml"
        path.write_text(
            "[superlink]\n"
            f'default = "{self.connection}"\n\n'
            f"[superlink.{self.connection}]\n"
            f'address = "{self.superlink.address}"\n'
            "insecure = true\n"
        )
        return path

    # -- the CLI
    def flwr(
        self, *args: str, timeout: float = 120.0, cwd: str | Path | None = None
    ) -> subprocess.CompletedProcess:
        """Run the ``flwr`` CLI with this stack's ``FLWR_HOME`` (output captured)."""
        return run_process(
            [tool("flwr"), *args], env=self.env, cwd=cwd or self.workdir, timeout=timeout
        )

    def run_app(
        self,
        app: str | Path = REPO,
        *,
        run_config: Mapping[str, object] | str | None = None,
        federation_config: Mapping[str, object] | str | None = None,
        stream: bool = True,
        cwd: str | Path | None = None,
        timeout: float = 600.0,
    ) -> FlwrRun:
        """``flwr run <app> <connection> [--stream] -c ... --federation-config ...``.

        With ``stream`` this returns when the run has ended. Note that ``flwr run`` exits 0 even
        when the ServerApp fails: check :meth:`run_status`. ``cwd`` defaults to the stack's
        folder (pass ``app="."`` with ``cwd=REPO`` for the literal ``flwr run .``).
        """
        args = ["run", str(app), self.connection]
        if stream:
            args.append("--stream")
        if run_config:
            args += ["--run-config", _pairs(run_config)]
        if federation_config:
            args += ["--federation-config", _pairs(federation_config)]
        start = time.monotonic()
        result = self.flwr(*args, timeout=timeout, cwd=cwd)
        match = re.search(r"Successfully started run (\d+)", result.stdout + result.stderr)
        return FlwrRun(
            run_id=int(match.group(1)) if match else None,
            returncode=result.returncode,
            stdout=result.stdout,
            stderr=result.stderr,
            wall_s=time.monotonic() - start,
        )

    def run_status(self, run_id: int) -> dict:
        """The run's entry of ``flwr ls --run-id ... --format json`` (``status`` etc.)."""
        result = self.flwr("ls", self.connection, "--run-id", str(run_id), "--format", "json")
        try:
            runs = json.loads(result.stdout)["runs"]
        except (ValueError, KeyError) as error:
            raise FlowerError(f"flwr ls failed: {result.stdout}{result.stderr}") from error
        for run in runs:
            if int(run["run-id"]) == int(run_id):
                return run
        raise FlowerError(f"run {run_id} not listed: {result.stdout}")

    def wait_run_finished(self, run_id: int, timeout: float = 120.0) -> dict:
        """Poll :meth:`run_status` until the status starts with ``finished``."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.run_status(run_id)
            if str(status["status"]).startswith("finished") or time.monotonic() > deadline:
                return status
            time.sleep(0.5)

    # -- teardown
    def stop(self, grace: float = 10.0) -> list[str]:
        """Stop SuperNodes, then the SuperLink, then anything left that carries the tag.

        Returns (and keeps in :attr:`force_killed`) the processes that needed SIGKILL or were
        still around after their parents stopped; empty after a clean shutdown.
        """
        for service in [*reversed(self.supernodes), self.superlink]:
            if service is not None and _stop_group(service.proc, grace):
                self.force_killed.append(f"{service.proc.pid} {' '.join(service.cmd)}")
        # flower-superexec and the app processes run in their own sessions; they exit when
        # their parent does (parent-pid monitor). Give them that time before killing them.
        if self.tag.wait_gone(grace):
            self.force_killed += self.tag.kill_all()
        self.supernodes = []
        self.superlink = None
        return self.force_killed

    def leftovers(self) -> list[str]:
        """Live processes that carry this stack's tag."""
        return self.tag.describe()

    # -- internals
    def _spawn(
        self, name: str, cmd: list[str], port: int, env: Mapping[str, str] | None = None
    ) -> Service:
        log_path = self.logs / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                cmd,
                env={**self.env, **(env or {})},
                cwd=str(self.workdir),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Service(name, proc, log_path, port, cmd)

    def _wait_health(self, service: Service, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://{service.address}/health"
        while time.monotonic() < deadline:
            if not service.alive():
                raise FlowerError(
                    f"{service.name} exited with code {service.proc.returncode}:\n{service.log()}"
                )
            try:
                with _OPENER.open(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise FlowerError(f"{service.name} not healthy after {timeout} s:\n{service.log()}")


def _no_proxy(env: Mapping[str, str] | None) -> str:
    """``NO_PROXY`` with loopback added, so that a configured HTTP proxy is not used for it."""
    current = (env if env is not None else os.environ).get("NO_PROXY", "")
    return ",".join(x for x in (current, HOST, "localhost") if x)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _pairs(values: Mapping[str, object] | str) -> str:
    return values if isinstance(values, str) else toml_pairs(values)
