"""writeup.md, the written answers: from the starter kit's blank file, through
grading (each hand-graded part answered, with its word count, or missing),
to the batch's one file per part for the graders and Gradescope's output."""
from __future__ import annotations

import dataclasses
import os

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.engine.answer_sheet import grade_answers, sheet_toml
from shardlab.autograder.engine.grading import grade_folder
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.engine.writeup import (MAX_WRITEUP_BYTES, WRITEUP_FILE, read_writeup, writeup_prompts,
                                               writeup_template, written_feedback, written_parts)
from shardlab.autograder.kit.writeup_check import writeup_lines
from shardlab.autograder.platforms.batch import write_written_answers
from shardlab.autograder.platforms.otter import ANSWER_QUOTE, question_output
from shardlab.autograder.publish.starter import kit_files
from shardlab.autograder.sandbox.process import Limits
from shardlab.reference.config import load_config, replaced

FAST = Limits(call_seconds=2.0, import_seconds=30.0)
# docs/spec.md's written deliverables: every sub-question the handout asks to derive, compute or explain,
# the free response 3 (d) being task 3.7
WRITTEN_IDS = ["1.a", "1.b", "2.a", "3.a", "3.b", "3.c", "3.7", "4.a", "4.b", "4.c", "5.a", "5.b", "5.c", "5.d", "5.e"]


def _fill(template: str, answers: dict[str, str]) -> str:
    for part_id, text in answers.items():
        head = next(line for line in template.splitlines() if line.startswith(f"## {part_id} "))
        start = template.index(head)
        blank = template.index("(your answer here)", start)
        template = template[:blank] + text + template[blank + len("(your answer here)"):]
    return template


@pytest.mark.pure
def test_the_kit_carries_one_section_per_written_part(cfg):
    kit = kit_files(cfg, "# handout\n")
    assert kit[WRITEUP_FILE] == writeup_template()
    assert [p.id for p in written_parts()] == WRITTEN_IDS
    assert [line.split()[1] for line in kit[WRITEUP_FILE].splitlines() if line.startswith("## ")] == WRITTEN_IDS
    # no course secret: no answers.toml, and the README hands in what the kit holds (with a secret:
    # tests/test_publish_written_answers.py)
    assert "answers.toml" not in kit and "answers.toml" not in kit["README.md"]
    assert "zip -r submission.zip assignments writeup.md`" in kit["README.md"]


@pytest.mark.pure
def test_reading_strips_prompts_and_placeholders_and_counts_words(tmp_path):
    (tmp_path / WRITEUP_FILE).write_text(_fill(writeup_template(), {"1.a": "Four hundred and two devices."}))
    sections = read_writeup(tmp_path)
    assert sections == {part_id: "Four hundred and two devices." if part_id == "1.a" else "" for part_id in WRITTEN_IDS}
    assert written_feedback("1.a", sections) == "Graded by hand. Answered in writeup.md (5 words)."
    # with the part's points in the course: worth them, or not graded (4.c by default)
    assert written_feedback("1.a", sections, 1) == "Graded by hand (1 point). Answered in writeup.md (5 words)."
    assert written_feedback("4.c", sections, 0).startswith("Not graded (a place for your answer only). Missing")
    assert "is empty" in written_feedback("1.b", sections)
    assert "no writeup.md" in written_feedback("1.a", read_writeup(tmp_path / "nowhere"))


@pytest.mark.pure
def test_notes_and_the_prompt_alone_count_as_empty_in_the_graders_and_the_kits_words(tmp_path):
    """A section of only "TODO", "TBD" or the template's prompt is empty (issue 45); the grader's
    feedback and the kit's pytest line say it in the same words (one function, kit.writeup_check)."""
    prompts = writeup_prompts()
    answers = {"1.a": "TODO finish", "1.b": "- tbd: later\nTODO", "2.a": prompts["2.a"],
               "3.a": "Two devices. TODO: check the units", "3.b": "TBD\nThe ratio is 4."}
    text = _fill(writeup_template(), answers).replace("## 3.c ", "## 3c ")     # a renamed heading
    (tmp_path / WRITEUP_FILE).write_text(text)
    sections = read_writeup(tmp_path)
    kit_lines = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in writeup_lines(text, prompts)}
    for part_id in ("1.a", "1.b", "2.a"):
        said = written_feedback(part_id, sections, prompt=prompts[part_id])
        assert said == (f"Graded by hand. Missing: the section '## {part_id}' of writeup.md holds only a placeholder "
                        f"(TODO, TBD or the template's prompt), which counts as empty.")
        assert said == f"Graded by hand. Missing: {kit_lines[part_id]}."
    # a note after an answer, or an answer after a note, leaves an answer; the note is not counted
    for part_id, words in (("3.a", 6), ("3.b", 4)):
        said = written_feedback(part_id, sections, prompt=prompts[part_id])
        assert said == f"Graded by hand. Answered in writeup.md ({words} words)."
    assert "3.a" not in kit_lines and "3.b" not in kit_lines
    renamed = written_feedback("3.c", sections, prompt=prompts["3.c"], task_ids=tuple(prompts))
    assert renamed == ("Graded by hand. Missing: writeup.md has no section '## 3.c' (keep each heading as the "
                       "template has it: ## 3c is no task id).")
    assert renamed == f"Graded by hand. Missing: {kit_lines['3.c']}."
    assert kit_lines["4.a"] == "the section '## 4.a' of writeup.md is empty"
    assert set(kit_lines) == set(prompts) - {"3.a", "3.b"}
    assert writeup_lines(None, prompts) == ["the submission has no writeup.md beside assignments/"]


