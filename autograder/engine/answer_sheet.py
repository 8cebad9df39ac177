"""The student-answers sheet, answers.toml: the final numbers of each handout
question, graded against the reference for the student's own variant
(`variants`). It is not a question of the `questions` package (it has no student
module and no calls): its sections become parts "<n>.answers" of a
pseudo-question "answers" in the report and in the otter zip.

    student_id = "s001"
    [q1]
    params = 219848638464
    ...

Which numbers a question asks for is read off its worked derivations: every
numeric answer of the handout, except the other overlap convention and the
batch per data shard in question 3, which the handout does not ask for, and
the solutions' realism notes (keys "note_..."). Only
with a course secret (`[course].secret`) is anything graded.

Whose variant: on Gradescope, the submitters named by its
submission_metadata.json (`gradescope_submitters`), so a submission cannot
choose whose variant it is graded against (a re-grade from Gradescope's
export, `shardlab grade --gradescope-export`, gives each submission's grader
such a file naming the export's submitters, and the same roster map, so the
same code decides); elsewhere, answers.toml's student_id. Gradescope documents only `email`, `id` and `name` per user
(https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/);
`[gradescope].student_id_field` picks the field. When `shardlab build
--roster` shipped ROSTER_FILE (email -> student_id, `publish.roster`), the
field is mapped through it; otherwise its value is the student id. Every
member of a group counts: answers.toml's student_id chooses among them.
"""
from __future__ import annotations

import csv
import json
import math
import numbers
import tomllib
from dataclasses import dataclass
from pathlib import Path

from shardlab.autograder.core.results import PartResult, QuestionResult
from shardlab.autograder.engine.variants import check_student_id, variant_config
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.questions import questions
from shardlab.autograder.sandbox.untrusted import one_line
from shardlab.reference.derivation import Worked

ANSWERS_FILE = "answers.toml"
RTOL = 1e-4          # numbers worked out by hand or copied with 5 significant digits
SHEET_TITLE = "Handout numbers for your variant"
ROSTER_FILE = "shardlab-roster.csv"   # in the autograder zip, beside the course config: a CSV
                                      # with header `<[gradescope].student_id_field>,student_id`


def _asked(key: str, cfg) -> bool:
    """Question 3 asks for B/N and B in the course's overlap convention only; no
    question asks for a realism note (a key "note_...": what a real run needs beside
    the graded answer, printed in the solutions only)."""
    conv = "overlap" if cfg.comm4d.overlap else "summed"
    if key.startswith(("overlap_", "summed_")):
        return key in (f"{conv}_per_chip", f"{conv}_batch")
    return key not in ("whole", "x_opt") and not key.startswith("note_")


def answer_sheet(cfg) -> dict[str, dict[str, Worked]]:
    """{"q<number>": {key: Worked}}: the numbers answers.toml carries for this config."""
    sheet = {}
    for q in questions(cfg):
        if not q.worked:
            continue
        items = {k: w for k, w in q.worked(cfg).items()
                 if isinstance(w.value, numbers.Real) and not isinstance(w.value, bool) and _asked(k, cfg)}
        if items:
            sheet[f"q{q.number}"] = items
    return sheet


def sheet_toml(cfg, student_id: str, values: bool = False) -> str:
    """The answers.toml a student fills in (values=True: filled with the reference's)."""
    lines = [f"student_id = {json.dumps(student_id)}",
             '# plain numbers in base units; an answer with no limit (unbounded) is written inf']
    for section, items in answer_sheet(cfg).items():
        lines += ["", f"[{section}]"]
        for key, w in items.items():
            lines.append(f"# {w.quantity}")
            lines.append(f"{key} = {_toml_number(w.value) if values else 0}")
    return "\n".join(lines) + "\n"


def _toml_number(x) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return repr(x)


MAX_ANSWERS_BYTES = 64 * 1024      # a filled sheet is a few hundred bytes


def read_answers(path: Path) -> dict:
    """The student's answers.toml as a dict. Whatever its bytes, the outcome is
    that dict or one ShardlabError sentence, never another exception: a parser
    that fails in any way (invalid TOML or UTF-8, a nesting deep enough to
    exhaust the recursion limit, a file too big) costs the answers parts only."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_ANSWERS_BYTES + 1)
        if len(raw) > MAX_ANSWERS_BYTES:
            raise ShardlabError(f"{ANSWERS_FILE} is larger than {MAX_ANSWERS_BYTES // 1024} KiB")
        data = tomllib.loads(raw.decode("utf-8"))
    except ShardlabError:
        raise
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ShardlabError(f"{ANSWERS_FILE} is not valid TOML: {one_line(str(exc), 200)}") from None
    except (RecursionError, MemoryError, ValueError, OSError) as exc:   # the parser's own limits
        raise ShardlabError(f"{ANSWERS_FILE} could not be read ({type(exc).__name__})") from None
    return data


@dataclass(frozen=True)
class Submitters:
    """Who handed a submission in, as Gradescope says: the student ids of its
    members (several for a group), or none and `problem`, the sentence that
    says why (shown in the answers parts; the code parts grade as usual)."""

    ids: tuple[str, ...]
    problem: str = ""


def read_roster_map(path: str | Path) -> dict[str, str]:
    """ROSTER_FILE: {Gradescope's value (first column), case-folded: student id}."""
    with Path(path).open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))[1:]
    return {key.strip().casefold(): sid.strip() for key, sid in rows}


def _metadata_users(metadata: str | Path | None) -> list[dict]:
    if metadata is None or not Path(metadata).is_file():
        return []
    try:
        users = json.loads(Path(metadata).read_text(encoding="utf-8")).get("users") or []
    except (ValueError, AttributeError, UnicodeDecodeError):
        return []
    return [u for u in users if isinstance(u, dict)] if isinstance(users, list) else []


