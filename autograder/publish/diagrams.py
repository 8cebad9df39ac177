"""The handout's teaching figures (matplotlib, Agg), each in two versions:
schematic for students (no numbers, no scaled axis to read an answer off),
to scale with the course's numbers for the solutions (every number from the
reference's worked answers, `questions.answer_key`).

- `fsdp_timeline`: one unit's forward while the next unit's all-gather runs;
  when the gather takes longer, the forward waits (the exposed gap);
- `mesh`: the X × Y mesh and the axis each collective of one block runs over;
- `ddp_buckets`: backward per bucket, each bucket's all-reduce starting when
  its gradients are ready, only the last transfer (and every call's overhead)
  exposed after backward;
- `bucket_overhead` (solutions only): n_b·o + s/(n_b·w) against n_b, with
  the reference's optimum.

Templates place a figure with `{{ figure("name") }}` (publish/render.py); the
notebook embeds the same PNG bytes as a cell attachment (publish/formats.py).
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

COMPUTE, COMM, EXPOSED = "#4c72b0", "#dd8452", "#c44e52"


@dataclass(frozen=True)
class Diagram:
    name: str
    student_alt: str | None            # None: solutions only
    solutions_alt: Callable            # cfg -> alt text with the course's numbers
    draw: Callable                     # (cfg, to_scale) -> matplotlib Figure


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _worked(cfg, number: int) -> dict:
    from shardlab.autograder.questions import answer_key
    return answer_key(cfg)[str(number)]


def _bars(ax, row: float, spans, color, label=None, hatch=None):
    for k, (start, length, text) in enumerate(spans):
        ax.broken_barh([(start, length)], (row - 0.35, 0.7), facecolors=color, edgecolor="white", hatch=hatch,
                       label=label if k == 0 else None)
        if text:
            ax.text(start + length / 2, row, text, ha="center", va="center", color="white", fontsize=8)


def _fsdp_schedule(forward: float, gather: float, units: int = 4):
    """(gathers, forwards, gaps): the next unit's gather starts with this unit's forward (one link)."""
    gathers, forwards, gaps = [(0.0, gather)], [], []
    for i in range(units):
        ready = gathers[i][0] + gathers[i][1]
        start = max(ready, forwards[-1][0] + forwards[-1][1] if forwards else 0.0)
        if forwards and start > forwards[-1][0] + forwards[-1][1]:
            gaps.append((forwards[-1][0] + forwards[-1][1], start - forwards[-1][0] - forwards[-1][1]))
        forwards.append((start, forward))
        if i + 1 < units:
            gathers.append((max(start, ready), gather))
    return gathers, forwards, gaps


def _draw_fsdp(cfg, to_scale: bool):
    plt = _plt()
    if to_scale:
        w = _worked(cfg, 2)
        cases = [(f"within a node (p = {cfg.fsdp.intra_devices})", w["forward"].value, w["allgather_intra"].value),
                 (f"across nodes (p = {cfg.fsdp.inter_devices})", w["forward"].value, w["allgather_inter"].value)]
    else:
        cases = [("the all-gather is shorter: hidden", 1.0, 0.6), ("the all-gather is longer: exposed", 1.0, 1.5)]
    fig, axes = plt.subplots(len(cases), 1, figsize=(8, 1.9 * len(cases)), dpi=110)
    for ax, (title, forward, gather) in zip(axes, cases):
        gathers, forwards, gaps = _fsdp_schedule(forward, gather)
        scale, unit = (1e3, " ms") if to_scale else (1.0, "")
        _bars(ax, 1, [(s * scale, d * scale, f"gather {i + 1}") for i, (s, d) in enumerate(gathers)], COMM,
              "all-gather")
        _bars(ax, 0, [(s * scale, d * scale, f"fwd {i + 1}") for i, (s, d) in enumerate(forwards)], COMPUTE,
              "forward")
        _bars(ax, 0, [(s * scale, d * scale, "") for s, d in gaps], EXPOSED, "waiting (exposed)", "//")
        ax.set_yticks([0, 1], ["compute", "communication"])
        ax.set_title(title, fontsize=9, loc="left")
        if to_scale:
            ax.set_xlabel("time (ms)", fontsize=8)
        else:
            ax.set_xticks([])
            ax.set_xlabel("time →", fontsize=8)
    for ax in axes:
        ax.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    return fig


def _draw_mesh(cfg, to_scale: bool):
    plt = _plt()
    from matplotlib.patches import FancyArrowPatch
    x, y = (cfg.mesh.x, cfg.mesh.y) if to_scale else (4, 4)
    rows, cols = min(x, 6), min(y, 6)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(plt.Rectangle((c, -r), 0.8, 0.8, facecolor="#dfe7f2", edgecolor="#4c72b0"))
    ax.add_patch(FancyArrowPatch((0, 1.2), (cols - 0.2, 1.2), arrowstyle="<->", mutation_scale=12, color=COMM))
    ax.text(cols / 2 - 0.1, 1.45, "Y (tensor parallel): all-gather In, reduce-scatter Out", ha="center",
            fontsize=9, color=COMM)
    ax.add_patch(FancyArrowPatch((-0.4, 0.8), (-0.4, -rows + 1), arrowstyle="<->", mutation_scale=12,
                                 color=COMPUTE))
    ax.text(-0.6, -rows / 2 + 0.9, "X (FSDP / data):\nall-gather W_in, W_out", ha="right", va="center",
            fontsize=9, color=COMPUTE)
    if to_scale:
        lines = [f"X × Y = {x} × {y} chips (drawn up to 6 × 6)"]
        volumes = _worked(cfg, 3).get("volumes")      # absent when no batch is compute bound
        if volumes is not None:
            lines += ["bytes per chip, one block's forward:"] + [f"  {k}: {v:,}" for k, v in volumes.value.items()]
        ax.text(cols + 0.3, 0.5, "\n".join(lines), va="top", fontsize=8, family="monospace")
    ax.set_xlim(-3.2, cols + (5.5 if to_scale else 0.5))
    ax.set_ylim(-rows, 2)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig


def _ddp_schedule(n_b: int, transfer: float, overhead: float):
    """(compute, comms, backward_end): bucket k's backward takes `transfer`; its
    all-reduce starts when its gradients are ready and the link is free."""
    compute = [(k * transfer, transfer) for k in range(n_b)]
    comms, free = [], 0.0
    for start, length in compute:
        begin = max(start + length, free)
        comms.append((begin, overhead + transfer))
        free = begin + overhead + transfer
    return compute, comms, compute[-1][0] + compute[-1][1]


def _draw_ddp(cfg, to_scale: bool):
    plt = _plt()
    b = cfg.buckets
    n_b = 4
    if to_scale:
        transfer, overhead, scale, unit = b.model_bytes / n_b / b.bandwidth, b.call_overhead, 1e3, "ms"
    else:
        transfer, overhead, scale, unit = 1.0, 0.25, 1.0, ""
    compute, comms, end = _ddp_schedule(n_b, transfer, overhead)
    fig, ax = plt.subplots(figsize=(8, 2.2), dpi=110)
    _bars(ax, 0, [(s * scale, d * scale, f"bwd bucket {k + 1}") for k, (s, d) in enumerate(compute)], COMPUTE,
          "backward (per bucket)")
    _bars(ax, 1, [(s * scale, d * scale, f"all-reduce {k + 1}") for k, (s, d) in enumerate(comms)], COMM,
          "all-reduce (overhead o + transfer)")
    tail_end = comms[-1][0] + comms[-1][1]
    _bars(ax, 2, [(end * scale, (tail_end - end) * scale, "exposed")], EXPOSED, "after backward (exposed)", "//")
    ax.set_yticks([0, 1, 2], ["compute", "communication", "step waits"])
    if to_scale:
        ax.set_xlabel(f"time ({unit}); s = {b.model_bytes:,} bytes in {n_b} buckets", fontsize=8)
    else:
        ax.set_xticks([])
        ax.set_xlabel("time →", fontsize=8)
    ax.legend(loc="upper left", fontsize=7, ncol=3, bbox_to_anchor=(0, 1.35))
    fig.tight_layout()
    return fig


def _draw_overhead(cfg, to_scale: bool):
    plt = _plt()
    import numpy as np
    from shardlab.reference import buckets as ref
    b = cfg.buckets
    n = np.logspace(0, 3, 300)
    cost = [ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, b.call_overhead, float(k)) for k in n]
    best = ref.optimal_num_buckets(b.model_bytes, b.bandwidth, b.call_overhead)
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=110)
    ax.plot(n, np.array(cost) * 1e3, color=COMM, label="n_b · o + s / (n_b · w)")
    ax.plot(n, n * b.call_overhead * 1e3, ls=":", color="gray", label="calls' overhead n_b · o")
    ax.plot(n, b.model_bytes / (n * b.bandwidth) * 1e3, ls="--", color="gray", label="exposed transfer s / (n_b · w)")
    best_cost = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, b.call_overhead, best)
    ax.plot([best], [best_cost * 1e3], "o", color=EXPOSED,
            label=f"optimum: {best:.1f} buckets, {best_cost * 1e3:.3g} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of buckets n_b")
    ax.set_ylabel("overhead per step (ms)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


DIAGRAMS = {d.name: d for d in (
    Diagram("fsdp_timeline",
            "FSDP timeline: while one unit computes its forward, the next unit's all-gather runs; when the "
            "all-gather takes longer than the forward, the next forward waits and the gap is exposed.",
            lambda cfg: "FSDP timeline to scale for one layer of the course model: within a node the all-gather "
                        "hides behind the forward; across nodes every forward waits for its gather.",
            _draw_fsdp),
    Diagram("mesh",
            "An X by Y mesh of chips: the weight shards are all-gathered along X (the FSDP axis); the input is "
            "all-gathered and the output reduce-scattered along Y (the tensor-parallel axis).",
            lambda cfg: f"The course's {cfg.mesh.x} by {cfg.mesh.y} mesh with the axis of each collective and "
                        "the bytes each chip moves in one block's forward.",
            _draw_mesh),
    Diagram("ddp_buckets",
            "DDP with buckets: each bucket's all-reduce starts as soon as backward has produced its gradients, "
            "so all transfers but the last overlap the backward pass; only the last one and the calls' "
            "overheads remain after it.",
            lambda cfg: "DDP bucket timeline to scale for the course's numbers with 4 buckets: the exposed "
                        "tail after backward is the last transfer plus the calls' overheads.",
            _draw_ddp),
    Diagram("bucket_overhead", None,
            lambda cfg: "DDP overhead against the number of buckets for the course's numbers, with the optimum "
                        "where the calls' overhead equals the exposed transfer.",
            _draw_overhead),
)}


@lru_cache(maxsize=64)
def diagram_png(cfg, name: str, to_scale: bool) -> bytes:
    """The PNG bytes of a diagram (drawn once per config and version)."""
    plt = _plt()
    fig = DIAGRAMS[name].draw(cfg, to_scale)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def figure_file(name: str, solutions: bool) -> str:
    """Where a document finds its figure, relative to the document."""
    return f"figures/{'solutions-' if solutions else ''}{name}.png"


def document_figures(cfg, solutions: bool) -> dict[str, tuple[str, str, bytes]]:
    """{name: (relative path, alt text, PNG bytes)} of one document's diagrams."""
    out = {}
    for d in DIAGRAMS.values():
        if solutions:
            out[d.name] = (figure_file(d.name, True), d.solutions_alt(cfg), diagram_png(cfg, d.name, True))
        elif d.student_alt:
            out[d.name] = (figure_file(d.name, False), d.student_alt, diagram_png(cfg, d.name, False))
    return out
