"""What a graded part is: one definition drives the stub's task id, the test
cases (public and hidden), the points, the comparison and the misconception
feedback. Questions (autograder/questions/*.py) are lists of these.

A part is graded by *calls*: each case asks the student's module for one or
more function values (run in the sandbox), and the part's `expect` gives the
reference values for the same calls (computed in the grader). Distributed
parts plug in their own `probe` kind later; the scoring stays the same.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Call:
    """`module.function(*args.values())`; args keeps the signature's names for feedback."""

    module: str
    function: str
    args: dict[str, Any]

    def show(self) -> str:
        return f"{self.function}({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"


@dataclass(frozen=True)
class Case:
    calls: tuple[Call, ...]
    public: bool
    note: str = ""          # e.g. "edge case: tokens = 0", shown with public cases


@dataclass(frozen=True)
class Misconception:
    """A known wrong answer: `alt(case)` gives the values that mistake produces."""

    name: str
    message: str
    alt: Callable[[Case], list]


# ---- comparison rules -------------------------------------------------------

def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


@dataclass(frozen=True)
class Compare:
    """How one returned value is judged. `kind` is 'int' (exact integer),
    'real' (relative tolerance rtol, docs/spec.md default 1e-6), 'int_or_none' or
    'real_or_none' (None is a legal answer), 'int_dict' (the same keys, each
    value an exact integer) or 'exact' (plain equality of lists, dicts...).
    Returns None when equal, else a short reason."""

    kind: str = "real"
    rtol: float = 1e-6
    atol: float = 1e-12

    def problem(self, expected: Any, got: Any) -> str | None:
        kind = self.kind
        if kind.endswith("_or_none"):
            if expected is None or got is None:
                return None if expected is got else ("expected None" if expected is None
                                                     else "returned None")
            kind = kind.removesuffix("_or_none")
        if kind == "int_dict":
            if not isinstance(got, dict):
                return f"returned {type(got).__name__}, expected a dict"
            if set(got) != set(expected):
                return f"returned keys {sorted(got)}, expected keys {sorted(expected)}"
            for key in expected:
                if not _is_int(got[key]):
                    return f"[{key!r}] is {type(got[key]).__name__}, expected an int"
            return None if got == expected else "wrong value"
        if kind == "int":
            if not _is_int(got):
                return f"returned {type(got).__name__}, expected an int"
            return None if got == expected else "wrong value"
        if kind == "real":
            if not _is_real(got):
                return f"returned {type(got).__name__}, expected a number"
            if isinstance(got, float) and math.isnan(got):
                return "returned NaN"
            if math.isinf(expected) or math.isinf(got):
                return None if got == expected else "wrong value"
            ok = math.isclose(got, expected, rel_tol=self.rtol, abs_tol=self.atol)
            return None if ok else "wrong value"
        return None if got == expected else "wrong value"

    def __call__(self, expected: Any, got: Any) -> bool:
        return self.problem(expected, got) is None


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
    kind: 'auto' (graded here) or 'manual' (graded by hand; 0 auto points).
    compare: anything with `problem(expected, got) -> str | None`.
    probe: the runner that evaluates the calls in a sandbox: 'calls' runs
    plain function calls in one worker process; distributed parts register a
    runner that executes named scenarios in a gloo worker group.
    """

    id: str
    title: str
    module: str
    points: float
    cases: Callable[[Any, Any], list[Case]]
    expect: Callable[[Case], list]
    compare: Compare = REAL
    function: str | None = None
    misconceptions: tuple[Misconception, ...] = field(default_factory=tuple)
    kind: str = "auto"
    description: str = ""
    probe: str = "calls"    # which runner evaluates the calls (autograder.engine.grading.PROBES)
    bonus: bool = False     # its points come on top of the question's maximum


def function_part(id: str, module: str, function: str, reference: Callable, points: float,
                  argsets: Callable[[Any, Any], list[tuple[dict, bool, str]]],
                  compare: Compare = REAL, misconceptions: tuple = (),
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
