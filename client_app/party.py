"""One party's learning state and maths: its data view, bottom model and optimiser.

The party never sees labels: it turns rows of its own columns into embeddings, and applies
the gradients the server returns for them (spec section 3).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from vflfs.datasets import PartyData, center
from vflfs.ml.components import full_width
from vflfs.ml.devices import as_tensor, resolve_device
from vflfs.ml.flat_state import FlatState
from vflfs.ml.models import BottomSpec, seeded
from vflfs.ml.optim import make_optimizer
from vflfs.ml.party_model import PartyModel
from vflfs.ml.prox import ZERO, column_norms, group_lasso_prox_
from vflfs.ml.stale_gradients import corrected_gradient

from .party_state import PartyState


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
    gates: dict = field(default_factory=dict)  # {"input": {...}, "embedding": {...}}
    prox: dict | None = None  # {"lam": ..., "lr": ...}: group lasso on input columns
    center: bool = True  # subtract the training rows' column means from the inputs
    keep: dict = field(default_factory=dict)  # {"features": [...], "components": [...]}
    penalty_scale: float = 1.0  # multiplies every gate lambda and the prox lambda

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
            gates=dict(d.get("gates") or {}),
            prox=d.get("prox"),
            center=bool(d.get("center", True)),
            keep=dict(d.get("keep") or {}),
            penalty_scale=float(d.get("penalty_scale", 1.0)),
        )


class Party(PartyState):
    """A party's model over its data view, with the training-step maths.

    ``features`` and ``components`` are the input features and embedding components still in
    use (indices into the party's full sets); removed ones are no longer computed or sent.
    """

    def __init__(
        self, spec: PartySpec, data: PartyData, train_rows: np.ndarray | None = None
    ) -> None:
        self.spec = spec
        self.data = data
        if spec.threads:
            torch.set_num_threads(int(spec.threads))
        self.device = resolve_device(spec.device, spec.index)
        X = data.X
        if spec.center and train_rows is not None:
            X = center(X, train_rows)
        # Row-major: a batch's rows are then contiguous runs of memory. A party's columns
        # arrive column-major (a column slice of the dataset), and gathering 128 rows of one
        # took ~20x as long (MADELON: 157 against 8 us, twice per party and step). The
        # row-major copy is the tensor's own memory: no second copy of the party's data.
        X = np.asarray(X)
        host = torch.tensor(X) if X.flags.c_contiguous else torch.from_numpy(X.copy(order="C"))
        self.X_all = host.to(self.device)
        bottom = BottomSpec.from_dict(spec.model)
        self.model = seeded(
            spec.seed,
            PartyModel,
            self.X_all.shape[1],
            bottom,
            spec.gates.get("input"),
            spec.gates.get("embedding"),
        ).to(self.device)
        self.features = np.arange(self.X_all.shape[1])
        self.components = np.arange(bottom.embedding_size)
        self.X = self.X_all
        # the rows that step requests' batch plans draw from (BatchPlan)
        self.train_rows = np.zeros(0, np.int64) if train_rows is None else train_rows
        self.optimizer = self._make_optimizer()
        self.pending: list[np.ndarray] = []  # rows of the batches whose gradients are due
        self.pending_seeds: list[int] = []  # their gate-noise seeds
        self.pending_open: list[np.ndarray | None] = []  # the components their embeddings sent
        # with K > 1: the embeddings sent (full width, zero where not sent), which the
        # stale gradients' correction starts from (vflfs.ml.stale_gradients)
        self.pending_sent: list[np.ndarray] = []
        self.eval_rows = np.zeros(0, np.int64)  # rows the server scores (validation + test)
        self.steps_taken = 0
        # Kept forward passes of the pending batches (with their parameters' versions), which
        # a live party backpropagates through instead of recomputing them; a party restored
        # from its records has none and recomputes.
        self.graphs: list[tuple[torch.Tensor, list[tuple[int, int]]]] = []
        self._flat = FlatState()  # the model and optimiser in one buffer each, for saving
        self.set_penalty(spec.penalty_scale)
        if spec.keep:  # a fresh model on the kept features, drawn as one built on them
            self.keep(spec.keep.get("features"), spec.keep.get("components"))
            self.model.fresh_inputs(self.n_features)

    def _make_optimizer(self) -> torch.optim.Optimizer:
        opt = dict(self.spec.optimizer)
        return make_optimizer(self._param_groups(), opt.pop("name", "adam"), **opt)

    def _param_groups(self) -> list[dict]:
        """The model's parameters in its order, a group per gate and one for the bottom
        model; a gate whose settings say ``optimizer: sgd`` takes plain gradient steps at its
        ``lr`` (the party's optimiser's otherwise)."""
        groups = []
        for name, module in (
            ("input", self.model.input_gate),
            (None, self.model.bottom),
            ("embedding", self.model.embedding_gate),
        ):
            if module is None:
                continue
            group: dict = {"params": list(module.parameters())}
            settings = self.spec.gates.get(name, {}) if name else {}
            if settings.get("optimizer", "shared") == "sgd":
                group.update(plain_sgd=True, lr=float(settings["lr"]))
            groups.append(group)
        return groups

    @property
    def n_features(self) -> int:
        return int(self.X_all.shape[1])

    def set_penalty(self, scale: float) -> None:
        """Scale every gate's lambda and the prox's lambda (a regularisation path's point)."""
        self.penalty_scale = float(scale)
        for name, gate in (
            ("input", self.model.input_gate),
            ("embedding", self.model.embedding_gate),
        ):
            if gate is not None:
                gate.lam = float(self.spec.gates[name].get("lam", 0.1)) * self.penalty_scale

    @property
    def prox_tau(self) -> float:
        """The group-lasso threshold of one step (0 without prox)."""
        if not self.spec.prox:
            return 0.0
        p = self.spec.prox
        return float(p["lam"]) * float(p["lr"]) * self.penalty_scale

    # -- structure ----------------------------------------------------------------------------
    def keep(self, features: np.ndarray | None = None, components: np.ndarray | None = None):
        """Remove every feature / embedding component not listed (indices into the full sets).

        The layers shrink and the optimiser restarts on the smaller model.
        """
        if features is not None:
            features = np.array(features, dtype=np.int64)
            local = np.searchsorted(self.features, features)
            if not np.array_equal(self.features[local], features):
                raise ValueError("can only keep features that are still in use")
            self.model.keep_inputs(torch.as_tensor(local, device=self.device))
            self.features = features
            self.X = self.X_all[:, torch.as_tensor(features, device=self.device)]  # row-major
        if components is not None:
            components = np.array(components, dtype=np.int64)
            local = np.searchsorted(self.components, components)
            self.model.keep_outputs(torch.as_tensor(local, device=self.device))
            self.components = components
        self.optimizer = self._make_optimizer()

    def selected(self) -> np.ndarray:
        """Features the model uses: kept, with an open input gate, with a non-zero column."""
        use = np.ones(len(self.features), dtype=bool)
        if self.model.input_gate is not None:
            use &= self.model.input_gate.open().cpu().numpy()
        if self.spec.prox:
            use &= (column_norms(self.model.input_layer.weight) > ZERO).cpu().numpy()
        return self.features[use]

    def open_components(self) -> np.ndarray:
        """Embedding components sent at evaluation: kept and (with gates) open."""
        if self.model.embedding_gate is None:
            return self.components
        return self.components[self.model.embedding_gate.open().cpu().numpy()]

    # -- the step maths -----------------------------------------------------------------------
    def _rows(self, rows: np.ndarray) -> torch.Tensor:
        # index_select: the same rows as X[index], ~3x faster on the CPU for a batch
        return torch.index_select(self.X, 0, as_tensor(rows, self.device, np.int64))

    @contextmanager
    def _noise(self, seed: int) -> Iterator[None]:
        """Gate noise drawn from ``seed``, so a forward pass can be recomputed exactly."""
        gates = [g for g in (self.model.input_gate, self.model.embedding_gate) if g is not None]
        if not gates:
            yield
            return
        noise = torch.Generator(device=self.device).manual_seed(seed)
        for gate in gates:
            gate.noise = noise
        try:
            yield
        finally:
            for gate in gates:
                gate.noise = None

    def batch_seeds(self, n: int) -> list[int]:
        """Seeds of the gate noise of the next ``n`` batches."""
        base = self.spec.seed * 1_000_003 + self.steps_taken * 7919
        return [(base + i) % 2**31 for i in range(n)]

    def _open(self) -> np.ndarray | None:
        """Components the last forward pass's embedding gates left open (None: no gates)."""
        gate = self.model.embedding_gate
        return None if gate is None else (gate.last > 0).cpu().numpy()

    def forward(
        self, rows: np.ndarray, seed: int, keep_graph: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Training-mode embedding of ``rows``; the graph is recomputed on backward, or, with
        ``keep_graph``, kept in this live party for it (:attr:`graphs`, never in its state).

        With embedding gates only the open components are returned, with their mask.
        """
        with torch.set_grad_enabled(keep_graph), self._noise(seed):
            out = self.model(self._rows(rows))
        if keep_graph:
            self.graphs.append((out, self._versions()))
        out = out.detach().cpu().numpy()
        mask = self._open()
        return (out, None) if mask is None else (out[:, mask], mask)

    def _versions(self) -> list[tuple[int, int]]:
        """The model's parameters (the optimiser's: new layers come with a new one) and their
        in-place versions (an optimiser step, a gate's projection, a loaded state change them)."""
        return [(id(p), p._version) for g in self.optimizer.param_groups for p in g["params"]]

    def _kept_graph(self, k: int) -> torch.Tensor | None:
        """The forward pass of pending batch ``k`` if it was kept and the model has not changed
        since: backward through it is backward through its recomputation, to the bit."""
        if k >= len(self.graphs) or len(self.graphs) != len(self.pending):
            return None
        out, versions = self.graphs[k]
        return out if versions == self._versions() else None

    def embed_batches(
        self, batches: list[np.ndarray]
    ) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """Training-mode embeddings of the next batches (:meth:`forward`), which become the
        pending ones; each one's embedding-gate mask is kept for :meth:`apply_pending`."""
        self.pending, self.pending_seeds = batches, self.batch_seeds(len(batches))
        self.graphs = []
        keep = len(batches) == 1  # with K > 1 the model moves between them
        out = [self.forward(b, s, keep) for b, s in zip(batches, self.pending_seeds, strict=True)]
        self.pending_open = [mask for _, mask in out]
        width = len(self.components)
        self.pending_sent = [full_width(e, m, width) for e, m in out] if len(batches) > 1 else []
        return out

    def apply_pending(self, grads: list[np.ndarray], curvature: np.ndarray | None = None) -> None:
        """Apply the server's gradients of the pending batches, one each, in order.

        With K > 1 local steps the embedding gates move between a batch's forward pass and the
        recomputation that applies its gradient; each gradient covers the components its
        forward pass sent, kept with the batch. With the loss's ``curvature`` along each
        gradient, a batch applied after the party's own steps gets its stale gradient carried
        to its fresh embedding (:func:`~vflfs.ml.stale_gradients.corrected_gradient`).
        """
        if len(grads) != len(self.pending):
            raise ValueError(
                f"got {len(grads)} gradients for {len(self.pending)} pending batches; "
                "the server and party are out of step"
            )
        batches = zip(self.pending, self.pending_seeds, self.pending_open, grads, strict=True)
        for k, (rows, seed, sent, grad) in enumerate(batches):
            stale = None
            if k > 0 and curvature is not None and self.pending_sent:
                stale = (self.pending_sent[k], float(curvature[k]))
            self.apply_gradient(rows, grad, seed, sent, stale, self._kept_graph(k))
        self.graphs = []

    def apply_gradient(
        self,
        rows: np.ndarray,
        grad: np.ndarray,
        seed: int,
        sent: np.ndarray | None = None,
        stale: tuple[np.ndarray, float] | None = None,
        graph: torch.Tensor | None = None,
    ) -> None:
        """Back-propagate dL/dg for ``rows`` (plus the gates' regulariser) and step.

        ``grad`` covers the components ``sent``: the embedding-gate mask of the forward pass
        the server saw (default: the components open in this recomputation; all without
        gates). Components closed now get no update from it, their gate being zero.
        ``stale``: the embedding the server differentiated at (full width) and the loss's
        curvature along ``grad``, to carry ``grad`` to this recomputation's embedding (skipped
        if the party's components changed in between). ``graph``: the forward pass that sent
        the embedding, kept (:meth:`_kept_graph`), instead of its recomputation.
        """
        self.optimizer.zero_grad(set_to_none=True)
        out = graph
        if out is None:
            with self._noise(seed):
                out = self.model(self._rows(rows))
        full = torch.zeros_like(out)
        mask = self._open() if sent is None else sent
        grad_t = as_tensor(grad, self.device)
        if mask is None:
            full = grad_t
        else:
            full[:, torch.as_tensor(mask, device=self.device)] = grad_t
        if stale is not None and stale[0].shape == tuple(out.shape):
            embedded, curvature = stale
            fresh = out if mask is None else out * torch.as_tensor(mask, device=self.device)
            embedded_t = torch.as_tensor(embedded, device=self.device)
            full = corrected_gradient(full, fresh, embedded_t, curvature)
        objective = (out * full).sum()
        penalty = self.model.penalty()
        if penalty is not None:
            objective = objective + penalty
        objective.backward()
        self.optimizer.step()
        self.model.project_gates()
        if self.prox_tau > 0:
            group_lasso_prox_(self.model.input_layer.weight, self.prox_tau)
        self.steps_taken += 1

    def embed(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Evaluation-mode embeddings of many rows, in chunks; with embedding gates only the
        open components, with their mask."""
        out = self._embed_all(rows)
        mask = self._open()
        return (out, None) if mask is None else (out[:, mask], mask)

    def _embed_all(self, rows: np.ndarray) -> np.ndarray:
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
            return np.zeros((0, self.model.embedding_size), np.float32)
        return np.concatenate(chunks)

    def importance(self) -> tuple[str, np.ndarray]:
        """Per feature of the full set: its gate (with input gates) or its column norm."""
        values = np.zeros(self.n_features, np.float32)
        if self.model.input_gate is not None:
            kind, used = "gate", torch.clamp(self.model.input_gate.mu.detach(), 0, 1)
        else:
            kind, used = "weight_norm", column_norms(self.model.input_layer.weight)
        values[self.features] = used.cpu().numpy()
        return kind, values
