"""The starter kit works without the rest of the repo: its pytest fails on the
stubs and passes on the solutions; hidden cases and reference code stay out."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from helpers import answered_writeup

from shardlab.autograder.engine.plan import part_cases, part_plan
from shardlab.autograder.publish.render import build
from shardlab.autograder.publish.stubs import SOLUTIONS

pytestmark = pytest.mark.platform


@pytest.fixture(scope="module")
def kit(tmp_path_factory, cfg):
    out = tmp_path_factory.mktemp("build")
    build(cfg, out)
    with zipfile.ZipFile(out / "starter-kit.zip") as zf:
        names = zf.namelist()
        zf.extractall(out / "unpacked")
    return out / "unpacked" / "starter-kit", names


def kit_pytest(root, *options: str):
    # a clean interpreter in the kit's folder: the repo is not on its path; `-q` unless options are given
    return subprocess.run([sys.executable, "-I", "-m", "pytest", "-p", "no:cacheprovider", *(options or ["-q"])],
                          cwd=root, capture_output=True, text=True, timeout=300)


def _entries(root) -> list[dict]:
    """Every public test of the kit, in the order pytest runs them: per question, its cases, then its runs."""
    cases, runs = (json.loads((root / "tests" / name).read_text()) for name in ("public_cases.json",
                                                                                "public_runs.json"))
    return [e for q in cases for e in cases[q] + runs.get(q, [])]


def test_contents(kit):
    root, names = kit
    assert {"starter-kit/README.md", "starter-kit/pyproject.toml", "starter-kit/assignments/memory.py",
            "starter-kit/tests/test_q1_memory.py", "starter-kit/handout.ipynb",
            "starter-kit/handout.html"} <= set(names)
    html = (root / "handout.html").read_text()      # the handout offline: its figures beside it, no script or link
    assert "<math" in html and "<script" not in html and "<link" not in html
    figures = re.findall(r'src="([^"]+)"', html)
    assert figures and all((root / f).is_file() for f in figures), figures
    assert not any(n.split("/")[1] in ("solutions", "reference", "autograder") for n in names)
    readme = (root / "README.md").read_text()
    assert "pytest" in readme and "zip" in readme and "Task 4.5" in readme
    assert "python tests/timelines.py" in readme
    with zipfile.ZipFile(root.parent.parent / "starter-kit.zip") as zf:     # readable by anyone who unpacks it
        assert {oct((info.external_attr >> 16) & 0o777) for info in zf.infolist()} == {oct(0o644)}


def test_the_public_runs_reach_a_middle_stage_on_the_graders_sizes(kit, cfg):
    """A middle pipeline stage is checked locally (issue 45), and every run says how the kit runs it."""
    root, _ = kit
    runs = json.loads((root / "tests" / "public_runs.json").read_text())
    assert {r["args"]["world_size"] for r in runs["5"] if r["part"] == "5.9"} == {2, 4}
    assert all(r["ranks"].startswith(f"{r['args']['world_size']} local gloo ranks") for q in runs.values() for r in q)
    # every stage count the grader runs is public too
    graded = {c.calls[0].args["world_size"] for c in part_cases(cfg, "5.9")}
    assert graded == {r["args"]["world_size"] for r in runs["5"]}


def test_only_public_cases(kit, cfg):
    root, _ = kit
    shipped = json.loads((root / "tests" / "public_cases.json").read_text())
    args = [c["check"]["args"] for q in shipped.values() for c in q]
    cases, _ = part_plan(cfg, "1.2")
    hidden = [c.calls[0].args for c in cases if not c.public]
    public = [c.calls[0].args for c in cases if c.public]
    assert all(a in args for a in public) and not any(a in args for a in hidden)


def test_stubs_fail_solutions_pass(kit, tmp_path):
    """Every local test, the distributed ones on gloo ranks included, fails on the
    stubs and passes on the solutions; nothing is skipped."""
    root, _ = kit
    shutil.copytree(root, tmp_path / "kit")
    stubs = kit_pytest(tmp_path / "kit")
    lines = stubs.stdout.splitlines()
    entries = _entries(root)
    # every test ran and failed, the distributed ones on ranks included: none passed, none skipped
    assert stubs.returncode == 1 and lines[-1].startswith(f"{len(entries)} failed in "), lines[-3:]
    assert "skipped" not in stubs.stdout
    # the short report (the kit's conftest): one line per task, its first failing case in the grader's words,
    # no traceback, nothing of the harness; 2,357 lines before it
    tasks = list(dict.fromkeys(e["part"] for e in entries))
    report = [line for line in lines if re.match(r"\d+\.\d+( \(\d+ of \d+ cases fail\))?: ", line)
              and ": the section '## " not in line]
    assert [line.split(":")[0].split(" ")[0] for line in report] == tasks
    for line, task in zip(report, tasks):
        first = next(e for e in entries if e["part"] == task)
        said = r"rank \d: NotImplementedError: Task " if "call" in first else r"\): NotImplementedError: Task "
        assert re.search(said, line) and "(assignments/" in line, line
    assert "Traceback" not in stubs.stdout and "shardlab_local" not in stubs.stdout and "def " not in stubs.stdout
    # and one line per section of the blank writeup.md, after its own header, never a failing test
    written = json.loads((root / "tests" / "writeup_sections.json").read_text())
    assert f"writeup.md: {len(written)} of {len(written)} sections hold no answer yet" in stubs.stdout
    said = [line for line in lines if re.match(r"\d+\.[a-z0-9]+: the section '## ", line)]
    assert [line.split(":")[0] for line in said] == list(written) and all("is empty" in x for x in said)
    assert len(lines) <= len(tasks) + len(written) + 16, stubs.stdout
    shutil.rmtree(tmp_path / "kit" / "assignments")
    shutil.copytree(SOLUTIONS, tmp_path / "kit" / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "kit" / "writeup.md").write_text(answered_writeup((root / "writeup.md").read_text()))
    solved = kit_pytest(tmp_path / "kit")
    assert solved.returncode == 0, solved.stdout[-2000:]
    assert "writeup.md" not in solved.stdout           # every section answered: nothing said
    assert "failed" not in solved.stdout and "skipped" not in solved.stdout   # the gloo tasks too
    # the README's timeline command, as a student types it
    drawn = subprocess.run([sys.executable, "tests/timelines.py"], cwd=tmp_path / "kit", capture_output=True,
                           text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert drawn.returncode == 0, drawn.stderr[-2000:]
    assert "started before backward ended" in drawn.stdout
    assert "stage 0: FFBFBFBB, up to 2 in flight, as 1F1B" in drawn.stdout       # p = 2, m = 4: one warm-up forward
    for name in ("bucketed-ddp.png", "bucketed-ddp.trace.json", "fsdp.png", "fsdp.trace.json", "pipeline.png",
                 "pipeline.trace.json"):
        assert (tmp_path / "kit" / "timelines" / name).stat().st_size > 0


def test_one_task_alone_and_in_full(kit, tmp_path):
    """`pytest -m task_2_1` selects 2.1's tests, never 2.10's or 2.11's (as `-k 2.1` does); `-v` and
    `--tb=long` show every case with its traceback instead of the one-line report."""
    root, _ = kit
    shutil.copytree(root, tmp_path / "kit")
    entries = _entries(root)
    chosen = kit_pytest(tmp_path / "kit", "-q", "--collect-only", "-m", "task_2_1")
    ids = [line for line in chosen.stdout.splitlines() if "::" in line]
    assert ids == [f"tests/test_q2_fsdp.py::test_public[{e['id']}]" for e in entries if e["part"] == "2.1"]
    assert len(ids) == 3 and all("[2.1 " in i for i in ids)        # two example networks, and p = 1
    for detail in ("-v", "--tb=long"):
        full = kit_pytest(tmp_path / "kit", "-m", "task_1_1", detail)
        assert full.returncode == 1 and 'raise NotImplementedError("Task 1.1: param_count")' in full.stdout
        assert "assignments/memory.py:" in full.stdout and "tasks fail (the first failing case" not in full.stdout


def test_a_known_mistake_is_named(kit, tmp_path):
    root, _ = kit
    shutil.copytree(root, tmp_path / "kit")
    (tmp_path / "kit" / "assignments" / "memory.py").write_text(
        "def training_state_bytes(num_params):\n    return 12 * num_params\n")
    r = kit_pytest(tmp_path / "kit", "-q", "tests/test_q1_memory.py")    # question 1's tests: no gloo ranks to start
    assert "matches 12 bytes/param" in r.stdout


def test_setup_is_two_commands_with_the_grader_s_cpu_torch(kit):
    """The kit declares torch pinned to the course's release (constraints.txt, read here
    on its own) and its README installs the CPU build from PyTorch's index, then tests."""
    import re
    import tomllib
    from shardlab.autograder.core import content
    root, _ = kit
    pin = re.search(r"^torch==([\w.]+)", (content.ROOT / "constraints.txt").read_text(), re.M).group(1)
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"torch=={pin}" in declared and any(d.startswith("pytest") for d in declared)
    readme = (root / "README.md").read_text()
    assert ("python3 -m venv .venv && .venv/bin/pip install -e '.[notebook]' "
            "--extra-index-url https://download.pytorch.org/whl/cpu\n   .venv/bin/pytest\n") in readme
    assert "WSL2" in readme


