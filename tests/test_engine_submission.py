"""Finding assignments/ in an upload: how deep `find_assignments` looks, and
the one sentence a student reads when an upload has none, or several."""
from pathlib import Path

import pytest

from shardlab.autograder.engine.submission import (NO_ASSIGNMENTS, SEARCH_DEPTH, NotASubmission,
                                                   assignments_candidates, find_assignments,
                                                   no_assignments_sentence, open_submission)
from shardlab.autograder.engine.grading import unsubmitted_report
from shardlab.autograder.questions import questions

pytestmark = pytest.mark.pure


def _kit_at(upload: Path, *folders: str) -> Path:
    holder = upload.joinpath(*folders)
    (holder / "assignments").mkdir(parents=True)
    (holder / "assignments" / "memory.py").write_text("x = 1\n")
    return holder


def test_assignments_is_found_four_folders_down_not_five(tmp_path):
    assert SEARCH_DEPTH == 4
    four = _kit_at(tmp_path / "four", "Users", "ada", "Desktop", "kit")
    assert find_assignments(tmp_path / "four") == four
    _kit_at(tmp_path / "five", "home", "Users", "ada", "Desktop", "kit")
    assert find_assignments(tmp_path / "five") is None
    assert no_assignments_sentence(tmp_path / "five", assignments_candidates(tmp_path / "five")) == NO_ASSIGNMENTS


def test_the_upload_itself_its_assignments_folder_and_a_kits_own_subfolders(tmp_path):
    kit = _kit_at(tmp_path, "kit")
    _kit_at(kit, "old")                               # inside a kit: the kit's own, not a second candidate
    (tmp_path / "__MACOSX" / "kit" / "assignments").mkdir(parents=True)     # tool-made: never looked into
    assert find_assignments(tmp_path) == kit
    assert find_assignments(kit) == kit
    assert find_assignments(kit / "assignments") == kit


def test_two_candidates_are_named_safely_in_one_sentence(tmp_path):
    _kit_at(tmp_path, "kit-a")
    _kit_at(tmp_path, "backup", "evil\n\x1b[2Jname")
    assert find_assignments(tmp_path) is None
    found = assignments_candidates(tmp_path)
    sentence = no_assignments_sentence(tmp_path, found)
    assert sentence.startswith("the upload holds 2 assignments/ folders (kit-a/assignments, "
                               "backup/evil name/assignments)"), sentence
    assert "\n" not in sentence and "\x1b" not in sentence
    with pytest.raises(NotASubmission, match="2 assignments/ folders"):
        with open_submission(tmp_path):
            pass


def test_many_candidates_name_a_few(tmp_path):
    for k in range(5):
        _kit_at(tmp_path, f"kit{k}")
    sentence = no_assignments_sentence(tmp_path, assignments_candidates(tmp_path))
    assert "kit0/assignments, kit1/assignments, kit2/assignments and 2 more" in sentence
    assert "kit3" not in sentence


def test_an_upload_with_nothing_to_grade_is_every_part_zero_with_the_sentence(cfg):
    report = unsubmitted_report(cfg, NO_ASSIGNMENTS, "upload")
    parts = [p for q in report.questions for p in q.parts]
    assert report.score == 0 and report.max_score > 0 and report.no_submission == NO_ASSIGNMENTS
    assert [p.id for p in parts] == [p.id for q in questions(cfg) for p in q.parts]
    assert all(p.score == 0 and p.feedback == NO_ASSIGNMENTS for p in parts)
