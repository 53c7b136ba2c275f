"""The server's message flow of the secure interactive layer (``strategy.secure``).

``none`` (default): the plain protocol of spec section 3. ``plaintext`` / ``paillier``: the
interactive layer runs the split-weight protocol of :mod:`vflfs.ml.secure_layer` (its docstring
says what each side sees). Per training batch: the ``train.secure_step`` round-trip carries
``[[g_m]]`` up (packed along rows and along columns; the last masked embedding gradients
down), then one ``train.secure_forward`` and one ``train.secure_backward`` round-trip: three
round-trips per step instead of one.
Evaluation rows go through the same secure forward (``which = eval``).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from vflfs.federation import Federation
from vflfs.ml import secure_layer as sl
from vflfs.ml.metrics import score
from vflfs.ml.top import ServerModel
from vflfs.protocol import (
    SECURE_BACKWARD,
    SECURE_FORWARD,
    SECURE_SETUP,
    BackwardRequest,
    ForwardRequest,
    SecureSetupRequest,
)
from vflfs.protocol.secure_layer import EVAL, TRAIN
from vflfs.server_app.experiment import Experiment


class SecureLayer:
    """Holds the server's key, ``W~`` (in the top model's interactive weights) and the flow."""

    def __init__(
        self,
        mode: str,
        federation: Federation,
        experiment: Experiment,
        server: ServerModel,
        key_bits: int = 2048,
        noise: float = 1.0,
        lr: float = 0.1,
        workers: int | None = None,
        randomness: str = "djn",
    ) -> None:
        self.mode, self.federation, self.server, self.lr = mode, federation, server, float(lr)
        self.own = sl.make_cipher(mode, key_bits, workers, randomness)
        self.seconds = {"forward": 0.0, "head": 0.0, "backward": 0.0}
        layers = server.model.interactive
        replies = federation.send(
            SECURE_SETUP,
            {
                m: SecureSetupRequest(
                    mode=mode,
                    key_bits=int(key_bits),
                    server_key=self.own.public_bytes(),
                    width=int(layers[m].out_features),
                    noise=float(noise),
                    lr=self.lr,
                    workers=int(workers or 0),
                    randomness=randomness,
                )
                for m in range(experiment.num_parties)
            },
        )
        self.parties = [
            sl.public_cipher(mode, replies[m].public_key, workers, randomness)
            for m in range(len(replies))
        ]

    def w_tilde(self, m: int, mask: np.ndarray | None) -> np.ndarray:
        w = self.server.model.interactive[m].weight.detach().cpu().numpy().astype(np.float64)
        return w if mask is None else w[:, np.asarray(mask, bool)]

    def forward(
        self, cts: dict[int, np.ndarray], masks: dict, which: str, rows: int
    ) -> list[np.ndarray]:
        """Steps 2-4 for every party at once (``rows`` rows): ``z_m`` per party."""
        t = time.perf_counter()
        down, keep = {}, {}
        for m, wire in cts.items():
            party = self.parties[m]
            y, keep[m] = sl.server_forward(
                party, party.from_wire(wire), self.w_tilde(m, masks[m]), rows
            )
            down[m] = ForwardRequest(y=[y], which=which)
        replies = self.federation.send(SECURE_FORWARD, down)
        zs = [sl.server_z(replies[m].z[0], keep[m]) for m in sorted(cts)]
        self.seconds["forward"] += time.perf_counter() - t
        return zs

    def server_steps(self, experiment: Experiment, replies: dict[int, dict], batches):
        """The top model's steps through the secure layer; masked gradients for each party."""
        losses: list[float] = []
        grads: list[list[np.ndarray]] = [[] for _ in replies]
        parties = range(len(replies))
        for k, rows in enumerate(batches):
            masks = {m: None if replies[m].open is None else replies[m].open[k] for m in parties}
            wires = {m: replies[m].cipher[k] for m in parties}
            if k > 0:  # the party's protocol ops address pending batch k by position
                raise ValueError("strategy.secure needs training.local_steps = 1")
            zs = self.forward(wires, masks, TRAIN, len(rows))
            t = time.perf_counter()
            loss, delta = head_step(self.server, zs, experiment.y[rows])
            self.seconds["head"] += time.perf_counter() - t
            losses.append(loss)
            t = time.perf_counter()
            down, keep = {}, {}
            for m in parties:
                w = self.w_tilde(m, masks[m])
                cts = self.parties[m].from_wire(replies[m].cipher_t[k])
                gradw, enc_delta, big_r, dw = sl.server_backward(
                    self.parties[m], self.own, cts, delta.astype(np.float64), w
                )
                down[m] = BackwardRequest(gradw=[gradw], delta=[enc_delta])
                keep[m] = (big_r, dw)
            back = self.federation.send(SECURE_BACKWARD, down)
            for m in parties:
                big_r, dw = keep[m]
                noisy = sl.server_weight_gradient(back[m].gradw[0], big_r)
                layer = self.server.model.interactive[m].weight
                cols = slice(None) if masks[m] is None else np.asarray(masks[m], bool)
                w = layer.detach().cpu().numpy().copy()
                w[:, cols] -= self.lr * noisy
                layer.data.copy_(layer.data.new_tensor(w))
                grads[m].append(sl.server_embedding_gradient(self.own, back[m].de[0], dw))
            self.seconds["backward"] += time.perf_counter() - t
        return losses, grads

    def evaluate(self, experiment: Experiment, replies: dict[int, dict]) -> tuple[dict, int]:
        """Scores of each evaluation set from the encrypted evaluation embeddings."""
        parties = range(len(replies))
        zs = self.forward(
            {m: replies[m].eval_cipher for m in parties},
            {m: replies[m].eval_open for m in parties},
            EVAL,
            sum(len(r) for r in experiment.eval_sets().values()),
        )
        scores: dict[str, float] = {}
        start = 0
        for name, rows in experiment.eval_sets().items():
            part = [z[start : start + len(rows)] for z in zs]
            loss_key = "train_eval_loss" if name == "train" else f"{name}_loss"
            scores[loss_key], scores[f"{name}_metric"] = head_evaluate(
                self.server, part, experiment.y[rows]
            )
            start += len(rows)
        sent = sum(int(replies[m].eval_cipher.nbytes) for m in parties)
        return scores, sent


