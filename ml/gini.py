"""Gini impurity of binned features: the plaintext reference and its exact fixed-point twin.

FedSDG-FS (Li et al. 2023, "FedSDG-FS: Efficient and Secure Feature Selection for Vertical
Federated Learning", INFOCOM, Algorithm 1) scores feature f by the Gini impurity of its b
equal-width bins U_i over the training range:

    G(f) = 1 - (1/N) sum_i (sum_k n_ik^2) / |U_i|,     n_ik = #{a in U_i : y_a = k},

smaller G = more important. Under encryption the party weighs bins by fixed-point integers
w_i = round(2^F / |U_i|) and the server finishes G = 1 - Q / (N 2^F) from Q = sum_i w_i sum_k
n_ik^2; :func:`gini_fixed_point` computes that Q in the clear, so the secure protocol
(:mod:`vflfs.ml.gini_secure`) must reproduce it bit for bit. Its distance to :func:`gini_scores`
is at most N / 2^(F+1) (each |w_i - 2^F/|U_i|| <= 1/2 and sum_i |U_i|^2 <= N^2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def bin_features(X: np.ndarray, bins: int) -> np.ndarray:
    """Bin index in 0..bins-1 of every value: equal-width bins over each column's range in ``X``
    (the training rows). A constant column falls in bin 0."""
    X = np.asarray(X, dtype=np.float64)
    lo, hi = X.min(axis=0), X.max(axis=0)
    span = hi - lo
    scale = np.divide(bins, span, out=np.zeros_like(span), where=span > 0)
    return np.clip(np.floor((X - lo) * scale), 0, bins - 1).astype(np.int64)


def class_counts(binned: np.ndarray, y: np.ndarray, bins: int, n_classes: int) -> np.ndarray:
    """n_ik per feature: an int64 array (features, bins, classes)."""
    rows, d = binned.shape
    cell = binned * n_classes + np.asarray(y, dtype=np.int64)[:, None]
    flat = cell + (np.arange(d, dtype=np.int64) * bins * n_classes)[None, :]
    counts = np.bincount(flat.ravel(), minlength=d * bins * n_classes)
    return counts.reshape(d, bins, n_classes)


def gini_from_counts(counts: np.ndarray) -> np.ndarray:
    """G per feature from (features, bins, classes) counts (empty bins add nothing)."""
    counts = counts.astype(np.float64)
    sizes = counts.sum(axis=2)
    squares = (counts**2).sum(axis=2)
    ratio = np.divide(squares, sizes, out=np.zeros_like(squares), where=sizes > 0)
    n = sizes.sum(axis=1)
    return 1.0 - ratio.sum(axis=1) / n


def gini_scores(X: np.ndarray, y: np.ndarray, bins: int, n_classes: int) -> np.ndarray:
    """Plaintext Gini impurity of every column of ``X`` (training rows) given labels ``y``."""
    return gini_from_counts(class_counts(bin_features(X, bins), y, bins, n_classes))


def fixed_weight(size: int, weight_bits: int) -> int:
    """w = round(2^F / size), halves up, in integers; 0 for an empty bin."""
    size = int(size)
    return ((1 << (weight_bits + 1)) + size) // (2 * size) if size > 0 else 0


def finish(q: int, rows: int, weight_bits: int) -> float:
    """The server's last step: G = 1 - Q / (N 2^F), correctly rounded."""
    return 1.0 - int(q) / (int(rows) << weight_bits)


def gini_fixed_point(
    X: np.ndarray, y: np.ndarray, bins: int, n_classes: int, weight_bits: int
) -> np.ndarray:
    """Exactly what the secure protocol yields: G from Q = sum_i w_i sum_k n_ik^2 in integers."""
    counts = class_counts(bin_features(X, bins), y, bins, n_classes)
    out = np.empty(counts.shape[0])
    for f, feature in enumerate(counts):
        q = sum(
            fixed_weight(int(row.sum()), weight_bits) * int((row.astype(object) ** 2).sum())
            for row in feature
        )
        out[f] = finish(q, len(y), weight_bits)
    return out


