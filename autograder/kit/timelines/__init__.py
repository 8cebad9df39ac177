"""See your own schedule: one training step of your BucketedDDP (question 4),
your FSDP (question 2) and your OneFOneBPipeline (question 5), traced on
local gloo ranks, drawn as a PNG and a Chrome trace (open it in
https://ui.perfetto.dev or chrome://tracing).

The runs are the public runs of tasks 4.7, 2.11 and 5.10 (tests/public_runs.json
in the starter kit), on the kit's local ranks (kit/local.py), traced
by the grader's own tracer. The step drawn is the second (warm: no first-call
set-up in it). For DDP an all-reduce that starts before the last gradient
is produced overlaps backward; for FSDP an all-gather issued during the
previous unit's forward is a prefetch (kit/timelines/overlap.py). For the
pipeline, each stage's forwards and backwards in the order its messages went
out, beside 1F1B's (kit/timelines/pipeline.py). The grader's feedback
draws the same pictures from a graded run (kit/timelines/feedback.py). The
starter kit ships this file:

    python tests/timelines.py        # in the kit's folder: writes timelines/
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from shardlab.autograder.kit.timelines.pipeline import pipeline_summary, write_pipeline_timeline
from shardlab.autograder.kit.timelines.overlap import overlap_summary, step_label, step_window, write_timeline
from shardlab.autograder.kit.local import ScenarioFailed
from shardlab.autograder.kit.local_checks import Ranks, run_key


class Drawn(NamedTuple):
    part: str         # the part whose first public run is drawn
    stem: str         # the files' name: <stem>.png, <stem>.trace.json
    step: str         # the step drawn: a DDP or pipeline phase ("step 2") or an FSDP step index ("1")
    kind: str         # "overlap" (kit/timelines/overlap.py) or "pipeline" (kit/timelines/pipeline.py)


DRAWN = (Drawn("4.7", "bucketed-ddp", "step 2", "overlap"), Drawn("2.11", "fsdp", "1", "overlap"),
         Drawn("5.10", "pipeline", "step 2", "pipeline"))


def ideal_of(kind: str, expected) -> list[str] | None:
    """What a drawing compares the run with: for the pipeline, 1F1B's order on
    each stage, from the part's expected value (one entry per stage, each with
    its "order": kit/checks/__init__.py); nothing for the overlap drawings."""
    return [stage["order"] for stage in expected] if kind == "pipeline" else None


def summary(kind: str, events: list[list[dict]], ideal: list[str] | None) -> str:
    """The drawing's one line: what overlaps, or each stage's order against 1F1B's."""
    return pipeline_summary(events, ideal) if kind == "pipeline" else overlap_summary(events)


def write_drawing(kind: str, events: list[list[dict]], ideal: list[str] | None, folder, stem: str,
                  title: str) -> tuple[Path, Path]:
    """Write <stem>.png and <stem>.trace.json under `folder`; return their paths."""
    if kind == "pipeline":
        return write_pipeline_timeline(events, ideal, folder, stem, title)
    return write_timeline(events, folder, stem, title)


def draw_timelines(runs: list[dict], root: str, out: Path) -> list[str]:
    """Run each drawn part's first public run on the submission at `root` and
    write <stem>.png and <stem>.trace.json under `out`. Returns one line per
    drawing: where it is and what it shows (or why there is no drawing)."""
    out.mkdir(parents=True, exist_ok=True)
    lines, ranks = [], Ranks(root)
    try:
        for drawn in DRAWN:
            run = next((r for r in runs if r["part"] == drawn.part), None)
            if run is None:
                continue
            try:
                ranks.run(run["scenario"], run["module"], run["args"])
            except ScenarioFailed as exc:
                lines.append(f"{drawn.stem}: no timeline, the run failed: {exc}")
                continue
            events = step_window(ranks.events[run_key(run["scenario"], run["module"], run["args"])], drawn.step)
            ideal = ideal_of(drawn.kind, run["expected"])
            png, trace = write_drawing(drawn.kind, events, ideal, out, drawn.stem,
                                       f"{run['call']}, {step_label(drawn.step)}")
            lines.append(f"{drawn.stem}: {png} and {trace}: {summary(drawn.kind, events, ideal)}")
    finally:
        ranks.close()
    return lines


def main() -> None:
    """The kit's command: the timelines of the submission in the current folder."""
    tests = Path(__file__).resolve().parent
    runs = [r for q in json.loads((tests / "public_runs.json").read_text()).values() for r in q]
    for line in draw_timelines(runs, str(tests.parent), tests.parent / "timelines"):
        print(line)


if __name__ == "__main__":
    main()
