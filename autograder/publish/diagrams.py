"""The handout's teaching figures (matplotlib, Agg), each in two versions:
schematic for students (no number, no scaled axis to read an answer off:
bars are in made-up proportions and the time axis has no ticks), to scale
with the course's numbers for the solutions (every number from the
reference: its worked answers, `questions.answer_key`, or its functions).

- `fsdp_timeline`: one unit's forward while the next unit's all-gather runs;
  when the gather takes longer, every forward waits (the exposed gap);
- `mesh`: the X × Y mesh, one X group and one Y group outlined, and the
  collectives of one block on the axis each runs over;
- `ddp_buckets`: backward per bucket, each bucket's all-reduce (its call's
  overhead, then its transfer) starting when its gradients are ready; what
  is left after backward is exposed;
- `bucket_overhead` (solutions only): n_b·o + s/(n_b·w) against n_b, with
  the reference's optimum;
- `pipeline_schedules`: GPipe above 1F1B, each stage's forwards, backwards
  and idle time (questions/pipeline/figures.py).

`DIAGRAMS` is the registry: name, the students' alt text (None: solutions
only), the solutions' alt text (from the config) and `draw(cfg, to_scale)`;
a schematic takes nothing from the config (it is drawn with cfg = None).
Templates place a figure with `{{ figure("name") }}` (publish/render.py);
the students' files go to `figures/`, the solutions' to
`solutions-figures/`, so the folder beside a handout never holds an answer;
the notebook embeds the same PNG bytes as cell attachments
(publish/formats.py).
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

COMPUTE, COMM, OVERHEAD, EXPOSED = "#4c72b0", "#dd8452", "#8c564b", "#c44e52"
LIGHT = "#e8eef6"
DPI = 110
MESH_INCH = 0.55         # inches per chip in the mesh


@dataclass(frozen=True)
class Diagram:
    name: str
    question: str                      # the module of the question it illustrates
    student_alt: str | None            # None: solutions only
    solutions_alt: Callable            # cfg -> alt text with the course's numbers
    draw: Callable                     # (cfg, to_scale) -> matplotlib Figure


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


@lru_cache(maxsize=8)
def _answer_key(cfg) -> dict:
    from shardlab.autograder.questions import answer_key
    return answer_key(cfg)


def _worked(cfg, number: int) -> dict:
    return _answer_key(cfg)[str(number)]


def _fits(ax, text: str, length: float, span: float, fontsize: float) -> bool:
    """Whether `text` fits inside a bar `length` long on an axis `span` long."""
    width_pt = ax.get_position().width * ax.figure.get_figwidth() * 72 * length / span
    return width_pt > 0.62 * fontsize * len(text) + 4


def _bars(ax, row: float, spans, color, span: float, label=None, hatch=None, fontsize=8.5, height=0.7):
    """Bars on one row; spans are (start, length, [labels, longest first]). Every bar of the row shows
    its labels' first form that fits in all of them (the same words along a row), or none."""
    forms = min((len(texts) for _, _, texts in spans), default=0)
    form = next((k for k in range(forms)
                 if all(_fits(ax, texts[k], length, span, fontsize) for _, length, texts in spans)), None)
    for k, (start, length, texts) in enumerate(spans):
        ax.broken_barh([(start, length)], (row - height / 2, height), facecolors=color, edgecolor="white",
                       hatch=hatch, label=label if k == 0 else None, linewidth=1)
        if form is not None:
            box = dict(boxstyle="round,pad=0.15", facecolor=color, edgecolor="none") if hatch else None
            ax.text(start + length / 2, row, texts[form], ha="center", va="center", color="white",
                    fontsize=fontsize, bbox=box)


def _timeline_axes(ax, rows: list[str], to_scale: bool, unit: str = "ms"):
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if to_scale:
        ax.set_xlabel(f"time ({unit})", fontsize=8.5)
        ax.tick_params(axis="x", labelsize=8)
    else:
        ax.set_xticks([])
        ax.set_xlabel("time →", fontsize=9)


def _legend(fig, axes, top: float):
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    fig.legend([handles[lab] for lab in labels], labels, loc="upper center", ncol=len(labels), fontsize=8.5,
               frameon=False, bbox_to_anchor=(0.5, top))


# --- FSDP: one unit's forward, the next unit's all-gather -------------------------------------------

