"""What the distributed parts check of a run: the comparators of every part
with probe "gloo", by name.

Each judges the list of per-rank values a scenario's `report` returns
(autograder/sandbox/gloo/ranks/scenarios/). The question definitions use these
objects, and the starter kit ships this very file (with
kit/rank_comparison.py and kit/comparison.py), so a student's local run
of a public case is judged by the grader's own rules and worded the same.
That is why nothing here knows an answer: what a check needs beyond the run
(a storage budget, the bytes of each bucket) comes in as `expected`, which
the grader computes and, for public cases, the kit is given.

A new distributed part puts its comparator here, under a name:
publish/kit_harness.py refers to comparators by their name in this module
and refuses to build a kit for one that is not here.
"""
from __future__ import annotations

from dataclasses import dataclass

from shardlab.autograder.kit.comparison import Compare
from shardlab.autograder.kit.rank_comparison import RankCheck, StatesMatch, StepCheck

GATHERS = {"all_gather", "all_gather_into_tensor", "all_gather_single", "_all_gather_base"}
SCATTERS = {"reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "_reduce_scatter_base"}


def received_bytes(op: str, payload: int, p: int) -> float:
    """What one rank receives in a ring collective over p ranks: (p-1)/p of the
    payload for an all-gather or a reduce-scatter, twice that for an all-reduce
    (a reduce-scatter then an all-gather), the payload for anything else."""
    if op in GATHERS or op in SCATTERS:
        return (p - 1) / p * payload
    return 2 * (p - 1) / p * payload if op == "all_reduce" else payload


# ---- question 2: the student's FSDP (scenario "fsdp_train") ------------------------
# A rank's value: {"state", "stored", "steps": [[op, phase, bytes, async, seq], ...] per step,
#                  "units": [[at, unit, seq], ...] per step}


def check_storage(expected: dict, value: dict) -> str | None:
    """The stored count is the student's process's claim (docs/trust.md): it
    counts only when the trusted trace shows every unit's weights gathered
    in every forward, which a rank that keeps its full weights has no need of.
    expected: {"budget": Σ ceil(P_u/p) + frozen weights + buffers, "units": number of units}."""
    stored, budget = value.get("stored"), expected["budget"]
    for k, events in enumerate(value.get("steps") or [], start=1):
        gathers = sum(1 for e in events if e[0] in GATHERS and e[1] == "forward")
        if gathers < expected["units"]:
            return (f"step {k}: {gathers} all-gather(s) in forward for {expected['units']} units: a sharded "
                    f"rank must gather each unit's weights before using them")
    if not value.get("steps"):
        return "no training step was observed"
    if not isinstance(stored, int) or isinstance(stored, bool):
        return "stored no measurable tensors"
    if stored <= budget:
        return None
    return (f"keeps {stored} parameter elements between steps; sharded, it holds at most {budget} "
            f"(ceil(P/p) per unit, plus frozen weights and buffers): free the full weights after use")


def check_collectives(expected: dict, steps) -> str | None:
    """expected: {"unit_bytes": sorted padded flat bytes per unit, "volume": bytes received per step, "p"}."""
    want, p = expected["unit_bytes"], expected["p"]
    for k, events in enumerate(steps, start=1):
        others = sorted({e[0] for e in events} - GATHERS - SCATTERS)
        fwd = sorted(e[2] for e in events if e[0] in GATHERS and e[1] == "forward")
        bwd = sorted(e[2] for e in events if e[0] in GATHERS and e[1] != "forward")
        rs = sorted(e[2] for e in events if e[0] in SCATTERS)
        volume = sum(received_bytes(e[0], e[2], p) for e in events)
        where = f"step {k}: "
        if others:
            return (where + f"unexpected collectives: {', '.join(others)}; FSDP all-gathers weights and "
                    f"reduce-scatters gradients (received {volume:,.0f} bytes, expected "
                    f"{expected['volume']:,.0f} = Σ step_comm_bytes over padded units)")
        for name, got in (("all-gathers in forward", fwd), ("all-gathers in backward", bwd),
                          ("reduce-scatters", rs)):
            if got != want:
                return (where + f"{name} of {got} bytes; expected one per unit of its padded flat size "
                        f"{want} (received {volume:,.0f} bytes, expected {expected['volume']:,.0f})")
    return None


def check_prefetch(expected, value) -> str | None:
    """Some unit's forward ended after the next unit's all-gather was issued, async."""
    for marks, events in zip(value["units"], value["steps"]):
        gathers = [e for e in events if e[0] in GATHERS and e[1] == "forward"]
        ends = {i: seq for kind, i, seq in marks if kind == "end"}
        for i, end in ends.items():
            issued = [g for g in gathers if g[4] <= end]
            if len(issued) >= i + 2 and issued[i + 1][3]:
                return None
    if not any(value["units"]):
        return "no nn.Linear forward was observed: keep the module's nn.Linear layers in place"
    return ("no all-gather for the next unit was issued (async) before the current unit's forward "
            "finished: start it from the current unit's forward")


# ---- question 4: the student's BucketedDDP (scenario "ddp_train") ------------------
# A rank's value: {"state", "steps": [{"all_reduces": [[bytes, grads_before, async], ...],
#                                      "other": [ops], "grads": gradients produced}, ...]}


def check_bucket_bytes(expected: list[int], step: dict) -> str | None:
    """expected: the sorted byte sizes of the buckets of assign_buckets."""
    if step.get("other"):
        return f"unexpected collectives during the step: {', '.join(step['other'])}"
    got = sorted(ar[0] for ar in step["all_reduces"])
    if got == expected:
        return None
    return (f"{len(got)} all-reduce(s) of {got} bytes; expected one per bucket "
            f"({len(expected)}), of the bucket's byte size")


def check_overlap(expected: bool, step: dict) -> str | None:
    """Some all-reduce started, async, before backward produced its last gradient."""
    early = [ar for ar in step["all_reduces"] if ar[1] < step["grads"]]
    if any(ar[2] for ar in early):
        return None
    if early:
        return "the all-reduces started during backward are blocking (use async_op=True)"
    return ("no all-reduce started before the backward pass produced its last gradient: launch "
            "each bucket's all-reduce from the gradient hooks as soon as the bucket is complete")


# ---- question 3: the traced 2 x 2 mesh (scenario "comm4d_mesh_forward") ---------------


@dataclass(frozen=True)
class MeshVolumes:
    """Every rank's traced volumes equal the student's block_collective_bytes.
    (`expected`, the reference's formula, guards the reference run itself.)"""

    def problem(self, expected, got) -> str | None:
        if not isinstance(got, list) or not got:
            return "returned no per-rank results"
        for r, run in enumerate(got):
            if not (run["output_ok"] and run["axes_ok"] and run["measured"] == expected):
                return f"rank {r}: the reference mesh run is inconsistent (a grader bug): {run}"
            why = Compare("int_dict").problem(run["measured"], run["student"])
            if why:     # no values: hidden cases must not reveal the volumes
                return f"rank {r}: block_collective_bytes against the traced collectives: {why}"
        return None

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


# ---- question 5: the student's OneFOneBPipeline (scenario "pipeline_train") ---------
# A rank's value: {"stage", "num_stages", "state",
#                  "steps": [{"p2p": [[kind, peer, bytes, issued, waited], ...], "other": [ops],
#                             "saved": n | None}, ...]}
# expected, one entry per rank (stage): 5.10 {"order": the stage's 1F1B order as "F"/"B" letters,
#   "warmup": its warm-up forwards, "message_bytes": one micro-batch's activation,
#   "boundary_bytes": p2p_bytes_per_step};
#   5.11 {"limit": micro-batches the stage may hold at once, "microbatches": m}


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


# ---- the comparators, by name (the parts' `compare`) ------------------------------

TRAINS_LIKE_ONE_PROCESS = StatesMatch()
FSDP_STORAGE = RankCheck(check_storage)
FSDP_COLLECTIVES = RankCheck(check_collectives, "steps")
FSDP_PREFETCH = RankCheck(check_prefetch)
DDP_BUCKET_BYTES = StepCheck(check_bucket_bytes)
DDP_OVERLAP = StepCheck(check_overlap)
MESH_VOLUMES = MeshVolumes()
PIPELINE_SCHEDULE = RankCheck(check_pipeline_schedule, per_rank=True)
PIPELINE_IN_FLIGHT = RankCheck(check_pipeline_inflight, per_rank=True)
