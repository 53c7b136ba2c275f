"""docs/deployment.md's one-machine commands, run as written (free ports and a temporary
folder swapped in), end to end: split, certificates, TLS SuperLink, registered SuperNodes with
their own files, ``flwr run``, ``flwr ls``, shutdown.

The guide starts its own stack, as a reader would, so this runs with the longest scenarios
(``-m extended``); tests/test_deployment.py covers the same stack with ``-m heavy``."""

from __future__ import annotations

import json
import os
import re

import pytest
from proc_utils import REPO, ProcessTag, free_ports, run_process

GUIDE = REPO / "docs" / "deployment.md"
PORTS = ("9093", "9100", "9101")

pytestmark = pytest.mark.extended


def one_machine_script() -> str:
    """The bash blocks between the one-machine markers, in order."""
    text = GUIDE.read_text()
    section = text.split("<!-- one-machine:begin -->")[1].split("<!-- one-machine:end -->")[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    assert len(blocks) >= 4, "the one-machine section lost its commands"
    return "\n".join(blocks)


def test_the_one_machine_guide_runs_as_written(tmp_path):
    script = one_machine_script()
    assert script.count("export WORK=/tmp/vflfs-demo") == 1
    script = script.replace("export WORK=/tmp/vflfs-demo", f"export WORK={tmp_path / 'demo'}")
    for old, new in zip(PORTS, free_ports(len(PORTS)), strict=True):
        assert old in script
        script = script.replace(old, str(new))
    (tmp_path / "guide.sh").write_text(script)
    tag = ProcessTag()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLWR_", "VFLFS_"))}
    env["NO_PROXY"] = ",".join(x for x in (env.get("NO_PROXY"), "127.0.0.1", "localhost") if x)
    try:
        result = run_process(
            ["bash", "-euo", "pipefail", str(tmp_path / "guide.sh")],
            env=tag.env(env),
            cwd=REPO,
            timeout=900,
        )
        left = tag.wait_gone(30.0)
    finally:
        killed = tag.kill_all()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "finished:completed" in output, output
    results = json.loads((tmp_path / "demo" / "out" / "results.json").read_text())
    assert results["status"] == "completed" and results["epochs_run"] == 3
    assert results["alignment"]["aligned"] == 2600
    assert str(results["test_metric"]) in output
    assert not left and not killed, f"the guide's `kill` left processes behind: {killed}"
    assert not (tmp_path / "demo" / "flwr-home" / "runtime-envs").exists()