def _fsdp_schedule(forward: float, gather: float, units: int = 4):
    """(gathers, forwards, gaps): unit i+1's all-gather starts with unit i's forward (one link, one
    gather at a time); a forward starts when its unit is gathered and the previous forward is done."""
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


def _fsdp_cases(cfg, to_scale: bool):
    """(title, forward, all-gather) per panel, seconds when to scale."""
    if not to_scale:
        return [("the all-gather takes less time than the forward: hidden", 1.0, 0.6),
                ("the all-gather takes longer than the forward: every forward waits (exposed)", 1.0, 1.5)]
    w, f = _worked(cfg, 2), cfg.fsdp
    return [(f"within a node (p = {f.intra_devices}): forward {w['forward'].shown}, all-gather "
             f"{w['allgather_intra'].shown}", w["forward"].value, w["allgather_intra"].value),
            (f"across nodes (p = {f.inter_devices}): forward {w['forward'].shown}, all-gather "
             f"{w['allgather_inter'].shown}", w["forward"].value, w["allgather_inter"].value)]


def _draw_fsdp(cfg, to_scale: bool):
    plt = _plt()
    cases = _fsdp_cases(cfg, to_scale)
    scale = 1e3 if to_scale else 1.0
    schedules = [_fsdp_schedule(fwd, ag) for _, fwd, ag in cases]
    span = max(fw[-1][0] + fw[-1][1] for _, fw, _ in schedules) * scale
    fig, axes = plt.subplots(len(cases), 1, figsize=(8.4, 4.3), dpi=DPI, sharex=True)
    fig.subplots_adjust(left=0.15, right=0.98, top=0.86, bottom=0.1, hspace=0.45)
    for ax, (title, forward, gather), (gathers, forwards, gaps) in zip(axes, cases, schedules):
        ax.set_xlim(-0.01 * span, 1.01 * span)
        _timeline_axes(ax, ["compute", "communication"], to_scale)
        _bars(ax, 1, [(s * scale, d * scale, [f"all-gather {i + 1}", f"gather {i + 1}", f"{i + 1}"])
                      for i, (s, d) in enumerate(gathers)], COMM, span, "all-gather of unit i")
        _bars(ax, 0, [(s * scale, d * scale, [f"forward {i + 1}", f"fwd {i + 1}", f"{i + 1}"])
                      for i, (s, d) in enumerate(forwards)], COMPUTE, span, "forward of unit i")
        wait = [f"waits {(gather - forward) * 1e3:.3g} ms", "waits"] if to_scale else ["waits"]
        _bars(ax, 0, [(s * scale, d * scale, wait) for s, d in gaps], EXPOSED, span,
              "waiting for the all-gather (exposed)", "//")
        ax.set_title(title, fontsize=9.5, loc="left")
    for ax in axes[:-1]:
        ax.set_xlabel("")
    if not to_scale:
        axes[-1].set_xlabel("time →  (unit i + 1's all-gather runs during unit i's forward)", fontsize=9)
    _legend(fig, axes, 1.0)
    return fig


def _fsdp_alt(cfg) -> str:
    w, f = _worked(cfg, 2), cfg.fsdp
    return (f"FSDP timeline to scale, one layer of {cfg.model.name} as the unit: its forward takes "
            f"{w['forward'].shown}. Within a node (p = {f.intra_devices}) the next unit's all-gather takes "
            f"{w['allgather_intra'].shown}; across nodes (p = {f.inter_devices}) it takes "
            f"{w['allgather_inter'].shown}. When the all-gather is longer, every forward waits for it.")


# --- the X × Y mesh -------------------------------------------------------------------------------

_X_COLLECTIVES = [("allgather_w_in", "all-gather W_in[D_X, F_Y] → W_in[D, F_Y]"),
                  ("allgather_w_out", "all-gather W_out[F_Y, D_X] → W_out[F_Y, D]")]
_Y_COLLECTIVES = [("allgather_in", "all-gather In[B_X, D_Y] → In[B_X, D]"),
                  ("reducescatter_out", "reduce-scatter Out[B_X, D] → Out[B_X, D_Y]")]


