"""Question 2: the student's FSDP (scenario "fsdp_train").

A rank's value: {"state", "stored", "grads": [[{"numel", "grad"}, ...] per step] (the FSDP
object's trainable parameters after finish_gradient_synchronization()), "steps": [[op, phase,
bytes, async, seq], ...] per step, "units": [[at, unit, seq], ...] per step}.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..rank_comparison import RankCheck, StatesMatch, constant_factor, excess, factor_text, per_rank_values

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
    expected: {"budget": Σ ceil(P_u/p) + frozen weights + buffers, "units": number of units,
    "shares": ceil(P_u/p) of each unit}. With one trainable parameter (shard) per unit, each is
    also checked against a unit's share (largest against largest): a total within budget must
    not hide a shard over its unit's share."""
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
    if stored > budget:
        return (f"keeps {stored} parameter elements between steps; sharded, it holds at most {budget} "
                f"(ceil(P/p) per unit, plus frozen weights and buffers): free the full weights after use")
    return _over_a_share(expected.get("shares"), value.get("grads"))


def _over_a_share(shares, grads) -> str | None:
    """A shard over its unit's share, when the FSDP object has one trainable parameter per unit."""
    if not shares or not isinstance(grads, list) or not grads or not isinstance(grads[0], list):
        return None
    sizes = sorted((g["numel"] for g in grads[0] if isinstance(g, dict)), reverse=True)
    if len(sizes) != len(shares):
        return None
    for size, share in zip(sizes, sorted(shares, reverse=True)):
        if size > share:
            return (f"a shard of {size} elements where a unit's share is at most {share} (ceil(P/p) "
                    f"elements of each unit, {sorted(shares, reverse=True)} here, checked unit by unit: "
                    f"storage saved elsewhere does not make up for it)")
    return None


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


def _pair(want: list, got: list) -> list[tuple[int, int]] | None:
    """(unit, index of the student's parameter) for each unit's shard, by size in order (the first
    unused parameter of the unit's shard size), or None when some unit has no such parameter."""
    unused, pairs = list(range(len(got))), []
    for u, values in enumerate(want):
        j = next((j for j in unused if isinstance(got[j], dict) and got[j].get("numel") == len(values)), None)
        if j is None:
            return None
        unused.remove(j)
        pairs.append((u, j))
    return pairs


@dataclass(frozen=True)
class ShardsTrainLikeOneProcess:
    """Task 2.7's promise, step by step: right after finish_gradient_synchronization()
    each shard's .grad is its slice of the one-process gradient of the mean loss
    (expected["shards"][rank][step]: each unit's, in module order, flat and padded),
    then the final state (`StatesMatch`). The student's trainable parameters are
    paired with the units by size; one with no unit to pair with whose size is a
    frozen layer's shard (expected["frozen"]: name -> ceil(P/p)) and that gets a
    gradient is that layer sharded as trainable. A layout of other sizes is 2.9's
    to judge: then only the final weights count here."""

    states: StatesMatch = field(default_factory=StatesMatch)

    def problem(self, expected, got) -> str | None:
        ranks = per_rank_values(got, None)
        if isinstance(ranks, str):
            return ranks
        for k in range(1, len(expected["shards"][0]) + 1):
            if why := self._step(k, expected, ranks):
                return why
        return self.states.problem(expected["state"], got)

    def _step(self, k: int, expected: dict, ranks: list) -> str | None:
        pairs, worst = [], (0.0, 0, 0)
        for r, value in enumerate(ranks):
            steps = value.get("grads")
            got = steps[k - 1] if isinstance(steps, list) and len(steps) >= k else []
            want = expected["shards"][r][k - 1]
            matched = _pair(want, got) if isinstance(got, list) else None
            if matched is None:
                return None
            for u, j in matched:
                if got[j].get("grad") is None:
                    return f"step {k}: rank {r}: unit {u}'s shard has no .grad after finish_gradient_synchronization()"
                pairs.append((want[u], got[j]["grad"]))
                worst = max(worst, (excess(want[u], got[j]["grad"], self.states.atol, self.states.rtol), r, u),
                            key=lambda w: w[0])
            if why := self._frozen(k, r, expected.get("frozen", {}), got, {j for _, j in matched}):
                return why
        if worst[0] <= 0:
            return None
        c = constant_factor(pairs, self.states.atol, self.states.rtol)
        if c is not None:
            return (f"step {k}: your synchronized gradients are {factor_text(c)}x the expected ones (each "
                    f"shard's .grad after finish_gradient_synchronization())")
        amount, r, u = worst
        return (f"step {k}: rank {r}: unit {u}'s shard .grad after finish_gradient_synchronization() differs from "
                f"its slice of the one-process gradient of the mean loss over the whole batch by up to "
                f"{amount:.2g} beyond the tolerance")

    @staticmethod
    def _frozen(k: int, r: int, frozen: dict, got: list, paired: set) -> str | None:
        for j, shard in enumerate(got):
            if j in paired or not isinstance(shard, dict) or shard.get("grad") is None:
                continue
            names = [name for name, size in frozen.items() if size == shard.get("numel")]
            if len(names) == 1:
                return (f"step {k}: rank {r}: a trainable shard of {shard['numel']} elements, the size of frozen "
                        f"{names[0]!r}'s shard, gets a gradient: a frozen layer must not train; leave frozen "
                        f"parameters unsharded (or give their shard requires_grad=False)")
        return None

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


FSDP_TRAINS_LIKE_ONE_PROCESS = ShardsTrainLikeOneProcess()
FSDP_STORAGE = RankCheck(check_storage)
FSDP_COLLECTIVES = RankCheck(check_collectives, "steps")
FSDP_PREFETCH = RankCheck(check_prefetch)
