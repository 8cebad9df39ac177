"""Attacks on feedback (issue 10, deliverable 6): the student writes text
that ends up in their feedback.

Exception messages, returned values and rank errors are the student's words,
and everything a worker says on its result channel can be forged by the code
it runs. Feedback is shown in a terminal (rich), written as Markdown
(batch: feedback/<name>.md) and handed to otter as a failure message
(Gradescope shows it as HTML). So it must carry no control characters or
terminal escapes, be escaped for each format where it is shown, stay small,
and hidden cases must say only what kind of failure happened: never the
student's text, which could carry the hidden inputs out.
"""
import builtins
import re

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt

from shardlab.autograder.platforms import batch

from shardlab.autograder.engine import grading, plan

from shardlab.autograder.platforms import otter as otter_runtime

from shardlab.autograder.sandbox import untrusted
from shardlab.autograder.engine.grading import grade_folder, score_part
from shardlab.autograder.questions import all_parts
from shardlab.autograder.sandbox.process import Limits, Outcome
from shardlab.autograder.publish.stubs import SOLUTIONS

# Tiers per test: most tests score forged worker outcomes in-process (pure); the
# ones taking `evil_report` grade a real submission in the sandbox.

FAST = Limits(call_seconds=2.0, import_seconds=30.0)

# one line (a raised exception shows its first line only), then what a forged channel can add
EVIL_LINE = ("<script>alert(1)</script> <img src=x onerror=alert(2)> **bold** _em_ [x](http://e) "
             "\x1b[31mred\x1b[0m [bold red]rich[/bold red] [/] [link=http://e]l[/link] \u202egnp.exe\u200b")
EVIL = (EVIL_LINE + " \x1b]0;title\x07 over\rwrite\x08\x00 # heading\n- item\n\n| a | b |\n"
        + "A" * 100_000)
HIDDEN_LEAK = "HIDDEN-LEAK"
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def _part(part_id):
    return next(p for p in all_parts() if p.id == part_id)


def _plan(cfg, part_id):
    part = _part(part_id)
    cases = part.cases(cfg, plan.part_rng(cfg, part))
    return part, cases, [part.expect(c) for c in cases]


def _forged(cfg, part_id, error_for_hidden):
    """What a worker whose result channel the student forged would report:
    EVIL for every public case, `error_for_hidden` for every hidden one."""
    part, cases, expected = _plan(cfg, part_id)
    outcomes = [[Outcome(error=EVIL if case.public else error_for_hidden)] for case in cases]
    return score_part(part, 3, cases, expected, outcomes), cases


def _clean(text: str) -> None:
    assert not CONTROL.search(text), repr(CONTROL.search(text))


@pytest.mark.pure
def test_public_error_text_is_one_clean_capped_line(cfg):
    result, cases = _forged(cfg, "1.1", "ValueError: boom")
    _clean(result.feedback)
    assert len(result.feedback) <= grading.MAX_FAILURES_SHOWN * untrusted.LINE_CAP + 200
    assert "…" in result.feedback                                 # cut, and says so
    assert "<script>alert(1)</script>" in result.feedback          # plain text here: escaped where shown
    assert "over write" in result.feedback and "title" not in result.feedback    # \r, OSC title


@pytest.mark.pure
def test_hidden_cases_never_echo_the_students_text(cfg):
    leak = f"KeyError: '{HIDDEN_LEAK} d_model=4096' (assignments/memory.py, line 3)"
    result, cases = _forged(cfg, "1.1", leak)
    assert HIDDEN_LEAK not in result.feedback and "4096" not in result.feedback
    # every case raised: said once, in the public case's words (`score_part`), else each hidden case by its kind
    assert ("a hidden case of param_count (other inputs): raised an exception" in result.feedback
            or result.feedback.startswith(f"All {len(cases)} cases failed: <script>"))


@pytest.mark.pure
@pytest.mark.parametrize("error, kind", [
    ("param_count(d_model=7, d_ff=9, num_blocks=2) did not finish within 5 s", "did not finish in time"),
    ("importing assignments/memory.py timed out", "did not finish in time"),
    ("param_count(d_model=7, d_ff=9, num_blocks=2) ended the grading process (exit status 3)",
     untrusted.CRASHED),
    ("param_count(d_model=7, d_ff=9, num_blocks=2) corrupted the grader's result channel", untrusted.CRASHED),
    ("assignments/memory.py failed to import: RuntimeError: d_model=7 (assignments/memory.py, line 1)",
     "failed to import"),
    ("rank 1: ValueError: d_model=7 [all_reduce #3]", "raised an exception"),
    ("TypeError: returned a numpy.ndarray, which is not a plain number", "wrong type"),
    ("Leak_d_model_7: (assignments/memory.py, line 3)", "raised an exception"),     # a class of its own
    ("not run: an earlier call of param_count did not finish", untrusted.NOT_RUN),
    ("d_model=7 " + EVIL, "raised an exception"),
])
def test_a_hidden_failure_is_told_by_its_kind_only(error, kind):
    assert untrusted.failure_kind(error) == kind


