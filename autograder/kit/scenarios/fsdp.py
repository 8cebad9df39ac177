"""Question 2's scenario: train a toy model with the student's FSDP.

Every rank starts from the same model (FSDP does not broadcast), wraps it,
and trains on its own rows of the global batch, which only its trusted
process knows in full. Returns, per rank:

- "state": `full_state_dict()` after training, as nested lists (claimed by
  the student's process; only real communication can make it right);
- "stored": (claimed) parameter elements the FSDP object keeps between steps, found by
  walking everything reachable from it (modules, dicts, closures of hooks,
  attributes), each tensor storage once, gradients excluded;
- "grads": per step, right after finish_gradient_synchronization() returned,
  every trainable parameter of the FSDP object (its shards), in parameters()
  order, as {"numel": its elements, "grad": its .grad flattened, or None}
  (claimed);
- "steps": per step, the collectives the trusted process performed [op, phase, bytes, async, seq] with
  phase "forward", "backward" or "finish";
- "units": per step, where each nn.Linear's forward started and ended (the
  student process's marks), as the number of collectives the trusted
  process had been asked for by then (prefetch check).
"""
from __future__ import annotations

import gc
import types

import torch
from torch import nn

from . import Scenario, claimed, rank_share, register, starting_model
from ..schema import STATE, TENSOR_VALUES, Fields, Int, ListOf, Null, OneOf, Text
from ..toy_models import make_optimizer

STEP_PARTS = ("forward", "backward", "finish", "optimizer")      # the phases of one step, in order
MAX_SHARDS = 10_000
_SKIP = (types.ModuleType, type, types.BuiltinFunctionType, str, bytes, int, float)


def _referents(obj: object) -> list:
    if isinstance(obj, torch.Tensor):          # its Python attributes, not .grad
        return [v for k, v in getattr(obj, "__dict__", {}).items() if k != "grad"]
    if isinstance(obj, types.FunctionType):    # hooks keep tensors in closures
        out = [c.cell_contents for c in obj.__closure__ or () if _has(c)]
        out += list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        if (obj.__module__ or "").startswith("assignments"):
            out.append(obj.__globals__)         # a student's module-level cache counts too
        return out
    if isinstance(obj, types.MethodType):
        return [obj.__self__, obj.__func__]
    return gc.get_referents(obj)


def _has(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - reading an empty cell raises ValueError
        return True
    except ValueError:
        return False


def stored_elements(root: object, limit: int = 200_000) -> int:
    """Elements of every tensor storage reachable from `root`, each storage
    once (a view keeps its whole storage alive); not following Python
    modules, classes or `.grad`."""
    seen: set[int] = set()
    storages: dict[int, int] = {}
    stack = [root]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIP):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            s = obj.untyped_storage()
            storages[s.data_ptr()] = s.nbytes() // obj.element_size()
        stack.extend(_referents(obj))
    return sum(storages.values())


def shard_gradients(fsdp: nn.Module) -> list[dict]:
    """Every trainable parameter of the FSDP object (its shards), in parameters() order:
    {"numel": elements, "grad": .grad flattened to a list, or None}."""
    return [{"numel": p.numel(), "grad": None if p.grad is None else p.grad.detach().reshape(-1).tolist()}
            for p in fsdp.parameters() if p.requires_grad][:MAX_SHARDS]


def _watch_units(module: nn.Module, ctx) -> None:
    """Forward start/end of every nn.Linear, sent to the trusted process,
    which notes how many collectives it had performed by then. Registered
    before the student's hooks, so the start is seen first."""
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)
               and any(p.requires_grad for p in m.parameters(recurse=False))]
    for i, m in enumerate(linears):
        m.register_forward_pre_hook(lambda *_, i=i: ctx.mark("unit", at="start", i=i))
        m.register_forward_hook(lambda *_, i=i: ctx.mark("unit", at="end", i=i))


@register
class FsdpTrain(Scenario):
    name = "fsdp_train"
    mark_fields = {"step": Fields({"k": Int(0)}),
                   "unit": Fields({"at": Text(choices=("start", "end")), "i": Int(0)})}

    def phases(self, steps: int, **_):
        """"construction", "<k> forward" ... "<k> optimizer" for each step k, "state"."""
        return {"construction", "state", *(f"{k} {part}" for k in range(steps) for part in STEP_PARTS)}

    def result_schema(self, steps: int, **_):
        shard = Fields({"numel": Int(0), "grad": OneOf((Null(), TENSOR_VALUES))})
        return Fields({"state": STATE, "stored": Int(0), "grads": ListOf(ListOf(shard, MAX_SHARDS), steps)})

    def prepare(self, rank, world_size: int, model: str, optimizer: str, steps: int, seed: int):
        """Every rank gets the same initial model (FSDP does not broadcast) and
        only its own rows of the batch."""
        return dict(model=model, optimizer=optimizer, steps=steps), rank_share(model, seed, seed, world_size,
                                                                              rank.rank)

    def student(self, ctx, tensors, model: str, optimizer: str, steps: int):
        module = starting_model(model, tensors)
        _watch_units(module, ctx)
        ctx.phase("construction")
        fsdp = ctx.student().FSDP(module)
        opt = make_optimizer(optimizer, fsdp.parameters())
        grads: list[list[dict]] = []
        for k in range(steps):
            ctx.mark("step", k=k)
            forward, backward, finish, optimizer = (f"{k} {part}" for part in STEP_PARTS)
            ctx.phase(forward)
            loss = nn.functional.mse_loss(fsdp(tensors["inputs"]), tensors["targets"])
            ctx.phase(backward)
            loss.backward()
            ctx.phase(finish)
            fsdp.finish_gradient_synchronization()
            grads.append(shard_gradients(fsdp))        # the docstring's promise, read right after the call
            ctx.phase(optimizer)
            opt.step()
            opt.zero_grad(set_to_none=True)
        stored = stored_elements(fsdp)
        ctx.phase("state")
        return {"state": {k: v.detach().tolist() for k, v in fsdp.full_state_dict().items()}, "stored": stored,
                "grads": grads}

    def report(self, rank, result, world_size: int, model: str, optimizer: str, steps: int, seed: int):
        """The final weights and the stored count are the student's claims; the
        collectives and where the units began and ended, relative to them, are
        what the trusted process saw. Every phase is one of `phases` (checked
        when announced), so "<k> <part>" splits in two."""
        per_step = []
        for k in range(steps):
            per_step.append([[e["op"], e["phase"].split()[1], e["bytes"], e["async"], e["seq"]]
                             for e in rank.tracer.collectives() if e["phase"].split()[0] == str(k)])
        units: list[list[list]] = [[] for _ in range(steps)]
        step = -1
        for m in rank.marks:
            if m["kind"] == "step":
                step = m.get("k", -1)
            elif m["kind"] == "unit" and 0 <= step < steps:
                units[step].append([m.get("at"), m.get("i"), m["seq"]])
        return {"state": claimed(result, "state"), "stored": claimed(result, "stored"),
                "grads": claimed(result, "grads"), "steps": per_step, "units": units}
