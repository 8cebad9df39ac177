"""Grade many submissions: `shardlab grade PATH... --jobs N --out OUT`.

Each submission is graded by its own supervised grader, `shardlab grade PATH
--json` as a fresh fork of one of the batch's grading services (one per job
slot, `platforms.grading_service`: the grader's imports paid once a batch,
as the zygote's torch import is), so a submission that kills its grader
cannot take innocent jobs with it; it is retried once, then recorded as an
error row. Every result
is written atomically as soon as it is known (results/<name>.json,
feedback/<name>.md, and gradebook.csv rebuilt from all results), so an
interrupted run loses nothing and `--resume` skips what is done. Beside the
feedback, feedback/<name>/ holds the timelines of the overlap parts (4.7,
2.11): one traced step of the student's first graded run, as a PNG and a
Chrome trace (`draw_report_timelines`; the feedback names them in one line).

Written answers (writeup.md) are collected in written/<part id>.md, one file
per hand-graded part holding every submission's answer, for the graders;
with a course secret, beside the numbers of that student's own variant.

Parts the grader itself failed on (`engine.grading`, "no false zeros")
are listed in the gradebook's `internal_errors` column and at the top of the
student's feedback, so the instructor can regrade them; each feedback file
also says which walls isolated the student's code.

Every record carries `grader_version` (`results.grader_version`: the
grader's version and git commit), error records included, and the gradebook
has a column for it and for `autograder_zip_sha256` (set only by a grading
inside the otter zip), so a regrade after a fix can be told from the grading
it replaces. An upload refused for what it holds (no assignments/ folder, an
unreadable zip, a link, too big: `errors.SubmissionRefused`) is no error:
its child exits with status 4 and a report of 0 points whose `no_submission`
sentence says why (`grading.unsubmitted_report`), an "ok" row with `refused:
true`, never retried; `gradescope_export` scores it 0, as Gradescope did. A
grader-side failure is never a 0: a child that exits with a usage or config
error (2: a file that is neither a folder nor a zip, a course the child
cannot read), an internal error (3) or no report at all is an error row with
its reason, no score, to regrade (retried once unless it was status 2).

A re-grade into a folder holding a batch never shrinks its gradebook: it
merges into it (same course) or refuses, and says which (`batch_folder`).

A batch folder remembers its course. Every record carries `course` (its
name and the sha256 of the config file, `results.course_stamp`) and
`submission_sha256` (`submission_sha256`: the bytes graded), and OUT/batch.json
holds the course, the config file (null: the shipped course) and the
grader_version of the run. Every child grader is given that course as an
explicit, absolute `--config`, so none resolves its working directory
(`autograder.course_file`). `--resume` (`check_resumable`) refuses a folder
graded against another course or by another grader version, or one holding
results but no batch.json (an older grader's); it keeps a result only when
its status is "ok" and its submission's bytes are unchanged, and grades the
rest again (error rows are retried).
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import queue
import re
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import lru_cache
from pathlib import Path

from shardlab.autograder.core import content
from shardlab.autograder.core.errors import EXIT_INTERNAL, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, ShardlabError
from shardlab.autograder.core.results import course_shown, course_stamp, grader_version, points_text
from shardlab.autograder.platforms.batch_folder import BATCH_FILE, earlier_batch
from shardlab.autograder.platforms.grading_service import GradingService, ServiceError
from shardlab.autograder.sandbox import untrusted, zygote

# A child grader's timeout sits above its grading's budget ([grading] budget_seconds, which bounds
# everything the student's code can make it wait for) by this margin: the grader's start, staging,
# the expected values of a cold machine, scoring and the report
GRADE_MARGIN_SECONDS = 300
ATTEMPTS = 2


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def submission_names(paths: list[str]) -> dict[str, str]:
    """A unique, file-system-safe name per submission (its stem, numbered on clashes)."""
    names: dict[str, str] = {}
    seen: dict[str, int] = {}                   # stem -> how many submissions have it so far
    for p in paths:
        stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(p).stem) or "submission"
        seen[stem] = seen.get(stem, 0) + 1
        names[p] = stem if seen[stem] == 1 else f"{stem}-{seen[stem]}"
    return names


@lru_cache(maxsize=8)
def grade_timeout(config_path: str | None) -> float:
    """Seconds batch waits for one child grader: the course's budget plus GRADE_MARGIN_SECONDS."""
    from shardlab.reference.config import default_value, load_config
    try:
        budget = load_config(config_path).grading.budget_seconds
    except ShardlabError:       # the child says what is wrong with the course, in its one line
        budget = default_value("grading", "budget_seconds")
    return budget + GRADE_MARGIN_SECONDS


