"""Grade one submission: build every part's cases, run the student's calls in
the sandbox, and score in this process from plain data.

Scoring: a part's points are split evenly over its case groups (the course
model, a tiny model, each kind of edge case, the other inputs: a case's note,
`Case.group`); a group earns its share when all its cases pass
(one otter test case per group). Feedback names the part, the input and the
expected and returned values for public cases, only the group and the kind
of failure for hidden ones, and the misconception when a wrong value
matches a known one.

No false zeros: what the grader itself computes (a part's expected values,
some from trusted multi-process reference runs) or runs (a probe's harness)
can fail for reasons that are not the student's. Such a failure is retried
once (reference runs), then confined to the parts it concerns: each is
reported with `status = "internal-error"` (0 points, flagged, its feedback
saying the grader failed, not the student's code) and listed in the report's
`internal_errors` for the instructor to regrade; the other parts grade
normally. Every report also says which walls isolated the student's code
(`walls`, `sandbox.walls`): lighter walls are the instructor's set-up.
"""
from __future__ import annotations

import contextvars
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from shardlab.autograder.engine.answer_sheet import SHEET_TITLE, grade_answers, sheet_parts
from shardlab.autograder.kit.comparison import public_feedback, show_value
from shardlab.autograder.core.parts import Call, Case, Misconception, Part, alternatives
from shardlab.autograder.core.phases import mark, phase
from shardlab.autograder.engine.plan import case_groups, expected_or_error, group_points, part_cases
from shardlab.autograder.engine.probes import PROBES, starts, traces
from shardlab.autograder.core.results import (BUDGET_STOP, INTERNAL_ERROR, GroupResult, PartResult, QuestionResult,
                                                Report, course_stamp, internal_error_result, points_text)
from shardlab.autograder.engine.submission import open_submission
from shardlab.autograder.kit.timelines.drawing import timeline
from shardlab.autograder.engine.writeup import read_writeup, writeup_prompts, written_feedback
from shardlab.autograder.core.errors import ShardlabError, SubmissionRefused
from shardlab.autograder.questions import all_parts, part_points, plan, questions, registered
from shardlab.autograder.sandbox import leftovers, untrusted
from shardlab.autograder.sandbox.hidden_last import Gate, Party
from shardlab.autograder.sandbox.gloo.seeds import submission_pool_key
from shardlab.autograder.sandbox.process import Limits, Outcome
from shardlab.autograder.sandbox.walls import required_walls

MAX_FAILURES_SHOWN = 3
VALUE_CAP = 200          # a returned value echoed in a public case's feedback


def _internal_error(part: Part, points: float, reason: str) -> PartResult:
    return internal_error_result(part.id, part.title, points, untrusted.one_line(reason, 300),
                                 part.kind, part.bonus)


def _shown(case: Case, call: Call) -> str:
    """How feedback names a call: with its inputs in a public case, by its group in a hidden one."""
    return call.show() if case.public else f"a hidden case of {call.function} ({case.group})"


class Failure(NamedTuple):
    """One failed case: the feedback line is "where: what"; error_kind is the
    kind of a call's error (None for a wrong value); kind is the failure's kind
    for the class report (`PartResult.failures`); mistake is the named
    misconception the wrong value matches, when it is the one explanation."""

    where: str
    what: str
    error_kind: str | None
    kind: str
    mistake: Misconception | None = None


def _error_kind(error: str) -> str:
    """A failed call's kind: `untrusted.failure_kind`, or BUDGET_STOP when the
    grading's budget ran out (`sandbox.process`'s words for it)."""
    return BUDGET_STOP if "time budget ran out" in error else untrusted.failure_kind(error)


