# Generated from solutions/ by `shardlab stubs`: fill in every function that
# raises NotImplementedError. Keep the names and signatures.
"""Question 4 — DDP gradient bucket sizes.

Conventions: sizes in bytes, times in seconds; bucket sizes in MB mean
2**20 bytes, as PyTorch DDP's `bucket_cap_mb`; FP32 = 4 bytes. The cost
model: s bytes of gradients in n_b equal buckets; one all-reduce call costs
o seconds plus bytes / w; the backward compute of one bucket takes as long
as its communication, so only the last bucket's transfer is exposed.
"""
import math

import torch
import torch.distributed as dist


def assign_buckets(param_bytes: list[int], bucket_bytes: float) -> list[list[int]]:
    """Task 4.1. Group parameters into DDP buckets.

    param_bytes[i] is the size in bytes of the i-th trainable parameter, in
    model.parameters() order. Buckets are filled in reverse order (the
    order backward produces gradients): a parameter joins the current bucket
    unless that would make the bucket exceed bucket_bytes; then it starts a
    new bucket. A parameter larger than the cap sits alone. Returns the
    buckets as lists of indices, each in the order they were added, e.g.
    assign_buckets([4, 4, 4], 8) == [[2, 1], [0]]; [] for no parameters.
    """
    raise NotImplementedError("Task 4.1: assign_buckets")


def ddp_overhead_seconds(model_bytes: float, bandwidth: float, call_overhead: float,
                         num_buckets: float) -> float:
    """Task 4.2. Communication time DDP adds to a step with num_buckets buckets.

    Every all-reduce call costs call_overhead (o) seconds; the transfers of
    all but the last bucket hide behind the backward pass, and the last
    bucket's model_bytes / num_buckets bytes take their time at bandwidth
    (w) bytes/s. Returns seconds (a float).
    """
    raise NotImplementedError("Task 4.2: ddp_overhead_seconds")


def optimal_num_buckets(model_bytes: float, bandwidth: float, call_overhead: float) -> float:
    """Task 4.3. The real number of buckets that minimises ddp_overhead_seconds."""
    raise NotImplementedError("Task 4.3: optimal_num_buckets")


def optimal_bucket_bytes(model_bytes: float, bandwidth: float, call_overhead: float) -> float:
    """Task 4.4. The bucket size in bytes at the optimum (model_bytes / optimal buckets)."""
    raise NotImplementedError("Task 4.4: optimal_bucket_bytes")


class BucketedDDP(torch.nn.Module):
    """Task 4.5. Data parallelism with bucketed, overlapped gradient all-reduce.

    BucketedDDP(module, bucket_size_mb): broadcast rank 0's parameters and
    buffers to every rank at construction. Group the trainable parameters
    (model.parameters() order, requires_grad only; a tied parameter appears
    once) with assign_buckets(..., bucket_size_mb * 2**20). In backward, as
    soon as every gradient of a bucket is ready, start that bucket's
    all-reduce without waiting for it, as one flat tensor: one all-reduce
    per bucket per step (Tasks 4.6 and 4.7). Frozen parameters get no
    gradient and are not communicated (but are broadcast).

    What must hold: every rank trains on its own rows of the batch, and
    once finish_gradient_synchronization() returns (the grader calls it
    after backward() and before the optimizer step) each trainable
    parameter's .grad is the gradient one process computes with the mean
    loss over the whole batch, so the model trains like one process
    (Task 4.5).
    """

    def __init__(self, module: torch.nn.Module, bucket_size_mb: float):
        super().__init__()
        self.module = module
        raise NotImplementedError("Task 4.5: BucketedDDP.__init__")

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self) -> None:
        """Every trainable parameter's .grad as one process on the whole batch has it."""
        raise NotImplementedError("Task 4.5: BucketedDDP.finish_gradient_synchronization")
