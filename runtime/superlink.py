"""A Flower simulation SuperLink of vflfs's own: started on a free loopback port, stopped after.

``vflfs-run engine=simulation`` runs each job with ``flwr run`` against such a SuperLink, so it
never touches the ``:local:`` SuperLink that ``flwr run`` starts in the background, nor the
user's ``~/.flwr``: the SuperLink gets its own ``FLWR_HOME`` in a temporary folder, and runs
never install packages (``--disable-runtime-dependency-installation``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

HOST = "127.0.0.1"
CONNECTION = "vflfs"


class SuperLinkError(RuntimeError):
    """The SuperLink did not start, or ``flwr`` could not submit or follow a run."""


def flower_tool(name: str) -> str:
    """A console script of this Python environment (``flwr``, ``flower-superlink``)."""
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if not found:
        raise SuperLinkError(f"{name} not found; install vflfs (it brings flwr[simulation])")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class SimulationSuperLink:
    """``flower-superlink --simulation`` in a temporary folder; use as a context manager."""

    def __init__(self, start_timeout: float = 60.0, stop_grace: float = 10.0) -> None:
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.workdir = Path(tempfile.mkdtemp(prefix="vflfs-superlink-"))
        self.port = free_port()
        self.env = {
            **os.environ,
            "FLWR_HOME": str(self.workdir / "flwr-home"),
            "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "FLWR_DISABLE_UPDATE_CHECK": "1",
            "PYTHONUNBUFFERED": "1",
            "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": os.environ.get(
                "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0"
            ),
            "NO_PROXY": ",".join(x for x in (os.environ.get("NO_PROXY"), HOST) if x),
        }
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> SimulationSuperLink:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def log_path(self) -> Path:
        return self.workdir / "superlink.log"

    def start(self) -> None:
        cmd = [
            flower_tool("flower-superlink"),
            "--insecure", "--simulation",
            "--host", HOST, "--port", str(self.port),
            "--disable-runtime-dependency-installation",
        ]  # fmt: skip
        home = Path(self.env["FLWR_HOME"])
        home.mkdir(parents=True)
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{HOST}:{self.port}"\ninsecure = true\n'
        )
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, env=self.env, cwd=self.workdir, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self._wait_healthy()

    def stop(self) -> None:
        """SIGTERM the SuperLink's process group (its SuperExec and app processes follow),
        SIGKILL after the grace period; remove the temporary folder."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(self.stop_grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5.0)
            self.proc = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def run(
        self,
        app: Path,
        run_config: Mapping[str, str],
        federation_config: Mapping[str, object],
        on_line: Callable[[str], None] = print,
    ) -> dict:
        """``flwr run <app> --stream`` with the given configs; each streamed line goes to
        ``on_line``. Returns the finished run's ``flwr ls`` entry (``status``...)."""
        cmd = [
            flower_tool("flwr"), "run", str(app), CONNECTION, "--stream",
            "--run-config", toml_pairs(run_config),
            "--federation-config", toml_pairs(federation_config),
        ]  # fmt: skip
        lines: list[str] = []
        with subprocess.Popen(
            cmd, env=self.env, cwd=self.workdir, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        ) as proc:  # fmt: skip
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                on_line(line.rstrip("\n"))
        match = re.search(r"Successfully started run (\d+)", "".join(lines))
        if match is None:
            raise SuperLinkError(f"flwr run did not start a run:\n{''.join(lines[-20:])}")
        return self.status(int(match.group(1)))

    def status(self, run_id: int, timeout: float = 60.0) -> dict:
        """The run's ``flwr ls`` entry, once its status is ``finished:...``."""
        deadline = time.monotonic() + timeout
        while True:
            result = subprocess.run(
                [flower_tool("flwr"), "ls", CONNECTION, "--run-id", str(run_id), "--format",
                 "json"],
                env=self.env, cwd=self.workdir, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            try:
                runs = json.loads(result.stdout)["runs"]
                run = next(r for r in runs if int(r["run-id"]) == run_id)
            except (ValueError, KeyError, StopIteration) as error:
                raise SuperLinkError(f"flwr ls failed: {result.stdout}{result.stderr}") from error
            if str(run["status"]).startswith("finished") or time.monotonic() > deadline:
                return run
            time.sleep(0.5)

    def _wait_healthy(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout
        url = f"http://{HOST}:{self.port}/health"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SuperLinkError(f"flower-superlink exited:\n{self._log_tail()}")
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                opener.open(url, timeout=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.2)
        raise SuperLinkError(f"flower-superlink not ready after {self.start_timeout} s")

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])
        return ""


def toml_pairs(values: Mapping[str, object]) -> str:
    """``{"a": 1, "b": "x y"}`` -> ``a=1 b='x y'`` (what ``-c``, ``--federation-config`` and
    ``--node-config`` parse).

    Flower splits the string with a regex that does not understand escapes, so a string value
    may not contain a single quote or a newline; pass ``-c file.toml`` for those.
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
