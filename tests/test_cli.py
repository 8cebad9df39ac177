"""The front door: commands work, bad input gives one line and a non-zero exit."""
import json
import shutil
import zipfile

import pytest

from shardlab.autograder.publish.stubs import SOLUTIONS
from helpers import assert_one_line_error, run_cli

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


def _bad(tmp_path):
    (tmp_path / "bad.toml").write_text("[model\nd_model = 1")
    (tmp_path / "unknown.toml").write_text("[model]\ndmodel = 1\n")
    (tmp_path / "type.toml").write_text("[model]\nd_model = 'big'\n")
    (tmp_path / "points.toml").write_text("[points]\n\"9.9\" = 1\n")
    (tmp_path / "empty").mkdir()
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("src/memory.py", "x = 1\n")
    (tmp_path / "notzip.zip").write_text("hello")
    return {
        "missing config": (["answers", "--config", str(tmp_path / "nope.toml")], "not found"),
        "malformed config": (["answers", "--config", str(tmp_path / "bad.toml")], "not valid TOML"),
        "unknown key": (["build", "--config", str(tmp_path / "unknown.toml"), "--out", str(tmp_path / "o")],
                        "unknown key [model].dmodel"),
        "wrong type": (["answers", "--config", str(tmp_path / "type.toml")], "must be an integer"),
        "unknown part": (["answers", "--config", str(tmp_path / "points.toml")], "unknown parts: 9.9"),
        "missing path": (["grade", str(tmp_path / "ghost")], "no such file or folder"),
        "not a submission": (["grade", str(tmp_path / "empty")], "holds no assignments/ folder"),
        "zip of another layout": (["grade", str(tmp_path / "other.zip")], "holds no assignments/ folder"),
        "not a zip": (["grade", str(tmp_path / "notzip.zip")], "neither a folder nor a zip"),
    }


@pytest.mark.parametrize("case", ["missing config", "malformed config", "unknown key", "wrong type",
                                  "unknown part", "missing path", "not a submission",
                                  "zip of another layout", "not a zip"])
def test_bad_input_is_one_line_and_nonzero(tmp_path, case):
    args, message = _bad(tmp_path)[case]
    assert_one_line_error(run_cli(*args), message)


def test_a_variants_section_nothing_valid_comes_from_stops_build_in_one_line(tmp_path):
    """100 or 101 blocks never split into the shipped course's 6 stages x 3 chunks (18 divides
    neither): every draw breaks the course's own rule, before anything is written."""
    (tmp_path / "c.toml").write_text('[course]\nsecret = "s"\n[variants]\nmodel.num_blocks = [100, 101]\n')
    done = run_cli("build", "--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "out"))
    assert_one_line_error(done, "no variant drawn from [variants] in 1000 tries")
    assert not (tmp_path / "out").exists()
