"""What the server decides before training: labels, sample splits, and each party's instructions.

Everything here is checked before any message is sent, so bad input ends the run before
training with an error that names the problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from omegaconf import DictConfig, OmegaConf

from vflfs.datasets import (
    SampleSplits,
    load_dataset,
    noise_ratios,
    resolve_data_dir,
    split_columns,
    split_samples,
)
from vflfs.ml.models import Task, party_seed


@dataclass
class Experiment:
    """The server's resolved view of one run (it holds labels, never features)."""

    cfg: DictConfig
    task: Task
    y: np.ndarray
    splits: SampleSplits
    columns: list[np.ndarray]
    noise: list[float]
    relevant: np.ndarray | None
    data_dir: str | None

    @property
    def num_parties(self) -> int:
        return len(self.columns)

    @property
    def seed(self) -> int:
        return int(self.cfg.seed)

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Experiment:
        data_dir = resolve_data_dir(cfg.dataset.get("data_dir"))
        data_dir = str(data_dir) if data_dir is not None else None
        params = _params(cfg)
        dataset = load_dataset(cfg.dataset.name, data_dir, **params)
        split = cfg.split
        columns = split_columns(
            dataset.n_features,
            int(split.num_parties),
            kind=str(split.kind),
            seed=int(cfg.seed),
            sizes=_opt_list(split.get("sizes")),
            columns=_opt_list(split.get("columns")),
            image_shape=dataset.image_shape,
        )
        s = cfg.samples
        splits = split_samples(
            dataset.n_samples,
            dataset.y if dataset.task == "classification" else None,
            seed=int(cfg.seed),
            test_fraction=float(s.test_fraction),
            val_fraction=float(s.val_fraction),
            stratify=bool(s.stratify),
            train_idx=dataset.train_idx if s.official_split else None,
            test_idx=dataset.test_idx if s.official_split else None,
        )
        ratio = cfg.noise.ratio
        ratio = OmegaConf.to_container(ratio) if OmegaConf.is_config(ratio) else ratio
        return cls(
            cfg=cfg,
            task=Task(dataset.task, dataset.n_classes),
            y=np.asarray(dataset.y),
            splits=splits,
            columns=columns,
            noise=noise_ratios(len(columns), ratio),
            relevant=dataset.relevant,
            data_dir=data_dir,
        )

    def eval_sets(self) -> dict[str, np.ndarray]:
        """Rows scored after every epoch: validation, test, and training rows if asked."""
        sets = {"val": self.splits.val, "test": self.splits.test}
        if self.cfg.training.get("score_train"):
            sets["train"] = self.splits.train
        return sets

    def party_spec(self, m: int) -> dict:
        """Party ``m``'s setup instructions: where its columns come from and what to build."""
        cfg = self.cfg
        return {
            "index": m,
            "seed": party_seed(self.seed, m),
            "device": str(cfg.device),
            "threads": cfg.get("threads"),
            "model": OmegaConf.to_container(cfg.model.bottom, resolve=True),
            "optimizer": {"name": str(cfg.training.optimizer), "lr": float(cfg.training.lr)},
            "eval_chunk": int(cfg.training.eval_chunk),
            "data": {
                "name": str(cfg.dataset.name),
                "data_dir": self.data_dir,
                "params": _params(self.cfg),
                "columns": self.columns[m].tolist(),
                "noise": {"ratio": self.noise[m], "seed": self.seed * 1000 + 500 + m},
            },
        }


def _opt_list(value) -> list | None:
    return None if value is None else OmegaConf.to_container(value, resolve=True)


def _params(cfg: DictConfig) -> dict:
    params = cfg.dataset.get("params")
    return {} if params is None else OmegaConf.to_container(params, resolve=True)
