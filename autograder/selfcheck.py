"""`shardlab check`: the grader grades itself.

Solutions must score full marks, the generated stubs zero, and every
hand-made wrong submission in tests/submissions/ (and in a course's own
question's `submissions/`) exactly what its `expect.toml` declares. A wrong submission is an *overlay*: its
`<module>.py` files are appended to a copy of solutions/ (a later `def`
replaces an earlier one; top-level code runs at import), so each fixture
holds only its mistake.

Any valid course, not only the shipped one. With a course secret the
solutions hand in the answers.toml of their variant filled with its right
values, the stubs the blank one a student receives. An `expect.toml` says
what its mistake costs without naming the course: a group named after the
course is written with `{cfg...}` fields (`"the course model on
{cfg.memory.gpu.name}"`), filled from the course checked (`Fixture.on`). And it
names, where the question defines it, the misconception it commits
(`mistake."1.4" = "GiB for GB"`, a `Misconception.name` of that part;
`Fixture.mistakes`): a
declared failing group in every case of which that misconception gives the
right value on this course, or a group the course has no case of, cannot
be lost there. Such a group is expected to pass, and the row says "not
applicable on this course" and which groups, not a failure; everything else
the fixture declares is still checked. The named misconception decides it
case by case, as grading names a mistake: the groups the course makes it
lose (`lost_groups`), and whether its feedback can name it at all
(`named_in_feedback`), so `check` passes on every valid course
(tests/test_engine_check_applicability.py tries random ones).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import shutil
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.parts import Case, Misconception, Part, alternatives
from shardlab.autograder.engine.answer_sheet import ANSWERS_FILE, sheet_toml
from shardlab.autograder.engine.grading import MAX_FAILURES_SHOWN, Report, grade_folder
from shardlab.autograder.engine.plan import case_groups, expected_values, find_part, part_cases
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.questions import own_folder, questions, registered
from shardlab.autograder.sandbox.process import Limits
from shardlab.autograder.core import content, course_folders
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS, own_solutions, own_stubs
from shardlab.reference.config import load_config

FIXTURES = content.ROOT / "tests" / "submissions"
CHECK_STUDENT = "shardlab-check"        # whose variant the solutions' and stubs' answers.toml is
NOT_APPLICABLE = "not applicable on this course"


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
    # part id -> the name of the part's misconception (`Misconception.name`) that is wrong in exactly the
    # cases this fixture is: the one it commits, or, where it reaches the part through another function
    # or commits two, the one that decides where it shows (its expect.toml says why)
    mistakes: dict[str, str] = field(default_factory=dict)
    # filled by `on(cfg)`: part id -> {declared failing group: why this course cannot show it}
    not_applicable: dict[str, dict[str, str]] = field(default_factory=dict)
    # why the fixture is an attack on the grader rather than a student's mistake ("" for a mistake):
    # the starter kit must catch every mistake first, naming its task; an attack it need not
    hostile: str = ""

    def on(self, cfg) -> Fixture:
        """What this fixture must score on one course: its `{cfg...}` fields filled from
        the course. Where it names the misconception it commits in a part, that mistake
        decides, case by case, what the course can show: the part's failing groups are
        those in which the mistake gives a value judged wrong (`lost_groups`), a declared
        group it cannot lose on this course is not applicable (`unseen_groups` says why),
        and declared feedback that names the mistake is not expected where no failure
        the feedback shows can name it (`named_in_feedback`: another known mistake gives
        the same value). Applied once, to the declarations as read: `fixtures(cfg)` does it."""
        failing = {pid: tuple(self._fill(g, cfg) for g in groups) for pid, groups in self.failing.items()}
        unseen: dict[str, dict[str, str]] = {}
        feedback = {pid: self._fill(text, cfg) for pid, text in self.feedback.items()}
        for pid in self.mistakes:
            mistake = self.mistake(pid)
            assert mistake is not None
            declared = failing.get(pid) or (tuple(name for name, _ in case_groups(part_cases(cfg, pid)))
                                           if self._zero(pid) else ())
            lost = lost_groups(cfg, pid, mistake)
            why = {g: reason for g, reason in unseen_groups(cfg, pid, declared, mistake).items() if g not in lost}
            if why:
                unseen[pid] = why
            if pid in self.failing or why or set(lost) != set(declared):
                failing[pid] = lost
            words = mistake.worded(cfg).message
            if pid in feedback and feedback[pid] in words and not named_in_feedback(cfg, pid, mistake):
                del feedback[pid]         # the mistake cannot be named: the feedback says expected/got only
                unseen.setdefault(pid, {})["(its name in the feedback)"] = (
                    f"{mistake.name!r} cannot be named: another known mistake gives the same value")
            elif pid in feedback and not lost:
                del feedback[pid]         # a part that can lose nothing on this course shows no mistake
        either = {pid: tuple(self._fill(p, cfg) for p in pats) for pid, pats in self.either.items()}
        return dataclasses.replace(self, failing=failing, either=either, feedback=feedback, not_applicable=unseen)

    def mistake(self, part_id: str) -> Misconception | None:
        """The misconception this fixture declares it commits in the part, if any."""
        name = self.mistakes.get(part_id)
        if name is None:
            return None
        known = {m.name: m for m in find_part(part_id).misconceptions}
        if name not in known:
            raise ShardlabError(f"{self.name}/expect.toml: part {part_id} has no misconception {name!r} "
                                f"(it has: {', '.join(map(repr, known)) or 'none'})")
        return known[name]

    def _zero(self, part_id: str) -> bool:
        return any(fnmatch.fnmatch(part_id, pat) for pat in self.zero)

    def _fill(self, text: str, cfg) -> str:
        try:
            return text.format(cfg=cfg)
        except (AttributeError, IndexError, KeyError, ValueError) as exc:
            raise ShardlabError(f"{self.name}/expect.toml: {text!r} cannot be filled from the course: "
                                f"{type(exc).__name__}: {exc}") from None

    def not_applicable_text(self) -> str:
        """The declared losses this course cannot show, part by part ("" when there are none)."""
        out = []
        for pid, groups in self.not_applicable.items():
            by_reason: dict[str, list[str]] = {}
            for group, why in groups.items():
                by_reason.setdefault(why, []).append(repr(group))
            out.append(f"{pid} " + ", ".join(f"{', '.join(gs)} ({why})" for why, gs in by_reason.items()))
        return "; ".join(out)

    @property
    def modules(self) -> set[str]:
        """The student modules this fixture changes: only their questions need grading."""
        return {p.stem for p in self.folder.glob("*.py")}

    def losing_parts(self, part_ids) -> list[str]:
        """Of `part_ids`, those this fixture must lose points on: its `zero` patterns and its
        declared failing groups (after `on(cfg)`; a group it may lose either way, `either`, is
        not declared failing)."""
        return [pid for pid in part_ids if self._zero(pid) or bool(self.failing.get(pid))]

    def expected_score(self, part_id: str, max_score: float, groups: int = 0) -> float:
        """0 for `zero` parts, the passing groups' share for `failing` ones, else full marks."""
        if part_id in self.failing and groups and part_id not in self.either:
            return round(max_score * (groups - len(self.failing[part_id])) / groups, 9)
        return 0.0 if any(fnmatch.fnmatch(part_id, pat) for pat in self.zero) else max_score


