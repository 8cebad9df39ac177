"""The timelines of one step (kit/timelines/__init__.py, kit/timelines/overlap.py), read
from the Chrome trace's own timestamps: the solutions' all-reduces start before
backward's last gradient, ddp_never_overlaps' all start after it; and the
pipeline's traced order beside 1F1B (kit/timelines/pipeline.py)."""
import json

import pytest

from shardlab.autograder.selfcheck import assembled, fixtures, folder_of
from shardlab.autograder.kit.timelines.drawing import draw_timelines
from shardlab.autograder.publish.stubs import SOLUTIONS
from helpers import all_reduces_against_backward

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


def _ddp_trace(kit_runs, root, out) -> list[dict]:
    runs = [r for q in kit_runs.values() for r in q]
    lines = draw_timelines(runs, str(root), out)
    assert len(lines) == 3 and all("no timeline" not in line for line in lines), lines
    assert (out / "bucketed-ddp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "fsdp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return json.loads((out / "bucketed-ddp.trace.json").read_text())["traceEvents"]


def test_the_solutions_all_reduces_start_during_backward(kit_runs, tmp_path):
    with folder_of(SOLUTIONS) as root:
        events = _ddp_trace(kit_runs, root, tmp_path)
    ranks = all_reduces_against_backward(events)
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
    for starts, backward_end in all_reduces_against_backward(events).values():
        assert starts and all(s >= backward_end for s in starts)



def test_a_gpipe_order_is_drawn_against_1f1b(kit_runs, tmp_path):
    fixture = next(f for f in fixtures() if f.name == "pipeline_gpipe_order")
    runs = [r for r in kit_runs["5"] if r["part"] == "5.10"]
    with assembled(fixture) as root:
        lines = draw_timelines(runs, str(root), tmp_path)
    # the first public run: p = 2, m = 4; every forward before any backward holds all 4 micro-batches
    assert lines == [f"pipeline: {tmp_path / 'pipeline.png'} and {tmp_path / 'pipeline.trace.json'}: stage 0: "
                     "FFFFBBBB, up to 4 in flight (1F1B: FFBFBFBB, up to 2); stage 1: FFFFBBBB, up to 4 in flight "
                     "(1F1B: FBFBFBFB, up to 1)"]
    assert (tmp_path / "pipeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trace = json.loads((tmp_path / "pipeline.trace.json").read_text())["traceEvents"]
    sends = sorted((e["ts"], e["name"]) for e in trace if e["ph"] == "X" and e["pid"] == 0)
    ops = [name.split(" ")[0].lstrip("i") for _, name in sends if name != "step 2"]      # isend/send, irecv/recv
    assert ops == ["send"] * 4 + ["recv"] * 4           # stage 0, measured: four activations out, four gradients in