def _draw_mesh(cfg, to_scale: bool):
    plt = _plt()
    from matplotlib.patches import FancyArrowPatch, Rectangle
    x, y = (cfg.mesh.x, cfg.mesh.y) if to_scale else (5, 4)
    rows, cols = min(x, 6), min(y, 6)
    volumes = _worked(cfg, 3).get("volumes") if to_scale else None   # absent when no batch is compute bound
    left, right = -0.2, cols + 7.0
    bottom, top = -rows + (0.2 if rows < x else 0.8), 3.6 if volumes is not None else 2.9
    fig, ax = plt.subplots(figsize=(MESH_INCH * (right - left), MESH_INCH * (top - bottom)), dpi=DPI)
    fig.subplots_adjust(left=0, right=1, top=1, bottom=0)
    for r in range(rows):                       # row r: X coordinate r; column c: Y coordinate c
        for c in range(cols):
            ax.add_patch(Rectangle((c + 0.1, -r + 0.1), 0.8, 0.8, facecolor=LIGHT, edgecolor="#7f8fa6", lw=1))
    if rows < x:
        ax.text(cols / 2, -rows + 0.55, "⋮", ha="center", va="center", fontsize=16, color="#555555")
    if cols < y:
        ax.text(cols + 0.25, 0.5, "⋯", ha="center", va="center", fontsize=16, color="#555555")
    # one Y group (same X coordinate: a row) and one X group (same Y coordinate: a column)
    ax.add_patch(Rectangle((0.02, 0.02), cols - 0.04, 0.96, fill=False, edgecolor=COMM, lw=2.2, ls="--"))
    ax.add_patch(Rectangle((cols - 0.98, -rows + 1.02), 0.96, rows - 0.04, fill=False, edgecolor=COMPUTE,
                           lw=2.2, ls="--"))
    ax.add_patch(FancyArrowPatch((0, 1.35), (cols, 1.35), arrowstyle="<|-|>", mutation_scale=14, color=COMM,
                                 lw=1.6))
    ax.add_patch(FancyArrowPatch((cols + 0.55, 1), (cols + 0.55, -rows + 1), arrowstyle="<|-|>",
                                 mutation_scale=14, color=COMPUTE, lw=1.6))

    def block(collectives, head):
        lines = [head]
        for key, text in collectives:
            lines.append("  " + text)
            if volumes is not None:
                lines.append(f"      {volumes.value[key]:,} bytes per chip")
        return "\n".join(lines)
    y_head = "Y: tensor parallel, " + (f"{y} chips per row, M_Y = {cfg.mesh.m_y}" if to_scale else
                                       "a collective over Y spans a row (dashed)")
    x_head = "X: FSDP / data, " + (f"{x} chips per column, M_X = {cfg.mesh.m_x}" if to_scale else
                                   "a collective over X\nspans a column (dashed)")
    ax.text(0, 1.6, block(_Y_COLLECTIVES, y_head), va="bottom", ha="left", fontsize=9.5, color=COMM,
            linespacing=1.35)
    ax.text(cols + 0.85, 1, block(_X_COLLECTIVES, x_head), va="top", ha="left", fontsize=9.5, color=COMPUTE,
            linespacing=1.35)
    if to_scale:
        note = [f"X × Y = {x} × {y} = {cfg.mesh.n} {cfg.mesh.device.name} chips"
                + (f" (drawn: {rows} × {cols})" if (rows, cols) != (x, y) else "")]
        if volumes is not None:
            note.append(f"bytes per chip for one block's forward\nat {_worked(cfg, 3)['whole'].shown}")
        ax.text(cols + 0.85, -rows + 1, "\n".join(note), va="bottom", ha="left", fontsize=8.5, color="#333333")
    else:
        ax.text(cols + 0.85, -rows + 1, "each square: one chip", va="bottom", ha="left", fontsize=9,
                color="#555555")
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, top)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.axis("off")
    return fig


def _mesh_alt(cfg) -> str:
    m = cfg.mesh
    alt = (f"The course's {m.x} by {m.y} mesh of {m.device.name} chips: the weight shards W_in and W_out are "
           f"all-gathered along X (FSDP), the input In is all-gathered and the output Out reduce-scattered "
           f"along Y (tensor parallel).")
    volumes = _worked(cfg, 3).get("volumes")
    if volumes is not None:
        alt += f" Bytes per chip for one block's forward: {volumes.shown}."
    return alt


# --- DDP buckets --------------------------------------------------------------------------------------

