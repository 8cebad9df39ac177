"""The otter zip replayed the way Gradescope runs it, as far as this machine
can: a private mount namespace with a fresh tmpfs at /autograder, the zip
unpacked into /autograder/source, the upload unpacked into
/autograder/submission with Gradescope's submission_metadata.json beside it,
a fresh HOME, and the zip's own `run_autograder` executed, with this
project's venv standing in for otter's conda env (the only lines changed are
the three that activate that env; a test fails if they change upstream).

Upload shapes: what students really upload (the starter kit's whole folder
with its notebook, README and tests/, an extra .py, macOS's __MACOSX/), the
kit one folder down, and an upload without assignments/, which must still
give a results.json (0 points, one clear sentence), never a failed run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.publish.stubs import SOLUTIONS

pytestmark = [pytest.mark.platform,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                 reason="needs root and unshare(1) for a private /autograder")]

CONDA_LINES = ("export PATH=/root/miniforge3/bin:", 'eval "$(mamba shell hook', "mamba activate otter-env")
RUN_SECONDS = 300            # otter run has no timeout of its own


def _run_autograder_here(text: str) -> str:
    """run_autograder with the conda activation replaced by this venv."""
    lines = text.splitlines()
    conda = [line for line in lines if line.startswith(CONDA_LINES)]
    assert len(conda) == 3, f"otter's run_autograder changed: {lines}"
    kept = [line for line in lines if line not in conda]
    runs = [k for k, line in enumerate(kept) if line.startswith("python ")]
    assert [kept[k].split()[1] for k in runs] == ["/autograder/source/run_otter.py", "-m"], kept
    for k in runs:                      # otter's run, then shardlab's finalize step
        kept[k] = sys.executable + kept[k].removeprefix("python")
    return "\n".join(kept) + "\n"


def _replay(autograder_zip: Path, upload: dict[str, str], tmp: Path) -> dict:
    """Grade `upload` (path in the upload -> text) as Gradescope would; results.json."""
    stage = tmp / "stage"
    (stage / "submission").mkdir(parents=True)
    for name, text in upload.items():
        (stage / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (stage / "submission" / name).write_text(text)
    # Gradescope's documented submission_metadata.json (the fields the grader may read)
    (stage / "submission_metadata.json").write_text(json.dumps({
        "id": 123456, "created_at": "2026-11-22T10:00:00.0-08:00", "assignment": {"id": 1, "title": "A2"},
        "submission_method": "upload", "users": [{"email": "ada@example.edu", "id": 42, "name": "Ada"}],
        "previous_submissions": []}))
    with zipfile.ZipFile(autograder_zip) as zf:
        script = _run_autograder_here(zf.read("run_autograder").decode())
    (stage / "run_autograder").write_text(script)
    home = tmp / "home"
    home.mkdir()
    inner = f"""set -e
mount -t tmpfs -o size=2g tmpfs /autograder
mkdir -p /autograder/source /autograder/results
cd /autograder/source && {sys.executable} -m zipfile -e {autograder_zip} .
cp -r {stage}/submission /autograder/submission
cp {stage}/submission_metadata.json /autograder/
cp {stage}/run_autograder /autograder/source/run_autograder
cd /autograder && bash /autograder/source/run_autograder > {tmp}/run.log 2>&1 || true
cp /autograder/results/results.json {tmp}/results.json 2>/dev/null || true
"""
    os.makedirs("/autograder", exist_ok=True)      # the mount point (empty; the tmpfs is private)
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", inner],
                          env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"},
                          capture_output=True, text=True, timeout=RUN_SECONDS)
    assert done.returncode == 0, done.stderr[-2000:]
    log = (tmp / "run.log").read_text()
    assert (tmp / "results.json").is_file(), f"no results.json; run_autograder said:\n{log[-3000:]}"
    return json.loads((tmp / "results.json").read_text())


def _kit_upload(prefix: str = "") -> dict[str, str]:
    """The starter kit's whole folder with the solutions filled in, as a student zips it."""
    files = {f"{prefix}assignments/{p.name}": p.read_text() for p in sorted(SOLUTIONS.glob("*.py"))}
    files[f"{prefix}handout.ipynb"] = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    files[f"{prefix}README.md"] = "# my work\n"
    files[f"{prefix}scratch.py"] = "print('my own experiments')\n"
    files[f"{prefix}tests/test_q1_memory.py"] = "def test_nothing():\n    pass\n"
    files["__MACOSX/._assignments"] = "\x00\x05\x16\x07"
    return files


def _graded(results: dict) -> list[dict]:
    """The scored entries (a summary entry without a score would be skipped)."""
    return [t for t in results["tests"] if "score" in t]


def _total(results: dict) -> tuple[float, float]:
    return sum(float(t["score"]) for t in _graded(results)), sum(float(t["max_score"]) for t in _graded(results))


@pytest.mark.parametrize("prefix", ["", "my-kit/"], ids=["kit at the top", "kit one folder down"])
def test_whole_kit_uploads_grade_in_full(autograder_zip, tmp_path, prefix, cfg):
    results = _replay(autograder_zip, _kit_upload(prefix), tmp_path)
    failing = [t["name"] for t in _graded(results) if float(t["score"]) < float(t["max_score"])]
    assert failing == [], [t.get("output", "")[:300] for t in _graded(results) if t["name"] in failing]
    # docs/spec.md's points: Q1 14, Q2 18 plus the 1-point bonus 2.11, Q3 12 (3.7 is by hand), Q4 13
    assert [float(t["max_score"]) for t in _graded(results)] == [14, 18, 12, 13]
    assert _total(results) == (58, 57)              # the bonus is extra credit on Gradescope's 57
    assert [t["name"] for t in results["tests"]] == [t["name"] for t in _graded(results)]   # no summary entry


def test_an_upload_without_assignments_scores_zero_with_one_sentence(autograder_zip, tmp_path):
    results = _replay(autograder_zip, {"handout.ipynb": "{}", "notes.py": "x = 1\n"}, tmp_path)
    assert _graded(results) and _total(results)[0] == 0
    assert all("holds no assignments/ folder" in t.get("output", "") for t in _graded(results)), \
        _graded(results)[0].get("output")
