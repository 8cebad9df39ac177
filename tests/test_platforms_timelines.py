"""The grader's feedback draws the student's own timeline (issue 14, item 5,
grader side; `grading.case_timeline`, `batch.draw_report_timelines`): one traced
step of 4.7's, 2.11's and 5.10's first graded run, timed by the ranks'
trusted processes, beside each submission's feedback; read here from the
written Chrome trace's own timestamps, as tests/test_kit_timelines.py
reads the kit's, and for the pipeline from the orders drawn (issue 16)."""
import csv
import json
import shutil
from pathlib import Path

import pytest

from helpers import all_reduces_against_backward, run_cli
from shardlab.autograder.core.parts import Call, Case
from shardlab.autograder.selfcheck import assembled, fixtures, folder_of
from shardlab.autograder.engine.grading import case_timeline, drawn_case
from shardlab.autograder.platforms import batch
from shardlab.autograder.platforms.otter import question_output
from shardlab.autograder.questions import all_parts
from shardlab.autograder.kit.timelines.pipeline import draw_traced, drawn_schedules, pipeline_summary, traced_orders
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.autograder.sandbox.process import Outcome

PNG = b"\x89PNG\r\n\x1a\n"
STEMS = ("bucketed-ddp", "fsdp", "pipeline")
DDP, PIPELINE = (next(p for p in all_parts() if p.id == part) for part in ("4.7", "5.10"))


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
        with assembled(_fixture("pipeline_gpipe_order")) as gpipe:     # late DDP and GPipe's order in one
            shutil.copy(gpipe / "assignments" / "pipeline.py", tmp_path / "late" / "assignments" / "pipeline.py")
    out = tmp_path / "out"
    done = run_cli("grade", *(str(tmp_path / n) for n in roots), "--jobs", "2", "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["submission"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert [rows[n]["4.7"] for n in roots] == ["2", "0", "0"]        # scored as the fixtures declare
    assert [rows[n]["2.11"] for n in roots] == ["1", "1", "1"]
    assert [rows[n]["5.10"] for n in roots] == ["3", "0", "3"]
    traces = {}
    for name in roots:
        feedback = (out / "feedback" / f"{name}.md").read_text()
        drawn = STEMS if name != "crashed" else ("fsdp", "pipeline")   # a crashed run: no timeline, no error
        assert feedback.count("  - Timeline: ") == len(drawn), feedback
        # p = 2, m = 4 (the first public case): 1F1B runs one warm-up forward on stage 0, none on stage 1
        assert ("stage 0: FFFFBBBB, up to 4 in flight (1F1B: FFBFBFBB, up to 2); stage 1: FFFFBBBB, up to 4 in "
                "flight (1F1B: FBFBFBFB, up to 1)" if name == "late" else
                "stage 0: FFBFBFBB, up to 2 in flight, as 1F1B; stage 1: FBFBFBFB, up to 1 in flight, as 1F1B") \
            in feedback, feedback
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
    assert drawn_case([hidden, public]) == 1 and drawn_case([hidden, hidden]) is None     # a hidden run is never drawn
    assert [p.id for p in all_parts() if p.drawn] == ["2.11", "4.7", "5.10"]    # the definitions say which
    assert DDP.drawn == ("bucketed-ddp", "step 2", "overlap")
    assert case_timeline(DDP, public, [Outcome(error="rank 1 ended its process")]) is None
    assert case_timeline(DDP, public, [Outcome(value=[1, 2])]) is None     # no trace asked
    drawn = case_timeline(DDP, public, [Outcome(value=[1, 2], trace=_step_events())], True)
    assert drawn["title"] == f"{call.show()}, step 2" and "1 of 1 all-reduces started before" in drawn["summary"]
    assert json.loads(json.dumps(drawn)) == drawn                   # plain JSON
    secret = case_timeline(DDP, hidden, [Outcome(value=[1, 2], trace=_step_events())])
    assert "seed" not in secret["title"] and secret["title"].startswith("a hidden case of ddp_train (hidden)")
    assert case_timeline(DDP, public, [Outcome(value=[1], trace=[[{"kind": "phase"}]])]) is None


@pytest.mark.pure
def test_feedback_names_the_drawing_and_gradescope_shows_the_summary(tmp_path: Path):
    drawn = case_timeline(DDP, Case((Call("buckets", "ddp_train", {"world_size": 2}),), True),
                          [Outcome(value=[1, 2], trace=_step_events())], True)
    report = {"status": "ok", "score": 2, "max_score": 4, "questions": [{"id": "4", "title": "DDP", "score": 2,
              "max_score": 4, "parts": [
                  {"id": "4.7", "title": "overlap", "score": 2, "max_score": 2, "feedback": "ok", "timeline": drawn},
                  {"id": "4.8", "title": "other", "score": 0, "max_score": 2, "feedback": "no", "timeline": None}]}]}
    assert "rank 0: 1 of 1 all-reduces" in question_output(report["questions"][0])
    lines = batch.draw_report_timelines(report, tmp_path / "alice")
    assert len(lines) == 1 and lines[0].startswith("4.7: rank 0: 1 of 1 all-reduces")
    assert (tmp_path / "alice" / "bucketed-ddp.png").read_bytes()[:8] == PNG
    assert json.loads((tmp_path / "alice" / "bucketed-ddp.trace.json").read_text())["traceEvents"]
    text = batch.feedback_markdown("alice", report)
    assert text.count("  - Timeline: ") == 1 and "alice/bucketed-ddp.png" in text
    assert "timeline" not in report["questions"][0]["parts"][0]     # the events are drawn, then dropped


def _pipeline_events(*orders: str) -> list[list[dict]]:
    """Each stage's trace of step 2 for its order of forwards (F) and backwards (B),
    as the trusted processes record it: a forward sends its activation on (the last
    stage's waits for it), a backward sends its gradient back (stage 0's waits for it)."""
    p, ranks = len(orders), []
    for s, order in enumerate(orders):
        events, seq = [{"kind": "phase", "name": "step 2", "t": 0.0}], 0
        for k, kind in enumerate(order):
            before, after = (s - 1, s + 1) if kind == "F" else (s + 1, s - 1)   # where its input comes from, goes to
            ops = [("recv", q) for q in (before,) if 0 <= q < p] + [("send", q) for q in (after,) if 0 <= q < p]
            for op, peer in ops:
                seq += 1
                events.append({"kind": "collective", "op": "i" + op, "seq": seq, "peer": peer, "bytes": 96,
                               "async": True, "phase": "step 2", "start": k + seq / 100, "end": k + 0.5,
                               "waited": seq})
        ranks.append(events + [{"kind": "phase", "name": "optimizer 2", "t": 99.0}])
    return ranks


@pytest.mark.pure
def test_the_pipeline_drawing_shows_the_traced_order_beside_1f1b(tmp_path: Path):
    case = Case((Call("pipeline", "pipeline_train", {"world_size": 2, "microbatches": 4}),), True)
    ideal = [{"order": "FFBFBFBB"}, {"order": "FBFBFBFB"}]           # 1F1B, p = 2, m = 4 (docs/spec.md)
    gpipe = _pipeline_events("FFFFBBBB", "FFFFBBBB")
    assert traced_orders(gpipe) == ["FFFFBBBB", "FFFFBBBB"]
    drawn = case_timeline(PIPELINE, case, [Outcome(value=[1, 2], trace=gpipe)], ideal)
    assert drawn["ideal"] == ["FFBFBFBB", "FBFBFBFB"] and drawn["kind"] == "pipeline"
    assert drawn["summary"].startswith("stage 0: FFFFBBBB, up to 4 in flight (1F1B: FFBFBFBB, up to 2)")
    mine, best, how = drawn_schedules(traced_orders(drawn["events"]), drawn["ideal"])
    assert how.startswith("laid out")
    stage0 = sorted((op for op in mine if op.stage == 0), key=lambda op: op.start)
    assert "".join(op.kind for op in stage0) == "FFFFBBBB" and [op.microbatch for op in stage0] == [0, 1, 2, 3] * 2
    # t_f = 1, t_b = 2: stage 1's first backward (of micro-batch 0) ends at 1 + 4 + 2 = 7, where stage 0's begins
    assert stage0[4].start == 7 and max(op.end for op in mine) == max(op.end for op in best) == 15
    ideal0 = sorted((op for op in best if op.stage == 0), key=lambda op: op.start)
    assert "".join(op.kind for op in ideal0) == "FFBFBFBB" and ideal0[2].start == 4    # B0 as soon as stage 1 ends it
    # a trace whose orders cannot all run (stage 1 sends back a gradient before any forward) is drawn back to back
    assert drawn_schedules(["FB", "BF"], ["FB", "FB"])[2].startswith("drawn back to back: they cannot all run")
    report = {"status": "ok", "score": 0, "max_score": 3, "questions": [{"id": "5", "title": "Pipeline", "score": 0,
              "max_score": 3, "parts": [{"id": "5.10", "title": "order", "score": 0, "max_score": 3,
                                         "feedback": "no", "timeline": drawn}]}]}
    lines = batch.draw_report_timelines(report, tmp_path / "bob")
    assert lines == [f"5.10: {drawn['summary']} (one traced step of your first graded run: bob/pipeline.png, and "
                     "bob/pipeline.trace.json for https://ui.perfetto.dev)"]
    assert (tmp_path / "bob" / "pipeline.png").read_bytes()[:8] == PNG
    trace = json.loads((tmp_path / "bob" / "pipeline.trace.json").read_text())["traceEvents"]
    assert sum(e["ph"] == "X" and e["name"].startswith("isend") for e in trace) == 8    # 4 per stage, measured


@pytest.mark.pure
def test_a_flood_of_pipeline_ops_gives_a_short_line_and_no_bars(tmp_path: Path):
    flood = _pipeline_events("F" * 3000 + "B" * 3000, "FB" * 3000)     # a student's 12,000 messages in one step
    ideal = ["FFBFBFBB", "FBFBFBFB"]
    line = pipeline_summary(flood, ideal)
    assert len(line) < 400 and "(6,000 in all), up to 3000 in flight" in line
    mine, best, how = drawn_schedules(traced_orders(flood), ideal)
    assert mine == [] and len(best) == 16 and how.startswith("not drawn: 12,000 forwards and backwards")
    draw_traced(flood, ideal, tmp_path / "flood.png", "a flood")
    assert (tmp_path / "flood.png").read_bytes()[:8] == PNG


@pytest.mark.pure
def test_a_pipeline_drawn_before_is_written_from_its_bytes_and_only_then(tmp_path: Path, monkeypatch):
    """A batch draws the same traced orders for most submissions: the second
    drawing of the same orders, 1F1B orders and title is the first one's bytes;
    other times in the trace (they are not drawn) do not matter, and a different
    order or title is drawn anew (`write_pipeline_timeline`)."""
    from shardlab.autograder.kit.timelines import pipeline
    monkeypatch.setattr(pipeline, "_DRAWN", {})
    drawn = []

    def counting(ranks, ideal, path, title):
        drawn.append(traced_orders(ranks))
        return draw_traced(ranks, ideal, path, title)

    monkeypatch.setattr(pipeline, "draw_traced", counting)
    ideal = ["FFBFBFBB", "FBFBFBFB"]
    one, later = _pipeline_events(*ideal), _pipeline_events(*ideal)
    for stage in later:                                    # the same orders, measured at other times
        for e in stage:
            if "start" in e:
                e["start"] += 7.5
    pngs = [pipeline.write_pipeline_timeline(events, ideal, tmp_path / name, "pipeline", title)[0].read_bytes()
            for name, events, title in (("a", one, "t"), ("b", later, "t"), ("c", one, "another title"),
                                        ("d", _pipeline_events("FFFFBBBB", "FFFFBBBB"), "t"))]
    assert drawn == [ideal, ideal, ["FFFFBBBB", "FFFFBBBB"]]     # b was not drawn again
    assert pngs[0] == pngs[1] and len({pngs[0], pngs[2], pngs[3]}) == 3
    assert json.loads((tmp_path / "b" / "pipeline.trace.json").read_text()) != \
        json.loads((tmp_path / "a" / "pipeline.trace.json").read_text())      # its own measured times
