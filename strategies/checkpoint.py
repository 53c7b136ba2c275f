"""Checkpoints at epoch boundaries, and resuming a run from the last one.

**When.** The epoch loop (:meth:`~vflfs.strategies.vfl.VFL.run_epochs`) calls
:func:`~vflfs.strategies.checkpoint_hooks.epoch_done` once an epoch's steps are done on the
server: its last gradients are still to go down, with the next epoch's first batches and the
evaluation request. At the first epoch
boundary ``checkpoint_every_s`` seconds after the run's start or its last checkpoint (0: at
every one), the server's state at that moment (top model, optimiser, the strategy's
attributes, the run's result so far, the byte counters, the RNG states, the pending gradients
and step losses) is serialised, and written to ``checkpoint.pt`` in the output folder (a
temporary file, then a rename) once every party has answered that next step, whose request
asks it to save (``StepRequest.snapshot``): each party writes its own state of the same moment
to its own disk before answering (:mod:`vflfs.client_app.store`). A checkpoint on disk
therefore always has the parties' matching states behind it. A crash loses the work since the
last checkpoint: ``checkpoint_every_s`` seconds and at most one epoch. Epochs of a small model
last a tenth of a second, and a checkpoint at each of them took about a tenth of a path run's
time (MADELON, ``stg``).

**Resuming** (``resume=true``, same output folder): the parties load their saved state
(``query.resume`` names each one's setup nonce and gradient step), the server restores its
own, and the strategy re-enters the epoch loop where the checkpoint left it. The same seeds
give the same steps: a resumed run ends with the history, scores and byte counts of a run
that was never stopped. The messages of the resume itself (connection, alignment,
``query.resume``) are reported apart, in ``results.json``'s ``extra.resumed``.

Every strategy resumes: ``vfl``; the path strategies (``stg``, ``fedsdg_fs``,
``group_lasso``), with or without their path; LESS-VFL and local lasso, whose run resumed
after stage 1 has stages 2 and 3's outcome back; and the filters, whose scores and ranking
come back with the checkpoint. Where a count is chosen on validation, a run resumed in one of
its trainings goes through the choice again, takes each finished training's outcome from the
checkpoint's record, and goes on with the one it stopped in
(:class:`~vflfs.strategies.filter_choice.CountChoice`); ``group_lasso`` without its path,
before or after its pruning. A run with a secure interactive layer writes no checkpoint. A
cross-validation checkpoints each fold (the checkpoint names its fold) and
records the folds it completed (:mod:`vflfs.server_app.cross_validation`).
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import random
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from flwr.app import RecordDict
from omegaconf import DictConfig, OmegaConf

from vflfs.federation import DOWN, Federation
from vflfs.federation.payload import decode_error
from vflfs.protocol import RESUME, STEP, ResumeRequest
from vflfs.runtime.output_folder import OutputFolderError, differences
from vflfs.runtime.results import CHECKPOINT, FOLDS_DONE, PARTY_STATE, write_atomic_bytes
from vflfs.runtime.settings import TopLevelSettings
from vflfs.server_app.experiment import Experiment

from .interactive import make_layer
from .result import RunResult
from .strategy import EpochCallback, Strategy

log = logging.getLogger("vflfs")

FAIL_AFTER = "VFLFS_FAIL_AFTER_CHECKPOINT"  # tests: stop the run after this epoch's checkpoint
FORMAT = 3  # 3: the path keeps its points' own models (PathProgress.models)
PICKLE = pickle.HIGHEST_PROTOCOL
TRAFFIC = ("bytes", "messages", "seconds", "round_trips")  # the byte counters' fields
# Strategy attributes a checkpoint leaves out: the configuration (the run's own) and what is
# rebuilt on resume (the server model, the interactive layer, the checkpoints themselves).
NOT_SAVED = frozenset({"cfg", "run_settings", "server", "layer", "checkpoints"})


class StoppedAfterCheckpoint(RuntimeError):
    """The run stopped after a checkpoint because ``VFLFS_FAIL_AFTER_CHECKPOINT`` asked it to."""


@dataclass
class LoopState:
    """Where the epoch loop stands: in ``run_epochs(first, stop)``, epoch ``epoch``'s steps
    are done; ``grads`` (per party) and the epoch's step ``losses`` are pending."""

    first: int
    stop: int
    epoch: int
    grads: list[list[np.ndarray]]
    losses: list[float]


