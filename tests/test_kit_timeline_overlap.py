"""kit/timelines/overlap.py on hand-made traces of two ranks: a DDP step whose
all-reduces start during backward, one whose all-reduces all start after the
last gradient, and an FSDP step that prefetches. The Chrome trace's numbers
are checked against the inputs, in µs."""
import ast
import json
import struct
import sys
from collections import Counter
from pathlib import Path

import pytest

from shardlab.autograder.kit.timelines import overlap as timeline
from shardlab.autograder.kit.timelines.overlap import (chrome_trace, comm_spans, compute_spans, draw, overlap_summary,
                                                  step_window, write_timeline)

pytestmark = pytest.mark.pure

T0 = 100.0          # seconds: every time below is T0 + a whole number of µs


def t(us: int) -> float:
    return T0 + us * 1e-6


def phase(name: str, us: int) -> dict:
    return {"kind": "phase", "name": name, "t": t(us)}


def grad(param: int, step: str, us: int) -> dict:
    return {"kind": "grad", "param": param, "phase": step, "t": t(us)}


def coll(op: str, seq: int, nbytes: int, is_async: bool, step: str, start: int, end: int | None) -> dict:
    return {"kind": "collective", "op": op, "seq": seq, "bytes": nbytes, "async": is_async, "phase": step,
            "start": t(start), "end": None if end is None else t(end)}


def unit(at: str, i: int, us: int) -> dict:
    return {"kind": "unit", "at": at, "i": i, "t": t(us)}


def ddp_rank(shift: int, overlapping: bool) -> list[dict]:
    """Steps 1 to 3 of one rank; step 2 from 10_000 + shift µs: gradients of
    params 3, 2, 1, 0 at 12, 14, 16, 18 ms; overlapping: async all-reduces
    as buckets fill (the third still running when the fourth starts), else
    blocking ones after the last gradient. The events are not in time order."""
    s = shift
    if overlapping:
        comms = [coll("all_reduce", 5, 480, True, "step 2", s + 12_500, s + 14_500),
                 coll("all_reduce", 6, 1_024, True, "step 2", s + 14_500, s + 17_500),
                 coll("all_reduce", 7, 96, True, "step 2", s + 16_500, s + 19_000),
                 coll("all_reduce", 8, 2_048, True, "step 2", s + 18_500, None if shift else s + 21_000)]
    else:
        comms = [coll("all_reduce", 5 + k, 480 * (k + 1), False, "step 2", s + 18_500 + 2_000 * k,
                      s + 20_000 + 2_000 * k) for k in range(4)]
    return comms + [
        phase("step 1", s), grad(0, "step 1", s + 5_000),
        coll("all_reduce", 1, 480, True, "step 1", s + 5_100, s + 6_000),
        phase("step 2", s + 10_000), *[grad(p, "step 2", s + 12_000 + 2_000 * k) for k, p in enumerate((3, 2, 1, 0))],
        phase("step 3", s + 30_000), grad(3, "step 3", s + 31_000),
        coll("all_reduce", 9, 480, True, "step 3", s + 31_500, s + 32_000)]


def fsdp_rank(shift: int, prefetch: bool) -> list[dict]:
    """Steps 0 to 2 of one rank; step 1 from 10_000 + shift µs. Three units;
    with prefetch unit i + 1's all-gather is issued during unit i's forward,
    without it at unit i + 1's start."""
    s = shift + 10_000
    if prefetch:
        gathers = [(150, 900), (1_000, 1_800), (2_150, 2_900)]
    else:
        gathers = [(150, 900), (2_150, 2_900), (3_150, 3_700)]
    return [
        phase("0 forward", shift), unit("start", 0, shift + 100), unit("end", 0, shift + 200),
        coll("all_gather_into_tensor", 1, 256, True, "0 forward", shift + 120, shift + 150),
        {"kind": "step", "k": 1, "t": t(s - 10)}, phase("1 forward", s),
        *[coll("all_gather_into_tensor", 10 + i, 256 * (i + 1), True, "1 forward", s + a, s + b)
          for i, (a, b) in enumerate(gathers)],
        unit("start", 0, s + 100), unit("end", 0, s + 2_000), unit("start", 1, s + 2_100), unit("end", 1, s + 3_000),
        unit("start", 2, s + 3_100), unit("end", 2, s + 3_800),
        phase("1 backward", s + 4_000),
        coll("reduce_scatter_tensor", 13, 768, True, "1 backward", s + 4_500, s + 6_000),
        phase("1 finish", s + 7_000), phase("1 optimizer", s + 7_500),
        {"kind": "step", "k": 2, "t": t(s + 7_990)}, phase("2 forward", s + 8_000), unit("start", 0, s + 8_100),
        coll("all_gather_into_tensor", 14, 256, True, "2 forward", s + 8_150, s + 8_900)]


