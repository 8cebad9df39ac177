"""Question 4's figures: backward per bucket, each bucket's all-reduce (its call's overhead, then
its transfer) starting when its gradients are ready, what is left after backward exposed; and
(solutions only) the overhead n_b·o + s/(n_b·w) against n_b, with the reference's optimum.

Schematic for students, to scale for the solutions (`core.drawing`).
"""
from __future__ import annotations

import math

from shardlab.autograder.core.drawing import (COMM, COMPUTE, DPI, Diagram, EXPOSED, OVERHEAD,
                                              bars, legend, pyplot, timeline_axes, worked)
from shardlab.reference import buckets as ref


def ddp_schedule(n_b: int, transfer: float, overhead: float):
    """(compute, comms, backward_end): bucket k's backward takes `transfer` (the cost model: its
    compute as long as its communication); its all-reduce, `overhead` then `transfer`, starts when its
    gradients are ready and the link is free."""
    compute = [(k * transfer, transfer) for k in range(n_b)]
    comms, free = [], 0.0
    for start, length in compute:
        begin = max(start + length, free)
        comms.append((begin, overhead + transfer))
        free = begin + overhead + transfer
    return compute, comms, compute[-1][0] + compute[-1][1]


DDP_BUCKETS = 4          # buckets drawn (the optimum of the solutions is on the overhead curve)


def _draw_ddp(cfg, to_scale: bool):
    plt = pyplot()
    from shardlab.reference.derivation import sci
    n_b = DDP_BUCKETS
    if to_scale:
        b = cfg.buckets
        overhead = b.call_overhead_seconds
        transfer = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, 0.0, n_b)    # s / (n_b · w)
        exposed = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, b.call_overhead_seconds, n_b)
        scale = 1e3
    else:
        transfer, overhead, exposed, scale = 1.0, 0.3, None, 1.0
    compute, comms, end = ddp_schedule(n_b, transfer, overhead)
    tail = comms[-1][0] + comms[-1][1]
    if exposed is not None and not math.isclose(tail - end, exposed, rel_tol=1e-9):
        raise AssertionError(f"the DDP timeline's tail {tail - end} is not the reference's overhead {exposed}")
    span = tail * scale
    fig, ax = plt.subplots(figsize=(8.4, 3.1 if to_scale else 2.9), dpi=DPI)
    fig.subplots_adjust(left=0.12, right=0.98, top=0.7 if to_scale else 0.8, bottom=0.15)
    ax.set_xlim(-0.01 * span, 1.01 * span)
    timeline_axes(ax, ["backward", "all-reduce"], to_scale)
    bars(ax, 0, [(s * scale, d * scale, [f"bucket {k + 1}", f"{k + 1}"]) for k, (s, d) in enumerate(compute)],
          COMPUTE, span, "backward of bucket k")
    bars(ax, 1, [(s * scale, overhead * scale, []) for s, _ in comms], OVERHEAD, span, "call overhead o")
    bars(ax, 1, [((s + overhead) * scale, (d - overhead) * scale, [f"transfer {k + 1}", f"{k + 1}"])
                  for k, (s, d) in enumerate(comms)], COMM, span, "transfer of bucket k")
    ax.axvspan(end * scale, span, color=EXPOSED, alpha=0.13, lw=0)
    ax.annotate("", (end * scale, 1.55), (span, 1.55), arrowprops=dict(arrowstyle="<|-|>", color=EXPOSED, lw=1.4),
                annotation_clip=False)
    text = (f"exposed: {exposed * 1e3:.4g} ms" if exposed is not None else "exposed after backward")
    ax.text((end * scale + span) / 2, 1.68, text, ha="center", va="bottom", fontsize=9, color=EXPOSED,
            fontweight="bold")
    ax.set_ylim(-0.6, 1.95)
    if to_scale:
        ax.set_title(f"s = {b.model_bytes:,} bytes in {n_b} buckets, w = {sci(b.bandwidth)} bytes/s, "
                     f"o = {b.call_overhead_seconds * 1e6:g} µs\n"
                     "(the cost model: a bucket's backward takes as long as its transfer)",
                     fontsize=9, loc="left", pad=14)
    legend(fig, [ax], 1.0)
    return fig


