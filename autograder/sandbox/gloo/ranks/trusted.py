"""A rank's trusted process: performs its student process's collectives on the
real gloo group, records them, and runs the trusted halves of scenarios.

Student code never runs here. The student's process (forked before gloo
starts, then walled in by the `jail`) asks for collectives over a
socketpair (`ranks.proxy`); this process checks each request,
performs it with the other ranks through the traced torch.distributed
functions (`kit.tracing`), and sends the result back. The
trace, the order of the student's marks relative to it, and every
expected value are therefore out of the student's reach.

Per scenario (`serve_run`): `prepare` (trusted: the rank's own data and
weights), then the student half in the student's process, then `report`
(trusted). Every frame of the student's process is checked against its
kind's schema before it is read (`kit.schema`; its scenario's phases, marks
and result: `Scenario.expects`); one that does not fit fails the run as the
student's process's doing, in one line. Point-to-point ops are started when asked for and waited for when
the student's process waits (`ranks.p2p`).
Messages to the grader: {"at": label|null} while blocked in a collective,
then {"result": value} (with "events", the run's trace, when the run asked
for it: `traced`), {"error": text, "collectives": n} or {"died": true} when
the student's process ended. An error the trusted process found while the
student's process was still inside the run (a malformed or refused request,
a broken stream) also says {"mid_run": true}: that process's next frames
belong to the abandoned run, so its group must not run another scenario.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist

from shardlab.autograder.sandbox.gloo.ranks.proxy import GATHER_INTO, REDUCE_OPS, SCATTER_FROM
from shardlab.autograder.sandbox.gloo.ranks.channel import (TENSOR_FIELDS, Channel, ProtocolError, describe,
                                                             pack_tensors, tensor_bytes, tensor_from)
from shardlab.autograder.sandbox.gloo.ranks.p2p import P2P_REQUESTS, P2PFailed, P2PRequestError, PointToPoint
from shardlab.autograder.kit.scenarios import SCENARIOS, RankContext, StudentMessages, record_mark
from shardlab.autograder.kit.schema import Bool, Fields, Int, Malformed, Plain, Shape, Text, check
from shardlab.autograder.kit.tracing import Tracer, explain

MAX_MARKS = 100_000            # per scenario: more is a flood, not a training loop
MAX_ERROR_CHARS = 2000
MAX_STUDENT_ERROR_CHARS = 100_000   # an exception's line from the student's process (cut to MAX_ERROR_CHARS)
MAX_TRACE_EVENTS = 20_000     # a run's trace sent for a timeline; a training step has ~50

# the frames of the student's process (`ranks.proxy`), by kind, checked before use (`_checked`);
# a tensor's bytes must match its description (`channel.tensor_from`), a collective's sizes each other (`perform`)
COLLECTIVES = ("barrier", "all_reduce", "broadcast", "all_gather", "reduce_scatter", *GATHER_INTO, *SCATTER_FROM)
COLLECTIVE_REQUEST = Fields({"op": Text(choices=COLLECTIVES), "id": Int(), "async": Bool()},
                            {**TENSOR_FIELDS, "reduce": Text(choices=REDUCE_OPS), "src": Int(), "out_shape": Shape(),
                             "group": Text(40)})
WAIT = Fields({"wait": Plain()})          # its id is `PointToPoint.wait`'s to check: an outstanding op's
ERROR = Fields({"error": Text(MAX_STUDENT_ERROR_CHARS)})


class CollectiveRequestError(Exception):
    """The student's process asked for something no collective can do."""


def _reduce(name) -> dist.ReduceOp:
    op = getattr(dist.ReduceOp, str(name), None)
    if op is None:
        raise CollectiveRequestError(f"unknown reduce op {str(name)[:40]!r}")
    return op


