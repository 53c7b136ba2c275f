"""The epoch loop's hooks into the run's checkpoints (:mod:`vflfs.strategies.checkpoint`).

The strategies call these at the points where a checkpoint is taken or a resumed run
re-enters its loop; each is a no-op for a run that keeps no checkpoints.
"""

from __future__ import annotations

import numpy as np

from .checkpoint import Checkpoints, LoopState
from .result import RunResult
from .strategy import Strategy


def _of(strategy: Strategy) -> Checkpoints | None:
    return getattr(strategy, "checkpoints", None)


def resuming(strategy: Strategy) -> bool:
    """Whether a resumed run has yet to re-enter its epoch loop (skip what came before it)."""
    checkpoints = _of(strategy)
    return checkpoints is not None and checkpoints.loop is not None


def resumed_first(strategy: Strategy) -> int:
    """The first epoch of the epoch loop a resumed run re-enters (0 for a fresh run)."""
    checkpoints = _of(strategy)
    return checkpoints.loop.first if checkpoints is not None and checkpoints.loop else 0


def resumed_loop(strategy: Strategy, first: int, stop: int) -> LoopState | None:
    """The loop state to re-enter ``run_epochs(first, stop)`` with, once, when resuming."""
    checkpoints = _of(strategy)
    if checkpoints is None or checkpoints.loop is None:
        return None
    loop, checkpoints.loop = checkpoints.loop, None
    if (loop.first, loop.stop) != (first, stop):
        raise RuntimeError(
            f"the resumed run re-entered epochs {first}..{stop - 1}, but its checkpoint is of "
            f"epochs {loop.first}..{loop.stop - 1}; fix: rerun=true"
        )
    return loop


def parties_set_up(strategy: Strategy, nonces: dict[int, str]) -> None:
    """The strategy sent the parties a setup with these nonces."""
    checkpoints = _of(strategy)
    if checkpoints is not None:
        checkpoints.set_up(nonces)


def steps_sent(strategy: Strategy, grads: list[list[np.ndarray]]) -> None:
    """The strategy sent each party its gradients of the pending batches (a step each)."""
    checkpoints = _of(strategy)
    if checkpoints is not None:
        checkpoints.stepped(grads)


def snapshot_asked(strategy: Strategy) -> bool:
    """Whether the step request about to go down asks the parties to save their state (the
    first one after a checkpoint's snapshot)."""
    checkpoints = _of(strategy)
    return checkpoints is not None and checkpoints.ask_parties()


def epoch_done(
    strategy: Strategy,
    result: RunResult,
    loop: LoopState,
) -> None:
    """Epoch ``loop.epoch``'s steps are done on the server: checkpoint, if the run keeps
    checkpoints and one is due (``checkpoint_every_s``)."""
    checkpoints = _of(strategy)
    if checkpoints is not None and checkpoints.due():
        checkpoints.snapshot(strategy, result, loop)