@pytest.mark.pure
@pytest.mark.parametrize("part_id, told", [
    ("1.1", "a hidden case of param_count (other inputs): wrong type"),
    ("3.6", "): wrong value"),
])
def test_hidden_wrong_values_do_not_echo_returned_keys(cfg, part_id, told):
    """A comparison's reason can quote the returned value (dict keys): not for hidden cases."""
    part, cases, expected = _plan(cfg, part_id)
    outcomes = [[Outcome(value=exp[0] if case.public else {f"{HIDDEN_LEAK}-7": 1})]
                for case, exp in zip(cases, expected)]
    result = score_part(part, 3, cases, expected, outcomes)
    assert HIDDEN_LEAK not in result.feedback and told in result.feedback


@pytest.mark.pure
def test_public_returned_value_is_capped(cfg):
    part, cases, expected = _plan(cfg, "1.1")
    outcomes = [[Outcome(value="\x1b[2J" + "9" * 100_000 if case.public else exp[0])]
                for case, exp in zip(cases, expected)]
    result = score_part(part, 3, cases, expected, outcomes)
    _clean(result.feedback)
    assert len(result.feedback) <= grading.MAX_FAILURES_SHOWN * untrusted.LINE_CAP + 200


def _student(course: tuple) -> str:
    """The solutions, with a param_count that raises EVIL_LINE on a public
    case, passes the other and leaks its inputs on the hidden ones."""
    return (SOLUTIONS / "memory.py").read_text() + f'''

_right_param_count = param_count


def param_count(d_model, d_ff, num_blocks):
    if (d_model, d_ff, num_blocks) == (8, 24, 3):          # a public case
        raise ValueError({EVIL_LINE!r})
    if (d_model, d_ff, num_blocks) == {course!r}:          # the other public case passes
        return _right_param_count(d_model, d_ff, num_blocks)
    raise KeyError(f"{HIDDEN_LEAK} d_model={{d_model}} d_ff={{d_ff}} num_blocks={{num_blocks}}")
'''


@pytest.fixture
def evil_report(cfg, submission):
    """A real grading (plain-call sandbox, question 1 only) of a student whose
    param_count raises EVIL on a public case and leaks its inputs on hidden ones."""
    m = cfg.model
    root = submission(memory=_student((m.d_model, m.d_ff, m.num_blocks)))
    return grade_folder(root, cfg, FAST, label="evil", modules={"memory"})


@pytest.mark.sandbox
def test_graded_feedback_is_clean_and_hides_hidden_text(evil_report):
    p = evil_report.part("1.1")
    assert p.score < p.max_score
    _clean(p.feedback)
    assert HIDDEN_LEAK not in p.feedback
    assert "a hidden case of param_count (other inputs): raised an exception" in p.feedback
    assert "param_count(d_model=8, d_ff=24, num_blocks=3): ValueError" in p.feedback


def _rendered_markdown(report) -> str:
    text = batch.feedback_markdown("evil", {**report.to_dict(), "status": "ok"})
    return MarkdownIt("commonmark", {"html": True}).render(text)


@pytest.mark.sandbox
def test_markdown_feedback_is_escaped(evil_report):
    html = _rendered_markdown(evil_report)
    assert "<script" not in html and "<img" not in html and 'href="http://e"' not in html
    assert "<strong>bold</strong>" not in html and "<em>em</em>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "**bold**" in html
    _clean(html.replace("\n", ""))


@pytest.mark.pure
def test_batch_error_row_is_escaped():
    text = batch.feedback_markdown("x", {"status": "error", "error": "the grader exited: <b>" + EVIL})
    html = MarkdownIt("commonmark", {"html": True}).render(text)
    assert "<b>" not in html and "<script" not in html and len(text) < 3000


@pytest.mark.sandbox
def test_cli_shows_markup_as_text(evil_report, monkeypatch, tmp_path):
    """rich would render [bold red] as style and crash on a stray [/]."""
    from shardlab.autograder import cli
    monkeypatch.setattr(grading, "grade_path", lambda path, cfg, **_: evil_report)
    done = CliRunner().invoke(cli.cli, ["grade", str(tmp_path)])
    assert done.exit_code == 0, done.output
    shown = " ".join(done.output.split())          # rich wraps long lines
    assert "[bold red]rich[/bold red]" in shown and "[/]" in shown
    _clean(done.output.replace("\n", ""))


@pytest.mark.sandbox
def test_otter_failure_message_is_html_escaped(evil_report, monkeypatch):
    monkeypatch.setattr(otter_runtime, "graded", lambda handle: {**evil_report.to_dict()})
    with pytest.raises(AssertionError) as failed:
        otter_runtime.check_part({"root": "x"}, "1.1")
    message = str(failed.value)
    assert "<script" not in message and "&lt;script&gt;" in message
    assert HIDDEN_LEAK not in message and len(message) <= untrusted.FEEDBACK_CAP + 1
    _clean(message)


