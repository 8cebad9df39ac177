"""The student-answers sheet, answers.toml: the final numbers of each handout
question, graded against the reference for the student's own variant
(engine/variants.py). It is not a question of questions/ (it has no student
module and no calls): its sections become parts "<n>.answers" of a
pseudo-question "answers" in the report and in the otter zip.

    student_id = "s001"
    [q1]
    params = 219848638464
    ...

Which numbers a question asks for is read off its worked derivations: every
numeric answer of the handout, except the other overlap convention and the
batch per data shard in question 3, which the handout does not ask for. The
student id comes from Gradescope's submission metadata when there is one
(a submission cannot choose whose variant it is graded against), else from
answers.toml. Only with a course secret (`[course].secret`) is anything graded.
"""
from __future__ import annotations

import json
import math
import numbers
import tomllib
from pathlib import Path

from shardlab.autograder.engine.results import PartResult, QuestionResult
from shardlab.autograder.engine.variants import check_student_id, variant_config
from shardlab.autograder.errors import ShardlabError
from shardlab.autograder.questions import questions
from shardlab.autograder.sandbox.untrusted import one_line
from shardlab.reference.derivation import Worked

ANSWERS_FILE = "answers.toml"
RTOL = 1e-4          # numbers worked out by hand or copied with 5 significant digits
SHEET_TITLE = "Handout numbers for your variant"


def _asked(key: str, cfg) -> bool:
    """Question 3 asks for B/N and B in the course's overlap convention only."""
    conv = "overlap" if cfg.mesh.overlap else "summed"
    if key.startswith(("overlap_", "summed_")):
        return key in (f"{conv}_per_chip", f"{conv}_batch")
    return key not in ("whole", "x_opt")


def answer_sheet(cfg) -> dict[str, dict[str, Worked]]:
    """{"q<number>": {key: Worked}}: the numbers answers.toml carries for this config."""
    sheet = {}
    for q in questions():
        if not q.worked:
            continue
        items = {k: w for k, w in q.worked(cfg).items()
                 if isinstance(w.value, numbers.Real) and not isinstance(w.value, bool) and _asked(k, cfg)}
        if items:
            sheet[f"q{q.number}"] = items
    return sheet


def sheet_toml(cfg, student_id: str, values: bool = False) -> str:
    """The answers.toml a student fills in (values=True: filled with the reference's)."""
    lines = [f"student_id = {json.dumps(student_id)}"]
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


def read_answers(path: Path) -> dict:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ShardlabError(f"{ANSWERS_FILE} is not valid TOML: {exc}") from None
    return data


def gradescope_student_id(metadata: str | Path | None) -> str | None:
    """The submitter's student id ('sid', else email) from Gradescope's
    submission_metadata.json; None when there is no such file."""
    if metadata is None or not Path(metadata).is_file():
        return None
    try:
        users = json.loads(Path(metadata).read_text(encoding="utf-8")).get("users") or []
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None
    user = users[0] if users and isinstance(users[0], dict) else {}
    return str(user.get("sid") or user.get("email") or "") or None


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


def grade_answers(root: Path, cfg, student_id: str | None = None) -> QuestionResult | None:
    """The answers.toml question for a submission root; None without a course secret.
    `student_id` (Gradescope's) wins over the id in answers.toml."""
    if not cfg.secret:
        return None
    path = root / ANSWERS_FILE
    note, why = "", None
    try:   # a bad answers.toml costs these parts, not the rest of the grade
        data = read_answers(path) if path.is_file() else {}
        if student_id is None:
            sid = data.get("student_id")
            student_id = check_student_id(sid, ANSWERS_FILE) if isinstance(sid, str) else None
        elif data.get("student_id") not in (None, student_id):
            note = f" (answers.toml names {one_line(repr(data['student_id']), 80)}; graded as {student_id!r})"
    except ShardlabError as exc:
        data, student_id, why = {}, None, str(exc)
    sheet = answer_sheet(variant_config(cfg, student_id)) if student_id else answer_sheet(cfg)
    parts = []
    for section, expected in sheet.items():
        if student_id is None:
            why = why or ("no answers.toml in the submission" if not path.is_file()
                          else "answers.toml has no student_id")
            parts.append(PartResult(_part_id(section), _part_title(section), 0.0, cfg.answer_points,
                                    f"Not graded: {why}.", "answers"))
        else:
            part = _grade_section(section, expected, data.get(section), cfg.answer_points)
            part.feedback += note
            parts.append(part)
    return QuestionResult("answers", SHEET_TITLE, sum(p.score for p in parts),
                          sum(p.max_score for p in parts), parts)


def sheet_parts(cfg) -> list[tuple[str, str]]:
    """(part id, title) of every graded section of the sheet for this config
    (one otter test case each, so Gradescope shows and counts them); empty
    without a course secret."""
    if not cfg.secret:
        return []
    return [(_part_id(section), _part_title(section)) for section in answer_sheet(cfg)]


def _part_id(section: str) -> str:
    return f"{section[1:]}.answers"


def _part_title(section: str) -> str:
    return f"question {section[1:]} numbers (answers.toml)"
