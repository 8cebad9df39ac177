"""The kit's verdict is the grader's: every mistake the grader punishes is
caught first by the starter kit's own pytest, naming its task.

For each hand-made wrong submission in tests/submissions/ (all but the
attacks on the grader, which declare `hostile`), on the shipped course and
on the second course: the fixture's modules are put in a built kit's
assignments/ (solutions with the fixture appended, as `shardlab check`
assembles them), the kit's pytest runs on that question's test files, and
every part the fixture's expect.toml says the grader takes points from
(`Fixture.losing_parts`: its `zero` parts and its declared failing groups on
that course) must fail at least one of the kit's tests, whose id starts
with the task id. What the grader takes is itself checked against the same
declarations by `shardlab check` (tests/test_question_*.py,
tests/test_platforms_check.py), so the two verdicts meet here.

Slow tier: a kit pytest per fixture and course (a few seconds each, the
distributed ones start local gloo ranks).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.publish.render import build
from shardlab.autograder.questions import questions
from shardlab.autograder.selfcheck import FIXTURES, assembled, fixtures
from shardlab.reference.config import load_config

pytestmark = pytest.mark.slow

COURSES = {"shipped": None, "a100": content.ROOT / "reference" / "courses" / "a100.toml"}
FAILED = re.compile(r"^FAILED \S+::test_public(?:_run)?\[(\d+\.\d+) ", re.MULTILINE)


def _course(name: str):
    path = COURSES[name]
    return load_config() if path is None else load_config(path)


def _mistakes(name: str) -> list:
    """The course's non-hostile fixtures, read off their files alone (collection stays cheap)."""
    modules = {q.module for q in questions(_course(name))}
    out = []
    for expect in sorted(FIXTURES.glob("*/expect.toml")):
        declared = tomllib.loads(expect.read_text())
        if not declared.get("hostile") and {p.stem for p in expect.parent.glob("*.py")} <= modules:
            out.append(pytest.param(name, expect.parent.name, id=f"{name}-{expect.parent.name}"))
    return out


@pytest.fixture(scope="module")
def built_kits(tmp_path_factory):
    """course name -> its unpacked starter kit, built once."""
    kits = {}

    def kit(name: str) -> Path:
        if name not in kits:
            out = tmp_path_factory.mktemp(f"build-{name}")
            build(_course(name), out)
            with zipfile.ZipFile(out / "starter-kit.zip") as zf:
                zf.extractall(out / "unpacked")
            kits[name] = out / "unpacked" / "starter-kit"
        return kits[name]
    return kit


def test_every_mistake_fixture_is_checked():
    """The attacks left out are the ones named in the issue's spirit, and nothing else is."""
    left_out = {f.name for f in fixtures() if f.hostile}
    assert {"patches_grader", "memory_hog", "sleeps_forever"} <= left_out
    assert {"infinite_loop", "raises_on_import", "wrong_types", "gib_for_gb"}.isdisjoint(left_out)


@pytest.mark.parametrize("course_name, fixture_name", _mistakes("shipped") + _mistakes("a100"))
def test_the_kit_fails_every_task_the_grader_takes_points_from(built_kits, tmp_path, course_name, fixture_name):
    cfg = _course(course_name)
    fixture = next(f for f in fixtures(cfg) if f.name == fixture_name)
    chosen = [q for q in questions(cfg) if q.module in fixture.modules]
    losing = fixture.losing_parts([p.id for q in chosen for p in q.parts if p.kind == "auto"])
    if not losing:
        pytest.skip(f"{fixture_name} loses nothing on this course")   # nothing to catch: not counted as a pass
    kit = tmp_path / "kit"
    shutil.copytree(built_kits(course_name), kit)
    with assembled(fixture) as root:
        for q in chosen:
            shutil.copy(root / "assignments" / f"{q.module}.py", kit / "assignments" / f"{q.module}.py")
    files = [f"tests/test_q{q.number}_{q.module}.py" for q in chosen]
    done = subprocess.run([sys.executable, "-I", "-m", "pytest", "-p", "no:cacheprovider", "-q", "--tb=no",
                           "-rf", *files], cwd=kit, capture_output=True, text=True, timeout=600)
    failed = set(FAILED.findall(done.stdout))
    missed = [pid for pid in losing if pid not in failed]
    assert not missed, (f"{fixture_name} on {course_name}: the grader takes points from {missed}, "
                        f"but the kit fails no test of theirs (it fails {sorted(failed)}):\n{done.stdout[-3000:]}")
