"""ANOVA F-statistic of each feature: plaintext reference and the exact fixed-point twin.

The SFFS-style filter baseline of Li et al. 2023 ("FedSDG-FS", INFOCOM, Sec. VI) scores a
feature by the one-way ANOVA F-statistic over the classes:

    F = [SSB / (c - 1)] / [SSW / (N - c)],   SSB = sum_k S_k^2 / n_k - S^2 / N,   SSW = SST - SSB,

with S_k the sum of the feature over class k, n_k the class size, S and SST = sum x^2 - S^2 / N
the party's own totals. Only sum_k S_k^2 / n_k involves labels. F is a monotone function of
rho = SSB / SST: F = (N - c) / (c - 1) * rho / (1 - rho), and rho is what the secure protocol
(:mod:`vflfs.ml.fstat_secure`) reveals to the server, computed from integers as
:func:`fstat_fixed_point` does: features quantised to ``value_bits``; exact class weights
v_k = L / n_k with L = prod_k n_k, so that sum_k v_k S_k^2 - ... = L N SSB has no rounding
error even when SSB is tiny; one rounded weight omega = round(2^E M / D), D = N sum x^2 - S^2 =
N SST, M = N^2 (2^P - 1)^2 a public bound on D (so that no scale of the feature leaks):
V = omega (N sum_k v_k S_k^2 - L S^2) ~ 2^E M L rho, exact to a relative 2^-(E+1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def quantize(X: np.ndarray, value_bits: int) -> np.ndarray:
    """Each column min-max scaled over these rows to integers 0..2^value_bits - 1 (int64).
    F is invariant under affine maps, so only the rounding changes it."""
    X = np.asarray(X, dtype=np.float64)
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = hi - lo
    scale = np.divide((1 << value_bits) - 1, span, out=np.zeros_like(span), where=span > 0)
    return np.rint((X - lo) * scale).astype(np.int64)


def f_from_rho(rho: float, rows: int, classes: int) -> float:
    """F = (N - c) / (c - 1) * rho / (1 - rho); 0 for rho <= 0, infinite for rho >= 1."""
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return float("inf")
    return (rows - classes) / (classes - 1) * rho / (1 - rho)


def class_weights(y: np.ndarray, n_classes: int) -> tuple[list[int], int]:
    """The server's secrets: v_k = L / n_k (0 for a class absent from these rows) and
    L = prod_k n_k over the present classes, so that v_k / L = 1 / n_k exactly."""
    n_k = [int(n) for n in np.bincount(np.asarray(y, dtype=np.int64), minlength=n_classes)]
    scale = 1
    for n in n_k:
        scale *= max(n, 1)
    return [scale // n if n else 0 for n in n_k], scale


@dataclass(frozen=True)
class FStatParams:
    """Public parameters of the secure F-statistic; masks hide each class sum S_k <= N 2^P."""

    n_classes: int
    rows: int
    classes_present: int
    value_bits: int  # P
    weight_bits: int  # E (of omega)
    mask_bits: int
    key_bits: int
    djn: bool = True  # DJN randomness for encryptions and re-randomisations (else r^n)

    def __post_init__(self) -> None:
        object.__setattr__(self, "djn", bool(self.djn))
        if not 1 <= self.value_bits <= 24 or not 8 <= self.weight_bits <= 64:
            raise ValueError(f"bad F-statistic parameters: {self}")
        if self.mask_bits < 20 or self.classes_present < 2:
            raise ValueError(f"bad F-statistic parameters: {self}")
        scale = self.n_classes * self.rows.bit_length()  # bits of L = prod_k n_k, at most
        value = self.weight_bits + 2 * self.bound.bit_length() + scale + 2
        if max(value, 2 * self.width + scale + 8) >= self.key_bits - 1:
            raise ValueError(f"a {self.key_bits}-bit key is too small for these F parameters")

    @property
    def bound(self) -> int:
        """M = N^2 (2^P - 1)^2 >= D = N sum x^2 - S^2."""
        return (self.rows * ((1 << self.value_bits) - 1)) ** 2

    @property
    def mask_range(self) -> int:
        return self.mask_bits + (self.rows * ((1 << self.value_bits) - 1)).bit_length()

    @property
    def width(self) -> int:
        return self.mask_range + 1

    @property
    def per_ct(self) -> int:
        from .paillier import slots_per_plaintext  # on use: the protocol imports this module

        return min(self.n_classes, slots_per_plaintext(self.key_bits, self.width))

    @property
    def chunks(self) -> int:
        return -(-self.n_classes // self.per_ct)

    def chunk(self, t: int) -> range:
        return range(t * self.per_ct, min((t + 1) * self.per_ct, self.n_classes))

    @property
    def v_width(self) -> int:
        """Bits of a slot holding V <= 2^E M L (1 + 2^-E), L = prod_k n_k < 2^(c bits(N))."""
        scale = self.n_classes * self.rows.bit_length()
        return self.weight_bits + self.bound.bit_length() + scale + 2

    @property
    def v_per_ct(self) -> int:
        """Features whose V share one returned plaintext."""
        return (self.key_bits - 1) // self.v_width

    def omega(self, total: int, squares: int) -> int:
        """The party's variance weight round(2^E M / D), D = N sum x^2 - S^2 (0 if constant)."""
        d = self.rows * int(squares) - int(total) ** 2
        return ((self.bound << (self.weight_bits + 1)) + d) // (2 * d) if d > 0 else 0

    def rho(self, value: int, scale: int) -> float:
        """The server's rho = V / (2^E M L) from the decrypted V and its L."""
        return int(value) / ((self.bound * int(scale)) << self.weight_bits)


def fstat_value(
    params: FStatParams, weights: list[int], scale: int, sums: list[int], total: int, squares: int
) -> int:
    """V = omega (N sum_k v_k S_k^2 - L S^2): the integer the server decrypts."""
    t = sum(v * s * s for v, s in zip(weights, sums, strict=True))
    w = params.omega(total, squares)
    return w * (params.rows * t - scale * int(total) ** 2)


def fstat_fixed_point(Xq: np.ndarray, y: np.ndarray, params: FStatParams) -> np.ndarray:
    """Exactly what the secure protocol yields for quantised features ``Xq``."""
    y = np.asarray(y, dtype=np.int64)
    weights, scale = class_weights(y, params.n_classes)
    out = np.empty(Xq.shape[1])
    for f in range(Xq.shape[1]):
        col = [int(v) for v in Xq[:, f]]
        sums = [sum(v for v, k in zip(col, y, strict=True) if k == c) for c in range(len(weights))]
        value = fstat_value(params, weights, scale, sums, sum(col), sum(v * v for v in col))
        out[f] = f_from_rho(params.rho(value, scale), params.rows, params.classes_present)
    return out
