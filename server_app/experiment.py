"""What the server decides before training: labels, sample splits, and each party's instructions.

Everything here is checked before any message is sent, so bad input ends the run before
training with an error that names the problem.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

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
from vflfs.datasets.party_files import LabelsFile, load_labels_file
from vflfs.datasets.relevant import global_relevant, party_relevant
from vflfs.ml.models import Task, party_seed
from vflfs.protocol import ALIGN
from vflfs.runtime.settings import (
    CrossValidationSettings,
    RunSettings,
    SampleSettings,
    TrainingSettings,
)

PARTY_FILES = "party_files"  # dataset name: every party reads its own file (deployment)


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
    # The run-wide sections of ``cfg``, typed once per run (:mod:`vflfs.runtime.settings`)
    settings: RunSettings
    # dataset=party_files: the labels file until alignment, then, per party, the positions of
    # the aligned samples in its sorted list of blinded IDs (it maps them to its rows).
    labels: LabelsFile | None = None
    party_rows: list[np.ndarray] | None = None
    alignment_id: str | None = None

    def __post_init__(self) -> None:
        # Regression targets standardised on the training rows (the labels stay here)
        self.task = self.task.fitted(np.asarray(self.y)[self.splits.train])

    @property
    def training(self) -> TrainingSettings:
        """The ``training`` section for this run's training rows (an ``auto`` batch size
        resolved on them)."""
        return self.settings.training.for_rows(len(self.splits.train))

    @property
    def samples(self) -> SampleSettings:
        return self.settings.samples

    @property
    def cv(self) -> CrossValidationSettings:
        return self.settings.cv

    @property
    def num_parties(self) -> int:
        return len(self.columns)

    @property
    def needs_alignment(self) -> bool:
        """Per-party files whose samples are not aligned yet (no splits before that)."""
        return self.labels is not None and self.party_rows is None

    @property
    def seed(self) -> int:
        return self.settings.seed

    @classmethod
    def from_config(cls, cfg: DictConfig, settings: RunSettings | None = None) -> Experiment:
        """The run's experiment; ``settings``: ``cfg``'s run-wide sections as the run typed
        them (:func:`~vflfs.runtime.config.check_config`), else typed here."""
        settings = settings or RunSettings.from_cfg(cfg)
        if str(cfg.dataset.name) == PARTY_FILES:
            return cls.from_labels_file(cfg, settings)
        data_dir = resolve_data_dir(cfg.dataset.get("data_dir"))
        data_dir = str(data_dir) if data_dir is not None else None
        params = dataset_params(cfg)
        dataset = load_dataset(cfg.dataset.name, data_dir, **params)
        split, seed = settings.split, settings.seed
        columns = split_columns(
            dataset.n_features,
            split.num_parties,
            kind=split.kind,
            seed=seed,
            sizes=split.sizes,
            columns=split.columns,
            image_shape=dataset.image_shape,
        )
        return cls(
            cfg=cfg,
            task=Task(dataset.task, dataset.n_classes),
            y=np.asarray(dataset.y),
            splits=_sample_splits(
                settings.samples,
                seed,
                dataset.y,
                dataset.task,
                dataset.train_idx,
                dataset.test_idx,
            ),
            columns=columns,
            noise=_noise(cfg, len(columns)),
            relevant=dataset.relevant,
            data_dir=data_dir,
            settings=settings,
        )

    @classmethod
    def from_labels_file(cls, cfg: DictConfig, settings: RunSettings) -> Experiment:
        """``dataset=party_files``: the server reads only the labels file (IDs, labels, an
        optional official split). Splits and column counts come with :meth:`aligned`."""
        d = cfg.dataset
        labels = load_labels_file(
            str(d.labels_path),
            id_column=str(d.id_column),
            label_column=str(d.label_column),
            split_column=str(d.split_column) if d.get("split_column") else None,
            task=str(d.task),
            classes=_opt_list(d.get("classes")),
            min_class_count=d.get("min_class_count"),
        )
        n = settings.split.num_parties
        party_relevant(_plain(d.get("relevant")), n)  # its shape; the ranges after alignment
        empty = np.zeros(0, np.int64)
        return cls(
            cfg=cfg,
            task=Task(labels.labels.task, labels.labels.n_classes),
            y=np.asarray(labels.labels.y),
            splits=SampleSplits(empty, empty, empty),
            columns=[empty] * n,
            noise=_noise(cfg, n),
            relevant=None,
            data_dir=None,
            settings=settings,
            labels=labels,
        )

    def aligned(
        self, keep: np.ndarray, party_rows: list[np.ndarray], n_features: list[int], key: str
    ) -> Experiment:
        """The experiment on the aligned samples: the labels file's rows ``keep`` (in its
        order), party m's positions ``party_rows[m]`` in its sorted list of blinded IDs (the
        party maps them to rows of its file), its ``n_features[m]`` columns, numbered party
        after party (party 1's first column is ``n_features[0]``)."""
        if self.labels is None:
            raise ValueError("only a party-files experiment can be aligned")
        official = self.labels.labels
        train_idx = test_idx = None
        if official.train_idx is not None:
            where = np.full(len(self.labels.ids), -1, np.int64)
            where[keep] = np.arange(len(keep))
            train_idx, test_idx = (
                where[r][where[r] >= 0] for r in (official.train_idx, official.test_idx)
            )
        y = np.asarray(official.y)[keep]
        offsets = np.concatenate([[0], np.cumsum(n_features)]).astype(np.int64)
        relevant = party_relevant(_plain(self.cfg.dataset.get("relevant")), len(n_features))
        return replace(
            self,
            y=y,
            splits=_sample_splits(self.samples, self.seed, y, official.task, train_idx, test_idx),
            columns=[np.arange(a, b, dtype=np.int64) for a, b in itertools.pairwise(offsets)],
            relevant=None
            if relevant is None
            else global_relevant(relevant, n_features, "dataset.relevant"),
            party_rows=[np.asarray(r, np.int64) for r in party_rows],
            alignment_id=key,
        )

    def eval_sets(self) -> dict[str, np.ndarray]:
        """Rows scored after every epoch: validation, test, and training rows if asked."""
        sets = {"val": self.splits.val, "test": self.splits.test}
        if self.settings.training.score_train:
            sets["train"] = self.splits.train
        return sets

    def majority_rate(self, rows: np.ndarray) -> float:
        """Accuracy on ``rows`` of always predicting the training rows' most frequent class."""
        y = self.y
        majority = np.bincount(y[self.splits.train], minlength=self.task.n_classes).argmax()
        return float(np.mean(y[rows] == majority)) if len(rows) else 0.0

    def party_spec(self, m: int) -> dict:
        """Party ``m``'s setup instructions: where its columns come from and what to build."""
        cfg = self.cfg
        return {
            "index": m,
            "seed": party_seed(self.seed, m),
            "device": str(cfg.device),
            "threads": cfg.get("threads"),
            "model": OmegaConf.to_container(cfg.model.bottom, resolve=True),
            "optimizer": self.training.optimizer_spec,
            "eval_chunk": self.training.eval_chunk,
            "data": self._data_spec(m),
        }

    def _data_spec(self, m: int) -> dict:
        noise = {"ratio": self.noise[m], "seed": self.seed * 1000 + 500 + m}
        scaling = self.settings.top.scaling
        if self.labels is not None:
            if self.party_rows is None:
                raise ValueError(f"align the samples ({ALIGN.name}) before setting parties up")
            # The party reads its own file; it gets only the positions of its aligned samples
            # in its own sorted list of blinded IDs, in the aligned order.
            positions = self.party_rows[m].tolist()
            party_file = {"alignment": self.alignment_id, "positions": positions}
            return {"party_file": party_file, "noise": noise, "scaling": scaling}
        return {
            "name": str(self.cfg.dataset.name),
            "data_dir": self.data_dir,
            "params": dataset_params(self.cfg),
            "columns": self.columns[m].tolist(),
            "noise": noise,
            "scaling": scaling,
        }


def _sample_splits(s: SampleSettings, seed: int, y, task: str, train_idx, test_idx) -> SampleSplits:
    return split_samples(
        len(y),
        y if task == "classification" else None,
        seed=seed,
        test_fraction=s.test_fraction,
        val_fraction=s.val_fraction,
        stratify=s.stratify,
        train_idx=train_idx if s.official_split else None,
        test_idx=test_idx if s.official_split else None,
    )


def _noise(cfg: DictConfig, n: int) -> list[float]:
    ratio = cfg.noise.ratio
    return noise_ratios(n, OmegaConf.to_container(ratio) if OmegaConf.is_config(ratio) else ratio)


def _plain(value):
    """A config value as plain Python (lists and dicts converted, scalars as they are)."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _opt_list(value) -> list | None:
    return None if value is None else OmegaConf.to_container(value, resolve=True)


def dataset_params(cfg: DictConfig) -> dict:
    """The dataset loader's parameters (``dataset.params``) as a plain dict."""
    params = cfg.dataset.get("params")
    return {} if params is None else OmegaConf.to_container(params, resolve=True)
