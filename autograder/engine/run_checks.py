"""What the distributed parts check of a run: the comparators of every part
with probe "gloo", by name.

Each judges the list of per-rank values a scenario's `report` returns
(autograder/sandbox/gloo/ranks/scenarios/). The question definitions use these
objects, and the starter kit ships this very file (with
engine/rank_comparison.py and engine/comparison.py), so a student's local run
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

from shardlab.autograder.engine.comparison import Compare
from shardlab.autograder.engine.rank_comparison import RankCheck, StatesMatch, StepCheck

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


# ---- the comparators, by name (the parts' `compare`) ------------------------------

TRAINS_LIKE_ONE_PROCESS = StatesMatch()
FSDP_STORAGE = RankCheck(check_storage)
FSDP_COLLECTIVES = RankCheck(check_collectives, "steps")
FSDP_PREFETCH = RankCheck(check_prefetch)
DDP_BUCKET_BYTES = StepCheck(check_bucket_bytes)
DDP_OVERLAP = StepCheck(check_overlap)
MESH_VOLUMES = MeshVolumes()
