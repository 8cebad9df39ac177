"""The otter zip replayed the way Gradescope builds and runs it, as far as
this machine can (autograder/publish/gradescope_replay.py): the image built
from the zip's own environment.yml pip lines and the shardlab part of its
setup.sh, then each upload graded by the zip's own run_autograder in a
private tmpfs /autograder with Gradescope's submission_metadata.json and a
fresh HOME, from the installed wheel (no solutions/, no tests/).

Upload shapes: a GitHub submission of the whole starter kit (its notebook,
README, tests/ and an extra .py at the top, plus .git/), the kit one folder
down with macOS's __MACOSX/, and an upload without assignments/, which must
still give a results.json (0 points, one clear sentence), never a failed
run. Plus the two ways an image can fail to build: `otter grade`'s Docker
context, and a machine without the jail's cgroups for a course that
requires the jail (the instructor's set-up error, never a student's 0).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.engine.submission import NO_ASSIGNMENTS
from shardlab.autograder.publish import gradescope_replay as replay
from shardlab.autograder.sandbox.untrusted import html
from shardlab.autograder.publish.otter_export import OTTER_GRADE_REFUSAL
from shardlab.autograder.publish.stubs import SOLUTIONS
from helpers import assert_gradescope_results

pytestmark = [pytest.mark.platform,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                 reason="needs root and unshare(1) for a private /autograder")]

REPO_REFERENCE = Path(replay.__file__).resolve().parents[2] / "reference"   # the checkout's, editable
ADA = {"email": "ada@example.edu", "id": 42, "name": "Ada Lovelace"}


@pytest.fixture(scope="module")
def scratch():
    where = replay.scratch()
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def otter_env(scratch):
    return replay.make_env(scratch)


@pytest.fixture(scope="module")
def image(autograder_zip, otter_env, scratch):
    status, log = replay.build_image(autograder_zip, otter_env, scratch / "image", scratch / "build")
    assert status == 0, log[-3000:]
    return scratch / "image"


def _upload(files: dict[str, str], where: Path) -> Path:
    for name, text in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    return where


def _kit(prefix: str = "") -> dict[str, str]:
    """The starter kit's whole folder with the solutions filled in."""
    files = {f"{prefix}assignments/{p.name}": p.read_text() for p in sorted(SOLUTIONS.glob("*.py"))}
    files[f"{prefix}handout.ipynb"] = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    files[f"{prefix}README.md"] = "# my work\n"
    files[f"{prefix}scratch.py"] = "print('my own experiments')\n"
    files[f"{prefix}tests/test_q1_memory.py"] = "def test_nothing():\n    pass\n"
    return files


def _graded(results: dict) -> list[dict]:
    return [t for t in results["tests"] if "score" in t]


def _total(results: dict) -> tuple[float, float]:
    return sum(float(t["score"]) for t in _graded(results)), sum(float(t["max_score"]) for t in _graded(results))


