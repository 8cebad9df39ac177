"""What a grading produces: one PartResult per graded part, grouped into
QuestionResults, in one Report per submission. Plain data, so a report
crosses process boundaries as JSON (`shardlab grade --json`, batch grading,
the otter runtime) and every front end reads the same fields."""
from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import metadata

from shardlab.autograder.core import content

INTERNAL_ERROR = "internal-error"
"""A PartResult's status when the grader failed on the part, not the student."""
BUDGET_STOP = "stopped by the grading's time budget"
"""A failed case's kind (PartResult.failures) when the grading's budget ([grading] budget_seconds)
ran out before its call finished or could start: a hang somewhere in the submission, not in this case."""


def points_text(points: float) -> str:
    """Points as every report, feedback line, table and handout shows them: at
    most two decimals, no trailing zeros ("3.08", "3", "0.5"). A question's
    total scaled by [points] gives parts such as 3.0769...; the score keeps
    its precision, only what people read is rounded."""
    text = f"{points:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


@functools.cache
def grader_version() -> str:
    """The grader that made a report: shardlab's installed version, plus, when
    it runs from a git checkout, the commit (`0.1.0+git.<12 hex>`) and
    `.dirty` when tracked files differ from it. Every report carries it
    (batch results, `shardlab grade --json`, the otter report.json), so a
    regrade after a fix can be told from the grading it replaces. Looked up
    once per process; without git, or outside a checkout, the version alone."""
    try:
        version = metadata.version("shardlab")
    except metadata.PackageNotFoundError:
        version = "unknown"
    repo = content.repository()
    if repo is None or not (repo / ".git").exists():
        return version
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}     # never take the index lock (a concurrent git)
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5, env=env)
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, env=env)
    except (OSError, subprocess.SubprocessError):
        return version
    if head.returncode != 0 or dirty.returncode != 0:
        return version
    return f"{version}+git.{head.stdout.strip()[:12]}" + (".dirty" if dirty.stdout.strip() else "")


def course_stamp(cfg) -> dict[str, str]:
    """The course a report was graded against: its name and the sha256 of its
    config file's bytes (`CourseConfig.sha256`). Every report carries it, beside
    grader_version."""
    return {"name": cfg.course.name, "sha256": cfg.sha256}


def course_shown(course: dict | None) -> str:
    """A course stamp in one short line ("Systems for Large Models (sha256 1a2b3c4d5e6f)"); "" without one."""
    if not course:
        return ""
    name = " ".join(str(course.get("name", "")).split())         # one line, whatever the TOML string held
    return f"{name} (sha256 {str(course.get('sha256', ''))[:12]})"


@dataclass
class GroupResult:
    """One group of a part's cases (`Case.group`): its share of
    the part's points, earned when all its cases pass; public when any of
    its cases is (otter shows a hidden group only after publication)."""

    name: str
    score: float
    max_score: float
    public: bool


@dataclass
class PartResult:
    """The grade of one part.

    id, title: the part's (task id "2.7", its short name); score, max_score:
    points earned and possible; feedback: what the student reads; kind:
    'auto', 'manual' (graded by hand) or 'answers' (the answers.toml sheet);
    bonus: its points are not part of the question's max_score; status: 'ok'
    or INTERNAL_ERROR (0 points, flagged for the instructor to regrade);
    groups: how the points split over the case groups (auto parts); timeline: for
    the drawn parts (`Part.drawn`), one traced step of the
    student's first graded run, {"stem", "kind", "title", "summary", "events": per
    rank, "ideal"} (`timelines.drawing.timeline`), None if that run failed; the front ends draw
    it beside the feedback (`batch.draw_report_timelines`);
    misconceptions: the part's named mistakes that explain one of its failed
    cases, [{"name", "message"}] (the message as the feedback words it), in
    the order first met; failures: how many of its cases failed, by kind
    (`untrusted`'s FAILURE_KINDS and PROBLEM_KINDS, and BUDGET_STOP). Both are
    for the class report (`publish.class_report`), never shown to the student
    beyond the feedback that already says them."""

    id: str
    title: str
    score: float
    max_score: float
    feedback: str
    kind: str = "auto"
    bonus: bool = False
    status: str = "ok"
    groups: list[GroupResult] = field(default_factory=list)
    timeline: dict | None = None
    misconceptions: list[dict[str, str]] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)


@dataclass
class QuestionResult:
    """The grade of one question: id is its number as text ("2"), or
    "answers" for the answers.toml sheet (`engine.answer_sheet`), which alone
    sets student_id: whose variant it was graded against (None: nobody's)."""

    id: str
    title: str
    score: float
    max_score: float
    parts: list[PartResult]
    student_id: str | None = None


@dataclass
class Report:
    """The grade of one submission: its label (path), totals, the questions,
    what the student's code printed (capped, and the bytes it tried to
    print), the walls it ran in (`sandbox.walls`), the parts the grader
    itself failed on ([{part, error}]: regrade these), the grader that
    made it (grader_version()), the course it was graded against
    (`course_stamp`: {name, sha256}) and the written answers (`engine.writeup`:
    the student's text, shown only through `sandbox.untrusted`). An upload
    with no assignments/ folder to grade has `no_submission`, the one
    sentence saying what was expected (every part 0, its feedback that
    sentence: `grading.unsubmitted_report`); "" for every other report.
    grading_seconds: the wall-clock seconds `grading.grade_path` took, opening
    the upload to the last score (None: not measured)."""

    submission: str
    score: float
    max_score: float
    questions: list[QuestionResult]
    output: str = ""
    output_bytes: int = 0
    walls: str = ""
    internal_errors: list[dict] = field(default_factory=list)
    grader_version: str = field(default_factory=grader_version)
    written: dict[str, str] = field(default_factory=dict)   # manual part id -> the answer in writeup.md
    course: dict[str, str] = field(default_factory=dict)    # course_stamp(cfg)
    no_submission: str = ""
    grading_seconds: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def part(self, part_id: str) -> PartResult:
        return next(p for q in self.questions for p in q.parts if p.id == part_id)


def internal_error_result(id: str, title: str, points: float, reason: str, kind: str = "auto",
                          bonus: bool = False) -> PartResult:
    """A part the grader could not grade because the grader failed: 0 points,
    flagged, and not blamed on the student."""
    return PartResult(id, title, 0.0, points,
                      f"internal error in the grader, not your code: {reason}. "
                      "This part is flagged for your instructor to regrade.",
                      kind, bonus, status=INTERNAL_ERROR)
