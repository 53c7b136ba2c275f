"""K local steps per round-trip (spec section 3), and the guard that lowers K when they blow up.

With ``training.local_steps = K`` the parties embed K batches at once; the server's K
top-model steps see embeddings up to K - 1 party steps old and each party applies gradients
up to K - 1 top-model steps old. Applied as they come, the two sides over-correct the same
error together and the training loss of an epoch climbs above where training started
(Phishing at ``lr = 0.01``, K = one epoch: epochs at a loss of 5-140 where the uniform
prediction costs 0.69); :mod:`vflfs.ml.stale_gradients` carries each stale gradient to the
party's fresh embedding and slows the top model within a round, which keeps K = one epoch on
the measured sets (docs/deployment.md, section 7). Whether a K keeps accuracy still cannot be
known before training (a learning rate can be too large for it), so the run watches for the
blow-up: an epoch whose mean training loss exceeds both the first epoch's and ``BLOWUP``
times the lowest so far halves K from the next epoch on. Each change is logged as a WARNING,
recorded in ``results.json`` (``extra.local_steps``) and listed in its ``warnings``. K = 1 is
never changed.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

log = logging.getLogger("vflfs")

BLOWUP = 2.0  # an epoch's training loss over this many times the lowest so far


@dataclass
class LocalSteps:
    """The K in use and its history over one run."""

    requested: int
    steps_per_epoch: int  # a K beyond it acts as it: one round-trip per epoch
    k: int = 0
    first_loss: float | None = None
    lowest: float = math.inf
    reduced: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.k = self.k or min(self.requested, max(self.steps_per_epoch, 1))

    def after_epoch(self, epoch: int, train_loss: float) -> bool:
        """Record epoch ``epoch``'s mean training loss; True if K was lowered because of it."""
        if not math.isfinite(train_loss):
            blew_up = True
        else:
            if self.first_loss is None:
                self.first_loss = train_loss
            blew_up = train_loss > max(self.first_loss, BLOWUP * self.lowest)
            self.lowest = min(self.lowest, train_loss)
        if not blew_up or self.k == 1:
            return False
        lowered = max(1, self.k // 2)
        log.warning(
            "WARNING: training.local_steps=%d is unstable here: epoch %d's training loss %.4g "
            "exceeds the first epoch's (%.4g) and %.0f x the lowest so far (%.4g); "
            "continuing with %d local steps",
            self.k,
            epoch,
            train_loss,
            self.first_loss or math.nan,
            BLOWUP,
            self.lowest,
            lowered,
        )
        self.reduced.append(
            {"epoch": epoch, "from": self.k, "to": lowered, "train_loss": float(train_loss)}
        )
        self.k = lowered
        return True

    def record(self) -> dict:
        """What ``results.json`` keeps (``extra.local_steps``)."""
        return {
            "requested": self.requested,
            "steps_per_epoch": self.steps_per_epoch,
            "used": self.k,
            "reduced": self.reduced,
        }


def reduced_warning(record: dict | None) -> str | None:
    """The ``results.json`` warning of a run whose K was lowered (``record``: what
    :meth:`LocalSteps.record` kept; None or not lowered: no warning)."""
    if not record or not record.get("reduced"):
        return None
    epochs = ", ".join(str(r["epoch"]) for r in record["reduced"])
    used = record["used"]
    return (
        f"training.local_steps={record['requested']} did not keep training stable (the "
        f"training loss blew up at epoch(s) {epochs}); the run went on with {used} local "
        f"steps: use training.local_steps={used} or a smaller training.lr"
    )
