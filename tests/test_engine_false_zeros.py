"""No false zeros (issue 10, deliverable 7): what fails in the grader is the
grader's, never the student's.

- A trusted reference computation that fails is retried once; if it still
  fails only its part is affected, flagged as an internal error for the
  instructor (not a student failure), and the other parts grade normally.
- The fully_shard reference run is judged by its complete result file, not
  by its exit codes: a rank aborting at teardown (-6) after the result is
  written costs nothing. (Simulated with tiny rank scripts: the real abort is
  flaky: 5 of 32 cold runs here.)
- Missing jail walls are the instructor's set-up: below `[grading]
  require_walls` grading refuses in one line before grading anything;
  otherwise every report (CLI text, JSON, batch feedback, otter results)
  says which walls it had (tests/test_sandbox_walls_policy.py: the levels).
- The Gradescope zip carries no solutions/, locks the reference and the
  course config away from other uids, and probes the walls at image build.
"""
import ast
import dataclasses
import io
import json
import stat
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.platforms import batch

from shardlab.autograder import cli

from shardlab.autograder.engine import grading, plan, probes
from shardlab.autograder.core.results import INTERNAL_ERROR

from shardlab.autograder.sandbox import jail

from shardlab.autograder.platforms import otter as otter_runtime
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.selfcheck import folder_of
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.reference import fsdp2_agreement
from shardlab.reference.config import load_config

pytestmark = pytest.mark.sandbox

MEMORY = {"memory"}
TARGET = "1.3"          # the part whose reference we break
LIGHT = jail.Walls(namespaces=False, cgroup=False,
                   missing=("no user namespaces: kernel.unprivileged_userns_clone = 0",
                            "no cgroup: /sys/fs/cgroup is read-only"))


@pytest.fixture
def solutions():
    with folder_of(SOLUTIONS) as root:
        yield root


@pytest.fixture
def broken_reference(monkeypatch):
    """Replace TARGET's expect by `make(real_expect)`; counts the calls."""
    calls = []

    def install(make):
        real = plan.find_part(TARGET)
        broken = dataclasses.replace(real, expect=make(real.expect))
        monkeypatch.setattr(plan, "find_part",
                            lambda pid, _real=plan.find_part: broken if pid == TARGET else _real(pid))
        plan.expected_values.cache_clear()
        return calls
    yield install
    plan.expected_values.cache_clear()


def test_a_reference_that_fails_once_is_retried_and_costs_nothing(solutions, cfg, broken_reference):
    def make(real):
        def expect(case):
            calls.append(case)
            if len(calls) == 1:
                raise RuntimeError("the fully_shard reference run failed (exit codes [0, -6])")
            return real(case)
        return expect
    calls = broken_reference(make)
    report = grading.grade_folder(solutions, cfg, modules=MEMORY)
    assert report.score == report.max_score > 0
    assert report.internal_errors == []
    assert all(p.status == "ok" for q in report.questions for p in q.parts)


def test_a_reference_that_always_fails_flags_only_its_part(solutions, cfg, broken_reference):
    def make(real):
        def expect(case):
            calls.append(case)
            raise RuntimeError("the fully_shard reference run failed (exit codes [0, -6])")
        return expect
    calls = broken_reference(make)
    report = grading.grade_folder(solutions, cfg, modules=MEMORY)
    assert len(calls) == 2                           # tried, retried once, then given up
    broken = report.part(TARGET)
    assert (broken.status, broken.score) == (INTERNAL_ERROR, 0.0) and broken.max_score > 0
    assert broken.feedback.startswith("internal error in the grader, not your code: ")
    assert "fully_shard reference run failed" in broken.feedback
    assert "cases failed" not in broken.feedback              # not a student failure message
    others = [p for q in report.questions for p in q.parts if p.id != TARGET and p.kind == "auto"]
    assert others and all(p.score == p.max_score and p.status == "ok" for p in others)
    assert [e["part"] for e in report.internal_errors] == [TARGET]
    assert report.score == report.max_score - broken.max_score


