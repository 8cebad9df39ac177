"""The timelines of one step (publish/kit_timelines.py, publish/timeline.py), read
from the Chrome trace's own timestamps: the solutions' all-reduces start before
backward's last gradient, ddp_never_overlaps' all start after it."""
import json

import pytest

from shardlab.autograder.engine.selfcheck import assembled, fixtures, folder_of
from shardlab.autograder.publish.kit_timelines import draw_timelines
from shardlab.autograder.publish.stubs import SOLUTIONS

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


def _ddp_trace(kit_runs, root, out) -> list[dict]:
    runs = [r for q in kit_runs.values() for r in q]
    lines = draw_timelines(runs, str(root), out)
    assert len(lines) == 2 and all("no timeline" not in line for line in lines), lines
    assert (out / "bucketed-ddp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "fsdp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return json.loads((out / "bucketed-ddp.trace.json").read_text())["traceEvents"]


def _per_rank(events: list[dict]):
    """{rank: (start ts of each all-reduce, ts of the last gradient)}, in µs."""
    out = {}
    for rank in sorted({e["pid"] for e in events}):
        starts = [e["ts"] for e in events if e["pid"] == rank and e["ph"] == "X" and e.get("cat") == "collective"
                  and e["name"].startswith("all_reduce")]
        grads = [e["ts"] for e in events if e["pid"] == rank and e["ph"] == "i"]
        out[rank] = (starts, max(grads))
    return out


def test_the_solutions_all_reduces_start_during_backward(kit_runs, tmp_path):
    with folder_of(SOLUTIONS) as root:
        events = _ddp_trace(kit_runs, root, tmp_path)
    ranks = _per_rank(events)
    assert sorted(ranks) == [0, 1]
    for starts, backward_end in ranks.values():
        assert len(starts) == 5                             # frozen_mlp, one bucket per parameter
        assert sum(s < backward_end for s in starts) >= 3   # all but the last bucket's, at least
    fsdp = json.loads((tmp_path / "fsdp.trace.json").read_text())["traceEvents"]
    forwards = [e for e in fsdp if e["ph"] == "X" and e["name"].startswith("forward: unit")]
    assert len(forwards) == 2 * 3                           # 3 trainable units on each of 2 ranks
    assert any(e["name"].startswith("_all_gather_base") or "all_gather" in e["name"] for e in fsdp if e["ph"] == "X")


def test_a_ddp_that_never_overlaps_shows_it(kit_runs, tmp_path):
    fixture = next(f for f in fixtures() if f.name == "ddp_never_overlaps")
    with assembled(fixture) as root:
        events = _ddp_trace(kit_runs, root, tmp_path)
    for starts, backward_end in _per_rank(events).values():
        assert starts and all(s >= backward_end for s in starts)


def _batch_trace(tmp_path, roots: dict) -> dict[str, list[dict]]:
    """Grade each submission in one batch; {name: its feedback's DDP trace events}."""
    import csv
    import shutil
    from helpers import run_cli
    paths = []
    for name, root in roots.items():
        shutil.copytree(root, tmp_path / name)
        paths.append(str(tmp_path / name))
    out = tmp_path / "out"
    done = run_cli("grade", *paths, "--jobs", "2", "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list(csv.DictReader((out / "gradebook.csv").open()))) == len(roots)
    traces = {}
    for name in roots:
        folder = out / "feedback" / name
        assert (folder / "bucketed-ddp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (folder / "fsdp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        feedback = (out / "feedback" / f"{name}.md").read_text()
        assert feedback.count("  - Timeline: one traced step of your first run") == 2, feedback
        assert f"{name}/bucketed-ddp.png" in feedback
        report = json.loads((out / "results" / f"{name}.json").read_text())
        assert "timeline" not in json.dumps(report).replace("timeline_note", "")   # events not kept twice
        traces[name] = json.loads((folder / "bucketed-ddp.trace.json").read_text())["traceEvents"]
    return traces


@pytest.mark.timeout(600)
def test_the_graders_feedback_draws_the_graded_run_from_the_trusted_trace(tmp_path):
    """Issue 14, item 5, grader side: batch grading writes each student's timeline of
    4.7's first graded run (times from the ranks' trusted processes) beside the feedback."""
    fixture = next(f for f in fixtures() if f.name == "ddp_never_overlaps")
    with folder_of(SOLUTIONS) as good, assembled(fixture) as late:
        traces = _batch_trace(tmp_path, {"good": good, "late": late})
    for starts, backward_end in _per_rank(traces["good"]).values():
        assert len(starts) == 5 and sum(s < backward_end for s in starts) >= 3
    for starts, backward_end in _per_rank(traces["late"]).values():
        assert starts and all(s >= backward_end for s in starts)