@pytest.fixture(scope="module")
def overlapping():
    return step_window([ddp_rank(0, True), ddp_rank(500, True)], "step 2")


@pytest.fixture(scope="module")
def never():
    return step_window([ddp_rank(0, False), ddp_rank(500, False)], "step 2")


@pytest.fixture(scope="module")
def fsdp():
    return step_window([fsdp_rank(0, True), fsdp_rank(300, True)], "1")


def xs(trace: dict, pid: int, lane: str) -> list[dict]:
    """The complete events of one rank's compute lane (tid 0) or communication lane (tid >= 1)."""
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == pid
            and (e["tid"] == 0) == (lane == "compute")]


def test_a_window_holds_one_step_and_where_it_ended(overlapping, fsdp):
    for rank, events in enumerate(overlapping):
        times = [e["t"] if "t" in e else e["start"] for e in events]
        assert times == sorted(times)
        assert {e.get("phase") for e in events if e["kind"] != "phase"} == {"step 2"}
        assert events[-1] == phase("step 3", 500 * rank + 30_000)           # the next phase: where step 2 ended
        assert sum(e["kind"] == "grad" for e in events) == 4
    for events in fsdp:
        assert {e["phase"] for e in events if e["kind"] == "collective"} == {"1 forward", "1 backward"}
        assert sum(e["kind"] == "unit" for e in events) == 6                # step 1's units, not step 0's or 2's
        assert events[-1]["name"] == "2 forward"
    assert step_window([ddp_rank(0, True)], "step 7") == [[]]


def test_the_ddp_trace_in_microseconds(overlapping):
    trace = chrome_trace(overlapping, "a DDP step")
    assert json.loads(json.dumps(trace, allow_nan=False)) == trace
    assert trace["displayTimeUnit"] == "ms" and trace["otherData"] == {"title": "a DDP step"}
    names = {(e["pid"], e["tid"], e["name"]): e["args"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert names[(0, 0, "process_name")] == {"name": "rank 0"} and names[(1, 0, "process_name")] == {"name": "rank 1"}
    assert names[(0, 0, "thread_name")] == {"name": "compute"}
    assert names[(0, 1, "thread_name")] == {"name": "communication"}
    for rank in (0, 1):
        s = 500 * rank - 10_000                     # µs: the origin is rank 0's "step 2" at 10_000
        compute = xs(trace, rank, "compute")
        assert [(e["name"], e["ts"], e["dur"]) for e in compute] == [
            ("forward (and backward up to the first gradient)", s + 10_000, 2_000),
            ("backward: param 2", s + 12_000, 2_000), ("backward: param 1", s + 14_000, 2_000),
            ("backward: param 0", s + 16_000, 2_000),
            ("after backward: finish + optimizer", s + 18_000, 12_000)]
        grads = [(e["name"], e["ts"]) for e in trace["traceEvents"] if e["ph"] == "i" and e["pid"] == rank]
        assert grads[:4] == [(f"gradient of param {p} ready", s + 12_000 + 2_000 * k)
                             for k, p in enumerate((3, 2, 1, 0))]
        assert grads[4:] == [("backward ends", s + 18_000)]
        comms = xs(trace, rank, "communication")
        assert Counter(e["args"]["seq"] for e in comms) == Counter({5: 1, 6: 1, 7: 1, 8: 1})
        assert {e["args"]["seq"]: (e["args"]["bytes"], e["ts"], e["tid"]) for e in comms} == {
            5: (480, s + 12_500, 1), 6: (1_024, s + 14_500, 1), 7: (96, s + 16_500, 2), 8: (2_048, s + 18_500, 1)}
        assert all(e["cat"] == "collective" and e["args"]["async"] and e["args"]["phase"] == "step 2" for e in comms)
        last = next(e for e in comms if e["args"]["seq"] == 8)
        assert last["name"] == "all_reduce #8 (2,048 B)"
        if rank == 0:
            assert last["dur"] == 2_500 and last["args"]["finished"] and "note" not in last["args"]
        else:                                       # never seen to finish: drawn to where the step ended
            assert last["dur"] == 30_000 - 18_500 and not last["args"]["finished"]
            assert "never observed to finish" in last["args"]["note"]
        assert names[(rank, 2, "thread_name")] == {"name": "communication 2 (overlapping)"}


def test_no_two_events_of_a_row_overlap_unless_nested(overlapping, fsdp):
    """The JSON trace format shows only nested events on one thread (Perfetto draws others wrongly)."""
    for trace in (chrome_trace(overlapping, ""), chrome_trace(fsdp, "")):
        rows = {}
        for e in trace["traceEvents"]:
            if e["ph"] == "X":
                rows.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
        for spans in rows.values():
            spans.sort()
            assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:]))


