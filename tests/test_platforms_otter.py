"""The otter autograder zip: its test files, and parity with `shardlab grade`.

The parity tests run `otter run -a autograder.zip submission.zip` (otter's
local grading, no Docker) once per submission with this .venv's otter and
editable shardlab: otter run installs nothing, so the zip's requirements
(for Gradescope) are not used here.
"""
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.publish.otter_export import is_hidden
from shardlab.autograder.engine.plan import case_groups, part_cases
from shardlab.autograder.core.parts import Case
from shardlab.autograder.platforms.otter import (CONFIG_FILE, ENTRY_FILE, REPORT_FILE, finalize_results,
                                                 locate_submission)
from shardlab.autograder.questions import part_points, questions
from shardlab.autograder.selfcheck import assembled, fixtures, folder_of
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from shardlab.autograder.sandbox.untrusted import html
from helpers import assert_gradescope_results, run_cli

pytestmark = pytest.mark.platform

OTTER_TIMEOUT = 240   # otter run has no timeout of its own
PARTIAL = "gib_for_gb"
# a student's copies of packages the grading kernel imports, and of our entry file:
# the quarantine plugin and the zip's own entry file must make them harmless
DECOYS = {
    "otter/__init__.py": "raise ImportError('a student otter package was imported')\n",
    "autograder/__init__.py": "raise ImportError('a student autograder package was imported')\n",
    ENTRY_FILE: "shardlab_submission = {'root': '/nowhere'}\n",
}


def _zip_folder(root: Path, dest: Path, extra: dict[str, str] | None = None) -> Path:
    extra = extra or {}
    with zipfile.ZipFile(dest, "w") as zf:
        for f in sorted((root / "assignments").glob("*.py")):
            zf.write(f, f"assignments/{f.name}")
        for name, text in extra.items():
            zf.writestr(name, text)
    return dest


def _tests_in(zip_path: Path, tmp: Path):
    from otter.test_files import create_test_file
    from otter.nbmeta_config import NBMetadataConfig
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(tmp)
    return {p.stem: create_test_file(str(p), NBMetadataConfig()) for p in sorted((tmp / "tests").glob("*.py"))}


def test_zip_layout_and_test_files(autograder_zip, cfg, tmp_path):
    names = set(zipfile.ZipFile(autograder_zip).namelist())
    assert {"run_autograder", "setup.sh", "environment.yml", "otter_config.json",
            f"files/{ENTRY_FILE}", "shardlab-course.toml"} <= names
    assert any(re.fullmatch(r"shardlab-[\d.]+-py3-none-any\.whl", n) for n in names)
    env = zipfile.ZipFile(autograder_zip).read("environment.yml").decode()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in env and "+cpu" in env
    tests = _tests_in(autograder_zip, tmp_path)
    for q in questions():
        auto = [p for p in q.parts if p.kind == "auto"]
        tf = tests[f"q{q.number}"]
        # one case per case group of each auto part, the part's points split evenly;
        # manual parts (3 (d)) have none; a group is hidden when none of its cases is public
        groups = {p.id: case_groups(part_cases(cfg, p.id)) for p in auto}
        assert [tc.name.split()[0] for tc in tf.test_cases] == [p.id for p in auto for _ in groups[p.id]]
        for p in auto:
            mine = [tc for tc in tf.test_cases if tc.name.split()[0] == p.id]
            assert sum(tc.points for tc in mine) == pytest.approx(part_points(p, cfg))
            assert len({tc.points for tc in mine}) == 1
            cases = part_cases(cfg, p.id)
            assert [tc.hidden for tc in mine] == [not any(cases[k].public for k in members)
                                                  for _, members in groups[p.id]]
    assert any(p.kind == "manual" for q in questions() for p in q.parts)
    # the visibility rule: hidden only when no case of the part is public
    assert is_hidden([Case((), False)]) and not is_hidden([Case((), False), Case((), True)])


