"""What runs inside otter's grading run (Gradescope or `otter run`).

otter executes one top-level `.py` file of the submission in a Jupyter kernel
and then runs the test files against that kernel's globals. Our zip ships
that file (`files/shardlab_otter_entry.py`, copied into the submission folder
by otter, overwriting any file of the same name), so student code never runs
in otter's kernel:

1. Before otter starts, the zip's run_autograder (templates/gradescope/run_autograder.j2)
   moves everything the student uploaded out of the kernel's
   working folder into `<autograder dir>/shardlab-submission/`, so otter
   finds only the entry file to grade, and a student folder named `otter/`
   or `autograder/` cannot shadow a package the kernel imports.
   `QuarantinePlugin.before_grading` (an otter plugin, outside the kernel,
   `platforms.otter_plugin`) moves anything still there, for `otter run`,
   which has no prelude.
   Then run_autograder starts the grading
   itself in the background (`grade_before_otter`, a process of its own) and
   records its pid in `<autograder dir>/shardlab/grading.pid`: it runs while
   otter imports its libraries and starts its kernel, its ports in a network
   namespace of its own, or, where there is none, opened only once the
   kernel has run the entry file (docs/gradescope.md, "No race with otter's
   kernel"; docs/performance.md, "A Gradescope run, replayed").
2. The entry file calls `locate_submission()`: where `assignments/` is, and
   which course config the zip shipped. An upload without a single
   `assignments/` (a notebook alone, two kits) is graded all the same: a
   report of 0 whose one sentence each question's output says once. When
   the grading was started before otter, the handle only says so: the
   upload is not looked at again while it is being graded.
3. Every test case calls `check_part(handle, part_id, group)`. The first call grades
   the whole submission with the shardlab engine (student code runs in its
   sandbox subprocesses), or, when run_autograder started that grading
   before otter, waits for its report (and grades here if that process
   ended without one); the report is kept in memory and written to
   `<autograder dir>/shardlab/report.json`; every case is answered from it.
4. `QuarantinePlugin.after_grading` makes each failed case's message
   shardlab's feedback alone (no "Error at line" from otter), and puts the
   report's notes in the results' top-level output: the walls the code ran
   in, and the parts the grader itself failed on (internal errors, not the
   student's; regrade them).
5. After otter, run_autograder's last step calls `finalize_results`:
   each question's maximum in results.json becomes shardlab's, its output
   one line per part in shardlab's words, and visibility, stdout visibility
   and output formats are set from the course config's [gradescope].

Layout of a grading run (otter's): `<autograder dir>/source/` holds the
unzipped autograder zip, `<autograder dir>/submission/` the submission and
is the kernel's working folder.
"""
from __future__ import annotations

import html as _html
import json
import os
import select
import shutil
import sys
import time
from pathlib import Path

from shardlab.autograder.core.results import points_text
from shardlab.autograder.engine.submission import NotASubmission, find_assignments, open_submission
from shardlab.autograder.sandbox.untrusted import block

ENTRY_FILE = "shardlab_otter_entry.py"
CONFIG_FILE = "shardlab-course.toml"      # at the zip's root: <autograder dir>/source/
QUARANTINE = "shardlab-submission"         # <autograder dir>/shardlab-submission/
REPORT_FILE = Path("shardlab") / "report.json"
GRADING_PID_FILE = Path("shardlab") / "grading.pid"    # the grading run_autograder started before otter
GRADING_LOG = Path("shardlab") / "grading.log"         # that grading's own output (root's, never shown)
KERNEL_UP_FILE = Path("shardlab") / "kernel-up"        # the entry file ran: otter's kernel holds its ports
KERNEL_WAIT_SECONDS = 120       # the background grading waits this long for otter's kernel, then leaves it the grading
OTTER_OWN = {ENTRY_FILE, "tests", "__init__.py"}   # what otter itself puts in submission/
_WAIT_POLL_SECONDS = 0.05       # how often the background grading and the kernel's cases look at each other

_reports: dict[str, dict] = {}
WRITTEN_CAP = 8000          # characters of a written answer shown on Gradescope (the file is there in full)
STAMPS = ("course", "grader_version", "autograder_zip_sha256")   # a report's, kept in results.json's extra_data


def question_file_title(question_id: str, title: str) -> str:
    """The name of a question's otter test file, as results.json shows it
    (the export writes it, finalize_results finds the question by it)."""
    return f"Question {question_id}: {title}"


