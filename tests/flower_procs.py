"""Real Flower processes for tests: a SuperLink, SuperNodes and the ``flwr`` CLI on loopback.

Processes are tagged and cleaned up as :mod:`proc_utils` describes: teardown sends SIGTERM to
each process group, waits, then SIGKILLs whatever still carries the stack's marker.

    with FlowerStack(tmp_path) as stack:
        stack.start_superlink(simulation=True)
        run = stack.run_app(run_config={"output-dir": str(out)},
                            federation_config={"num-supernodes": 3})
        assert stack.run_status(run.run_id)["status"] == "finished:completed"

Deployment (no ``--simulation``): ``stack.start_superlink()``, then
``stack.start_supernode(partition_id=i, num_partitions=n)`` for each party, then
``stack.wait_supernodes(n)`` before ``stack.run_app(...)``. With ``FlowerStack(dir,
tls=make_tls(dir, n))`` everything runs over TLS (the test CA of ``deploy/make_certs.sh``) with
SuperNode authentication: each SuperNode's public key is registered before it starts. With TLS,
``stack.start_fleet_proxy()`` after the SuperLink puts ``deploy/fleet_proxy.sh`` (nginx, only the
Fleet API) in front of it, and the SuperNodes started afterwards connect through it.

Each stack has its own ``FLWR_HOME`` (``<workdir>/flwr-home``) whose ``config.toml`` names one
connection, :attr:`FlowerStack.connection`, pointing at the stack's SuperLink. Runs never
install packages: the SuperLink gets ``--disable-runtime-dependency-installation`` and every
process gets ``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flower_cli import FlowerError, FlwrCli, FlwrRun, toml_pairs
from flower_tls import TlsFiles, https_opener, make_tls
from proc_utils import HOST, REPO, ProcessTag, free_port, no_proxy, run_process, stop_group, tool

FLEET_PROXY = REPO / "deploy" / "fleet_proxy.sh"

__all__ = [
    "FLEET_PROXY",
    "HOST",
    "REPO",
    "FlowerError",
    "FlowerStack",
    "FlwrRun",
    "ProcessTag",
    "Service",
    "TlsFiles",
    "free_port",
    "make_tls",
    "nginx_installed",
    "run_process",
    "tool",
    "toml_pairs",
]


def nginx_installed() -> bool:
    """Whether ``deploy/fleet_proxy.sh`` can run here (``.ci/run`` installs nginx where it
    can; elsewhere the proxy tests skip, naming ``apt-get install nginx``)."""
    return shutil.which("nginx") is not None


@dataclass
class Service:
    """A long-running Flower process (SuperLink or SuperNode) and its log file."""

    name: str
    proc: subprocess.Popen
    log_path: Path
    port: int
    cmd: list[str] = field(default_factory=list)
    https: bool = False

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


class FlowerStack(FlwrCli):
    """A SuperLink (simulation or deployment), optional SuperNodes, and the ``flwr`` CLI."""

    def __init__(
        self,
        workdir: str | Path,
        env: Mapping[str, str] | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self.workdir = Path(workdir).absolute()
        self.home = self.workdir / "flwr-home"
        self.logs = self.workdir / "logs"
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.tls = tls
        self.tag = ProcessTag()
        self.env = self.tag.env(
            env,
            FLWR_HOME=str(self.home),
            FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
            FLWR_DISABLE_UPDATE_CHECK="1",
            PYTHONUNBUFFERED="1",
            NO_PROXY=no_proxy(env),
        )
        self.superlink: Service | None = None
        self.fleet_proxy: Service | None = None
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
        """Start ``flower-superlink`` on a free port and wait for ``/health``: ``--insecure``,
        or with the stack's TLS files HTTPS plus ``--enable-supernode-auth``."""
        if self.superlink is not None:
            raise FlowerError("this stack already has a SuperLink")
        port = port or free_port()
        if self.tls is None:
            security = ["--insecure"]
        else:
            security = [
                "--ssl-ca-certfile", str(self.tls.ca),
                "--ssl-certfile", str(self.tls.cert),
                "--ssl-keyfile", str(self.tls.key),
                "--enable-supernode-auth",
            ]  # fmt: skip
        cmd = [
            tool("flower-superlink"),
            *security,
            "--host", HOST,
            "--port", str(port),
            "--disable-runtime-dependency-installation",
            *(["--simulation"] if simulation else []),
            *args,
        ]  # fmt: skip
        self.superlink = self._spawn("superlink", cmd, port, https=self.tls is not None)
        self._wait_health(self.superlink, timeout)
        self.write_config()
        return self.superlink

    def start_fleet_proxy(self, timeout: float = 30.0) -> Service:
        """Start ``deploy/fleet_proxy.sh`` (nginx, TLS with the stack's certificate) on a free
        port in front of the SuperLink; wait until it answers (403 for ``/health``)."""
        if self.superlink is None or self.tls is None:
            raise FlowerError("the Fleet proxy needs a TLS SuperLink: start it first")
        port = free_port()
        cmd = [
            "bash", str(FLEET_PROXY), str(self.workdir / "fleet-proxy"),
            "--tls", str(self.tls.root),
            "--listen", f"{HOST}:{port}",
            "--superlink", self.superlink.address,
        ]  # fmt: skip
        self.fleet_proxy = self._spawn("fleet-proxy", cmd, port, https=True)
        self._wait_health(self.fleet_proxy, timeout, status=403)
        return self.fleet_proxy

    @property
    def fleet_address(self) -> str:
        """Where SuperNodes connect: the Fleet proxy when there is one, else the SuperLink."""
        service = self.fleet_proxy or self.superlink
        if service is None:
            raise FlowerError("start the SuperLink first")
        return service.address

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
        auth_key: Path | None = None,
    ) -> Service:
        """Start ``flower-supernode`` against this stack's SuperLink (``--insecure``, or over
        TLS with the party's authentication key, registered first; ``auth_key``: use this
        private key instead, unregistered).

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
        if self.tls is None:
            security = ["--insecure"]
        else:
            key = auth_key or self.tls.supernode_key(partition_id)
            if auth_key is None:
                self.register_supernode(key.with_suffix(".pub"))
            security = [
                "--root-certificates", str(self.tls.ca),
                "--auth-supernode-private-key", str(key),
            ]  # fmt: skip
        cmd = [
            tool("flower-supernode"),
            *security,
            "--superlink", self.fleet_address,
            "--node-config", toml_pairs(config),
            "--host", HOST,
            "--port", str(port),
            *args,
        ]  # fmt: skip
        node = self._spawn(f"supernode-{partition_id}", cmd, port, env=env)
        self.supernodes.append(node)
        if wait:
            self._wait_health(node, timeout)
        return node

    def start_supernodes(
        self,
        count: int,
        *,
        node_config: Mapping[str, object] | None = None,
        node_configs: Sequence[Mapping[str, object]] | None = None,
        timeout: float = 60.0,
    ) -> list[Service]:
        """Start SuperNodes for partitions 0..count-1 together; wait until all are online.

        ``node_config`` goes to every node, ``node_configs[i]`` to node i only.
        """
        nodes = [
            self.start_supernode(
                i,
                count,
                node_config={**(node_config or {}), **(node_configs[i] if node_configs else {})},
                wait=False,
            )
            for i in range(count)
        ]
        for node in nodes:
            self._wait_health(node, timeout)
        self.wait_supernodes(count, timeout)
        return nodes

    def restart_supernodes(self, grace: float = 10.0, timeout: float = 60.0) -> list[Service]:
        """Stop every SuperNode and start it again with its command (its key, already
        registered, and its node config) on a new port; wait until all are online. What
        docs/deployment.md asks of the parties between ``flwr stop`` and a resumed run."""
        old, self.supernodes = self.supernodes, []
        for node in old:
            if stop_group(node.proc, grace):
                self.force_killed.append(f"{node.proc.pid} {' '.join(node.cmd)}")
        for node in old:
            port = free_port()
            cmd = list(node.cmd)
            cmd[cmd.index("--port") + 1] = str(port)
            self.supernodes.append(self._spawn(node.name, cmd, port))
        for node in self.supernodes:
            self._wait_health(node, timeout)
        self.wait_supernodes(len(old), timeout)
        return self.supernodes

    # -- teardown
    def stop(self, grace: float = 10.0) -> list[str]:
        """Stop SuperNodes, then the SuperLink, then anything left that carries the tag.

        Returns (and keeps in :attr:`force_killed`) the processes that needed SIGKILL or were
        still around after their parents stopped; empty after a clean shutdown.
        """
        for service in [*reversed(self.supernodes), self.fleet_proxy, self.superlink]:
            if service is not None and stop_group(service.proc, grace):
                self.force_killed.append(f"{service.proc.pid} {' '.join(service.cmd)}")
        # flower-superexec and the app processes run in their own sessions; they exit when
        # their parent does (parent-pid monitor). Give them that time before killing them.
        if self.tag.wait_gone(grace):
            self.force_killed += self.tag.kill_all()
        self.supernodes = []
        self.fleet_proxy = None
        self.superlink = None
        return self.force_killed

    def leftovers(self) -> list[str]:
        """Live processes that carry this stack's tag."""
        return self.tag.describe()

    # -- internals
    def _spawn(
        self,
        name: str,
        cmd: list[str],
        port: int,
        env: Mapping[str, str] | None = None,
        https: bool = False,
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
        return Service(name, proc, log_path, port, cmd, https)

    def _wait_health(self, service: Service, timeout: float, status: int = 200) -> None:
        deadline = time.monotonic() + timeout
        scheme = "https" if service.https else "http"
        url = f"{scheme}://{service.address}/health"
        opener = https_opener(self.tls.ca if service.https and self.tls else None)
        while time.monotonic() < deadline:
            if not service.alive():
                raise FlowerError(
                    f"{service.name} exited with code {service.proc.returncode}:\n{service.log()}"
                )
            try:
                with opener.open(url, timeout=2) as response:
                    if response.status == status:
                        return
            except urllib.error.HTTPError as error:  # an answer, e.g. the Fleet proxy's 403
                if error.code == status:
                    return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise FlowerError(f"{service.name} not healthy after {timeout} s:\n{service.log()}")
