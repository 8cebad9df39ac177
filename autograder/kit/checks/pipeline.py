"""Question 5: the student's OneFOneBPipeline (scenario "pipeline_train").

A rank's value: {"stage", "num_stages", "state",
                 "steps": [{"p2p": [[kind, peer, bytes, issued, waited], ...], "other": [ops],
                            "saved": n | None}, ...]}
expected, one entry per rank (stage): 5.10 {"order": the stage's 1F1B order as "F"/"B" letters,
  "warmup": its warm-up forwards, "message_bytes": one micro-batch's activation,
  "boundary_bytes": p2p_bytes_per_step};
  5.11 {"limit": micro-batches the stage may hold at once, "microbatches": m}
"""
from __future__ import annotations

from ..rank_comparison import RankCheck


def schedule(stage: int, num_stages: int, p2p: list) -> str:
    """The stage's forwards (F) and backwards (B) in the order the trusted trace
    shows them. A forward ends with its activation's send to the next stage, a
    backward with its gradient's send to the previous one; where there is no
    such send (the last stage's forwards, stage 0's backwards) the op's input
    marks it instead: the wait for the recv that brought the micro-batch's
    activation or gradient, the moment its data was needed."""
    s, last, marks = stage, num_stages - 1, []
    for kind, peer, _, issued, waited in p2p:
        at_wait = issued if waited is None else waited + 0.5     # after the issue it followed
        if kind == "send" and peer == s + 1:
            marks.append((issued, "F"))
        elif kind == "send" and peer == s - 1:
            marks.append((issued, "B"))
        elif kind == "recv" and s == last and peer == s - 1:
            marks.append((at_wait, "F"))
        elif kind == "recv" and s == 0 and peer == s + 1:
            marks.append((at_wait, "B"))
    return "".join(mark for _, mark in sorted(marks))


def in_flight(order: str) -> int:
    """The most micro-batches forwarded and not yet backwarded at any point of `order`."""
    peak = held = 0
    for mark in order:
        held += 1 if mark == "F" else -1
        peak = max(peak, held)
    return peak


def _steps(value: dict):
    """(where, step) for every step of one rank's value; where = "stage s of p, step k: "."""
    return [(f"stage {value['stage']} of {value['num_stages']}, step {k}: ", step)
            for k, step in enumerate(value["steps"], start=1)]


def _messages(s: int, p: int, step: dict, expected: dict) -> str | None:
    """Only point-to-point ops (and barriers, which carry nothing), with neighbours,
    each one micro-batch in size; each boundary of the stage carries
    p2p_bytes_per_step, half each way."""
    other = [op for op in step["other"] if op != "barrier"]
    if other:
        return (f"collectives besides point-to-point ones: {', '.join(other)}; pipeline stages only "
                f"send to and receive from their neighbours")
    for kind, peer, nbytes, _, _ in step["p2p"]:
        if peer not in (s - 1, s + 1) or not 0 <= peer < p:
            return (f"a {kind} {'to' if kind == 'send' else 'from'} rank {peer}: a stage exchanges activations "
                    f"and gradients only with its neighbours")
        if nbytes != expected["message_bytes"]:
            return (f"a {kind} of {nbytes:,} bytes; every message is one micro-batch's activation or gradient, "
                    f"{expected['message_bytes']:,} bytes (FP32)")
    want = expected["boundary_bytes"]
    for peer in (q for q in (s - 1, s + 1) if 0 <= q < p):
        sent = sum(n for kind, q, n, _, _ in step["p2p"] if q == peer and kind == "send")
        received = sum(n for kind, q, n, _, _ in step["p2p"] if q == peer and kind == "recv")
        if sent != want / 2 or received != want / 2:
            return (f"{sent:,} bytes sent to and {received:,} received from rank {peer}; p2p_bytes_per_step "
                    f"gives {want:,} across a stage boundary, half each way (FP32)")
    return None


def check_pipeline_schedule(expected: dict, value: dict) -> str | None:
    """Every step: the messages (`_messages`), then the 1F1B order of forwards and backwards."""
    s = value["stage"]
    if not value["steps"]:
        return "no training step was observed"
    for where, step in _steps(value):
        why = _messages(s, value["num_stages"], step, expected)
        if why:
            return where + why
        order, ideal = schedule(s, value["num_stages"], step["p2p"]), expected["order"]
        if order != ideal:
            return where + (f"forwards (F) and backwards (B) in the order {order or 'none'}; 1F1B is {ideal}: "
                            f"{expected['warmup']} warm-up forward(s), then one forward and one backward in "
                            f"turn, then the last backwards")
    return None


def check_pipeline_inflight(expected: dict, value: dict) -> str | None:
    """Every step: at most `limit` micro-batches in flight, both on the wire (the
    trusted trace's schedule, complete) and in saved activations (the harness's
    saved-tensor hooks in the student's process: a claim, docs/trust.md)."""
    limit, m = expected["limit"], expected["microbatches"]
    if not value["steps"]:
        return "no training step was observed"
    for where, step in _steps(value):
        order = schedule(value["stage"], value["num_stages"], step["p2p"])
        if order.count("F") != m or order.count("B") != m:
            return where + (f"the point-to-point trace shows {order.count('F')} forward(s) and {order.count('B')} "
                            f"backward(s) of {m} micro-batches; the count is judged on a complete schedule")
        if in_flight(order) > limit:
            return where + (f"up to {in_flight(order)} micro-batches were in flight (forwarded, not yet "
                            f"backwarded: {order}); 1F1B holds at most {limit}")
        saved = step["saved"]
        if not saved:
            return where + ("no saved activations were seen during the step: keep each micro-batch's autograd "
                            "graph until its backward (the grader counts saved tensors with saved-tensor hooks)")
        if saved > limit:
            return where + (f"saved activations of up to {saved} micro-batches were held at once; 1F1B holds at "
                            f"most {limit}: run each backward as soon as its gradient arrives")
    return None


PIPELINE_SCHEDULE = RankCheck(check_pipeline_schedule, per_rank=True)
PIPELINE_IN_FLIGHT = RankCheck(check_pipeline_inflight, per_rank=True)
