"""The `shardlab` command: a thin layer that wires options to one module per verb."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import ProgressColumn
from rich.text import Text
from rich.table import Table

from shardlab.autograder.sandbox import untrusted
from shardlab.autograder.core.errors import (EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, CheckFailed,
                                              ShardlabError)
from shardlab.autograder.core.results import points_text
from shardlab.reference.config import SCAFFOLDINGS

console = Console()
config_option = click.option("--config", "config_path", type=click.Path(dir_okay=False),
                             help="Course config TOML. Without it: ./course.toml, else the file "
                                  "$SHARDLAB_COURSE names, else the shipped course (said on stderr).")


def _config(path, graded=()):
    """The course (`course_file`: --config, ./course.toml, $SHARDLAB_COURSE or the
    shipped one) and the path it was read from (None: the shipped course)."""
    from shardlab.autograder.course_file import course_file
    used = course_file(path, graded)
    return _load(used), used


def _load(path):
    from shardlab.reference.config import load_config
    from shardlab.autograder.questions import plan
    cfg = load_config(path)
    plan(cfg)        # points, parts and the question selection, derived once (a bad one: one line, now)
    return cfg


def score_table(reports) -> Table:
    """One column per submission, one row per part."""
    from shardlab.autograder.core.results import INTERNAL_ERROR
    table = Table(title="Scores", show_lines=False)
    table.add_column("part")
    for r in reports:
        table.add_column(untrusted.rich(Path(r.submission).name or r.submission), justify="right")
    first = reports[0]
    for qi, q in enumerate(first.questions):
        for pi, p in enumerate(q.parts):
            cells = []
            for r in reports:
                rp = r.questions[qi].parts[pi]
                cells.append("manual" if rp.kind == "manual" else
                             "[red]internal error" if rp.status == INTERNAL_ERROR else
                             f"{points_text(rp.score)}/{points_text(rp.max_score)}")
            table.add_row(f"{p.id} {p.title}", *cells)
    def total(r) -> str:
        bonus = sum(p.score for q in r.questions for p in q.parts if p.bonus)
        shown = f"[bold]{points_text(r.score - bonus)}/{points_text(r.max_score)}"
        return shown + (f" + {points_text(bonus)} bonus" if bonus else "")
    table.add_row("[bold]total", *[total(r) for r in reports])
    return table


def _print_version(ctx, _param, value) -> None:
    """`--version`: the grader's version (`results.grader_version`: with the git commit in a checkout)."""
    if not value or ctx.resilient_parsing:
        return
    from shardlab.autograder.core.results import grader_version
    click.echo(f"shardlab {grader_version()}")
    ctx.exit()


