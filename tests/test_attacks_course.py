"""Attacks on the course (docs/trust.md): a submission that brings its own
course.toml, so that grading from inside it would read the student's course
(every part worth nothing, or only the question the student did).

The course is never guessed (`autograder.course_file`): `--config`, else
./course.toml, else $SHARDLAB_COURSE, else the shipped course, said on
stderr; `grade` refuses ./course.toml when the working directory is inside
a submission it grades, and batch grading names the course to every child.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from shardlab.autograder import course_file as cf
from shardlab.autograder.core import content
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.platforms import batch
from shardlab.autograder.publish.stubs import ASSIGNMENTS
from helpers import assert_one_line_error

INSTRUCTOR = '[course]\nname = "Instructor course"\nquestions = ["memory"]\n'
# the student's: another question, and every part of the one graded worth nothing
STUDENT = ('[course]\nname = "Student course"\nquestions = ["buckets"]\n'
           '[points]\n"1.1" = 0\n"1.2" = 0\n"1.3" = 0\n"1.4" = 0\n')


@pytest.fixture
def student(tmp_path):
    """A submission (the stubs: cheap to grade) holding its own course.toml."""
    root = tmp_path / "student"
    shutil.copytree(ASSIGNMENTS, root / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "course.toml").write_text(STUDENT)
    (root / "assignments" / "course.toml").write_text(STUDENT)
    return root


@pytest.fixture
def instructor(tmp_path):
    path = tmp_path / "instructor" / "course.toml"
    path.parent.mkdir()
    path.write_text(INSTRUCTOR)
    return path


def _cli(*args, cwd, env=None):
    """`shardlab <args>` in `cwd`, with SHARDLAB_COURSE as `env` says (unset by default)."""
    environ = {k: v for k, v in os.environ.items() if k != cf.ENV}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "shardlab.autograder.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=environ, timeout=300)


@pytest.mark.platform
@pytest.mark.parametrize("where, args", [("student", ["grade", "."]),
                                         ("student/assignments", ["grade", "--json", ".."]),
                                         ("student", ["grade", ".", "--out", "../out"])])
def test_grading_from_inside_a_submission_refuses_its_course_toml(student, where, args):
    done = _cli(*args, cwd=student.parent / where)
    assert_one_line_error(done, "refusing to read ./course.toml")
    assert "--config" in done.stderr and "Traceback" not in done.stderr
    assert not (student.parent / "out").exists()


@pytest.mark.platform
def test_with_config_the_instructors_course_grades_and_the_students_changes_nothing(student, instructor, tmp_path):
    inside = _cli("grade", "--json", ".", "--config", str(instructor), cwd=student,
                  env={cf.ENV: str(student / "course.toml")})         # --config wins over both of the student's
    assert inside.returncode == 0, inside.stderr
    report = json.loads(inside.stdout)
    assert [q["id"] for q in report["questions"]] == ["1"]                  # memory, not the student's buckets
    auto = [p for p in report["questions"][0]["parts"] if p["kind"] == "auto"]
    assert {p["id"] for p in auto} >= {"1.1", "1.2", "1.3", "1.4"} and all(p["max_score"] > 0 for p in auto)
    assert report["course"] == {"name": "Instructor course",
                                "sha256": hashlib.sha256(instructor.read_bytes()).hexdigest()}
    (student / "course.toml").unlink()
    (student / "assignments" / "course.toml").unlink()
    outside = _cli("grade", "--json", str(student), "--config", str(instructor), cwd=tmp_path)
    assert outside.returncode == 0, outside.stderr
    without = json.loads(outside.stdout)
    scored = lambda r: [(p["id"], p["score"], p["max_score"]) for q in r["questions"] for p in q["parts"]]  # noqa: E731
    assert scored(report) == scored(without)      # (a gloo part's feedback may name another rank per run)
    assert (report["score"], report["max_score"], report["course"]) == (without["score"], without["max_score"],
                                                                        without["course"])


@pytest.mark.pure
def test_the_course_is_never_guessed(tmp_path, monkeypatch, capsys):
    """--config, else ./course.toml, else $SHARDLAB_COURSE, else the shipped
    course, and only that last one is said on stderr."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (here / "course.toml").write_text(INSTRUCTOR)
    (elsewhere / "env.toml").write_text(INSTRUCTOR)
    (elsewhere / "given.toml").write_text(INSTRUCTOR)
    monkeypatch.chdir(here)
    monkeypatch.setenv(cf.ENV, str(elsewhere / "env.toml"))
    assert cf.course_file("../elsewhere/given.toml") == str(elsewhere / "given.toml")    # absolute
    assert cf.course_file(None) == str(here / "course.toml")
    (here / "course.toml").unlink()
    assert cf.course_file(None) == str(elsewhere / "env.toml")
    assert capsys.readouterr().err == ""
    monkeypatch.delenv(cf.ENV)
    assert cf.course_file(None) is None
    assert capsys.readouterr().err == cf.SHIPPED_NOTE + "\n"
    monkeypatch.setenv(cf.ENV, str(elsewhere / "missing.toml"))
    with pytest.raises(ShardlabError, match="SHARDLAB_COURSE=.*missing.toml names no course config file"):
        cf.course_file(None)


