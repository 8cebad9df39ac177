"""Question 3's figure: the X × Y mesh, one X group and one Y group outlined, and the collectives
of one block on the axis each runs over.

Schematic for students, to scale for the solutions (`core.drawing`).
"""
from __future__ import annotations


from shardlab.autograder.core.drawing import COMM, COMPUTE, DPI, Diagram, LIGHT, MESH_INCH, pyplot, worked
from shardlab.reference import comm4d as ref


_X_COLLECTIVES = [("allgather_w_in", "all-gather W_in[D_X, F_Y] → W_in[D, F_Y]"),
                  ("allgather_w_out", "all-gather W_out[F_Y, D_X] → W_out[F_Y, D]")]
_Y_COLLECTIVES = [("allgather_in", "all-gather In[B_X, D_Y] → In[B_X, D]"),
                  ("reducescatter_out", "reduce-scatter Out[B_X, D] → Out[B_X, D_Y]")]


def _draw_mesh(cfg, to_scale: bool):
    plt = pyplot()
    from matplotlib.patches import FancyArrowPatch, Rectangle
    x, y = (cfg.comm4d.x, cfg.comm4d.y) if to_scale else (5, 4)
    rows, cols = min(x, 6), min(y, 6)
    volumes = worked(ref.worked, cfg).get("volumes") if to_scale else None   # absent when no batch is compute bound
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
    y_head = "Y: tensor parallel, " + (f"{y} chips per row, M_Y = {cfg.comm4d.m_y}" if to_scale else
                                       "a collective over Y spans a row (dashed)")
    x_head = "X: FSDP / data, " + (f"{x} chips per column, M_X = {cfg.comm4d.m_x}" if to_scale else
                                   "a collective over X\nspans a column (dashed)")
    ax.text(0, 1.6, block(_Y_COLLECTIVES, y_head), va="bottom", ha="left", fontsize=9.5, color=COMM,
            linespacing=1.35)
    ax.text(cols + 0.85, 1, block(_X_COLLECTIVES, x_head), va="top", ha="left", fontsize=9.5, color=COMPUTE,
            linespacing=1.35)
    if to_scale:
        note = [f"X × Y = {x} × {y} = {cfg.comm4d.n} {cfg.comm4d.device.name} chips"
                + (f" (drawn: {rows} × {cols})" if (rows, cols) != (x, y) else "")]
        if volumes is not None:
            note.append(f"bytes per chip for one block's forward\nat {worked(ref.worked, cfg)['whole'].shown}")
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
    m = cfg.comm4d
    alt = (f"The course's {m.x} by {m.y} mesh of {m.device.name} chips: the weight shards W_in and W_out are "
           f"all-gathered along X (FSDP), the input In is all-gathered and the output Out reduce-scattered "
           f"along Y (tensor parallel).")
    volumes = worked(ref.worked, cfg).get("volumes")
    if volumes is not None:
        alt += f" Bytes per chip for one block's forward: {volumes.shown}."
    return alt


FIGURES = (
    Diagram("mesh",
            "An X by Y mesh of chips: the weight shards are all-gathered along X (the FSDP axis, one column of "
            "chips); the input is all-gathered and the output reduce-scattered along Y (the tensor-parallel "
            "axis, one row of chips).",
            _mesh_alt, _draw_mesh),
)
