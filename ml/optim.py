"""Optimisers, and their state as flat numpy arrays (for Flower's ``context.state``)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from .devices import as_tensor


def eager(cls: type[torch.optim.Optimizer]) -> type[torch.optim.Optimizer]:
    """``cls`` without the ``torch._dynamo`` wrappers of its methods: the same maths.

    torch wraps an optimiser's ``step`` (and ``add_param_group``, ``zero_grad``,
    ``state_dict``, ``load_state_dict``) so that ``torch.compile`` can trace around them;
    each wrapper imports ``torch._dynamo`` on its first call, about 1.4 s of CPU in a fresh
    process (in deployment every message is one). vflfs never compiles, so its optimisers
    call the wrapped methods directly, ``step`` with gradients off as its wrapper sets them,
    and without the profiler's records (:func:`unhooked`, :func:`zero_grad`); Adam's and
    AdamW's ``step`` is :func:`lean_adam_step`.
    """
    base = torch.optim.Optimizer
    methods = {
        name: getattr(base, name).__wrapped__
        for name in ("add_param_group", "state_dict", "load_state_dict")
        if hasattr(getattr(base, name), "__wrapped__")
    }
    step = getattr(cls.step, "__wrapped__", None)
    if step is not None and issubclass(cls, torch.optim.Adam):
        methods["step"] = unhooked(lean_adam_step(step))
    elif step is not None:

        def plain_step(self, closure=None):
            with torch.set_grad_enabled(bool(self.defaults.get("differentiable", False))):
                return step(self, closure)

        methods["step"] = unhooked(plain_step)
    methods["zero_grad"] = zero_grad
    return type(cls.__name__, (cls,), {**methods, "__module__": __name__})


def lean_adam_step(torch_step):
    """Adam's (and AdamW's) step as torch computes it on CPU tensors, in fewer calls.

    torch's single-tensor Adam (its choice for CPU parameters) spends most of a small model's
    step in Python around its seven tensor operations per parameter. This step makes the same
    operations on the same values in the same order, so the parameters and the optimiser's
    state come out the same to the bit (tests/test_optim.py), in 65-80% of the time on a run's
    models (``python -m benchmarks.optimizer_step``). Groups that torch would treat otherwise
    (``amsgrad``, ``maximize``, ``foreach``, ``fused``, ``capturable``, ``differentiable``, a
    tensor learning rate, complex or non-CPU parameters) take ``torch_step``.
    """

    def step(self, closure=None):
        if not all(_lean(group) for group in self.param_groups):
            with torch.set_grad_enabled(bool(self.defaults.get("differentiable", False))):
                return torch_step(self, closure)
        loss = _evaluate(closure)
        with torch.no_grad():
            for group in self.param_groups:
                _adam_group(self.state, group)
        return loss

    return step


def _evaluate(closure) -> torch.Tensor | None:
    """An optimiser step's closure evaluated with gradients on (its loss), or None."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


_TORCH_PATHS = ("amsgrad", "maximize", "foreach", "fused", "capturable", "differentiable")


def _lean(group: dict) -> bool:
    """Whether torch's own step would take its plain single-tensor path for ``group``."""
    if any(group.get(flag) for flag in _TORCH_PATHS):
        return False
    if any(torch.is_tensor(v) for v in (group["lr"], group["weight_decay"], *group["betas"])):
        return False
    return all(p.is_cpu and not p.is_complex() for p in group["params"])


def _adam_group(state: dict, group: dict) -> None:
    """One Adam step of ``group``'s parameters: ``torch.optim.adam._single_tensor_adam``'s
    operations for float hyper-parameters on CPU, its state initialised as ``Adam._init_group``
    initialises it.

    Each operation is taken on every parameter at once (torch's ``_foreach`` operations, which
    on CPU apply the single-tensor operation to each tensor in turn: the same values to the
    bit): eight calls a step (nine with weight decay) and an ``item`` per parameter, where the
    loop over the parameters made nine calls each (ten with weight decay).
    """
    beta1, beta2 = group["betas"]
    lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
    params = [p for p in group["params"] if p.grad is not None]
    if not params:
        return
    grads = [p.grad for p in params]
    if any(g.is_sparse for g in grads):
        raise RuntimeError("Adam does not support sparse gradients")
    moments = [_adam_state(state[p], p) for p in params]
    steps, exp_avgs, exp_avg_sqs = (list(column) for column in zip(*moments, strict=True))
    torch._foreach_add_(steps, 1)
    if decay != 0:
        if group.get("decoupled_weight_decay", False):
            torch._foreach_mul_(params, 1 - lr * decay)
        else:
            grads = torch._foreach_add(grads, params, alpha=decay)
    torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
    counts = [s.item() for s in steps]
    denoms = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(denoms, [(1 - beta2**n) ** 0.5 for n in counts])
    torch._foreach_add_(denoms, eps)
    torch._foreach_addcdiv_(params, exp_avgs, denoms, [-lr / (1 - beta1**n) for n in counts])