def _exit_statuses() -> str:
    """The epilog of `shardlab --help`: what each exit status means (`errors.EXIT_STATUSES`)."""
    from shardlab.autograder.core.errors import EXIT_STATUSES
    return "\b\nExit statuses:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_STATUSES.items())


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=_exit_statuses())
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print shardlab's version and exit.")
def cli():
    """shardlab: memory, FSDP, 4D parallelism, DDP buckets and pipelines, with an autograder."""


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per submission.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Submissions graded at once (with --out).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Batch mode: write gradebook.csv, results/*.json and feedback/*.md here.")
@click.option("--resume", is_flag=True, help="With --out: skip submissions already graded.")
@click.option("--verbose", "-v", is_flag=True, help="With --out: a line per submission as it is graded.")
@click.option("--timelines", "timelines_dir", type=click.Path(file_okay=False),
              help="Without --out: draw each submission's traced overlap step (4.7, 2.11) under "
                   "DIR/<name>/ as .png and .trace.json (with --out they go beside the feedback).")
@click.option("--gradescope-export", "export_path", type=click.Path(),
              help="Regrade a class: Gradescope's 'Export Submissions' zip (or its unpacked folder) "
                   "instead of PATHs; needs --out, and also writes gradescope_scores.csv there.")
@click.option("--roster", "roster_path", type=click.Path(dir_okay=False),
              help="With --gradescope-export: the roster CSV given to `shardlab build --roster`; each "
                   "submitter's student id is found through it as the autograder zip found it on "
                   "Gradescope. Without it, Gradescope's [gradescope] student_id_field value is the id.")
@click.option("--gradescope-metadata", "metadata_path", type=click.Path(dir_okay=False), hidden=True)
@click.option("--roster-map", "roster_map_path", type=click.Path(dir_okay=False), hidden=True)
@config_option
def grade(paths, as_json, jobs, out_dir, resume, verbose, timelines_dir, export_path, roster_path,
          metadata_path, roster_map_path, config_path):
    """Grade submissions: folders or zips holding assignments/."""
    from shardlab.autograder.platforms.gradescope_export import is_export
    from shardlab.autograder.sandbox.walls import required_walls
    if roster_path and not export_path:
        raise ShardlabError("--roster is for --gradescope-export (which student each submitter is)")
    if (metadata_path or roster_map_path) and (out_dir or len(paths) != 1):
        raise ShardlabError("--gradescope-metadata and --roster-map grade one PATH, without --out")
    if export_path and paths:
        raise ShardlabError("give submission PATHs or --gradescope-export ARCHIVE, not both")
    if export_path and not out_dir:
        raise ShardlabError("--gradescope-export needs --out DIR (the results and gradescope_scores.csv go there)")
    if not export_path and not paths:
        raise ShardlabError("nothing to grade: give submission PATHs (or --gradescope-export ARCHIVE --out DIR)")
    if out_dir and len(paths) == 1 and is_export(paths[0]):
        raise _export_given_as_path(paths[0])
    if out_dir and timelines_dir:
        raise ShardlabError("--timelines is for grading without --out (with --out, feedback/<name>/ has them)")
    if not out_dir and not export_path:
        import threading

        from shardlab.autograder.core.results import grader_version
        from shardlab.autograder.sandbox import zygote
        zygote.shared()          # its torch import runs while this process reads the config and plans
        # the report's grader version asks git (in a checkout) for up to 0.2 s: now, not at the end
        threading.Thread(target=grader_version, daemon=True).start()
    # never a course.toml from inside what is graded (the student's): `course_file`
    cfg, config_path = _config(config_path, [*paths, *([export_path] if export_path else [])])
    required_walls(cfg)          # refuse before grading anything when the course requires the jail
    if export_path:
        _grade_export(export_path, Path(out_dir), config_path, jobs, resume, as_json, verbose, cfg, roster_path)
        return
    if out_dir:
        _grade_batch(list(paths), Path(out_dir), config_path, jobs, resume, as_json, verbose=verbose)
        return
    from shardlab.autograder.engine.grading import grade_path
    students = None
    if metadata_path:       # a re-grade's child (`_grade_export`): Gradescope's users decide, as on Gradescope
        from shardlab.autograder.engine.answer_sheet import gradescope_submitters
        students = gradescope_submitters(metadata_path, cfg, roster_map_path)
    try:
        reports = [grade_path(p, cfg, student_id=students) for p in paths]
    except ShardlabError:
        if len(paths) == 1 and is_export(paths[0]):      # only once it is no submission
            raise _export_given_as_path(paths[0]) from None
        raise
    if len(paths) == 1 and reports[0].no_submission and is_export(paths[0]):    # a class, not a bad upload
        raise _export_given_as_path(paths[0])
    notes = _draw_report_timelines(paths, reports, timelines_dir)
    if as_json:
        for report, _ in notes:
            click.echo(json.dumps(report))
        return _graded_status(reports)
    for r, (_, lines) in zip(reports, notes):
        if r.no_submission:         # nothing graded: the one sentence, once, not once per part
            console.print(f"[yellow]{untrusted.rich(Path(r.submission).name)}[/]: 0 points: "
                          f"{untrusted.rich(r.no_submission)}", markup=True, highlight=False, emoji=False,
                          soft_wrap=True)
            continue
        for q in r.questions:
            for p in q.parts:
                if p.score < p.max_score:
                    console.print(f"[yellow]{untrusted.rich(Path(r.submission).name)} {p.id} {p.title}[/]: "
                                  f"{untrusted.rich(p.feedback)}", markup=True, highlight=False, emoji=False)
        if r.output_bytes:
            console.print(f"{Path(r.submission).name}: the submission printed {r.output_bytes:,} bytes "
                          f"(ignored by the grader).", highlight=False)
        _print_grading_notes(Path(r.submission).name, r.walls, r.internal_errors)
        for line in lines:
            console.print(f"{untrusted.rich(Path(r.submission).name)} {untrusted.rich(line)}", highlight=False)
    console.print(score_table(reports))
    return _graded_status(reports)


def _graded_status(reports) -> int:
    """`shardlab grade`'s exit status for what it graded (`errors.EXIT_STATUSES`): an internal
    error of the grader's in any part first (regrade it), then an upload refused for what it
    holds (its 0 and sentence printed), else 0."""
    if any(r.internal_errors for r in reports):
        return EXIT_INTERNAL
    return EXIT_REFUSED if any(r.no_submission for r in reports) else EXIT_OK


def _draw_report_timelines(paths, reports, folder) -> list[tuple[dict, list[str]]]:
    """Each report as a dict, and its overlap parts' timeline lines: drawn under
    folder/<name>/ when `folder` is given (`batch.draw_report_timelines`), else
    just each part's overlap summary."""
    from shardlab.autograder.platforms.batch import draw_report_timelines, submission_names
    names = submission_names([str(p) for p in paths])
    out = []
    for path, r in zip(paths, reports):
        report = r.to_dict()
        if folder:
            lines = draw_report_timelines(report, Path(folder) / names[str(path)])
        else:
            lines = [f"{p.id}: {p.timeline['summary']} (--timelines DIR draws it)"
                     for q in r.questions for p in q.parts if p.timeline]
        out.append((report, lines))
    return out


def _export_given_as_path(path) -> ShardlabError:
    return ShardlabError(f"{path} is a Gradescope 'Export Submissions' archive, a whole class: regrade it "
                         f"with `shardlab grade --gradescope-export {path} --out DIR`")


def _print_grading_notes(name: str, walls: str, internal_errors: list[dict]) -> None:
    """What the instructor must know beyond the scores: the walls the code ran
    in, and the parts the grader (not the student) failed on."""
    console.print(f"{name}: graded with {walls}", highlight=False)
    if internal_errors:
        console.print(f"[red]{name}: internal error in the grader, not the student's code, in part(s) "
                      f"{', '.join(e['part'] for e in internal_errors)}: regrade them[/]", highlight=False)


class _PerMinute(ProgressColumn):
    """Submissions graded per minute, over those graded in this run."""

    def render(self, task) -> Text:
        return Text(f"{task.speed * 60:.1f}/min" if task.speed else "-/min")


def _grade_batch(paths, out: Path, config_path, jobs, resume, as_json, annotations=None,
                 refused=None, verbose=False, child_args=None) -> dict[str, dict]:
    """A class: one progress bar (done/total, rate, time left); a line per submission only
    when `verbose`; errors and regrades counted at the end."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.progress import TimeRemainingColumn
    from shardlab.autograder.platforms.batch import grade_many
    missing = [p for p in paths if not Path(p).exists() and p not in (refused or {})]
    if missing:
        raise ShardlabError(f"no such file or folder: {missing[0]}")
    errors, regrade = [], []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), _PerMinute(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=as_json) as progress:
        task = progress.add_task("grading", total=len(paths))
        already = 0

        def on_result(name, report, skipped):
            nonlocal already
            if skipped:         # graded by an earlier run (--resume): not part of this run's bar or rate
                already += 1
                progress.update(task, total=len(paths) - already, description=f"grading ({already} resumed)")
            else:
                progress.advance(task)
            if report["status"] != "ok":
                errors.append(name)
            if report.get("internal_errors"):
                regrade.append(name)
            if verbose and not skipped and not as_json:
                shown = (f"{points_text(report['score'])}/{points_text(report['max_score'])}"
                         if report["status"] == "ok" else f"[red]error[/]: {untrusted.rich(report['error'])}")
                if report.get("internal_errors"):
                    shown += (" [red](internal error in the grader, parts "
                              f"{', '.join(e['part'] for e in report['internal_errors'])}: regrade)[/]")
                progress.console.print(f"{name}: {shown}", highlight=False)
        results = grade_many(paths, out, config_path, jobs, resume, on_result, annotations, refused, child_args,
                             say=lambda line: click.echo(f"note: {line}", err=True))
    _class_report(out, jobs=jobs, quiet=as_json, after_grading=True)
    if as_json:
        for name in sorted(results):
            click.echo(json.dumps({"name": name, **results[name]}))
    else:
        console.print(f"wrote {out / 'gradebook.csv'} ({len(results)} submissions, {len(errors)} errors)",
                      highlight=False)
        if regrade:
            console.print(f"[red]{len(regrade)} submission(s) with internal errors in the grader (not the "
                          f"students'): see the gradebook's internal_errors column and regrade them[/]",
                          highlight=False)
    return results


def _grade_export(export_path, out: Path, config_path, jobs, resume, as_json, verbose=False, cfg=None,
                  roster=None) -> None:
    """A class from Gradescope's export: batch grading, then gradescope_scores.csv
    (`gradescope_export`). Each child grader identifies its submission's
    students as on Gradescope: from the export's submitters, through the roster
    map `shardlab build --roster` shipped in the autograder zip, rebuilt from
    `roster` (`roster_for_zip`; none: the field's value is the id). With
    student_id_field "id" the export lacks Gradescope's user ids: they are the
    roster's student ids, found by each submitter's email."""
    from shardlab.autograder.platforms.batch import submission_names, write_atomic
    from shardlab.autograder.platforms.gradescope_export import (SCORES_FILE, check_roster_resumable,
                                                                differing_students, open_export, scores_csv)
    from shardlab.autograder.publish.roster import read_roster, roster_for_zip
    cfg = cfg if cfg is not None else _load(config_path)
    roster_map = roster_for_zip(cfg, roster)
    user_ids = ({s.email.casefold(): s.student_id for s in read_roster(roster) if s.email}
                if roster and cfg.gradescope.student_id_field == "id" else None)
    if resume:
        check_roster_resumable(out, roster_map)
    if cfg.course.secret and roster is None and cfg.gradescope.student_id_field == "email":
        click.echo(f"note: no --roster, so each submitter's {cfg.gradescope.student_id_field} is their student "
                   "id, as on Gradescope when the autograder zip ships no roster", err=True)
    with open_export(export_path, out) as export:
        paths = [export.paths[s.key] for s in export.submissions]
        child_args = export.grading_args(cfg, roster_map, user_ids)
        results = _grade_batch(paths, out, config_path, jobs, resume, as_json, export.records(roster_map),
                               export.refused, verbose, child_args)
        names = submission_names(paths)
        by_key = {s.key: r for s in export.submissions              # an ungraded one has no entry
                  if (r := results.get(names[export.paths[s.key]])) is not None}
    from shardlab.autograder.platforms.otter import question_file_title
    text, unscored = scores_csv(export.submissions, by_key, question_file_title)
    write_atomic(out / SCORES_FILE, text)
    students = sum(len(s.submitters) for s in export.submissions)
    shown = ", ".join(unscored[:10]) + (f" and {len(unscored) - 10} more" if len(unscored) > 10 else "")
    message = (f"wrote {out / SCORES_FILE} ({students} students, {len(export.submissions)} submissions"
               + (f"; no score for {len(unscored)}: {shown} (see gradebook.csv, then regrade them)"
                  if unscored else "") + ")")
    click.echo(message, err=as_json)
    differ = differing_students(text)
    who = "1 student's score differs" if differ == 1 else f"{differ} students' scores differ"
    click.echo(f"{who} from Gradescope's: see the Differs and Reason columns of {out / SCORES_FILE}",
               err=as_json)


@cli.command()
@config_option
@click.option("--require", is_flag=True, help="Fail unless every wall is up, whatever the config says.")
def walls(config_path, require):
    """The walls this machine gives student code (its level, each missing wall, why, and the
    remedy); fails when they are below the course's [grading] require_walls (the Gradescope
    image's setup.sh runs this)."""
    from shardlab.autograder.sandbox.walls import current, explain, required_walls
    cfg, _ = _config(config_path)
    click.echo(current().describe())
    for line in explain(current(), cfg):
        click.echo(line)
    required_walls(cfg, require)


@cli.command()
@config_option
def warm(config_path):
    """Compute the expected values every grading needs and cache them on disk (the
    Gradescope image's setup.sh runs this, so no submission pays for them)."""
    from shardlab.autograder.engine.plan import warm as warm_plan
    from shardlab.reference.cache import cache_dir
    failed = warm_plan(_config(config_path)[0])
    if failed:
        raise ShardlabError("the reference failed for part(s) " + "; ".join(f"{p}: {why}" for p, why in failed.items()))
    click.echo(f"expected values cached in {cache_dir()}")


def _warn_off_roster(student_id: str, roster) -> None:
    """One line on stderr when `student_id` is not on the roster (any id has a variant: a typo still
    prints a key, someone else's numbers), or that no roster was given to check it against."""
    from shardlab.autograder.publish.roster import read_roster
    if roster is None:
        click.echo(f"note: {student_id!r} is not checked against a roster (give --roster to)", err=True)
        return
    ids = [s.student_id for s in read_roster(roster)]
    if student_id not in ids:
        near = [i for i in ids if i.casefold() == student_id.casefold()]
        click.echo(f"warning: {student_id!r} is not on the roster {roster}"
                   + (f" (did you mean {near[0]!r}?)" if near else "")
                   + ": this is the variant that id would draw, no student's", err=True)


@cli.command()
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print the answer key as JSON.")
@click.option("--student", "student_id", metavar="ID",
              help="That student's variant (needs [course].secret); with --json, an object with "
                   "student_id, model and questions.")
@click.option("--roster", type=click.Path(dir_okay=False),
              help="With --student: the course's roster CSV (as build's); an id not on it is warned about.")
def answers(config_path, as_json, student_id, roster):
    """The answer key for the course config, with derivations (--student: one student's variant)."""
    from shardlab.autograder.questions import answer_key, questions
    from shardlab.autograder.publish.roster import key_questions, key_record, key_title, strict_json
    cfg, _ = _config(config_path)
    if student_id is not None:
        from shardlab.autograder.engine.variants import check_student_id, variant_config
        if not cfg.course.secret:
            raise ShardlabError("--student needs per-student variants, and variants need [course].secret "
                                "in the course config")
        student_id = check_student_id(student_id, "--student")
        _warn_off_roster(student_id, roster)
        cfg = variant_config(cfg, student_id)
        if as_json:
            click.echo(strict_json(key_record(cfg, student_id)))
            return
        console.print(key_title(cfg, student_id), style="bold", markup=False, highlight=False)
    if as_json:
        click.echo(strict_json(key_questions(cfg)))
        return
    key = answer_key(cfg)
    for q in questions(cfg):
        if str(q.number) not in key:
            continue
        table = Table(title=f"Question {q.number} — {q.title}")
        for col in ("quantity", "formula", "substituted", "answer"):
            table.add_column(col, overflow="fold")
        for w in key[str(q.number)].values():
            table.add_row(w.quantity, w.formula, w.substituted, w.shown)
        console.print(table)


@cli.command()
@config_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="shardlab-out",
              show_default=True, help="Output folder.")
@click.option("--roster", type=click.Path(dir_okay=False),
              help="CSV with columns student_id, name and optionally email (each student's Gradescope "
                   "email): one handout per student, own numbers (needs [course].secret).")
def build(config_path, out_dir, roster):
    """Handout (md, html, notebook), solutions, starter kit, otter autograder zip."""
    from shardlab.autograder.engine.variants import check_drawable
    cfg, config_path = _config(config_path)      # the zip ships the course actually read
    check_drawable(cfg)                          # a [variants] nothing valid comes from: one line, now
    from shardlab.autograder.selfcheck import own_fixtures
    own_fixtures(cfg)                            # a course question's broken expect.toml: one line, before check
    _build_all(cfg, config_path, Path(out_dir), roster)


def _build_all(cfg, config_path, out: Path, roster=None) -> None:
    from shardlab.autograder.publish.otter_export import (build_autograder, config_text, gradescope_points,
                                                        manual_outline)
    from shardlab.autograder.publish.render import build as render_build
    from shardlab.autograder.publish.roster import build_roster, roster_for_zip
    students = build_roster(cfg, roster, out) if roster else []
    for path in render_build(cfg, out):
        console.print(f"wrote {path}", highlight=False)
    if students:
        console.print(f"wrote {len(students)} files under {out / 'students'}", highlight=False)
    from shardlab.autograder.platforms.gradescope_export import autograder_digest
    zip_path = build_autograder(cfg, config_text(config_path), out, roster_for_zip(cfg, roster))
    console.print(f"wrote {zip_path} (autograder_zip_sha256 {autograder_digest(zip_path)}: every "
                  "Gradescope report.json it makes carries it)", highlight=False)
    console.print(f"Gradescope: set the assignment's autograder points to {points_text(gradescope_points(cfg))} "
                  "(a bonus earned shows as extra credit)", highlight=False)
    outline = manual_outline(cfg)
    if outline:
        console.print("Gradescope: add the written parts, graded by hand from writeup.md, to the outline as "
                      f"manual questions: {outline}", highlight=False, markup=False)
    # a course whose numbers leave a sub-question without a sensible answer still builds: the handout asks
    # why, the solutions answer; the instructor hears of it here (docs/instructor-guide.md)
    from shardlab.autograder.questions import degeneracies, questions
    found = degeneracies(cfg)
    for q in questions(cfg):
        if q.module in found:
            click.echo(f"warning: question {q.number} ({q.title}) is degenerate on this course: "
                       f"{found[q.module]}; the handout and solutions say so", err=True)
    _course_warnings(cfg)
    # an own question read a course setting by its earlier name: it still works; say once what it is now
    from shardlab.reference.config.renamed import used
    for old, new in used().items():
        click.echo(f"warning: {old} is the earlier name of {new}: it still works; rename it in your "
                   "question (docs/config.md)", err=True)


@cli.command()
@click.option("--check", "only_check", is_flag=True,
              help="Fail if the stubs (assignments/, or --out's) are out of date.")
@click.option("--scaffolding", type=click.Choice(SCAFFOLDINGS), default=None,
              help="What the stubs ship besides signatures and contracts ([course] scaffolding); "
                   "assignments/ holds the default's, so another needs --out.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write the stubs into DIR instead of assignments/.")
def stubs(only_check, scaffolding, out_dir):
    """Regenerate assignments/ (the student stubs) from solutions/."""
    from shardlab.autograder.publish.stubs import ASSIGNMENTS, DEFAULT_SCAFFOLDING, stale_stubs, write_stubs
    target, scaffolding = Path(out_dir) if out_dir else ASSIGNMENTS, scaffolding or DEFAULT_SCAFFOLDING
    if only_check:
        stale = stale_stubs(target, scaffolding)
        if stale:
            raise CheckFailed(f"stubs out of date: {', '.join(stale)} (run `shardlab stubs`)")
        console.print("stubs are up to date")
        return
    for path in write_stubs(target, scaffolding):
        console.print(f"wrote {path}", highlight=False)


def _course_warnings(cfg) -> None:
    """The course's implausible numbers and a time budget too small for the solutions, one warning line
    each on stderr (`reference.config.plausible`): `build` and `check` say them."""
    from shardlab.reference.config.plausible import budget_warning, implausible
    for line in [*implausible(cfg), budget_warning(cfg)]:
        if line:
            click.echo(f"warning: {line}", err=True)


def _run_check(cfg, jobs: int = 2) -> bool:
    from rich.progress import Progress
    from shardlab.autograder.selfcheck import fixtures, run_check
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("grading solutions, stubs and wrong submissions", total=2 + len(fixtures(cfg)))
        rows = run_check(cfg, progress=lambda: progress.advance(task), jobs=jobs)
    _course_warnings(cfg)
    solutions = next((row for row in rows if row.name == "solutions"), None)
    if solutions is not None and any("time budget ran out" in p.feedback for q in solutions.report.questions
                                     for p in q.parts):
        click.echo(f"warning: the solutions ran out of [grading].budget_seconds = {cfg.grading.budget_seconds}: "
                   "what did not finish scored 0; raise it", err=True)
    table = Table(title="Self-check")
    for col in ("submission", "score", "as declared"):
        table.add_column(col)
    for row in rows:    # not applicable: a declared loss this course's numbers cannot show, not a failure
        colour = "red" if not row.ok else "yellow" if row.not_applicable else "green"
        table.add_row(row.name, f"{points_text(row.report.score)}/{points_text(row.report.max_score)}",
                      f"[{colour}]" + untrusted.rich(row.status))
    console.print(table)
    return all(row.ok for row in rows)


@cli.command()
@config_option
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Submissions graded at once.")
def check(config_path, jobs):
    """Solutions full marks, stubs zero, known-bad submissions as declared."""
    if not _run_check(_config(config_path)[0], jobs):
        raise CheckFailed("self-check failed: see the table above")


@cli.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="shardlab-out",
              show_default=True, help="Output folder.")
def demo(out_dir):
    """Build everything for the default course and grade solutions and stubs."""
    from shardlab.autograder.engine.grading import grade_folder
    from shardlab.autograder.selfcheck import folder_of
    from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
    cfg = _load(None)           # the shipped course, by definition: no resolution, no note
    _build_all(cfg, None, Path(out_dir))
    reports = []
    for name, source in (("solutions", SOLUTIONS), ("stubs", ASSIGNMENTS)):
        with folder_of(source) as root:
            reports.append(grade_folder(root, cfg, label=name))
    console.print(score_table(reports))


@cli.group()
def bench():
    """Experiments shipped with the course (not graded)."""


@bench.command("buckets")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="shardlab-out/bench",
              show_default=True, help="Output folder for buckets.csv, allreduce.csv and buckets.png.")
@click.option("--submission", type=click.Path(exists=True),
              help="Time this submission's BucketedDDP (folder or zip) instead of the course solutions'.")
@click.option("--rounds", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Rounds of timings (each size is timed 3 times per round; medians over all rounds).")
def bench_buckets(out_dir, submission, rounds):
    """Measure gloo's all-reduce overhead and bandwidth, sweep DDP bucket sizes, plot both."""
    import contextlib
    import shutil
    import tempfile
    from rich.progress import Progress
    import shardlab.reference.buckets as course_model
    from shardlab.autograder.publish.stubs import SOLUTIONS
    from shardlab.autograder.kit.bucket_experiment import BenchFailed, CostModel, describe, run
    from shardlab.autograder.engine.submission import open_submission
    with contextlib.ExitStack() as stack:
        if submission:
            root = stack.enter_context(open_submission(submission))
        else:                       # the course solutions' BucketedDDP, staged as a submission
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="shardlab-bench-")))
            if not (SOLUTIONS / "buckets.py").is_file():
                raise ShardlabError("the course solutions are not installed here (a grader's install): "
                                    "time a submission with --submission PATH")
            (root / "assignments").mkdir()
            (root / "assignments" / "__init__.py").touch()
            shutil.copy(SOLUTIONS / "buckets.py", root / "assignments" / "buckets.py")
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("all-reduce rounds, then bucket-size rounds", total=2 * rounds)
            try:
                summary = run(Path(out_dir), root, CostModel.of(course_model), rounds,
                              advance=lambda: progress.advance(task))
            except BenchFailed as exc:
                raise ShardlabError(str(exc)) from None
    for line in describe(summary)[:-1]:
        console.print(line, highlight=False, soft_wrap=True)
    console.print(f"wrote {out_dir}/buckets.csv, allreduce.csv, buckets.png", highlight=False)


@cli.command()
@click.argument("out_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Flag a pair when either side's code or writeup similarity reaches this share of its "
                   "fingerprints (default 0.5; docs/grading.md, 'Similar submissions').")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Processes that fingerprint the code of a large class.")
def report(out_dir, threshold, jobs):
    """The class report of a graded batch folder: class-report.html, .json and the misconceptions CSV."""
    if not Path(out_dir).is_dir():
        raise ShardlabError(f"no such folder: {out_dir} (give the --out folder of `shardlab grade`)")
    _class_report(Path(out_dir), threshold, jobs)


def _class_report(out: Path, threshold: float | None = None, jobs: int = 2, quiet: bool = False,
                  after_grading: bool = False) -> None:
    """Build OUT's class report (`publish.class_report`) under a progress bar. After a batch, a
    failure to build it costs nothing of the grading: one line says so and how to rebuild it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from shardlab.autograder.publish import class_report, similarity
    columns = (TextColumn("class report: {task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=quiet) as progress:
        task = progress.add_task("reading results", total=None)

        def step(what: str, done: int, total: int) -> None:
            progress.update(task, description=what, completed=done, total=total)
        try:
            found = class_report.build(out, threshold or similarity.DEFAULT_THRESHOLD, jobs, step)
        except Exception as exc:    # noqa: BLE001 - after grading, the grades are what matters
            if not after_grading:
                raise
            click.echo(f"warning: the class report failed ({type(exc).__name__}: {exc}); rebuild it with "
                       f"`shardlab report {out}`", err=True)
            return
    pairs = len(found["similar_pairs"])
    click.echo(f"wrote {out / class_report.REPORT_HTML} ({found['submissions']} submissions, "
               f"{len(found['misconceptions'])} misconceptions named, {pairs} similar pair{'s' * (pairs != 1)})",
               err=quiet)


@cli.command()
@click.argument("zip_path", metavar="ZIP", type=click.Path(exists=True, dir_okay=False))
@click.argument("uploads", metavar="SUBMISSION...", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--work", "work_dir", type=click.Path(file_okay=False),
              help="Keep the image, each run's folder and logs here (default: a temporary folder, removed).")
@click.option("--metadata", "metadata_path", type=click.Path(exists=True, dir_okay=False),
              help="Gradescope's submission_metadata.json for every run (default: one student, "
                   "student@example.edu, id 1).")
@click.option("--json", "as_json", is_flag=True, help="Print each run's results.json, one JSON object a line.")
def replay(zip_path, uploads, work_dir, metadata_path, as_json):
    """Run an autograder zip the way Gradescope does (root: a private /autograder) and print
    what Gradescope would show for each SUBMISSION (a folder, or a zip as uploaded): the
    image built from the zip's setup.sh, then the zip's run_autograder once per upload
    (docs/gradescope.md). Exits 1 when the image build or a run fails."""
    import shutil
    from shardlab.autograder.publish import gradescope_replay as gs
    gs.check_can_replay()
    if metadata_path:
        try:
            metadata = json.loads(Path(metadata_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ShardlabError(f"--metadata {metadata_path}: not a JSON file ({exc})") from None
    else:
        metadata = gs.gradescope_metadata([{"email": "student@example.edu", "id": 1, "name": "Student"}])
    work = Path(work_dir).resolve() if work_dir else gs.scratch()
    work.mkdir(parents=True, exist_ok=True)
    failed = []
    try:
        built = lambda log: None if as_json else click.echo(f"image built from {zip_path} (setup.sh's log: "
                                                            f"{work / 'build.log'})")
        for upload, run in gs.replay_zip(Path(zip_path).resolve(), [Path(u).resolve() for u in uploads], work,
                                         metadata, built):
            if run.results is None:
                failed.append(str(upload))
                click.echo(f"{upload}: no results.json after {run.seconds:.1f} s: Gradescope would show a failed "
                           f"autograder; the end of run_autograder's output:\n{run.log[-1500:]}", err=True)
            elif as_json:
                click.echo(json.dumps({"submission": str(upload), "seconds": round(run.seconds, 2),
                                       "results": run.results}))
            else:
                click.echo(f"{untrusted.one_line(str(upload))} ({run.seconds:.1f} s), as Gradescope shows it:")
                for line in gs.replay_lines(run.results):
                    click.echo(line)
    finally:
        if not work_dir:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(uploads)} runs wrote no results.json: {', '.join(failed)}")


@cli.command("grading-service", hidden=True)
def grading_service_command():
    """Internal: one job slot's grading service of `grade --out` (platforms.grading_service),
    which answers its batch on stdin/stdout and runs `main` in a fresh fork per submission."""
    from shardlab.autograder.platforms import grading_service
    grading_service.serve(main)


def main() -> None:
    """The command, its exit status one of `errors.EXIT_STATUSES` (a command's own `sys.exit`,
    `grade`'s status for what it graded, passes through)."""
    try:
        status = cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:     # a usage error: click's own status, 2
        exc.show()
        sys.exit(exc.exit_code)
    except ShardlabError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_status)
    except Exception as exc:  # a bug in shardlab itself: one line unless debugging
        if os.environ.get("SHARDLAB_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} (set SHARDLAB_DEBUG=1 for a traceback)",
                   err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(status if isinstance(status, int) else EXIT_OK)


if __name__ == "__main__":
    main()
