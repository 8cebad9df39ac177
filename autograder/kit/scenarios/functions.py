"""The generic scenario: every rank calls one student function.

`Call(module, "run_function", {"world_size": N, "function": name, "args": [...]})`
runs `assignments/<module>.py:name(*args)` in every rank's student process
and returns, per rank, {"value": its result, "collectives": the collectives
its trusted process performed for it}. The harness tests use it to drive
hangs, deaths and mismatches.
"""
from __future__ import annotations

from . import Scenario, claimed, register
from ..schema import Fields, Plain


@register
class RunFunction(Scenario):
    name = "run_function"

    def phases(self, function: str, **_):
        return {function}

    def result_schema(self, **_):
        return Fields({"value": Plain()})

    def prepare(self, rank, world_size: int, function: str, args: list | None = None):
        return {"function": function, "args": args or []}, {}

    def student(self, ctx, tensors, function: str, args: list):
        fn = getattr(ctx.student(), function, None)
        if not callable(fn):
            raise AttributeError(f"assignments/{ctx.module}.py has no function {function}")
        ctx.phase(function)
        return {"value": fn(*args)}

    def report(self, rank, result, **args):
        return {"value": claimed(result, "value"), "collectives": rank.tracer.collectives()}
