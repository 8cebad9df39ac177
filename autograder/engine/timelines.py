"""The timelines a grading's feedback draws: for each overlap part the starter
kit draws too (publish/kit_timelines.DRAWN: 4.7's BucketedDDP, 2.11's FSDP),
one traced step of the part's first graded run, a public case's if it has one.

The trace is that run's events as the ranks' trusted processes recorded them
(sandbox/gloo/ranks/trusted.traced): each collective's start and end measured
there; the phase, gradient and unit marks filed, typed and timed there when
the student's process sent them. Only those runs are traced (the probe's
`traced`: engine/probes.py), and the step kept is plain JSON on the part's
PartResult. It is never scored: a student can distort their own picture, never
a grade (docs/trust.md). Drawing it is the front ends' (platforms/batch.py,
cli.py); Gradescope's output shows the summary line (platforms/otter.py).
"""
from __future__ import annotations

from shardlab.autograder.engine.parts import Case
from shardlab.autograder.sandbox.process import Outcome


def drawn_cases(cases: dict[str, list[Case]]) -> dict[str, tuple[int, str, str]]:
    """{part id: (index of the case drawn, file stem, step drawn)} for the drawn
    parts among `cases` ({part id: its cases}): the first public case, else the first."""
    from shardlab.autograder.publish.kit_timelines import DRAWN
    return {part_id: (next((k for k, c in enumerate(cases[part_id]) if c.public), 0), stem, step)
            for part_id, stem, step in DRAWN if cases.get(part_id)}


def timeline(case: Case, stem: str, step: str, got: list[Outcome]) -> dict | None:
    """{"stem", "title", "summary", "events"} of the case's run: each rank's events
    of `step` (publish/timeline.step_window) and their overlap_summary; None
    when the run failed (hung, crashed, raised) or came back without a trace.
    A hidden case's title names its group, never its inputs."""
    from shardlab.autograder.publish.timeline import overlap_summary, step_label, step_window
    run = got[0] if got else None
    if run is None or run.error is not None or not run.trace:
        return None
    call = case.calls[0]
    shown = call.show() if case.public else f"a hidden case of {call.function} ({case.group})"
    try:
        events = step_window(run.trace, step)
        summary = overlap_summary(events)
    except Exception:  # noqa: BLE001 - the marks are the student process's: no timeline, never a failed grading
        return None
    return {"stem": stem, "title": f"{shown}, {step_label(step)}", "summary": summary, "events": events}