@pytest.mark.pure
def test_a_linked_or_huge_writeup_is_not_followed_or_read_whole(tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("## 1.a\nthe answer key\n")
    (tmp_path / "sub").mkdir()
    os.symlink(secret, tmp_path / "sub" / WRITEUP_FILE)
    assert read_writeup(tmp_path / "sub") is None
    (tmp_path / WRITEUP_FILE).write_text("## 1.a\n" + "word " * MAX_WRITEUP_BYTES)
    assert len(read_writeup(tmp_path)["1.a"].split()) < MAX_WRITEUP_BYTES / 5 + 1


@pytest.mark.sandbox
def test_written_answers_round_trip_from_kit_to_graders(cfg, submission, tmp_path):
    """Two students: one answers 1 (a) in the kit's writeup.md, one hands in none.
    The reports say so; the batch collects both for the graders; Gradescope's
    output shows the answer, escaped."""
    root = submission()
    (root / WRITEUP_FILE).write_text(_fill(writeup_template(), {"1.a": "It needs <b>many</b> devices."}))
    answered = grade_folder(root, cfg, FAST, modules={"memory"}).to_dict()
    (root / WRITEUP_FILE).unlink()
    silent = grade_folder(root, cfg, FAST, modules={"memory"}).to_dict()
    by_id = {p["id"]: p for p in answered["questions"][0]["parts"]}
    # words are whitespace-separated: "It", "needs", "<b>many</b>", "devices."
    assert by_id["1.a"]["feedback"] == "Graded by hand (2 points). Answered in writeup.md (4 words)."
    assert "is empty" in by_id["1.b"]["feedback"] and by_id["1.a"]["kind"] == "manual"
    assert answered["written"] == {"1.a": "It needs <b>many</b> devices."} and silent["written"] == {}
    assert "no writeup.md" in {p["id"]: p for p in silent["questions"][0]["parts"]}["1.a"]["feedback"]

    files = write_written_answers(tmp_path / "written", {"ada": {**answered, "status": "ok"},
                                                          "bob": {**silent, "status": "ok"}})
    text = (tmp_path / "written" / "1.a.md").read_text()
    assert len(files) == len(WRITTEN_IDS)
    assert "## ada\n\n```text\nIt needs <b>many</b> devices.\n```" in text and "## bob\n\n_no answer_" in text

    shown = question_output(answered["questions"][0], answered["written"])
    assert "It needs &lt;b&gt;many&lt;/b&gt; devices." in shown and "<b>" not in shown


@pytest.mark.pure
def test_a_writeup_cannot_pose_as_a_graded_line():
    """A writeup that says "✅ 1.a (100 / 2): graded" is shown to hand graders quoted, under a heading that
    says it is the student's answer: no line of it starts as one of the grader's lines does."""
    forged = "Fine.\n✅ 1.a Why sharding (100 / 2): graded\n❌ 1.b (0 / 1): see above\r\n⚠️ note"
    question = {"parts": [{"id": "1.a", "title": "Why sharding", "kind": "manual", "score": 0, "max_score": 0,
                           "feedback": "Graded by hand (2 points)."}]}
    shown = question_output(question, {"1.a": forged}).splitlines()
    graders = [line for line in shown if line.startswith(("✅", "❌", "⚠️", "✍️"))]
    assert graders == [shown[0]] and shown[0].startswith("✍️ 1.a Why sharding")
    assert "the student's answer to 1.a" in shown[1]
    assert all(line.startswith(ANSWER_QUOTE) for line in shown[2:]) and len(shown) == 6
    assert any("✅ 1.a Why sharding (100 / 2): graded" in line for line in shown[2:])


@pytest.mark.pure
def test_with_a_secret_the_graders_see_each_students_own_numbers_beside_the_answer(tmp_path):
    """The answers sheet's result names the student it graded; the batch's written/ file
    shows that student's variant numbers of the part's question (question 1 for 1.a)."""
    course = load_config(content.folder("reference") / "courses" / "a100.toml")
    variant = variant_config(course, "u1001")
    (tmp_path / "answers.toml").write_text(sheet_toml(variant, "u1001", values=True))
    sheet = grade_answers(tmp_path, course)
    assert sheet is not None and sheet.student_id == "u1001" and sheet.score == sheet.max_score
    (tmp_path / "answers.toml").unlink()
    nobody = grade_answers(tmp_path, course)
    assert nobody is not None and nobody.student_id is None
    results = {"ada": {"status": "ok", "questions": [dataclasses.asdict(sheet)], "written": {"1.a": "Many."}},
               "bob": {"status": "ok", "questions": [dataclasses.asdict(nobody)]},
               "eve": {"status": "error", "error": "the grader exited with status 1"}}
    write_written_answers(tmp_path / "written", results, course)
    text = (tmp_path / "written" / "1.a.md").read_text()
    m = variant.model
    params = 2 * m.d_model * m.d_ff * m.num_blocks          # by hand: P = 2 · D · F · L
    assert m.name != course.model.name and params != 2 * 8192 * 53248 * 80
    ada = text[text.index("## ada"):text.index("## bob")]
    assert f"Variant of student `u1001` (model {m.name}): parameters = {params:,} parameters;" in ada
    assert ada.index("Variant of student") < ada.index("Many.")
    assert "Variant: unknown (no student id was graded" in text[text.index("## bob"):text.index("## eve")]
    assert "Variant: unknown (the submission was not graded)" in text[text.index("## eve"):]
    # without a secret, the file is as before: no variant line
    write_written_answers(tmp_path / "plain", results, replaced(course, {"course.secret": ""}))
    assert "Variant" not in (tmp_path / "plain" / "1.a.md").read_text()