def grader_argv(path: str, config_path: str | None, args: list[str] | None = None) -> list[str]:
    """`shardlab grade PATH --json --config COURSE [args]` for one submission. The
    child is always named its course, as an absolute path (None: the shipped
    course's file), so it never looks for one in its working directory; `args`:
    more options for this submission (a re-grade's `--gradescope-metadata`)."""
    course = os.path.abspath(config_path) if config_path else str(content.shipped_course())
    return ["grade", path, "--json", "--config", course, *(args or [])]


def grade_supervised(path: str, config_path: str | None, service: GradingService,
                     args: list[str] | None = None) -> dict:
    """One supervised attempt in `service` (a fresh fork of it grades, and is killed
    and swept past `grade_timeout`); returns the report dict or an error record
    (with "retry": whether another attempt could help)."""
    timeout = grade_timeout(config_path)
    reply = service.run(grader_argv(path, config_path, args), timeout)
    if reply.get("timeout"):
        return {"status": "error", "error": f"grading took longer than {timeout:g} s", "retry": True}
    code, stdout, stderr = reply.get("returncode"), str(reply.get("stdout", "")), str(reply.get("stderr", ""))
    # a report was printed: graded (0), refused for what the upload holds (4: its 0 and sentence),
    # or graded with parts the grader failed on (3: flagged in `internal_errors`, to regrade)
    if code in (EXIT_OK, EXIT_REFUSED, EXIT_INTERNAL):
        try:
            report = json.loads(stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            report = None
        if isinstance(report, dict) and "questions" in report:
            report["status"] = "ok"
            if code == EXIT_REFUSED:
                report["refused"] = True
            return report
    err = (stderr.strip().splitlines() or ["no output"])[-1]
    # never a 0: a usage or config error (2) is the instructor's, the same again if retried; anything
    # else (an internal error, a grader killed) is the grader's, tried once more
    return {"status": "error", "error": f"the grader exited with status {code}: {err[:300]}",
            "retry": code != EXIT_USAGE}


class ServicePool:
    """One grading service per job slot (`platforms.grading_service`), for a batch's
    block; `grade` borrows one. A service that stops answering is replaced, and the
    attempt is an error to retry."""

    def __init__(self, slots: int, env: dict[str, str]):
        self.env = env
        self.idle: queue.Queue[GradingService] = queue.Queue()
        self.started: list[GradingService] = []
        self.closed = False
        for _ in range(slots):
            self._add()

    def _add(self) -> None:
        service = GradingService(self.env)
        self.started.append(service)
        self.idle.put(service)

    def grade(self, path: str, config_path: str | None, args: list[str] | None = None) -> dict:
        if self.closed:
            return {"status": "error", "error": "the batch stopped before grading it"}
        service = self.idle.get()
        try:
            report = grade_supervised(path, config_path, service, args)
        except ServiceError as exc:
            service.close()
            if self.closed:
                return {"status": "error", "error": "the batch stopped while grading it"}
            self._add()
            return {"status": "error", "error": f"the grader failed: {exc}", "retry": True}
        self.idle.put(service)
        return report

    def close(self) -> None:
        self.closed = True
        for service in self.started:
            service.close()


def draw_report_timelines(report: dict, folder: Path) -> list[str]:
    """Draw each part's traced step (PartResult.timeline, `timelines.drawing.timeline`)
    as <folder>/<stem>.png and <stem>.trace.json (`timelines.write_drawing`). Each
    such part's dict then carries `timeline_note` (its overlap summary and the
    files' names, one line of the feedback) instead of the events. Returns
    "<part id>: <note>" per drawing. A part without a timeline (its run failed)
    gets no line; a drawing that fails says so and costs nothing."""
    from shardlab.autograder.kit.timelines.drawing import write_drawing
    lines = []
    for q in report.get("questions", []):
        for p in q["parts"]:
            timeline = p.pop("timeline", None)
            if not timeline:
                continue
            try:
                png, trace = write_drawing(timeline["kind"], timeline["events"], timeline["ideal"], folder,
                                           timeline["stem"], timeline["title"])
                p["timeline_note"] = (f"{timeline['summary']} (one traced step of your first graded run: "
                                      f"{folder.name}/{png.name}, and {folder.name}/{trace.name} for "
                                      "https://ui.perfetto.dev)")
            except Exception as exc:  # noqa: BLE001 - a drawing never costs a grade
                p["timeline_note"] = f"no timeline: drawing it failed ({type(exc).__name__})"
            lines.append(f"{p['id']}: {p['timeline_note']}")
    return lines


def feedback_markdown(name: str, report: dict) -> str:
    lines = [f"# Feedback for {name}", ""]
    if report["status"] != "ok":
        return "\n".join(lines + [f"Could not grade this submission: {untrusted.markdown(report['error'])}", ""])
    lines += [f"**Score: {points_text(report['score'])} / {points_text(report['max_score'])}**", ""]
    if report.get("no_submission"):     # nothing graded: the one sentence, once
        return "\n".join(lines + [untrusted.markdown(report["no_submission"]), ""])
    if report.get("internal_errors"):
        lines += [f"**Internal error in the grader, not your code, in part(s) "
                  f"{', '.join(e['part'] for e in report['internal_errors'])}: they will be regraded.**", ""]
    if report.get("walls"):
        lines += [f"_Graded with {report['walls']}._", ""]
    if report.get("course"):
        lines += [f"_Course: {untrusted.markdown(course_shown(report['course']))}._", ""]
    for q in report["questions"]:
        shown = f"{points_text(q['score'])} / {points_text(q['max_score'])}"
        lines += [f"## Question {q['id']} — {q['title']} ({shown})", ""]
        for p in q["parts"]:
            score = ("manual" if p.get("kind") == "manual"
                     else f"{points_text(p['score'])} / {points_text(p['max_score'])}")
            lines.append(f"- **{p['id']} {p['title']}** ({score}): {untrusted.markdown(p['feedback'])}")
            if p.get("timeline_note"):
                lines.append(f"  - Timeline: {untrusted.markdown(p['timeline_note'])}")
        lines.append("")
    return "\n".join(lines)


def gradebook_csv(results: dict[str, dict]) -> str:
    """One row per submission, one column per part, plus total, status, error
    (why an error row was not graded; for an "ok" row of 0 whose upload held
    no assignments/ folder, the sentence saying so), the
    parts to regrade because the grader failed on them (internal_errors),
    which grader graded it (grader_version, autograder_zip_sha256) and
    against which course (course: its name and short sha256)."""
    part_ids = []
    for r in results.values():
        for q in r.get("questions", []):
            for p in q["parts"]:
                if p["id"] not in part_ids:
                    part_ids.append(p["id"])
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["submission", *part_ids, "total", "max_score", "status", "error", "internal_errors",
                "grader_version", "autograder_zip_sha256", "course"])
    for name in sorted(results):
        r = results[name]
        scores = {p["id"]: points_text(p["score"]) for q in r.get("questions", []) for p in q["parts"]}
        total = (points_text(r["score"]), points_text(r["max_score"])) if r["status"] == "ok" else ("", "")
        regrade = " ".join(e["part"] for e in r.get("internal_errors", []))
        why = r.get("error") or r.get("no_submission") or ""     # an ok row of 0: its one sentence
        w.writerow([name, *[scores.get(i, "") for i in part_ids], *total, r["status"], why,
                    regrade, r.get("grader_version", ""), r.get("autograder_zip_sha256") or "",
                    course_shown(r.get("course"))])
    return buf.getvalue()


