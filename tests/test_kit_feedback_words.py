"""Feedback a student can act on (issue 45), in the words the grader and the
kit share: a wrong value beside the expected one (None and a wrong type
included), summaries cut at a word boundary and never ending in a
library's source path, sizes that read as sizes, case groups separated by
";"."""
import pytest

from shardlab.autograder.core.parts import Call, Case, function_part
from shardlab.autograder.engine.grading import score_part
from shardlab.autograder.kit.comparison import Compare, call_text, judge, public_feedback
from shardlab.autograder.kit.student_values import describe_exception, shortened, without_library_paths
from shardlab.autograder.sandbox import untrusted
from shardlab.autograder.sandbox.process import Outcome

pytestmark = pytest.mark.pure

GLOO = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
        "5000ms for recv operation to complete")


@pytest.mark.parametrize("kind, expected, got, said", [
    ("int_or_none", None, 5, "expected None, got 5"),
    ("int_or_none", 3, None, "returned None, expected 3"),
    ("int", 3, "3", "returned str, expected an int: got '3', expected 3"),
    ("int", 3000, 4, "wrong value, expected 3,000, got 4"),
])
def test_a_public_case_shows_the_value_returned_beside_the_expected_one(kind, expected, got, said):
    assert public_feedback(judge(kind, expected, got), expected, repr(got)) == said


def test_a_cut_summary_ends_at_a_word_with_an_ellipsis():
    assert shortened("is no device count at all", 16) == "is no device…"
    assert shortened("short", 16) == "short"
    assert untrusted.one_line("is no device count at all", 16) == "is no device…"
    assert shortened("x" * 50, 10) == "x" * 9 + "…"           # one long word: cut inside it


def test_a_library_source_path_is_dropped_and_the_students_kept():
    text = f"RuntimeError: {GLOO} (assignments/pipeline.py, line 214)"
    assert without_library_paths(text) == ("RuntimeError: Timed out waiting 5000ms for recv operation to complete "
                                           "(assignments/pipeline.py, line 214)")
    assert describe_exception(RuntimeError(GLOO + " " + "word " * 100)).endswith("word…")
    assert "/__w/" not in describe_exception(RuntimeError(GLOO))


def test_a_torch_error_without_advice_gets_a_hint_first():
    said = describe_exception(RuntimeError("one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation: [torch.FloatTensor [4, 8]]"))
    assert said.startswith("RuntimeError: autograd saved a tensor for backward that was then overwritten in place")


def test_a_size_in_mb_reads_as_bytes():
    assert call_text("ddp_train", dict(world_size=2, bucket_size_mb=2.0**-20)) == \
        "ddp_train(world_size=2, bucket_size_mb=1 byte (9.54e-07 MB))"
    assert call_text("f", dict(bucket_size_mb=320 / 2**20, x=0.1)) == "f(bucket_size_mb=320 bytes (0.000305 MB), x=0.1)"
    assert call_text("f", dict(bucket_size_mb=0.1)) == "f(bucket_size_mb=0.1)"      # no whole number of bytes


def test_case_groups_are_separated_by_semicolons():
    part = function_part("9.1", "m", "f", lambda x: x, 1, lambda cfg, rng: iter(()), Compare("int"))
    cases = [Case((Call("m", "f", {"x": k}),), False, note) for k, note in
             enumerate(["a, with a comma", "b, too", "c"])]
    result = score_part(part, 3, cases, [[0], [1], [2]], [[Outcome(value=9)], [Outcome(value=9)], [Outcome(value=2)]])
    assert "(a, with a comma; b, too)" in result.feedback
