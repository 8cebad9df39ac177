"""`core.course_folders`: which loaded course modules the gloo fork server is handed. Its table of
files (`MODULES`) gained config.py (a question's own config section) at its head; the scenarios are
found by their file's name, not by a position in that table."""
from pathlib import Path

import pytest

from shardlab.autograder.core import course_folders

pytestmark = pytest.mark.pure


def test_the_fork_server_gets_the_scenarios_and_nothing_else(monkeypatch):
    folder = Path("/courses/q/tp")
    loaded = {course_folders.QuestionFolder(folder).module_name(file): folder / file
              for file, _ in course_folders.MODULES}
    monkeypatch.setattr(course_folders, "LOADED", loaded)
    assert course_folders.scenario_files() == [("shardlab.autograder.kit.scenarios.tp", str(folder / "scenario.py"))]


def test_a_config_section_is_loaded_first_and_shipped_to_the_grader():
    files = [file for file, _ in course_folders.MODULES]
    assert files[0] == "config.py" and files.index("reference.py") < files.index("question.py")
    assert "config.py" in course_folders.GRADER_FILES