def _output(header: dict, dtype: torch.dtype, numel: int) -> torch.Tensor:
    shape = header.get("out_shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise CollectiveRequestError("no output shape")
    n = 1
    for s in shape:
        n *= s
    if n != numel:
        raise CollectiveRequestError(f"an output of shape {shape} cannot hold {numel} elements")
    return torch.empty(shape, dtype=dtype)


def _group(header: dict, world_size: int, groups: dict) -> tuple[Any, list[int]]:
    """The process group a request names ("group": one of the scenario's `RankContext.groups`, e.g. a
    mesh axis) and its ranks; without a name, the default group of `world_size` ranks."""
    if "group" not in header:
        return None, list(range(world_size))
    name = header["group"]
    if name not in groups:
        raise CollectiveRequestError(f"no process group {str(name)[:40]!r} in this run "
                                     f"(its groups: {', '.join(groups) or 'the default one only'})")
    return groups[name], dist.get_process_group_ranks(groups[name])


def perform(header: dict, payload: bytearray, world_size: int, groups: dict | None = None) -> torch.Tensor | None:
    """One collective, on the real group (the default one, or one the scenario made and the request
    names: `_group`), through the traced functions."""
    op, is_async = header.get("op"), bool(header.get("async"))
    group, ranks = _group(header, world_size, groups or {})
    size = len(ranks)
    t = tensor_from(header, payload) if "dtype" in header else None
    if op == "barrier":
        work, result = dist.barrier(group=group, async_op=is_async), None
    elif t is None:
        raise CollectiveRequestError(f"{op} without a tensor")
    elif op == "all_reduce":
        work, result = dist.all_reduce(t, op=_reduce(header.get("reduce", "SUM")), group=group,
                                       async_op=is_async), t
    elif op == "broadcast":
        src = header.get("src")
        if not isinstance(src, int) or src not in ranks:
            raise CollectiveRequestError(f"broadcast from rank {src!r}, not one of the group's ranks {ranks}")
        work, result = dist.broadcast(t, src, group=group, async_op=is_async), t
    elif op in GATHER_INTO:
        result = _output(header, t.dtype, size * t.numel())
        work = getattr(dist, op)(result, t, group=group, async_op=is_async)
    elif op == "all_gather":
        parts = [torch.empty_like(t) for _ in range(size)]
        work = dist.all_gather(parts, t, group=group, async_op=is_async)
        if work is not None:
            work.wait()
            work = None
        result = torch.cat([p.reshape(-1) for p in parts])
    elif op in SCATTER_FROM or op == "reduce_scatter":
        if t.numel() % size:
            raise CollectiveRequestError(f"{op} of {t.numel()} elements over {size} ranks")
        result = _output(header, t.dtype, t.numel() // size)
        reduce = _reduce(header.get("reduce", "SUM"))
        if op in SCATTER_FROM:
            work = getattr(dist, op)(result, t, op=reduce, group=group, async_op=is_async)
        else:
            work = dist.reduce_scatter(result, list(t.reshape(-1).chunk(size)), op=reduce, group=group,
                                       async_op=is_async)
    else:
        raise CollectiveRequestError(f"{str(op)[:40]!r} is not a collective this group performs")
    if work is not None:
        work.wait()
    return result


def traced(run: dict, tracer: Tracer, ctx: RankContext) -> dict:
    """{"events": the run's timed trace} when the grader asked for it (`run["trace"]`,
    the runs its feedback draws: `kit.timelines`), else {}. Every event is a
    plain dict this process wrote: collective times measured here; phase,
    gradient and unit marks filed by `record_mark` when the student's process
    sent them (typed and cut to size there). A flood of events is no timeline."""
    events = tracer.events + ctx.marks
    return {"events": events} if run.get("trace") and len(events) <= MAX_TRACE_EVENTS else {}


def _checked(header: dict, expects: StudentMessages) -> str:
    """The kind of a frame from the student's process ("wait", "p2p",
    "collective", "mark", "result", "error" or "unknown"), after checking it
    against that kind's schema (Malformed). A point-to-point request is
    checked by `PointToPoint.issue`, a mark by `record_mark` (against its
    scenario's marks and phases) as it is filed."""
    if "wait" in header:
        check(header, WAIT, "wait for a point-to-point op")
        return "wait"
    if header.get("op") in P2P_REQUESTS:
        return "p2p"
    if "op" in header:
        check(header, COLLECTIVE_REQUEST, "collective request")
        return "collective"
    if "mark" in header:
        return "mark"
    if "result" in header:
        check(header, Fields({"result": expects.result}), "result")
        return "result"
    if "error" in header:
        check(header, ERROR, "error message")
        return "error"
    return "unknown"


def serve_run(run: dict, student: Channel, to_grader: Callable[..., None], tracer: Tracer,
              rank: int, world_size: int) -> None:
    """One scenario on this rank; ends with one message to the grader.

    Every frame of the student's process is checked against its schema
    before anything here reads it (`_checked`); one that does not fit ends
    the run as the student's process's doing. Only then may an exception
    be the grader's own (`prepare`, `report`)."""
    scenario = SCENARIOS[run["scenario"]]
    tracer.reset()
    ctx = RankContext(rank, world_size, tracer)
    p2p = PointToPoint(rank, world_size, lambda: tracer.phase)

    def failed(text: str, **extra) -> None:
        where = f" [{tracer.where()}]" if tracer.seq else ""
        to_grader(error=text[:MAX_ERROR_CHARS] + where, collectives=tracer.seq, **extra)

    def reply(header: dict, payload: bytes | memoryview = b"") -> None:
        """An answer to the student's process. One that closed its end gets none: its next
        frame is the end of the stream, which says so."""
        try:
            student.send(header, payload)
        except OSError:
            pass

    try:
        ctx.expects = scenario.expects(**run["args"])
        student_args, tensors = scenario.prepare(ctx, **run["args"])
    except Exception as exc:  # noqa: BLE001 - trusted code failed: the grader's problem
        text = explain(exc) or f"{type(exc).__name__}: {exc}"
        return failed(f"the grader's own part of {run['scenario']} failed: {text}", internal=True)
    metas, packed = pack_tensors(tensors)
    try:
        # the process groups the scenario made (mesh axes), by name and ranks: the student half's handles
        groups = {name: dist.get_process_group_ranks(g) for name, g in ctx.groups.items()}
        student.send({"run": {"scenario": run["scenario"], "module": run["module"], "args": student_args,
                              "tensors": metas, "groups": groups}}, packed)
    except OSError:
        return to_grader(died=True)
    marks = 0
    while True:
        try:
            frame = student.receive()
        except ProtocolError as exc:
            return failed(f"the student's process broke the rank protocol: {exc}", mid_run=True)
        except OSError:          # a reset connection: the process ended with replies unread
            return to_grader(died=True)
        if frame is None:
            return to_grader(died=True)
        header, payload = frame
        try:
            kind = _checked(header, ctx.expects)
            if kind == "p2p":
                p2p.issue(header, payload)
                continue
            if kind == "mark":
                marks += 1
                if marks > MAX_MARKS:
                    return failed(f"the student's process sent more than {MAX_MARKS} marks", mid_run=True)
                record_mark(ctx, header)
                continue
        except Malformed as exc:
            call_id = header.get("id", header.get("wait"))
            if type(call_id) is int:          # a request the student's process may be waiting on
                reply({"id": call_id, "failed": f"malformed {exc}"[:MAX_ERROR_CHARS]})
            return failed(f"the student's process sent a malformed {exc}", mid_run=True)
        except P2PFailed as exc:
            reply({"id": header["id"], "failed": str(exc)[:MAX_ERROR_CHARS]})
            return failed(str(exc), mid_run=True)
        except P2PRequestError as exc:
            reply({"id": header["id"], "failed": str(exc)[:MAX_ERROR_CHARS]})
            return failed(f"{header['op']}: {exc}", mid_run=True)
        if kind == "wait":                    # the answer of a point-to-point op: when it is waited for
            call_id = header["wait"]
            try:
                received = p2p.wait(call_id)
            except (P2PFailed, P2PRequestError) as exc:
                reply({"id": call_id, "failed": str(exc)[:MAX_ERROR_CHARS]})
                return failed(str(exc) if isinstance(exc, P2PFailed) else f"wait: {exc}", mid_run=True)
            if received is None:
                reply({"id": call_id})
            else:
                reply({"id": call_id, **describe(received)}, tensor_bytes(received))
        elif kind == "collective":
            try:
                result = perform(header, payload, world_size, ctx.groups)
            except (CollectiveRequestError, ProtocolError) as exc:
                reply({"id": header["id"], "failed": str(exc)})
                return failed(f"{header['op']}: {exc}", mid_run=True)
            except Exception as exc:  # noqa: BLE001 - the collective failed (a timeout, a mismatch)
                reply({"id": header["id"], "failed": str(exc)[:MAX_ERROR_CHARS]})
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                return failed(explain(exc) or f"{type(exc).__name__}: {first}", mid_run=True)
            if result is None:
                reply({"id": header["id"]})
            else:
                reply({"id": header["id"], **describe(result)}, tensor_bytes(result))
        elif kind == "result":
            try:
                p2p.drain()
            except P2PFailed as exc:
                return failed(str(exc))
            try:
                value = scenario.report(ctx, header["result"], **run["args"])
                return to_grader(result=value, **traced(run, tracer, ctx))
            except Exception as exc:  # noqa: BLE001 - the result fits its schema: the grader's problem
                return failed(f"the grader's own part of {run['scenario']} failed: {exc}", internal=True)
        elif kind == "error":
            return failed(header["error"])
        else:
            return failed("the student's process broke the rank protocol: an unknown message", mid_run=True)
