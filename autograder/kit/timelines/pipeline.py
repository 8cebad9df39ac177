"""Pipeline schedules drawn stage by stage: the handout's ideal GPipe and 1F1B
(the pipeline question's figures) and, in a student's feedback and the starter
kit, their own traced order beside 1F1B (the `timelines` package). The
starter kit ships this module.

A schedule is each stage's order of work as letters, "F" a forward and "B"
a backward of one micro-batch ("FFBFBFBB": stage 0 of 2 under 1F1B with 4
micro-batches). The k-th F of a stage is micro-batch k, and so is its k-th B:
micro-batches run in order. `layout` times the orders as an ideal pipeline
would run them: no communication time, every forward t_f and every backward
t_b long, an operation starting when its stage is free and its input is
there (a forward needs the previous stage's forward of the same
micro-batch, a backward the next stage's backward, or on the last stage its
own forward).

A traced order is read off the trusted trace of the run's point-to-point
ops by the grader's own rule (`checks.pipeline.schedule`): a forward ends
with its send to the next stage, a backward with its send to the previous
one; where a stage has no such send, the wait for its input marks the op.
The drawing therefore shows the order the stages' messages went out in,
laid out as an ideal machine would time it, not the wall-clock durations of
a toy model on CPU (those are in the Chrome trace written beside it).
"""
from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..checks.pipeline import in_flight, schedule as order_from_p2p

# A run's order is the student's: however many ops it traced (up to the trusted side's event cap),
# the summary shows an order's first SHOWN_LETTERS and the drawing at most MAX_DRAWN_OPS bars.
SHOWN_LETTERS, MAX_DRAWN_OPS = 48, 2_000
FORWARD, BACKWARD, IDLE, DIFFERS = "#4c72b0", "#55a868", "#f0f0f0", "#c44e52"   # DIFFERS: a stage not in 1F1B order


@dataclass(frozen=True)
class Op:
    stage: int
    kind: str          # "F" or "B"
    microbatch: int
    start: float
    length: float

    @property
    def end(self) -> float:
        return self.start + self.length


def _numbered(order: str) -> list[tuple[str, int]]:
    """"FFBB" -> [("F", 0), ("F", 1), ("B", 0), ("B", 1)]: the k-th F or B is micro-batch k."""
    seen = {"F": 0, "B": 0}
    out = []
    for kind in order:
        out.append((kind, seen[kind]))
        seen[kind] += 1
    return out