def test_locate_submission_nested_and_missing(tmp_path):
    ag = tmp_path / "autograder"
    (ag / "source").mkdir(parents=True)
    (ag / "source" / "shardlab-course.toml").write_text("")
    (ag / "submission" / "tests").mkdir(parents=True)
    missing = locate_submission(ag / "submission")          # graded all the same: 0 with one sentence
    assert "error" not in missing and missing["root"] == str(ag / "submission")
    (ag / "shardlab-submission" / "mywork" / "assignments").mkdir(parents=True)
    handle = locate_submission(ag / "submission")
    assert handle["root"] == str(ag / "shardlab-submission" / "mywork")
    assert handle["report"].startswith(str(ag)) and "shardlab-submission" not in handle["report"]


def test_a_lone_zip_in_the_upload_with_two_kits_is_graded_as_that_zip(tmp_path):
    """Its sentence then names the zip's two assignments/ folders; a zip that is no zip is
    a report of why (every case, once per question), not an error of the entry file."""
    from shardlab.autograder.engine.submission import NotASubmission, open_submission
    ag = tmp_path / "autograder"
    (ag / "source").mkdir(parents=True)
    (ag / "source" / "shardlab-course.toml").write_text("")
    (ag / "submission").mkdir()
    (ag / "shardlab-submission").mkdir()
    with zipfile.ZipFile(ag / "shardlab-submission" / "work.zip", "w") as zf:
        zf.writestr("a/assignments/memory.py", "x = 1\n")
        zf.writestr("b/assignments/memory.py", "x = 1\n")
    handle = locate_submission(ag / "submission")
    assert "error" not in handle and handle["root"] == str(ag / "shardlab-submission" / "work.zip")
    with pytest.raises(NotASubmission, match=r"2 assignments/ folders \(a/assignments, b/assignments\)"):
        with open_submission(handle["root"]):
            pass
    (ag / "shardlab-submission" / "work.zip").write_text("not a zip")
    handle = locate_submission(ag / "submission")
    assert "neither a folder nor a zip" in handle["error"] and handle["report"]


def test_run_autograder_is_otters_own_with_shardlabs_steps_and_refuses_an_otter_it_does_not_keep():
    """run_autograder is rendered from templates/gradescope/, not cut out of otter's: every line of
    the one this otter renders is in it, in order, and an otter whose script gained a line (or
    reordered two) stops the build with one line instead of shipping a zip that skips it."""
    from otter.generate import JINJA_ENV, OTTER_ENV_NAME
    from shardlab.autograder.core.errors import ShardlabError
    from shardlab.autograder.publish.otter_export import AUTOGRADER_DIR, run_autograder_script
    otters = JINJA_ENV.get_template("common/run_autograder").render(autograder_dir=AUTOGRADER_DIR,
                                                                    otter_env_name=OTTER_ENV_NAME)
    ours = run_autograder_script(otters).splitlines()
    kept = [line for line in otters.splitlines()[1:] if line.strip()]
    at = [ours.index(line) for line in kept]
    assert len(kept) == 4 and at == sorted(at)
    with pytest.raises(ShardlabError, match="a new otter version"):
        run_autograder_script(otters + "python /autograder/source/otter_new_step.py\n")
    first, *rest = otters.splitlines()
    with pytest.raises(ShardlabError, match="lacks"):
        run_autograder_script("\n".join([first, *reversed(rest)]) + "\n")


