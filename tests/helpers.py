"""Helpers shared by test files (fixtures live in conftest.py)."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.core.errors import ShardlabError
from shardlab.reference.config import load_config


def run_cli(*args: str, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`shardlab <args>` in a subprocess of this venv's python, output captured as text."""
    return subprocess.run([sys.executable, "-m", "shardlab.autograder.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


def module_submission(root: Path, module: str, text: str) -> Path:
    """`root` made a submission holding only assignments/<module>.py with `text`."""
    (root / "assignments").mkdir()
    (root / "assignments" / f"{module}.py").write_text(text)
    return root


def alive_in(session_ids: set[int]) -> list[int]:
    """Pids of live (not zombie) processes in these sessions."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[3]) in session_ids and stat[0] != "Z":     # field 6: session id
            alive.append(int(pid))
    return alive


def assert_graded_as_declared(cfg, fixture, part_ids, within_seconds: float, kit_runs=None) -> None:
    """The hand-made wrong submission `fixture` (tests/submissions/) loses
    exactly the parts its expect.toml declares among `part_ids`, with the
    feedback it declares, in less than `within_seconds` (a hang costs a
    collective timeout, never gloo's 30 minutes). With `kit_runs` (the kit's
    public runs, publish/kit_harness.public_runs), the starter kit's local
    checks of the same submission fail exactly the parts whose public cases
    it lost at grading."""
    from shardlab.autograder.engine.grading import grade_part_ids
    from shardlab.autograder.selfcheck import assembled, part_problems
    start = time.monotonic()
    with assembled(fixture) as root:
        results = grade_part_ids(root, cfg, part_ids)
        elapsed = time.monotonic() - start
        if kit_runs is not None:
            assert_kit_agrees(root, kit_runs, results)
    problems = [msg for r in results.values() for msg in part_problems(r, fixture, full=False)]
    assert problems == [], problems
    assert elapsed < within_seconds


def assert_kit_agrees(root: Path, kit_runs: dict, results: dict) -> None:
    """Local public runs (kit/local_checks.py) fail the same parts as
    the public case groups of the grading `results` ({part id: PartResult})."""
    from shardlab.autograder.kit.local_checks import Ranks, check_run
    runs = [r for q in kit_runs.values() for r in q if r["part"] in results]
    ranks = Ranks(str(root))
    failed_locally = set()
    try:
        for run in runs:
            try:
                check_run(run, ranks)
            except AssertionError:
                failed_locally.add(run["part"])
    finally:
        ranks.close()
    lost_in_public = {p for p, r in results.items() if any(g.public and g.score < g.max_score for g in r.groups)}
    assert failed_locally == lost_in_public, (failed_locally, lost_in_public)


def assert_nothing_left(sessions: list[int], seconds: float = 10.0) -> None:
    """Every process of the fork servers started (see the `sessions` fixture) is gone. The grader returns
    only once what it killed is gone (`leftovers.kill_session`); this waits up to `seconds` more for what a
    loaded machine has not finished killing, and fails naming any process still alive then."""
    assert sessions
    deadline = time.monotonic() + seconds
    while (alive := alive_in(set(sessions))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive == [], f"alive after {seconds:g} s: {alive}"


def package_modules() -> dict[str, tuple[ast.Module, bool]]:
    """shardlab.<folder>.<...> -> (its syntax tree, whether it is a package's
    __init__), for every .py file of the course folders."""
    found = {}
    for folder in content.FOLDERS:
        for path in sorted(content.folder(folder).rglob("*.py")):
            rel = path.relative_to(content.ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            found[".".join(("shardlab", *parts))] = (ast.parse(path.read_text(), str(path)), rel.name == "__init__")
    return found


GRADESCOPE_RESULTS_SCHEMA = Path(__file__).with_name("gradescope_results.schema.json")


def assert_gradescope_results(results: dict) -> None:
    """`results` is a results.json in Gradescope's documented format
    (tests/gradescope_results.schema.json, from
    https://gradescope-autograders.readthedocs.io/en/latest/specs/): no
    unknown key, every visibility, status and format one of Gradescope's.
    Fails listing every problem with its path."""
    import jsonschema
    validator = jsonschema.Draft202012Validator(json.loads(GRADESCOPE_RESULTS_SCHEMA.read_text(encoding="utf-8")))
    problems = sorted(validator.iter_errors(results), key=lambda e: [str(p) for p in e.absolute_path])
    assert not problems, "results.json is not in Gradescope's format:\n" + "\n".join(
        f"  {'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}" for e in problems)


def assert_one_line_error(done, message: str) -> None:
    """A CLI run (run_cli) refused bad input the way every command must: exit
    status 2, no traceback, one line on stderr, starting "error: " and saying `message`
    (besides the note that no course was named, `course_file.SHIPPED_NOTE`: a run
    without --config reads the shipped course and says so first)."""
    from shardlab.autograder.course_file import SHIPPED_NOTE
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.strip().splitlines() if line != SHIPPED_NOTE]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr


def all_reduces_against_backward(trace_events: list[dict]) -> dict[int, tuple[list[float], float]]:
    """{rank: (start ts of each all-reduce, ts of the last gradient)} of a DDP step's
    Chrome trace (`kit.timelines.overlap.chrome_trace`), in µs: an all-reduce that starts
    before the last gradient overlaps backward."""
    out = {}
    for rank in sorted({e["pid"] for e in trace_events}):
        starts = [e["ts"] for e in trace_events if e["pid"] == rank and e["ph"] == "X"
                  and e.get("cat") == "collective" and e["name"].startswith("all_reduce")]
        grads = [e["ts"] for e in trace_events if e["pid"] == rank and e["ph"] == "i" and e.get("cat") == "grad"]
        out[rank] = (starts, max(grads))
    return out


def answered_writeup(template: str) -> str:
    """A writeup.md (`engine.writeup.writeup_template`) answered by a student in the file itself: every
    section's placeholder replaced by an answer of its own (LaTeX with backslashes, a code block,
    non-ASCII), and a last line without its newline: none of its bytes may ever change by anything
    the kit runs."""
    from shardlab.autograder.engine.writeup import PLACEHOLDER
    parts = template.split(PLACEHOLDER)
    answers = [f"Answer {k}: $\\alpha \\log_2 p + m/\\beta$ ≈ {k}·10⁹ s.\n\n```python\nprint({k} * 2**30)\n```\n"
               "One sentence, mine." for k in range(1, len(parts))]
    return "".join(p + a for p, a in zip(parts, answers + [""])).rstrip("\n") + "\n\nP.S. no newline at the end"


def course_from_text(tmp_path: Path, text: str):
    """The course config `text` (TOML), loaded from a course.toml in `tmp_path`."""
    path = tmp_path / "course.toml"
    path.write_text(text)
    return load_config(path)


def config_error(tmp_path: Path, text: str) -> str:
    """The error loading the course config `text` raises, checked to be one line."""
    with pytest.raises(ShardlabError) as err:
        course_from_text(tmp_path, text)
    assert "\n" not in str(err.value), str(err.value)
    return str(err.value)


# The hostile submissions' file walk (test_attacks_sandbox, test_attacks_landlock): source text, since it
# runs as student code in the jail; the submission's own source imports os, zipfile and zlib.
WALK_FOR_SOURCE = r'''
def walk_for(markers, tops=("/",), skip=("/proc", "/sys", "/dev")):
    """Every readable file beneath `tops` (none under `skip`) that holds a marker, in plain text,
    inside a zip, or zlib-compressed (git objects): [files read, the paths found, sorted]."""
    markers = [m.encode() for m in markers]
    found, seen = set(), 0
    for start in tops:
        for top, dirs, files in os.walk(start):
            if top.startswith(skip):
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(top, name)
                try:
                    if os.path.islink(path) or os.path.getsize(path) > 4 << 20:
                        continue
                    data = open(path, "rb").read()
                except OSError:
                    continue
                seen += 1
                blobs = [data]
                if data[:1] == b"x":
                    try:
                        blobs.append(zlib.decompress(data))
                    except Exception:
                        pass
                if data[:2] == b"PK":
                    try:
                        with zipfile.ZipFile(path) as z:
                            blobs += [z.read(n) for n in z.namelist()[:2000]]
                    except Exception:
                        pass
                if any(m in b for m in markers for b in blobs):
                    found.add(path)
    return [seen, sorted(found)]
'''


def load_factor() -> float:
    """How many times slower than idle a test runs now, about: the 1-minute load average per core, at
    least 1 (2 cores at a load average of 16: each busy process gets an eighth of a core)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def scale_timeout(item) -> None:
    """A test's pytest-timeout bound (its own `timeout` mark, else the session's) times `load_factor()`
    (tests/conftest.py calls it as each test starts).
    The bound only guards against a hang (a test never asserts speed with it), and it must hold on a
    loaded machine: at a load average of 16 on 2 cores, two tests of 12-14 s idle passed 120 s. The
    scaled mark goes first, so it is the one pytest-timeout reads."""
    marker = item.get_closest_marker("timeout")
    base = None
    if marker is not None:
        base = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if base is None:        # the session's, as pytest-timeout reads it: --timeout, then PYTEST_TIMEOUT, then the ini
        base = next((value for value in (item.config.getoption("timeout", None), os.environ.get("PYTEST_TIMEOUT"),
                                         item.config.getini("timeout")) if value not in (None, "")), None)
    if not base or float(base) <= 0:
        return
    item.add_marker(pytest.mark.timeout(float(base) * load_factor()), append=False)
