"""The generic scenario: every rank calls one student function.

`Call(module, "run_function", {"world_size": N, "function": name, "args": [...]})`
runs `assignments/<module>.py:name(*args)` on every rank of the group and
returns, per rank, {"value": plain result, "collectives": [traced events]}.
Questions whose students write rank-level code (a sharded forward on a
mesh, say) can grade it with this alone; the harness tests use it to drive
hangs, deaths and mismatches.
"""
from __future__ import annotations

from autograder.gloo.scenarios import Context, scenario


@scenario("run_function")
def run_function(ctx: Context, world_size: int, function: str, args: list | None = None) -> dict:
    fn = getattr(ctx.student(), function, None)
    if not callable(fn):
        raise AttributeError(f"assignments/{ctx.module}.py has no function {function}")
    ctx.tracer.set_phase(function)
    value = fn(*(args or []))
    return {"value": value, "collectives": ctx.tracer.collectives()}