def _judge_case(part: Part, case: Case, expected: list, got: list[Outcome]) -> Failure | None:
    """None if the case passes, else its Failure. The student's words (errors,
    returned values) appear only in public cases, cleaned and capped; a hidden
    case says only the kind of failure (`sandbox.untrusted`)."""
    for call, exp, out in zip(case.calls, expected, got):
        where = _shown(case, call)
        if out.error is not None:
            kind = untrusted.failure_kind(out.error)
            # the probe's own errors name the call ("f(x=1) did not finish ..."): said once
            said = out.error.removeprefix(f"{call.show()} ") if case.public else out.error
            return Failure(where, untrusted.one_line(said) if case.public else kind, kind, _error_kind(out.error))
        problem = part.compare.problem(exp, out.value)
        if problem is None:
            continue
        # named only when it is the one explanation (`parts.alternatives`): a value that two mistakes,
        # or a mistake and the right answer, would both give gets the plain expected/got
        matching = [mis for mis, alt in alternatives(part, case, expected)
                    if all(part.compare(a, o.value) for a, o in zip(alt, got))]
        mistake = matching[0] if len(matching) == 1 else None
        words = mistake.message if mistake else None
        if case.public:
            what = public_feedback(untrusted.one_line(problem), exp,
                                   untrusted.one_line(show_value(out.value), VALUE_CAP), case.note, words)
        else:
            what = untrusted.problem_kind(problem) + (f" — this {words}" if words else "")
        return Failure(where, what, None, untrusted.problem_kind(problem), mistake)
    return None


def _failure_counts(judged: list[Failure]) -> tuple[list[dict[str, str]], dict[str, int]]:
    """(PartResult.misconceptions, PartResult.failures) of a part's failed cases."""
    named: dict[str, str] = {}
    kinds: dict[str, int] = {}
    for failure in judged:
        if failure.mistake is not None:
            named.setdefault(failure.mistake.name, failure.mistake.message)
        kinds[failure.kind] = kinds.get(failure.kind, 0) + 1
    return [{"name": n, "message": m} for n, m in named.items()], kinds


def score_part(part: Part, points: float, cases: list[Case], expected: list[list],
               outcomes: list[list[Outcome]]) -> PartResult:
    """The part's points split evenly over its case groups (`plan.case_groups`):
    a group earns its share when every one of its cases passes."""
    failures = [_judge_case(part, case, exp, got) for case, exp, got in zip(cases, expected, outcomes)]
    judged = [(case, failure) for case, failure in zip(cases, failures) if failure is not None]
    named = case_groups(cases)
    groups = [GroupResult(name, share if all(failures[k] is None for k in members) else 0.0, share,
                          any(cases[k].public for k in members))
              for (name, members), share in zip(named, group_points(points, len(named)))]
    public = {f.what for case, f in judged if case.public}
    kinds = {f.error_kind for _, f in judged}
    if not judged:
        feedback = f"All {len(cases)} cases passed."
        score = points
    elif len(judged) == len(cases) > 1 and len(kinds) == 1 and None not in kinds and len(public) <= 1:
        # the same error everywhere (not implemented, import failed): say it once
        feedback = f"All {len(cases)} cases failed: {next(iter(public or kinds))}"
        score = 0.0
    else:
        score = round(points * sum(g.score == g.max_score for g in groups) / len(groups), 9)
        missed = [g.name for g in groups if g.score < g.max_score]
        shown = [f"{f.where}: {f.what}" for _, f in judged[:MAX_FAILURES_SHOWN]]
        more = len(judged) - len(shown)
        named_missed = "; ".join(missed[:MAX_FAILURES_SHOWN]) + ("; …" if len(missed) > MAX_FAILURES_SHOWN else "")
        feedback = (f"{len(judged)} of {len(cases)} cases failed, in {len(missed)} of {len(groups)} case groups "
                    f"({named_missed}): {points_text(score)} of {points_text(points)} points. " + " | ".join(shown)
                    + (f" | and {more} more" if more else ""))
    mistakes, counts = _failure_counts([f for _, f in judged])
    return PartResult(part.id, part.title, score, points, feedback, part.kind, part.bonus, groups=groups,
                      misconceptions=mistakes, failures=counts)


