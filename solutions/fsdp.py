"""Question 2 — FSDP.

Part A is the lecture's alpha-beta model of one FSDP unit (one layer). Part B
is a working fully sharded data parallel wrapper for torch.distributed.

Conventions: seconds, bytes, FLOP/s, bytes/s. alpha is the latency of one
hop of a collective (s); beta is the bandwidth per device (bytes/s); C is
FLOP/s; b is bytes per parameter on the wire (2 for BF16). log2 is base 2.
"""
import math

import torch
import torch.distributed as dist
from torch import nn


def allgather_seconds(unit_bytes: float, p: int, alpha: float, beta: float) -> float:
    """Task 2.1. Seconds to all-gather one unit of unit_bytes bytes over p devices
    in the alpha-beta model: alpha * log2(p) + unit_bytes / beta. For p = 1
    there is nothing to gather and the whole time is 0 (the unit_bytes / beta
    term too). Returns a float (seconds).
    """
    # BEGIN SOLUTION
    if p <= 1:
        return 0.0
    latency = alpha * math.log(p, 2)
    transfer = unit_bytes / beta
    return latency + transfer
    # END SOLUTION


def forward_seconds(tokens: int, unit_params: int, flops_per_second: float) -> float:
    """Task 2.2. Seconds of one unit's forward: its matmul on `tokens` tokens
    with the unit's unit_params weights, at flops_per_second (count the FLOPs
    from the handout's convention for a matmul). Returns a float (seconds).
    """
    # BEGIN SOLUTION
    flops = 2.0 * tokens * unit_params
    return flops / flops_per_second
    # END SOLUTION


def is_communication_bound(tokens: int, unit_params: int, p: int, alpha: float, beta: float,
                           flops_per_second: float, bytes_per_param: int = 2) -> bool:
    """Task 2.3. True when the next unit's all-gather (unit_params * bytes_per_param
    bytes) takes at least as long as this unit's forward (equal times count as
    communication bound). Returns a bool.
    """
    # BEGIN SOLUTION
    comm = allgather_seconds(unit_params * bytes_per_param, p, alpha, beta)
    compute = forward_seconds(tokens, unit_params, flops_per_second)
    return bool(comm >= compute)
    # END SOLUTION


def max_devices_before_comm_bound(tokens: int, unit_params: int, alpha: float, beta: float,
                                  flops_per_second: float, bytes_per_param: int = 2) -> float:
    """Task 2.4. The device count p, a real number, at which the next unit's
    all-gather (unit_params * bytes_per_param bytes over p devices, the
    alpha-beta time of Task 2.1 with p real) takes exactly as long as this
    unit's forward: beyond it, communication binds. Solve for p yourself from
    Tasks 2.1 and 2.2 (log base 2). Return 1.0 when even at p = 1 the
    bandwidth term alone takes at least as long as the forward, and math.inf
    when p is past float range. Returns a float. Solve it in closed form: a
    search over p does not finish in time for the largest inputs.
    """
    # BEGIN SOLUTION
    # alpha * log2(p) <= (2 * tokens / C - b / beta) * unit_params, so p = 2 ** (slack / alpha)
    slack = unit_params * (2 * tokens / flops_per_second - bytes_per_param / beta)
    if slack <= 0:
        return 1.0
    exponent = slack / alpha if alpha > 0 else math.inf
    if exponent >= 1024:          # 2**1024 overflows a double
        return math.inf
    return math.pow(2.0, exponent)
    # END SOLUTION


def min_tokens_to_hide_allgather(unit_params: int, p: int, alpha: float, beta: float,
                                 flops_per_second: float, bytes_per_param: int = 2) -> float:
    """Task 2.5. Tokens per device at which one unit's forward takes exactly as
    long as the next unit's all-gather over p >= 2 devices (a real number,
    not rounded). Returns a float (tokens).
    """
    # BEGIN SOLUTION
    # 2 * T * P / C = alpha * log2(p) + b * P / beta, so T = C/2 * (alpha * log2(p) / P + b / beta)
    per_param_seconds = alpha * math.log2(p) / unit_params + bytes_per_param / beta
    return per_param_seconds * flops_per_second / 2
    # END SOLUTION


