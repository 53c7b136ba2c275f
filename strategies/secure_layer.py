"""The server's message flow of the secure interactive layer (``secure=plaintext|paillier``).

``plaintext`` / ``paillier``: the interactive layer runs the split-weight protocol of
:mod:`vflfs.ml.secure_layer` (its docstring says what each side sees); ``none`` is the plain
layer of :mod:`vflfs.strategies.interactive`. Per training batch: the secure step round-trip
carries ``[[g_m]]`` up (packed along rows and along columns; the last masked embedding
gradients down), then one secure forward and one secure backward round-trip: three
round-trips per step instead of one. Evaluation rows go through the same secure forward.
The top model's step above the layer is the plain one's, prox included: the server's
proximal step acts on its share ``W~`` of the interactive weights.
"""

from __future__ import annotations

import numpy as np
import torch

from vflfs.federation import Federation
from vflfs.ml import secure_layer as sl
from vflfs.ml.top import ServerModel
from vflfs.protocol import (
    SECURE_BACKWARD,
    SECURE_FORWARD,
    SECURE_SETUP,
    SECURE_STEP,
    BackwardRequest,
    Body,
    ForwardRequest,
    SecureSetupRequest,
)
from vflfs.protocol.secure_layer import EVAL, TRAIN
from vflfs.server_app.experiment import Experiment

from .interactive import InteractiveLayer, Pass
from .settings import SecureConfig


class SecureLayer(InteractiveLayer):
    """Holds the server's key, ``W~`` (in the top model's interactive weights) and the flow."""

    step_operation = SECURE_STEP

    def __init__(
        self,
        secure: SecureConfig,
        federation: Federation,
        experiment: Experiment,
        server: ServerModel,
    ) -> None:
        super().__init__(server)
        mode, workers, randomness = secure.mode, secure.workers, secure.randomness
        self.mode, self.federation, self.lr = mode, federation, secure.lr
        self.own = sl.make_cipher(mode, secure.key_bits, workers, randomness)
        layers = server.model.interactive
        replies = federation.send(
            SECURE_SETUP,
            {
                m: SecureSetupRequest(
                    mode=mode,
                    key_bits=secure.key_bits,
                    server_key=self.own.public_bytes(),
                    width=int(layers[m].out_features),
                    noise=secure.noise,
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

    def secure_forward(
        self, cts: dict[int, np.ndarray], masks: dict, which: str, rows: int
    ) -> list[np.ndarray]:
        """Steps 2-4 for every party at once (``rows`` rows): ``z_m`` per party."""
        down, keep = {}, {}
        for m, wire in cts.items():
            party = self.parties[m]
            y, keep[m] = sl.server_forward(
                party, party.from_wire(wire), self.w_tilde(m, masks[m]), rows
            )
            down[m] = ForwardRequest(y=[y], which=which)
        replies = self.federation.send(SECURE_FORWARD, down)
        return [sl.server_z(replies[m].z[0], keep[m]) for m in sorted(cts)]

    def forward(self, replies: dict[int, Body], k: int, rows: int) -> Pass:
        if k > 0:  # the party's protocol ops address pending batch k by position
            raise ValueError("the secure layer (secure=...) needs training.local_steps = 1")
        masks = {m: None if r.open is None else r.open[k] for m, r in replies.items()}
        wires = {m: r.cipher[k] for m, r in replies.items()}
        zs = self.secure_forward(wires, masks, TRAIN, rows)
        return SecurePass(self, replies, masks, zs)

    def evaluation(self, replies: dict[int, Body], rows: int) -> tuple[list[np.ndarray], int]:
        zs = self.secure_forward(
            {m: r.eval_cipher for m, r in replies.items()},
            {m: r.eval_open for m, r in replies.items()},
            EVAL,
            rows,
        )
        return zs, sum(int(r.eval_cipher.nbytes) for r in replies.values())

    def head_input(self, parts: list[np.ndarray]) -> torch.Tensor:
        with torch.no_grad():
            z = torch.tensor(np.sum(parts, axis=0), device=self.server.device)
            return z + self.server.model.interactive[0].bias

    def backward(self, replies: dict[int, Body], masks: dict, delta: np.ndarray) -> list:
        """Steps 5-8: ``W~`` moves by its noised gradient; each party's masked embedding
        gradient."""
        down, keep = {}, {}
        delta = delta.astype(np.float64)
        enc_delta = sl.server_delta(self.own, delta)  # the same [[delta]]_s for every party
        for m, r in replies.items():
            w = self.w_tilde(m, masks[m])
            cts = self.parties[m].from_wire(r.cipher_t[0])
            gradw, _, big_r, dw = sl.server_backward(
                self.parties[m], self.own, cts, delta, w, enc_delta
            )
            down[m] = BackwardRequest(gradw=[gradw], delta=[enc_delta])
            keep[m] = (big_r, dw)
        back = self.federation.send(SECURE_BACKWARD, down)
        grads = []
        for m in replies:
            big_r, dw = keep[m]
            noisy = sl.server_weight_gradient(back[m].gradw[0], big_r)
            layer = self.server.model.interactive[m].weight
            cols = slice(None) if masks[m] is None else np.asarray(masks[m], bool)
            w = layer.detach().cpu().numpy().copy()
            w[:, cols] -= self.lr * noisy
            layer.data.copy_(layer.data.new_tensor(w))
            grads.append(sl.server_embedding_gradient(self.own, back[m].de[0], dw))
        return grads


class SecurePass(Pass):
    """The head's input is ``sum_m z_m`` plus the layer's bias; ``delta = dL/dz`` drives the
    protocol's backward round-trip, after the top model's optimiser step."""

    def __init__(
        self, layer: SecureLayer, replies: dict[int, Body], masks: dict, zs: list[np.ndarray]
    ) -> None:
        server = layer.server
        self.layer, self.replies, self.masks = layer, replies, masks
        self.leaf = torch.tensor(np.sum(zs, axis=0), device=server.device, requires_grad=True)
        self.z = self.leaf + server.model.interactive[0].bias
        self.grads: list[np.ndarray] = []

    def update(self) -> None:
        delta = self.leaf.grad.cpu().numpy()
        self.grads = self.layer.backward(self.replies, self.masks, delta)

    def gradients(self) -> list[np.ndarray]:
        return self.grads
