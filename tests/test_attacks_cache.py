"""Attacks on the grader's cache (issue 44): with the data seed keys
readable, a second local account rewrote 8 cached expected values and an
honest submission scored 74/77; `chmod 000` on the cache made every later
grading on that machine an internal error.

The cache (reference/cache.py) now checks its folder's owner and mode before
use, keeps an HMAC with every value (keyed with a key only the grader reads),
computes a value again when it fails, and grades without a cache, saying which
folder and what to do, where the folder cannot be used. Here a grader grades
the solutions of question 4 (its gloo parts' expected values are cached)
again and again in fresh processes, while the cache is rewritten, loosened,
deleted and taken away between gradings: every grading scores full marks.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shardlab.autograder.sandbox.gloo.seeds import POOL_SIZE_ENV
from shardlab.reference import cache

NOBODY = 65534
GRADE = r'''
import json, sys
from pathlib import Path
from shardlab.autograder.engine.grading import grade_folder
from shardlab.reference.config import load_config
report = grade_folder(Path(sys.argv[1]), load_config(), modules={"buckets"})
lost = {p.id: p.feedback[:300] for q in report.questions for p in q.parts if p.score < p.max_score}
print(json.dumps({"score": report.score, "max": report.max_score, "internal": report.internal_errors, "lost": lost}))
'''


def _grade(solutions: Path, folder: Path) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDLAB_DATA_SEED_KEY")}
    env[cache.CACHE_ENV] = str(folder)
    env[POOL_SIZE_ENV] = "1"                 # one key: every grading reads the values the last one cached
    done = subprocess.run([sys.executable, "-c", GRADE, str(solutions)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=folder.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("expected-*.json"))


def _forged(value):
    """A wrong expected value of the same shape: every number doubled, every flag flipped."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, list):
        return [_forged(v) for v in value]
    if isinstance(value, dict):
        return {k: _forged(v) for k, v in value.items()}
    return value


def _rewrite(path: Path, key: bytes | None) -> None:
    """The value forged; with `key`, its HMAC made as the grader makes it (an attacker who read the key)."""
    stored = json.loads(path.read_text())
    value = _forged(stored["value"] if isinstance(stored, dict) and "value" in stored else stored)
    mac = (hmac.new(key, json.dumps([path.name, value], sort_keys=True).encode(), hashlib.sha256).hexdigest()
           if key else "0" * 64)
    path.write_text(json.dumps({"value": value, "mac": mac}))


@pytest.mark.sandbox
@pytest.mark.timeout(1800)
def test_gradings_stay_right_while_the_cache_is_attacked(tmp_path, submission):
    solutions, folder = submission(), tmp_path / "cache"
    first, _ = _grade(solutions, folder)
    assert first["score"] == first["max"] > 0 and first["internal"] == []
    assert _entries(folder), sorted(p.name for p in folder.iterdir())

    for entry in _entries(folder):                  # rewritten, without the key
        _rewrite(entry, None)
    report, said = _grade(solutions, folder)
    assert (report["score"], report["internal"]) == (first["max"], []), said
    assert "failed its integrity check" in said

    key = (folder / cache.INTEGRITY_KEY).read_bytes()   # the key read while others could: forged with it
    (folder / cache.INTEGRITY_KEY).chmod(0o644)
    for entry in _entries(folder):
        _rewrite(entry, key)
    report, said = _grade(solutions, folder)
    assert (report["score"], report["internal"]) == (first["max"], []), said
    assert "not the grader's alone" in said
    assert (folder / cache.INTEGRITY_KEY).stat().st_mode & 0o777 == 0o600

    folder.chmod(0o755)                             # the folder loosened: everything in it is made again
    for entry in _entries(folder):
        entry.chmod(0o000)
    (folder / "data-seed-keys").chmod(0o644)
    report, said = _grade(solutions, folder)
    assert (report["score"], report["internal"]) == (first["max"], []), said
    assert "discarded and made again" in said and folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "data-seed-keys").stat().st_mode & 0o777 == 0o600

    for entry in _entries(folder):                  # deleted
        entry.unlink()
    report, said = _grade(solutions, folder)
    assert (report["score"], report["internal"]) == (first["max"], []), said


@pytest.mark.sandbox
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("how", ["another user's", "a file", "mode 000"])
def test_a_cache_folder_that_cannot_be_used_grades_without_it(tmp_path, submission, how):
    """Never an internal error: one line naming the folder and the remedy, and the right score."""
    solutions, folder = submission(), tmp_path / "cache"
    if how == "a file":
        folder.write_text("not a folder")
    else:
        folder.mkdir(mode=0o700)
        if how == "another user's":
            if os.geteuid() != 0:
                pytest.skip("giving the folder to another user needs root")
            os.chown(folder, NOBODY, NOBODY)
        else:
            folder.chmod(0o000)                     # the grader's own: set back to 0700
    report, said = _grade(solutions, folder)
    assert report["score"] == report["max"] > 0 and report["internal"] == [], report["lost"]
    if how == "mode 000":
        assert folder.stat().st_mode & 0o777 == 0o700
    else:
        line = next(line for line in said.splitlines() if line.startswith("shardlab cache:"))
        assert str(folder) in line and cache.CACHE_ENV in line and "grading without a cache" in line
