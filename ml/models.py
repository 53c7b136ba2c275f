"""Bottom (party) and top (server) models of split learning.

A party's bottom model maps its columns to an embedding; the server's top model reads the
parties' embeddings through an *interactive layer* (one linear map per party, summed) and an
MLP head. ``input_layer`` is the layer whose columns are the party's input features (gates and
group-lasso prox act on it).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import nn

# A party left without features (or components) has zero-width layers: nothing to initialise.
warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "none": None}


def _activation(name: str) -> nn.Module | None:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    factory = ACTIVATIONS[name]
    return factory() if factory else None


def mlp(sizes: Sequence[int], activation: str, last_activation: bool = False) -> nn.Sequential:
    """Linear layers ``sizes[0] -> ... -> sizes[-1]`` with ``activation`` between them."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or last_activation:
            act = _activation(activation)
            if act is not None:
                layers.append(act)
    return nn.Sequential(*layers)


@dataclass(frozen=True)
class BottomSpec:
    """A party's bottom model: ``d_in -> hidden... -> embedding_size``."""

    hidden: tuple[int, ...] = (64,)
    embedding_size: int = 16
    activation: str = "relu"
    embedding_activation: bool = False

    @classmethod
    def from_dict(cls, d: dict) -> BottomSpec:
        return cls(
            hidden=tuple(d.get("hidden", (64,))),
            embedding_size=int(d.get("embedding_size", 16)),
            activation=str(d.get("activation", "relu")),
            embedding_activation=bool(d.get("embedding_activation", False)),
        )


@dataclass(frozen=True)
class TopSpec:
    """The server's model: interactive layer to ``hidden[0]`` (or the output), then an MLP."""

    hidden: tuple[int, ...] = (32,)
    activation: str = "relu"

    @classmethod
    def from_dict(cls, d: dict) -> TopSpec:
        return cls(
            hidden=tuple(d.get("hidden", (32,))), activation=str(d.get("activation", "relu"))
        )


class BottomModel(nn.Module):
    """Party bottom model h_m."""

    def __init__(self, d_in: int, spec: BottomSpec) -> None:
        super().__init__()
        sizes = [d_in, *spec.hidden, spec.embedding_size]
        self.net = mlp(sizes, spec.activation, last_activation=spec.embedding_activation)

    @property
    def input_layer(self) -> nn.Linear:
        return self.net[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class TopModel(nn.Module):
    """Server top model: per-party linear maps summed (the interactive layer), then an MLP."""

    def __init__(self, embedding_sizes: Sequence[int], n_out: int, spec: TopSpec) -> None:
        super().__init__()
        width = spec.hidden[0] if spec.hidden else n_out
        self.interactive = nn.ModuleList(
            nn.Linear(e, width, bias=(m == 0)) for m, e in enumerate(embedding_sizes)
        )
        if spec.hidden:
            act = _activation(spec.activation)
            head = [act] if act is not None else []
            self.head = nn.Sequential(*head, *mlp([*spec.hidden, n_out], spec.activation))
        else:
            self.head = nn.Sequential()

    def forward(self, embeddings: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.head(self.interact(embeddings))

    def interact(self, embeddings: Sequence[torch.Tensor]) -> torch.Tensor:
        """The interactive layer's output: the parties' linear maps, summed (the head's input)."""
        return sum(layer(e) for layer, e in zip(self.interactive, embeddings, strict=True))


def seeded(seed: int, build, *args, **kwargs):
    """Build a module under a fixed torch seed without touching the global RNG stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(*args, **kwargs)


def party_seed(seed: int, party: int) -> int:
    """Seed of party ``party``'s model initialisation."""
    return seed * 1000 + party + 1


def server_seed(seed: int) -> int:
    return seed * 1000


@dataclass
class Task:
    """What the server's loss and metric look like."""

    kind: str  # "classification" | "regression"
    n_classes: int = 0
    # Regression: the model fits (y - center) / scale, the training rows' standardised
    # targets, so that one learning rate and one penalty unit serve targets of any scale.
    center: float = 0.0
    scale: float = 1.0
    n_out: int = field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in ("classification", "regression"):
            raise ValueError(f"unknown task {self.kind!r}")
        self.n_out = self.n_classes if self.kind == "classification" else 1

    @property
    def metric_name(self) -> str:
        return "accuracy" if self.kind == "classification" else "r2"

    def loss(
        self, output: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
    ) -> torch.Tensor:
        """Cross-entropy or squared error; ``reduction="none"``: one value per sample."""
        if self.kind == "classification":
            return nn.functional.cross_entropy(output, target, reduction=reduction)
        return nn.functional.mse_loss(output.squeeze(-1), target, reduction=reduction)

    def target(self, y) -> torch.Tensor:
        t = torch.as_tensor(y)
        if self.kind == "classification":
            return t.long()
        return (t.double() - self.center).div(self.scale).float()

    def fitted(self, y_train) -> Task:
        """Regression: standardised on the training targets ``y_train``; otherwise itself."""
        y = torch.as_tensor(y_train, dtype=torch.float64)
        if self.kind != "regression" or len(y) == 0:
            return self
        std = float(y.std(correction=0))
        return replace(self, center=float(y.mean()), scale=std if std > 0 else 1.0)
