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
    # BEGIN SOLUTION
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in range(len(param_bytes) - 1, -1, -1):
        if current and size + param_bytes[i] > bucket_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += param_bytes[i]
    if current:
        buckets.append(current)
    return buckets
    # END SOLUTION


def ddp_overhead_seconds(model_bytes: float, bandwidth: float, call_overhead: float,
                         num_buckets: float) -> float:
    """Task 4.2. Communication time DDP adds to a step with num_buckets buckets.

    Every all-reduce call costs call_overhead (o) seconds; the transfers of
    all but the last bucket hide behind the backward pass, and the last
    bucket's model_bytes / num_buckets bytes take their time at bandwidth
    (w) bytes/s. Returns seconds (a float).
    """
    # BEGIN SOLUTION
    calls = num_buckets * call_overhead
    last_bucket = (model_bytes / num_buckets) / bandwidth
    return calls + last_bucket
    # END SOLUTION


def optimal_num_buckets(model_bytes: float, bandwidth: float, call_overhead: float) -> float:
    """Task 4.3. The real number of buckets that minimises ddp_overhead_seconds."""
    # BEGIN SOLUTION
    # n * o + s / (n * w) is smallest where its two terms are equal
    return math.sqrt(model_bytes / bandwidth / call_overhead)
    # END SOLUTION


def optimal_bucket_bytes(model_bytes: float, bandwidth: float, call_overhead: float) -> float:
    """Task 4.4. The bucket size in bytes at the optimum (model_bytes / optimal buckets)."""
    # BEGIN SOLUTION
    return model_bytes / optimal_num_buckets(model_bytes, bandwidth, call_overhead)
    # END SOLUTION


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

    Hint: Tensor.register_post_accumulate_grad_hook calls a function of
    yours once a parameter's gradient is accumulated, and
    dist.all_reduce(..., async_op=True) returns a handle to wait on.
    """

    def __init__(self, module: torch.nn.Module, bucket_size_mb: float):
        super().__init__()
        self.module = module
        # BEGIN SOLUTION
        for t in list(module.parameters()) + list(module.buffers()):
            with torch.no_grad():
                dist.broadcast(t, src=0)
        self.params = [p for p in module.parameters() if p.requires_grad]
        sizes = [p.numel() * p.element_size() for p in self.params]
        self.buckets = assign_buckets(sizes, bucket_size_mb * 2**20)
        self.where = {}                 # param index -> (bucket, offset in its flat buffer)
        self.flats = []
        for b, members in enumerate(self.buckets):
            offset = 0
            for i in members:
                self.where[i] = (b, offset)
                offset += self.params[i].numel()
            self.flats.append(torch.zeros(offset, dtype=self.params[members[0]].dtype))
        self.ready = [0] * len(self.buckets)
        self.handles: list = []         # the buckets' async all-reduces, waited for at the end

        def _make_hook(i):
            def _hook(param):
                b, offset = self.where[i]
                with torch.no_grad():
                    self.flats[b][offset:offset + param.numel()].copy_(param.grad.reshape(-1))
                self.ready[b] += 1
                if self.ready[b] == len(self.buckets[b]):
                    self.handles.append(dist.all_reduce(self.flats[b], async_op=True))
            return _hook

        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(_make_hook(i))
        # END SOLUTION

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self) -> None:
        """Every trainable parameter's .grad as one process on the whole batch has it."""
        # BEGIN SOLUTION
        for handle in self.handles:
            handle.wait()
        self.handles = []
        world = dist.get_world_size()
        with torch.no_grad():
            for i, p in enumerate(self.params):
                b, offset = self.where[i]
                assert p.grad is not None       # every trainable parameter's gradient was all-reduced
                p.grad.copy_(self.flats[b][offset:offset + p.numel()].view_as(p.grad) / world)
        self.ready = [0] * len(self.buckets)
        # END SOLUTION
