"""What keeps a grading fast: reference results made once per machine
(reference/cache.py), cases built without importing torch, and the phase
record the grading benchmark draws (core/phases.py)."""
import json
import subprocess
import sys

import pytest

from shardlab.reference import cache


@pytest.mark.pure
def test_once_per_machine_computes_once_and_keys_on_arguments_and_source(tmp_path, monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    deps = ("shardlab.reference.specs",)
    assert cache.once_per_machine("t", {"a": 1}, compute, deps, tmp_path) == {"value": 1}
    assert cache.once_per_machine("t", {"a": 1}, compute, deps, tmp_path) == {"value": 1}   # from disk
    assert cache.once_per_machine("t", {"a": 2}, compute, deps, tmp_path) == {"value": 2}   # other arguments
    # the same arguments, but the code that computes them changed: computed again
    monkeypatch.setattr(cache, "_source_digest", lambda modules: "edited")
    assert cache.once_per_machine("t", {"a": 1}, compute, deps, tmp_path) == {"value": 3}
    assert len(list(tmp_path.glob("t-*.json"))) == 3
    assert (tmp_path.stat().st_mode & 0o077) == 0


@pytest.mark.pure
def test_a_package_source_digest_covers_every_module_at_any_depth(tmp_path, monkeypatch):
    """Expected values depend on whole packages (the kit's models and scenarios live in subpackages):
    an edit anywhere under one is a new key, so an upgraded grader never reads an older one's values."""
    (tmp_path / "digestpkg" / "sub").mkdir(parents=True)
    (tmp_path / "digestpkg" / "__init__.py").write_text("")
    (tmp_path / "digestpkg" / "sub" / "__init__.py").write_text("")
    deep = tmp_path / "digestpkg" / "sub" / "models.py"
    deep.write_text("WIDTH = 8\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = cache._source_digest.__wrapped__(("digestpkg",))
    deep.write_text("WIDTH = 9\n")
    edited = cache._source_digest.__wrapped__(("digestpkg",))
    assert edited != before
    deep.rename(deep.with_name("renamed.py"))       # the same bytes under another name: another package
    assert cache._source_digest.__wrapped__(("digestpkg",)) not in (before, edited)


@pytest.mark.pure
def test_graders_needing_one_value_at_once_compute_it_once(tmp_path):
    """Two graders (here two threads: the lock is per open file, as between processes) ask for the
    same value at once, on a cold machine: the second waits for the first's result instead of
    computing it again (a batch's first two submissions, the test suite's two workers)."""
    import threading
    started, release, calls, results = threading.Event(), threading.Event(), [], []

    def compute():
        calls.append(1)
        started.set()
        assert release.wait(30)             # the other grader asks while this one computes
        return {"value": len(calls)}

    def grader():
        results.append(cache.once_per_machine("t", {"a": 1}, compute, (), tmp_path))
    first = threading.Thread(target=grader)
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=grader)
    second.start()
    second.join(0.5)
    assert second.is_alive()                # waiting, not computing
    release.set()
    first.join(30)
    second.join(30)
    assert calls == [1] and results == [{"value": 1}, {"value": 1}]


@pytest.mark.sandbox
@pytest.mark.timeout(300)
def test_a_warm_machine_grades_without_importing_torch(tmp_path):
    """Every probe waits for the cases: with the machine's cache warm (`shardlab warm`),
    building them must not import torch (seconds before any student code runs); nor
    must the expected values (seconds of CPU and a few hundred MB in every grading)."""
    import os
    env = dict(os.environ, SHARDLAB_CACHE_DIR=str(tmp_path))
    warm = subprocess.run([sys.executable, "-m", "shardlab.autograder.cli", "warm"], env=env,
                          capture_output=True, text=True, timeout=280)
    assert warm.returncode == 0, warm.stderr
    probe = ("import sys\n"
             "from shardlab.autograder.engine.plan import part_cases\n"
             "from shardlab.autograder.questions import all_parts\n"
             "from shardlab.reference.config import load_config\n"
             "cfg = load_config()\n"
             "n = sum(len(part_cases(cfg, p.id)) for p in all_parts() if p.kind == 'auto')\n"
             "cases_imported = 'torch' in sys.modules\n"
             "from shardlab.autograder.engine.plan import expected_values\n"
             "for p in all_parts():\n"
             "    if p.kind == 'auto':\n"
             "        expected_values(cfg, p.id)\n"
             "print(n, cases_imported, 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    count, for_cases, for_expected = done.stdout.split()
    assert int(count) > 50 and for_cases == "False" and for_expected == "False"


@pytest.mark.sandbox
@pytest.mark.timeout(300)
def test_a_grading_records_its_phases_when_asked(tmp_path, submission):
    """Through the installed `shardlab` script, which ends a single grading without the interpreter's
    teardown (`entry.leave`): the spans are still written on the way out, the report whole."""
    import os
    from pathlib import Path
    solutions = submission()
    spans_file = tmp_path / "spans.json"
    env = dict(os.environ, SHARDLAB_PHASES=str(spans_file))
    done = subprocess.run([str(Path(sys.executable).parent / "shardlab"), "grade", "--json", str(solutions)],
                          env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["score"] >= report["max_score"]           # the solutions, a bonus point or none
    spans = json.loads(spans_file.read_text())
    names = {s["name"] for s in spans}
    assert {"grader imported", "cases", "expected values", "gloo probe", "scoring", "start 2 ranks",
            "fsdp_train on 2", "ddp_train on 3", "comm4d_mesh_forward on 4"} <= names
    assert all(s["end"] >= s["start"] for s in spans)
    gloo = next(s for s in spans if s["name"] == "gloo probe")
    runs = [s for s in spans if s["name"].endswith((" on 2", " on 3", " on 4"))]
    assert all(gloo["start"] <= s["start"] and s["end"] <= gloo["end"] for s in runs)


@pytest.mark.pure
def test_expected_values_computed_on_threads_equal_those_computed_alone(cfg, tmp_path, monkeypatch):
    """`shardlab check --jobs 2` grades on threads of one process. The reference's trainings seed
    torch's one global generator, so two of them on two threads drew each other's numbers: the
    solutions lost points on a random 4.5 case now and then. `engine.plan` computes one at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from shardlab.autograder.engine import plan
    ids = ["4.5", "2.7", "4.6", "2.8"]
    monkeypatch.setenv("SHARDLAB_CACHE_DIR", str(tmp_path / "alone"))
    plan.expected_values.cache_clear()
    alone = {pid: plan.expected_values(cfg, pid) for pid in ids}
    monkeypatch.setenv("SHARDLAB_CACHE_DIR", str(tmp_path / "together"))      # nothing read from the first
    plan.expected_values.cache_clear()
    with ThreadPoolExecutor(len(ids)) as pool:
        together = dict(zip(ids, pool.map(lambda pid: plan.expected_values(cfg, pid), ids)))
    plan.expected_values.cache_clear()
    assert together == alone