def fixtures(cfg=None) -> list[Fixture]:
    """The hand-made wrong submissions (tests/submissions/) as declared for a
    course (`Fixture.on`): given a config, those of its questions; without
    one, every fixture, for the shipped course."""
    chosen = {q.module for q in questions(cfg)}
    course = cfg if cfg is not None else load_config()
    return [f.on(course) for f in (*_all_fixtures(FIXTURES), *own_fixtures(cfg)) if f.modules <= chosen]


def unseen_groups(cfg, part_id: str, groups, mistake: Misconception | None) -> dict[str, str]:
    """{group: why}: the declared failing `groups` of a part this course cannot
    show. A group the course has no case of; and, given the misconception the
    fixture commits, a group in every case of which that mistake gives what
    the part judges right, as a student who returned its values would pass."""
    cases = part_cases(cfg, part_id)
    members = dict(case_groups(cases))
    out = {g: "no such case on this course" for g in groups if g not in members}
    if mistake is not None:
        part, expected = find_part(part_id), expected_values(cfg, part_id)
        for g in groups:
            if g in members and all(_judged_right(part, mistake, cases[k], expected[k]) for k in members[g]):
                out[g] = f"{mistake.name!r} gives the right value in every case"
    return out


def lost_groups(cfg, part_id: str, mistake: Misconception) -> tuple[str, ...]:
    """The part's case groups a student committing exactly `mistake` loses on this course: those with
    a case in which the mistake's value is judged wrong."""
    cases = part_cases(cfg, part_id)
    part, expected = find_part(part_id), expected_values(cfg, part_id)
    return tuple(g for g, members in case_groups(cases)
                 if not all(_judged_right(part, mistake, cases[k], expected[k]) for k in members))


