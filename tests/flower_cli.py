"""The ``flwr`` CLI side of :class:`flower_procs.FlowerStack`: runs, their status, SuperNode
registration, and the stack's ``config.toml`` connection (plain or TLS)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proc_utils import REPO, run_process, tool

from vflfs.runtime.superlink import toml_pairs


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


class FlwrCli:
    """``flwr`` commands against the stack's SuperLink (mixed into FlowerStack)."""

    connection = "vflfs-test"
    env: dict[str, str]
    home: Path
    workdir: Path
    superlink: Any  # flower_procs.Service | None
    tls: Any  # flower_procs.TlsFiles | None

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

    def register_supernode(self, public_key: Path) -> int:
        """``flwr supernode register <key.pub>`` (SuperNode authentication); the node id."""
        result = self.flwr(
            "supernode", "register", str(public_key), self.connection, "--format", "json"
        )
        try:
            return int(json.loads(result.stdout)["node-id"])
        except (ValueError, KeyError) as error:
            raise FlowerError(
                f"registering {public_key} failed: {result.stdout}{result.stderr}"
            ) from error

    def write_config(self) -> Path:
        """``$FLWR_HOME/config.toml`` with one connection to this stack's SuperLink (over TLS,
        verified with the stack's CA, when the stack has TLS files)."""
        assert self.superlink is not None
        tls = self.tls
        security = "insecure = true\n" if tls is None else f'root-certificates = "{tls.ca}"\n'
        path = self.home / "config.toml"
        path.write_text(
            "[superlink]\n"
            f'default = "{self.connection}"\n\n'
            f"[superlink.{self.connection}]\n"
            f'address = "{self.superlink.address}"\n' + security
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


def _pairs(values: Mapping[str, object] | str) -> str:
    return values if isinstance(values, str) else toml_pairs(values)