def unsupported(strategy: Strategy) -> str | None:
    """Why ``strategy`` cannot resume under its configuration (None: it can)."""
    secure = getattr(strategy, "secure", None)  # VFL's: the interactive layer's settings
    if secure is not None and secure.enabled:
        return "the secure interactive layer's state is not checkpointed"
    if type(strategy).fit not in _resuming_fits():  # a fit of its own need not re-enter
        return f"strategy {strategy.name!r} trains in phases of its own"
    return None


def _resuming_fits() -> tuple:
    """The ``fit`` methods that resume: VFL's and the path strategies' epoch loops (with or
    without the path), group lasso's at a fixed lambda (before or after its pruning),
    LESS-VFL's (and local lasso's) and the filters' (a run resumed in a count choice goes
    through its finished trainings again by their record, :class:`~.filter_choice.CountChoice`).
    A strategy that overrides ``fit`` writes no checkpoint unless it is one of them."""
    from .gini_filter import SelectThenTrain
    from .group_lasso import GroupLasso
    from .less_vfl import LessVFL
    from .path import PathStrategy
    from .vfl import VFL

    return (VFL.fit, PathStrategy.fit, GroupLasso.fit, LessVFL.fit, SelectThenTrain.fit)


class Checkpoints:
    """The checkpoints of one run in its output folder."""

    def __init__(
        self,
        out_dir: Path,
        cfg: DictConfig,
        federation: Federation,
        every_s: float,
        fold: int | None = None,
    ) -> None:
        self.path = Path(out_dir) / CHECKPOINT
        self.cfg = cfg
        self.fold = fold  # the cross-validation fold it is of (None: the run has no folds)
        self.federation = federation
        n = federation.num_parties
        self.nonces = [""] * n  # each party's setup nonce
        self.steps = [0] * n  # gradient steps each party has been sent since its setup
        self.saved: dict | None = None  # the checkpoint a resumed run starts from
        self.loop: LoopState | None = None  # the loop position a resumed run re-enters
        self._pending: tuple[int, bytes] | None = None
        self._waiting: set[int] = set()
        self._asked = False  # whether the parties were asked to save for the pending one
        self.every_s = every_s  # checkpoint_every_s
        self._last = time.monotonic()  # the run's start, then its last checkpoint
        federation.observers.append(self._observe)

    def due(self) -> bool:
        """Whether the epoch boundary reached now is checkpointed (``checkpoint_every_s``)."""
        return time.monotonic() - self._last >= self.every_s

    def ask_parties(self) -> bool:
        """True once per pending checkpoint: the next step request asks each party to save
        the state it holds before applying it."""
        ask = self._pending is not None and not self._asked
        self._asked = self._asked or ask
        return ask

    # -- writing --------------------------------------------------------------------------
    def snapshot(self, strategy: Strategy, result: RunResult, loop: LoopState) -> None:
        """Serialise the server's state now; it is written once the parties have saved theirs."""
        server = strategy.server  # type: ignore[attr-defined]
        traffic = self.federation.traffic
        state = {
            "format": FORMAT,
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "fold": self.fold,
            "loop": loop,
            # The strategy's attributes and the result (history, path, refits: thousands of
            # small objects) pickled together, apart from the tensors: torch.save's per-object
            # hook made them most of a snapshot's time.
            "objects": pickle.dumps(
                ({k: v for k, v in vars(strategy).items() if k not in NOT_SAVED}, result), PICKLE
            ),
            "server": {
                "model": server.model.state_dict(),
                "optimizer": server.optimizer.state_dict(),
                "optimizer_spec": server.optimizer_spec,
                "prox_tau": server.prox_tau,
            },
            "traffic": {name: dict(getattr(traffic, name)) for name in TRAFFIC},
            "rng": {
                "torch": torch.get_rng_state(),
                "numpy": np.random.get_state(),
                "python": random.getstate(),
            },
            "parties": {"nonces": list(self.nonces), "steps": list(self.steps)},
        }
        buf = io.BytesIO()
        torch.save(state, buf)
        self._pending = (loop.epoch, buf.getvalue())
        self._waiting = set(range(len(self.nonces)))
        self._asked = False

    def set_up(self, nonces: dict[int, str]) -> None:
        """The parties were sent a setup with these nonces: their states start afresh."""
        for party, nonce in nonces.items():
            self.nonces[party], self.steps[party] = nonce, 0

    def stepped(self, grads: list[list[np.ndarray]]) -> None:
        """Each party was sent its gradients (one step each) for the pending batches."""
        for party, sent in enumerate(grads):
            self.steps[party] += len(sent)

    def _observe(self, direction: str, party: int, operation: str, content: RecordDict) -> None:
        """Commit a pending checkpoint when every party has answered the step that made it
        save its state."""
        if direction == DOWN or operation != STEP.name:
            return
        if self._pending is None or party not in self._waiting:
            return
        if decode_error(content) is not None:
            self._pending = None  # the party failed: its state may not be saved
            return
        self._waiting.discard(party)
        if not self._waiting:
            self._commit()

    def _commit(self) -> None:
        assert self._pending is not None
        epoch, data = self._pending
        self._pending = None
        write_atomic_bytes(self.path, data)
        self._last = time.monotonic()
        log.debug("checkpoint after epoch %d -> %s", epoch, self.path)
        at = str(epoch) if self.fold is None else f"{self.fold}:{epoch}"  # fold:epoch with folds
        if os.environ.get(FAIL_AFTER, "") == at:
            raise StoppedAfterCheckpoint(
                f"stopped after the checkpoint of epoch {at} ({FAIL_AFTER}={at})"
            )

    # -- resuming ---------------------------------------------------------------------------
    def restore(self, strategy: Strategy, experiment: Experiment) -> RunResult:
        """The parties and the server back at the checkpoint; returns the result so far."""
        state = self.saved
        assert state is not None
        loop: LoopState = state["loop"]
        attributes, result = pickle.loads(state["objects"])
        for key, value in attributes.items():
            setattr(strategy, key, value)
        self.nonces, self.steps = state["parties"]["nonces"], state["parties"]["steps"]
        log.info("resuming after epoch %d from %s", loop.epoch, self.path)
        traffic = self.federation.traffic
        with traffic.in_phase("resume"):
            self.federation.send(
                RESUME,
                {
                    m: ResumeRequest(nonce=nonce, steps=steps, epoch=loop.epoch)
                    for m, (nonce, steps) in enumerate(zip(self.nonces, self.steps, strict=True))
                },
            )
        # The resume's own messages (connection, alignment, query.resume) are reported apart;
        # the counters go on from the checkpoint's, as if the run had never stopped.
        extra = {"after_epoch": loop.epoch, "bytes": traffic.total_bytes()}
        for name in TRAFFIC:
            kind = float if name == "seconds" else int
            setattr(traffic, name, defaultdict(kind, state["traffic"][name]))
        server = _server_model(strategy, experiment, state["server"])
        strategy.server = server  # type: ignore[attr-defined]
        strategy.layer = make_layer(strategy.secure, self.federation, experiment, server)  # type: ignore[attr-defined]
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        result.extra.setdefault("resumed", []).append(extra)
        self.loop = loop
        return result


