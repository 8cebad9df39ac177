"""`shardlab build --roster`: each student's own handout and blank
answers.toml, from their variant of the course config (engine/variants.py)."""
from __future__ import annotations

import csv
from pathlib import Path

from shardlab.autograder.engine.answer_sheet import sheet_toml
from shardlab.autograder.engine.variants import check_student_id, variant_config
from shardlab.autograder.errors import ShardlabError
from shardlab.autograder.publish.render import write_handout
from shardlab.reference.config import CourseConfig

ROSTER_COLUMNS = ("student_id", "name")


def read_roster(path: str | Path) -> list[tuple[str, str]]:
    """(student_id, name) rows of a roster CSV with columns student_id, name."""
    path = Path(path)
    if not path.is_file():
        raise ShardlabError(f"roster file not found: {path}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
            header = rows and list(rows[0]) or []
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ShardlabError(f"roster {path} is not a readable CSV: {exc}") from None
    if not rows or not set(ROSTER_COLUMNS) <= set(header):
        raise ShardlabError(f"roster {path} needs a header with columns {', '.join(ROSTER_COLUMNS)} "
                            "and at least one student")
    out, seen = [], set()
    for line, row in enumerate(rows, start=2):
        sid = check_student_id((row["student_id"] or "").strip(), f"roster {path} line {line}")
        if sid in seen:
            raise ShardlabError(f"roster {path} line {line}: student id {sid!r} appears twice")
        seen.add(sid)
        out.append((sid, (row["name"] or "").strip()))
    return out


def build_roster(cfg: CourseConfig, roster: str | Path, out: Path) -> list[Path]:
    """Each roster student's handout (md, html) and blank answers.toml under
    out/students/<student_id>/; needs a course secret."""
    if not cfg.secret:
        raise ShardlabError("--roster needs a course secret: set [course].secret in the config "
                            "(without it anyone could compute every variant)")
    written = []
    for sid, name in read_roster(roster):
        variant = variant_config(cfg, sid)
        folder = out / "students" / sid
        blank = sheet_toml(variant, sid)
        written += write_handout(variant, folder, student=dict(id=sid, name=name, answers=blank))
        (folder / "answers.toml").write_text(blank, encoding="utf-8")
        written.append(folder / "answers.toml")
    return written
