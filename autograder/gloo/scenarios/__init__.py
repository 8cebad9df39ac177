"""Named distributed scenarios run by every rank of a gloo worker group.

A scenario is a function `(ctx: Context, **args) -> plain data`, registered
with `@scenario("name")` in a module of this package (modules are found
automatically). A part asks for it with `Call(<student module>,
"<scenario name>", {"world_size": N, ...})` and `probe="gloo"`; every rank
runs it, and the part's comparator gets the list of the ranks' values.

Scenario modules are imported by the fork server before any rank exists,
so they may import torch and define classes but must run no torch ops at
import time, and must not import lazily inside functions (student code
shares the rank, and `reference`/`autograder` imports are blocked there).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

SCENARIOS: dict[str, Callable[..., Any]] = {}


@dataclass
class Context:
    rank: int
    world_size: int
    module: str                 # the student module this call names (assignments/<module>.py)
    tracer: Any                 # autograder.gloo.tracing.Tracer, reset before each scenario
    load: Callable[[str], Any]  # imports assignments/<module>.py (blocked from the answer key)

    def student(self):
        return self.load(self.module)


def scenario(name: str):
    def register(fn):
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} is defined twice")
        SCENARIOS[name] = fn
        return fn
    return register


def load_all() -> dict[str, Callable[..., Any]]:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return SCENARIOS
