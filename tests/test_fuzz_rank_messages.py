"""Random and malformed frames from a student's process, sent to the trusted half of every scenario.

`serve_run` (a rank's trusted process, `sandbox.gloo.ranks.trusted`) runs
here in the test's own process, on a one-rank gloo group, and its student
process is a socketpair this test writes to: random JSON values for headers,
every field of every kind of frame with the wrong type, huge and deeply
nested values, unknown ops, marks with bogus phases, results of the wrong
shape, bytes that are not JSON at all, mixed with well-formed frames so the
trusted code behind the checks is reached too. Whatever arrives, the trusted
half must survive (no exception out of `serve_run`), send the grader exactly
one JSON message, and never blame the grader ("the grader's own part ...
failed"). And frames that fit every schema (the phases, marks and results
each scenario declares) must always make a report: after the checks, a
trusted `report` cannot fail. tests/test_attacks_rank_messages.py sends a
few such frames from real student processes.
"""
from __future__ import annotations

import json
import socket
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import torch.distributed as dist

from shardlab.autograder.kit.scenarios import SCENARIOS, load_all
from shardlab.autograder.kit.tracing import Tracer
from shardlab.autograder.sandbox.gloo.ranks.channel import DTYPES, Channel
from shardlab.autograder.sandbox.gloo.ranks.proxy import GATHER_INTO, REDUCE_OPS, SCATTER_FROM
from shardlab.autograder.sandbox.gloo.ranks.trusted import COLLECTIVES, serve_run

pytestmark = pytest.mark.sandbox

load_all()
MODEL_PARAMS = 6            # frozen_mlp's trainable tensors are fewer: grad marks beyond them still fit the schema
RUNS = {                    # one rank: every scenario's trusted half, as a grading calls it
    "fsdp_train": dict(world_size=1, model="frozen_mlp", optimizer="sgd", steps=2, seed=5),
    "ddp_train": dict(world_size=1, model="frozen_mlp", bucket_size_mb=1.0, optimizer="sgd", steps=2, seed=3),
    "pipeline_train": dict(world_size=1, microbatches=2, optimizer="sgd", steps=2, seed=3),
    "comm4d_mesh_forward": dict(world_size=1, tokens=4, d_model=4, d_ff=8, x=1, y=1, seed=1),
    "run_function": dict(world_size=1, function="probe", args=[]),
}
FIELDS = ("op", "id", "async", "dtype", "shape", "reduce", "src", "out_shape", "peer", "tag", "recv", "wait",
          "mark", "name", "param", "at", "i", "k", "result", "error", "state", "stored", "layout", "saved",
          "student", "value", "grads", "numel", "grad")
NAMES = (*COLLECTIVES, "isend", "irecv", "all_to_all", *map(str, DTYPES), *REDUCE_OPS, "phase", "grad", "unit",
         "step", "start", "end", "construction", "0", "0 forward", "1 backward", "step 1", "optimizer 2", "state",
         "layout", "probe", "")


def _deep(depth: int, inner=0):
    for _ in range(depth):
        inner = [inner]
    return inner


scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**62, max_value=2**200)
           | st.floats() | st.text(max_size=12) | st.sampled_from(NAMES))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=4),
                      max_leaves=12)
hostile = (values | st.builds(_deep, st.integers(25, 40))
           | st.lists(st.integers(min_value=-1, max_value=2**70), max_size=5)     # shapes torch cannot lay out
           | st.text(min_size=200, max_size=400))
garbage_header = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), hostile, max_size=6)


