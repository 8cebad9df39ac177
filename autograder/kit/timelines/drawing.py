"""The timelines drawn, by kind (`Drawn.kind`): the grading's `timeline` of a
traced run, the files `write_drawing` makes of it, and the kit's
`draw_timelines` and `main` (tests/timelines.py in the kit)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import Drawn
from .overlap import overlap_summary, step_label, step_window, write_timeline
from .pipeline import pipeline_summary, write_pipeline_timeline


def ideal_of(kind: str, expected) -> list[str] | None:
    """What a drawing compares the run with: for the pipeline, 1F1B's order on
    each stage, from the part's expected value (one entry per stage, each with
    its "order"); nothing for the overlap drawings."""
    return [stage["order"] for stage in expected] if kind == "pipeline" else None


def summary(kind: str, events: list[list[dict]], ideal: list[str] | None) -> str:
    """The drawing's one line: what overlaps, or each stage's order against 1F1B's."""
    if kind == "pipeline":
        assert ideal is not None                    # `ideal_of` gives a pipeline its 1F1B orders
        return pipeline_summary(events, ideal)
    return overlap_summary(events)


def write_drawing(kind: str, events: list[list[dict]], ideal: list[str] | None, folder, stem: str,
                  title: str) -> tuple[Path, Path]:
    """Write <stem>.png and <stem>.trace.json under `folder`; return their paths."""
    if kind == "pipeline":
        assert ideal is not None                    # as in `summary`
        return write_pipeline_timeline(events, ideal, folder, stem, title)
    return write_timeline(events, folder, stem, title)


def timeline(drawn: Drawn, title: str, trace: Any, expected=None) -> dict | None:
    """The grading's timeline of one run: {"stem", "kind", "title", "summary",
    "events", "ideal"}, with each rank's events of the step drawn
    (`step_window` of the run's trusted `trace`), the summary line, and what
    the drawing compares them with (`ideal_of` the call's `expected` value).
    None without a trace. `title` names the call (a hidden case's names its
    group, never its inputs)."""
    if not trace:
        return None
    try:
        ideal = ideal_of(drawn.kind, expected)
        events = step_window(trace, drawn.step)
        line = summary(drawn.kind, events, ideal)
    except Exception:  # noqa: BLE001 - the marks are the student process's: no timeline, never a failed grading
        return None
    return {"stem": drawn.stem, "kind": drawn.kind, "title": f"{title}, {step_label(drawn.step)}",
            "summary": line, "events": events, "ideal": ideal}


def draw_timelines(runs: list[dict], root: str, out: Path) -> list[str]:
    """The kit's drawings: run the first public run of each drawn part (a run
    carrying "drawn") on the submission at `root` and write <stem>.png and
    <stem>.trace.json under `out`. Returns one line per drawing: where it is
    and what it shows (or why there is no drawing)."""
    from ..local import ScenarioFailed
    from ..local_checks import Ranks, run_key
    out.mkdir(parents=True, exist_ok=True)
    firsts: dict[str, dict] = {}
    for run in runs:
        if run.get("drawn"):
            firsts.setdefault(run["part"], run)
    lines, ranks = [], Ranks(root)
    try:
        for run in firsts.values():
            drawn = Drawn(**run["drawn"])
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
    """The kit's command (tests/timelines.py): the timelines of the submission in the kit's folder."""
    tests = Path(__file__).resolve().parents[2]
    runs = [r for q in json.loads((tests / "public_runs.json").read_text()).values() for r in q]
    for line in draw_timelines(runs, str(tests.parent), tests.parent / "timelines"):
        print(line)
