"""What Gradescope shows of a grading: results.json in Gradescope's documented
format (tests/gradescope_results.schema.json, checked against the spec
page's own examples), each failed case's message shardlab's feedback alone
(no otter "Error at line"), each question once with one line per part in
shardlab's words, and the course config's visibility and stdout choices."""
import json

import jsonschema
import pytest

from helpers import GRADESCOPE_RESULTS_SCHEMA, assert_gradescope_results
from shardlab.autograder.platforms import otter as otter_runtime
from shardlab.reference.config import GradescopeSection

pytestmark = pytest.mark.pure

# https://gradescope-autograders.readthedocs.io/en/latest/specs/ "Output format", transcribed
# (the page's comments dropped, its `.926` written 0.926)
SPEC_EXAMPLE = {
    "score": 44.0, "execution_time": 136, "output": "Text relevant to the entire submission",
    "output_format": "simple_format", "test_output_format": "text", "test_name_format": "text",
    "visibility": "after_due_date", "stdout_visibility": "visible", "extra_data": {},
    "tests": [{"score": 2.0, "max_score": 2.0, "status": "passed", "name": "Your name here", "name_format": "text",
               "number": "1.1", "output": "Giant multiline string that will be placed in a <pre> tag and collapsed "
                                          "by default", "output_format": "text", "tags": ["tag1", "tag2", "tag3"],
               "visibility": "visible", "extra_data": {}}],
    "leaderboard": [{"name": "Accuracy", "value": 0.926}, {"name": "Time", "value": 15.1, "order": "asc"},
                    {"name": "Stars", "value": "*****"}],
}
# the same page, "Test case status"
STATUS_EXAMPLE = {"tests": [{"name": "Compilation check", "status": "passed"},
                            {"name": "Style check", "status": "failed"},
                            {"name": "Test 3", "score": 5, "max_score": 10, "status": "passed"}]}


def _part(id, title, score, max_score, feedback, kind="auto", bonus=False, status="ok"):
    return {"id": id, "title": title, "score": score, "max_score": max_score, "feedback": feedback,
            "kind": kind, "bonus": bonus, "status": status}


REPORT = {"walls": "test walls", "internal_errors": [], "questions": [
    {"id": "1", "title": "Memory accounting", "score": 2.0, "max_score": 4.0, "parts": [
        _part("1.1", "param_count", 2.0, 2.0, "All 5 cases correct."),
        _part("1.3", "activation_bytes", 0.0, 2.0,
              "public case 1: activation_bytes(1, 2) returned 'abc' <b>x</b>; hidden case 3: wrong value")]},
    {"id": "2", "title": "FSDP", "score": 3.0, "max_score": 2.0, "parts": [
        _part("2.1", "allgather_seconds", 2.0, 2.0, "All 4 cases correct."),
        _part("2.11", "prefetch (bonus)", 1.0, 1.0, "Prefetches.", bonus=True),
        _part("2.12", "made up", 0.0, 1.0, "internal error in the grader, not your code: x.", status="internal-error"),
        _part("2.13", "(d) by hand", 0.0, 0.0, "Graded by hand (manual question).", kind="manual")]}]}


def _otter_results():
    """results.json as otter writes it for REPORT: one entry per question with
    otter's maximum (bonus included) and summary, plus otter's own hidden report."""
    return {"output": "shardlab: graded with test walls.", "tests": [
        {"name": "Question 1: Memory accounting", "score": 2, "max_score": 4, "visibility": "after_published",
         "output": "Question 1: Memory accounting results:\n    1.3 activation_bytes result:\n        ..."},
        {"name": "Question 2: FSDP", "score": 3, "max_score": 4, "visibility": "after_published",
         "output": "Question 2: FSDP results: All test cases passed!"},
        {"name": "Autograder Exception", "visibility": "hidden", "status": "failed",
         "output": 'File "<module>", line 1'}]}


def test_the_schema_accepts_the_spec_pages_examples():
    jsonschema.Draft202012Validator.check_schema(json.loads(GRADESCOPE_RESULTS_SCHEMA.read_text()))
    assert "https://gradescope-autograders.readthedocs.io/en/latest/specs/" in GRADESCOPE_RESULTS_SCHEMA.read_text()
    assert_gradescope_results(SPEC_EXAMPLE)
    assert_gradescope_results(STATUS_EXAMPLE)


