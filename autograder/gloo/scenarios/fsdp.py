"""Question 2's scenario: train a toy model with the student's FSDP.

Every rank builds the same model (FSDP does not broadcast), wraps it, and
trains on its rows of the global batch. Returns, per rank:

- "state": `full_state_dict()` after training, as nested lists;
- "stored": parameter elements the FSDP object keeps between steps, found by
  walking everything reachable from it (modules, dicts, closures of hooks,
  attributes), each tensor storage once, gradients excluded;
- "steps": per step, the traced collectives [op, phase, bytes, async, seq] with
  phase "forward", "backward" or "finish";
- "units": per step, where each nn.Linear's forward started and ended, as
  the sequence number of the last collective issued by then (prefetch check).
"""
from __future__ import annotations

import gc
import types

import torch
from torch import nn

from autograder.gloo.scenarios import Context, scenario
from reference.toy_models import batch, build_model, make_optimizer, shard, state_lists

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
        cell.cell_contents
        return True
    except ValueError:
        return False


def stored_elements(root: object, limit: int = 200_000) -> int:
    """Elements of every tensor storage reachable from `root`, each storage
    once (a view keeps its whole storage alive); not following Python
    modules, classes or `.grad`."""
    seen, storages, stack = set(), {}, [root]
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


def _watch_units(module: nn.Module, ctx: Context, marks: list) -> None:
    """Forward start/end of every nn.Linear, as counts of collectives so far.
    Registered before the student's hooks, so the start is seen first."""
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)
               and any(p.requires_grad for p in m.parameters(recurse=False))]
    for i, m in enumerate(linears):
        m.register_forward_pre_hook(lambda *_, i=i: marks.append(["start", i, ctx.tracer.seq]))
        m.register_forward_hook(lambda *_, i=i: marks.append(["end", i, ctx.tracer.seq]))


@scenario("fsdp_train")
def fsdp_train(ctx: Context, world_size: int, model: str, optimizer: str, steps: int, seed: int) -> dict:
    module = build_model(model, seed)
    inputs, targets = batch(model, seed, world_size)
    inputs, targets = shard(inputs, ctx.rank), shard(targets, ctx.rank)
    marks: list = []
    _watch_units(module, ctx, marks)
    ctx.tracer.set_phase("construction")
    fsdp = ctx.student().FSDP(module)
    opt = make_optimizer(optimizer, fsdp.parameters())
    units = []
    for k in range(steps):
        marks.clear()
        ctx.tracer.set_phase(f"{k} forward")
        loss = nn.functional.mse_loss(fsdp(inputs), targets)
        ctx.tracer.set_phase(f"{k} backward")
        loss.backward()
        ctx.tracer.set_phase(f"{k} finish")
        fsdp.finish_gradient_synchronization()
        ctx.tracer.set_phase(f"{k} optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        units.append([list(m) for m in marks])
    stored = stored_elements(fsdp)
    ctx.tracer.set_phase("state")
    state = {k: v.detach().tolist() for k, v in fsdp.full_state_dict().items()}
    per_step = []
    for k in range(steps):
        per_step.append([[e["op"], e["phase"].split()[1], e["bytes"], e["async"], e["seq"]]
                         for e in ctx.tracer.collectives() if e["phase"].split()[0] == str(k)])
    return {"state": state, "stored": stored, "steps": per_step, "units": units}
