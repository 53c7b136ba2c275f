"""A deployment message's process: a fresh Python process serving one recorded training step
(``benchmarks/app_process.py``) answers as the in-process party did, and loads only what the
step needs (no optimiser tracing machinery, no loaders' or other operations' libraries)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from flwr.common.serde import message_from_proto
from flwr.proto.message_pb2 import Message

from vflfs.benchmarks.app_process import APPS, fresh_process, record_step
from vflfs.federation import decode

from deployment_stack import SPLIT

TRAINING = "training.batch_size=64 training.local_steps=1 training.epochs=1 device=cpu"


def test_a_fresh_process_serves_a_step_as_the_live_party_and_loads_only_the_step(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("VFLFS_CACHE_DIR", str(tmp_path / "cache"))
    grid = record_step(tmp_path, SPLIT, TRAINING)
    run = fresh_process(APPS["vflfs"], tmp_path / "message.pb", tmp_path / "context.pb")
    assert not run["failed"], run["stderr"][-2000:]
    reply = message_from_proto(Message.FromString((tmp_path / "reply.pb").read_bytes()))
    got, expected = decode(reply.content), decode(grid.reply.content)
    assert sorted(got) == sorted(expected) == ["embeddings"]
    np.testing.assert_array_equal(got["embeddings"][0], expected["embeddings"][0])
    assert run["loaded"] == dict.fromkeys(
        ("torch._dynamo", "sklearn", "scipy", "pandas", "phe"), False
    )


def test_loading_the_client_app_imports_no_torch():
    """Flower loads the ClientApp for every message: the protocol and the app's registry
    import no torch (the handlers do, through the party, when a message arrives)."""
    code = (
        "import sys; import vflfs.client_app.app; "
        "print(sorted(m for m in ('torch', 'sklearn', 'scipy', 'pandas') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