def gradescope_submitters(metadata: str | Path | None, cfg,
                          roster_file: str | Path | None = None) -> Submitters | None:
    """The student ids of every user in Gradescope's submission_metadata.json,
    by `[gradescope].student_id_field`, through `roster_file` (ROSTER_FILE)
    when it exists; None when there is no such file or it names no user
    (`otter run` writes `{}`): answers.toml decides."""
    users = _metadata_users(metadata)
    if not users:
        return None
    field = cfg.gradescope.student_id_field
    try:
        roster = read_roster_map(roster_file) if roster_file is not None and Path(roster_file).is_file() else None
    except (OSError, ValueError, csv.Error) as exc:   # ValueError: a row without two columns
        return Submitters((), f"the course roster in the autograder zip is unreadable ({type(exc).__name__}); "
                              "ask your instructor")
    ids, unknown = [], []
    for user in users:
        value = user.get(field)
        if value is None or isinstance(value, (bool, dict, list)):
            continue
        value = str(value).strip()
        if roster is not None:
            sid = roster.get(value.casefold())
        else:
            try:
                sid = check_student_id(value, f"Gradescope's {field}")
            except ShardlabError:
                sid = None
        if sid:
            ids.append(sid)
        else:
            unknown.append(one_line(repr(value), 120))
    if ids:
        return Submitters(tuple(dict.fromkeys(ids)))
    if not unknown:
        problem = f"Gradescope's submission metadata names no {field} for this submission; ask your instructor"
    elif roster is not None:
        problem = (f"your Gradescope account ({field} {', '.join(unknown)}) is not in the course roster, so "
                   "there is no variant to check these numbers against; ask your instructor to add it and regrade")
    else:
        problem = f"Gradescope's {field} ({', '.join(unknown)}) cannot be a student id; ask your instructor"
    return Submitters((), problem)


def _grade_section(section: str, expected: dict[str, Worked], got, points: int) -> PartResult:
    wrong = []
    got = got if isinstance(got, dict) else {}
    for key, w in expected.items():
        value = got.get(key)
        if value is None:
            wrong.append(f"{key}: missing")
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            wrong.append(f"{key}: {one_line(repr(value), 80)} is not a number")
        elif not (value == w.value or math.isclose(value, w.value, rel_tol=RTOL)):
            wrong.append(f"{key}: {value!r} is not the value for your variant")
    right = len(expected) - len(wrong)
    feedback = (f"All {len(expected)} numbers match your variant." if not wrong else
                f"{right} of {len(expected)} numbers match your variant. " + " | ".join(wrong))
    return PartResult(_part_id(section), _part_title(section), points * right / len(expected), points,
                      feedback, "answers")


def grade_answers(root: Path, cfg, student_id: str | Submitters | None = None) -> QuestionResult | None:
    """The answers.toml question for a submission root; None without a course secret.
    `student_id`, the platform's (a Submitters, or one id), wins over the id
    in answers.toml, which only chooses among a group's members. The result's
    student_id is the id graded (None when none could be), so a batch can show
    the graders that student's numbers (`batch.write_written_answers`)."""
    if not cfg.course.secret:
        return None
    submitters = Submitters((student_id,)) if isinstance(student_id, str) else student_id
    path = root / ANSWERS_FILE
    note, why = "", None
    try:   # a bad answers.toml costs these parts, not the rest of the grade
        data = read_answers(path) if path.is_file() else {}
        named = data.get("student_id")
        if submitters is None:
            # a blank sheet (the kit's, student_id = "") has no id: said as such, not as a malformed one
            student_id = check_student_id(named, ANSWERS_FILE) if isinstance(named, str) and named.strip() else None
        elif not submitters.ids:
            student_id, why = None, submitters.problem
        elif named in submitters.ids:
            student_id = named
        else:
            student_id = submitters.ids[0]
            group = f", one of this group's {len(submitters.ids)} members" if len(submitters.ids) > 1 else ""
            if named is not None:
                note = f" (answers.toml names {one_line(repr(named), 80)}; graded as {student_id!r}{group})"
            elif group:
                note = f" (graded as {student_id!r}{group}: answers.toml's student_id chooses)"
    except ShardlabError as exc:
        data, student_id, why = {}, None, str(exc)
    assert not isinstance(student_id, Submitters)   # every path above chose one id, or None
    sheet = answer_sheet(variant_config(cfg, student_id)) if student_id else answer_sheet(cfg)
    parts = []
    for section, expected in sheet.items():
        if student_id is None:
            why = why or ("no answers.toml in the submission" if not path.is_file()
                          else "answers.toml has no student_id (the one that came with your own handout "
                               "has yours filled in)")
            parts.append(PartResult(_part_id(section), _part_title(section), 0.0, cfg.course.answer_points,
                                    f"Not graded: {why}.", "answers"))
        else:
            part = _grade_section(section, expected, data.get(section), cfg.course.answer_points)
            part.feedback += note
            parts.append(part)
    return QuestionResult("answers", SHEET_TITLE, sum(p.score for p in parts),
                          sum(p.max_score for p in parts), parts, student_id)


def sheet_parts(cfg) -> list[tuple[str, str]]:
    """(part id, title) of every graded section of the sheet for this config
    (one otter test case each, so Gradescope shows and counts them); empty
    without a course secret."""
    if not cfg.course.secret:
        return []
    return [(_part_id(section), _part_title(section)) for section in answer_sheet(cfg)]


def _part_id(section: str) -> str:
    return f"{section[1:]}.answers"


def _part_title(section: str) -> str:
    return f"question {section[1:]} numbers (answers.toml)"
