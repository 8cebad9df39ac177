"""The bucket experiment's rank side: two scenarios, loaded only by the
benchmark's local ranks (sandbox/gloo/local.py; never while grading).

- "bench_allreduce": times dist.all_reduce of FP32 tensors of given sizes
  (median of `repeats`, after a warm-up), for the o + bytes / w fit.
- "bench_ddp_step": times training steps of a wide MLP (a few tens of MB of
  FP32 gradients) wrapped in BucketedDDP with one bucket size; with
  bucket_size_mb = 0 it times the same step without DDP (the compute-only
  baseline). `impl` picks the reference BucketedDDP or the submission's.
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch import nn

from shardlab.autograder.sandbox.gloo.ranks.scenarios import Scenario, register
from shardlab.reference.buckets_ddp import BucketedDDP as ReferenceDDP


def wide_mlp(width: int, depth: int, seed: int = 0) -> nn.Module:
    """depth x Linear(width, width) with ReLU: depth * (width^2 + width) FP32 parameters."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        return nn.Sequential(*layers)


def _median_seconds(fn, repeats: int) -> float:
    fn()                                            # warm-up
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@register
class BenchAllReduce(Scenario):
    """Timed in the ranks' trusted processes: gloo's own all-reduce."""

    name = "bench_allreduce"

    def prepare(self, rank, world_size: int, sizes: list[int], repeats: int):
        out = []
        for nbytes in sizes:
            x = torch.ones(nbytes // 4)                 # FP32
            out.append(_median_seconds(lambda x=x: dist.all_reduce(x), repeats))
        rank.memo["seconds"] = out
        return {}, {}

    def student(self, ctx, tensors):
        return None

    def report(self, rank, result, **args):
        return rank.memo["seconds"]


@register
class BenchDdpStep(Scenario):
    """Timed in the student's process, whose all-reduces go through its
    rank's trusted process (as when grading)."""

    name = "bench_ddp_step"

    def student(self, ctx, tensors, world_size: int, width: int, depth: int, rows: int,
                bucket_size_mb: float, repeats: int, impl: str) -> float:
        model = wide_mlp(width, depth)
        gen = torch.Generator().manual_seed(ctx.rank)
        x, y = torch.randn(rows, width, generator=gen), torch.randn(rows, width, generator=gen)
        if bucket_size_mb > 0:
            cls = ctx.student().BucketedDDP if impl == "student" else ReferenceDDP
            wrapped = cls(model, bucket_size_mb)
            finish = wrapped.finish_gradient_synchronization
        else:
            wrapped, finish = model, (lambda: None)

        def step():
            nn.functional.mse_loss(wrapped(x), y).backward()
            finish()
            for p in model.parameters():
                p.grad = None

        return _median_seconds(step, repeats)