@pytest.mark.parametrize("change, where", [
    (lambda r: r.update(visiblity="visible"), "'visiblity' was unexpected"),           # a misspelt key
    (lambda r: r["tests"][0].update(hidden=True), "'hidden' was unexpected"),
    (lambda r: r["leaderboard"][0].update(rank=1), "'rank' was unexpected"),
    (lambda r: r.update(stdout_visibility="public"), "'public' is not one of"),
    (lambda r: r["tests"][0].update(status="ok"), "'ok' is not one of"),
    (lambda r: r["tests"][0].update(output_format="markdown"), "'markdown' is not one of"),
    (lambda r: r["tests"][0].update(number=1.1), "1.1 is not of type 'string'"),
    (lambda r: [r.pop("score"), r.pop("tests")], "is not valid under any of the given schemas"),
], ids=["top-level key", "test key", "leaderboard key", "visibility", "status", "format", "number", "no score"])
def test_the_schema_rejects_what_gradescope_does_not_document(change, where):
    results = json.loads(json.dumps(SPEC_EXAMPLE))
    change(results)
    with pytest.raises(AssertionError, match=where):
        assert_gradescope_results(results)


def test_gradescope_results_show_shardlabs_words_once_per_question():
    results = otter_runtime.gradescope_results(_otter_results(), REPORT, GradescopeSection())
    assert_gradescope_results(results)
    assert results == {
        "output": "shardlab: graded with test walls.", "output_format": "simple_format",
        "test_output_format": "text", "stdout_visibility": "hidden",
        "tests": [
            {"name": "Question 1: Memory accounting", "score": 2, "max_score": 4.0, "visibility": "visible",
             "output_format": "simple_format",
             "output": "✅ 1.1 param_count (2 / 2): All 5 cases correct.\n"
                       "❌ 1.3 activation_bytes (0 / 2): public case 1: activation_bytes(1, 2) returned 'abc' "
                       "&lt;b&gt;x&lt;/b&gt;; hidden case 3: wrong value"},
            {"name": "Question 2: FSDP", "score": 3, "max_score": 2.0, "visibility": "visible",   # the bonus: 3 / 2
             "output_format": "simple_format",
             "output": "✅ 2.1 allgather_seconds (2 / 2): All 4 cases correct.\n"
                       "✅ 2.11 prefetch (bonus) (1 / 1 bonus): Prefetches.\n"
                       "⚠️ 2.12 made up (0 / 1): internal error in the grader, not your code: x.\n"
                       "✍️ 2.13 (d) by hand (graded by hand): Graded by hand (manual question)."},
            {"name": "Autograder Exception", "visibility": "hidden", "status": "failed",      # otter's, as it was
             "output": 'File "<module>", line 1'}]}
    chosen = otter_runtime.gradescope_results(_otter_results(), REPORT, GradescopeSection(
        test_visibility="after_published", stdout_visibility="after_due_date"))
    assert [t["visibility"] for t in chosen["tests"]] == ["after_published", "after_published", "hidden"]
    assert chosen["stdout_visibility"] == "after_due_date"


def test_without_a_report_otters_summaries_stay_with_the_course_settings():
    results = otter_runtime.gradescope_results(_otter_results(), {}, GradescopeSection())
    assert_gradescope_results(results)
    assert [t["output"] for t in results["tests"]] == [t["output"] for t in _otter_results()["tests"]]
    assert [t.get("max_score") for t in results["tests"]] == [4, 4, None]
    assert [t["visibility"] for t in results["tests"]] == ["visible", "visible", "hidden"]


def test_a_submission_that_could_not_be_graded_says_why_once_per_question():
    refused = {"error": "submission refused: assignments/<b>x</b> is a symbolic link"}
    results = otter_runtime.gradescope_results(_otter_results(), refused, GradescopeSection())
    assert_gradescope_results(results)
    assert [t["output"] for t in results["tests"]][:2] == [
        "submission refused: assignments/&lt;b&gt;x&lt;/b&gt; is a symbolic link"] * 2