def grade_many(paths: list[str], out: Path, config_path: str | None, jobs: int = 2,
               resume: bool = False, on_result=None, annotations: dict[str, dict] | None = None,
               refused: dict[str, str] | None = None,
               child_args: dict[str, list[str]] | None = None, say=None) -> dict[str, dict]:
    """Grade every path into `out`; returns {name: report or error record} of every row the folder
    holds: into a folder holding a batch, a run merges or refuses (`batch_folder.earlier_batch`), and
    `say` (a callable taking one line) is told which.

    annotations: {path: fields} added to that path's record (the Gradescope
    export's submitters, for one); refused: {path: reason} recorded as a
    refused submission without grading it (a front end that already knows);
    child_args: {path: options} given to that path's child grader (a
    re-grade's submitters, `gradescope_export.Export.grading_args`).

    config_path: the course (None: the shipped course), given to every child
    as an absolute --config and recorded in OUT/batch.json. With `resume`,
    `check_resumable` first; then a result is kept only when it is "ok" and
    its submission's bytes are those it graded (`submission_sha256`)."""
    from shardlab.reference.config import load_config
    config_path = os.path.abspath(config_path) if config_path else None
    cfg = load_config(config_path)
    batch = {"course": course_stamp(cfg), "config": config_path, "grader_version": grader_version()}
    if resume:
        check_resumable(out, batch)
    names = submission_names(paths)
    earlier = earlier_batch(out, batch, list(names.values()))
    if earlier.note and say:
        say(earlier.note)
    results_dir, feedback_dir = out / "results", out / "feedback"
    results_dir.mkdir(parents=True, exist_ok=True)
    feedback_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out / BATCH_FILE, json.dumps(batch, indent=1))
    digests = {path: submission_sha256(path) for path in names}   # before grading: a later change regrades
    results: dict[str, dict] = dict(earlier.kept)
    todo = []
    for path, name in names.items():
        kept = _kept_result(results_dir / f"{name}.json", digests[path], batch) if resume else None
        if kept is not None:
            results[name] = kept
            if on_result:
                on_result(name, kept, skipped=True)
        else:
            todo.append(path)

    def attempt(path: str) -> dict:
        if refused and path in refused:
            report = {"status": "error", "error": refused[path], "refused": True}
        else:
            for _ in range(ATTEMPTS):
                report = grade_one(path, config_path, (child_args or {}).get(path))
                if not report.pop("retry", False):
                    break
        report["submission"] = path
        report["submission_sha256"] = digests[path]
        report.setdefault("grader_version", grader_version())   # error records too: every result says who
        report.setdefault("course", batch["course"])             # and against which course
        report.update((annotations or {}).get(path, {}))
        return report

    # one torch import for the whole batch: every grader forks its sandboxes from it; and one
    # grading service per job slot, each holding the grader's imports. The services close first
    # on the way out, so a Ctrl-C does not wait for the gradings under way
    with contextlib.ExitStack() as stack:
        grader_env = stack.enter_context(zygote.serving()) if todo else {}
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=max(1, jobs)))
        services = ServicePool(max(1, jobs) if todo else 0, grader_env)
        stack.callback(services.close)
        grade_one = services.grade
        futures = {pool.submit(attempt, p): p for p in todo}
        for fut in as_completed(futures):
            name = names[futures[fut]]
            report = fut.result()
            draw_report_timelines(report, feedback_dir / name)
            results[name] = report
            write_atomic(results_dir / f"{name}.json", json.dumps(report, indent=1))
            write_atomic(feedback_dir / f"{name}.md", feedback_markdown(name, report))
            write_atomic(out / "gradebook.csv", gradebook_csv(results))
            if on_result:
                on_result(name, report, skipped=False)
    write_atomic(out / "gradebook.csv", gradebook_csv(results))
    write_written_answers(out / "written", results, cfg)
    return results


