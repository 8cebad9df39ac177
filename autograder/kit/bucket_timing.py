"""The bucket experiment's rank side: two scenarios, loaded only by the
benchmark's local ranks (`local`; never while grading). The
starter kit ships this module, so it imports nothing that answers a question:
the BucketedDDP it times is always the one in `root`/assignments/buckets.py
(the student's in the kit; the course solutions for `shardlab bench buckets`).

- "bench_allreduce": times dist.all_reduce of FP32 tensors of given sizes,
  for the fit t = o + bytes / w. Every timing is returned, not a median: the
  host takes medians over several calls of the scenario, interleaved with
  the step timings, so slow drift of the machine hits every size alike.
- "bench_ddp_step": times training steps of a deep, narrow MLP wrapped in
  BucketedDDP with one bucket size (bucket_size_mb = 0: the same step without
  DDP, the baseline).

Why the backward compute is emulated. The cost model of question 4 assumes
that communication runs beside the backward pass (on a GPU the kernels run
on the device while the host's network stack moves the bytes), and that
computing one bucket's gradients takes as long as sending them. On a
2-core laptop running 2 ranks, real CPU compute and gloo's send/receive/sum
fight over the same two cores, so nothing can overlap and the model cannot
describe what is measured. So each layer's backward here *sleeps* for
(its gradient bytes) / w, with w the bandwidth just measured: the step has
accelerator-like compute that leaves the cores free, exactly as long as
the model assumes. The real matrix products are kept small (few rows).
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch import nn

from .scenarios import Scenario, register
from .toy_models import seeded_cpu_rng

WARMUP_CALLS = 2          # first calls pay for allocation, gloo's buffers, autograd's graph set-up


class EmulatedBackward(torch.autograd.Function):
    """Identity forward; backward sleeps `seconds` (an accelerator's compute
    time that leaves the host's cores free) and passes the gradient on."""

    @staticmethod
    def forward(ctx, x, seconds: float):
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


class EmulatedCompute(nn.Module):
    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def forward(self, x):
        return EmulatedBackward.apply(x, self.seconds) if self.seconds > 0 else x


def layer_bytes(width: int) -> int:
    """FP32 gradient bytes of one Linear(width, width): weight and bias."""
    return 4 * (width * width + width)


def wide_mlp(width: int, depth: int, backward_seconds_per_byte: float = 0.0, seed: int = 0) -> nn.Module:
    """depth x [Linear(width, width), ReLU, EmulatedCompute]: depth·(width² + width) FP32
    parameters; the backward through each layer takes at least its gradient bytes ×
    backward_seconds_per_byte seconds, before its gradients are ready."""
    with seeded_cpu_rng(seed):
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU(),
                       EmulatedCompute(layer_bytes(width) * backward_seconds_per_byte)]
        return nn.Sequential(*layers)


def _timings(fn, calls: int) -> list[float]:
    """Seconds of each of `calls` calls of fn, after WARMUP_CALLS untimed ones; the
    ranks start each call together (barrier), and a call's time is this rank's."""
    for _ in range(WARMUP_CALLS):
        fn()
    times = []
    for _ in range(calls):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


@register
class BenchAllReduce(Scenario):
    """gloo's own all-reduce, timed on each rank."""

    name = "bench_allreduce"

    def prepare(self, rank, world_size: int, sizes: list[int], calls: int):
        rank.memo["seconds"] = [_timings(lambda x=torch.ones(nbytes // 4): dist.all_reduce(x), calls)
                                for nbytes in sizes]
        return {}, {}

    def student(self, ctx, tensors):
        return None

    def report(self, rank, result, **args):
        return rank.memo["seconds"]


@register
class BenchDdpStep(Scenario):
    """Steps of the BucketedDDP in `root`/assignments/buckets.py, timed on each rank."""

    name = "bench_ddp_step"

    def student(self, ctx, tensors, world_size: int, width: int, depth: int, rows: int, bucket_size_mb: float,
                calls: int, backward_seconds_per_byte: float) -> list[float]:
        model = wide_mlp(width, depth, backward_seconds_per_byte)
        gen = torch.Generator().manual_seed(ctx.rank)
        x, y = torch.randn(rows, width, generator=gen), torch.randn(rows, width, generator=gen)
        if bucket_size_mb > 0:
            wrapped = ctx.student().BucketedDDP(model, bucket_size_mb)
            finish = wrapped.finish_gradient_synchronization
        else:
            wrapped, finish = model, (lambda: None)

        def step():
            nn.functional.mse_loss(wrapped(x), y).backward()
            finish()
            for p in model.parameters():
                p.grad = None

        return _timings(step, calls)
