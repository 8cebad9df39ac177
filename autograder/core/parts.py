"""What a graded part is: one definition drives the stub's task id, the test
cases (public and hidden), the points, the comparison and the misconception
feedback. Questions (the `questions` package) are lists of these.

A part is graded by *calls*: each case asks the student's module for one or
more function values (run in the sandbox), and the part's `expect` gives the
reference values for the same calls (computed in the grader). How the calls
are evaluated is the part's probe (`engine.probes`: plain calls in one
sandboxed process, or scenarios on gloo ranks); the scoring is the same.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from shardlab.autograder.kit.comparison import Compare, Comparator, call_text
from shardlab.autograder.kit.timelines import Drawn


@dataclass(frozen=True)
class Call:
    """`module.function(*args.values())`; args keeps the signature's names for feedback.

    group: the case group the call is graded in, (part id, `Case.group`), set
    by the engine when it batches a grading's calls (`grading._run_probes`);
    None outside a grading. A call that hangs costs its group only: the
    sandbox skips the rest of that group and runs every other
    (`sandbox.process`). It is where the call counts, not what is called: it
    takes no part in equality and `show` leaves it out; so is `hidden`."""

    module: str
    function: str
    args: dict[str, Any]
    group: tuple[str, str] | None = field(default=None, compare=False)
    # a hidden case's call (set by the engine with `group`): run after every public call of the grading, in
    # processes whose values are never shown (`sandbox.hidden_last`)
    hidden: bool = field(default=False, compare=False)

    def show(self) -> str:
        """The call as feedback names it, in the kit's words (`comparison.call_text`)."""
        return call_text(self.function, self.args)


OTHER_CASES = "other inputs"     # the group of the cases without a note (mostly random inputs)


@dataclass(frozen=True)
class Case:
    """One case of a part: its calls, whether its inputs and expected values
    may be shown (public), and its note, e.g. "edge case: tokens = 0".

    The note is also the case's *group*: a part's points are split evenly
    over its groups (`plan.case_groups`), so a missed edge case costs
    its group's share, not the whole part. Hidden cases' feedback names the
    group, never the inputs."""

    calls: tuple[Call, ...]
    public: bool
    note: str = ""

    @property
    def group(self) -> str:
        return self.note or OTHER_CASES


@dataclass(frozen=True)
class Misconception:
    """A known wrong answer: `alt(case)` gives the values that mistake produces.
    The message may name the course's devices with `{gpu}`, `{gpu_gb}` and
    `{gpu_bytes}` (`worded`), never a device of its own."""

    name: str
    message: str
    alt: Callable[[Case], list]

    def worded(self, cfg) -> Misconception:
        """Itself, its message naming this course's GPU ([memory].gpu)."""
        if cfg is None or "{" not in self.message:
            return self
        gpu = cfg.memory.gpu
        return replace(self, message=self.message.format(gpu=gpu.name, gpu_gb=f"{gpu.capacity_gb:g}",
                                                         gpu_bytes=f"{gpu.capacity_bytes:,}"))


def alternatives(part: Part, case: Case, expected: list) -> list[tuple[Misconception, list]]:
    """The part's misconceptions that could explain a wrong answer to `case`,
    each with the values it gives: those whose values differ from `expected`
    (a mistake that gives the right answer on this case explains nothing) and
    that no other misconception shares (two mistakes giving the same values
    cannot be told apart: naming either could be wrong). A misconception
    that fails on the case's inputs is left out."""
    def same(a: list, b: list) -> bool:
        try:
            return all(part.compare(x, y) for x, y in zip(a, b))
        except (KeyError, TypeError, IndexError, ValueError):
            return False      # a run's comparator may judge only what a run returns: not the same
    found = []
    for mis in part.misconceptions:
        try:
            values = mis.alt(case)
        except (ArithmeticError, ValueError):
            continue
        if not same(expected, values):
            found.append((mis, values))
    return [(mis, values) for mis, values in found
            if not any(other is not mis and same(values, theirs) for other, theirs in found)]


EXACT_INT = Compare("int")
REAL = Compare("real")


@dataclass(frozen=True)
class Part:
    """One graded part.

    id: the task id ("1.3") students search for; title: short name;
    module: the student module (assignments/<module>.py); function: the stub
    this part grades (None for parts that combine functions, such as the
    real-run check); cases(cfg, rng) -> list[Case] (the engine seeds rng);
    expect(case) -> the reference values, one per call; misconceptions are
    tried in order when a value is wrong.
    kind: 'auto' (graded here) or 'manual' (graded by hand from writeup.md: its
    points are the graders', outside the autograder's total).
    compare: a Comparator (`kit.comparison`) judging each returned value.
    probe: the name of the probe that evaluates the calls (`engine.probes`):
    'calls' (plain function calls in one sandboxed process) or 'gloo'
    (named scenarios on a group of gloo ranks).
    bonus: its points come on top of the question's maximum.
    drawn: how the run of its first public case is drawn as a timeline, in
    the grading's feedback and by the starter kit (`kit.timelines`); None for
    parts that are not drawn.
    """

    id: str
    title: str
    module: str
    points: float
    cases: Callable[[Any, Any], list[Case]]
    expect: Callable[[Case], list]
    compare: Comparator = REAL
    function: str | None = None
    misconceptions: tuple[Misconception, ...] = field(default_factory=tuple)
    kind: str = "auto"
    description: str = ""
    probe: str = "calls"
    bonus: bool = False
    drawn: Drawn | None = None

    def for_course(self, cfg) -> Part:
        """Itself, its misconceptions' messages naming the course's devices (`Misconception.worded`)."""
        if not any("{" in m.message for m in self.misconceptions):
            return self
        return replace(self, misconceptions=tuple(m.worded(cfg) for m in self.misconceptions))


def function_part(id: str, module: str, function: str, reference: Callable, points: float,
                  argsets: Callable[[Any, Any], list[tuple[dict, bool, str]]],
                  compare: Comparator = REAL, misconceptions: tuple = (),
                  description: str = "") -> Part:
    """The common part: one reference function, one call per case.

    argsets(cfg, rng) yields (args, public, note); `misconceptions` take
    (name, message, wrong_function) and the wrong function gets the same args.
    """
    def cases(cfg, rng) -> list[Case]:
        return [Case((Call(module, function, args),), public, note)
                for args, public, note in argsets(cfg, rng)]

    def expect(case: Case) -> list:
        return [reference(*case.calls[0].args.values())]

    def as_alt(wrong: Callable) -> Callable[[Case], list]:
        return lambda case: [wrong(*case.calls[0].args.values())]

    return Part(id=id, title=function, module=module, points=points, cases=cases,
                expect=expect, compare=compare, function=function,
                misconceptions=tuple(Misconception(name, msg, as_alt(fn))
                                     for name, msg, fn in misconceptions),
                description=description)


WRITTEN_POINTS = 2.0     # a written part's points unless its definition or the course's [points] says otherwise


def written_part(id: str, module: str, title: str, description: str, points: float = WRITTEN_POINTS) -> Part:
    """A written deliverable, graded by hand from the student's writeup.md
    (`engine.writeup`): no cases. Its `points` are the graders' (the course's
    `[points] "<id>"` overrides them; 0: a place for the answer, not graded),
    shown in the handout, writeup.md and the Gradescope outline `shardlab build`
    prints, never in the autograder's total: the report says whether it was answered."""
    return Part(id=id, title=title, module=module, points=points, cases=lambda cfg, rng: [],
                expect=lambda case: [], kind="manual", description=description)