def named_in_feedback(cfg, part_id: str, mistake: Misconception) -> bool:
    """Whether the feedback of a student committing exactly `mistake` names it: it shows its first
    failures (`grading.MAX_FAILURES_SHOWN`), and a failure names a mistake only when it is the one
    known mistake giving that value (`parts.alternatives`), as grading decides it, case by case."""
    cases = part_cases(cfg, part_id)
    part, expected = find_part(part_id).for_course(cfg), expected_values(cfg, part_id)
    mine = next(m for m in part.misconceptions if m.name == mistake.name)
    shown = [k for k in range(len(cases)) if not _judged_right(part, mine, cases[k], expected[k])]
    return any(any(m.name == mine.name for m, _ in alternatives(part, cases[k], expected[k]))
               for k in shown[:MAX_FAILURES_SHOWN])


def _judged_right(part: Part, mistake: Misconception, case: Case, expected: list) -> bool:
    try:
        wrong = mistake.alt(case)
    except (ArithmeticError, ValueError):      # as grading does: a mistake that cannot be computed differs
        return False
    return all(part.compare(e, w) for e, w in zip(expected, wrong, strict=True))


EXPECT_KEYS = ("description", "zero", "failing", "either", "feedback", "mistake", "hostile")


def _expect_data(expect: Path, where: str) -> dict:
    """An expect.toml's declarations, its keys and the part ids it names checked (one line naming `where`)."""
    try:
        data = tomllib.loads(expect.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ShardlabError(f"{where} cannot be read: {exc}") from None
    unknown = [k for k in data if k not in EXPECT_KEYS]
    if unknown:
        raise ShardlabError(f"{where} has an unknown key {unknown[0]!r} (known: {', '.join(EXPECT_KEYS)})")
    if not isinstance(data.get("description"), str):
        raise ShardlabError(f"{where} needs description = \"...\" (what the mistake is)")
    known = {p.id for q in registered() for p in q.parts}
    named = [pat for pat in data.get("zero", ()) if not fnmatch.filter(known, pat)]
    named += [pid for key in ("failing", "either", "feedback", "mistake") for pid in data.get(key, {})
              if pid not in known and pid not in named]
    if named:
        raise ShardlabError(f"{where} names no part of this course: {', '.join(named)}")
    return data


def _all_fixtures(folder: Path = FIXTURES, where: str = "") -> list[Fixture]:
    """The wrong submissions in `folder` (tests/submissions/, or a course question's submissions/, whose
    errors start with `where`)."""
    out = []
    for expect in sorted(folder.glob("*/expect.toml")):
        shown = f"{where}{expect.parent.name}/expect.toml" if where else str(expect)
        data = _expect_data(expect, shown)
        out.append(Fixture(expect.parent.name, expect.parent, data["description"],
                           tuple(data.get("zero", ())), dict(data.get("feedback", {})),
                           {k: tuple(v) for k, v in data.get("failing", {}).items()},
                           {k: tuple(v) for k, v in data.get("either", {}).items()},
                           dict(data.get("mistake", {})), hostile=str(data.get("hostile", ""))))
    return out


def own_fixtures(cfg) -> list[Fixture]:
    """The wrong submissions of the course's own questions, as declared (not yet `on` the course): each
    expect.toml's keys and part ids checked, an error naming the question's folder and the file.
    `shardlab build` reads them, so a broken declaration is caught before `check`."""
    out = []
    for q in questions(cfg):
        folder = own_folder(q)
        if folder is not None:
            out += _all_fixtures(folder.file(course_folders.FIXTURES),
                                 f"course question {folder.path}: {course_folders.FIXTURES}/")
    return out


def add_own_modules(target: Path, cfg, full: bool) -> None:
    """Beside a copy of solutions/ (`full`) or assignments/, the course's own questions' modules:
    their folders' solution.py, or the stubs generated from them (`publish.stubs.own_solutions`)."""
    if cfg is None:
        return
    own = ({name: path.read_text(encoding="utf-8") for name, path in own_solutions(cfg).items()} if full
           else own_stubs(cfg))
    for name, text in own.items():
        (target / name).write_text(text, encoding="utf-8")


@contextmanager
def assembled(fixture: Fixture, cfg=None) -> Iterator[Path]:
    """A submission folder: solutions/ (and the course's own solutions) with the fixture's modules appended."""
    with tempfile.TemporaryDirectory(prefix=f"shardlab-{fixture.name}-") as tmp:
        target = Path(tmp) / "assignments"
        shutil.copytree(SOLUTIONS, target, ignore=shutil.ignore_patterns("__pycache__"))
        add_own_modules(target, cfg, full=True)
        for overlay in fixture.folder.glob("*.py"):
            base = target / overlay.name
            base.write_text(base.read_text() + "\n\n# ---- fixture overlay ----\n" + overlay.read_text())
        yield Path(tmp)


@contextmanager
def folder_of(source: Path, cfg=None) -> Iterator[Path]:
    """A submission folder holding a copy of `source` (solutions/ or assignments/) and, with a course
    config, its own questions' solutions or stubs beside them (`add_own_modules`)."""
    with tempfile.TemporaryDirectory(prefix="shardlab-") as tmp:
        shutil.copytree(source, Path(tmp) / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
        add_own_modules(Path(tmp) / "assignments", cfg, full=source == SOLUTIONS)
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


@dataclass(frozen=True)
class Row:
    """One line of the self-check: a submission, its grade, how the grade
    differs from the declared outcome (`problems`, empty when as declared) and
    the declared losses this course cannot show (`not_applicable`, a fixture's
    `not_applicable_text()`: not a failure)."""

    name: str
    report: Report
    problems: list[str]
    not_applicable: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def status(self) -> str:
        """"yes", "not applicable on this course: <which groups, why>" or "no: <what differs>"."""
        if self.problems:
            return "no: " + "; ".join(self.problems)
        return f"{NOT_APPLICABLE}: {self.not_applicable}" if self.not_applicable else "yes"


def write_answers(root: Path, cfg, filled: bool) -> None:
    """With a course secret, the answers.toml handed in with `root`'s
    assignments/: the sheet of CHECK_STUDENT's variant, filled with its right
    values or blank (zeros), as a student receives it."""
    if cfg.course.secret:
        sheet = sheet_toml(variant_config(cfg, CHECK_STUDENT), CHECK_STUDENT, values=filled)
        (root / ANSWERS_FILE).write_text(sheet, encoding="utf-8")


def check_reference(cfg, name: str, limits: Limits = Limits()) -> Row:
    """Grade "solutions" (must score full marks) or "stubs" (must score 0), with their answers.toml."""
    source, full = {"solutions": (SOLUTIONS, True), "stubs": (ASSIGNMENTS, False)}[name]
    with folder_of(source, cfg) as root:
        write_answers(root, cfg, filled=full)
        report = grade_folder(root, cfg, limits, label=name)
    return Row(name, report, mismatches(report, None, full))


def check_fixture(cfg, fixture: Fixture, limits: Limits = Limits()) -> Row:
    """Grade one fixture as declared for `cfg` (`fixtures(cfg)` or `Fixture.on(cfg)`)."""
    with assembled(fixture, cfg) as root:
        report = grade_folder(root, cfg, limits, label=fixture.name, modules=fixture.modules)
    return Row(fixture.name, report, mismatches(report, fixture, False), fixture.not_applicable_text())


def run_check(cfg, limits: Limits = Limits(), progress=None, jobs: int = 2) -> list[Row]:
    """Grade solutions, stubs and every fixture of the course's questions: one Row each, in that
    order. `jobs` gradings run at once (each in its own sandboxes, as a batch's do)."""
    def one(task):
        row = check_reference(cfg, task, limits) if isinstance(task, str) else check_fixture(cfg, task, limits)
        if progress:
            progress()
        return row
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, ["solutions", "stubs", *fixtures(cfg)]))