def step_comm_bytes(num_params: int, p: int, bytes_per_param: int = 2) -> float:
    """Task 2.6. Bytes each rank receives in one training step under full
    sharding of num_params parameters of bytes_per_param bytes over p ranks:
    count every collective one step of Part B's FSDP (Task 2.7) issues and
    what each brings to one rank. Returns a float (bytes).
    """
    # BEGIN SOLUTION
    one_collective = (p - 1) / p * num_params * bytes_per_param
    return 3 * one_collective
    # END SOLUTION


# BEGIN SCAFFOLD
class _ShardedLinear(torch.autograd.Function):
    """One unit's y = x W^T + b while its parameters live as shards: its
    forward and its backward are both yours to write."""

    @staticmethod
    def forward(ctx, x, shard, unit):
        # BEGIN SOLUTION
        weight, bias = unit.full_weight_and_bias()
        ctx.save_for_backward(x)            # not the weights: they are freed
        ctx.unit = unit
        return nn.functional.linear(x, weight, bias)
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_out):
        # BEGIN SOLUTION
        (x,), unit = ctx.saved_tensors, ctx.unit
        weight, _ = unit.full_weight_and_bias()                     # all-gather again
        grad_x = grad_out @ weight
        g2, x2 = grad_out.reshape(-1, grad_out.shape[-1]), x.reshape(-1, x.shape[-1])
        grads = {"weight": g2.t() @ x2, "bias": g2.sum(0)}
        unit.reduce_gradients([grads[name] for name in unit.names])
        return grad_x, None, None
        # END SOLUTION


