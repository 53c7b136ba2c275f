"""Adam's step as vflfs takes it (:mod:`vflfs.ml.optim`) against torch's, on the models of a run.

Each case is a model of the shapes a run trains (``model=mlp``: a party's bottom model from its
columns to 64 -> 16, the server's top model from the parties' embeddings to 32 -> the
classes) and an optimiser. The two optimisers train the same model from the same seed on the
same batches, in turns (``--repeats`` rounds of ``--steps`` steps each, so that a machine whose
speed drifts slows both alike); the table gives the median microseconds of one ``step`` call,
the ratio vflfs / torch, and whether the parameters and the optimiser state came out the
same to the bit.

    python -m benchmarks.optimizer_step --out outputs/optimizer_step
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from vflfs.ml.optim import make_optimizer, optimizer_arrays

# name: (layer widths, the optimiser's settings)
CASES: dict[str, tuple[list[int], dict]] = {
    "party, 7 columns (a refit)": ([7, 64, 16], {}),
    "party, 250 columns": ([250, 64, 16], {}),
    "server, 3 parties, 2 classes": ([48, 32, 2], {}),
    "party, 7 columns, AdamW": ([7, 64, 16], {"weight_decay": 0.01}),
}


def network(widths: list[int]) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


class Trainer:
    """A model, its optimiser and fixed batches: :meth:`train` times ``steps`` steps."""

    def __init__(self, widths: list[int], optimizer_of: Callable, batch: int = 128) -> None:
        torch.manual_seed(0)
        self.model = network(widths)
        self.optimizer = optimizer_of(self.model.parameters())
        self.x = torch.randn(batch, widths[0])
        self.y = torch.randn(batch, widths[-1])

    def train(self, steps: int) -> float:
        """Seconds spent in ``optimizer.step`` over ``steps`` steps."""
        spent = 0.0
        for _ in range(steps):
            self.optimizer.zero_grad()
            torch.nn.functional.mse_loss(self.model(self.x), self.y).backward()
            start = time.perf_counter()
            self.optimizer.step()
            spent += time.perf_counter() - start
        return spent

    def state(self) -> list[torch.Tensor]:
        arrays = optimizer_arrays(self.optimizer)
        return [p.detach() for p in self.model.parameters()] + [
            torch.as_tensor(arrays[k]) for k in sorted(arrays)
        ]


def measure(widths: list[int], settings: dict, steps: int, repeats: int) -> dict:
    """Both optimisers on one case, in turns; their step times and whether they agree."""
    name = "adamw" if settings.get("weight_decay") else "adam"
    reference = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    ours = Trainer(widths, lambda p: make_optimizer(p, name, lr=0.01, **settings))
    theirs = Trainer(widths, lambda p: reference(p, lr=0.01, **settings))
    times: dict[str, list[float]] = {"vflfs": [], "torch": []}
    for _ in range(repeats):
        times["torch"].append(theirs.train(steps) / steps)
        times["vflfs"].append(ours.train(steps) / steps)
    same = all(torch.equal(a, b) for a, b in zip(ours.state(), theirs.state(), strict=True))
    us = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    return {
        "torch_us": round(us["torch"], 1),
        "vflfs_us": round(us["vflfs"], 1),
        "ratio": round(us["vflfs"] / us["torch"], 3),
        "same_to_the_bit": same,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="steps per turn")
    p.add_argument("--repeats", type=int, default=7, help="turns of each optimiser")
    p.add_argument("--out", type=Path, default=Path("outputs/optimizer_step"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for case, (widths, settings) in CASES.items():
        rows.append({"case": case, **measure(widths, settings, args.steps, args.repeats)})
        print(json.dumps(rows[-1]), flush=True)
    lines = [
        "| case | torch's step, us | vflfs's step, us | vflfs / torch | same to the bit |",
        "|---|---|---|---|---|",
        *(
            f"| {r['case']} | {r['torch_us']} | {r['vflfs_us']} | {r['ratio']} | "
            f"{'yes' if r['same_to_the_bit'] else 'NO'} |"
            for r in rows
        ),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "optimizer_step.json").write_text(json.dumps(rows, indent=1))
    (args.out / "optimizer_step.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if not all(r["same_to_the_bit"] for r in rows):
        raise SystemExit("vflfs's Adam step differs from torch's: see the table")


if __name__ == "__main__":
    main()