@pytest.mark.pure
def test_course_toml_is_refused_at_or_under_a_graded_folder_only(tmp_path, monkeypatch):
    (tmp_path / "sub" / "assignments").mkdir(parents=True)
    (tmp_path / "sub" / "assignments" / "course.toml").write_text(INSTRUCTOR)
    (tmp_path / "sub" / "course.toml").write_text(INSTRUCTOR)
    (tmp_path / "course.toml").write_text(INSTRUCTOR)
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    for cwd, graded in ((tmp_path / "sub", ["."]), (tmp_path / "sub" / "assignments", [str(tmp_path / "sub")]),
                        (tmp_path / "sub", [str(tmp_path / "link")]), (tmp_path / "sub", ["x.zip", "../sub"])):
        monkeypatch.chdir(cwd)
        with pytest.raises(ShardlabError, match="refusing to read ./course.toml"):
            cf.course_file(None, graded)
        assert cf.course_file(str(tmp_path / "course.toml"), graded) == str(tmp_path / "course.toml")
    monkeypatch.chdir(tmp_path)                    # the parent of the submission: the instructor's folder
    assert cf.course_file(None, ["sub"]) == str(tmp_path / "course.toml")


@pytest.mark.pure
def test_every_batch_child_is_named_its_course_absolutely(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped, mine = (argv[argv.index("--config") + 1] for argv in (batch.grader_argv("sub", None),
                                                                     batch.grader_argv("sub", "mine.toml")))
    assert os.path.samefile(shipped, content.folder("reference") / "course.toml")
    assert os.path.isabs(shipped) and mine == str(tmp_path / "mine.toml")


@pytest.mark.platform
def test_no_course_named_is_said_once_and_a_missing_env_course_is_one_line(tmp_path):
    (tmp_path / "mine.toml").write_text(INSTRUCTOR)
    named = _cli("answers", "--json", cwd=tmp_path, env={cf.ENV: str(tmp_path / "mine.toml")})
    assert named.returncode == 0 and named.stderr == "", named.stderr
    assert set(json.loads(named.stdout)) == {"1"}
    shipped = _cli("answers", "--json", cwd=tmp_path)
    assert shipped.returncode == 0 and shipped.stderr.splitlines() == [cf.SHIPPED_NOTE]
    assert set(json.loads(shipped.stdout)) >= {"1", "2", "4"}
    assert_one_line_error(_cli("answers", cwd=tmp_path, env={cf.ENV: str(tmp_path / "gone.toml")}),
                          "SHARDLAB_COURSE=")