def _ddp_alt(cfg) -> str:
    b = cfg.buckets
    exposed = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, b.call_overhead_seconds, DDP_BUCKETS)
    return (f"DDP bucket timeline to scale with the course's numbers and {DDP_BUCKETS} buckets: each bucket's "
            f"all-reduce starts when its backward ends; {exposed * 1e3:.4g} ms remain after backward, the last "
            f"bucket's transfer plus every call's overhead.")


# --- the overhead curve (solutions only) --------------------------------------------------------------

def _draw_overhead(cfg, to_scale: bool):
    plt = pyplot()
    import numpy as np
    from matplotlib.ticker import FuncFormatter, NullFormatter
    from shardlab.reference.derivation import sci
    b, w = cfg.buckets, worked(ref.worked, cfg)
    s, bw, o = b.model_bytes, b.bandwidth, b.call_overhead_seconds
    best = w["n_opt"].value      # sqrt(s / (w·o)), or one bucket when that falls below one (a degenerate course)
    n = np.logspace(0, math.log10(max(best, 1.0) * 30), 300)
    cost = np.array([ref.ddp_overhead_seconds(s, bw, o, float(k)) for k in n])
    fig, ax = plt.subplots(figsize=(7.6, 4.3), dpi=DPI)
    fig.subplots_adjust(left=0.11, right=0.97, top=0.92, bottom=0.33)
    ax.plot(n, cost, color=COMM, lw=2.2, label="overhead n_b·o + s / (n_b·w)")
    ax.plot(n, n * o, ls=":", color="gray", label="calls' overhead n_b·o")
    ax.plot(n, s / (n * bw), ls="--", color="gray", label="exposed transfer s / (n_b·w)")
    ax.plot([1], [w["overhead_one"].value], "s", color=COMPUTE, ms=7,
            label=f"one bucket: {w['overhead_one'].shown}")
    best_cost = ref.ddp_overhead_seconds(s, bw, o, best)
    ax.axvline(best, color=EXPOSED, lw=0.8, ls="-.")
    ax.plot([best], [best_cost], "o", color=EXPOSED, ms=8, gid="optimum",
            label=f"optimum: {w['n_opt'].shown} of {w['b_opt'].shown},\noverhead {w['overhead_opt'].shown}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")        # no mathtext: plain labels draw faster
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(labelsize=8)
    ax.set_xlabel("number of buckets n_b", fontsize=9)
    ax.set_ylabel("overhead per step (s)", fontsize=9)
    ax.set_title(f"s = {s:,} bytes, w = {sci(bw)} bytes/s, o = {o * 1e6:g} µs", fontsize=9.5, loc="left")
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    ax.legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    return fig


def _overhead_alt(cfg) -> str:
    w, b = worked(ref.worked, cfg), cfg.buckets
    below_one = ref.optimal_num_buckets(b.model_bytes, b.bandwidth, b.call_overhead_seconds) < 1   # a degenerate course
    return (f"DDP overhead against the number of buckets, log-log, for the course's numbers: "
            f"{w['overhead_one'].shown} with one bucket, lowest at {w['n_opt'].shown} "
            f"({w['b_opt'].shown} each) with {w['overhead_opt'].shown}, "
            + ("since the calls' overhead exceeds the exposed transfer at every number of buckets."
               if below_one else "where the calls' overhead equals the exposed transfer."))


FIGURES = (
    Diagram("ddp_buckets",
            "DDP with buckets: each bucket's all-reduce starts as soon as backward has produced its gradients, "
            "so the transfers overlap the backward pass; every call pays its overhead, and what has not "
            "finished when backward ends is exposed.",
            _ddp_alt, _draw_ddp),
    Diagram("bucket_overhead", None, _overhead_alt, _draw_overhead),     # solutions only
)
