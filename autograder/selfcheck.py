"""`shardlab check`: the grader grades itself.

Solutions must score full marks, the generated stubs zero, and every
hand-made wrong submission in tests/submissions/ exactly what its
`expect.toml` declares. A wrong submission is an *overlay*: its
`<module>.py` files are appended to a copy of solutions/ (a later `def`
replaces an earlier one; top-level code runs at import), so each fixture
holds only its mistake.
"""
from __future__ import annotations

import fnmatch
import shutil
import tempfile
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from shardlab.autograder.engine.grading import Report, grade_folder
from shardlab.autograder.questions import questions
from shardlab.autograder.sandbox.process import Limits
from shardlab.autograder.core import content
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS

FIXTURES = content.ROOT / "tests" / "submissions"


@dataclass(frozen=True)
class Fixture:
    name: str
    folder: Path
    description: str
    zero: tuple[str, ...]                  # part-id patterns that must score 0
    feedback: dict[str, str]               # part id -> text its feedback must contain
    # part id -> the case groups that must fail; the part's other groups must pass, except those matching
    # an `either` pattern (their outcome depends on the run's data, drawn with the machine's secret)
    failing: dict[str, tuple[str, ...]] = field(default_factory=dict)
    either: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def modules(self) -> set[str]:
        """The student modules this fixture changes: only their questions need grading."""
        return {p.stem for p in self.folder.glob("*.py")}

    def expected_score(self, part_id: str, max_score: float, groups: int = 0) -> float:
        """0 for `zero` parts, the passing groups' share for `failing` ones, else full marks."""
        if part_id in self.failing and groups and part_id not in self.either:
            return round(max_score * (groups - len(self.failing[part_id])) / groups, 9)
        return 0.0 if any(fnmatch.fnmatch(part_id, pat) for pat in self.zero) else max_score


def fixtures(cfg=None) -> list[Fixture]:
    """The hand-made wrong submissions (tests/submissions/), those of the
    course's questions only when given a config."""
    chosen = {q.module for q in questions(cfg)}
    return [f for f in _all_fixtures() if f.modules <= chosen]


def _all_fixtures() -> list[Fixture]:
    out = []
    for expect in sorted(FIXTURES.glob("*/expect.toml")):
        data = tomllib.loads(expect.read_text())
        out.append(Fixture(expect.parent.name, expect.parent, data["description"],
                           tuple(data.get("zero", ())), dict(data.get("feedback", {})),
                           {k: tuple(v) for k, v in data.get("failing", {}).items()},
                           {k: tuple(v) for k, v in data.get("either", {}).items()}))
    return out


@contextmanager
def assembled(fixture: Fixture) -> Iterator[Path]:
    """A submission folder: solutions/ with the fixture's modules appended."""
    with tempfile.TemporaryDirectory(prefix=f"shardlab-{fixture.name}-") as tmp:
        target = Path(tmp) / "assignments"
        shutil.copytree(SOLUTIONS, target, ignore=shutil.ignore_patterns("__pycache__"))
        for overlay in fixture.folder.glob("*.py"):
            base = target / overlay.name
            base.write_text(base.read_text() + "\n\n# ---- fixture overlay ----\n" + overlay.read_text())
        yield Path(tmp)


@contextmanager
def folder_of(source: Path) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="shardlab-") as tmp:
        shutil.copytree(source, Path(tmp) / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
        yield Path(tmp)


def part_problems(p, fixture: Fixture | None, full: bool) -> list[str]:
    """How one PartResult differs from the declared outcome (empty when as declared)."""
    want = ((p.max_score if full else 0.0) if fixture is None
            else fixture.expected_score(p.id, p.max_score, len(p.groups)))
    problems = []
    if fixture and p.id in fixture.failing:
        either = fixture.either.get(p.id, ())
        failed = {g.name for g in p.groups if g.score < g.max_score}
        free = {g.name for g in p.groups if any(fnmatch.fnmatch(g.name, pat) for pat in either)}
        if not set(fixture.failing[p.id]) <= failed or (failed - free) != set(fixture.failing[p.id]) - free:
            problems.append(f"{p.id}: failed the groups {sorted(failed)}, declared {sorted(fixture.failing[p.id])}"
                            + (f" (either way: {', '.join(either)})" if either else ""))
        if either:
            want = round(p.max_score * sum(g.score == g.max_score for g in p.groups) / len(p.groups), 9)
    if p.score != want:
        problems.append(f"{p.id}: scored {p.score:g}, declared {want:g} ({p.feedback[:160]})")
    if fixture and p.id in fixture.feedback and fixture.feedback[p.id] not in p.feedback:
        problems.append(f"{p.id}: feedback lacks {fixture.feedback[p.id]!r}: {p.feedback[:160]}")
    return problems


def mismatches(report: Report, fixture: Fixture | None, full: bool) -> list[str]:
    """What differs from the declared outcome (empty when all is as declared)."""
    return [msg for q in report.questions for p in q.parts for msg in part_problems(p, fixture, full)]


def run_check(cfg, limits: Limits = Limits(), progress=None) -> list[tuple[str, Report, list[str]]]:
    """Grade solutions, stubs and every fixture; return (name, report, problems)."""
    rows = []
    for name, source, full in (("solutions", SOLUTIONS, True), ("stubs", ASSIGNMENTS, False)):
        with folder_of(source) as root:
            report = grade_folder(root, cfg, limits, label=name)
        rows.append((name, report, mismatches(report, None, full)))
        if progress:
            progress()
    for fx in fixtures(cfg):
        with assembled(fx) as root:
            report = grade_folder(root, cfg, limits, label=fx.name, modules=fx.modules)
        rows.append((fx.name, report, mismatches(report, fx, False)))
        if progress:
            progress()
    return rows
