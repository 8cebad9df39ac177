"""Grade many submissions: `shardlab grade PATH... --jobs N --out OUT`.

Each submission is graded by its own supervised subprocess (`shardlab grade
PATH --json`), so a submission that kills its grader cannot take innocent
jobs with it; it is retried once, then recorded as an error row. Every result
is written atomically as soon as it is known (results/<name>.json,
feedback/<name>.md, and gradebook.csv rebuilt from all results), so an
interrupted run loses nothing and `--resume` skips what is done. Beside the
feedback, feedback/<name>/ holds the timelines of the overlap parts (4.7,
2.11): one traced step of the student's first graded run, as a PNG and a
Chrome trace (`draw_report_timelines`; the feedback names them in one line).

Written answers (writeup.md) are collected in written/<part id>.md, one file
per hand-graded part holding every submission's answer, for the graders.

Parts the grader itself failed on (`engine.grading`, "no false zeros")
are listed in the gradebook's `internal_errors` column and at the top of the
student's feedback, so the instructor can regrade them; each feedback file
also says which walls isolated the student's code.

Every record carries `grader_version` (`results.grader_version`: the
grader's version and git commit), error records included, and the gradebook
has a column for it and for `autograder_zip_sha256` (set only by a grading
inside the otter zip), so a regrade after a fix can be told from the grading
it replaces. A record whose submission the grader refused as not gradable
(exit status 2: no assignments/, a link, too big) has `refused: true`;
`gradescope_export` scores those 0, as Gradescope did.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from shardlab.autograder.core.results import grader_version
from shardlab.autograder.sandbox import untrusted, zygote

GRADE_TIMEOUT_SECONDS = 900
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


def grade_in_subprocess(path: str, config_path: str | None, env: dict[str, str] | None = None) -> dict:
    """One supervised attempt; returns the report dict or an error record.
    `env`: added to this process's environment (the batch's zygote)."""
    cmd = [sys.executable, "-m", "shardlab.autograder.cli", "grade", path, "--json"]
    if config_path:
        cmd += ["--config", config_path]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=GRADE_TIMEOUT_SECONDS,
                              start_new_session=True, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"grading took longer than {GRADE_TIMEOUT_SECONDS} s",
                "retry": True}
    if done.returncode == 0:
        try:
            report = json.loads(done.stdout.strip().splitlines()[-1])
            report["status"] = "ok"
            return report
        except (ValueError, IndexError):
            pass
    err = (done.stderr.strip().splitlines() or ["no output"])[-1]
    refused = done.returncode == 2      # bad input (not a submission): retrying cannot help
    return {"status": "error", "error": f"the grader exited with status {done.returncode}: {err[:300]}",
            "retry": not refused, "refused": refused}


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
    lines += [f"**Score: {report['score']:g} / {report['max_score']:g}**", ""]
    if report.get("internal_errors"):
        lines += [f"**Internal error in the grader, not your code, in part(s) "
                  f"{', '.join(e['part'] for e in report['internal_errors'])}: they will be regraded.**", ""]
    if report.get("walls"):
        lines += [f"_Graded with {report['walls']}._", ""]
    for q in report["questions"]:
        lines += [f"## Question {q['id']} — {q['title']} ({q['score']:g} / {q['max_score']:g})", ""]
        for p in q["parts"]:
            score = "manual" if p.get("kind") == "manual" else f"{p['score']:g} / {p['max_score']:g}"
            lines.append(f"- **{p['id']} {p['title']}** ({score}): {untrusted.markdown(p['feedback'])}")
            if p.get("timeline_note"):
                lines.append(f"  - Timeline: {untrusted.markdown(p['timeline_note'])}")
        lines.append("")
    return "\n".join(lines)


def gradebook_csv(results: dict[str, dict]) -> str:
    """One row per submission, one column per part, plus total, status, the
    parts to regrade because the grader failed on them (internal_errors), and
    which grader graded it (grader_version, autograder_zip_sha256)."""
    part_ids = []
    for r in results.values():
        for q in r.get("questions", []):
            for p in q["parts"]:
                if p["id"] not in part_ids:
                    part_ids.append(p["id"])
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["submission", *part_ids, "total", "max_score", "status", "error", "internal_errors",
                "grader_version", "autograder_zip_sha256"])
    for name in sorted(results):
        r = results[name]
        scores = {p["id"]: f"{p['score']:g}" for q in r.get("questions", []) for p in q["parts"]}
        total = (f"{r['score']:g}", f"{r['max_score']:g}") if r["status"] == "ok" else ("", "")
        regrade = " ".join(e["part"] for e in r.get("internal_errors", []))
        w.writerow([name, *[scores.get(i, "") for i in part_ids], *total, r["status"], r.get("error", ""),
                    regrade, r.get("grader_version", ""), r.get("autograder_zip_sha256") or ""])
    return buf.getvalue()


def grade_many(paths: list[str], out: Path, config_path: str | None, jobs: int = 2,
               resume: bool = False, on_result=None, annotations: dict[str, dict] | None = None,
               refused: dict[str, str] | None = None) -> dict[str, dict]:
    """Grade every path into `out`; returns {name: report or error record}.

    annotations: {path: fields} added to that path's record (the Gradescope
    export's submitters, for one); refused: {path: reason} recorded as a
    refused submission without grading it (a front end that already knows)."""
    results_dir, feedback_dir = out / "results", out / "feedback"
    results_dir.mkdir(parents=True, exist_ok=True)
    feedback_dir.mkdir(parents=True, exist_ok=True)
    names = submission_names(paths)
    results: dict[str, dict] = {}
    todo = []
    for path, name in names.items():
        done = results_dir / f"{name}.json"
        if resume and done.is_file():
            results[name] = json.loads(done.read_text())
            if on_result:
                on_result(name, results[name], skipped=True)
        else:
            todo.append(path)

    def attempt(path: str) -> dict:
        if refused and path in refused:
            report = {"status": "error", "error": refused[path], "refused": True}
        else:
            for _ in range(ATTEMPTS):
                report = grade_in_subprocess(path, config_path, grader_env)
                if not report.pop("retry", False):
                    break
        report["submission"] = path
        report.setdefault("grader_version", grader_version())   # error records too: every result says who
        report.update((annotations or {}).get(path, {}))
        return report

    # one torch import for the whole batch: every grader forks its sandboxes from it
    serving: contextlib.AbstractContextManager[dict[str, str]] = (zygote.serving() if todo else
                                                                   contextlib.nullcontext({}))
    with serving as grader_env, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
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
    from shardlab.reference.config import load_config
    write_written_answers(out / "written", results, load_config(config_path))
    return results


def _fenced(text: str) -> str:
    """Untrusted text as a Markdown code block no line of it can close."""
    text = untrusted.block(text, 20_000)
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{fence}text\n{text}\n{fence}"


def write_written_answers(folder: Path, results: dict[str, dict], cfg=None) -> list[Path]:
    """One file per hand-graded part of the course (`engine.writeup`): every
    submission's answer from its writeup.md, or that it has none, for the graders."""
    from shardlab.autograder.engine.writeup import written_parts
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for part in written_parts(cfg):
        lines = [f"# {part.id} {part.title}", "", f"_{part.description}_", ""]
        for name in sorted(results):
            answer = (results[name].get("written") or {}).get(part.id)
            lines += [f"## {name}", "", _fenced(answer) if answer else "_no answer_", ""]
        path = folder / f"{part.id}.md"
        write_atomic(path, "\n".join(lines))
        written.append(path)
    return written