def test_bench_buckets_runs_from_the_kit_with_the_students_own_code(kit, tmp_path):
    """Q4(c) as a student types it: on the stubs, one line asking for tasks 4.1-4.5; on the
    solutions, the experiment on local ranks, plotted against the kit's own cost model."""
    root, _ = kit
    shutil.copytree(root, tmp_path / "kit")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bench = [sys.executable, "tests/bench_buckets.py", "--rounds", "1"]
    stubs = subprocess.run(bench, cwd=tmp_path / "kit", capture_output=True, text=True, timeout=60, env=env)
    assert stubs.returncode == 1 and "Traceback" not in stubs.stderr
    assert "finish tasks 4.1-4.5 first" in stubs.stderr and len(stubs.stderr.strip().splitlines()) == 1
    shutil.rmtree(tmp_path / "kit" / "assignments")
    shutil.copytree(SOLUTIONS, tmp_path / "kit" / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    ran = subprocess.run(bench, cwd=tmp_path / "kit", capture_output=True, text=True, timeout=240, env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    out = tmp_path / "kit" / "bench"
    rows = list(csv.DictReader(open(out / "buckets.csv")))
    assert [float(r["bucket_mb"]) for r in rows] == [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]
    # 128 layers of a 256 KiB weight and a 1 KiB bias: 256 buckets of one tensor each at 0.25 MB
    # (no weight fits beside its bias under 262,144 bytes), one bucket of everything at 64 MB
    assert int(rows[0]["num_buckets"]) == 256 and int(rows[-1]["num_buckets"]) == 1
    assert all(float(r["predicted_seconds"]) > 0 for r in rows)
    assert (out / "buckets.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "measured best" in ran.stdout
