"""Question 4 — DDP gradient buckets, as an answer key.

The reference BucketedDDP is in `buckets_ddp` (it needs torch).

Conventions (docs/spec.md): bytes and seconds; bucket sizes in MB = 2**20 bytes,
as PyTorch DDP's `bucket_cap_mb`. The cost model: a model of s bytes of
gradients in n_b equal buckets; every all-reduce call costs o seconds of
overhead plus its bytes / w; compute per bucket equals communication per
bucket, so all transfers hide behind the backward pass except the last
bucket's: overhead(n_b) = n_b * o + s / (n_b * w). These are the model's
assumptions (each bucket's compute equals its transfer time, the calls run
one after another), which the handout states as such.
"""
from __future__ import annotations

import math

from shardlab.reference.derivation import Worked, n, sci
from shardlab.reference.specs import MiB


def assign_buckets(param_bytes: list[int], bucket_bytes: float) -> list[list[int]]:
    """Indices into param_bytes grouped into buckets, filled in reverse order
    (the order backward produces gradients): a parameter joins the current
    bucket unless that would make it exceed bucket_bytes; then it starts a
    new one. A parameter larger than the cap therefore sits alone. The course's
    rule, not PyTorch DDP's (which assigns in forward order and reverses the
    buckets, closes a bucket once it reaches the cap, and caps the first at 1 MiB)."""
    buckets: list[list[int]] = []
    filled = 0.0
    for i in reversed(range(len(param_bytes))):
        if not buckets or filled + param_bytes[i] > bucket_bytes:
            buckets.append([])
            filled = 0.0
        buckets[-1].append(i)
        filled += param_bytes[i]
    return buckets


def ddp_overhead_seconds(model_bytes: float, bandwidth: float, call_overhead: float,
                         num_buckets: float) -> float:
    """n_b * o + s / (n_b * w): every call pays o; only the last bucket's transfer is exposed."""
    return num_buckets * call_overhead + model_bytes / (num_buckets * bandwidth)


def optimal_num_buckets(model_bytes: float, bandwidth: float, call_overhead: float) -> float:
    """d/dn_b (n_b o + s/(n_b w)) = o - s/(n_b^2 w) = 0  =>  n_b* = sqrt(s / (w o))."""
    return math.sqrt(model_bytes / (bandwidth * call_overhead))


def optimal_bucket_bytes(model_bytes: float, bandwidth: float, call_overhead: float) -> float:
    """b* = s / n_b* = sqrt(s w o)."""
    return math.sqrt(model_bytes * bandwidth * call_overhead)


def worked(cfg) -> dict[str, Worked]:
    """The handout's numbers for the course config's [buckets] section."""
    b = cfg.buckets
    s, w, o = b.model_bytes, b.bandwidth, b.call_overhead_seconds
    n_opt = optimal_num_buckets(s, w, o)
    b_opt = optimal_bucket_bytes(s, w, o)
    one = ddp_overhead_seconds(s, w, o, 1)
    best = ddp_overhead_seconds(s, w, o, n_opt)
    overhead_one = Worked("overhead with a single bucket", "o + s / w",
                          f"{sci(o)} s + {n(s)} B / {sci(w)} B/s", one, f"{sci(one)} s")
    if n_opt < 1:
        # below one bucket the overhead only grows with n_b (o − s/(n_b² w) > 0 for n_b >= 1): one bucket is best
        return {
            "overhead_one": overhead_one,
            "n_opt": Worked("optimal number of buckets", "n_b* = max(1, sqrt(s / (w · o)))",
                            f"max(1, sqrt({n(s)} / ({sci(w)} · {sci(o)}))) = max(1, {n_opt:.2f})", 1, "1 bucket"),
            "b_opt": Worked("optimal bucket size", "b* = s / n_b* = s", f"{n(s)} / 1", s,
                            f"{n(s)} bytes = {s / MiB:.2f} MB"),
            "overhead_opt": Worked("overhead at the optimum", "o + s / w", overhead_one.substituted, one,
                                   f"{sci(one)} s"),
        }
    return {
        "overhead_one": overhead_one,
        "n_opt": Worked("optimal number of buckets", "n_b* = sqrt(s / (w · o))",
                        f"sqrt({n(s)} / ({sci(w)} · {sci(o)}))", n_opt, f"{n_opt:.2f} buckets"),
        "b_opt": Worked("optimal bucket size", "b* = s / n_b* = sqrt(s · w · o)",
                        f"sqrt({n(s)} · {sci(w)} · {sci(o)})", b_opt,
                        f"{n(round(b_opt))} bytes = {b_opt / MiB:.2f} MB"),
        "overhead_opt": Worked("overhead at the optimum", "2 · sqrt(s · o / w)",
                               f"2 · sqrt({n(s)} · {sci(o)} / {sci(w)})", best, f"{sci(best)} s"),
    }