def _run_probes(root: Path, cases: dict[str, list[Case]], limits: Limits,
                traced: frozenset = frozenset()) -> tuple[dict, dict, str, int]:
    """Run every part's calls (cases by part id), one batch per probe; the
    cases `traced` ({(part id, case index)}) with their runs' traces where the
    probe can trace (`kit.timelines`). Returns ({(part id, case index):
    [Outcome]}, {part id: reason} for the parts whose probe itself failed (the
    grader's fault), student output, bytes printed)."""
    by_probe: dict[str, list] = {}
    for q in registered():
        for part in q.parts:
            if part.id in cases:
                by_probe.setdefault(part.probe, []).append(part)
    batches = {}
    for probe, parts in by_probe.items():
        calls: list[Call] = []
        slices: dict[tuple[str, int], slice] = {}
        for part in parts:
            for k, case in enumerate(cases[part.id]):
                slices[(part.id, k)] = slice(len(calls), len(calls) + len(case.calls))
                # each call knows its case group (a hang then costs that group only) and whether it is hidden
                # (run after every public call of the grading: `sandbox.hidden_last`)
                calls.extend(replace(call, group=(part.id, case.group), hidden=not case.public)
                             for call in case.calls)
        batches[probe] = (calls, slices, parts)
    gate = Gate(len(batches))
    # the probes are separate sandboxes that mostly wait: run them side by side
    with ThreadPoolExecutor(max_workers=len(batches) or 1) as pool:
        runs = {probe: pool.submit(contextvars.copy_context().run, _run_probe, probe, str(root), calls, limits,
                                   frozenset(k for key, s in slices.items() if key in traced
                                             for k in range(s.start, s.stop)), gate.party())
                for probe, (calls, slices, _) in batches.items()}
        outcomes, failed, output, printed = {}, {}, [], 0
        for probe, (_, slices, parts) in batches.items():
            try:
                run = runs[probe].result()
            except ShardlabError:       # the submission's (e.g. staging refused a link): one line
                raise
            except Exception as exc:    # noqa: BLE001 - the harness failed: its parts only
                reason = f"the {probe!r} harness failed: {type(exc).__name__}: {exc}"
                failed.update({part.id: reason for part in parts})
                continue
            outcomes.update({key: run.outcomes[s] for key, s in slices.items()})
            output.append(run.output)
            printed += run.output_bytes
    return outcomes, failed, "".join(output), printed


def _run_probe(probe: str, root: str, calls: list, limits: Limits, traced: frozenset[int], gate: Party):
    run = PROBES[probe]
    try:
        with phase(f"{probe} probe", lane=probe):
            if traced and traces(run):
                return run(root, calls, limits, traced=traced, gate=gate)
            return run(root, calls, limits, gate=gate)
    finally:
        gate.public_done()          # a probe that raised before saying so holds no other probe's hidden calls


def _score_or_error(part: Part, points: float, cases, expected, outcomes) -> PartResult:
    try:
        return score_part(part, points, cases, expected, outcomes)
    except Exception as exc:            # noqa: BLE001 - a scoring bug is ours, confined to the part
        return _internal_error(part, points, f"scoring failed: {type(exc).__name__}: {exc}")


def grade_parts(root: Path, cfg, parts: list[Part], limits: Limits = Limits()):
    """`_grade_parts` with the data seed key the submission's files pick
    (`seeds.submission_pool_key`): the same files get the same runs' data, so the
    same score and feedback, in every grading process."""
    with submission_pool_key(root):
        return _grade_parts(root, cfg, parts, limits)