def _frame(header: dict, payload: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack("!II", len(head), len(payload)) + head + payload


@st.composite
def collective(draw) -> bytes:
    """A well-formed collective request (as the proxy sends it) on one rank."""
    op = draw(st.sampled_from(COLLECTIVES))
    n = draw(st.integers(0, 6))
    header = {"op": op, "id": draw(st.integers(1, 50)), "async": draw(st.booleans())}
    if op != "barrier":
        header.update(dtype="torch.float32", shape=[n])
    if op in GATHER_INTO or op in SCATTER_FROM or op == "reduce_scatter":
        header["out_shape"] = [n]
    if op in SCATTER_FROM or op in ("all_reduce", "reduce_scatter"):
        header["reduce"] = "SUM"
    if op == "broadcast":
        header["src"] = 0
    return _frame(header, bytes(4 * n) if op != "barrier" else b"")


def marks(scenario: str) -> st.SearchStrategy[bytes]:
    """Marks that fit what `scenario` declared: its phases, its kinds of mark."""
    expects = SCENARIOS[scenario].expects(**RUNS[scenario])
    out = (st.sampled_from(sorted(expects.phases)).map(lambda p: _frame({"mark": "phase", "name": p}))
           if expects.phases else st.nothing())
    kinds = expects.marks or {}
    if "unit" in kinds:
        out |= st.builds(lambda at, i: _frame({"mark": "unit", "at": at, "i": i}),
                         st.sampled_from(["start", "end"]), st.integers(0, 5))
    if "step" in kinds:
        out |= st.integers(0, 3).map(lambda k: _frame({"mark": "step", "k": k}))
    if "grad" in kinds:
        out |= st.integers(0, MODEL_PARAMS).map(lambda i: _frame({"mark": "grad", "param": i}))
    return out


numbers = st.floats() | st.integers(-10, 10) | st.booleans()
tensor_values = st.recursive(numbers, lambda inner: st.lists(inner, max_size=3), max_leaves=8)
state = st.dictionaries(st.sampled_from(["fc1.weight", "fc1.bias", "head.weight", "0.w_in.weight", "x"]),
                        tensor_values, max_size=4)
# the synchronized gradients each step reports (4.5's and 2.7's step-by-step check): a step's .grad by name
# (None: no gradient), and each FSDP unit's shard with its gradient
ddp_grads = st.lists(st.dictionaries(st.sampled_from(["fc1.weight", "head.weight", "x"]),
                                     st.none() | tensor_values, max_size=3), max_size=RUNS["ddp_train"]["steps"])
fsdp_grads = st.lists(st.lists(st.fixed_dictionaries({"numel": st.integers(0, 64), "grad": st.none() | tensor_values}),
                               max_size=3), max_size=RUNS["fsdp_train"]["steps"])
RESULTS = {               # results of the shape each scenario declares (`Scenario.result_schema`)
    "fsdp_train": st.fixed_dictionaries({"state": state, "stored": st.integers(0, 2**40), "grads": fsdp_grads}),
    "ddp_train": st.fixed_dictionaries({"state": state, "grads": ddp_grads, "layout": st.none() | st.lists(
        st.lists(st.integers(-2, 8), max_size=4), max_size=4)}),
    "pipeline_train": st.fixed_dictionaries({"state": state, "saved": st.lists(
        st.none() | st.integers(0, 9), max_size=3)}),
    "comm4d_mesh_forward": st.fixed_dictionaries({"student": values}),
    "run_function": st.fixed_dictionaries({"value": values}),
}


def results(scenario: str) -> st.SearchStrategy[bytes]:
    return RESULTS[scenario].map(lambda r: _frame({"result": r}))


def mutated(scenario: str) -> st.SearchStrategy[bytes]:
    """A well-formed frame with one field replaced, removed or added."""
    def mutate(data):
        frame, field, value, how = data
        header = json.loads(frame[8:8 + struct.unpack("!II", frame[:8])[0]])
        target = header["result"] if "result" in header and isinstance(header["result"], dict) else header
        if how == "remove":
            target.pop(field if field in target else next(iter(target), None), None)
        else:
            target[field if how == "add" else next(iter(target), field)] = value
        return _frame(header)
    return st.tuples(collective() | marks(scenario) | results(scenario), st.sampled_from(FIELDS), hostile,
                     st.sampled_from(["replace", "remove", "add"])).map(mutate)


raw = st.sampled_from([b"[" * 200_000, b"{" * 50, b"null", b"1", b'"x"', b"\xff\xfe", b"{\"op\": ", b"[]",
                       b'{"a": ' * 40 + b"1" + b"}" * 40]).map(
    lambda head: struct.pack("!II", len(head), 0) + head) | st.binary(max_size=40)


def hostile_frames(scenario: str) -> st.SearchStrategy[list[bytes]]:
    frame = (garbage_header.map(_frame) | mutated(scenario) | collective() | marks(scenario)
             | st.builds(_frame, garbage_header, st.binary(max_size=16)) | raw)
    ending = st.just([]) | results(scenario).map(lambda f: [f]) | st.just([_frame({"error": "ValueError: x"})])
    return st.tuples(st.lists(frame, max_size=8), ending).map(lambda t: t[0] + t[1])


def honest_frames(scenario: str) -> st.SearchStrategy[list[bytes]]:
    """Frames that each fit their schema, ending with a result."""
    return st.tuples(st.lists(collective() | marks(scenario), max_size=10), results(scenario)).map(
        lambda t: t[0] + [t[1]])


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    """A one-rank gloo group in this process, traced as a rank's trusted process traces it."""
    store = dist.FileStore(str(tmp_path_factory.mktemp("gloo") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    tracer = Tracer()
    tracer.install()
    mesh = SCENARIOS["comm4d_mesh_forward"]
    # the mesh forward needs 2 x 2 ranks: its trusted result is stood in for, the student's messages are not
    mesh.prepare = lambda rank, **args: (rank.memo.update(mesh={"measured": {}, "axes_ok": True,
                                                                "output_ok": True}) or ({}, {}))
    try:
        yield tracer
    finally:
        del mesh.prepare
        tracer.uninstall()
        dist.destroy_process_group()


def serve(tracer: Tracer, scenario: str, frames: list[bytes]) -> list[dict]:
    """`serve_run` of one run of `scenario`, its student process's frames written to it; the grader's messages."""
    ours, theirs = socket.socketpair()
    to_grader: list[dict] = []

    def write():
        try:
            for frame in frames:
                theirs.sendall(frame)
            theirs.shutdown(socket.SHUT_WR)
        except OSError:          # the trusted half stopped reading: the run is over
            pass

    def drain():                 # the run header and the replies, read as the student's process would
        try:
            while theirs.recv(1 << 16):
                pass
        except OSError:
            pass

    threads = [threading.Thread(target=write, daemon=True), threading.Thread(target=drain, daemon=True)]
    for t in threads:
        t.start()
    try:
        serve_run({"scenario": scenario, "module": "probe", "args": RUNS[scenario], "trace": True},
                  Channel(ours), lambda **msg: to_grader.append(msg), tracer, 0, 1)
    finally:
        ours.close()
        for t in threads:
            t.join(timeout=10)
        theirs.close()
    for msg in to_grader:
        json.dumps(msg)          # what `ranks.main` sends the grader: it must be JSON
    return to_grader


@pytest.mark.parametrize("scenario", sorted(RUNS))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_trusted_half_survives_anything_and_never_blames_the_grader(one_rank, scenario, data):
    frames = data.draw(hostile_frames(scenario))
    sent = serve(one_rank, scenario, frames)
    assert len(sent) == 1, sent
    msg = sent[0]
    assert "error" in msg or "died" in msg or "result" in msg, msg
    if "error" in msg:
        assert "grader's own part" not in msg["error"] and not msg.get("internal"), msg


@pytest.mark.parametrize("scenario", sorted(RUNS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_frames_that_fit_their_schemas_always_make_a_report(one_rank, scenario, data):
    sent = serve(one_rank, scenario, data.draw(honest_frames(scenario)))
    assert len(sent) == 1 and "result" in sent[0], sent


@pytest.mark.parametrize("scenario, frames, says", [
    ("fsdp_train", [_frame({"mark": "phase", "name": "0"})], "malformed phase mark: name is '0', not one of"),
    ("fsdp_train", [_frame({"mark": "unit", "at": "middle", "i": 0})], "malformed 'unit' mark: at is 'middle'"),
    ("ddp_train", [_frame({"mark": "grad", "param": 1.5})], "malformed 'grad' mark: param is 1.5, not an integer"),
    ("ddp_train", [_frame({"mark": "collective", "peer": 1})], "malformed mark: its kind is 'collective'"),
    ("pipeline_train", [_frame({"result": {"state": {}, "saved": "many"}})],
     "malformed result: result['saved'] is 'many', not a list"),
    ("comm4d_mesh_forward", [_frame({"result": [1, 2]})], "malformed result: result is a list of 2 items"),
    ("run_function", [_frame({"op": "all_to_all", "id": 1, "async": False})],
     "malformed collective request: op is 'all_to_all'"),
    ("run_function", [_frame({"op": "all_reduce", "id": "1", "async": False})],
     "malformed collective request: id is '1', not an integer"),
    ("run_function", [_frame({"op": "isend", "id": 1, "peer": 0, "tag": 0, "async": True, "dtype": "torch.float32",
                              "shape": [0, 2**62, 2**62]})], "malformed point-to-point request: shape is a list"),
    ("run_function", [struct.pack("!II", 200_000, 0) + b"[" * 200_000], "nested deeper than 32 levels"),
    ("run_function", [_frame({"error": ["not", "text"]})], "malformed error message: error is a list"),
])
def test_each_malformed_message_is_named_in_one_line(one_rank, scenario, frames, says):
    """The line names the student's process, what it sent and which field does not fit."""
    sent = serve(one_rank, scenario, frames)
    assert len(sent) == 1 and "error" in sent[0], sent
    error = sent[0]["error"]
    assert error.startswith("the student's process ") and says in error and "\n" not in error, error
