"""class-report.html: the class report (`class_report`) as one static page,
readable offline with scripts off. Its plots are inline SVG drawn with
matplotlib in the figures' style (`core.drawing`: its palette and axes), each
with axis labels and units; every text of a student's (names, code, written
answers, error reasons) goes through Jinja's autoescaping, and the side-by-side
views of similar pairs open in <details> elements, no script needed."""
from __future__ import annotations

import io
import math
from functools import cache

import jinja2

from shardlab.autograder.core import content
from shardlab.autograder.core.drawing import COMM, COMPUTE, DPI, EXPOSED, pyplot
from shardlab.autograder.core.results import points_text

TEMPLATE = "class_report.html.j2"
WIDTH_INCH = 9.2            # the page's column, 56rem = 896 px: an SVG point is 4/3 px, so drawn at 1:1
CONTEXT_LINES = 2           # lines shown around a matching region in a side-by-side view
MAX_BAR_ROWS = 40           # a bar chart shows this many rows at most (the table lists them all)


def _svg(fig) -> str:
    """The figure as an inline <svg> element (text kept as text, so it is searchable and small)."""
    plt = pyplot()
    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _axes(ax, xlabel: str, ylabel: str) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.tick_params(labelsize=8)


def _label(text: str, limit: int = 46) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def histogram(values: list[float], xlabel: str, ylabel: str, bins, color: str = COMPUTE,
              xticks: list[int] | None = None) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_INCH, 2.4), dpi=DPI)
    ax.hist(values, bins=bins, color=color, edgecolor="white")
    ax.yaxis.get_major_locator().set_params(integer=True)
    if xticks is not None:
        ax.set_xticks(xticks)
    _axes(ax, xlabel, ylabel)
    return _svg(fig)


def totals_plot(totals: dict) -> str | None:
    scores = list(totals["scores"].values())
    if not scores:
        return None
    top = totals["max_score"] or max(totals["max_scores"] or [1])
    bins = [top * k / 20 for k in range(21)] if top > 0 else 10
    most = f"of {points_text(top)}" if totals["max_score"] else "maxima differ"
    return histogram(scores, f"auto-graded total (points, {most})", "students", bins)


def written_plot(written: dict) -> str | None:
    n = written["total_sections"]
    counts = list(written["answered_by_student"].values())
    if not n or not counts:
        return None
    return histogram(counts, f"written sections answered (of {n})", "students",
                     [k - 0.5 for k in range(n + 2)], COMM, list(range(0, n + 1, max(1, n // 10))))


def parts_plot(parts: list[dict]) -> str | None:
    """Per part where someone lost points, the shares at full marks, partial and zero (worst on top),
    and the gap's share as a mark; the parts everyone got right are only in the table."""
    rows = [p for p in parts if p["students"] and (p["losing"] or p["gap"])][:MAX_BAR_ROWS]
    if not rows:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_INCH, 0.9 + 0.24 * len(rows)), dpi=DPI)
    labels = [_label(f"{p['part']} {p['title']}") for p in rows]
    y = list(range(len(rows)))
    left = [0.0] * len(rows)
    for key, label, color in (("zero_share", "zero", EXPOSED), ("partial_share", "partial", COMM),
                              ("full_share", "full marks", COMPUTE)):
        widths = [100 * p[key] for p in rows]
        ax.barh(y, widths, left=left, color=color, label=label, height=0.75)
        left = [a + b for a, b in zip(left, widths)]
    gaps = [(k, 100 * p["gap_share"]) for k, p in enumerate(rows) if p["gap"]]
    if gaps:
        ax.scatter([g for _, g in gaps], [k for k, _ in gaps], marker="D", s=18, color="black", zorder=3,
                   label="passes public, loses hidden")
    ax.set_yticks(y, labels, fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    _axes(ax, "share of students (%)", "")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=8, frameon=False)
    return _svg(fig)


def misconceptions_plot(rows: list[dict]) -> str | None:
    rows = rows[:MAX_BAR_ROWS]
    if not rows:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_INCH, 0.8 + 0.26 * len(rows)), dpi=DPI)
    y = list(range(len(rows)))
    bars = ax.barh(y, [r["count"] for r in rows], color=EXPOSED, height=0.7)
    ax.bar_label(bars, [f"{r['count']} ({100 * r['share']:.0f}%)" for r in rows], padding=3, fontsize=7.5)
    ax.set_yticks(y, [_label(f"{r['part']} {r['name']}") for r in rows], fontsize=7.5)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    ax.xaxis.get_major_locator().set_params(integer=True)
    _axes(ax, "students it explains (count)", "")
    return _svg(fig)


def seconds_plot(seconds: dict) -> str | None:
    values = list(seconds.values())
    if not values:
        return None
    top = max(values)
    step = max(1.0, math.ceil(top / 20))
    return histogram(values, "grading time per submission (s)", "submissions",
                     [step * k for k in range(int(top // step) + 2)])


def hunks(lines: list, context: int = CONTEXT_LINES) -> list[list]:
    """The lines to show of one side: each marked line with `context` lines around it,
    runs merged; a None between runs stands for the lines left out."""
    keep = sorted({k for k, (_, _, marked) in enumerate(lines) if marked
                   for k in range(k - context, k + context + 1) if 0 <= k < len(lines)})
    shown: list = []
    for k, before in zip(keep, [None, *keep]):
        if before is not None and k != before + 1:
            shown.append(None)
        shown.append(lines[k])
    return shown


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(content.folder("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["points"] = points_text
    env.filters["pct"] = lambda x: f"{100 * x:.0f}%"
    return env


def page(report: dict, views: dict) -> str:
    """The page of `report` (`class_report.build`); views: {(a, b): (code view, writeup view)}."""
    plots = {"totals": totals_plot(report["totals"]), "written": written_plot(report["written"]),
             "parts": parts_plot(report["parts"]), "misconceptions": misconceptions_plot(report["misconceptions"]),
             "seconds": seconds_plot(report["operations"]["seconds_by_student"])}
    shown = {pair: ([{"file": f["file"], "a": hunks(f["a"]), "b": hunks(f["b"])} for f in code],
                    [{"file": f["file"], "a": hunks(f["a"]), "b": hunks(f["b"])} for f in writeup])
             for pair, (code, writeup) in views.items()}
    return environment().get_template(TEMPLATE).render(r=report, plots=plots, views=shown)
