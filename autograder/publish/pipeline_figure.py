"""The pipeline schedules of question 5 as a figure: GPipe ("afab") above
1F1B, one row per stage, each micro-batch's forward and backward a bar.

`schedule` computes an ideal timeline (no communication time, every forward
t_f and every backward t_b on every stage) from each stage's order of work
alone: an operation starts when its stage is free and its input is there
(a forward needs the previous stage's forward of the same micro-batch, a
backward the next stage's backward). The orders are docs/spec.md's: GPipe
runs every forward, then every backward; 1F1B runs p - s - 1 warm-up
forwards on stage s, then one forward and one backward in turn, then the
remaining backwards. `draw` is registered in publish/diagrams.py
(`pipeline_schedules`): schematic for students (p = 4, m = 8, no time
axis), to scale for the solutions (the course's p and m, t_f in seconds).
"""
from __future__ import annotations

from dataclasses import dataclass

FORWARD, BACKWARD, IDLE = "#4c72b0", "#55a868", "#f0f0f0"
SCHEDULES = (("afab", "GPipe: all forwards, then all backwards"),
             ("1f1b", "1F1B: warm-up forwards, then one forward and one backward in turn"))


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


def stage_order(kind: str, p: int, m: int, stage: int) -> list[tuple[str, int]]:
    """The stage's operations in the order it runs them: ("F" or "B", micro-batch)."""
    forwards = [("F", i) for i in range(m)]
    backwards = [("B", i) for i in range(m)]
    if kind == "afab":
        return forwards + backwards
    warmup = min(p - stage - 1, m)
    order = forwards[:warmup]
    for i in range(warmup, m):
        order += [forwards[i], backwards[i - warmup]]
    return order + backwards[m - warmup:]


def schedule(kind: str, p: int, m: int, t_f: float = 1.0, t_b: float = 2.0) -> list[Op]:
    """Every operation of one step with its start time, stage by stage in order."""
    orders = [stage_order(kind, p, m, s) for s in range(p)]
    done: dict[tuple[int, str, int], float] = {}
    free, nxt = [0.0] * p, [0] * p
    while any(nxt[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                op, i = orders[s][nxt[s]]
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
            raise ValueError(f"the {kind} orders deadlock")
    return sorted((Op(s, op, i, done[(s, op, i)] - (t_f if op == "F" else t_b), t_f if op == "F" else t_b)
                   for (s, op, i) in done), key=lambda o: (o.stage, o.start))


def peak_inflight(ops: list[Op], stage: int) -> int:
    """The most micro-batches whose forward is done and backward not yet, on one stage."""
    held = peak = 0
    for op in (o for o in ops if o.stage == stage):
        held += 1 if op.kind == "F" else -1
        peak = max(peak, held)
    return peak


def draw(p: int, m: int, t_f: float, t_b: float, to_scale: bool, titles: dict[str, str] | None = None):
    """GPipe above 1F1B; `titles` (by schedule) replace the default panel titles."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lines = max(t.count("\n") for t in (titles or {"": ""}).values())    # extra title lines
    height = 1.3 + 2 * min(0.42 * p, 3.0) + 0.45 * lines     # a deep pipeline's rows get thinner
    fig, axes = plt.subplots(2, 1, figsize=(8.6, height), dpi=110, sharex=True)
    fig.subplots_adjust(left=0.1, right=0.98, top=1 - (0.5 + 0.2 * lines) / height, bottom=0.5 / height,
                        hspace=0.35 + 0.1 * lines)
    step = (m + p - 1) * (t_f + t_b)
    width_pt = 0.88 * 8.6 * 72
    for ax, (kind, title) in zip(axes, SCHEDULES):
        ax.barh(range(p), [step] * p, left=0, height=0.72, color=IDLE, edgecolor="none",
                label="idle (the bubble)")
        for op in schedule(kind, p, m, t_f, t_b):
            color = FORWARD if op.kind == "F" else BACKWARD
            ax.barh(op.stage, op.length, left=op.start, height=0.72, color=color, edgecolor="white", lw=0.8,
                    label="forward of micro-batch i" if op.kind == "F" else "backward of micro-batch i")
            if op.length / step * width_pt > 7 * len(str(m - 1)) + 3:     # every label of a kind, or none
                ax.text(op.start + op.length / 2, op.stage, str(op.microbatch), ha="center", va="center",
                        color="white", fontsize=8)
        shown = range(0, p, max(1, p // 12))              # a deep pipeline names every few stages
        ax.set_yticks(shown, [f"stage {s}" for s in shown], fontsize=8.5 if p <= 8 else 7)
        ax.set_ylim(p - 0.5, -0.5)
        ax.set_xlim(0, step)
        ax.set_title((titles or {}).get(kind, title), fontsize=9.5, loc="left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if to_scale:
        axes[-1].set_xlabel("time (s)", fontsize=8.5)
        axes[-1].tick_params(axis="x", labelsize=8)
    else:
        axes[-1].set_xticks([])
        axes[-1].set_xlabel("time →  (a backward takes twice as long as a forward)", fontsize=9)
    handles = {label: h for ax in axes for h, label in zip(*ax.get_legend_handles_labels())}
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=3, fontsize=8.5, frameon=False,
               bbox_to_anchor=(0.5, 1.0))
    return fig
