"""What every question's teaching figures are drawn with (matplotlib, Agg):
the `Diagram` a question lists in `Question.figures`, the palette, and the
bars, axes and legends the timelines share. A figure comes in two
versions: schematic for students (no number, no scaled axis to read an
answer off), to scale with the course's numbers for the solutions (every
number from the reference: its worked answers or its functions).
"""
from __future__ import annotations

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
    student_alt: str | None            # None: solutions only
    solutions_alt: Callable            # cfg -> alt text with the course's numbers
    draw: Callable                     # (cfg, to_scale) -> matplotlib Figure


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def fits(ax, text: str, length: float, span: float, fontsize: float) -> bool:
    """Whether `text` fits inside a bar `length` long on an axis `span` long."""
    width_pt = ax.get_position().width * ax.figure.get_figwidth() * 72 * length / span
    return width_pt > 0.62 * fontsize * len(text) + 4


def bars(ax, row: float, spans, color, span: float, label=None, hatch=None, fontsize=8.5, height=0.7):
    """Bars on one row; spans are (start, length, [labels, longest first]). Every bar of the row shows
    its labels' first form that fits in all of them (the same words along a row), or none."""
    forms = min((len(texts) for _, _, texts in spans), default=0)
    form = next((k for k in range(forms)
                 if all(fits(ax, texts[k], length, span, fontsize) for _, length, texts in spans)), None)
    for k, (start, length, texts) in enumerate(spans):
        ax.broken_barh([(start, length)], (row - height / 2, height), facecolors=color, edgecolor="white",
                       hatch=hatch, label=label if k == 0 else None, linewidth=1)
        if form is not None:
            box = dict(boxstyle="round,pad=0.15", facecolor=color, edgecolor="none") if hatch else None
            ax.text(start + length / 2, row, texts[form], ha="center", va="center", color="white",
                    fontsize=fontsize, bbox=box)


def timeline_axes(ax, rows: list[str], to_scale: bool, unit: str = "ms"):
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


def legend(fig, axes, top: float):
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    fig.legend([handles[lab] for lab in labels], labels, loc="upper center", ncol=len(labels), fontsize=8.5,
               frameon=False, bbox_to_anchor=(0.5, top))


@lru_cache(maxsize=32)
def worked(derive: Callable, cfg) -> dict:
    """`derive(cfg)`, a question's worked answers (its reference's `worked`), once per config."""
    return derive(cfg)