def layout(orders: list[str], t_f: float = 1.0, t_b: float = 2.0) -> list[Op]:
    """Every operation of one step, timed as an ideal pipeline runs `orders`
    (one string per stage, module docstring); sorted by stage, then start.
    ValueError when the orders cannot all run (a stage waits for an input its
    neighbour never produces, or produces only later in its own order)."""
    p = len(orders)
    numbered = [_numbered(order) for order in orders]
    done: dict[tuple[int, str, int], float] = {}
    free, nxt = [0.0] * p, [0] * p
    needs: tuple[int, str, int] | None                  # the op this one waits for: none for stage 0's forwards
    while any(nxt[s] < len(numbered[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while nxt[s] < len(numbered[s]):
                op, i = numbered[s][nxt[s]]
                needs = (s - 1, "F", i) if op == "F" else (s + 1, "B", i)
                if not 0 <= needs[0] < p:
                    needs = (s, "F", i) if op == "B" else None
                if needs is not None and needs not in done:
                    break
                start = max(free[s], done[needs] if needs else 0.0)
                free[s] = done[(s, op, i)] = start + (t_f if op == "F" else t_b)
                nxt[s] += 1
                progressed = True
        if not progressed:
            stuck = next(s for s in range(p) if nxt[s] < len(numbered[s]))
            op, i = numbered[stuck][nxt[stuck]]
            raise ValueError(f"stage {stuck}'s {'forward' if op == 'F' else 'backward'} of micro-batch {i} "
                             f"waits for an input that never comes")
    return sorted((Op(s, op, i, end - (t_f if op == "F" else t_b), t_f if op == "F" else t_b)
                   for (s, op, i), end in done.items()), key=lambda o: (o.stage, o.start))


def back_to_back(orders: list[str], t_f: float = 1.0, t_b: float = 2.0) -> list[Op]:
    """Each stage's operations one after another from time 0, ignoring what
    they wait for: how orders that `layout` cannot run are still drawn."""
    ops = []
    for s, order in enumerate(orders):
        t = 0.0
        for kind, i in _numbered(order):
            length = t_f if kind == "F" else t_b
            ops.append(Op(s, kind, i, t, length))
            t += length
    return ops


def peak_inflight(ops: list[Op], stage: int) -> int:
    """The most micro-batches whose forward is done and backward not yet, on one stage."""
    return in_flight("".join(op.kind for op in ops if op.stage == stage))


def draw_panel(ax, ops: list[Op], p: int, length: float, title: str, width_pt: float,
               notes: Sequence[tuple[str, str]] = ()) -> None:
    """One schedule on `ax`: a row per stage (stage 0 on top), idle time grey
    to `length`, each forward and backward a bar labelled with its micro-batch
    when every label of its kind fits (`width_pt`: the panel's width in
    points); `notes`, one (text, color) per stage, are written right of the rows."""
    from matplotlib.collections import PolyCollection

    def bars(spans, **style):
        """Rectangles 0.72 high centred on their stage's row, one collection (the legend's order is the order
        of these calls): a bar patch each cost 1-2 ms to add, seconds for a deep pipeline's hundreds of bars."""
        ax.add_collection(PolyCollection([[(start, s - 0.36), (end, s - 0.36), (end, s + 0.36), (start, s + 0.36)]
                                          for s, start, end in spans], **style))

    m = max((op.microbatch for op in ops), default=0) + 1
    bars([(s, 0, length) for s in range(p)], facecolors=IDLE, edgecolors="none", label="idle (the bubble)")
    for kind in dict.fromkeys(op.kind for op in ops):      # in the order the kinds first appear
        bars([(op.stage, op.start, op.end) for op in ops if op.kind == kind], edgecolors="white", linewidths=0.8,
             facecolors=FORWARD if kind == "F" else BACKWARD,
             label="forward of micro-batch i" if kind == "F" else "backward of micro-batch i")
    for op in ops:
        if op.length / length * width_pt > 7 * len(str(m - 1)) + 3:     # every label of a kind, or none
            ax.text(op.start + op.length / 2, op.stage, str(op.microbatch), ha="center", va="center",
                    color="white", fontsize=8)
    shown = range(0, p, max(1, p // 12))              # a deep pipeline names every few stages
    ax.set_yticks(shown, [f"stage {s}" for s in shown], fontsize=8.5 if p <= 8 else 7)
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_xlim(0, length)
    ax.set_title(title, fontsize=9.5, loc="left")
    for s, (note, color) in enumerate(notes):
        ax.text(1.01, s, note, transform=ax.get_yaxis_transform(), va="center", fontsize=8, color=color)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def traced_orders(ranks: list[list[dict]]) -> list[str]:
    """Each stage's order ("F"/"B" letters) in one step's trace: rank r is
    stage r; its point-to-point events (those naming a "peer") in the rows
    `checks.pipeline.schedule` reads."""
    rows = [[["send" if "send" in e["op"] else "recv", e["peer"], e.get("bytes"), e["seq"], e.get("waited")]
             for e in events if e.get("kind") == "collective" and "peer" in e] for events in ranks]
    return [order_from_p2p(stage, len(ranks), r) for stage, r in enumerate(rows)]


def _shown(order: str) -> str:
    if not order:
        return "no forwards or backwards"
    return order if len(order) <= SHOWN_LETTERS else f"{order[:SHOWN_LETTERS]}… ({len(order):,} in all)"


def pipeline_summary(ranks: list[list[dict]], ideal: list[str]) -> str:
    """One clause per stage, joined by "; ": its traced order and the most
    micro-batches it held, against 1F1B's (`ideal`, one order per stage)."""
    clauses = []
    for s, (order, want) in enumerate(zip(traced_orders(ranks), ideal)):
        held = f"{_shown(order)}, up to {in_flight(order)} in flight"
        clauses.append(f"stage {s}: {held}" + (", as 1F1B" if order == want
                                                else f" (1F1B: {want}, up to {in_flight(want)})"))
    return "; ".join(clauses)


def drawn_schedules(orders: list[str], ideal: list[str]) -> tuple[list[Op], list[Op], str]:
    """What `draw_traced` draws: the traced `orders` and 1F1B's (`ideal`) as
    timed operations, and how the traced ones were placed (`layout`, or
    `back_to_back` when they cannot all run; none past MAX_DRAWN_OPS)."""
    total = sum(map(len, orders))
    if total > MAX_DRAWN_OPS:
        return [], layout(ideal), f"not drawn: {total:,} forwards and backwards are too many bars to draw"
    try:
        mine, how = layout(orders), "laid out as an ideal pipeline runs them"
    except ValueError as exc:
        mine, how = back_to_back(orders), f"drawn back to back: they cannot all run ({exc})"
    return mine, layout(ideal), how


def draw_traced(ranks: list[list[dict]], ideal: list[str], path, title: str):
    """The PNG at `path`: the traced orders (top) above 1F1B's (bottom), both laid
    out by `layout` with t_b = 2·t_f, on one time axis; right of each row, the
    most micro-batches the stage held, in red where its order is not 1F1B's. A
    long title shrinks, then wraps (`overlap.fitted`), and the head grows to hold
    it. Returns the figure."""
    from matplotlib.figure import Figure        # not pyplot: no global backend or figure list is touched

    from .overlap import LINE_INCH, fit_texts, fitted
    orders, p = traced_orders(ranks), len(ideal)
    mine, best, how = drawn_schedules(orders, ideal)
    length = max(op.end for op in mine + best) if mine + best else 1.0
    rows = min(0.42 * p, 3.0)                                 # inches per panel; a deep pipeline's rows get thinner
    title, size = fitted(title, 0.97 * 10 * 72, 10, "bold")   # from 1% of the width to the right edge, less a margin
    extra = LINE_INCH * size * title.count("\n")              # inches: a wrapped title's further lines
    height = 2.0 + extra + 2 * rows
    fig = Figure(figsize=(10, height), dpi=110)
    axes = fig.subplots(2, 1, sharex=True)
    fig.subplots_adjust(left=0.09, right=0.8, top=1 - (1.15 + extra) / height, bottom=0.45 / height,
                        hspace=0.6 / (rows - 0.1))              # 0.6 in between the panels, for the two-line title
    width_pt = 0.71 * 10 * 72
    how = textwrap.shorten(how, 120, placeholder="…)" if how.endswith(")") else "…")
    panels = ((axes[0], mine, orders, f"Yours: each stage's forwards and backwards in the order its messages went "
                                      f"out,\n{how}"),
              (axes[1], best, ideal, "1F1B: warm-up forwards, then one forward and one backward in turn"))
    for ax, ops, its, text in panels:
        notes = [(f"up to {in_flight(o)} in flight", "black" if o == want else DIFFERS) for o, want in zip(its, ideal)]
        draw_panel(ax, ops, p, length, text, width_pt, notes)
    axes[1].set_xticks([])
    axes[1].set_xlabel("time →  (a forward takes 1 unit, a backward 2; no communication time)", fontsize=8.5)
    handles = {label: h for ax in axes for h, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=3, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 1 - (0.42 + extra) / height))
    fig.text(0.01, 1 - 0.1 / height, title, fontsize=size, fontweight="bold", va="top")
    fit_texts(fig)                              # the panels' titles
    fig.savefig(path, format="png")
    return fig


# PNG bytes by what `draw_traced` draws from (traced orders, 1F1B's, title): a batch's submissions mostly
# trace the same orders, and drawing one costs about 0.2 CPU-seconds; the times it ignores differ every run
_DRAWN: dict[tuple, bytes] = {}
_DRAWN_KEPT = 32


def write_pipeline_timeline(ranks: list[list[dict]], ideal: list[str], folder, stem: str,
                            title: str) -> tuple[Path, Path]:
    """Write <stem>.png (`draw_traced`) and <stem>.trace.json (the measured
    point-to-point ops, `overlap.chrome_trace`) under `folder`. A PNG drawn
    before in this process from the same traced orders, 1F1B orders and
    title is written again from its bytes instead of drawn."""
    import io
    import json

    from .overlap import chrome_trace
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    png, trace = folder / f"{stem}.png", folder / f"{stem}.trace.json"
    key = (tuple(traced_orders(ranks)), tuple(ideal), title)
    if key not in _DRAWN:
        drawn = io.BytesIO()
        draw_traced(ranks, ideal, drawn, title)
        if len(_DRAWN) >= _DRAWN_KEPT:
            _DRAWN.pop(next(iter(_DRAWN)))            # the oldest
        _DRAWN[key] = drawn.getvalue()
    png.write_bytes(_DRAWN[key])
    trace.write_text(json.dumps(chrome_trace(ranks, title)))
    return png, trace
