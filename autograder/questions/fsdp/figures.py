"""Question 2's figure: one unit's forward against the next unit's all-gather; when the gather
takes longer, every forward waits (the exposed gap).

Schematic for students, to scale for the solutions (`core.drawing`).
"""
from __future__ import annotations


from shardlab.autograder.core.drawing import (COMM, COMPUTE, DPI, Diagram, EXPOSED, bars,
                                              legend, pyplot, timeline_axes, worked)
from shardlab.reference import fsdp as ref


def fsdp_schedule(forward: float, gather: float, units: int = 4):
    """(gathers, forwards, gaps): unit i+1's all-gather starts with unit i's forward (one link, one
    gather at a time); a forward starts when its unit is gathered and the previous forward is done."""
    gathers = [(0.0, gather)]
    forwards: list[tuple[float, float]] = []
    gaps: list[tuple[float, float]] = []
    for i in range(units):
        ready = gathers[i][0] + gathers[i][1]
        start = max(ready, forwards[-1][0] + forwards[-1][1] if forwards else 0.0)
        if forwards and start > forwards[-1][0] + forwards[-1][1]:
            gaps.append((forwards[-1][0] + forwards[-1][1], start - forwards[-1][0] - forwards[-1][1]))
        forwards.append((start, forward))
        if i + 1 < units:
            gathers.append((max(start, ready), gather))
    return gathers, forwards, gaps


def _fsdp_cases(cfg, to_scale: bool):
    """(title, forward, all-gather) per panel, seconds when to scale."""
    if not to_scale:
        return [("the all-gather takes less time than the forward: hidden", 1.0, 0.6),
                ("the all-gather takes longer than the forward: every forward waits (exposed)", 1.0, 1.5)]
    w, f = worked(ref.worked, cfg), cfg.fsdp
    return [(f"within a node (p = {f.intra_devices}): forward {w['forward'].shown}, all-gather "
             f"{w['allgather_intra'].shown}", w["forward"].value, w["allgather_intra"].value),
            (f"across nodes (p = {f.inter_devices}): forward {w['forward'].shown}, all-gather "
             f"{w['allgather_inter'].shown}", w["forward"].value, w["allgather_inter"].value)]


def _draw_fsdp(cfg, to_scale: bool):
    plt = pyplot()
    cases = _fsdp_cases(cfg, to_scale)
    scale = 1e3 if to_scale else 1.0
    schedules = [fsdp_schedule(fwd, ag) for _, fwd, ag in cases]
    span = max(fw[-1][0] + fw[-1][1] for _, fw, _ in schedules) * scale
    fig, axes = plt.subplots(len(cases), 1, figsize=(8.4, 4.3), dpi=DPI, sharex=True)
    fig.subplots_adjust(left=0.15, right=0.98, top=0.86, bottom=0.1, hspace=0.45)
    for ax, (title, forward, gather), (gathers, forwards, gaps) in zip(axes, cases, schedules):
        ax.set_xlim(-0.01 * span, 1.01 * span)
        timeline_axes(ax, ["compute", "communication"], to_scale)
        bars(ax, 1, [(s * scale, d * scale, [f"all-gather {i + 1}", f"gather {i + 1}", f"{i + 1}"])
                      for i, (s, d) in enumerate(gathers)], COMM, span, "all-gather of unit i")
        bars(ax, 0, [(s * scale, d * scale, [f"forward {i + 1}", f"fwd {i + 1}", f"{i + 1}"])
                      for i, (s, d) in enumerate(forwards)], COMPUTE, span, "forward of unit i")
        wait = [f"waits {(gather - forward) * 1e3:.3g} ms", "waits"] if to_scale else ["waits"]
        bars(ax, 0, [(s * scale, d * scale, wait) for s, d in gaps], EXPOSED, span,
              "waiting for the all-gather (exposed)", "//")
        ax.set_title(title, fontsize=9.5, loc="left")
    for ax in axes[:-1]:
        ax.set_xlabel("")
    if not to_scale:
        axes[-1].set_xlabel("time →  (unit i + 1's all-gather runs during unit i's forward)", fontsize=9)
    legend(fig, axes, 1.0)
    return fig


def _fsdp_alt(cfg) -> str:
    w, f = worked(ref.worked, cfg), cfg.fsdp
    return (f"FSDP timeline to scale, one layer of {cfg.model.name} as the unit: its forward takes "
            f"{w['forward'].shown}. Within a node (p = {f.intra_devices}) the next unit's all-gather takes "
            f"{w['allgather_intra'].shown}; across nodes (p = {f.inter_devices}) it takes "
            f"{w['allgather_inter'].shown}. When the all-gather is longer, every forward waits for it.")


FIGURES = (
    Diagram("fsdp_timeline",
            "FSDP timeline: while one unit computes its forward, the next unit's all-gather runs; when the "
            "all-gather takes longer than the forward, the next forward waits and the gap is exposed.",
            _fsdp_alt, _draw_fsdp),
)
