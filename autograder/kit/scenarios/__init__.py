"""Named distributed scenarios, each in two halves that never share a process.

A scenario is a `Scenario` subclass registered with `@register`:

- `prepare(rank, **args)` runs in the rank's *trusted* process: it turns the
  grader's arguments into what the student's process may know (its own rows
  of the data, its own initial weights, drawn from the grading's secret
  seed) and may run trusted collectives of its own (the mesh forward of
  question 3). Returns (student_args, tensors).
- `student(ctx, tensors, **student_args)` runs in the rank's *student*
  process, beside student code: it builds the model, wraps it with the
  student's class, trains, and returns plain data. Its collectives go
  through the trusted process (`sandbox.gloo.ranks.proxy`); it reports where
  it is with `ctx.phase(...)` and `ctx.mark(...)`. Everything it returns is
  a claim, not a measurement.
- `report(rank, result, **args)` runs in the trusted process again: it
  combines the student's claims (final weights, say) with what the trusted
  process observed (the collectives, their bytes, order, phase and timing
  relative to the student's marks) into the rank's value for the part's
  comparator.

A part asks for a scenario with `Call(<student module>, "<name>",
{"world_size": N, ...})` and `probe="gloo"`. Scenario modules are imported
by the fork server before any rank exists: they may import torch and define
classes but must run no torch op at import time.
"""
from __future__ import annotations

import importlib
import pkgutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..toy_models import batch, build_model, shard

SCENARIOS: dict[str, "Scenario"] = {}


@dataclass
class RankContext:
    """The trusted process's view of one run on one rank."""

    rank: int
    world_size: int
    tracer: Any                                   # a `tracing.Tracer`
    marks: list[dict] = field(default_factory=list)   # the student's marks, with the collective count then
    memo: dict = field(default_factory=dict)      # prepare -> report


@dataclass
class StudentContext:
    """What the scenario's student half has (in the student's process)."""

    rank: int
    world_size: int
    module: str                 # the student module this call names (assignments/<module>.py)
    proxy: Any                  # autograder.sandbox.gloo.ranks.proxy.Proxy
    load: Callable[[str], Any]  # imports assignments/<module>.py

    def student(self):
        return self.load(self.module)

    def phase(self, name: str) -> None:
        self.proxy.mark("phase", name=name)

    def mark(self, kind: str, **fields) -> None:
        self.proxy.mark(kind, **fields)


class Scenario:
    """Each subclass names the arguments it takes: `*_: Any, **args: Any` here
    lets an override take any (the halves are called with keywords only)."""

    name = ""

    def prepare(self, rank: RankContext, *_: Any, **args: Any) -> tuple[dict, dict]:
        return args, {}

    def student(self, ctx: StudentContext, tensors: dict, *_: Any, **args: Any) -> Any:
        raise NotImplementedError

    def report(self, rank: RankContext, result: Any, *_: Any, **args: Any) -> Any:
        return result


def record_mark(ctx: RankContext, header: dict) -> None:
    """File one mark of the student half (`StudentContext.phase`/`mark`) in the
    rank's record: a phase change goes to the tracer, a gradient to its
    gradient count, anything else to `ctx.marks` with the number of
    collectives performed by then ("seq") and the time ("t", time.monotonic()).
    The header is untrusted: every field is cut to size and typed here."""
    kind = header.get("mark")
    if kind == "phase":
        ctx.tracer.set_phase(str(header.get("name"))[:100])
    elif kind == "grad":
        ctx.tracer.gradient_ready(int(header.get("param", -1)))
    else:
        ctx.marks.append({"kind": str(kind)[:40], "at": str(header.get("at"))[:40],
                          "i": header.get("i") if isinstance(header.get("i"), int) else None,
                          "k": header.get("k") if isinstance(header.get("k"), int) else None,
                          "seq": ctx.tracer.seq, "t": time.monotonic()})


def register(cls):
    if cls.name in SCENARIOS:
        raise ValueError(f"scenario {cls.name!r} is defined twice")
    SCENARIOS[cls.name] = cls()
    return cls


def claimed(result: Any, key: str) -> Any:
    """One entry of the student's returned dict (None when absent or not a dict)."""
    return result.get(key) if isinstance(result, dict) else None


def rank_share(model: str, data_seed: int, weight_seed: int, world_size: int, rank: int) -> dict:
    """What a rank's student process may know of a training run (trusted side):
    the model's initial weights drawn from `weight_seed` ("init.<name>") and
    only this rank's rows of the global batch ("inputs", "targets")."""
    inputs, targets = batch(model, data_seed, world_size)
    tensors = {f"init.{k}": v for k, v in build_model(model, weight_seed).state_dict().items()}
    tensors.update(inputs=shard(inputs, rank), targets=shard(targets, rank))
    return tensors


def starting_model(model: str, tensors: dict):
    """The model `model` with the initial weights its trusted process sent (student side)."""
    import torch
    module = build_model(model, 0)
    state = {k[len("init."):]: v for k, v in tensors.items() if k.startswith("init.")}
    with torch.no_grad():
        module.load_state_dict(state)
    return module


def load_all() -> dict[str, Scenario]:
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return SCENARIOS