def test_run_autograder_starts_the_grading_before_otter_and_neither_step_imports_otter(autograder_zip):
    """run_autograder: the prelude, otter's activation, the background grading, otter, the finalize
    step. The two shardlab steps run `platforms.otter`, which must not import otter (about a second
    of pandas and nbconvert, twice per run): the plugin that needs otter lives in `otter_plugin`."""
    from shardlab.autograder.publish.otter_export import OTTER_CONFIG, OTTER_RUN_LINE
    text = zipfile.ZipFile(autograder_zip).read("run_autograder").decode()
    lines = text.splitlines()
    step = "python -m shardlab.autograder.platforms.otter"
    grade = next(k for k, line in enumerate(lines) if line.startswith(f"{step} grade"))
    assert lines[grade].endswith(" &")                                   # in the background, its pid kept
    assert lines[grade + 1].startswith("echo $! > ")                      # for the finalize step to wait on
    assert lines.index("mamba activate otter-env") < grade < lines.index(OTTER_RUN_LINE)
    assert lines[-1].startswith(f"{step} finalize")
    assert OTTER_CONFIG["plugins"] == ["shardlab.autograder.platforms.otter_plugin.QuarantinePlugin"]
    probe = ("import sys, shardlab.autograder.platforms.otter; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'otter'))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def _ag_with_upload(tmp_path: Path) -> Path:
    """A Gradescope layout: the shipped course config, the metadata, the upload quarantined (a lone zip)."""
    from shardlab.autograder.publish.gradescope_replay import gradescope_metadata
    from shardlab.autograder.publish.otter_export import config_text
    ag = tmp_path / "autograder"
    (ag / "source").mkdir(parents=True)
    (ag / "source" / CONFIG_FILE).write_text(config_text(None))
    (ag / "submission_metadata.json").write_text(json.dumps(gradescope_metadata([{"email": "a@b.c", "id": 1}])))
    (ag / "submission").mkdir()
    (ag / "shardlab-submission").mkdir()
    with zipfile.ZipFile(ag / "shardlab-submission" / "work.zip", "w") as zf:
        zf.writestr("notes.txt", "no assignments here\n")
    (ag / "shardlab").mkdir()
    return ag


def test_with_a_background_grading_the_kernel_leaves_the_upload_alone_and_waits_for_its_report(tmp_path):
    """The entry file's handle: the upload is not looked at (the lone zip is not unpacked while the
    background grading reads it), the kernel's being up is recorded, and the first case returns the
    report that process writes, once it is written."""
    from shardlab.autograder.platforms import otter as runtime
    ag = _ag_with_upload(tmp_path)
    writer = subprocess.Popen([sys.executable, "-c", "import json, os, sys, time; time.sleep(0.5); "
                               "open(sys.argv[1] + '.tmp', 'w').write(json.dumps({'score': 7})); "
                               "os.replace(sys.argv[1] + '.tmp', sys.argv[1])", str(ag / REPORT_FILE)])
    (ag / runtime.GRADING_PID_FILE).write_text(f"{writer.pid}\n")
    handle = locate_submission(ag / "submission")
    assert handle["grading_pid"] == str(ag / runtime.GRADING_PID_FILE) and "error" not in handle
    assert not (ag / "shardlab-submission" / "_unzipped").exists()
    assert (ag / runtime.KERNEL_UP_FILE).is_file()
    try:
        assert runtime.graded(handle) == {"score": 7}
    finally:
        writer.wait(timeout=30)
        runtime._reports.clear()


def test_a_background_grading_that_ends_without_a_report_is_graded_in_the_kernel(tmp_path):
    """The process ended (killed, say) and wrote nothing: the kernel grades the upload itself, as
    without a background grading (here a lone zip without assignments/: 0 with one sentence)."""
    from shardlab.autograder.platforms import otter as runtime
    ag = _ag_with_upload(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    (ag / runtime.GRADING_PID_FILE).write_text(f"{gone.pid}\n")
    handle = locate_submission(ag / "submission")
    try:
        report = runtime.graded(handle)
    finally:
        gone.wait(timeout=30)
        runtime._reports.clear()
    assert report["score"] == 0 and report["no_submission"] and "work.zip" in report["submission"]
    assert json.loads((ag / REPORT_FILE).read_text())["no_submission"] == report["no_submission"]


PORT_TAKEN_BY_THE_KERNEL = """import json, os, socket, sys
from shardlab.autograder.sandbox import private_network
port = int(sys.argv[1])
why = private_network.enter() if sys.argv[2] == "own" else "asked not to"
took = socket.socket()
try:
    took.bind(("127.0.0.1", port)); took.listen()
    bound = True
except OSError:
    bound = False
# what a gloo rank started later does: bind, and connect over loopback
rank = os.fork()
if rank == 0:
    peer = socket.socket(); peer.bind(("127.0.0.1", 0)); peer.listen()
    socket.create_connection(peer.getsockname(), timeout=5).close()
    os._exit(0)
print(json.dumps({"why_not": why, "bound": bound, "rank": os.waitstatus_to_exitcode(os.waitpid(rank, 0)[1])}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace of its own needs root")
def test_the_grading_in_its_own_network_cannot_take_the_kernels_port(tmp_path):
    """The port otter's kernel was given (here: one this process listens on) is still free to the
    grading in its namespace (`private_network.enter`), so nothing it binds can be the kernel's;
    without the namespace the same bind fails; its later processes (a gloo rank) inherit the
    namespace and talk over its loopback."""
    kernel = __import__("socket").socket()
    kernel.bind(("127.0.0.1", 0))
    kernel.listen()
    port = str(kernel.getsockname()[1])
    try:
        runs = {how: json.loads(subprocess.run([sys.executable, "-c", PORT_TAKEN_BY_THE_KERNEL, port, how],
                                               capture_output=True, text=True, timeout=60, check=True).stdout)
                for how in ("own", "shared")}
    finally:
        kernel.close()
    assert runs["own"] == {"why_not": None, "bound": True, "rank": 0}
    assert runs["shared"] == {"why_not": "asked not to", "bound": False, "rank": 0}


def test_without_a_namespace_the_grading_waits_for_the_kernels_handshake(tmp_path, monkeypatch):
    """Where no network namespace can be had, `grade_before_otter` grades nothing (opens no port)
    until the kernel has run the entry file (KERNEL_UP_FILE), then grades at once."""
    import threading
    from shardlab.autograder.platforms import otter as otter_runtime
    from shardlab.autograder.sandbox import private_network, zygote
    ag = tmp_path / "autograder"
    (ag / "source").mkdir(parents=True)
    (ag / "submission").mkdir()
    (ag / "source" / CONFIG_FILE).write_text("")
    graded_at = []
    monkeypatch.setattr(private_network, "enter", lambda: "not root")
    monkeypatch.setattr(zygote, "shared", lambda: None)
    monkeypatch.setattr(otter_runtime, "graded", lambda handle: graded_at.append(time.monotonic()))
    grading = threading.Thread(target=otter_runtime.grade_before_otter, args=(ag,), daemon=True)
    grading.start()
    time.sleep(1.0)
    assert graded_at == [] and grading.is_alive()           # no kernel yet: no port opened
    (ag / "shardlab").mkdir()
    up = time.monotonic()
    (ag / otter_runtime.KERNEL_UP_FILE).touch()
    grading.join(timeout=30)
    assert len(graded_at) == 1 and graded_at[0] >= up


def _otter_results(autograder_zip: Path, submission: Path, out: Path) -> dict:
    out.mkdir()
    env = dict(os.environ, JUPYTER_PATH=str(Path(sys.prefix) / "share" / "jupyter"))  # this venv's kernel
    proc = subprocess.run([sys.executable, "-m", "otter", "run", "-a", str(autograder_zip),
                           "-o", str(out), "--no-logo", "-p", str(submission)],
                          capture_output=True, text=True, timeout=OTTER_TIMEOUT, env=env, cwd=out)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((out / "results.json").read_text())


def _otter_parts(out: Path) -> dict[str, list[tuple[bool, float, str]]]:
    """part id -> [(passed, points, message) of each case group's otter case], from `otter run -p`'s pickle."""
    import dill
    with open(out / "results.pkl", "rb") as f:
        results = dill.load(f)
    parts: dict[str, list] = {}
    for tf in results.results.values():
        for r in tf.test_case_results:
            parts.setdefault(r.test_case.name.split()[0], []).append((r.passed, r.test_case.points, r.message))
    return parts


def _shardlab_grade(submission: Path) -> dict:
    proc = run_cli("grade", "--json", str(submission), timeout=OTTER_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("which", ["solutions", "stubs", PARTIAL])
def test_otter_run_matches_shardlab_grade(autograder_zip, tmp_path, which):
    if which == PARTIAL:
        ctx, extra = assembled(next(f for f in fixtures() if f.name == PARTIAL)), DECOYS
    else:
        ctx, extra = folder_of(SOLUTIONS if which == "solutions" else ASSIGNMENTS), {}
    with ctx as root:
        submission = _zip_folder(root, tmp_path / f"{which}.zip", extra)
    ours = _shardlab_grade(submission)
    results = _otter_results(autograder_zip, submission, tmp_path / "otter")
    assert results["output"] == f"shardlab: graded with {ours['walls']}."   # the plugin's notes
    assert_gradescope_results(results)
    assert not any("Error at line" in t.get("output", "") for t in results["tests"])   # no otter noise

    # bonus parts: shardlab's max_score leaves their points out, otter's maximum counts them
    bonus = {q["id"]: sum(p["max_score"] for p in q["parts"] if p.get("bonus")) for q in ours["questions"]}
    otter_q = {t["name"]: t for t in results["tests"] if "max_score" in t}
    assert sum(t["score"] for t in otter_q.values()) == pytest.approx(ours["score"])
    assert sum(t["max_score"] for t in otter_q.values()) == pytest.approx(ours["max_score"] + sum(bonus.values()))
    otter_parts = _otter_parts(tmp_path / "otter")
    part_probe = {p.id: p.probe for q in questions() for p in q.parts}
    for q in ours["questions"]:
        auto = [p for p in q["parts"] if p["kind"] == "auto"]
        test = next(t for name, t in otter_q.items() if name.startswith(f"Question {q['id']}:"))
        assert (test["score"], test["max_score"]) == pytest.approx((q["score"], q["max_score"] + bonus[q["id"]]))
        for p in auto:     # one otter case per case group, worth the group's share
            cases = otter_parts[p["id"]]
            assert [(passed, points) for passed, points, _ in cases] == \
                [(g["score"] == g["max_score"], pytest.approx(g["max_score"])) for g in p["groups"]], p["id"]
            for passed, _, output in cases:
                if not passed:   # our feedback alone is the failure message
                    assert "AssertionError" not in output and "Error at line" not in output, output
                    if part_probe[p["id"]] == "calls":   # gloo feedback may name a different rank per run
                        assert output == html(p["feedback"])
        assert not set(otter_parts) & {p["id"] for p in q["parts"] if p["kind"] == "manual"}
    full = [p["score"] == p["max_score"] for q in ours["questions"] for p in q["parts"] if p["kind"] == "auto"]
    assert {"solutions": all(full), "stubs": not any(full)}.get(which, 0 < sum(full) < len(full))

    # run_autograder's last step on these results (otter run has none), with the report it would read
    ag = tmp_path / "ag"
    for folder in ("source", "results", "shardlab"):
        (ag / folder).mkdir(parents=True)
    (ag / "source" / CONFIG_FILE).write_text(zipfile.ZipFile(autograder_zip).read(CONFIG_FILE).decode())
    (ag / "results" / "results.json").write_text(json.dumps(results))
    (ag / REPORT_FILE).write_text(json.dumps(ours))
    finalize_results(ag)
    final = json.loads((ag / "results" / "results.json").read_text())
    assert_gradescope_results(final)
    assert (final["stdout_visibility"], final["output_format"]) == ("hidden", "simple_format")
    for q, test in zip(ours["questions"], [t for t in final["tests"] if "max_score" in t], strict=True):
        assert (test["max_score"], test["visibility"], test["output_format"]) == (q["max_score"], "visible",
                                                                                  "simple_format")
        lines = test["output"].split("\n")
        assert [line.split()[1] for line in lines] == [p["id"] for p in q["parts"]]   # each part once
        for line, p in zip(lines, q["parts"]):
            if p["kind"] == "auto" and p["score"] < p["max_score"]:   # the mark, the part, then our feedback
                mark = "⚠️" if p["status"] == "internal-error" else "❌"
                assert line.startswith(f"{mark} {p['id']} ") and f": {html(p['feedback'])}" in line, line
            if p.get("timeline"):      # 4.7, 2.11: the overlap summary of the traced step ends the line
                assert line.endswith(f"run: {html(p['timeline']['summary'])}"), line


def test_build_ships_the_roster_map_in_the_zip(tmp_path):
    """`shardlab build --roster` puts the email -> student id map (no names)
    at the zip's root, where grading on Gradescope looks for it."""
    import zipfile
    from helpers import run_cli
    from shardlab.autograder.engine.answer_sheet import ROSTER_FILE
    config = tmp_path / "course.toml"
    config.write_text('[course]\nsecret = "a long private course secret"\n')
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\ns001,Ada Lovelace,Ada@Example.edu\ns002,Alan Turing,alan@example.edu\n")
    done = run_cli("build", "--config", str(config), "--roster", str(roster), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    shipped = zipfile.ZipFile(tmp_path / "out" / "autograder.zip").read(ROSTER_FILE).decode()
    assert "Lovelace" not in shipped and "Turing" not in shipped
    assert sorted(shipped.strip().lower().splitlines()[1:]) == ["ada@example.edu,s001", "alan@example.edu,s002"]