def submission_sha256(path: str | Path) -> str | None:
    """The bytes a submission's result was graded from: a file's (a zip's)
    sha256; for a folder, one sha256 over its files' relative paths and bytes
    (a link: its target's text), walked without following links, in sorted
    order, skipping __pycache__; None when there is nothing at `path`."""
    path = Path(path)
    if path.is_file():
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    if not path.is_dir():
        return None
    entries = []
    for root, dirs, files in os.walk(path):          # never follows a link to a folder
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            entries.append(os.path.relpath(os.path.join(root, name), path))
    total = hashlib.sha256()
    for rel in sorted(entries):
        full = os.path.join(path, rel)
        total.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        try:
            if os.path.islink(full):
                total.update(b"link\0" + os.readlink(full).encode("utf-8", "surrogateescape"))
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    file_digest = hashlib.file_digest(f, "sha256")
                total.update(b"file\0" + file_digest.digest())
            else:                                   # a fifo, a socket: its name only
                total.update(b"other\0")
        except OSError as exc:                      # unreadable here: so be it, but say so in the digest
            total.update(b"unreadable\0" + type(exc).__name__.encode())
        total.update(b"\n")
    return total.hexdigest()


def check_resumable(out: Path, batch: dict) -> None:
    """Refuse (one line) to resume into `out` unless its batch.json names this
    run's course (sha256) and grader version. A folder holding results but no
    batch.json was graded by an older grader, which did not record them."""
    recorded = out / BATCH_FILE
    if not recorded.is_file():
        if any((out / "results").glob("*.json")):
            raise ShardlabError(f"cannot resume {out}: it holds results but no {BATCH_FILE}, so an older grader "
                                f"made them against a course it did not record; grade into a new --out")
        return
    try:
        before = json.loads(recorded.read_text(encoding="utf-8"))
        course, version = before["course"], before["grader_version"]
        sha = course["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ShardlabError(f"cannot resume {out}: its {BATCH_FILE} is unreadable; grade into a new --out") from None
    if sha != batch["course"]["sha256"]:
        where = untrusted.one_line(str(before.get("config") or "the shipped course"), 300)
        raise ShardlabError(f"cannot resume {out}: it was graded against another course, "
                            f"{course_shown(course)} from {where}, and this run's is "
                            f"{course_shown(batch['course'])}; resume with that course's --config, or grade into a "
                            f"new --out")
    if version != batch["grader_version"]:
        raise ShardlabError(f"cannot resume {out}: it was graded by grader {untrusted.one_line(str(version), 200)} "
                            f"and this is grader "
                            f"{batch['grader_version']}; grade into a new --out")


def _kept_result(done: Path, digest: str | None, batch: dict) -> dict | None:
    """A result of an earlier run that --resume keeps: graded ("ok", not an
    error row, which is retried) from the submission's current bytes, by this
    batch's course and grader (a result left by a run without --resume into
    the same folder may be another's)."""
    try:
        report = json.loads(done.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or report.get("status") != "ok":
        return None
    same = (report.get("submission_sha256") == digest
            and (report.get("course") or {}).get("sha256") == batch["course"]["sha256"]
            and report.get("grader_version") == batch["grader_version"])
    return report if same else None


def _fenced(text: str) -> str:
    """Untrusted text as a Markdown code block no line of it can close."""
    text = untrusted.block(text, 20_000)
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{fence}text\n{text}\n{fence}"


def _variant_numbers(cfg, report: dict, number: str, keys: dict[str, dict]) -> str:
    """One line for the graders: question `number`'s worked values ("quantity = shown")
    in the variant of the student the report's answers sheet was graded as
    (`answer_sheet.grade_answers`: its student_id), or why there is none."""
    from shardlab.autograder.engine.variants import check_student_id, variant_config
    from shardlab.autograder.questions import answer_key
    sid = next((q.get("student_id") for q in report.get("questions", []) if q.get("id") == "answers"), None)
    try:
        sid = check_student_id(sid, "the graded report") if isinstance(sid, str) else None
    except ShardlabError:
        sid = None
    if sid is None:
        return ("Variant: unknown (the submission was not graded)." if report.get("status") != "ok" else
                "Variant: unknown (no student id was graded; the answers parts' feedback says why).")
    if sid not in keys:
        variant = variant_config(cfg, sid)
        keys[sid] = {"model": variant.model.name, "key": answer_key(variant)}
    worked = keys[sid]["key"].get(number, {})
    shown = "; ".join(f"{w.quantity} = {w.shown}" for w in worked.values())
    return f"Variant of student `{sid}` (model {keys[sid]['model']}): {shown or 'no worked numbers'}."


def write_written_answers(folder: Path, results: dict[str, dict], cfg=None) -> list[Path]:
    """One file per hand-graded part of the course (`engine.writeup`): every
    submission's answer from its writeup.md, or that it has none, for the graders.
    With a course secret, each answer comes after the numbers of the student's
    own variant for that part's question (`_variant_numbers`)."""
    from shardlab.autograder.engine.writeup import written_parts
    from shardlab.autograder.questions import questions
    folder.mkdir(parents=True, exist_ok=True)
    numbers = {q.module: str(q.number) for q in questions(cfg)}
    keys: dict[str, dict] = {}             # student id -> answer_key of their variant, drawn once
    written = []
    for part in written_parts(cfg):
        lines = [f"# {part.id} {part.title}", "", f"_{part.description}_", ""]
        for name in sorted(results):
            answer = (results[name].get("written") or {}).get(part.id)
            lines += [f"## {name}", ""]
            if cfg is not None and cfg.course.secret:
                lines += [_variant_numbers(cfg, results[name], numbers[part.module], keys), ""]
            lines += [_fenced(answer) if answer else "_no answer_", ""]
        path = folder / f"{part.id}.md"
        write_atomic(path, "\n".join(lines))
        written.append(path)
    return written