def _ddp_schedule(n_b: int, transfer: float, overhead: float):
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
    plt = _plt()
    from shardlab.reference import buckets as ref
    from shardlab.reference.derivation import sci
    n_b = DDP_BUCKETS
    if to_scale:
        b = cfg.buckets
        overhead = b.call_overhead
        transfer = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, 0.0, n_b)    # s / (n_b · w)
        exposed = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, b.call_overhead, n_b)
        scale = 1e3
    else:
        transfer, overhead, exposed, scale = 1.0, 0.3, None, 1.0
    compute, comms, end = _ddp_schedule(n_b, transfer, overhead)
    tail = comms[-1][0] + comms[-1][1]
    if exposed is not None and not math.isclose(tail - end, exposed, rel_tol=1e-9):
        raise AssertionError(f"the DDP timeline's tail {tail - end} is not the reference's overhead {exposed}")
    span = tail * scale
    fig, ax = plt.subplots(figsize=(8.4, 3.1 if to_scale else 2.9), dpi=DPI)
    fig.subplots_adjust(left=0.12, right=0.98, top=0.7 if to_scale else 0.8, bottom=0.15)
    ax.set_xlim(-0.01 * span, 1.01 * span)
    _timeline_axes(ax, ["backward", "all-reduce"], to_scale)
    _bars(ax, 0, [(s * scale, d * scale, [f"bucket {k + 1}", f"{k + 1}"]) for k, (s, d) in enumerate(compute)],
          COMPUTE, span, "backward of bucket k")
    _bars(ax, 1, [(s * scale, overhead * scale, []) for s, _ in comms], OVERHEAD, span, "call overhead o")
    _bars(ax, 1, [((s + overhead) * scale, (d - overhead) * scale, [f"transfer {k + 1}", f"{k + 1}"])
                  for k, (s, d) in enumerate(comms)], COMM, span, "transfer of bucket k")
    ax.axvspan(end * scale, span, color=EXPOSED, alpha=0.13, lw=0)
    ax.annotate("", (end * scale, 1.55), (span, 1.55), arrowprops=dict(arrowstyle="<|-|>", color=EXPOSED, lw=1.4),
                annotation_clip=False)
    text = (f"exposed: {exposed * 1e3:.4g} ms" if to_scale else "exposed after backward")
    ax.text((end * scale + span) / 2, 1.68, text, ha="center", va="bottom", fontsize=9, color=EXPOSED,
            fontweight="bold")
    ax.set_ylim(-0.6, 1.95)
    if to_scale:
        ax.set_title(f"s = {b.model_bytes:,} bytes in {n_b} buckets, w = {sci(b.bandwidth)} bytes/s, "
                     f"o = {b.call_overhead * 1e6:g} µs\n"
                     "(the cost model: a bucket's backward takes as long as its transfer)",
                     fontsize=9, loc="left", pad=14)
    _legend(fig, [ax], 1.0)
    return fig


def _ddp_alt(cfg) -> str:
    from shardlab.reference import buckets as ref
    b = cfg.buckets
    exposed = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, b.call_overhead, DDP_BUCKETS)
    return (f"DDP bucket timeline to scale with the course's numbers and {DDP_BUCKETS} buckets: each bucket's "
            f"all-reduce starts when its backward ends; {exposed * 1e3:.4g} ms remain after backward, the last "
            f"bucket's transfer plus every call's overhead.")


# --- the overhead curve (solutions only) --------------------------------------------------------------

def _draw_overhead(cfg, to_scale: bool):
    plt = _plt()
    import numpy as np
    from matplotlib.ticker import FuncFormatter, NullFormatter
    from shardlab.reference import buckets as ref
    from shardlab.reference.derivation import sci
    b, w = cfg.buckets, _worked(cfg, 4)
    s, bw, o = b.model_bytes, b.bandwidth, b.call_overhead
    best = ref.optimal_num_buckets(s, bw, o)
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
    w = _worked(cfg, 4)
    return (f"DDP overhead against the number of buckets, log-log, for the course's numbers: "
            f"{w['overhead_one'].shown} with one bucket, lowest at {w['n_opt'].shown} "
            f"({w['b_opt'].shown} each) with {w['overhead_opt'].shown}, where the calls' overhead equals the "
            f"exposed transfer.")


# --- pipeline schedules (questions/pipeline/figures.py) ------------------------------------------------

PIPELINE_DRAWN = (4, 8)          # the students' schematic: p stages, m micro-batches


