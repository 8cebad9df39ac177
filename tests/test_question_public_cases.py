"""The local verdict is the graded verdict: every branch of a solution that a hidden
case takes, some public case of the same part takes too.

A student's function that passes every public case in the starter kit should not
lose points on a hidden case for a path of the code the kit never ran (3.5's
public cases once all expected None, so a function returning B/N passed the kit
and lost most of the part). For every part graded by plain calls (a
`function_part`) of the shipped course and of the second course, the solution
(`solutions/<module>.py`, imported as `shardlab.solutions.<module>`) runs on the
part's hidden cases and on its public cases under a line-arc tracer restricted
to the solutions file (`sys.settrace`: the `coverage` package is not a
dependency): the arcs the hidden cases take must all be taken by a public case.
An arc is (line before, line), with the function's entry and return written as
minus its first line, as coverage.py writes them.
"""
from __future__ import annotations

import importlib
import linecache
import sys
from types import CodeType

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.core.parts import Call, Case
from shardlab.autograder.engine.plan import part_cases
from shardlab.autograder.questions.comm4d import EXAMPLE
from shardlab.autograder.questions import all_parts
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

COURSES = {"shipped": None, "a100": content.folder("reference") / "courses" / "a100.toml"}

Arc = tuple[int, int]


def arcs_taken(module: str, calls: list[Call]) -> set[Arc]:
    """The line arcs `calls` take through solutions/<module>.py (every function of that
    file they reach, helpers included)."""
    solution = importlib.import_module(f"shardlab.solutions.{module}")
    path = solution.__file__
    taken: set[Arc] = set()

    def trace(frame, event, arg):
        if frame.f_code.co_filename != path:
            return None                     # other files: not traced line by line
        code: CodeType = frame.f_code
        last = -code.co_firstlineno

        def lines(frame, event, arg):
            nonlocal last
            if event == "line":
                taken.add((last, frame.f_lineno))
                last = frame.f_lineno
            elif event == "return":
                taken.add((last, -code.co_firstlineno))
            return lines
        return lines

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        for call in calls:
            getattr(solution, call.function)(**call.args)
    finally:
        sys.settrace(previous)
    return taken


def uncovered(module: str, cases: list[Case]) -> dict[Arc, str]:
    """{arc: the first hidden group taking it} for the arcs hidden cases take and no public case does."""
    public: set[Arc] = set()
    hidden: dict[Arc, str] = {}
    for case in cases:
        arcs = arcs_taken(module, list(case.calls))
        if case.public:
            public |= arcs
        else:
            for arc in arcs:
                hidden.setdefault(arc, case.group)
    return {arc: group for arc, group in hidden.items() if arc not in public}


def described(module: str, missing: dict[Arc, str]) -> str:
    """Each line an uncovered arc leads to (or returns from), its source and a hidden group reaching it."""
    path = importlib.import_module(f"shardlab.solutions.{module}").__file__
    by_line: dict[int, str] = {}
    for (before, line), group in sorted(missing.items()):
        by_line.setdefault(line if line > 0 else before, group)
    return "\n".join(f"  line {n}: {linecache.getline(path, n).strip()!r} (hidden group {group!r})"
                     for n, group in sorted(by_line.items()))


def function_parts(course: str) -> list[tuple[str, str]]:
    cfg = load_config(COURSES[course])
    return [(course, p.id) for p in all_parts(cfg) if p.probe == "calls" and p.function and p.kind == "auto"]


@pytest.mark.parametrize("course,part_id", function_parts("shipped") + function_parts("a100"))
def test_every_branch_a_hidden_case_takes_a_public_case_takes(course, part_id):
    cfg = load_config(COURSES[course])
    part = next(p for p in all_parts(cfg) if p.id == part_id)
    cases = part_cases(cfg, part_id)
    assert any(c.public for c in cases) and any(not c.public for c in cases)
    missing = uncovered(part.module, cases)
    assert not missing, (f"{course} course, part {part_id} ({part.function}): lines of "
                         f"solutions/{part.module}.py that only hidden cases reach, so the kit cannot "
                         f"catch a mistake there:\n{described(part.module, missing)}")


def test_the_tracer_finds_the_branch_3_5s_old_public_cases_missed(cfg):
    """3.5's public cases before this check all expected None: the example mesh in both conventions
    (it never hides its TP comms) and the course mesh with Y raised until neither does. The returns of
    a real batch were reached only by hidden cases. The cases made public as they were, the tracer
    finds both returns."""
    def was_public(case: Case) -> bool:
        (call,) = case.calls
        return (case.note.startswith("edge case: a Y so large")
                or (case.public and call.args["d_model"] == EXAMPLE["d_model"] and "one chip" not in case.note))
    old = [Case(c.calls, was_public(c), c.note) for c in part_cases(cfg, "3.5")]
    assert [c.public for c in old].count(True) == 3
    shown = described("comm4d", uncovered("comm4d", old))
    assert "'return fsdp_const / math_slope' (hidden group 'the course mesh, default convention (overlapped)')" in shown
    assert "'return fsdp_const / (math_slope - tp_slope)' (hidden group 'the course mesh, comms summed')" in shown


def test_the_tracer_sees_both_sides_of_a_branch():
    """min_microbatches: p = 1 returns early; a public case of p > 1 alone leaves that return uncovered."""
    p_many = Case((Call("pipeline", "min_microbatches", dict(p=4, target_fraction=0.08)),), True)
    one_stage = Case((Call("pipeline", "min_microbatches", dict(p=1, target_fraction=0.0)),), False, "one stage")
    missing = uncovered("pipeline", [p_many, one_stage])
    assert missing and set(missing.values()) == {"one stage"}
    assert not uncovered("pipeline", [p_many, Case(one_stage.calls, True)])