def _adam_state(s: dict, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A parameter's step count and moments, made (zero) on its first step."""
    if not s:
        scalar = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
        s["step"] = torch.tensor(0.0, dtype=scalar)
        s["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        s["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    return s["step"], s["exp_avg"], s["exp_avg_sq"]


def unhooked(step):
    """``step`` marked as hooked already: ``torch.optim.Optimizer.__init__`` otherwise wraps
    a class's ``step`` in a profiler ``record_function`` and the global step hooks (with
    ``zero_grad``'s record, a few percent of a training run on small models); vflfs registers
    no optimiser hooks."""
    step.hooked = True
    return step


def zero_grad(self: torch.optim.Optimizer, set_to_none: bool = True) -> None:
    """``Optimizer.zero_grad`` without its profiler record: the gradients become None (or,
    with ``set_to_none=False``, ``torch.optim.Optimizer``'s own zeroing)."""
    if not set_to_none:
        return torch.optim.Optimizer.zero_grad.__wrapped__(self, set_to_none=False)
    for group in self.param_groups:
        for p in group["params"]:
            p.grad = None


def plain_groups(cls: type[torch.optim.Optimizer]) -> type[torch.optim.Optimizer]:
    """``cls`` whose param groups marked ``plain_sgd=True`` take plain gradient steps,
    p -= lr * grad, the group's ``lr`` and no state (the others: ``cls``'s own step).

    The stochastic gates' means can so descend their gradient unscaled, as STG's authors
    trained them, while the network's weights keep Adam (``strategy.gate_optimizer=sgd``; on
    the selection benchmark it ranked the columns no better than Adam: docs/selection_limits.md).
    """
    base_step = cls.step

    def step(self, closure=None):
        loss = _evaluate(closure)
        with torch.no_grad():
            for group in self.param_groups:
                if not group.get("plain_sgd"):
                    continue
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])
                        p.grad = None  # cls's step skips parameters without a gradient
        base_step(self)
        return loss

    return type(cls.__name__, (cls,), {"step": unhooked(step), "__module__": __name__})


OPTIMIZERS = {
    "adam": plain_groups(eager(torch.optim.Adam)),
    "sgd": plain_groups(eager(torch.optim.SGD)),
    "adamw": plain_groups(eager(torch.optim.AdamW)),
}


def make_optimizer(
    params: Iterable[torch.nn.Parameter] | Iterable[dict],
    name: str = "adam",
    lr: float = 0.01,
    **kwargs,
) -> torch.optim.Optimizer:
    """Optimiser ``name`` over ``params`` (parameters, or param groups: a group with
    ``plain_sgd=True`` takes plain gradient steps at its ``lr``, see :func:`plain_groups`)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {sorted(OPTIMIZERS)}")
    return OPTIMIZERS[name](params, lr=lr, **kwargs)


def optimizer_arrays(optimizer: torch.optim.Optimizer) -> dict[str, np.ndarray]:
    """The optimiser's per-parameter state, flattened to ``{"<param>.<key>": array}`` (the
    parameter's index over the param groups, as in ``state_dict``; without packing one)."""
    out: dict[str, np.ndarray] = {}
    params = (p for group in optimizer.param_groups for p in group["params"])
    for pid, param in enumerate(params):
        for key, value in optimizer.state.get(param, {}).items():
            arr = value.numpy(force=True) if torch.is_tensor(value) else np.asarray(value)
            out[f"{pid}.{key}"] = arr
    return out


def load_optimizer_arrays(optimizer: torch.optim.Optimizer, arrays: dict[str, np.ndarray]) -> None:
    """Inverse of :func:`optimizer_arrays` (param groups come from the optimiser itself)."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    state: dict[int, dict] = {}
    for name, arr in arrays.items():
        pid, key = name.split(".", 1)
        device = params[int(pid)].device if key != "step" else "cpu"
        state.setdefault(int(pid), {})[key] = as_tensor(arr, device)
    optimizer.load_state_dict(
        {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}
    )
