"""`shardlab check` passes on every valid course: a wrong submission that commits exactly its declared
misconception is judged as declared on random valid courses (hypothesis), where a course's numbers
can make the mistake give the right value, or another known mistake the same value, so that it cannot
be named. Applicability is decided per case, as naming is (`parts.alternatives`): never a failure.

The student is simulated without a sandbox: on every case, it returns what the misconception gives
(`Misconception.alt`), and the grader's own scoring (`grading.score_part`) judges it; the fixture's
declarations for that course (`Fixture.on`) must then hold (`selfcheck.part_problems`)."""
import pytest
from hypothesis import HealthCheck, assume, given, settings

from shardlab.autograder.engine.grading import score_part
from shardlab.autograder.engine.plan import expected_values, find_part, part_cases
from shardlab.autograder.questions import part_points, questions
from shardlab.autograder.sandbox.process import Outcome
from shardlab.autograder.selfcheck import _all_fixtures, part_problems
from random_courses import course_texts, load_course

pytestmark = pytest.mark.pure

DECLARED = [f for f in _all_fixtures() if f.mistakes]


def _as_the_mistake(part, mistake, cases) -> list[list[Outcome]]:
    """What a student who commits exactly `mistake` returns on each case."""
    out = []
    for case in cases:
        try:
            out.append([Outcome(value=v) for v in mistake.alt(case)])
        except (ArithmeticError, ValueError) as exc:
            out.append([Outcome(error=f"{type(exc).__name__}: {exc}") for _ in case.calls])
    return out


def problems_on(cfg, fixture) -> list[str]:
    chosen = {q.module for q in questions(cfg)}
    if not fixture.modules <= chosen:
        return []
    declared = fixture.on(cfg)
    found = []
    for pid, name in fixture.mistakes.items():
        part = find_part(pid).for_course(cfg)
        if part.probe != "calls":
            continue
        mistake = next(m for m in part.misconceptions if m.name == name)
        cases = part_cases(cfg, pid)
        result = score_part(part, part_points(find_part(pid), cfg), cases, expected_values(cfg, pid),
                            _as_the_mistake(part, mistake, cases))
        found += [f"{fixture.name}: {p}" for p in part_problems(result, declared, full=False)]
    return found


def test_the_shipped_courses_declare_what_their_fixtures_commit():
    from shardlab.reference.config import load_config
    cfg = load_config(None)
    assert [p for f in DECLARED for p in problems_on(cfg, f)] == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(course_texts())
def test_check_judges_a_fixture_as_declared_on_every_valid_course(text):
    cfg = load_course(text)
    assume(cfg is not None)
    assert [p for f in DECLARED for p in problems_on(cfg, f)] == [], text
