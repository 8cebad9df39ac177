"""What a grading produces: one PartResult per graded part, grouped into
QuestionResults, in one Report per submission. Plain data, so a report
crosses process boundaries as JSON (`shardlab grade --json`, batch grading,
the otter runtime) and every front end reads the same fields."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

INTERNAL_ERROR = "internal-error"
"""A PartResult's status when the grader failed on the part, not the student."""


@dataclass
class PartResult:
    """The grade of one part.

    id, title: the part's (task id "2.7", its short name); score, max_score:
    points earned and possible; feedback: what the student reads; kind:
    'auto', 'manual' (graded by hand) or 'answers' (the answers.toml sheet);
    bonus: its points are not part of the question's max_score; status: 'ok'
    or INTERNAL_ERROR (0 points, flagged for the instructor to regrade)."""

    id: str
    title: str
    score: float
    max_score: float
    feedback: str
    kind: str = "auto"
    bonus: bool = False
    status: str = "ok"


@dataclass
class QuestionResult:
    """The grade of one question: id is its number as text ("2"), or
    "answers" for the answers.toml sheet (engine/answer_sheet.py)."""

    id: str
    title: str
    score: float
    max_score: float
    parts: list[PartResult]


@dataclass
class Report:
    """The grade of one submission: its label (path), totals, the questions,
    what the student's code printed (capped, and the bytes it tried to
    print), the walls it ran in (sandbox/walls.py) and the parts the grader
    itself failed on ([{part, error}]: regrade these)."""

    submission: str
    score: float
    max_score: float
    questions: list[QuestionResult]
    output: str = ""
    output_bytes: int = 0
    walls: str = ""
    internal_errors: list[dict] = field(default_factory=list)

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
