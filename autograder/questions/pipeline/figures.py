"""The pipeline schedules of question 5 as a figure: GPipe ("afab") above
1F1B, one row per stage, each micro-batch's forward and backward a bar.

The orders are the reference's (`pipeline_schedule`: GPipe runs
every forward, then every backward; 1F1B runs p - s - 1 warm-up forwards on
stage s, then one forward and one backward in turn, then the remaining
backwards), timed by `kit.timelines.pipeline.layout` as an ideal pipeline
runs them (no communication time, every forward t_f and every backward
t_b). The figure is the `Diagram` "pipeline_schedules" in FIGURES:
schematic for students (p = 4, m = 8, no time axis), to scale for the
solutions (the course's p and m, t_f in seconds). A student's own traced
order is drawn the same way beside 1F1B (`timelines.pipeline.draw_traced`).
"""
from __future__ import annotations

from shardlab.autograder.kit.timelines.pipeline import Op, draw_panel, layout
from shardlab.reference import pipeline as ref
from shardlab.reference.pipeline_schedule import gpipe, letters, one_f_one_b
from shardlab.autograder.core.drawing import Diagram, worked

SCHEDULES = (("afab", "GPipe: all forwards, then all backwards"),
             ("1f1b", "1F1B: warm-up forwards, then one forward and one backward in turn"))
ORDERS = {"afab": gpipe, "1f1b": one_f_one_b}


def schedule(kind: str, p: int, m: int, t_f: float = 1.0, t_b: float = 2.0) -> list[Op]:
    """Every operation of one step of schedule `kind` with its start time, stage by stage in order."""
    return layout([letters(ORDERS[kind](s, p, m)) for s in range(p)], t_f, t_b)


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
    for ax, (kind, title) in zip(axes, SCHEDULES):
        draw_panel(ax, schedule(kind, p, m, t_f, t_b), p, step, (titles or {}).get(kind, title), 0.88 * 8.6 * 72)
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


PIPELINE_DRAWN = (4, 8)          # the students' schematic: p stages, m micro-batches


def _draw_pipeline(cfg, to_scale: bool):
    if not to_scale:
        return draw(*PIPELINE_DRAWN, 1.0, 2.0, False)
    w, pipe = worked(ref.worked, cfg), cfg.pipeline
    t_f = w["t_f"].value
    titles = {"afab": f"GPipe, p = {pipe.stages}, m = {pipe.microbatches}: step {w['step'].shown}, bubble "
                      f"fraction {w['fraction'].shown}\nstage 0 holds {w['act_gpipe_first'].shown}",
              "1f1b": f"1F1B: the same step and bubble\nstage 0 holds {w['act_1f1b_first'].shown}"}
    return draw(pipe.stages, pipe.microbatches, t_f, 2 * t_f, True, titles)


def _pipeline_alt(cfg) -> str:
    w, pipe = worked(ref.worked, cfg), cfg.pipeline
    return (f"GPipe and 1F1B schedules to scale for the course's {pipe.stages} stages and {pipe.microbatches} "
            f"micro-batches (t_f = {w['t_f'].shown}, t_b = 2 t_f): both steps take {w['step'].shown} with a "
            f"bubble fraction of {w['fraction'].shown}; stage 0 holds {w['act_gpipe_first'].shown} under GPipe "
            f"and {w['act_1f1b_first'].shown} under 1F1B.")


FIGURES = (
    Diagram("pipeline_schedules",
            "Pipeline schedules, one row per stage: GPipe runs every micro-batch's forward, then every "
            "backward; 1F1B runs a few warm-up forwards, then alternates one forward and one backward, then "
            "drains the remaining backwards. The grey slots are the idle time of each stage.",
            _pipeline_alt, _draw_pipeline),
)