class _Unit:
    """One nn.Linear's trainable parameters as one flat, padded vector, of
    which this rank keeps its shard."""

    def __init__(self, linear, group):
        # BEGIN SOLUTION
        self.linear, self.group = linear, group
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.names = [n for n in ("weight", "bias") if getattr(linear, n) is not None
                      and getattr(linear, n).requires_grad]
        tensors = [getattr(linear, n).detach() for n in self.names]
        self.shapes = [t.shape for t in tensors]
        flat = torch.cat([t.reshape(-1) for t in tensors])
        self.chunk = -(-flat.numel() // self.world)
        flat = nn.functional.pad(flat, (0, self.chunk * self.world - flat.numel()))
        self.shard = nn.Parameter(flat[self.rank * self.chunk:(self.rank + 1) * self.chunk].clone())
        for n in self.names:
            del linear._parameters[n]
        self.prefetched: tuple | None = None        # (work, buffer) of an all-gather started early
        self.reductions = []
        # END SOLUTION

    def start_gather(self):
        # BEGIN SOLUTION
        if self.prefetched is None:
            out = torch.empty(self.chunk * self.world, dtype=self.shard.dtype)
            self.prefetched = (dist.all_gather_single(out, self.shard.detach(), group=self.group,
                                                      async_op=True), out)
        # END SOLUTION

    def full_weight_and_bias(self):
        # BEGIN SOLUTION
        self.start_gather()
        assert self.prefetched is not None          # started now, if not before
        work, flat = self.prefetched
        work.wait()
        self.prefetched = None
        full, offset = {}, 0
        for name, shape in zip(self.names, self.shapes):
            size = math.prod(shape)
            full[name] = flat[offset:offset + size].view(shape)
            offset += size
        weight = full.get("weight", self.linear.weight if "weight" not in self.names else None)
        bias = full["bias"] if "bias" in full else self.linear.bias
        return weight, bias
        # END SOLUTION

    def reduce_gradients(self, grads):
        # BEGIN SOLUTION
        flat = torch.cat([g.reshape(-1) for g in grads])
        flat = nn.functional.pad(flat, (0, self.chunk * self.world - flat.numel()))
        out = torch.empty(self.chunk, dtype=flat.dtype)
        work = dist.reduce_scatter_single(out, flat, op=dist.ReduceOp.SUM, group=self.group, async_op=True)
        self.reductions.append((work, out))
        # END SOLUTION

    def finish(self):
        # BEGIN SOLUTION
        for work, out in self.reductions:
            work.wait()
            out /= self.world
            self.shard.grad = out if self.shard.grad is None else self.shard.grad + out
        self.reductions = []
        # END SOLUTION
# END SCAFFOLD


class FSDP(nn.Module):
    """Task 2.7. Fully sharded data parallel: FSDP(module, process_group=None).

    Every nn.Linear of `module` with a trainable parameter is one unit; it
    stays in place in the module (the grader watches its forward). Its
    trainable parameters are flattened (named_parameters() order) into one
    vector, right-padded with zeros to a multiple of the world size p, and
    each rank keeps only its 1/p shard as an nn.Parameter: the shards are
    the parameters the optimizer sees (frozen parameters and buffers stay
    unsharded in the module). Everything is FP32, collectives included.

    What must hold. Every rank trains on its own rows of the batch, and the
    wrapped model trains like one process on the whole batch (Task 2.7):
    once finish_gradient_synchronization() returns (the grader calls it
    after backward() and before the optimizer step), each shard's .grad is
    that shard's slice of the gradient one process computes with the mean
    loss over the whole batch. Between steps a rank keeps no unit's full
    weights (Task 2.8). A step issues only the collectives full sharding
    needs, each of a unit's padded flat size (Task 2.9; Task 2.6 counts
    their bytes). full_state_dict() (a collective: every rank calls it)
    returns every entry of module.state_dict() under the same names, full
    parameters, buffers and frozen parameters included. The grader's models
    keep every trainable parameter in an nn.Linear and tie no weights.
    Bonus (Task 2.11): start the next unit's all-gather (the next to run its
    forward) while the current unit computes.
    """

    def __init__(self, module: nn.Module, process_group=None):
        super().__init__()
        # BEGIN SOLUTION
        self.module = module
        self.group = process_group if process_group is not None else dist.group.WORLD
        self.keys = list(module.state_dict())
        self.units = []
        for linear in [m for m in module.modules() if isinstance(m, nn.Linear)]:
            if any(p.requires_grad for p in linear.parameters(recurse=False)):
                self.units.append(_Unit(linear, self.group))
        self.shards = nn.ParameterList([u.shard for u in self.units])
        for unit, nxt in zip(self.units, self.units[1:] + [None]):
            unit.linear.forward = self._sharded_forward(unit, nxt)
        # END SOLUTION

    # BEGIN SCAFFOLD
    @staticmethod
    def _sharded_forward(unit, nxt):
        # BEGIN SOLUTION
        def forward(x):
            if nxt is not None:
                nxt.start_gather()        # prefetch: runs while this unit computes
            return _ShardedLinear.apply(x, unit.shard, unit)
        return forward
        # END SOLUTION
    # END SCAFFOLD

    def forward(self, *args, **kwargs):
        # BEGIN SOLUTION
        return self.module(*args, **kwargs)
        # END SOLUTION

    def finish_gradient_synchronization(self) -> None:
        # BEGIN SOLUTION
        for unit in self.units:
            unit.finish()
        # END SOLUTION

    def full_state_dict(self) -> dict:
        # BEGIN SOLUTION
        state = dict(self.module.state_dict())
        names = {m: n for n, m in self.module.named_modules()}
        with torch.no_grad():
            for unit in self.units:
                weight, bias = unit.full_weight_and_bias()
                prefix = names[unit.linear] + "." if names[unit.linear] else ""
                for name, tensor in (("weight", weight), ("bias", bias)):
                    if name in unit.names:
                        state[prefix + name] = tensor.clone()
        return {k: state[k] for k in self.keys}
        # END SOLUTION
