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
(trusted). Point-to-point ops are started when asked for and waited for when
the student's process waits (`ranks.p2p`).
Messages to the grader: {"at": label|null} while blocked in a collective,
then {"result": value} (with "events", the run's trace, when the run asked
for it: `traced`), {"error": text, "collectives": n} or {"died": true} when
the student's process ended.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from shardlab.autograder.sandbox.gloo.ranks.proxy import GATHER_INTO, SCATTER_FROM
from shardlab.autograder.sandbox.gloo.ranks.channel import (Channel, ProtocolError, describe, pack_tensors,
                                                             tensor_bytes, tensor_from)
from shardlab.autograder.sandbox.gloo.ranks.p2p import P2P_REQUESTS, P2PFailed, P2PRequestError, PointToPoint
from shardlab.autograder.kit.scenarios import SCENARIOS, RankContext, record_mark
from shardlab.autograder.kit.tracing import Tracer, explain

MAX_MARKS = 100_000            # per scenario: more is a flood, not a training loop
MAX_ERROR_CHARS = 2000
MAX_TRACE_EVENTS = 20_000     # a run's trace sent for a timeline; a training step has ~50


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


def perform(header: dict, payload: bytearray, world_size: int) -> torch.Tensor | None:
    """One collective, on the real group, through the traced functions."""
    op, is_async = header.get("op"), bool(header.get("async"))
    t = tensor_from(header, payload) if "dtype" in header else None
    if op == "barrier":
        work, result = dist.barrier(async_op=is_async), None
    elif t is None:
        raise CollectiveRequestError(f"{op} without a tensor")
    elif op == "all_reduce":
        work, result = dist.all_reduce(t, op=_reduce(header.get("reduce", "SUM")), async_op=is_async), t
    elif op == "broadcast":
        src = header.get("src")
        if not isinstance(src, int) or not 0 <= src < world_size:
            raise CollectiveRequestError(f"broadcast from rank {src!r} of {world_size}")
        work, result = dist.broadcast(t, src, async_op=is_async), t
    elif op in GATHER_INTO:
        result = _output(header, t.dtype, world_size * t.numel())
        work = getattr(dist, op)(result, t, async_op=is_async)
    elif op == "all_gather":
        parts = [torch.empty_like(t) for _ in range(world_size)]
        work = dist.all_gather(parts, t, async_op=is_async)
        if work is not None:
            work.wait()
            work = None
        result = torch.cat([p.reshape(-1) for p in parts])
    elif op in SCATTER_FROM or op == "reduce_scatter":
        if t.numel() % world_size:
            raise CollectiveRequestError(f"{op} of {t.numel()} elements over {world_size} ranks")
        result = _output(header, t.dtype, t.numel() // world_size)
        reduce = _reduce(header.get("reduce", "SUM"))
        if op in SCATTER_FROM:
            work = getattr(dist, op)(result, t, op=reduce, async_op=is_async)
        else:
            work = dist.reduce_scatter(result, list(t.reshape(-1).chunk(world_size)), op=reduce,
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


def serve_run(run: dict, student: Channel, to_grader: Callable[..., None], tracer: Tracer,
              rank: int, world_size: int) -> None:
    """One scenario on this rank; ends with one message to the grader."""
    scenario = SCENARIOS[run["scenario"]]
    tracer.reset()
    ctx = RankContext(rank, world_size, tracer)
    p2p = PointToPoint(rank, world_size, lambda: tracer.phase)

    def failed(text: str, **extra) -> None:
        where = f" [{tracer.where()}]" if tracer.seq else ""
        to_grader(error=text[:MAX_ERROR_CHARS] + where, collectives=tracer.seq, **extra)

    try:
        student_args, tensors = scenario.prepare(ctx, **run["args"])
    except Exception as exc:  # noqa: BLE001 - trusted code failed: the grader's problem
        text = explain(exc) or f"{type(exc).__name__}: {exc}"
        return failed(f"the grader's own part of {run['scenario']} failed: {text}", internal=True)
    metas, packed = pack_tensors(tensors)
    student.send({"run": {"scenario": run["scenario"], "module": run["module"], "args": student_args,
                          "tensors": metas}}, packed)
    marks = 0
    while True:
        try:
            frame = student.receive()
        except (ProtocolError, OSError) as exc:
            return failed(f"the student's process broke the rank protocol: {exc}")
        if frame is None:
            return to_grader(died=True)
        header, payload = frame
        if header.get("op") in P2P_REQUESTS or "wait" in header:
            call_id = header.get("wait", header.get("id"))
            try:
                if "wait" in header:          # the answer of a point-to-point op: when it is waited for
                    received = p2p.wait(call_id)
                    if received is None:
                        student.send({"id": call_id})
                    else:
                        student.send({"id": call_id, **describe(received)}, tensor_bytes(received))
                else:
                    p2p.issue(header, payload)
            except P2PFailed as exc:
                student.send({"id": call_id, "failed": str(exc)[:MAX_ERROR_CHARS]})
                return failed(str(exc))
            except P2PRequestError as exc:
                student.send({"id": call_id, "failed": str(exc)[:MAX_ERROR_CHARS]})
                return failed(f"{header.get('op', 'wait')!s:.40}: {exc}")
        elif "op" in header:
            try:
                result = perform(header, payload, world_size)
            except (CollectiveRequestError, ProtocolError) as exc:
                student.send({"id": header.get("id"), "failed": str(exc)})
                return failed(f"{header.get('op')!s:.40}: {exc}")
            except Exception as exc:  # noqa: BLE001 - the collective failed (a timeout, a mismatch)
                student.send({"id": header.get("id"), "failed": str(exc)[:MAX_ERROR_CHARS]})
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                return failed(explain(exc) or f"{type(exc).__name__}: {first}")
            if result is None:
                student.send({"id": header.get("id")})
            else:
                student.send({"id": header.get("id"), **describe(result)}, tensor_bytes(result))
        elif "mark" in header:
            marks += 1
            if marks > MAX_MARKS:
                return failed(f"the student's process sent more than {MAX_MARKS} marks")
            record_mark(ctx, header)
        elif "result" in header:
            try:
                p2p.drain()
            except P2PFailed as exc:
                return failed(str(exc))
            try:
                value = scenario.report(ctx, header["result"], **run["args"])
                return to_grader(result=value, **traced(run, tracer, ctx))
            except Exception as exc:  # noqa: BLE001
                return failed(f"the grader's own part of {run['scenario']} failed: {exc}", internal=True)
        elif "error" in header:
            return failed(str(header["error"]))
        else:
            return failed("the student's process broke the rank protocol: an unknown message")
