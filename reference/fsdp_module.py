"""A reference FSDP, small enough to read in one sitting (docs/spec.md, question 2).

Every `nn.Linear` is one unit. Its trainable parameters are flattened into
one vector, right-padded to a multiple of the world size p, and each rank
keeps only its 1/p slice as an `nn.Parameter` (the optimizer sees shards).
Frozen parameters are not sharded: they stay in the module, replicated.

One training step of a unit, on each rank:

    forward   all-gather the flat shard -> full flat (padded) weights
              run the layer on views of it; drop the full weights after
    backward  when the layer's output gradient arrives, all-gather again
              (autograd saved only a marker, not the weights themselves)
              autograd sums the views' gradients into the full flat grad
              reduce-scatter it (async) -> this rank's slice of the grad
    finish    wait, divide by p (average over ranks), write shard.grad

Per unit and step each rank receives 3 (p-1)/p * padded_numel elements.
Prefetch: a unit's forward starts the next unit's all-gather, so it can run
while this unit computes.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


class _GatherFull(torch.autograd.Function):
    """full = all_gather(shard); backward: reduce-scatter the full gradient."""

    @staticmethod
    def forward(ctx, shard: torch.Tensor, unit: "_Unit") -> torch.Tensor:
        ctx.unit = unit
        return unit.take_full()                                  # (p * shard_numel,) fp32

    @staticmethod
    def backward(ctx, grad_full: torch.Tensor):
        ctx.unit.reduce_scatter_grad(grad_full)
        return None, None                                        # shard.grad is written in finish


class _Unit:
    """One nn.Linear's trainable parameters as a flat, padded, sharded vector."""

    hooks: torch.autograd.graph.saved_tensors_hooks   # set by FSDP's pre-forward hook, for the forward

    def __init__(self, module: nn.Linear, group, rank: int, world: int):
        self.module, self.group, self.rank, self.world = module, group, rank, world
        self.names = [n for n, p in module.named_parameters(recurse=False) if p.requires_grad]
        params = [getattr(module, n) for n in self.names]
        self.shapes = [p.shape for p in params]
        self.numel = sum(p.numel() for p in params)
        self.shard_numel = math.ceil(self.numel / world)          # right-pad to a multiple of p
        flat = torch.zeros(self.shard_numel * world, dtype=params[0].dtype)
        flat[: self.numel] = torch.cat([p.detach().reshape(-1) for p in params])
        self.shard = nn.Parameter(flat[rank * self.shard_numel:(rank + 1) * self.shard_numel].clone())
        for n in self.names:                                      # the module keeps no full weights
            delattr(module, n)
        self.full: torch.Tensor | None = None                     # gathered weights, while needed
        self.pending_gather: tuple[Any, torch.Tensor] | None = None   # (work, buffer) of a prefetch
        self.pending_grads: list = []                             # (work, buffer) of reduce-scatters

    # -- all-gather -------------------------------------------------------
    def start_gather(self) -> None:
        if self.pending_gather is None and self.full is None:
            buffer = torch.empty(self.shard_numel * self.world, dtype=self.shard.dtype)
            work = dist.all_gather_single(buffer, self.shard.detach(), group=self.group, async_op=True)
            self.pending_gather = (work, buffer)

    def take_full(self) -> torch.Tensor:
        self.start_gather()
        assert self.pending_gather is not None                    # started now, if not before
        work, buffer = self.pending_gather
        work.wait()
        self.pending_gather = None
        return buffer

    def views(self, full: torch.Tensor) -> list[torch.Tensor]:
        out, offset = [], 0
        for shape in self.shapes:
            n = math.prod(shape)
            out.append(full[offset: offset + n].view(shape))
            offset += n
        return out

    # -- reduce-scatter ---------------------------------------------------
    def reduce_scatter_grad(self, grad_full: torch.Tensor) -> None:
        self.full = None                                          # backward is done with the weights
        buffer = torch.empty(self.shard_numel, dtype=self.shard.dtype)
        work = dist.reduce_scatter_single(buffer, grad_full.contiguous(), op=dist.ReduceOp.SUM,
                                           group=self.group, async_op=True)
        self.pending_grads.append((work, buffer))

    def finish(self) -> None:
        for work, buffer in self.pending_grads:
            work.wait()
            grad = buffer / self.world                            # average over ranks
            self.shard.grad = grad if self.shard.grad is None else self.shard.grad + grad
        self.pending_grads = []


class FSDP(nn.Module):
    """Fully sharded data parallel over every nn.Linear of `module`."""

    def __init__(self, module: nn.Module, process_group=None):
        super().__init__()
        self.module = module
        self.group = process_group or dist.group.WORLD
        rank, world = dist.get_rank(self.group), dist.get_world_size(self.group)
        self._keys = list(module.state_dict().keys())
        self.units = [_Unit(m, self.group, rank, world) for m in module.modules()
                      if isinstance(m, nn.Linear) and any(p.requires_grad for p in m.parameters(recurse=False))]
        self.shards = nn.ParameterList([u.shard for u in self.units])
        for i, unit in enumerate(self.units):
            after = self.units[i + 1] if i + 1 < len(self.units) else None
            before = self.units[i - 1] if i > 0 else None
            unit.module.register_forward_pre_hook(self._pre_forward(unit, after))
            unit.module.register_forward_hook(self._post_forward(unit, before))

    def _pre_forward(self, unit: _Unit, after: _Unit | None):
        def hook(module, args):
            full = _GatherFull.apply(unit.shard, unit)
            if after is not None:
                after.start_gather()                              # prefetch: overlaps this unit's compute
            for name, view in zip(unit.names, unit.views(full)):
                setattr(module, name, view)
            unit.hooks = torch.autograd.graph.saved_tensors_hooks(*self._weights_not_saved(unit, full))
            unit.hooks.__enter__()
        return hook

    @staticmethod
    def _weights_not_saved(unit: _Unit, full: torch.Tensor):
        """Autograd would keep the gathered weights alive until backward; save a
        marker instead and re-gather when backward asks for them."""
        ptr = full.untyped_storage().data_ptr()

        def pack(t):
            if t.untyped_storage().data_ptr() == ptr:
                return ("full", t.shape, t.stride(), t.storage_offset())
            return t

        def unpack(saved):
            if isinstance(saved, tuple) and saved and saved[0] == "full":
                if unit.full is None:
                    unit.full = unit.take_full()
                _, shape, stride, offset = saved
                return unit.full.as_strided(shape, stride, offset)
            return saved
        return pack, unpack

    def _post_forward(self, unit: _Unit, before: _Unit | None):
        def hook(module, args, output):
            unit.hooks.__exit__(None, None, None)
            for name in unit.names:                               # free the full weights
                delattr(module, name)
            if output.requires_grad:
                def regather(grad):
                    if unit.full is None:                         # all-gather for backward
                        unit.full = unit.take_full()
                    if before is not None:
                        before.start_gather()                     # prefetch the previous unit
                    return grad
                output.register_hook(regather)
            return output
        return hook

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self) -> None:
        for unit in self.units:
            unit.finish()
            unit.full, unit.pending_gather = None, None

    @torch.no_grad()
    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Full, unsharded tensors under the wrapped module's state_dict() keys."""
        state = {}
        for unit in self.units:
            full = unit.take_full()
            prefix = next(n for n, m in self.module.named_modules() if m is unit.module)
            for name, view in zip(unit.names, unit.views(full)):
                state[f"{prefix}.{name}" if prefix else name] = view.clone()
        state.update(self.module.state_dict())
        return {k: state[k] for k in self._keys}
