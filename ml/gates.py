"""Gaussian stochastic gates (Yamada et al. 2020; FedSDG-FS, Li et al. 2023, Eq. 4).

A gate per input (feature or embedding component): s = clamp(mu + eps, 0, 1) with
eps ~ N(0, sigma^2) while training (one draw per gate per batch), clamp(mu, 0, 1) at evaluation.
The regulariser is lambda * mean_i Phi(mu_i / sigma), the expected share of open gates (the
paper writes a sum; STG's and the authors' code use the mean, the default here).
"""

from __future__ import annotations

import torch
from torch import nn


class GaussianGate(nn.Module):
    """Multiplies its input's last dimension by stochastic gates."""

    def __init__(
        self,
        n: int,
        sigma: float = 1.0,
        lam: float = 0.1,
        init: torch.Tensor | None = None,
        reduce: str = "mean",
    ) -> None:
        super().__init__()
        if init is None:
            init = 0.5 + 0.01 * torch.randn(n)
        self.mu = nn.Parameter(torch.as_tensor(init, dtype=torch.float32).clone())
        self.sigma = float(sigma)
        self.lam = float(lam)
        if reduce not in ("mean", "sum"):
            raise ValueError(f"gate reduce must be 'mean' or 'sum', got {reduce!r}")
        self.reduce = reduce
        self.noise: torch.Generator | None = None  # the training noise's source (None: torch's)

    def gates(self) -> torch.Tensor:
        """The gate values for this forward pass (noisy while training)."""
        if self.training:
            noise = torch.randn(
                self.mu.shape, generator=self.noise, dtype=self.mu.dtype, device=self.mu.device
            )
            return torch.clamp(self.mu + self.sigma * noise, 0.0, 1.0)
        return torch.clamp(self.mu, 0.0, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.gates()
        self.last = s.detach()  # the gate values of the latest pass (which ones were open)
        return x * s

    def penalty(self) -> torch.Tensor:
        """lambda * reduce_i Phi(mu_i / sigma)."""
        phi = 0.5 * (1 + torch.erf(self.mu / (self.sigma * 2**0.5)))
        return self.lam * (phi.mean() if self.reduce == "mean" else phi.sum())

    @torch.no_grad()
    def project(self) -> None:
        """Clip mu to [-1, 1] (after each optimiser step).

        Beyond 1 a gate is always open and beyond -1 almost always closed, so the clip changes
        no evaluation gate; it keeps Phi(mu / sigma) off its flat tails, where the
        regulariser's gradient vanishes and a gate that grew far open during training could
        no longer be closed by any lambda.
        """
        self.mu.clamp_(-1.0, 1.0)

    def open(self) -> torch.Tensor:
        """Boolean mask of the gates open at evaluation (clamp(mu, 0, 1) > 0)."""
        return self.mu.detach() > 0

    def keep(self, index: torch.Tensor) -> None:
        """Drop every gate but those at ``index``."""
        self.mu = nn.Parameter(self.mu.detach()[index].clone())