def find_upload(folder: Path) -> Path | None:
    """`submission.find_assignments`, and when it finds nothing, a
    single zip in `folder` (a zip uploaded inside the upload) is unpacked
    next to it, with open_submission's size and path checks (None when that
    zip holds no single assignments/ folder either)."""
    found = find_assignments(folder)
    zips = _zips(folder)
    if found is None and len(zips) == 1:
        target = folder / "_unzipped"
        try:
            with open_submission(zips[0]) as root:
                shutil.copytree(root, target, dirs_exist_ok=True)
        except NotASubmission:
            return None
        return find_assignments(target)
    return found


def _zips(folder: Path) -> list[Path]:
    """The zips at the top of an upload, links left out."""
    return [z for z in folder.glob("*.zip") if not z.is_symlink()]


def locate_submission(cwd: str | Path | None = None) -> dict:
    """Called by the entry file in otter's kernel: {root, config, report, metadata}, plus
    {error} when the upload could not be opened (graded as a report of that error);
    {error} alone when the zip itself is broken (no course config);
    plus {grading_pid} when run_autograder started the grading before otter
    (`grade_before_otter`): then the upload is left alone (that grading is reading it).
    An upload without a single assignments/ folder is graded like any other:
    `grade_path` scores it 0 with one sentence."""
    here = Path(cwd or os.getcwd()).resolve()
    # the kernel starts in the submission folder, which is on sys.path: drop it
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != here]
    pid_file = here.parent / GRADING_PID_FILE
    if pid_file.is_file() and (here.parent / "source" / CONFIG_FILE).is_file():
        (here.parent / KERNEL_UP_FILE).touch()      # the background grading may open ports now
        quarantined = here.parent / QUARANTINE
        return {**_paths(here.parent), "root": str(quarantined if quarantined.is_dir() else here),
                "grading_pid": str(pid_file)}
    return find_submission(here)


def _paths(ag_dir: Path) -> dict:
    """The handle's fixed paths: the shipped course config, the report, Gradescope's metadata."""
    return {"config": str(ag_dir / "source" / CONFIG_FILE), "report": str(ag_dir / REPORT_FILE),
            "metadata": str(ag_dir / "submission_metadata.json")}   # Gradescope's: the student id


def find_submission(here: Path) -> dict:
    """`locate_submission`'s handle, the upload looked at: `here` is otter's
    submission folder; the upload is the quarantined one beside it, else `here`."""
    ag_dir = here.parent
    config = ag_dir / "source" / CONFIG_FILE
    if not config.is_file():
        return {"error": f"shardlab: the course config {config} is missing from the autograder zip"}
    quarantined = ag_dir / QUARANTINE
    upload = quarantined if quarantined.is_dir() else here
    handle = _paths(ag_dir)
    try:
        root = find_upload(upload)
    except Exception as exc:   # a bad zip inside the upload (a link, a path outside): a report of why
        return {**handle, "root": str(upload), "error": f"could not open the zip in the upload: {exc}"}
    if root is None:    # no single assignments/ folder: graded all the same, 0 with one sentence (`grade_path`)
        zips = _zips(upload)
        root = zips[0] if len(zips) == 1 else upload       # a lone zip: its own candidates named
    return {**handle, "root": str(root)}


def graded(handle: dict) -> dict:
    """The submission's report as a dict: graded once per grading run (by the
    process run_autograder started before otter, when the handle says so)."""
    key = handle["root"]
    if key not in _reports and "grading_pid" in handle:
        report = _background_report(handle)
        if report is not None:
            _reports[key] = report
            return report
        # that process ended without a report (killed): grade here, the upload now left alone
        handle = find_submission(Path(handle["report"]).parent.parent / "submission")
    if key not in _reports:
        from shardlab.autograder.engine.grading import grade_path
        from shardlab.autograder.core.errors import ShardlabError
        from shardlab.reference.config import load_config
        from shardlab.autograder.core.results import course_stamp
        course = None
        try:
            from shardlab.autograder.engine.answer_sheet import ROSTER_FILE, gradescope_submitters
            cfg = load_config(handle["config"])
            course = course_stamp(cfg)          # an error report says which course too
            if "error" in handle:               # the upload could not be opened: why, once per question
                raise ShardlabError(handle["error"])
            students = gradescope_submitters(handle.get("metadata"), cfg, Path(handle["config"]).with_name(ROSTER_FILE))
            report = grade_path(handle["root"], cfg, student_id=students).to_dict()
        except ShardlabError as exc:
            report = {"error": str(exc)}
        except Exception as exc:   # a shardlab bug: every case says so; grade only once anyway
            report = {"error": f"shardlab internal error: {type(exc).__name__}: {exc}"}
        if course is not None:
            report.setdefault("course", course)
        from shardlab.autograder.platforms.gradescope_export import zip_stamp
        report.update(zip_stamp(Path(handle["config"]).parent))   # which grader, which zip (source/)
        out = Path(handle["report"])
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1), encoding="utf-8")
        os.replace(tmp, out)
        _reports[key] = report
    return _reports[key]