def test_results_json_records_the_course_and_the_grader_in_extra_data():
    course = {"name": "Systems for Large Models", "sha256": "ab" * 32}
    stamps = {"course": course, "grader_version": "0.1.0+git.0123456789ab", "autograder_zip_sha256": "cd" * 32}
    otter = {**_otter_results(), "extra_data": {"kept": 1}}
    results = otter_runtime.gradescope_results(otter, {**REPORT, **stamps}, GradescopeSection())
    assert_gradescope_results(results)
    assert results["extra_data"] == {"kept": 1, **stamps}
    refused = otter_runtime.gradescope_results(_otter_results(), {"error": "no assignments/", **stamps},
                                               GradescopeSection())
    assert_gradescope_results(refused)
    assert refused["extra_data"] == stamps            # an ungraded submission says which course refused it


def test_finalize_results_reads_the_shipped_course_config(tmp_path):
    ag = tmp_path / "autograder"
    for folder in ("source", "results", "shardlab"):
        (ag / folder).mkdir(parents=True)
    otter_runtime.finalize_results(ag)                       # no results.json: nothing to do, no error
    assert not (ag / "results" / "results.json").exists()
    (ag / "results" / "results.json").write_text(json.dumps(_otter_results()))
    (ag / otter_runtime.REPORT_FILE).write_text(json.dumps(REPORT))
    (ag / "source" / otter_runtime.CONFIG_FILE).write_text(
        '[gradescope]\ntest_visibility = "after_due_date"\nstdout_visibility = "visible"\n')
    otter_runtime.finalize_results(ag)
    results = json.loads((ag / "results" / "results.json").read_text())
    assert_gradescope_results(results)
    assert [t["visibility"] for t in results["tests"]] == ["after_due_date", "after_due_date", "hidden"]
    assert results["stdout_visibility"] == "visible" and results["tests"][1]["max_score"] == 2
    (ag / "source" / otter_runtime.CONFIG_FILE).write_text("[gradescope\n")      # unreadable: the defaults
    otter_runtime.finalize_results(ag)
    results = json.loads((ag / "results" / "results.json").read_text())
    assert [t["visibility"] for t in results["tests"]] == ["visible", "visible", "hidden"]


OTTER_TEST_FILE = '''OK_FORMAT = False
from otter.test_files import test_case
name = "Question 1: Memory accounting"
points = None

@test_case(name="1.1 param_count", points=2, hidden=False)
def part_1_1(shardlab_submission):
    raise AssertionError(shardlab_submission)

@test_case(name="1.3 activation_bytes", points=2, hidden=False)
def part_1_3(shardlab_submission):
    raise KeyError("questions")

@test_case(name="1.4 devices_needed", points=2, hidden=False)
def part_1_4(shardlab_submission):
    pass
'''


@pytest.mark.parametrize("report, first", [
    (None, "shardlab: the submission holds no assignments/ folder"),   # check_part's own error, no report
    ({"questions": [{"parts": [_part("1.1", "param_count", 0.0, 2.0, "returned <b>'abc'"),
                               _part("1.3", "activation_bytes", 2.0, 2.0, "All 3 cases correct.")]}]},
     "returned &lt;b&gt;'abc'"),                                       # otter's strip("'") cuts the last quote
], ids=["no report", "report"])
def test_a_failed_cases_message_is_shardlabs_alone(tmp_path, report, first):
    """otter's own test-file runner, in this process, on a file shaped like the export's."""
    from otter.nbmeta_config import NBMetadataConfig
    from otter.test_files import create_test_file
    path = tmp_path / "q1.py"
    path.write_text(OTTER_TEST_FILE)
    test_file = create_test_file(str(path), NBMetadataConfig())
    test_file.run({"shardlab_submission": "shardlab: the submission holds no assignments/ folder"
                   if report is None else "returned &lt;b&gt;'abc'"})
    before = [case.message for case in test_file.test_case_results]
    assert before[0].startswith("❌ Test case failed\nError at line")       # otter's noise, as it comes
    assert before[0].endswith("AssertionError: " + first.rstrip("'"))

    class Results:                                    # otter's GradingResults, as the plugin sees it
        results = {"q1": test_file}
    otter_runtime.clean_case_messages(Results(), report)
    after = [case.message for case in test_file.test_case_results]
    assert after == [first, before[1], "✅ Test case passed"]
    assert "KeyError: questions" in after[1]          # not shardlab's words: a grader fault, kept whole