def backward_end_and_starts(trace: dict, rank: int) -> tuple[float, list[float]]:
    end = next(e["ts"] for e in trace["traceEvents"] if e["ph"] == "i" and e["pid"] == rank
               and e["name"] == "backward ends")
    return end, [e["ts"] for e in xs(trace, rank, "communication")]


def test_overlap_is_read_off_the_trace_and_said(overlapping, never):
    a, b = chrome_trace(overlapping, ""), chrome_trace(never, "")
    for rank in (0, 1):
        end, starts = backward_end_and_starts(a, rank)
        assert sum(s < end for s in starts) == 3
        end, starts = backward_end_and_starts(b, rank)
        assert len(starts) == 4 and all(s > end for s in starts)
    said_a, said_b = overlap_summary(overlapping), overlap_summary(never)
    assert said_a == ("rank 0: 3 of 4 all-reduces started before backward ended (the first 5.50 ms before); "
                      "rank 1: 3 of 4 all-reduces started before backward ended (the first 5.50 ms before)")
    assert said_b == ("rank 0: no all-reduce started before backward ended (the first 0.50 ms after): nothing "
                      "overlaps; rank 1: no all-reduce started before backward ended (the first 0.50 ms after): "
                      "nothing overlaps")


def test_the_fsdp_trace_and_its_prefetch(fsdp):
    trace = chrome_trace(fsdp, "an FSDP step")
    for rank in (0, 1):
        s = 300 * rank + 10                         # µs: the origin is rank 0's step mark, 10 µs before "1 forward"
        assert [(e["name"], e["ts"], e["dur"]) for e in xs(trace, rank, "compute")] == [
            ("forward: unit 0", s + 100, 1_900), ("forward: unit 1", s + 2_100, 900),
            ("forward: unit 2", s + 3_100, 700), ("backward", s + 4_000, 3_000), ("finish", s + 7_000, 500),
            ("optimizer", s + 7_500, 500)]
        comms = xs(trace, rank, "communication")
        assert [(e["name"], e["ts"], e["dur"]) for e in comms] == [
            ("all_gather_into_tensor #10 (256 B)", s + 150, 750),
            ("all_gather_into_tensor #11 (512 B)", s + 1_000, 800),
            ("all_gather_into_tensor #12 (768 B)", s + 2_150, 750),
            ("reduce_scatter_tensor #13 (768 B)", s + 4_500, 1_500)]
        assert backward_end_and_starts(trace, rank)[0] == s + 7_000        # where "finish" starts
    assert overlap_summary(fsdp).split("; ")[0] == (
        "rank 0: 2 of 2 next-unit all-gathers were issued (async) before the previous unit's forward ended "
        "(prefetches, the earliest 1.00 ms before)")
    late = step_window([fsdp_rank(0, False), fsdp_rank(300, False)], "1")
    assert overlap_summary(late).startswith(
        "rank 0: no all-gather was issued (async) before the previous unit's forward ended: no prefetch")


def test_spans_of_one_rank(overlapping):
    events = overlapping[1]
    assert all(s["end"] >= s["start"] for s in compute_spans(events))
    spans = comm_spans(events)
    assert [s["track"] for s in spans] == [0, 0, 1, 0]
    assert spans[-1]["end"] == t(500 + 30_000) and not spans[-1]["finished"]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_draw_writes_a_png_and_leaves_no_figure_open(overlapping, never, fsdp, tmp_path):
    for name, ranks in (("a", overlapping), ("b", never), ("c", fsdp)):
        draw(ranks, tmp_path / f"{name}.png", f"case {name}", overlap_summary(ranks).replace("; ", "\n"))
        width, height = png_size(tmp_path / f"{name}.png")
        assert width == 1100 and 400 < height < 1200, (name, width, height)     # 10 in at 110 dpi
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or pyplot.get_fignums() == []


def test_write_timeline_writes_both_files(overlapping, tmp_path):
    png, trace = write_timeline(overlapping, tmp_path / "out", "ddp", "a DDP step")
    assert (png, trace) == (tmp_path / "out" / "ddp.png", tmp_path / "out" / "ddp.trace.json")
    assert png_size(png)[0] == 1100
    assert json.loads(trace.read_text()) == chrome_trace(overlapping, "a DDP step")


def test_the_module_stands_alone():
    """The starter kit ships it as is: the standard library at import time, matplotlib only inside draw()."""
    tree = ast.parse(Path(timeline.__file__).read_text())
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert top <= set(sys.stdlib_module_names) | {"__future__"}, top
    every = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    every |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.startswith("shardlab") for name in every), every
    assert {name.split(".")[0] for name in every} - top <= {"matplotlib", "numpy"}
