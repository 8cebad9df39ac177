"""Question 3 graded end to end: the solutions earn every auto point (the
real-run check on a 2 x 2 mesh included), the stubs none, 3.7 is manual."""
import pytest

from shardlab.autograder.engine.grading import grade_folder
from shardlab.autograder.selfcheck import folder_of
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from shardlab.autograder.sandbox.process import Limits

pytestmark = pytest.mark.sandbox

FAST = Limits(call_seconds=2.0, import_seconds=30.0)


def test_parts_grade_solutions_full_and_stubs_zero(cfg):
    for source, full in ((SOLUTIONS, True), (ASSIGNMENTS, False)):
        with folder_of(source) as root:
            report = grade_folder(root, cfg, FAST)
        q = next(q for q in report.questions if q.id == "3")
        assert q.max_score == 12                          # 3.1-3.6: 9, real run 3.8: 3
        assert q.score == (12 if full else 0), [p.feedback for p in q.parts]
        manual = report.part("3.7")
        assert (manual.kind, manual.score, manual.max_score) == ("manual", 0.0, 0.0)