def test_a_harness_that_fails_flags_its_parts_and_grading_goes_on(solutions, cfg, monkeypatch):
    def broken_probe(root, calls, limits, gate=None):
        raise OSError("unshare: cannot set up the sandbox")
    monkeypatch.setitem(probes.PROBES, "calls", broken_probe)
    report = grading.grade_folder(solutions, cfg, modules=MEMORY)
    auto = [p for q in report.questions for p in q.parts if p.kind == "auto"]
    assert auto and all(p.status == INTERNAL_ERROR for p in auto)
    assert all("not your code" in p.feedback and "unshare" in p.feedback for p in auto)
    assert {e["part"] for e in report.internal_errors} == {p.id for p in auto}


def test_a_harness_that_fails_to_start_flags_its_parts_without_running_them(solutions, cfg, monkeypatch):
    class Unstartable:
        def prepare(self, root, limits):
            raise RuntimeError("fork server: torch failed to import")

        def __call__(self, root, calls, limits, gate=None):
            pytest.fail("ran a probe that failed to start")
    monkeypatch.setitem(probes.PROBES, "calls", Unstartable())
    report = grading.grade_folder(solutions, cfg, modules=MEMORY)
    assert report.score == 0 and report.internal_errors
    assert all("failed to start" in e["error"] for e in report.internal_errors)


def test_a_submission_error_inside_a_probe_stays_the_submission_s(solutions, cfg, monkeypatch):
    def refusing_probe(root, calls, limits, gate=None):
        raise ShardlabError("assignments/memory.py is a symbolic link")
    monkeypatch.setitem(probes.PROBES, "calls", refusing_probe)
    with pytest.raises(ShardlabError, match="symbolic link"):
        grading.grade_folder(solutions, cfg, modules=MEMORY)


# ---- the fully_shard reference run: judged by its result, not its exit codes ----

RANK = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from shardlab.reference.fsdp2_agreement import write_result
    rank, request = int(sys.argv[1]), json.loads(sys.argv[2])
    if rank == 0 and request["behaviour"] != "no-result":
        write_result(Path(request["result"]), {"weight": [[1.0, 2.0]], "bias": [0.5]})
    if request["behaviour"] == "rank1-hangs" and rank == 1:
        time.sleep(600)
    sys.stderr.write("terminate called without an active exception\\n")
    sys.stderr.flush()
    os.abort()                                   # what gloo's teardown does: exit -6