def _draw_pipeline(cfg, to_scale: bool):
    from shardlab.autograder.questions.pipeline import figures as pipeline_figure
    if not to_scale:
        return pipeline_figure.draw(*PIPELINE_DRAWN, 1.0, 2.0, False)
    w, pipe = _worked(cfg, 5), cfg.pipeline
    t_f = w["t_f"].value
    titles = {"afab": f"GPipe, p = {pipe.stages}, m = {pipe.microbatches}: step {w['step'].shown}, bubble "
                      f"fraction {w['fraction'].shown}\nstage 0 holds {w['act_gpipe_first'].shown}",
              "1f1b": f"1F1B: the same step and bubble\nstage 0 holds {w['act_1f1b_first'].shown}"}
    return pipeline_figure.draw(pipe.stages, pipe.microbatches, t_f, 2 * t_f, True, titles)


def _pipeline_alt(cfg) -> str:
    w, pipe = _worked(cfg, 5), cfg.pipeline
    return (f"GPipe and 1F1B schedules to scale for the course's {pipe.stages} stages and {pipe.microbatches} "
            f"micro-batches (t_f = {w['t_f'].shown}, t_b = 2 t_f): both steps take {w['step'].shown} with a "
            f"bubble fraction of {w['fraction'].shown}; stage 0 holds {w['act_gpipe_first'].shown} under GPipe "
            f"and {w['act_1f1b_first'].shown} under 1F1B.")


DIAGRAMS = {d.name: d for d in (
    Diagram("fsdp_timeline", "fsdp",
            "FSDP timeline: while one unit computes its forward, the next unit's all-gather runs; when the "
            "all-gather takes longer than the forward, the next forward waits and the gap is exposed.",
            _fsdp_alt, _draw_fsdp),
    Diagram("mesh", "comm4d",
            "An X by Y mesh of chips: the weight shards are all-gathered along X (the FSDP axis, one column of "
            "chips); the input is all-gathered and the output reduce-scattered along Y (the tensor-parallel "
            "axis, one row of chips).",
            _mesh_alt, _draw_mesh),
    Diagram("ddp_buckets", "buckets",
            "DDP with buckets: each bucket's all-reduce starts as soon as backward has produced its gradients, "
            "so the transfers overlap the backward pass; every call pays its overhead, and what has not "
            "finished when backward ends is exposed.",
            _ddp_alt, _draw_ddp),
    Diagram("bucket_overhead", "buckets", None, _overhead_alt, _draw_overhead),
    Diagram("pipeline_schedules", "pipeline",
            "Pipeline schedules, one row per stage: GPipe runs every micro-batch's forward, then every "
            "backward; 1F1B runs a few warm-up forwards, then alternates one forward and one backward, then "
            "drains the remaining backwards. The grey slots are the idle time of each stage.",
            _pipeline_alt, _draw_pipeline),
)}


def diagram_png(cfg, name: str, to_scale: bool) -> bytes:
    """The PNG bytes of a diagram: to scale, drawn once per config; schematic, once (it takes nothing
    from the config, so every student's handout of a roster shares it)."""
    return _png(cfg if to_scale else None, name, to_scale)


@lru_cache(maxsize=64)
def _png(cfg, name: str, to_scale: bool) -> bytes:
    plt = _plt()
    fig = DIAGRAMS[name].draw(cfg, to_scale)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})     # one draw: the margins are set by hand
    plt.close(fig)
    return buf.getvalue()


def figure_file(name: str, solutions: bool) -> str:
    """Where a document finds its figure, relative to the document: the solutions' in a folder of
    their own, so that `figures/` beside a handout holds nothing but the students' figures."""
    return f"{'solutions-figures' if solutions else 'figures'}/{name}.png"


def document_figures(cfg, solutions: bool) -> dict[str, tuple[str, str, bytes]]:
    """{name: (relative path, alt text, PNG bytes)} of one document's diagrams (the course's questions')."""
    from shardlab.autograder.questions import questions
    chosen = {q.module for q in questions(cfg)}
    out = {}
    for d in DIAGRAMS.values():
        if d.question not in chosen:
            continue
        if solutions:
            out[d.name] = (figure_file(d.name, True), d.solutions_alt(cfg), diagram_png(cfg, d.name, True))
        elif d.student_alt:
            out[d.name] = (figure_file(d.name, False), d.student_alt, diagram_png(cfg, d.name, False))
    return out