def _grade_parts(root: Path, cfg, parts: list[Part], limits: Limits = Limits()):
    """Grade some auto parts of one submission. The probes' slow start-up
    (`prepare`: the gloo fork server importing torch) begins first; the
    student's calls then run while a thread computes the expected values (the
    probes mostly wait on their sandboxes, the reference mostly computes).
    A part whose expected values or probe fail is an internal error (see the
    module docstring); the others grade normally.
    Returns ({part id: PartResult}, student output, bytes printed)."""
    unstarted = {}
    for probe in sorted({p.probe for p in parts}):
        if starts(start := PROBES[probe]):
            try:
                start.prepare(str(root), limits)
            except ShardlabError:
                raise
            except Exception as exc:    # noqa: BLE001 - the harness failed: its parts only
                why = f"the {probe!r} harness failed to start: {type(exc).__name__}: {exc}"
                unstarted.update({p.id: why for p in parts if p.probe == probe})
    with phase("cases"):
        cases = {p.id: part_cases(cfg, p.id) for p in parts}
        drawn = {p.id: k for p in parts if p.drawn and (k := drawn_case(cases[p.id])) is not None}

    def expected_values():
        with phase("expected values", lane="reference"):
            return {p.id: expected_or_error(cfg, p.id) for p in parts}
    with ThreadPoolExecutor(max_workers=1) as pool:
        # in this grading's context: its data seed key (`grade_parts`)
        expected = pool.submit(contextvars.copy_context().run, expected_values)
        outcomes, failed, output, printed = _run_probes(
            root, {pid: c for pid, c in cases.items() if pid not in unstarted}, limits,
            frozenset(drawn.items()))
        with phase("waiting for expected values"):
            expected = expected.result()
    failed.update(unstarted)
    results = {}
    with phase("scoring"):
        for p in parts:
            values, reason = expected[p.id]
            reason = reason or failed.get(p.id)
            results[p.id] = (_internal_error(p, part_points(p, cfg), reason) if reason else
                             _score_or_error(p.for_course(cfg), part_points(p, cfg), cases[p.id], values,
                                             [outcomes[(p.id, k)] for k in range(len(cases[p.id]))]))
            if p.id in drawn and not reason:        # after scoring, and never part of it
                results[p.id].timeline = case_timeline(p, cases[p.id][drawn[p.id]], outcomes[(p.id, drawn[p.id])],
                                                   values[drawn[p.id]][0])
    return results, output, printed


def drawn_case(cases: list[Case]) -> int | None:
    """The case a drawn part's timeline shows: its first public case; None without one (a hidden run's
    timeline would show marks and bytes its student processes chose knowing hidden inputs)."""
    return next((k for k, c in enumerate(cases) if c.public), None)


def case_timeline(part: Part, case: Case, got: list[Outcome], expected=None) -> dict | None:
    """The traced step of a drawn part's run (`timelines.drawing.timeline`), or None when the run
    failed (hung, crashed, raised). A hidden case's title names its group, never its inputs."""
    run = got[0] if got else None
    if run is None or run.error is not None or part.drawn is None:
        return None
    return timeline(part.drawn, _shown(case, case.calls[0]), run.trace, expected)


def grade_part_ids(root: Path, cfg, part_ids, limits: Limits = Limits()) -> dict[str, PartResult]:
    """Grade the auto parts with these ids (the harness tests and the grading
    benchmark run just the distributed parts): the same engine as grade_folder."""
    wanted = set(part_ids)
    return grade_parts(root, cfg, [p for p in all_parts() if p.id in wanted and p.kind == "auto"], limits)[0]