""")


def _ranks(tmp_path, behaviour, world=2):
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    result = tmp_path / "result.json"
    request = json.dumps({"behaviour": behaviour, "result": str(result)})
    return [[sys.executable, str(script), str(r), request] for r in range(world)], result


def test_a_group_that_aborts_at_exit_after_its_result_is_accepted(tmp_path):
    commands, result = _ranks(tmp_path, "abort-after-result")
    state = fsdp2_agreement.run_group(commands, result, tmp_path)
    assert state == {"weight": [[1.0, 2.0]], "bias": [0.5]}


def test_a_rank_stuck_in_teardown_after_the_result_is_killed_and_accepted(tmp_path):
    commands, result = _ranks(tmp_path, "rank1-hangs")
    start = time.monotonic()
    state = fsdp2_agreement.run_group(commands, result, tmp_path, grace=0.5)
    assert state["bias"] == [0.5] and time.monotonic() - start < 30


def test_a_group_without_a_complete_result_fails_naming_the_rank(tmp_path):
    commands, result = _ranks(tmp_path, "no-result")
    with pytest.raises(RuntimeError, match=r"exit codes \[-6, -6\].*terminate called"):
        fsdp2_agreement.run_group(commands, result, tmp_path)
    result.write_text('{"weight": [[1.0, 2.')                    # a torn file is no result either
    with pytest.raises(RuntimeError, match="reference run failed"):
        fsdp2_agreement.run_group(commands, result, tmp_path)


def test_fully_shard_state_accepts_an_abort_at_exit_and_caches_privately(tmp_path, monkeypatch):
    script = tmp_path / "rank.py"
    script.write_text(RANK.replace('request["behaviour"]', '"abort-after-result"'))
    monkeypatch.setattr(fsdp2_agreement, "RANK_COMMAND", [sys.executable, str(script)])
    monkeypatch.setattr(fsdp2_agreement, "CACHE", tmp_path / "cache" / "shardlab")
    fsdp2_agreement.fully_shard_state.cache_clear()
    try:
        state = fsdp2_agreement.fully_shard_state("frozen_mlp", "sgd", 3, 12345, 2)
    finally:
        fsdp2_agreement.fully_shard_state.cache_clear()
    assert state == {"weight": [[1.0, 2.0]], "bias": [0.5]}
    cache = tmp_path / "cache" / "shardlab"
    assert len(list(cache.glob("fsdp2-*.json"))) == 1
    assert stat.S_IMODE(cache.stat().st_mode) & 0o077 == 0


# ---- the jail policy: the instructor's set-up, never the student's fault ----

def _course(tmp_path, require: bool | str) -> Path:
    """A course with the older `require_jail` (a bool) or `require_walls` (a level)."""
    path = tmp_path / f"course-{require}.toml"
    line = (f"require_jail = {str(require).lower()}" if isinstance(require, bool)
            else f"require_walls = \"{require}\"")
    path.write_text(f"[grading]\n{line}\n")
    return path


def _main(monkeypatch, *args) -> int:
    monkeypatch.setattr(sys, "argv", ["shardlab", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
        raise SystemExit(0)
    return exit_info.value.code


def test_require_jail_is_a_described_config_key(tmp_path):
    assert load_config().require_walls == "isolated"
    assert load_config(_course(tmp_path, True)).require_walls == "full"
    assert load_config(_course(tmp_path, False)).require_walls == "isolated"
    bad = tmp_path / "bad.toml"
    bad.write_text('[grading]\nrequire_jail = "yes"\n')
    with pytest.raises(Exception, match=r"\[grading\]\.require_jail must be true or false"):
        load_config(bad)


@pytest.mark.parametrize("batch_mode", [False, True])
def test_require_jail_with_walls_missing_refuses_before_grading(tmp_path, monkeypatch, capsys,
                                                                   solutions, batch_mode):
    monkeypatch.setattr(jail, "walls", lambda: LIGHT)
    monkeypatch.setattr(grading, "grade_path", lambda *a, **k: pytest.fail("graded anyway"))
    monkeypatch.setattr(batch, "grade_supervised", lambda *a, **k: pytest.fail("graded anyway"))
    out = tmp_path / "out"
    extra = ["--out", str(out)] if batch_mode else []
    code = _main(monkeypatch, "grade", str(solutions), "--config", str(_course(tmp_path, True)), *extra)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: grading refused")
    assert "no user namespaces" in err and "no cgroup" in err
    assert not out.exists()


def test_walls_command_prints_the_walls_and_fails_only_when_required(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(jail, "walls", lambda: LIGHT)
    assert _main(monkeypatch, "walls", "--config", str(_course(tmp_path, "unsafe-none"))) == 0
    assert capsys.readouterr().out.splitlines()[0] == LIGHT.describe()
    assert _main(monkeypatch, "walls", "--config", str(_course(tmp_path, True))) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == LIGHT.describe()
    assert captured.err.count("\n") == 1 and "no cgroup" in captured.err
    assert _main(monkeypatch, "walls", "--config", str(_course(tmp_path, "unsafe-none")), "--require") == 2
    monkeypatch.setattr(jail, "walls", lambda: jail.Walls(True, True))
    assert _main(monkeypatch, "walls", "--config", str(_course(tmp_path, True)), "--require") == 0


@pytest.fixture
def memory_only(monkeypatch):
    """`shardlab grade` on the memory question alone (fast)."""
    real = grading.questions
    monkeypatch.setattr(grading, "questions", lambda cfg=None: tuple(q for q in real(cfg) if q.module in MEMORY))


def test_lighter_walls_are_said_in_cli_text_json_and_batch_feedback(tmp_path, monkeypatch, capsys,
                                                                     solutions, memory_only):
    monkeypatch.setattr(jail, "walls", lambda: LIGHT)
    course = str(_course(tmp_path, "unsafe-none"))
    assert _main(monkeypatch, "grade", str(solutions), "--config", course) == 0
    text = capsys.readouterr().out
    assert f"graded with {LIGHT.describe()}" in " ".join(text.split())
    assert _main(monkeypatch, "grade", str(solutions), "--config", course, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["walls"] == LIGHT.describe() and report["internal_errors"] == []
    feedback = batch.feedback_markdown("alice", {**report, "status": "ok"})
    assert f"Graded with {LIGHT.describe()}" in feedback
    assert otter_runtime.grading_notes(report).startswith(f"shardlab: graded with {LIGHT.describe()}")


def test_internal_errors_reach_the_cli_the_gradebook_the_feedback_and_otter(tmp_path, monkeypatch, capsys,
                                                                           solutions, memory_only,
                                                                           broken_reference):
    def make(real):
        def expect(case):
            raise RuntimeError("the fully_shard reference run failed")
        return expect
    broken_reference(make)
    assert _main(monkeypatch, "grade", str(solutions)) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "internal error in the grader, not your code" in text and "regrade" in text
    assert _main(monkeypatch, "grade", str(solutions), "--json") == 0
    report = {**json.loads(capsys.readouterr().out), "status": "ok"}
    assert [e["part"] for e in report["internal_errors"]] == [TARGET]
    row = next(iter(__import__("csv").DictReader(io.StringIO(batch.gradebook_csv({"alice": report})))))
    assert row["internal_errors"] == TARGET and row["status"] == "ok"
    assert "Internal error in the grader, not your code, in part(s) 1.3" in batch.feedback_markdown("alice", report)
    notes = otter_runtime.grading_notes(report)
    assert "internal error in the grader, not your code, in part(s) 1.3" in notes

    class Results:                                      # otter's GradingResults, as the plugin sees it
        output = None

        def set_output(self, text):
            self.output = text
    ag = tmp_path / "autograder"
    (ag / "submission").mkdir(parents=True)
    (ag / otter_runtime.REPORT_FILE).parent.mkdir()
    (ag / otter_runtime.REPORT_FILE).write_text(json.dumps(report))
    results = Results()
    from shardlab.autograder.platforms.otter_plugin import QuarantinePlugin
    QuarantinePlugin(str(ag / "submission" / "entry.py"), {}, {}).after_grading(results)
    assert results.output == notes


def test_otter_grading_with_the_jail_required_and_missing_blames_the_set_up(tmp_path, monkeypatch, solutions):
    monkeypatch.setattr(jail, "walls", lambda: LIGHT)
    monkeypatch.setattr(otter_runtime, "_reports", {})
    handle = {"root": str(solutions), "config": str(_course(tmp_path, True)),
              "report": str(tmp_path / "report.json")}
    with pytest.raises(AssertionError, match="grading refused.*not a submission's"):
        otter_runtime.check_part(handle, TARGET)


# ---- the Gradescope zip: no answer key, locked reference, walls probed at build ----

def test_the_zip_wheel_carries_no_solutions_or_tests(autograder_zip):
    zf = zipfile.ZipFile(autograder_zip)
    wheel_name = next(n for n in zf.namelist() if n.endswith(".whl"))
    wheel = zipfile.ZipFile(io.BytesIO(zf.read(wheel_name)))
    tops = {n.split("/")[0] for n in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"shardlab"}, tops   # one installed name
    folders = {n.split("/")[1] for n in wheel.namelist() if n.startswith("shardlab/")}
    assert "reference" in folders and "autograder" in folders
    assert not folders & {"solutions", "tests"}, folders
    for name in wheel.namelist():
        if name.endswith(".py"):
            for node in ast.walk(ast.parse(wheel.read(name))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not any("solutions" in n.split(".")[:2] for n in names), name


def test_grading_imports_no_solutions(solutions):
    code = textwrap.dedent(f"""
        import importlib.abc, sys
        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "solutions":
                    raise ImportError("grading imported solutions: " + name)
        sys.meta_path.insert(0, Refuse())
        from shardlab.autograder.engine.grading import grade_folder
        from shardlab.reference.config import load_config
        r = grade_folder({str(solutions)!r}, load_config(), modules={{"memory"}})
        print(r.score, r.max_score)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    score, max_score = map(float, done.stdout.split())
    assert score >= max_score > 0

