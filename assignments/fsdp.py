# Generated from solutions/ by `shardlab stubs`: fill in every function that
# raises NotImplementedError. Keep the names and signatures.
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
    raise NotImplementedError("Task 2.1: allgather_seconds")


def forward_seconds(tokens: int, unit_params: int, flops_per_second: float) -> float:
    """Task 2.2. Seconds of one unit's forward: its matmul on `tokens` tokens
    with the unit's unit_params weights, at flops_per_second (count the FLOPs
    from the handout's convention for a matmul). Returns a float (seconds).
    """
    raise NotImplementedError("Task 2.2: forward_seconds")


def is_communication_bound(tokens: int, unit_params: int, p: int, alpha: float, beta: float,
                           flops_per_second: float, bytes_per_param: int = 2) -> bool:
    """Task 2.3. True when the next unit's all-gather (unit_params * bytes_per_param
    bytes) takes at least as long as this unit's forward (equal times count as
    communication bound). Returns a bool.
    """
    raise NotImplementedError("Task 2.3: is_communication_bound")


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
    raise NotImplementedError("Task 2.4: max_devices_before_comm_bound")


def min_tokens_to_hide_allgather(unit_params: int, p: int, alpha: float, beta: float,
                                 flops_per_second: float, bytes_per_param: int = 2) -> float:
    """Task 2.5. Tokens per device at which one unit's forward takes exactly as
    long as the next unit's all-gather over p >= 2 devices (a real number,
    not rounded). Returns a float (tokens).
    """
    raise NotImplementedError("Task 2.5: min_tokens_to_hide_allgather")


def step_comm_bytes(num_params: int, p: int, bytes_per_param: int = 2) -> float:
    """Task 2.6. Bytes each rank receives in one training step under full
    sharding of num_params parameters of bytes_per_param bytes over p ranks:
    count every collective one step of Part B's FSDP (Task 2.7) issues and
    what each brings to one rank. Returns a float (bytes).
    """
    raise NotImplementedError("Task 2.6: step_comm_bytes")


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
        raise NotImplementedError("Task 2.7: FSDP.__init__")

    def forward(self, *args, **kwargs):
        raise NotImplementedError("Task 2.7: FSDP.forward")

    def finish_gradient_synchronization(self) -> None:
        raise NotImplementedError("Task 2.7: FSDP.finish_gradient_synchronization")

    def full_state_dict(self) -> dict:
        raise NotImplementedError("Task 2.7: FSDP.full_state_dict")