def grade_folder(root: Path, cfg, limits: Limits = Limits(), label: str | None = None,
                 modules: set[str] | None = None, student_id=None) -> Report:
    """Grade the submission whose assignments/ folder is under `root`; with
    `modules`, only the questions on those student modules. With a course
    secret, answers.toml is graded against the variant of `student_id` (a
    str, or Gradescope's submitters: `answer_sheet.Submitters`), else of
    the id in answers.toml (`answer_sheet`).
    Refuses (ShardlabError) when the course requires the full jail and this
    machine lacks a wall (`sandbox.walls`)."""
    plan(cfg)                           # the course's derived values: a bad [points] is one line, first
    walls = required_walls(cfg)
    if limits.deadline is None:         # one budget for everything this grading runs ([grading] budget_seconds)
        limits = dataclasses.replace(limits, deadline=time.monotonic() + cfg.grading.budget_seconds)
    chosen = [q for q in questions(cfg) if modules is None or q.module in modules]
    graded, output, printed = grade_parts(root, cfg, [p for q in chosen for p in q.parts if p.kind == "auto"],
                                          limits)
    sections = read_writeup(Path(root))
    written_ids = tuple(writeup_prompts(cfg))
    qresults = []
    for q in chosen:
        presults = [graded[part.id] if part.kind == "auto" else
                    PartResult(part.id, part.title, 0.0, 0.0,
                               written_feedback(part.id, sections, part_points(part, cfg), part.description,
                                                written_ids), part.kind)
                    for part in q.parts]
        qresults.append(QuestionResult(str(q.number), q.title, sum(p.score for p in presults),
                                       sum(p.max_score for p in presults if not p.bonus), presults))
    if modules is None:
        answers = grade_answers(Path(root), cfg, student_id)
        qresults += [answers] if answers else []
    internal = [{"part": p.id, "error": p.feedback} for q in qresults for p in q.parts
                if p.status == INTERNAL_ERROR]
    written = {p.id: sections[p.id] for q in qresults for p in q.parts
               if p.kind == "manual" and sections and sections.get(p.id)}
    return Report(label or str(root), sum(q.score for q in qresults), sum(q.max_score for q in qresults),
                  qresults, output, printed, walls.describe(), internal, written=written,
                  course=course_stamp(cfg))


def grade_path(path: str | Path, cfg, limits: Limits = Limits(), student_id=None) -> Report:
    """Grade a folder or zip submission. An upload refused for what it holds
    (`errors.SubmissionRefused`: no single assignments/ folder, an unreadable
    zip, a link, a path outside, too big) is the student's and scores 0 with
    its one sentence (`unsubmitted_report`), as on Gradescope; nothing at
    `path`, or a file that is neither a folder nor a zip (the instructor's
    wrong path), raises ShardlabError."""
    mark("grader imported")
    leftovers.sweep_dead()          # what graders killed before they could clean up left behind
    began = time.monotonic()
    try:
        with open_submission(path) as root:
            report = grade_folder(root, cfg, limits, label=str(path), student_id=student_id)
    except SubmissionRefused as exc:    # the upload's own: opening it, or staging it again in a sandbox
        report = unsubmitted_report(cfg, str(exc), label=str(path))
    report.grading_seconds = round(time.monotonic() - began, 3)
    return report


def unsubmitted_report(cfg, sentence: str, label: str) -> Report:
    """The report of an upload with nothing to grade: every part of the
    course's questions (and of answers.toml's sheet, with a course secret)
    0 points, its feedback `sentence`, which `no_submission` also holds once
    for the front ends that say it once. No student code ran: no walls."""
    qresults = []
    for q in questions(cfg):
        parts = [PartResult(p.id, p.title, 0.0, part_points(p, cfg) if p.kind == "auto" else 0.0, sentence,
                            p.kind, p.bonus) for p in q.parts]
        qresults.append(QuestionResult(str(q.number), q.title, 0.0,
                                       sum(p.max_score for p in parts if not p.bonus), parts))
    if cfg.course.secret:
        parts = [PartResult(pid, title, 0.0, cfg.course.answer_points, sentence, "answers")
                 for pid, title in sheet_parts(cfg)]
        qresults.append(QuestionResult("answers", SHEET_TITLE, 0.0, sum(p.max_score for p in parts), parts))
    return Report(label, 0.0, sum(q.max_score for q in qresults), qresults, course=course_stamp(cfg),
                  no_submission=sentence)
