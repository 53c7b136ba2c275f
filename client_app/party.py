"""One party's learning state and maths: its data view, bottom model and optimiser.

The party never sees labels: it turns rows of its own columns into embeddings, and applies
the gradients the server returns for them (SPEC section 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vflfs.datasets import PartyData
from vflfs.ml.devices import resolve_device
from vflfs.ml.models import BottomModel, BottomSpec, seeded
from vflfs.ml.optim import load_optimizer_arrays, make_optimizer, optimizer_arrays


@dataclass(frozen=True)
class PartySpec:
    """What the server tells a party in the setup message (no data, only instructions)."""

    index: int
    seed: int
    device: str
    model: dict
    optimizer: dict
    eval_chunk: int = 8192
    threads: int | None = None

    @classmethod
    def from_dict(cls, d: dict) -> PartySpec:
        return cls(
            index=int(d["index"]),
            seed=int(d["seed"]),
            device=str(d.get("device", "auto")),
            model=dict(d["model"]),
            optimizer=dict(d["optimizer"]),
            eval_chunk=int(d.get("eval_chunk", 8192)),
            threads=d.get("threads"),
        )


class Party:
    """A party's bottom model over its data view, with the training-step maths."""

    def __init__(self, spec: PartySpec, data: PartyData) -> None:
        self.spec = spec
        self.data = data
        if spec.threads:
            torch.set_num_threads(int(spec.threads))
        self.device = resolve_device(spec.device, spec.index)
        self.X = torch.tensor(data.X, device=self.device)
        bottom = BottomSpec.from_dict(spec.model)
        self.model = seeded(spec.seed, BottomModel, self.X.shape[1], bottom).to(self.device)
        opt = dict(spec.optimizer)
        self.optimizer = make_optimizer(self.model.parameters(), opt.pop("name", "adam"), **opt)
        self.pending: list[np.ndarray] = []
        self.eval_rows = np.zeros(0, np.int64)  # rows the server scores (validation + test)
        self.steps_taken = 0

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def _rows(self, rows: np.ndarray) -> torch.Tensor:
        return self.X[torch.tensor(rows, device=self.device, dtype=torch.long)]

    def forward(self, rows: np.ndarray) -> np.ndarray:
        """Training-mode embedding of ``rows`` (no graph kept; it is recomputed on backward)."""
        with torch.no_grad():
            return self.model(self._rows(rows)).cpu().numpy()

    def apply_gradient(self, rows: np.ndarray, grad: np.ndarray) -> None:
        """Back-propagate dL/dg for ``rows`` through the current weights and step."""
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(self._rows(rows))
        out.backward(torch.tensor(grad, device=self.device))
        self.optimizer.step()
        self.steps_taken += 1

    def embed(self, rows: np.ndarray) -> np.ndarray:
        """Evaluation-mode embeddings of many rows, computed in chunks."""
        self.model.eval()
        try:
            with torch.no_grad():
                chunks = [
                    self.model(self._rows(rows[i : i + self.spec.eval_chunk])).cpu().numpy()
                    for i in range(0, len(rows), self.spec.eval_chunk)
                ]
        finally:
            self.model.train()
        if not chunks:
            return np.zeros((0, self.model.net[-1].out_features), np.float32)
        return np.concatenate(chunks)

    def importance(self) -> tuple[str, np.ndarray]:
        """Per input feature: the L2 norm of its column in the input layer."""
        weight = self.model.input_layer.weight.detach()
        return "weight_norm", weight.norm(dim=0).cpu().numpy()

    # -- state as arrays (what context.state stores) ------------------------------------------
    def state_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        return {
            "model": {k: v.detach().cpu().numpy() for k, v in self.model.state_dict().items()},
            "optim": optimizer_arrays(self.optimizer),
            "pending": {str(i): rows for i, rows in enumerate(self.pending)},
        }

    def load_state_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        self.model.load_state_dict(
            {k: torch.from_numpy(np.array(v)) for k, v in arrays["model"].items()}
        )
        load_optimizer_arrays(self.optimizer, arrays["optim"])
        pending = arrays["pending"]
        self.pending = [pending[str(i)] for i in range(len(pending))]