def test_setup_installs_no_browser_pdf_or_r_toolchain(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as zf:
        setup_sh, env = zf.read("setup.sh").decode(), zf.read("environment.yml").decode()
    for word in ("playwright", "chromium", "texlive", "pandoc", "libgit2", "nb_conda_kernels", "r-base"):
        assert word not in setup_sh.lower(), word
    assert replay.apt_packages(setup_sh) == ["wget", "ca-certificates"]
    assert "otter-grader[grading]==" in env and "plugins" not in env
    if shutil.which("apt-get"):          # the apt line resolves (simulated: nothing is installed)
        done = subprocess.run(["apt-get", "install", "-s", "-y", "--no-install-recommends",
                               *replay.apt_packages(setup_sh)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-1000:]


def test_the_image_is_secured_probed_and_warm(image, otter_env):
    cache = image / "shardlab-cache"
    files = sorted(p.name for p in cache.iterdir())
    assert "data-seed-keys" in files and any(f.startswith("fsdp2-") for f in files), files
    installed = next(otter_env.glob("lib/python3*/site-packages/shardlab/reference"))
    for path in (cache, image / "shardlab-course.toml", *image.glob("shardlab-*.whl"), installed,
                 *installed.rglob("*.py")):
        assert path.stat().st_mode & 0o077 == 0, path
    assert (REPO_REFERENCE.stat().st_mode & 0o077) != 0      # this checkout's reference/ was left alone


def test_otter_grade_cannot_build_the_image_and_says_so_in_one_line(autograder_zip, tmp_path):
    """otter grade's Dockerfile runs setup.sh with only setup.sh, environment.yml
    and requirements.* in /autograder/source: the guard stops before apt."""
    with zipfile.ZipFile(autograder_zip) as zf:
        context = {n: zf.read(n) for n in ("setup.sh", "environment.yml")}
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "apt-get").write_text(f"#!/bin/sh\ntouch {tmp_path}/apt-ran\n")
    (tmp_path / "bin" / "apt-get").chmod(0o755)
    for name, data in context.items():
        (tmp_path / name).write_bytes(data)
    script = f"""mount -t tmpfs tmpfs /autograder && mkdir -p /autograder/source
cp {tmp_path}/setup.sh {tmp_path}/environment.yml /autograder/source/
cd /autograder/source && bash setup.sh"""
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                          env={"PATH": f"{tmp_path}/bin:/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == OTTER_GRADE_REFUSAL
    assert not (tmp_path / "apt-ran").exists()


def test_a_machine_without_the_jail_fails_the_image_build_not_the_students(autograder_zip, otter_env, tmp_path):
    """On a machine without cgroups (a Docker container's read-only
    /sys/fs/cgroup is one), the shipped course (require_walls = "isolated") builds
    and says which walls it has; a course that requires the jail stops the
    build with one line that blames the set-up: no image, no grades."""
    status, log = replay.build_image(autograder_zip, otter_env, tmp_path / "light", tmp_path / "build-light",
                                     hide_cgroups=True)
    assert status == 0, log[-2000:]
    assert any(line.startswith("lighter walls (no per-sandbox cgroup") for line in log.splitlines()), log[-2000:]
    with zipfile.ZipFile(autograder_zip) as zf:
        config = zf.read("shardlab-course.toml").decode()
    config = re.sub(r'(?m)^require_walls = "isolated"', 'require_walls = "full"', config)
    assert 'require_walls = "full"' in config
    status, log = replay.build_image(autograder_zip, otter_env, tmp_path / "image", tmp_path / "build",
                                     config_text=config, hide_cgroups=True)
    assert status != 0
    refusal = [line for line in log.splitlines() if line.startswith("error: grading refused")]
    assert len(refusal) == 1, log[-2000:]
    assert "no per-sandbox cgroup" in refusal[0] and "not a submission's" in refusal[0]
    assert not list((tmp_path / "image" / "shardlab-cache").glob("fsdp2-*"))     # stopped before warming


@pytest.mark.parametrize("shape", ["github, kit at the top", "upload, kit one folder down"])
def test_whole_kit_submissions_grade_in_full(image, otter_env, tmp_path, shape):
    if shape.startswith("github"):
        files = {**_kit(), ".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n"}
        metadata = replay.gradescope_metadata([ADA], submission_method="GitHub")
    else:
        files = {**_kit("my-kit/"), "__MACOSX/._assignments": "\x00\x05\x16\x07"}
        metadata = replay.gradescope_metadata([ADA])
    cache_before = sorted(p.name for p in (image / "shardlab-cache").iterdir())
    run = replay.replay(image, otter_env, _upload(files, tmp_path / "upload"), metadata, tmp_path / "run")
    assert run.results is not None, run.log[-3000:]
    results = run.results
    assert_gradescope_results(results)
    failing = [t["name"] for t in _graded(results) if float(t["score"]) < float(t["max_score"])]
    assert failing == [], [t.get("output", "")[:300] for t in _graded(results) if t["name"] in failing]
    # docs/spec.md's points: Q1 14, Q2 18 plus the 1-point bonus 2.11, Q3 12 (3.7 is by hand), Q4 13,
    # Q5 20 (5.1-5.8 11, 5.9-5.11 9)
    assert [float(t["max_score"]) for t in _graded(results)] == [14, 18, 12, 13, 20]
    assert _total(results) == (78, 77)              # the bonus is extra credit on Gradescope's 77
    assert [t["name"] for t in results["tests"]] == [t["name"] for t in _graded(results)]   # no summary entry
    assert run.cache_after == cache_before          # started warm: nothing had to be computed and cached
    # the grading ran in its own process, started before otter's kernel ran the entry file, and its
    # report was there before otter wrote its results, which the finalize step then rewrote
    at = run.stamps or {}
    assert at["grading started"] < at["kernel up"] < at["otter's results"] <= at["results final"], at
    assert at["report written"] < at["otter's results"], at


def test_an_upload_without_assignments_scores_zero_with_one_sentence(image, otter_env, tmp_path):
    upload = _upload({"handout.ipynb": "{}", "notes.py": "x = 1\n"}, tmp_path / "upload")
    run = replay.replay(image, otter_env, upload, replay.gradescope_metadata([ADA]), tmp_path / "run")
    assert run.results is not None, run.log[-3000:]
    assert_gradescope_results(run.results)
    assert _graded(run.results) and _total(run.results) == (0, 77)      # every question, shardlab's maxima
    # each question says the one sentence once (not otter's case summary, kilobytes of it), and so
    # does the top-level output, which has no walls to report: nothing of the student's ran
    sentence = html(NO_ASSIGNMENTS)
    assert all(t.get("output") == sentence for t in _graded(run.results)), _graded(run.results)[0].get("output")
    assert run.results.get("output") == f"shardlab: {sentence}"
    assert len(json.dumps(run.results)) < 2000 + 300 * len(run.results["tests"]), len(json.dumps(run.results))
    # `shardlab replay` prints it as Gradescope shows it: the total, each question and its sentence once
    shown = replay.replay_lines(run.results)
    assert shown[0] == "  total 0 / 77"
    assert shown.count(f"      {NO_ASSIGNMENTS}") == len(_graded(run.results))
    assert shown[-2:] == ["  top-level output:", f"      shardlab: {NO_ASSIGNMENTS}"]


@pytest.mark.timeout(900)          # an image build of its own (shardlab warm): minutes
def test_shardlab_replay_is_one_command_in_a_temporary_folder(autograder_zip, tmp_path):
    """`shardlab replay ZIP SUBMISSION...`: the image built, each upload (a zip as uploaded, here
    the kit zipped without assignments/) graded, what Gradescope shows printed; its temporary
    folder is gone afterwards, and a missing ZIP is a usage error."""
    import tempfile
    from helpers import run_cli
    upload = tmp_path / "notebook-only.zip"
    with zipfile.ZipFile(upload, "w") as zf:
        zf.writestr("handout.ipynb", "{}")
    before = set(Path(tempfile.gettempdir()).glob("shardlab-replay-*"))
    done = run_cli("replay", str(autograder_zip), str(upload), "--json", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["submission"] == str(upload) and _total(record["results"]) == (0, 77)
    assert set(Path(tempfile.gettempdir()).glob("shardlab-replay-*")) == before
    assert run_cli("replay", str(tmp_path / "missing.zip"), str(upload)).returncode == 2


def test_the_second_course_builds_and_grades_on_gradescopes_layout(otter_env, tmp_path):
    """reference/courses/a100.toml's zip, with its roster's email map: Ada's whole kit with her own
    answers.toml (student u1001, by her Gradescope email) scores every point of the course's three
    questions: 30 (question 1), 17 (question 4: 4.1 set to 6 in place of 2) and 25 (question 5),
    plus 2 points per question for the handout numbers, 78."""
    from shardlab.autograder.core import content
    from shardlab.autograder.engine.answer_sheet import sheet_toml
    from shardlab.autograder.engine.variants import variant_config
    from shardlab.autograder.publish.otter_export import build_autograder, config_text
    from shardlab.autograder.publish.roster import roster_for_zip
    from shardlab.reference.config import load_config
    courses = content.folder("reference") / "courses"
    course = load_config(courses / "a100.toml")
    ag_zip = build_autograder(course, config_text(courses / "a100.toml"), tmp_path / "ag",
                              roster_for_zip(course, courses / "a100-roster.csv"))
    status, log = replay.build_image(ag_zip, otter_env, tmp_path / "image", tmp_path / "build")
    assert status == 0, log[-3000:]
    files = {**_kit(), "answers.toml": sheet_toml(variant_config(course, "u1001"), "u1001", values=True)}
    run = replay.replay(tmp_path / "image", otter_env, _upload(files, tmp_path / "upload"),
                        replay.gradescope_metadata([ADA]), tmp_path / "run")
    assert run.results is not None, run.log[-3000:]
    assert_gradescope_results(run.results)
    lost = [(t["name"], t.get("output", "")[:300]) for t in _graded(run.results)
            if float(t["score"]) < float(t["max_score"])]
    assert lost == []
    assert sorted(float(t["max_score"]) for t in _graded(run.results)) == [6, 17, 25, 30]   # answers: 3 x 2
    assert _total(run.results) == (78, 78)
