"""Question 6.5's comparator: the students' 2D-sharded forward (scenario "tp_forward_2d").

A rank's value: {"collectives": [[op, mesh axis, payload bytes], ...] as its
trusted process traced them, "output_ok": whether the student's Out block
equals the single-process forward's}. `expected` is the reference's
[tensor, op, axis, bytes] per collective (`forward_2d_collectives`). The
order of the collectives is free; each must be there, on its axis, once.
A kit module: it imports only the kit, relatively.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


def _listed(keys) -> str:
    return ", ".join(f"{op.replace('_', '-')} along {axis}" for op, axis, _ in keys) or "none"


def rank_problem(expected: list, run) -> str | None:
    """What is wrong with one rank's run, cause first; None when it is right."""
    if not isinstance(run, dict) or not isinstance(run.get("collectives"), list):
        return "returned no trace"
    names = {(op, axis, nbytes): name for name, op, axis, nbytes in expected}
    want = Counter((op, axis, nbytes) for _, op, axis, nbytes in expected)
    got = Counter(tuple(c) for c in run["collectives"])
    missing, extra = want - got, got - want
    for op, axis, nbytes in extra:
        if op == "all_reduce" and ("reduce_scatter", axis, nbytes) in missing:
            return (f"Out is all-reduced along {axis} where the forward reduce-scatters it: each chip keeps only "
                    f"its Out[B_X, D_Y] block, so the partial sums are reduce-scattered along {axis} (an all-reduce "
                    f"moves twice the bytes and leaves every chip the whole sum)")
        wrong_axis = [key for key in missing if key[0] == op and key[2] == nbytes and key[1] != axis]
        if wrong_axis:
            name, right = names[wrong_axis[0]], wrong_axis[0][1]
            return (f"an {op.replace('_', '-')} ran along {axis} where {name}'s runs along {right}: "
                    f"{name} is sharded along {right}, so gathering along {axis} is gathering along the wrong "
                    f"mesh axis")
    if missing or extra:
        return (f"its collectives differ from the 2D forward's: missing {_listed(missing)}; "
                f"unexpected {_listed(extra)}")
    if run.get("output_ok") is not True:
        return "the collectives are right, but the Out block differs from the single-process forward"
    return None


@dataclass(frozen=True)
class Forward2D:
    """Every rank ran the four collectives of the 2D forward on their axes with their bytes, and its
    Out[B_X, D_Y] block equals the single-process (In · W_in) · W_out."""

    def problem(self, expected, got) -> str | None:
        if not isinstance(got, list) or not got:
            return "returned no per-rank results"
        for r, run in enumerate(got):
            why = rank_problem(expected, run)
            if why:
                return f"rank {r}: {why}"
        return None

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


FORWARD_2D = Forward2D()
