"""The front door: commands work, bad input gives one line and a non-zero exit."""
import json
import shutil
import zipfile

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.reference.config import load_config
from helpers import assert_one_line_error, run_cli
from shardlab.autograder.core.errors import EXIT_CHECK_FAILED, EXIT_REFUSED, EXIT_STATUSES

pytestmark = pytest.mark.platform


def test_grade_json(tmp_path):
    shutil.copytree(SOLUTIONS, tmp_path / "assignments")
    r = run_cli("grade", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    parts = [p for q in report["questions"] for p in q["parts"]]
    assert all({"id", "score", "max_score", "feedback"} <= set(p) for p in parts)
    assert all(p["score"] == p["max_score"] for p in parts)          # every part full marks
    bonus = sum(p["max_score"] for p in parts if p["bonus"])
    assert report["score"] == report["max_score"] + bonus > 0


def test_answers_json():
    r = run_cli("answers", "--json")
    assert r.returncode == 0, r.stderr
    key = json.loads(r.stdout)
    assert key["1"]["n_fsdp"]["value"] == 61 and key["1"]["gpus_total"]["value"] == 45


def test_answers_for_one_students_variant(tmp_path):
    """The second course has a secret: --student prints that student's key, which the
    course's own key is not; without a secret, or with a bad id, one line."""
    course = content.folder("reference") / "courses" / "a100.toml"
    m = variant_config(load_config(course), "u1001").model
    params = 2 * m.d_model * m.d_ff * m.num_blocks          # by hand: P = 2 · D · F · L
    assert params != 2 * 8192 * 53248 * 80                  # not the course's own model
    r = run_cli("answers", "--config", str(course), "--student", "u1001")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"Answer key for the variant of student u1001 (model {m.name})"
    assert f"{params:,} " in r.stdout                        # the answer column of question 1
    r = run_cli("answers", "--config", str(course), "--student", "u1001", "--json")
    assert r.returncode == 0, r.stderr
    key = json.loads(r.stdout)
    assert key["student_id"] == "u1001" and key["model"] == m.name and list(key["questions"]) == ["1", "4", "5"]
    assert key["questions"]["1"]["params"]["value"] == params
    assert_one_line_error(run_cli("answers", "--student", "u1001"), "variants need [course].secret")
    assert_one_line_error(run_cli("answers", "--config", str(course), "--student", "../u1001"),
                          "--student: student id '../u1001' must be")


def test_build_writes_handout_and_solutions(tmp_path):
    r = run_cli("build", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    handout = (tmp_path / "handout.md").read_text()
    solutions = (tmp_path / "solutions.md").read_text()
    # the handout asks; only the solutions carry the worked answers
    assert "| 1.6 | `min_fsdp_degree` |" in handout and "Task 1.8" in handout
    assert "N = 61" in solutions and "45 × H100" in solutions
    assert "N = 61" not in handout and "45 × H100" not in handout


def test_stubs_check():
    r = run_cli("stubs", "--check")
    assert r.returncode == 0, r.stderr


def test_stubs_of_another_scaffolding_go_elsewhere(tmp_path):
    """assignments/ holds the default scaffolding's stubs: guided ones are written to --out."""
    assert_one_line_error(run_cli("stubs", "--scaffolding", "guided"), "write 'guided' stubs to another folder")
    r = run_cli("stubs", "--scaffolding", "guided", "--out", str(tmp_path / "guided"))
    assert r.returncode == 0, r.stderr
    assert "class _Unit" in (tmp_path / "guided" / "fsdp.py").read_text()
    assert run_cli("stubs", "--check", "--scaffolding", "guided", "--out", str(tmp_path / "guided")).returncode == 0


def _bad(tmp_path):
    (tmp_path / "bad.toml").write_text("[model\nd_model = 1")
    (tmp_path / "unknown.toml").write_text("[model]\ndmodel = 1\n")
    (tmp_path / "type.toml").write_text("[model]\nd_model = 'big'\n")
    (tmp_path / "points.toml").write_text("[points]\n\"9.9\" = 1\n")
    (tmp_path / "notzip.zip").write_text("hello")
    return {
        "missing config": (["answers", "--config", str(tmp_path / "nope.toml")], "not found"),
        "malformed config": (["answers", "--config", str(tmp_path / "bad.toml")], "not valid TOML"),
        "unknown key": (["build", "--config", str(tmp_path / "unknown.toml"), "--out", str(tmp_path / "o")],
                        "unknown key [model].dmodel"),
        "wrong type": (["answers", "--config", str(tmp_path / "type.toml")], "must be an integer"),
        "unknown part": (["answers", "--config", str(tmp_path / "points.toml")], "unknown parts: 9.9"),
        "missing path": (["grade", str(tmp_path / "ghost")], "no such file or folder"),
        "not a zip": (["grade", str(tmp_path / "notzip.zip")], "neither a folder nor a zip"),
    }


@pytest.mark.parametrize("case", ["missing config", "malformed config", "unknown key", "wrong type",
                                  "unknown part", "missing path", "not a zip"])
def test_bad_input_is_one_line_and_nonzero(tmp_path, case):
    args, message = _bad(tmp_path)[case]
    assert_one_line_error(run_cli(*args), message)


def test_an_upload_without_assignments_is_a_zero_with_one_sentence_not_an_error(tmp_path):
    """A notebook alone (or a zip of another layout) is the student's bad upload: a report of 0,
    every part's feedback the one sentence saying what was expected, exit 4. A path that does not
    exist, or a file that is no zip, stays the instructor's one-line error (above)."""
    from shardlab.autograder.engine.submission import NO_ASSIGNMENTS
    (tmp_path / "notebook-only").mkdir()
    (tmp_path / "notebook-only" / "handout.ipynb").write_text("{}")
    done = run_cli("grade", str(tmp_path / "notebook-only"), "--json")
    assert done.returncode == EXIT_REFUSED, done.stderr
    report = json.loads(done.stdout)
    parts = [p for q in report["questions"] for p in q["parts"]]
    assert report["score"] == 0 and report["max_score"] > 0 and report["no_submission"] == NO_ASSIGNMENTS
    assert parts and all(p["score"] == 0 and p["feedback"] == NO_ASSIGNMENTS for p in parts)
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("src/memory.py", "x = 1\n")
    done = run_cli("grade", str(tmp_path / "other.zip"))
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert done.stdout.count(NO_ASSIGNMENTS.split(":")[0]) == 1, done.stdout     # said once, not per part


def test_a_variants_section_nothing_valid_comes_from_stops_build_in_one_line(tmp_path):
    """100 or 101 blocks never split into the shipped course's 6 stages x 3 chunks (18 divides
    neither): every draw breaks the course's own rule, before anything is written."""
    (tmp_path / "c.toml").write_text('[course]\nsecret = "s"\n[variants]\nmodel.num_blocks = [100, 101]\n')
    done = run_cli("build", "--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "out"))
    assert_one_line_error(done, "no variant drawn from [variants] in 1000 tries")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, starts", [
    (["grade", "sub", "--json"], True), (["grade", "a.zip", "b.zip", "--timelines", "t"], True),
    (["grade", "sub", "--out", "o"], False), (["grade", "sub", "--out=o"], False),
    (["grade", "--gradescope-export", "e.zip", "--out", "o"], False), (["grade", "--help"], False),
    (["check"], False), (["build", "--out", "x"], False), ([], False)])
def test_the_command_starts_a_single_gradings_zygote_before_the_cli(monkeypatch, argv, starts):
    """`shardlab grade PATH...` (one grading) starts its zygote before the CLI's imports, so torch's
    import runs beside them (`autograder/entry.py`); a batch has its own, and nothing else needs one."""
    import sys

    from shardlab.autograder import cli, entry
    from shardlab.autograder.sandbox import zygote
    order = []
    monkeypatch.setattr(zygote, "shared", lambda: order.append("zygote"))
    monkeypatch.setattr(cli, "main", lambda: order.append("cli"))
    monkeypatch.setattr(entry, "leave", lambda code: order.append(f"leave {code}"))   # not this process's exit
    monkeypatch.setattr(sys, "argv", ["shardlab", *argv])
    entry.main()
    assert order == (["zygote", "cli", "leave None"] if starts else ["cli"])


def test_the_installed_command_refuses_a_missing_submission_in_one_line(tmp_path):
    """The `shardlab` script itself (`entry.main`, which starts the zygote first): bad input is
    still one line and exit status 2, and the zygote it started does not hold the exit up."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(sys.executable).parent / "shardlab"
    done = subprocess.run([str(script), "grade", str(tmp_path / "nowhere"), "--json"], capture_output=True,
                          text=True, timeout=120)
    assert_one_line_error(done, "nowhere")


LEAVE = """
import atexit, sys, threading, time
from shardlab.autograder.entry import leave
marker = sys.argv[1]
atexit.register(lambda: open(marker, "a").write("exit handler ran\\n"))
sys.stdout.write("x" * 200_000)           # more than a pipe holds,
sys.stdout.write("and the end")            # and a tail still in the buffer when leave() is called
if sys.argv[2] == "thread":                # a thread of ours still working: the interpreter's own exit waits
    threading.Thread(target=lambda: (time.sleep(0.3), open(marker, "a").write("thread done\\n"))).start()
code = sys.argv[3]
leave(None if code == "none" else int(code) if code.lstrip("-").isdigit() else code)
"""


@pytest.mark.parametrize("code, status, thread", [("none", 0, "no"), ("3", 3, "no"), ("a message", 1, "no"),
                                                  ("0", 0, "thread"), ("4", 4, "thread")])
def test_leave_exits_as_sys_exit_would(tmp_path, code, status, thread):
    """`entry.leave`, how a single grading ends without the interpreter's teardown: the exit handlers
    run (the zygote's kill, the phases file), the buffered output is whole, the status is sys.exit's."""
    import subprocess
    import sys
    import os
    marker = tmp_path / "marker"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}     # standard output buffered
    done = subprocess.run([sys.executable, "-c", LEAVE, str(marker), thread, code], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == status, done.stderr
    assert done.stdout == "x" * 200_000 + "and the end"
    assert "exit handler ran" in marker.read_text()
    assert ("thread done" in marker.read_text()) == (thread == "thread")
    assert done.stderr == ("a message\n" if code == "a message" else "")


def test_version_is_the_installed_distributions():
    from importlib import metadata
    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"shardlab {metadata.version('shardlab')}") and done.stdout.count("\n") == 1


def test_help_lists_every_exit_status_once():
    done = run_cli("--help")
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("Exit statuses:", 1)[1].splitlines()
    codes = [int(line.split()[0]) for line in listed if line.strip()]
    assert codes == list(EXIT_STATUSES) and len(set(EXIT_STATUSES)) == len(EXIT_STATUSES)


def test_a_failed_check_is_status_1_not_a_usage_error(tmp_path):
    """Stale stubs are a check that failed (1), a bad option a usage error (2)."""
    (tmp_path / "stubs").mkdir()
    done = run_cli("stubs", "--check", "--out", str(tmp_path / "stubs"))
    assert done.returncode == EXIT_CHECK_FAILED and done.stderr.startswith("error: stubs out of date"), done.stderr
    assert run_cli("stubs", "--no-such-option").returncode == 2
