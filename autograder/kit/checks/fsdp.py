"""Question 2: the student's FSDP (scenario "fsdp_train").

A rank's value: {"state", "stored", "steps": [[op, phase, bytes, async, seq], ...] per step,
"units": [[at, unit, seq], ...] per step}.
"""
from __future__ import annotations

from ..rank_comparison import RankCheck

GATHERS = {"all_gather", "all_gather_into_tensor", "all_gather_single", "_all_gather_base"}
SCATTERS = {"reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "_reduce_scatter_base"}


def received_bytes(op: str, payload: int, p: int) -> float:
    """What one rank receives in a ring collective over p ranks: (p-1)/p of the
    payload for an all-gather or a reduce-scatter, twice that for an all-reduce
    (a reduce-scatter then an all-gather), the payload for anything else."""
    if op in GATHERS or op in SCATTERS:
        return (p - 1) / p * payload
    return 2 * (p - 1) / p * payload if op == "all_reduce" else payload


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


FSDP_STORAGE = RankCheck(check_storage)
FSDP_COLLECTIVES = RankCheck(check_collectives, "steps")
FSDP_PREFETCH = RankCheck(check_prefetch)
