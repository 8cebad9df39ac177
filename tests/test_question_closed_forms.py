"""Functions only a closed form can pass say so, and the kit shows it.

A search over the answer's range (n = 1, 2, ... until it fits) is a correct way
to compute 1.6's FSDP degree or 2.4's device count, but some hidden cases'
answers are in the trillions (or past float range), where the grader's
per-call limit (`Limits.call_seconds`, 5 s) stops it. Such a function says so
in its docstring ("Solve it in closed form: ..."), and one of its public cases
has an answer that large, so the kit's verdict is the grader's. Each function
here is written as that search, counting its iterations: it passes every
public case it finishes, it finishes in as many iterations as its answer
(minus one), and on some public case that is more than 10^12 iterations:
at 10 ns an iteration, far beyond the limit. The searches never run that long:
they stop at a budget.
"""
from __future__ import annotations

import ast
import math

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.engine.plan import find_part, part_plan
from shardlab.autograder.questions import all_parts
from shardlab.autograder.sandbox.process import Limits
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

BUDGET = 10**6                      # iterations a search may run here
LARGE = 10**12                      # iterations a public case must need
SECONDS_PER_ITERATION = 1e-8        # a CPython loop step evaluating a float expression takes longer
CLOSED_FORM = "Solve it in closed form"


class OverBudget(Exception):
    pass


def min_fsdp_degree_by_search(state_bytes, activation_bytes, device_bytes):
    """Task 1.6 as a search over n, exactly (in half-bytes): (2S + A)/n + A < 2D. Returns (n, iterations)."""
    if activation_bytes >= 2 * device_bytes:
        return None, 0                              # the replicated half alone fills the device
    n = 1
    while 2 * state_bytes + activation_bytes >= n * (2 * device_bytes - activation_bytes):
        n += 1
        if n - 1 > BUDGET:
            raise OverBudget
    return n, n - 1


def max_devices_by_search(tokens, unit_params, alpha, beta, flops_per_second, bytes_per_param=2):
    """Task 2.4 as a search over whole p: the largest p whose all-gather still fits in the
    forward. Returns (p, iterations)."""
    forward = 2 * tokens * unit_params / flops_per_second

    def gather(p):
        return alpha * math.log2(p) + unit_params * bytes_per_param / beta
    if gather(1) >= forward:
        return 1.0, 0
    p = 1
    while gather(p + 1) <= forward:
        p += 1
        if p - 1 > BUDGET:
            raise OverBudget
    return float(p), p - 1


SEARCHES = {"1.6": min_fsdp_degree_by_search, "2.4": max_devices_by_search}
COURSES = {"shipped": None, "a100": content.folder("reference") / "courses" / "a100.toml"}


def course_parts():
    for course, path in COURSES.items():
        cfg = load_config(path)
        ids = {p.id for p in all_parts(cfg)}
        yield from ((course, part_id) for part_id in SEARCHES if part_id in ids)


@pytest.mark.parametrize("course,part_id", list(course_parts()))
def test_a_search_passes_the_kit_only_until_a_public_case_needs_a_closed_form(course, part_id):
    cfg = load_config(COURSES[course])
    part = find_part(part_id)
    search = SEARCHES[part_id]
    cases, expected = part_plan(cfg, part_id)
    too_slow = {True: [], False: []}            # public / hidden: iterations the search would need
    for case, (want,) in zip(cases, expected):
        needs = 0 if want is None else want - 1     # it steps by one from 1 to its answer
        if not case.public:
            if needs > BUDGET:
                too_slow[False].append(needs)
            continue
        try:
            got, iterations = search(**case.calls[0].args)
        except OverBudget:
            too_slow[True].append(needs)
            continue
        assert part.compare(want, got), (case.calls[0].show(), want, got)     # the kit passes it
        assert iterations == needs
    assert too_slow[False], "no hidden case needs a closed form: the docstring's sentence is not needed"
    assert too_slow[True], f"{part_id}: no public case shows a search too slow, so the kit passes it"
    assert min(too_slow[True]) >= LARGE
    assert min(too_slow[True]) * SECONDS_PER_ITERATION > 100 * Limits().call_seconds


def _docstrings(folder: str) -> dict[str, str]:
    out = {}
    for path in sorted(content.folder(folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                out[f"{path.stem}.{node.name}"] = ast.get_docstring(node) or ""
    return out


def test_the_docstrings_say_closed_form_exactly_where_a_search_is_too_slow():
    """The solutions' docstrings and the stubs generated from them, both ways round."""
    wanted = {f"{find_part(pid).module}.{find_part(pid).function}" for pid in SEARCHES}
    for folder in ("solutions", "assignments"):
        saying = {name for name, doc in _docstrings(folder).items() if CLOSED_FORM in " ".join(doc.split())}
        assert saying == wanted, folder