def _background_report(handle: dict) -> dict | None:
    """The report of the grading run_autograder started before otter, once
    written (it is written whole: `os.replace`); None when that process ended
    without writing it. No bound of its own: the grading keeps the course's
    budget, as it does when it runs in the kernel."""
    report = Path(handle["report"])
    pid = int(Path(handle["grading_pid"]).read_text().split()[0])
    try:
        pidfd = os.pidfd_open(pid)      # readable once the process has ended, reaped or not
    except ProcessLookupError:           # ended and reaped already
        return _report_if_written(report)
    try:
        while not report.is_file():
            if select.select([pidfd], [], [], _WAIT_POLL_SECONDS)[0]:
                return _report_if_written(report)      # ended: the report is there now or never
    finally:
        os.close(pidfd)
    return _report_if_written(report)


def _report_if_written(report: Path) -> dict | None:
    return json.loads(report.read_text(encoding="utf-8")) if report.is_file() else None


def grade_before_otter(ag_dir: str | Path) -> None:
    """run_autograder's grading, started in the background before otter
    (templates/gradescope/run_autograder.j2): the submission otter's submission folder had
    (moved aside by the same script) graded as `graded` grades it, the report written
    to `<ag_dir>/shardlab/report.json`, where the kernel's cases find it.

    It cannot race otter's kernel for a port, by construction
    (docs/gradescope.md, "No race with otter's kernel"): jupyter_client picks
    the kernel's ports (free ones, then closed) a second or more before the
    kernel binds them, and the gloo ranks bind and connect hundreds of ports
    of the same ephemeral range. So, first thing, before the zygote or any
    rank exists, this process moves into a network namespace of its own
    (`private_network.enter`: root, as on Gradescope): every port the grading
    opens is then another loopback's, and the grading starts at once. Where
    that is refused (no root, a container without the capability), the
    grading opens no port before the kernel has run the entry file
    (KERNEL_UP_FILE, which `locate_submission` writes: a kernel that runs
    code has bound all its ports), a handshake, not a guess; only what opens
    no port (the zygote's torch import, the grader's imports, finding the
    upload) overlaps otter's start then. When the kernel is not up within
    KERNEL_WAIT_SECONDS (otter failed, or a machine that slow), nothing is
    graded here; a kernel that comes later finds no report and grades itself
    (`graded`), its own ports bound by then."""
    from shardlab.autograder.sandbox import private_network, zygote
    why_not = private_network.enter()
    print("shardlab: grading in a network namespace of its own" if why_not is None else
          f"shardlab: no network namespace of its own ({why_not}): grading once otter's kernel is up",
          flush=True)
    zygote.shared()
    from shardlab.autograder.engine import grading  # noqa: F401 - imported while otter starts, not after
    ag = Path(ag_dir).resolve()
    handle = find_submission(ag / "submission")
    if "report" not in handle:   # the zip has no course config: the kernel's cases say so
        return
    deadline = time.monotonic() + KERNEL_WAIT_SECONDS
    while why_not is not None and not (ag / KERNEL_UP_FILE).is_file():
        if time.monotonic() > deadline:
            return
        time.sleep(_WAIT_POLL_SECONDS)
    graded(handle)