def completed(out_dir: Path) -> None:
    """The run in ``out_dir`` completed: remove its checkpoint, the record of its folds and
    the parties' state folder (engine=local and simulation; in deployment each party keeps its
    last two states)."""
    (Path(out_dir) / CHECKPOINT).unlink(missing_ok=True)
    (Path(out_dir) / FOLDS_DONE).unlink(missing_ok=True)
    shutil.rmtree(Path(out_dir) / PARTY_STATE, ignore_errors=True)


def _server_model(strategy: Strategy, experiment: Experiment, saved: dict):
    """The strategy's top model as the checkpoint holds it (a refit's is plain VFL's)."""
    server = strategy.stage_server_model(experiment)  # type: ignore[attr-defined]
    server.model.load_state_dict(saved["model"])
    server.reset_optimizer(saved["optimizer_spec"])
    server.optimizer.load_state_dict(saved["optimizer"])
    server.prox_tau = saved["prox_tau"]
    return server


def open_checkpoints(
    out_dir: Path,
    cfg: DictConfig,
    strategy: Strategy,
    federation: Federation,
    top: TopLevelSettings,
    fold: int | None = None,
) -> Checkpoints | None:
    """The run's checkpoints (of cross-validation fold ``fold``), loaded when ``resume=true``
    finds one; None when the strategy cannot resume.

    A checkpoint left by an unfinished run is never silently replaced: without ``resume=true``
    or ``rerun=true`` the run is refused with a message naming both. ``top``: the run's
    top-level settings (``resume``, ``rerun``, ``checkpoint_every_s``). A checkpoint of an
    earlier fold, which completed after it (:mod:`vflfs.server_app.cross_validation`), is
    removed.
    """
    reason = unsupported(strategy)
    path = Path(out_dir) / CHECKPOINT
    if reason is not None:
        if top.resume and not fold:  # once: a cross-validation asks at every fold
            folds = "" if fold is None else " (it goes on after the folds it completed)"
            log.warning("resume=true, but this run cannot resume: %s%s", reason, folds)
        return None
    checkpoints = Checkpoints(out_dir, cfg, federation, top.checkpoint_every_s, fold)
    if not path.exists():
        if top.resume and not fold:
            log.info("resume=true: no checkpoint in %s, starting from the beginning", out_dir)
        return checkpoints
    if top.rerun and not top.resume:
        path.unlink()
        return checkpoints
    saved = _load(path)
    new = OmegaConf.to_container(cfg, resolve=True)
    changed = differences(saved["config"], new)  # type: ignore[arg-type]
    if changed:
        raise OutputFolderError(
            f"{out_dir} holds an unfinished run of another configuration (checkpointed after "
            f"epoch {saved['loop'].epoch}; {', '.join(changed[:5])} differ); fix: rerun=true "
            "to replace it, or choose another output folder"
        )
    if not top.resume:
        raise OutputFolderError(
            f"{out_dir} holds an unfinished run of this configuration, checkpointed after epoch "
            f"{saved['loop'].epoch}; fix: resume=true to continue it, or rerun=true to start "
            "afresh"
        )
    if fold is not None and (saved.get("fold") or 0) < fold:
        path.unlink()  # the fold it was of completed
        return checkpoints
    if saved.get("fold") != fold:
        raise OutputFolderError(
            f"{path} is of fold {saved.get('fold')}, but the run is at fold {fold}: its "
            "record of the folds done is missing; fix: rerun=true to start afresh"
        )
    checkpoints.saved = saved
    return checkpoints


def _load(path: Path) -> dict:
    """The checkpoint at ``path`` (the run's own file), or an error naming the fix."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # noqa: BLE001 - any unreadable file gets the same advice
        raise OutputFolderError(
            f"{path} cannot be read ({type(error).__name__}: {error}); fix: rerun=true to "
            "start afresh"
        ) from error
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise OutputFolderError(
            f"{path} was written by another vflfs version; fix: rerun=true to start afresh"
        )
    return saved


def run_strategy(
    strategy: Strategy,
    federation: Federation,
    experiment: Experiment,
    checkpoints: Checkpoints | None,
    on_epoch: EpochCallback | None,
) -> RunResult:
    """:meth:`Strategy.start`, or, from a checkpoint, the rest of the run."""
    strategy.checkpoints = checkpoints  # type: ignore[attr-defined]
    if checkpoints is None or checkpoints.saved is None:
        return strategy.start(federation, experiment, on_epoch=on_epoch)
    result = checkpoints.restore(strategy, experiment)
    strategy.fit(federation, experiment, result, on_epoch)
    with federation.traffic.in_phase("summary"):
        strategy.finish(federation, experiment, result)
    strategy.summary(result)
    return result
