"""The grader's feedback draws the student's own timeline (issue 14, item 5,
grader side; engine/timelines.py, platforms/batch.draw_timelines): one traced
step of 4.7's and 2.11's first graded run, timed by the ranks' trusted
processes, beside each submission's feedback; read here from the written
Chrome trace's own timestamps, as tests/test_publish_kit_timelines.py reads
the kit's."""
import csv
import json
import shutil
from pathlib import Path

import pytest

from helpers import all_reduces_against_backward, run_cli
from shardlab.autograder.engine.parts import Call, Case
from shardlab.autograder.engine.selfcheck import assembled, fixtures, folder_of
from shardlab.autograder.engine.timelines import drawn_cases, timeline
from shardlab.autograder.platforms import batch
from shardlab.autograder.platforms.otter import question_output
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.autograder.sandbox.process import Outcome

PNG = b"\x89PNG\r\n\x1a\n"
STEMS = ("bucketed-ddp", "fsdp")


def _fixture(name: str):
    return next(f for f in fixtures() if f.name == name)


@pytest.mark.platform
@pytest.mark.timeout(600)
def test_batch_feedback_draws_each_graded_run_from_the_trusted_trace(tmp_path):
    with (folder_of(SOLUTIONS) as good, assembled(_fixture("ddp_never_overlaps")) as late,
          assembled(_fixture("ddp_rank1_exits")) as crashed):
        roots = {"good": good, "late": late, "crashed": crashed}
        for name, root in roots.items():
            shutil.copytree(root, tmp_path / name)
    out = tmp_path / "out"
    done = run_cli("grade", *(str(tmp_path / n) for n in roots), "--jobs", "2", "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["submission"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert [rows[n]["4.7"] for n in roots] == ["2", "0", "0"]        # scored as the fixtures declare
    assert [rows[n]["2.11"] for n in roots] == ["1", "1", "1"]
    traces = {}
    for name in roots:
        feedback = (out / "feedback" / f"{name}.md").read_text()
        drawn = STEMS if name != "crashed" else ("fsdp",)           # a crashed run: no timeline, no error
        assert feedback.count("  - Timeline: rank 0: ") == len(drawn), feedback
        for stem in drawn:
            assert (out / "feedback" / name / f"{stem}.png").read_bytes()[:8] == PNG
            assert f"{name}/{stem}.png" in feedback and f"{name}/{stem}.trace.json" in feedback
        assert not (out / "feedback" / name / "bucketed-ddp.png").exists() or name != "crashed"
        report = json.loads((out / "results" / f"{name}.json").read_text())
        assert '"events"' not in json.dumps(report)                 # drawn, not kept in the results
        if name != "crashed":
            traces[name] = json.loads((out / "feedback" / name / "bucketed-ddp.trace.json").read_text())
    good, late = (all_reduces_against_backward(traces[n]["traceEvents"]) for n in ("good", "late"))
    assert sorted(good) == sorted(late) == [0, 1]                   # the first public case: 2 ranks
    assert any(sum(s < backward_end for s in starts) >= 3 for starts, backward_end in good.values())
    for starts, backward_end in late.values():
        assert starts and all(s >= backward_end for s in starts)
    assert traces["good"]["otherData"]["title"].startswith("ddp_train(world_size=2, model='frozen_mlp'")


def _step_events(k: int = 2) -> list[list[dict]]:
    """Two ranks' trace of DDP step `k`: two gradients, an all-reduce started between them."""
    return [[{"kind": "phase", "name": f"step {k}", "t": 1.0},
             {"kind": "grad", "param": 1, "phase": f"step {k}", "t": 1.1},
             {"kind": "collective", "op": "all_reduce", "seq": 1, "group": "world", "bytes": 8, "dtype": "f",
              "async": True, "phase": f"step {k}", "grads_before": 1, "start": 1.15, "end": 1.3},
             {"kind": "grad", "param": 0, "phase": f"step {k}", "t": 1.2}] for _ in range(2)]


@pytest.mark.pure
def test_the_first_public_case_is_drawn_and_a_failed_run_is_not():
    call = Call("buckets", "ddp_train", {"world_size": 2, "seed": 1})
    hidden, public = Case((call,), False, "hidden"), Case((call,), True, "public")
    assert drawn_cases({"4.7": [hidden, public], "1.1": [public]}) == {"4.7": (1, "bucketed-ddp", "step 2")}
    assert drawn_cases({"2.11": [hidden]}) == {"2.11": (0, "fsdp", "1")}
    assert timeline(public, "bucketed-ddp", "step 2", [Outcome(error="rank 1 ended its process")]) is None
    assert timeline(public, "bucketed-ddp", "step 2", [Outcome(value=[1, 2])]) is None     # no trace asked
    drawn = timeline(public, "bucketed-ddp", "step 2", [Outcome(value=[1, 2], trace=_step_events())])
    assert drawn["title"] == f"{call.show()}, step 2" and "1 of 1 all-reduces started before" in drawn["summary"]
    assert json.loads(json.dumps(drawn)) == drawn                   # plain JSON
    secret = timeline(hidden, "bucketed-ddp", "step 2", [Outcome(value=[1, 2], trace=_step_events())])
    assert "seed" not in secret["title"] and secret["title"].startswith("a hidden case of ddp_train (hidden)")
    assert timeline(public, "bucketed-ddp", "step 2", [Outcome(value=[1], trace=[[{"kind": "phase"}]])]) is None


@pytest.mark.pure
def test_feedback_names_the_drawing_and_gradescope_shows_the_summary(tmp_path: Path):
    drawn = timeline(Case((Call("buckets", "ddp_train", {"world_size": 2}),), True), "bucketed-ddp", "step 2",
                     [Outcome(value=[1, 2], trace=_step_events())])
    report = {"status": "ok", "score": 2, "max_score": 4, "questions": [{"id": "4", "title": "DDP", "score": 2,
              "max_score": 4, "parts": [
                  {"id": "4.7", "title": "overlap", "score": 2, "max_score": 2, "feedback": "ok", "timeline": drawn},
                  {"id": "4.8", "title": "other", "score": 0, "max_score": 2, "feedback": "no", "timeline": None}]}]}
    assert "rank 0: 1 of 1 all-reduces" in question_output(report["questions"][0])
    lines = batch.draw_timelines(report, tmp_path / "alice")
    assert len(lines) == 1 and lines[0].startswith("4.7: rank 0: 1 of 1 all-reduces")
    assert (tmp_path / "alice" / "bucketed-ddp.png").read_bytes()[:8] == PNG
    assert json.loads((tmp_path / "alice" / "bucketed-ddp.trace.json").read_text())["traceEvents"]
    text = batch.feedback_markdown("alice", report)
    assert text.count("  - Timeline: ") == 1 and "alice/bucketed-ddp.png" in text
    assert "timeline" not in report["questions"][0]["parts"][0]     # the events are drawn, then dropped
