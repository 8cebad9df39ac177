"""`shardlab build --roster`: each student's own handout and blank
answers.toml, from their variant of the course config (`engine.variants`),
and what the autograder zip needs to know a Gradescope user's student id
(`roster_for_zip`). Beside them, never in a student's folder, every
student's answer key for the instructor and the graders: out/keys/<student_id>.md
(the worked derivations of their variant, as `shardlab answers --student`
prints them) and out/keys/keys.json (all students, as `key_record`)."""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import NamedTuple

import click

from shardlab.autograder.engine.answer_sheet import sheet_toml
from shardlab.autograder.engine.variants import check_student_id, variant_config
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.publish.render import write_handout
from shardlab.autograder.questions import answer_key, questions
from shardlab.reference.config import CourseConfig

ROSTER_COLUMNS = ("student_id", "name")       # required; `email` is optional
EMAIL_COLUMN = "email"
KEYS_FOLDER = "keys"          # out/keys/: the answer keys, for the instructor (never under out/students/)
KEYS_JSON = "keys.json"
_EMAIL = re.compile(r"[^@\s,\"]+@[^@\s,\"]+")


class Student(NamedTuple):
    student_id: str
    name: str
    email: str | None      # None when the roster has no email column


def read_roster(path: str | Path) -> list[Student]:
    """The students of a roster CSV with columns student_id, name and,
    optionally, email (each student's Gradescope email, unique)."""
    path = Path(path)
    if not path.is_file():
        raise ShardlabError(f"roster file not found: {path}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            lines = [(row, reader.line_num) for row in reader]     # the file's own line (blank lines count)
            rows = [row for row, _ in lines]
            header = list(rows[0]) if rows else []
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ShardlabError(f"roster {path} is not a readable CSV: {exc}") from None
    if not rows or not set(ROSTER_COLUMNS) <= set(header):
        raise ShardlabError(f"roster {path} needs a header with columns {', '.join(ROSTER_COLUMNS)} "
                            f"(and optionally {EMAIL_COLUMN}) and at least one student")
    out, seen, emails = [], set(), set()
    for row, line in lines:
        where = f"roster {path} line {line}"
        sid = check_student_id((row["student_id"] or "").strip(), where)
        if sid in seen:
            raise ShardlabError(f"{where}: student id {sid!r} appears twice")
        seen.add(sid)
        email = None
        if EMAIL_COLUMN in header:
            email = (row[EMAIL_COLUMN] or "").strip()
            if not _EMAIL.fullmatch(email):
                raise ShardlabError(f"{where}: {email!r} is not an email address (the {EMAIL_COLUMN} column "
                                    "maps each student's Gradescope account to their student id)")
            if email.casefold() in emails:
                raise ShardlabError(f"{where}: email {email!r} appears twice")
            emails.add(email.casefold())
        out.append(Student(sid, (row["name"] or "").strip(), email))
    return out


def roster_for_zip(cfg: CourseConfig, roster: str | Path | None) -> str | None:
    """The file the autograder zip must carry at its root
    (`answer_sheet.ROSTER_FILE`) for grading on Gradescope to find each
    submitter's student id, or None when no file is needed: no roster, or
    Gradescope's field ([gradescope].student_id_field) already is every
    roster student's id. Otherwise it maps that field (the roster's email, or
    a student id that is one) to the student id, and nothing else travels
    (no names). Students it cannot map (no email, or an id Gradescope cannot
    give) are left out, so on Gradescope their answers parts say they are not
    in the roster instead of grading someone else's numbers."""
    if roster is None:
        return None
    field = cfg.gradescope.student_id_field
    usable = (lambda key: key.isdigit()) if field == "id" else _EMAIL.fullmatch
    pairs = [((s.email if field == EMAIL_COLUMN and s.email is not None else s.student_id), s.student_id)
             for s in read_roster(roster)]
    mapped = [(key, sid) for key, sid in pairs if usable(key)]
    if len(mapped) == len(pairs) and all(key == sid for key, sid in mapped):
        return None
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow((field, "student_id"))
    writer.writerows(mapped)
    return buf.getvalue()


def build_roster(cfg: CourseConfig, roster: str | Path, out: Path) -> list[Path]:
    """Each roster student's handout (md, html) and blank answers.toml under
    out/students/<student_id>/, which it returns; needs a course secret.
    Every student's answer key goes to out/keys/ (`write_keys`), said in one line."""
    if not cfg.course.secret:
        raise ShardlabError("--roster needs a course secret: set [course].secret in the config "
                            "(without it anyone could compute every variant)")
    written, variants = [], []
    for student in read_roster(roster):
        sid = student.student_id
        variant = variant_config(cfg, sid)
        folder = out / "students" / sid
        blank = sheet_toml(variant, sid)
        written += write_handout(variant, folder, student=dict(id=sid, name=student.name, answers=blank))
        (folder / "answers.toml").write_text(blank, encoding="utf-8")
        written.append(folder / "answers.toml")
        variants.append((student, variant))
    for line in roster_warnings(variants):
        click.echo(f"warning: {line}", err=True)
    keys = write_keys(variants, out / KEYS_FOLDER)
    click.echo(f"wrote {len(keys) - 1} answer keys (<student_id>.md each, all of them in {KEYS_JSON}) under "
               f"{out / KEYS_FOLDER}: for the instructor and graders only, never hand them out")
    return written


def roster_warnings(variants: list[tuple[Student, CourseConfig]]) -> list[str]:
    """What an instructor should hear of a roster's variants: students who draw the same numbers on
    every answer (they could share them), and ids that differ only in case (their students/ folders
    collide on a file system that ignores case, as macOS's and Windows's do by default)."""
    out: list[str] = []
    by_numbers: dict[str, list[str]] = {}
    by_folded: dict[str, list[str]] = {}
    for student, variant in variants:
        numbers = strict_json({n: {k: w.value for k, w in ws.items()} for n, ws in answer_key(variant).items()})
        by_numbers.setdefault(numbers, []).append(student.student_id)
        by_folded.setdefault(student.student_id.casefold(), []).append(student.student_id)
    for ids in by_numbers.values():
        if len(ids) > 1:
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            out.append(f"{len(ids)} students draw the same numbers on every answer ({shown}): they could share "
                       "their answers; give [variants] more choices")
    for ids in by_folded.values():
        if len(ids) > 1:
            out.append(f"student ids {', '.join(map(repr, ids))} differ only in case: their folders under "
                       "students/ collide on a file system that ignores case (macOS, Windows); make them differ")
    return out


def key_questions(cfg: CourseConfig) -> dict[str, dict[str, dict]]:
    """{question number: {key: the Worked's fields}}: `questions.answer_key` as plain data."""
    return {n: {k: vars(w) for k, w in worked.items()} for n, worked in answer_key(cfg).items()}


def key_title(variant: CourseConfig, student_id: str) -> str:
    return f"Answer key for the variant of student {student_id} (model {variant.model.name})"


def key_record(variant: CourseConfig, student_id: str, name: str | None = None) -> dict:
    """One student's answer key as plain data (`shardlab answers --student ID --json`, and
    each entry of keys.json): student_id, name (when known), model, questions (`key_questions`)."""
    return {"student_id": student_id, **({"name": name} if name else {}), "model": variant.model.name,
            "questions": key_questions(variant)}


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def key_markdown(variant: CourseConfig, student_id: str, name: str | None = None) -> str:
    """One student's answer key in Markdown: per question, each worked derivation
    (quantity, formula, substituted, answer), as `shardlab answers` tabulates them."""
    m = variant.model
    lines = [f"# {key_title(variant, student_id)}", ""]
    if name:
        lines += [f"Student: {_cell(name)} (`{student_id}`).", ""]
    lines += [f"Model {m.name}: d_model = {m.d_model:,}, d_ff = {m.d_ff:,}, {m.num_blocks:,} blocks. "
              "For the instructor and the graders: never hand this file to a student.", ""]
    key = answer_key(variant)
    for q in questions(variant):
        if str(q.number) not in key:
            continue
        lines += [f"## Question {q.number} — {q.title}", "",
                  "| quantity | formula | substituted | answer |", "|---|---|---|---|"]
        lines += [f"| {_cell(w.quantity)} | {_cell(w.formula)} | {_cell(w.substituted)} | {_cell(w.shown)} |"
                  for w in key[str(q.number)].values()]
        lines.append("")
    return "\n".join(lines)


def _finite(value):
    """`value` with every float that is not finite spelled as answers.toml spells it ("inf", "-inf",
    "nan"), as a string: strict JSON has no Infinity or NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def strict_json(value, **kwargs) -> str:
    """JSON any strict parser reads: no Infinity or NaN (`_finite`); anything else not JSON as str."""
    return json.dumps(_finite(value), allow_nan=False, default=str, **kwargs)


def write_keys(variants: list[tuple[Student, CourseConfig]], folder: Path) -> list[Path]:
    """folder/<student_id>.md per student (`key_markdown`) and folder/keys.json,
    {student_id: `key_record`} for all of them; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written, records = [], {}
    for student, variant in variants:
        sid = student.student_id
        path = folder / f"{sid}.md"
        path.write_text(key_markdown(variant, sid, student.name), encoding="utf-8")
        written.append(path)
        records[sid] = key_record(variant, sid, student.name)
    (folder / KEYS_JSON).write_text(strict_json(records, indent=1) + "\n", encoding="utf-8")
    return written + [folder / KEYS_JSON]