def case_failure(report: dict, part_id: str, group: int | None = None) -> str | None:
    """The failure message of one otter case, from the report: the part's
    shardlab feedback (hidden cases worded as in the local report), escaped
    for Gradescope, which shows it as HTML (`untrusted.html`);
    None when the part earned its points (with `group`: when that case group
    earned its share, `results.GroupResult`)."""
    from shardlab.autograder.sandbox.untrusted import html
    if "error" in report:
        return html(report["error"])
    part = next((p for q in report.get("questions", []) for p in q["parts"] if p["id"] == part_id), None)
    if part is None:
        return f"shardlab: part {part_id} is not in the report (zip and engine differ)"
    groups = part.get("groups") or []
    if group is not None and group < len(groups):
        earned = groups[group]["score"] >= groups[group]["max_score"]
    else:       # no groups (an internal error): the part as a whole
        earned = part["score"] >= part["max_score"]
    return None if earned else html(part["feedback"])


def check_part(handle: dict | None, part_id: str, group: int | None = None) -> None:
    """One otter test case: passes when the part (its case group `group`)
    earned its points, else raises AssertionError carrying `case_failure`."""
    from shardlab.autograder.sandbox.untrusted import html
    if handle is None:
        raise AssertionError("shardlab: the entry file did not run (was it removed from the zip?)")
    if "error" in handle and "report" not in handle:     # the zip itself is broken: no report to write
        raise AssertionError(html(handle["error"]))
    message = case_failure(graded(handle), part_id, group)
    if message is not None:
        raise AssertionError(message)


