"""Whether a run may use an output folder that already holds a completed run.

A folder holding a completed run of the same configuration is skipped (a resumed sweep repeats
no work); one holding a completed run of another configuration is refused, so that its results
are never mistaken for the new configuration's. ``rerun=true`` runs again in either case.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from .config import ConfigError
from .results import completed_config

# Keys that do not change what a run computes (``engine=local`` and ``engine=simulation`` give
# the same step losses, a resumed run those of one never stopped, however often it
# checkpointed), so two configurations differing only in them are the same run.
NOT_COMPARED = ("rerun", "resume", "output_dir", "engine", "checkpoint_every_s")


class OutputFolderError(ConfigError):
    """The output folder holds a completed run of another configuration."""


def holds_same_run(out_dir: Path, cfg: DictConfig) -> bool:
    """True if ``out_dir`` holds a completed run of ``cfg``, False if it holds none.

    Raises :class:`OutputFolderError` if it holds a completed run of another configuration.
    """
    old = completed_config(out_dir)
    if old is None:
        return False
    new = OmegaConf.to_container(cfg, resolve=True)
    changed = differences(old, new)  # type: ignore[arg-type]
    if not changed:
        return True
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    raise OutputFolderError(
        f"{out_dir} already holds a completed run with a different configuration ({shown} "
        "differ); fix: rerun=true to replace it, or choose another output folder"
    )


def differences(old: dict, new: dict) -> list[str]:
    """Dotted keys whose values differ between two configurations (``NOT_COMPARED`` aside)."""
    a, b = _flatten(old), _flatten(new)
    keys = sorted(set(a) | set(b))
    return [k for k in keys if k.split(".")[0] not in NOT_COMPARED and a.get(k) != b.get(k)]


def _flatten(tree: object, prefix: str = "") -> dict[str, object]:
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    out: dict[str, object] = {}
    for key, value in tree.items():
        out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