@dataclass(frozen=True)
class GiniParams:
    """The protocol's public parameters, chosen by the server and sent to the parties.

    A party's masked value of bin i and class k is u_ik = n_ik + r_ik with r_ik uniform in
    [0, 2^(mask_bits + bits(N))): statistically hiding (distance <= 2^-mask_bits) and short
    enough to pack ``per_ct`` slots of ``width`` bits in one plaintext without carries.
    ``djn``: encryptions and re-randomisations use DJN randomness (``strategy.gini.randomness``).
    """

    bins: int
    n_classes: int
    rows: int  # N: the training rows the labels cover
    weight_bits: int  # F
    mask_bits: int  # statistical hiding parameter
    key_bits: int
    djn: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "djn", bool(self.djn))
        if self.bins < 1 or self.n_classes < 2 or self.rows < 1:
            raise ValueError(f"bad Gini parameters: {self}")
        if not 8 <= self.weight_bits <= 62:
            raise ValueError(f"gini weight_bits must be in 8..62, got {self.weight_bits}")
        if self.mask_bits < 20:
            raise ValueError(f"gini mask_bits must be >= 20, got {self.mask_bits}")
        # sum_k u_ik^2 (sum_i a_i b_i) and Q = sum_i w_i sum_k n_ik^2 must stay below n
        square = 2 * self.width + self.n_classes.bit_length()
        product = self.pair_width + self.bins.bit_length()
        if max(product if self.product else square, self.q_width) >= self.key_bits - 1:
            raise ValueError(f"a {self.key_bits}-bit key is too small for these Gini parameters")

    @property
    def mask_range(self) -> int:
        """Masks are uniform in [0, 2^mask_range)."""
        return self.mask_bits + int(self.rows).bit_length()

    @property
    def width(self) -> int:
        return self.mask_range + 1

    @property
    def slots(self) -> int:
        """Masked values per feature: one per bin and class."""
        return self.bins * self.n_classes

    @property
    def per_ct(self) -> int:
        from .paillier import slots_per_plaintext  # on use: the protocol imports this module

        return min(self.slots, slots_per_plaintext(self.key_bits, self.width))

    @property
    def chunks(self) -> int:
        """Packed ciphertexts per feature (product form: :attr:`bins_per_ct` bins each)."""
        if self.product:
            return -(-self.bins // self.bins_per_ct)
        return len(self.layout)

    @property
    def layout(self) -> list[list[int]]:
        """The slots (j = i * classes + k) each of a feature's ciphertexts carries, in order.

        Slot-packed: ``per_ct`` consecutive slots per ciphertext, packed by the party with
        Horner's rule. Class-packed (:attr:`class_packed`): per bin, one ciphertext per group
        of classes (summed from the row labels the server packed so, no Horner), then the
        last classes, ``half_slots`` bins per ciphertext."""
        b, c = self.bins, self.n_classes
        if not self.class_packed:
            return [
                list(range(s, min(s + self.per_ct, self.slots)))
                for s in range(0, b * c, self.per_ct)
            ]
        h = self.half_slots
        groups = [[i * c + k for k in group] for i in range(b) for group in self.class_groups]
        last = [[i * c + c - 1 for i in range(s, min(s + h, b))] for s in range(0, b, h)]
        return groups + last

    # -- class-packed labels (many classes) -------------------------------------------------------
    @property
    def half_slots(self) -> int:
        """Slots that keep a plaintext below 2^(key_bits/2 - 1) <= p, the smaller prime: the
        server decrypts such a plaintext mod p^2 only (half the work of a decryption)."""
        return (self.key_bits // 2 - 1) // self.width

    @property
    def class_groups(self) -> list[range]:
        """Classes 0..c-2 in groups of ``half_slots``: one row label ciphertext per group."""
        c1, h = self.n_classes - 1, max(1, self.half_slots)
        return [range(s, min(s + h, c1)) for s in range(0, c1, h)]

    @property
    def class_packed(self) -> bool:
        """Whether the row labels come packed by class groups too (:attr:`layout`): chosen
        when it costs fewer multiplications mod n^2 per feature (:func:`packing_costs`)."""
        if self.product or self.half_slots < 1:
            return False
        slot_packed, class_packed = packing_costs(self)
        return class_packed < slot_packed

    @property
    def label_columns(self) -> int:
        """Ciphertexts per row: [[A_ak]] for k < c - 1, then the class groups' packed ones."""
        return self.n_classes - 1 + (len(self.class_groups) if self.class_packed else 0)

    # -- the product form (two classes, :mod:`vflfs.ml.gini_product`) --------------------------
    @property
    def product(self) -> bool:
        """Two classes: one masked product per bin, one returned ciphertext per feature."""
        return self.n_classes == 2

    @property
    def b_mask_range(self) -> int:
        """The masks of b_i = 2 w_i n_i + r'_i are uniform in [0, 2^b_mask_range): 2 w_i n_i <=
        2^(F+1) + |U_i| < 2^(max(F + 1, bits(N)) + 1), so b_i is hidden as a_i is."""
        return max(self.weight_bits + 1, int(self.rows).bit_length()) + 1 + self.mask_bits

    @property
    def pair_width(self) -> int:
        """Bits of one bin's slot pair (a_i, b_i) in the product form."""
        return self.width + self.b_mask_range + 1

    @property
    def bins_per_ct(self) -> int:
        return min(self.bins, (self.key_bits - 1) // self.pair_width)

    @property
    def returned(self) -> int:
        """Ciphertexts the server returns per feature: one per bin, or one (product form)."""
        return 1 if self.product else self.bins

    # -- the packed results [[Q]] ----------------------------------------------------------------
    @property
    def q_width(self) -> int:
        """Bits of a slot holding Q <= 2^F N + N^2 / 2."""
        n_bits = int(self.rows).bit_length()
        return max(self.weight_bits, n_bits) + n_bits + 2

    @property
    def q_per_ct(self) -> int:
        """Features whose Q share one returned plaintext."""
        return (self.key_bits - 1) // self.q_width


# Costs in multiplications mod n^2 (measured at 2048 bits: ~4 us each; the ratios hold roughly
# at other sizes): a CRT decryption, one half of it (mod p^2 only), a re-randomisation.
DECRYPT, HALF_DECRYPT = 830, 400
RERANDOMIZE = {True: 160, False: 2600}  # DJN h_s^alpha; r^n


def packing_costs(params: GiniParams) -> tuple[int, int]:
    """Per feature, the party's packing and the server's decryptions, slot-packed against
    class-packed (:attr:`GiniParams.layout`), in multiplications mod n^2.

    Slot-packed: Horner's rule, ``width`` squarings per slot, and ``chunks`` full decryptions.
    Class-packed: no Horner but for the last classes, a bin sum per class group (about N / 2
    multiplications), and more ciphertexts, each decrypted mod p^2 only. At 2048 bits, COIL20's
    20 classes and 1440 rows: ~16,000 against ~7,300; the class-packed one from 9 classes at
    200-1440 rows (more classes with more rows: a group's bin sum grows with N); with 3
    classes the slot-packed one wins by ~3x.
    """
    b, w, h = params.bins, params.width, params.half_slots
    rerandomize = RERANDOMIZE[params.djn]
    cts = -(-params.slots // params.per_ct)
    slot_packed = (params.slots - cts) * w + cts * (rerandomize + DECRYPT)
    groups, last = len(params.class_groups), -(-b // h)
    class_cts = b * groups + last
    class_packed = (
        (b - last) * w + groups * params.rows // 2 + class_cts * (rerandomize + HALF_DECRYPT)
    )
    return slot_packed, class_packed