@pytest.mark.pure
def test_gradescope_output_escapes_a_refusal_naming_a_students_file():
    notes = otter_runtime.grading_notes({"error": "submission refused: assignments/<img src=x onerror=alert(1)> "
                                                  "is a symbolic link"})
    assert "<img" not in notes and "&lt;img" in notes


@pytest.mark.pure
def test_sanitisers():
    assert untrusted.one_line("a\r\nb\tc\x1b[31md\x1b[0m\x00e\u202ef") == "a b cdef"
    assert untrusted.one_line("x" * 10, 5) == "xxxx…"
    assert untrusted.markdown("**a** <b> [c](d) `e` #f") == r"\*\*a\*\* &lt;b&gt; \[c\](d) \`e\` #f"
    assert untrusted.html("<b>&") == "&lt;b&gt;&amp;"
    assert untrusted.rich("[bold]x[/]") == r"\[bold]x\[/]"
    assert untrusted.block("line 1\r\nline 2\x1b[1m\n", 100) == "line 1\nline 2\n"


# ---- issue 30: a hidden case's feedback carries nothing the student chose ----------------------------

BUILTIN_EXCEPTIONS = sorted(name for name, value in vars(builtins).items()
                            if isinstance(value, type) and issubclass(value, BaseException))


def _encoding(cfg, part_id: str, error_for) -> str:
    """Part `part_id`'s feedback when every hidden case fails with `error_for(k, case)`, the public ones pass."""
    part, cases, expected = _plan(cfg, part_id)
    outcomes = [[Outcome(value=exp[0]) if case.public else Outcome(error=error_for(k, case))]
                for k, (case, exp) in enumerate(zip(cases, expected))]
    return score_part(part, 3, cases, expected, outcomes).feedback


@pytest.mark.pure
def test_the_exception_class_carries_no_hidden_input(cfg):
    """The attack: raise, in each hidden case, the built-in exception whose index is a hidden input
    (about 5.7 bits a case shown). The feedback must be the same as if every case raised ValueError."""
    def chosen(k, case):
        blocks = case.calls[0].args["num_blocks"]
        return f"{BUILTIN_EXCEPTIONS[blocks % len(BUILTIN_EXCEPTIONS)]}: x (assignments/memory.py, line 3)"
    assert _encoding(cfg, "1.1", chosen) == _encoding(cfg, "1.1", lambda k, c: "ValueError: x")
    assert len({untrusted.failure_kind(f"{name}: boom") for name in BUILTIN_EXCEPTIONS}) == 1


@pytest.mark.pure
def test_the_failing_rank_and_the_returned_type_carry_nothing(cfg):
    assert len({untrusted.failure_kind(f"rank {r}: {e}: x [all_reduce #{r}]")
                for r in range(8) for e in ("ValueError", "KeyError", "Mine")}) == 1
    from shardlab.autograder.kit.comparison import judge
    odd = [1.5, "7", [7], {"7": 7}, True, None, 7.0]
    for kind, expected in (("int", 7), ("real", 7.5), ("int_dict", {"a": 1}), ("int_or_none", 7)):
        told = {untrusted.problem_kind(judge(kind, expected, got)) for got in odd
                if judge(kind, expected, got) is not None}
        assert told <= set(untrusted.PROBLEM_KINDS), (kind, told)
    # a dict whose values' types vary: the key and the type are the student's
    assert {untrusted.problem_kind(judge("int_dict", {"a": 1}, {"a": v})) for v in (1.0, "1", [1], None)} \
        == {untrusted.WRONG_TYPE}


def _class_per_input(course: tuple) -> str:
    """The solutions, with a param_count right on the course's public case and raising, on every
    other input, the built-in exception that a hidden input indexes."""
    return (SOLUTIONS / "memory.py").read_text() + f'''

import builtins as _b
_right_param_count = param_count
_CLASSES = sorted(n for n, v in vars(_b).items() if isinstance(v, type) and issubclass(v, Exception)
                  and n not in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"))


def param_count(d_model, d_ff, num_blocks):
    if (d_model, d_ff, num_blocks) in ((8, 24, 3), {course!r}):
        return _right_param_count(d_model, d_ff, num_blocks)
    raise getattr(_b, _CLASSES[num_blocks % len(_CLASSES)])("x")
'''


@pytest.mark.sandbox
def test_a_real_submission_cannot_read_hidden_inputs_off_its_exceptions(cfg, submission):
    m = cfg.model
    report = grade_folder(submission(memory=_class_per_input((m.d_model, m.d_ff, m.num_blocks))), cfg, FAST,
                          label="encoder", modules={"memory"})
    feedback = report.part("1.1").feedback
    hidden = [line for line in feedback.split(" | ") if "a hidden case of" in line]
    assert hidden and all(line.endswith(": raised an exception") for line in hidden), feedback
    assert not any(name in feedback for name in BUILTIN_EXCEPTIONS if name != "Exception"), feedback
