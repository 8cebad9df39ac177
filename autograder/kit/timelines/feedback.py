"""The timelines a grading's feedback draws: for each part the starter kit
draws too (publish/kit_timelines.DRAWN: 4.7's BucketedDDP, 2.11's FSDP,
5.10's pipeline), one traced step of the part's first graded run, a public
case's if it has one.

The trace is that run's events as the ranks' trusted processes recorded them
(sandbox/gloo/ranks/trusted.traced): each collective's and point-to-point
op's start and end measured there; the phase, gradient and unit marks filed,
typed and timed there when the student's process sent them. Only those runs
are traced (the probe's `traced`: engine/probes.py), and the step kept is
plain JSON on the part's PartResult, with what the drawing compares it with
(the pipeline's: 1F1B's order per stage, from the case's expected value). It
is never scored: a student can distort their own picture, never a grade
(docs/trust.md). Drawing it is the front ends' (platforms/batch.py, cli.py);
Gradescope's output shows the summary line (platforms/otter.py).
"""
from __future__ import annotations

from shardlab.autograder.core.parts import Case
from shardlab.autograder.sandbox.process import Outcome


def drawn_cases(cases: dict[str, list[Case]]) -> dict:
    """{part id: (index of the case drawn, its publish/kit_timelines.Drawn)} for the
    drawn parts among `cases` ({part id: its cases}): the first public case, else the first."""
    from shardlab.autograder.kit.timelines import DRAWN
    return {drawn.part: (next((k for k, c in enumerate(cases[drawn.part]) if c.public), 0), drawn)
            for drawn in DRAWN if cases.get(drawn.part)}


def timeline(case: Case, drawn, got: list[Outcome], expected=None) -> dict | None:
    """{"stem", "kind", "title", "summary", "events", "ideal"} of the case's run:
    each rank's events of the step drawn (publish/timeline.step_window), the
    drawing's summary line, and what it compares them with (publish/kit_timelines.ideal_of
    of `expected`, the expected value of the case's call); None when the run failed (hung,
    crashed, raised) or came back without a trace. A hidden case's title names
    its group, never its inputs."""
    from shardlab.autograder.kit.timelines import ideal_of, summary
    from shardlab.autograder.kit.timelines.overlap import step_label, step_window
    run = got[0] if got else None
    if run is None or run.error is not None or not run.trace:
        return None
    call = case.calls[0]
    shown = call.show() if case.public else f"a hidden case of {call.function} ({case.group})"
    try:
        ideal = ideal_of(drawn.kind, expected)
        events = step_window(run.trace, drawn.step)
        line = summary(drawn.kind, events, ideal)
    except Exception:  # noqa: BLE001 - the marks are the student process's: no timeline, never a failed grading
        return None
    return {"stem": drawn.stem, "kind": drawn.kind, "title": f"{shown}, {step_label(drawn.step)}",
            "summary": line, "events": events, "ideal": ideal}