# -- the top model above the interactive layer ---------------------------------------------------
def head_step(server, zs: list[np.ndarray], y: np.ndarray) -> tuple[float, np.ndarray]:
    """One step of the top model above the interactive layer (its bias and head, with the
    configured optimiser); returns the loss and ``delta = dL/dz``."""
    model, task = server.model, server.task
    z = torch.tensor(np.sum(zs, axis=0), device=server.device, requires_grad=True)
    model.train()
    server.optimizer.zero_grad(set_to_none=True)
    out = model.head(z + model.interactive[0].bias)
    loss = task.loss(out, task.target(y).to(server.device))
    loss.backward()
    server.after_backward()
    server.optimizer.step()
    return float(loss.detach()), z.grad.cpu().numpy()


def head_evaluate(server, zs: list[np.ndarray], y: np.ndarray) -> tuple[float, float]:
    model, task = server.model, server.task
    model.eval()
    with torch.no_grad():
        z = torch.tensor(np.sum(zs, axis=0), device=server.device)
        out = model.head(z + model.interactive[0].bias)
        loss = float(task.loss(out, task.target(y).to(server.device)))
    model.train()
    return loss, score(task, out, y)


def make_secure_layer(cfg, federation: Federation, experiment: Experiment, server: ServerModel):
    """The secure layer of ``strategy.secure`` (None for ``none``)."""
    s = cfg.strategy
    mode = str(s.get("secure", "none") or "none")
    if mode == "none":
        return None
    if int(cfg.training.local_steps) != 1:
        raise ValueError("strategy.secure needs training.local_steps = 1")
    return SecureLayer(
        mode,
        federation,
        experiment,
        server,
        key_bits=int(s.get("secure_key_bits", 2048)),
        noise=float(s.get("secure_noise", 1.0)),
        lr=float(s.get("secure_lr", 0.1)),
        workers=s.get("secure_workers"),
        randomness=str(s.get("secure_randomness", "djn")),
    )