def finalize_results(ag_dir: str | Path) -> None:
    """run_autograder's last step, once otter has written results/results.json:
    rewrite it with `gradescope_results`, the course config's [gradescope]
    settings (the shipped config; its defaults if unreadable) and the report.
    Nothing changes when results.json is unreadable."""
    from shardlab.autograder.core.errors import ShardlabError
    from shardlab.reference.config import GradescopeSection, load_config
    ag_dir = Path(ag_dir)
    results_path = ag_dir / "results" / "results.json"
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    try:
        report = json.loads((ag_dir / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {}
    try:
        settings = load_config(ag_dir / "source" / CONFIG_FILE).gradescope
    except ShardlabError:
        settings = GradescopeSection()
    tmp = results_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(gradescope_results(results, report, settings), indent=1), encoding="utf-8")
    os.replace(tmp, results_path)


def gradescope_results(results: dict, report: dict, settings) -> dict:
    """otter's results.json as Gradescope should show it
    (https://gradescope-autograders.readthedocs.io/en/latest/specs/):

    - each question's `max_score` is shardlab's: otter counts a bonus part's
      points in its question's maximum (question 2: 19 where shardlab says
      18 + 1 bonus), so a bonus earned shows as extra credit;
    - each question's `output` is shardlab's, one line per part
      (`question_output`), instead of otter's summary of its cases;
    - `visibility` of each question and `stdout_visibility` are the course's
      ([gradescope] test_visibility, stdout_visibility in the course config);
    - output formats are explicit: shardlab's text is HTML-escaped
      (`untrusted.html`), so the top-level output and each question's
      are `simple_format` (HTML, line breaks kept); any other entry (otter's
      own failure reports) stays plain `text`;
    - the report's stamps (`STAMPS`: the course graded against, the grader's
      version, the autograder zip's digest) go in the top-level `extra_data`,
      the one place the spec leaves free-form.

    When the submission could not be graded, each question's output is the
    report's error, once; when the upload held no assignments/ folder to
    grade, the report's `no_submission` sentence, once; without a report
    (the zip's course config is missing: the entry file found nothing to
    grade) the questions keep otter's summaries, whose failure messages
    `clean_case_messages` made shardlab's."""
    from shardlab.autograder.sandbox.untrusted import html
    questions = {question_file_title(q["id"], q["title"]): q for q in report.get("questions", [])}
    for test in results.get("tests", []):
        if "max_score" not in test:          # not a question: otter's own report of a failure
            continue
        question = questions.get(test.get("name"))
        if question is not None:
            test["max_score"] = question["max_score"]
            test["output"] = (html(report["no_submission"]) if report.get("no_submission") else   # why 0, once
                              question_output(question, report.get("written") or {}))
        elif "error" in report:              # the submission could not be graded: why, once
            test["output"] = html(report["error"])
        test["output_format"] = "simple_format"
        test["visibility"] = settings.test_visibility
    if "output" in results:
        results["output_format"] = "simple_format"
    results["test_output_format"] = "text"
    results["stdout_visibility"] = settings.stdout_visibility
    stamps = {k: report[k] for k in STAMPS if report.get(k)}
    if stamps:          # which grader and course: the spec's free-form extra_data, stored, not shown
        results["extra_data"] = {**(results.get("extra_data") or {}), **stamps}
    return results


def question_output(question: dict, written: dict[str, str] | None = None) -> str:
    """One line per part, as the local report says it: mark, part, points,
    then shardlab's feedback (hidden cases say only the kind of failure),
    escaped for Gradescope's simple_format; an overlap part's (4.7, 2.11)
    line ends with the overlap summary of its traced step (`kit.timelines`;
    no image on Gradescope); under a hand-graded part, the student's answer
    from writeup.md (`written`), for the graders."""
    from shardlab.autograder.core.results import INTERNAL_ERROR
    from shardlab.autograder.sandbox.untrusted import html
    lines = []
    for p in question["parts"]:
        if p.get("kind") == "manual":
            mark, points = "✍️", "graded by hand"
        else:
            mark = ("⚠️" if p.get("status") == INTERNAL_ERROR else
                    "✅" if p["score"] >= p["max_score"] else "❌")
            points = f"{points_text(p['score'])} / {points_text(p['max_score'])}" + (" bonus" if p.get("bonus") else "")
        timeline = (p.get("timeline") or {}).get("summary")
        lines.append(f"{mark} {html(p['id'])} {html(p['title'])} ({points}): {html(p['feedback'])}"
                     + (f" Timeline of one traced step of your first graded run: {html(timeline)}" if timeline else ""))
        if written and written.get(p["id"]):
            lines.append(quoted_answer(p["id"], written[p["id"]]))
    return "\n".join(lines)


ANSWER_QUOTE = "    ┃ "      # before each line of a student's written answer: none starts like a line of the grader's


def quoted_answer(part_id: str, answer: str) -> str:
    """A student's answer from writeup.md as hand graders see it under its part's line: a heading saying whose
    text it is, then every line of it quoted (ANSWER_QUOTE), so that none can pass for a line of the grader's
    (a writeup saying "✅ 1.a (100 / 2): graded" is shown quoted, under the heading); cleaned, capped and
    escaped for Gradescope's simple_format (`untrusted.block`)."""
    text = block(answer, WRITTEN_CAP)
    heading = f"    ┏ the student's answer to {_html.escape(part_id, quote=False)}, quoted from writeup.md:"
    return "\n".join([heading] + [ANSWER_QUOTE + _html.escape(line, quote=False) for line in text.split("\n")])


def clean_case_messages(results, report: dict | None) -> None:
    """otter's message for a failed case ('❌ Test case failed', 'Error at
    line N in test …', the test's source line, 'AssertionError: …') becomes
    shardlab's message alone: `case_failure` from the report, else the
    AssertionError's text (check_part's, e.g. the course config missing). Any
    other exception (a fault of the grader's) keeps otter's message."""
    for test_file in getattr(results, "results", {}).values():
        for case in test_file.test_case_results:
            if case.passed:
                continue
            message = case_failure(report, case.test_case.name.split()[0]) if report else None
            if message is None:
                last = (case.message or "").rstrip().rsplit("\n", 1)[-1]
                message = last.removeprefix("AssertionError: ") if last.startswith("AssertionError: ") else None
            if message is not None:
                case.message = message


def grading_notes(report: dict) -> str:
    """The submission-wide lines of otter's results (Gradescope's `output`,
    shown as HTML: the error may name a student's file, so it is escaped)."""
    from shardlab.autograder.sandbox.untrusted import html
    if "error" in report:
        return f"shardlab: {html(report['error'])}"
    if report.get("no_submission"):        # nothing ran: no walls to report
        return f"shardlab: {html(report['no_submission'])}"
    lines = [f"shardlab: graded with {report.get('walls') or 'unknown walls'}."]
    if report.get("internal_errors"):
        lines.append("shardlab: internal error in the grader, not your code, in part(s) "
                     f"{', '.join(e['part'] for e in report['internal_errors'])}: they are flagged "
                     "for your instructor to regrade.")
    return "\n".join(lines)


if __name__ == "__main__":      # run_autograder: python -m shardlab.autograder.platforms.otter finalize DIR,
    # and (in the background) ... grade DIR
    if sys.argv[1:2] == ["finalize"] and len(sys.argv) == 3:
        finalize_results(sys.argv[2])
    elif sys.argv[1:2] == ["grade"] and len(sys.argv) == 3:
        grade_before_otter(sys.argv[2])
