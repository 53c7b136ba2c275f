"""Device placement: parties on cuda:i % n_gpus when GPUs exist, CPU everywhere else."""

from __future__ import annotations

import pytest
import torch

from vflfs.ml.devices import resolve_device
from vflfs.runtime.simulation import backend_config

from helpers import tiny_config


def test_cpu_is_always_available():
    assert resolve_device("cpu", 3) == torch.device("cpu")


def test_explicit_device_is_kept():
    assert resolve_device("cuda:1", 0) == torch.device("cuda:1")


def test_bad_device_name():
    with pytest.raises(ValueError, match="device must be one of"):
        resolve_device("tpu", 0)


def test_auto_round_robins_over_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert [str(resolve_device("auto", i)) for i in range(3)] == ["cuda:0", "cuda:1", "cuda:0"]
    cfg = tiny_config("split.num_parties=4")
    assert backend_config(cfg)["client-resources-num-gpus"] == 0.5
    assert backend_config(tiny_config("device=cpu"))["client-resources-num-gpus"] == 0.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_without_gpus():
    assert resolve_device("auto", 5) == torch.device("cpu")
    with pytest.raises(RuntimeError, match="no GPU is visible"):
        resolve_device("cuda", 0)
    resources = backend_config(tiny_config())
    assert resources["client-resources-num-gpus"] == 0.0
