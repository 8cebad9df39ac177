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

What the student half may send its trusted process is declared beside it
(`kit.schema`), and the trusted process checks every message against it
before any trusted code reads it: `phases(**args)`, the phase names it
announces; `mark_fields`, the fields of each other kind of mark;
`result_schema(**args)`, the shape of what it returns. A student's process
can send anything (it can reach its `Proxy`), so `report` only ever sees a
result of that shape, and the tracer and `RankContext.marks` only phases and
marks of those shapes (`StudentMessages`).

A part asks for a scenario with `Call(<student module>, "<name>",
{"world_size": N, ...})` and `probe="gloo"`. Scenario modules are imported
by the fork server before any rank exists: they may import torch and define
classes but must run no torch op at import time.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Mapping

from ..schema import Fields, Int, Plain, Schema, Text, check
from ..toy_models import batch, build_model, shard

SCENARIOS: dict[str, "Scenario"] = {}
MAX_PHASE_CHARS = 100
MARK_KIND_CHARS = 40


@dataclass(frozen=True)
class StudentMessages:
    """What the student half of one run may send its trusted process: the
    phase names it may announce (None: any short text), the fields of each
    other kind of mark (None: any kind, with the fields `record_mark` files),
    and the shape of its result."""

    phases: Collection[str] | None = None
    marks: Mapping[str, Schema] | None = None
    result: Schema = Plain()


# the kit's own local runs, where the student half shares the trusted half's process
ANY_MESSAGES = StudentMessages()
ANY_MARK = Fields({}, {"at": Text(MARK_KIND_CHARS), "i": Int(), "k": Int(), "param": Int()})


@dataclass
class RankContext:
    """The trusted process's view of one run on one rank."""

    rank: int
    world_size: int
    tracer: Any                                   # a `tracing.Tracer`
    marks: list[dict] = field(default_factory=list)   # the student's marks, with the collective count then
    memo: dict = field(default_factory=dict)      # prepare -> report
    expects: StudentMessages = ANY_MESSAGES       # what the student half may send (`Scenario.expects`)
    # process groups `prepare` made (a mesh's axes) that the student half may name, by name: its
    # collectives run on them (`StudentContext.groups`)
    groups: dict = field(default_factory=dict)


@dataclass
class StudentContext:
    """What the scenario's student half has (in the student's process)."""

    rank: int
    world_size: int
    module: str                 # the student module this call names (assignments/<module>.py)
    proxy: Any                  # autograder.sandbox.gloo.ranks.proxy.Proxy
    load: Callable[[str], Any]  # imports assignments/<module>.py
    # the run's process groups by name (`RankContext.groups`), as student code passes them (`group=`):
    # in a grading, handles the proxy sends to the trusted process by name; in the kit, the groups
    groups: dict = field(default_factory=dict)

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
    mark_fields: Mapping[str, Schema] = {}         # kind -> the fields of that mark (besides "mark")

    def phases(self, *_: Any, **args: Any) -> Collection[str]:
        """The phase names the student half announces in a run with these arguments."""
        return ()

    def result_schema(self, *_: Any, **args: Any) -> Schema:
        """The shape of what the student half returns (after `plain`)."""
        return Plain()

    def expects(self, **args: Any) -> StudentMessages:
        """Everything the student half of a run with these arguments may send."""
        return StudentMessages(frozenset(self.phases(**args)), self.mark_fields, self.result_schema(**args))

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
    The header is untrusted: it is checked first against what the run's
    scenario declared (`ctx.expects`), and `schema.Malformed` says what does not fit."""
    kind, fields = header.get("mark"), {k: v for k, v in header.items() if k != "mark"}
    expects = ctx.expects
    if kind == "phase":
        check(fields, Fields({"name": Text(MAX_PHASE_CHARS, expects.phases)}), "phase mark")
        ctx.tracer.set_phase(fields["name"])
        return
    check(kind, Text(MARK_KIND_CHARS, expects.marks), "mark", "its kind")
    check(fields, ANY_MARK if expects.marks is None else expects.marks[str(kind)], f"{kind!r} mark")
    if kind == "grad":
        ctx.tracer.gradient_ready(fields.get("param", -1))
    else:
        ctx.marks.append({"kind": kind, "at": fields.get("at"), "i": fields.get("i"), "k": fields.get("k"),
                          "seq": ctx.tracer.seq, "t": time.monotonic()})


def register(cls):
    if cls.name in SCENARIOS:
        owner = sys.modules.get(type(SCENARIOS[cls.name]).__module__)
        shipped = os.path.dirname(getattr(owner, "__file__", None) or "") == os.path.dirname(__file__)
        raise ValueError(f"scenario {cls.name!r} is defined twice" +
                         (": it is a shipped scenario's name: rename it" if shipped else ""))
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
