"""The kit's short pytest report (kit/local_checks.py: `failure_line`,
`task_marker`; the hooks are the kit's tests/conftest.py, run in
tests/test_publish_starter_kit.py): one line per failed public test, the
grader's words for a wrong value, the call and the student's innermost line
for an exception; one marker per task, so that selecting 2.1 never selects
2.10."""
import pytest

from shardlab.autograder.kit.comparison import call_text
from shardlab.autograder.kit.local_checks import FEEDBACK_CHARS, call_of, failure_line, task_marker

pytestmark = pytest.mark.pure

CASE = {"id": "1.1 param_count #1", "part": "1.1",
        "check": {"module": "memory", "function": "param_count", "args": {"d_model": 8, "num_blocks": 3}}}
RUN = {"id": "2.7 fsdp_train ...", "part": "2.7", "call": "fsdp_train(world_size=2, seed=122)"}


def _raised_in_assignments(source: str) -> BaseException:
    """The exception a student's function raises, its frame in assignments/memory.py."""
    namespace: dict = {}
    exec(compile(source, "/kit/assignments/memory.py", "exec"), namespace)
    with pytest.raises(Exception) as caught:
        namespace["param_count"](d_model=8, num_blocks=3)
    return caught.value


def test_one_marker_per_task():
    assert [task_marker(t) for t in ("2.1", "2.10", "2.11", "5.9")] == ["task_2_1", "task_2_10", "task_2_11",
                                                                       "task_5_9"]


def test_the_call_is_named_as_the_checks_name_it():
    assert call_of(CASE) == call_text("param_count", {"d_model": 8, "num_blocks": 3}) == \
        "param_count(d_model=8, num_blocks=3)"
    assert call_of(RUN) == RUN["call"]


def test_a_check_s_own_message_is_the_line():
    said = "param_count(d_model=8, num_blocks=3): wrong value, expected 1,152, got 1,000 — this forgets biases"
    assert failure_line(CASE, AssertionError(said)) == said
    run_said = f"{RUN['call']}: rank 0: NotImplementedError: Task 2.7: FSDP.__init__ (assignments/fsdp.py, line 131)"
    assert failure_line(RUN, AssertionError(run_said)) == run_said


def test_an_exception_names_the_call_and_the_student_s_line():
    exc = _raised_in_assignments("def param_count(d_model, num_blocks):\n"
                                 "    raise NotImplementedError('Task 1.1: param_count')\n")
    assert failure_line(CASE, exc) == ("param_count(d_model=8, num_blocks=3): NotImplementedError: Task 1.1: "
                                       "param_count (assignments/memory.py, line 2)")
    # the student's own assert is theirs, not a check's verdict: named as an exception
    exc = _raised_in_assignments("def param_count(d_model, num_blocks):\n    x = 1\n    assert x == 2, 'mine'\n")
    assert failure_line(CASE, exc) == ("param_count(d_model=8, num_blocks=3): AssertionError: mine "
                                       "(assignments/memory.py, line 3)")


def test_a_line_stays_one_short_line():
    line = failure_line(CASE, AssertionError("param_count(d_model=8, num_blocks=3): wrong value,\n  expected "
                                             + "[1, 2] " * 200))
    # cut at a word boundary (issue 45): what is left is whole words of the message, then the ellipsis
    assert "\n" not in line and FEEDBACK_CHARS - 10 < len(line) <= FEEDBACK_CHARS and line.endswith("…")
    assert line.endswith("2]…")
    assert line.startswith("param_count(d_model=8, num_blocks=3): wrong value, expected [1, 2] [1, 2]")
